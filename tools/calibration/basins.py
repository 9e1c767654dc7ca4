"""Chapter 4's general claims on known-answer chains at the quick profile's sizes (make calibrate).

The chains are Potts chains on the chapter's nine labels, one colour a label, n = seq_len sites, and a state's
topic scores are a softmax of its colour shares (`colour_scores`): a text "about" a label is one full of its
colour, and basin-free text (chance_tokens: uniform colours) has no favoured label. Seeds of a topic carry its
label's colour at 70% of their sites. What each chain does is known by construction: a field on the politics
colour is a politics basin (every claim about politics holds, and every seed topic but politics is lost); no field
makes every label alike (the claims about politics fail: the null is exact); a field against politics keeps it
below chance (they fail the other way). seed_topic_loss (the seed label's score falls from the start) holds where a
chain leaves its seed: a field on food, no seed topic's label, draws every chain off it, and with no field a seed's
colour dissolves into uniform colours (word salad); it fails where the start is already the chain's law (uniform
colours under no field: the seed label's score has one law at the start and the end, a mean fall of 0 exactly) and
where a strong ferromagnetic coupling keeps each chain's majority colour, its seed's (the score rises).
From there on the chapter's own statistics and rules run at the quick profile's chains, steps and scoring interval.

germline_reversion (a protein model's basin, one claim a temperature: germline_reversion_tau05, _tau10, _tau20) runs
on independent-site Potts chains of the protein quick profile's size (90 sites, its germlines, substitution counts,
temperatures and steps): a random germline colouring of q colours with a field h on each site's germline colour,
framework sites from real human V genes' IMGT regions. A site the chain has updated was redrawn from its field alone,
so a visited mutated site is back with probability p_g and a visited unmutated one has left with probability 1 - p_g,
p_g = e^(h/tau) / (e^(h/tau) + q - 1), and a chain's difference has mean 2 p_g - 1 against the no-pull 2/q - 1: the
claim holds at a temperature where p_g > 1/q (h > 0, a pull toward the germline, at every temperature), and fails at
p_g = 1/q (no field: the null exactly) and below it (h < 0).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import torch

import glauber_core as glauber
from chapters import basins as ch

from . import cases, quick_sizes

LABELS = list(ch.TOPIC_LABELS)
SCALE = 8.0  # a text of one colour scores its label 0.997; uniform colours score each label about 1/9
SEED_SHARE = 0.7  # a seed's sites in its topic's colour
# The sizes each claim's power curve scales: the chains per seed topic (or germlines) and the basin-free texts the
# nulls are read on; never the steps or temperatures.
TOPIC_SIZES = ("n_seeds", "chance_texts")
SIZES = {
    **dict.fromkeys(
        ("politics_recurrence", "politics_rises_every_topic", "politics_ends_above_basin_free", "seed_topic_loss"),
        TOPIC_SIZES,
    ),
    **dict.fromkeys(ch.REVERSION_CLAIMS.values(), ("n_seeds",)),
}


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


def seed_states(n_seeds: int, n: int, seed: int, share: float = SEED_SHARE) -> tuple[torch.Tensor, list[str]]:
    """n_seeds seeds per BBC topic: each site in the topic's label colour with probability `share`, else a
    uniform colour (share 0: uniform colours, the no-field chain's stationary law)."""
    generator = torch.Generator().manual_seed(seed)
    topics = [topic for topic in ch.BBC_TOPIC_LABELS for _ in range(n_seeds)]
    own = torch.tensor([LABELS.index(ch.BBC_TOPIC_LABELS[t]) for t in topics])
    uniform = torch.randint(len(LABELS), (len(topics), n), generator=generator)
    keep = torch.rand(len(topics), n, generator=generator) < share
    return torch.where(keep, own[:, None], uniform), topics


@functools.cache
def chapter_verdicts(
    kind: str, strength: float, seed: int, scale: int = 1, share: float = SEED_SHARE
) -> dict[str, str]:
    """The chapter's pipeline at the quick profile's sizes on one known chain: chains per seed topic, steps,
    scoring interval and chance texts of ch.settings("quick"), the topic frame, and each general claim's verdict
    through the chapter's own estimators and rules (chains per topic and chance texts `scale` times the quick ones;
    seeds with `share` of their sites in their topic's colour, seed_states)."""
    cfg = quick_sizes(ch, TOPIC_SIZES, scale)
    n, every = cfg.seq_len, cfg.pca_every * cfg.score_every
    cond = potts_model(kind, n, strength)
    x0, topics = seed_states(cfg.n_seeds, n, seed, share)
    run = glauber.glauber(cond, x0, cfg.steps, cfg.temperature, seed=seed, record_every=every, progress=False)
    scores = colour_scores(run.tokens).float()
    frame = ch.topic_frame(scores, run.steps, LABELS, seed_topic=topics)
    chance = colour_scores(ch.chance_tokens(cond, cfg.chance_texts, n, seed=seed + 11)).float()
    chance_target = chance[:, LABELS.index("politics")].numpy()
    crossings = ch.crossing_frame(frame, LABELS, cfg.baseline)
    means = ch.chain_means(frame, LABELS)
    own = [LABELS.index(ch.BBC_TOPIC_LABELS[t]) for t in topics]
    at = np.arange(len(own))
    loss = ch.seed_loss_frame(topics, scores[at, 0, own].numpy(), scores[at, -1, own].numpy(), chance[:, own].numpy())
    return {
        "politics_recurrence": ch.recurrence_verdict(crossings, chance_target, cfg.baseline)["verdict"],
        "politics_rises_every_topic": ch.rises_verdict(ch.rise_frame(means))[0],
        "politics_ends_above_basin_free": ch.ends_verdict(ch.look_ranks(frame, chance_target, LABELS))["verdict"],
        "seed_topic_loss": ch.seed_loss_topics_verdict(loss)[0],
    }


def _case(claim: str, kind: str, truth: str, strength: float = 1.0, share: float = SEED_SHARE):
    """One case: `claim` on the chain `kind` (potts_model) at `strength` from seeds of `share` (seed_states), whose
    answer is `truth`."""
    name = kind if kind in ("no well", "sticky") else f"{kind}, field {strength:g}"
    if share != SEED_SHARE:
        name += ", stationary starts" if share == 0 else f", seeds {share:.0%} their colour"
    return (
        claim, name, truth, "04_basins",
        lambda seed, scale=1: chapter_verdicts(kind, strength, seed, scale, share)[claim],
    )  # fmt: skip


def reversion_model(colours: int, field: float, germline: torch.Tensor, weak: float | None = None):
    """Independent sites (no coupling) with `colours` colours and a field `field` on each site's germline colour
    (negative: on the other colours, the mutant's side); with `weak`, every fifth site's field is `weak` instead
    (sites the germline barely holds, as a model holds some framework positions loosely)."""
    strength = torch.full((len(germline),), float(field))
    if weak is not None:
        strength[4::5] = weak
    fields = torch.zeros(len(germline), colours)
    fields[torch.arange(len(germline)), germline] = strength
    return glauber.PottsConditionals(torch.zeros(len(germline), len(germline)), fields, colours)


@functools.cache
def reversion_verdicts(
    colours: int, field: float, seed: int, weak: float | None = None, scale: int = 1
) -> dict[str, str]:
    """germline_reversion through the chapter's own functions at the protein quick profile's sizes: a random
    germline colouring shared by the profile's germlines (each with the framework sites of a human V gene drawn
    at random), framework substitutions, one Glauber run per temperature, reversion_frame and reversion_verdict.
    Returns each temperature's claim id (ch.REVERSION_CLAIMS) -> its verdict; `scale` times the quick germlines."""
    cfg = quick_sizes(ch, ("n_seeds",), scale, SimpleNamespace(protein=True))
    generator = torch.Generator().manual_seed(seed)
    germline = torch.randint(colours, (cfg.seq_len,), generator=generator)
    cond = reversion_model(colours, field, germline, weak)
    genes = [a for a, *_ in glauber.germline_v_genes()]
    alleles = [genes[k] for k in np.random.default_rng(seed).choice(len(genes), cfg.n_seeds, replace=False)]
    framework = ch.framework_sites(alleles, cfg.seq_len)
    starts = ch.mutate_framework(
        cond, germline.repeat(cfg.n_seeds, 1), framework, cfg.substitutions, genes=alleles, seed=seed
    )
    runs = {
        tau: glauber.glauber(
            cond, starts.tokens, cfg.steps, tau, seed=seed, record_every=cfg.record_every, progress=False
        )
        for tau in cfg.temperatures
    }
    judged = ch.reversion_verdict(ch.reversion_frame(starts, runs))
    return {ch.REVERSION_CLAIMS[p["temperature"]]: p["verdict"] for p in judged["parts"]}


def _reversion_case(claim: str, name: str, colours: int, field: float, truth: str, weak: float | None = None):
    """One case of a temperature's claim: its verdict in reversion_verdicts on reversion_model(colours, field,
    weak)."""
    return (
        claim, name, truth, "04_basins",
        lambda seed, scale=1: reversion_verdicts(colours, field, seed, weak, scale)[claim],
    )  # fmt: skip


# germline_reversion, at every temperature: no pull (no field: p_g = 1/q, the null exactly, with two colours and with
# twenty as the protein's residues) and a field on the mutant's side fail; a weak pull (twenty colours, field 1/2: p_g
# 0.13, 0.08, 0.06 at tau = 0.5, 1, 2 against 1/20, rarely decided, must not say differs) and strong ones hold (two
# colours, fields 1 and 2; twenty colours, field 3: p_g 0.95, 0.51, 0.19, near AntiBERTy's shares; field 10 on four
# sites in five and 1 on the fifth, so that tau = 0.5 keeps a spread where a uniformly deep well would put every chain
# at one value, a zero-width interval)
REVERSION_CHAINS = (
    ("two colours, no field", 2, 0.0, "fails", None),
    ("twenty colours, no field", 20, 0.0, "fails", None),
    ("two colours, mutant field 1", 2, -1.0, "fails", None),
    ("twenty colours, germline field 0.5 (weak pull)", 20, 0.5, "holds", None),
    ("two colours, germline field 1", 2, 1.0, "holds", None),
    ("two colours, germline field 2", 2, 2.0, "holds", None),
    ("twenty colours, germline field 3", 20, 3.0, "holds", None),
    ("twenty colours, germline field 10, 1 at every fifth site", 20, 10.0, "holds", 1.0),
)


# The politics claims hold in a politics well (a shallow and a deep one: the power at each depth), fail where no
# label is favoured (the null, exactly) and where politics is repelled. seed_topic_loss, the seed label's score
# falling from the start: seeds of 70% their colour fall in a food well (three depths; the chains move to food) and
# with no field (they dissolve into word salad, the seed label's score falling to its chance level); seeds of 15%
# their colour, with no field, fall by less (a weak fall that the quick size decides in some topics and not in
# others, as it does on the bundled model: the power there); from stationary starts (uniform colours, no field)
# the score has one law at the start and at the end, a mean fall of 0 exactly (the null); a sticky chain keeps and
# strengthens its seed's colour (the score rises).
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
        _case("seed_topic_loss", "no well", "holds"),
        _case("seed_topic_loss", "no well", "holds", share=0.15),
        _case("seed_topic_loss", "no well", "fails", share=0.0),
        _case("seed_topic_loss", "sticky", "fails"),
        *(_reversion_case(claim, *case) for claim in ch.REVERSION_CLAIMS.values() for case in REVERSION_CHAINS),
    ],
    SIZES,
)
