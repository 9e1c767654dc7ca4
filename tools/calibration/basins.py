"""Chapter 4's general claims on known-answer chains at the quick profile's sizes (make calibrate).

The chains are Potts chains on the chapter's nine labels, one colour a label, n = seq_len sites, and a state's
topic scores are a softmax of its colour shares (`colour_scores`): a text "about" a label is one full of its
colour, and basin-free text (chance_tokens: uniform colours) has no favoured label. Seeds of a topic carry its
label's colour at 70% of their sites. What each chain does is known by construction: a field on the politics
colour is a politics basin (every claim about politics holds, and every seed topic but politics is lost); no field
makes every label alike (the claims about politics fail: the null is exact); a field against politics keeps it
below chance (they fail the other way); a field on food, no seed topic's label, draws every chain off its seed
(seed_topic_loss holds); a strong ferromagnetic coupling keeps each chain's majority colour, its seed's (it fails).
From there on the chapter's own statistics and rules run at the quick profile's chains, steps and scoring interval.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

import glauber_core as glauber
from chapters import basins as ch

from . import cases

LABELS = list(ch.TOPIC_LABELS)
SCALE = 8.0  # a text of one colour scores its label 0.997; uniform colours score each label about 1/9
SEED_SHARE = 0.7  # a seed's sites in its topic's colour


def colour_scores(tokens: torch.Tensor) -> torch.Tensor:
    """The known topic scorer: label k's score is the softmax over labels of SCALE x the share of sites of colour
    k. tokens [..., n] -> scores [..., L]."""
    shares = torch.nn.functional.one_hot(tokens, len(LABELS)).double().mean(-2)
    return torch.softmax(SCALE * shares, -1)


def potts_model(kind: str, n: int, strength: float = 1.0) -> glauber.PottsConditionals:
    """The chain of each case: independent sites with a field of `strength` on one colour ("politics well",
    "food well"), against it ("politics repelled") or none ("no well"); or "sticky", a Curie-Weiss coupling
    8 / n between sites of one colour, which holds a chain at its majority colour."""
    field, coupling = torch.zeros(n, len(LABELS)), torch.zeros(n, n)
    if kind in ("politics well", "food well"):
        field[:, LABELS.index(kind.split()[0])] = strength
    elif kind == "politics repelled":
        field[:, LABELS.index("politics")] = -strength
    elif kind == "sticky":
        coupling = torch.full((n, n), 8.0 / n)
    elif kind != "no well":
        raise ValueError(f"unknown chain {kind!r}")
    return glauber.PottsConditionals(coupling, field, len(LABELS))


def seed_states(n_seeds: int, n: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """n_seeds seeds per BBC topic: each site in the topic's label colour with probability SEED_SHARE, else a
    uniform colour."""
    generator = torch.Generator().manual_seed(seed)
    topics = [topic for topic in ch.BBC_TOPIC_LABELS for _ in range(n_seeds)]
    own = torch.tensor([LABELS.index(ch.BBC_TOPIC_LABELS[t]) for t in topics])
    uniform = torch.randint(len(LABELS), (len(topics), n), generator=generator)
    keep = torch.rand(len(topics), n, generator=generator) < SEED_SHARE
    return torch.where(keep, own[:, None], uniform), topics


@functools.cache
def chapter_verdicts(kind: str, strength: float, seed: int) -> dict[str, str]:
    """The chapter's pipeline at the quick profile's sizes on one known chain: chains per seed topic, steps,
    scoring interval and chance texts of ch.settings("quick"), the topic frame, and each general claim's verdict
    through the chapter's own estimators and rules."""
    cfg = ch.settings("quick")
    n, every = cfg.seq_len, cfg.pca_every * cfg.score_every
    cond = potts_model(kind, n, strength)
    x0, topics = seed_states(cfg.n_seeds, n, seed)
    run = glauber.glauber(cond, x0, cfg.steps, cfg.temperature, seed=seed, record_every=every, progress=False)
    scores = colour_scores(run.tokens).float()
    frame = ch.topic_frame(scores, run.steps, LABELS, seed_topic=topics)
    chance = colour_scores(ch.chance_tokens(cond, cfg.chance_texts, n, seed=seed + 11)).float()
    chance_target = chance[:, LABELS.index("politics")].numpy()
    crossings = ch.crossing_frame(frame, LABELS, cfg.baseline)
    ends = ch.chain_ends(frame, LABELS)
    own = [LABELS.index(ch.BBC_TOPIC_LABELS[t]) for t in topics]
    at = np.arange(len(own))
    loss = ch.seed_loss_frame(topics, scores[at, 0, own].numpy(), scores[at, -1, own].numpy(), chance[:, own].numpy())
    return {
        "politics_recurrence": ch.recurrence_verdict(crossings, chance_target, cfg.baseline)["verdict"],
        "politics_rises_every_topic": ch.rises_verdict(ch.rise_frame(ends))[0],
        "politics_ends_above_basin_free": ch.ends_verdict(ends, chance_target)["verdict"],
        "seed_topic_loss": ch.seed_loss_topics_verdict(loss)[0],
    }


def _case(claim: str, kind: str, truth: str, strength: float = 1.0):
    """One case: `claim` on the chain `kind` (potts_model) at `strength`, whose answer is `truth`."""
    name = kind if kind in ("no well", "sticky") else f"{kind}, field {strength:g}"
    return (claim, name, truth, "04_basins", lambda seed: chapter_verdicts(kind, strength, seed)[claim])


# The politics claims hold in a politics well (a shallow and a deep one: the power at each depth), fail where no
# label is favoured (the null, exactly) and where politics is repelled; the seed topics are lost in a food well
# (three depths), kept by a sticky chain, and neither in basin-free text (the null).
POLITICS_CLAIMS = ("politics_recurrence", "politics_rises_every_topic", "politics_ends_above_basin_free")
CASES = cases(
    __file__,
    [
        *(
            row
            for claim in POLITICS_CLAIMS
            for row in (
                _case(claim, "politics well", "holds", 1.0),
                _case(claim, "politics well", "holds", 2.0),
                _case(claim, "no well", "fails"),
                _case(claim, "politics repelled", "fails", 1.0),
            )
        ),
        _case("seed_topic_loss", "food well", "holds", 1.0),
        _case("seed_topic_loss", "food well", "holds", 2.0),
        _case("seed_topic_loss", "food well", "holds", 3.0),
        _case("seed_topic_loss", "no well", "fails"),
        _case("seed_topic_loss", "sticky", "fails"),
    ],
)
