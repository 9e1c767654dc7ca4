"""Chapter 4's protocol and estimators (section 6.2.1, Tables 3 and 5, appendix C.4): the settings per profile,
the chains' seeds, the setup its claims rows record, the chance level (basin-free text), the topic frames and the
per-chain statistics and intervals the verdicts are judged on."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from glauber_core import (
    MaskedLMConditionals,
    Passages,
    Trajectory,
    check_count,
    check_temperature,
    check_tokens,
    embed,
    is_protein,
    seed_passages,
)
from verdicts import mean_interval, rank_shares, share_intervals

from .scorer import BBC_TOPIC_LABELS, TOPIC_LABELS, scores_or_uniform, topic_descriptions

# --------------------------------------------------------------------------------------------
# The notebook's settings, its chains' seeds and the setup its claims rows record
# --------------------------------------------------------------------------------------------


# Per profile; paper follows section 6.2.1 (5 topics x 10 seeds, 10,000 steps, scores every 200, n = 20)
SETTINGS = {
    "smoke": dict(
        seq_len=20,
        n_seeds=2,
        steps=30,
        record_every=10,
        pca_every=5,
        n_check=5,
        chance_texts=20,
        prefix_chains=1,
        prefix_steps=10,
        passages="bbc",
    ),
    "quick": dict(
        seq_len=20,
        n_seeds=6,
        steps=1200,
        record_every=50,
        pca_every=10,
        n_check=60,
        chance_texts=300,
        prefix_chains=4,
        prefix_steps=250,
        passages="bbc",
    ),
    "paper": dict(
        seq_len=20,
        n_seeds=10,
        steps=10_000,
        record_every=200,
        pca_every=10,
        n_check=200,
        chance_texts=1000,
        prefix_chains=10,
        prefix_steps=3_500,
        passages="ms_marco",
    ),
}


# A protein MLM (AntiBERTy): the germline-reversion chains (reversion.py), on whole genes from FR1 (seq_len = 90
# residues, every site free; all 417 human V genes have at least 91). n_seeds germlines, each with k framework
# substitutions for each k of `substitutions` (k = 0: the germline itself), run at each of `temperatures` for
# `steps` steps. quick: 4 x 4 chains x 3 temperatures x 270 steps (3 n: a site is left unvisited with
# probability e^-3), about 13,000 chain-steps, some 7 minutes on 2 CPUs (AntiBERTy: ~32 chain-steps/s at 96).
# The temperatures were fixed before any AntiBERTy run: one below, at and above the paper's tau = 1 (a probe at these
# sizes later showed the chains leaving the germline at tau = 2; the grid was kept: each temperature is its own
# germline_reversion row, judged against the no-pull value, and tau = 2's shows the chains leaving).
# pll_records: the records of each chain whose pseudo-log-likelihood is scored (its start, its end and evenly
# between): 90 single-site forwards a state, about 3 s of AntiBERTy on 2 CPUs (~32 forwards/s at 90 residues), so
# quick scores each chain's start and end only: 16 distinct starts and 48 ends, some 5,800 forwards, about 3 minutes.
# antibody_pll_records: the same for the chains of a user's antibody (`sequence`), one a temperature.
PROTEIN_SETTINGS = {
    "smoke": dict(
        seq_len=90,
        n_seeds=2,
        steps=30,
        record_every=10,
        substitutions=[0, 2, 4],
        temperatures=[0.5, 1.0],
        pll_records=2,
        antibody_pll_records=2,
    ),
    "quick": dict(
        seq_len=90,
        n_seeds=4,
        steps=270,
        record_every=30,
        substitutions=[0, 2, 4, 8],
        temperatures=[0.5, 1.0, 2.0],
        pll_records=2,
        antibody_pll_records=4,
    ),
    "paper": dict(
        seq_len=90,
        n_seeds=10,
        steps=900,
        record_every=90,
        substitutions=[0, 2, 4, 8],
        temperatures=[0.5, 1.0, 2.0],
        pll_records=6,
        antibody_pll_records=10,
    ),
}


# MS MARCO passages carry no topic. The paper's five seed topics are not named beyond food, and every
# one of them gains politics, so none is politics: we take five non-politics labels, and each MS MARCO
# passage's topic is the label the scorer puts first on it (leading_label_seeds).
MS_MARCO_TOPICS = ("health", "food", "sport", "technology", "finance")


# MS MARCO passages scored per chain wanted, to find enough passages led by each topic
MS_MARCO_POOL = 40


def settings(profile: str, cond=None, **overrides) -> SimpleNamespace:
    """The chapter's settings (section 6.2.1): the profile's row of SETTINGS, overridden where an override is set
    (bt.profile_settings; `passages` "" is the profile's). Derived: `protein` (False), `temperature` (1 unless
    given), `scorer` (topic_scores' model: None for the embedding stand-in, or an NLI model's name), `labels`, the
    `target` label (politics), `seed_labels` (seed topic -> its label), `baseline` 1/L and `score_every` (records
    between scored states). When `cond` is a protein model: the row of PROTEIN_SETTINGS (its seeds are always
    germline V genes; `temperatures` is the reversion chains' grid, an override a text model ignores) with
    `protein` True, the text-only overrides (temperature, scorer, passages) ignored."""
    temperature = check_temperature(overrides.pop("temperature", 1.0))
    scorer = overrides.pop("scorer", "")
    temperatures = overrides.pop("temperatures", None)
    if is_protein(cond):
        overrides.pop("passages", None)
        cfg = bt.profile_settings(profile, PROTEIN_SETTINGS, temperatures=temperatures, **overrides)
        cfg.temperatures = [check_temperature(t) for t in cfg.temperatures]
        return SimpleNamespace(**vars(cfg), protein=True, passages="germline")
    cfg = bt.profile_settings(profile, SETTINGS, **overrides)
    if cfg.passages not in ("bbc", "ms_marco"):
        raise ValueError(f"passages must be one of ('bbc', 'ms_marco') for this model, got {cfg.passages!r}")
    labels = list(TOPIC_LABELS)
    return SimpleNamespace(
        **vars(cfg),
        protein=False,
        temperature=temperature,
        scorer=scorer or None,
        labels=labels,
        target="politics",
        seed_labels=seed_labels_for(cfg.passages),
        baseline=1 / len(labels),
        score_every=max(1, round(cfg.record_every / cfg.pca_every)),
    )


def seed_labels_for(passages: str) -> dict:
    """Seed topic -> the label that stands for it: BBC's five sections or MS_MARCO_TOPICS (labels themselves)."""
    if passages == "bbc":
        return dict(BBC_TOPIC_LABELS)
    if passages == "ms_marco":
        return {t: t for t in MS_MARCO_TOPICS}
    raise ValueError(f"passages must be one of {sorted(bt.PASSAGE_NAMES)}, got {passages!r}")


def leading_label_seeds(
    cond: MaskedLMConditionals, n: int, count: int, labels, topics, *, seed: int = 0, pool: int | None = None, **scorer
) -> list[Passages]:
    """Per topic (a label), `count` MS MARCO seeds of n tokens whose leading label under the scorer
    (topic_scores) is that topic, from a pool of `pool` distinct passages (default MS_MARCO_POOL per
    chain), in pool order. Raises ValueError when the pool has too few for a topic."""
    names = list(topic_descriptions(labels))
    unknown = [t for t in topics if t not in names]
    if unknown:
        raise ValueError(f"topics {unknown} are not among the labels {names}")
    drawn = seed_passages(cond, n, pool or MS_MARCO_POOL * count * len(topics), seed=seed, passages="ms_marco")
    leader = np.asarray(names)[scores_or_uniform(drawn.texts, names, **scorer).argmax(1).numpy()]
    seeds = []
    for topic in topics:
        picks = np.flatnonzero(leader == topic)[:count]
        if len(picks) < count:
            raise ValueError(
                f"only {len(picks)} of {len(leader)} MS MARCO passages are led by {topic!r}; "
                f"asked for {count} (raise pool)"
            )
        seeds.append(
            Passages(
                drawn.tokens[picks],
                [drawn.texts[k] for k in picks],
                [topic] * count,
                [drawn.article_ids[k] for k in picks],
            )
        )
    return seeds


def topic_seed_passages(cond: MaskedLMConditionals, cfg: SimpleNamespace, *, seed: int = 0) -> list[Passages]:
    """The chains' seeds (settings' cfg), one Passages of cfg.n_seeds per seed topic of cfg.seed_labels."""
    topics = list(cfg.seed_labels)
    if cfg.passages == "ms_marco":
        return leading_label_seeds(cond, cfg.seq_len, cfg.n_seeds, cfg.labels, topics, seed=seed, model=cfg.scorer)
    return [seed_passages(cond, cfg.seq_len, cfg.n_seeds, seed=seed, topic=t) for t in topics]


def run_setup(cfg: SimpleNamespace, seed_topic) -> dict:
    """The protocol items of a run, keyed as paper_claims.csv's protocol: `chains` counts the chains the
    statistics cover, those seeded outside the target's topic (the paper's 50 are 5 topics x 10 seeds,
    none of them politics: every topic gains politics); `scorer` names the scorer ("MiniLM embedding
    zero-shot" for the stand-in); `labels` their number."""
    chains = sum(cfg.seed_labels[t] != cfg.target for t in seed_topic)
    scorer = Path(cfg.scorer).name if cfg.scorer else "MiniLM embedding zero-shot"
    return {
        "n": cfg.seq_len,
        "chains": int(chains),
        "steps": cfg.steps,
        "tau": f"{cfg.temperature:g}",
        "record_every": cfg.score_every * cfg.pca_every,
        "scorer": scorer,
        "labels": len(cfg.labels),
        "passages": bt.PASSAGE_NAMES[cfg.passages],
    }


# --------------------------------------------------------------------------------------------
# Topic frames: leading labels, Table 3 per seed topic and Table 5's chains
# --------------------------------------------------------------------------------------------


def topic_frame(scores: torch.Tensor, steps: torch.Tensor, labels, **columns) -> pd.DataFrame:
    """Tidy table of topic scores [B, R, L]: one row per (chain, step), one column per label, plus
    per-chain columns (sequences of length B) or constant ones."""
    batch, records, count = scores.shape
    frame = pd.DataFrame(scores.reshape(-1, count).numpy(), columns=list(topic_descriptions(labels)))
    frame.insert(0, "step", np.tile(steps.numpy(), batch))
    frame.insert(0, "chain", np.repeat(np.arange(batch), records))
    for name, value in columns.items():
        is_per_chain = not isinstance(value, str) and np.ndim(value) == 1 and len(value) == batch
        frame[name] = np.repeat(np.asarray(value), records) if is_per_chain else value
    return frame


def leading_label_shares(frame: pd.DataFrame, labels, by: str = "seed_topic") -> pd.DataFrame:
    """Per group of `by`, the share of rows (records) in which each label has the highest score
    (ties go to the earlier label). Rows sum to 1."""
    names = list(topic_descriptions(labels))
    missing = [c for c in names + [by] if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"frame must be non-empty with columns {names + [by]}; missing {missing}")
    leader = pd.Categorical(np.asarray(names)[frame[names].to_numpy().argmax(1)], categories=names)
    shares = pd.crosstab(frame[by].to_numpy(), leader, normalize="index", dropna=False)
    return shares.reindex(columns=names, fill_value=0.0).rename_axis(index=by, columns="leading label")


def recurrence_frame(
    frame: pd.DataFrame, target: str = "politics", baseline: float | None = None, seed_labels: dict | None = None
) -> pd.DataFrame:
    """Table 3 of the paper per seed topic, from a topic_frame with columns chain, step, seed_topic and
    the labels: mean target score at the first and last step, mean seed-topic score at both, chains
    whose target score exceeds `baseline` at some recorded step t > 0, and the peak target score at t > 0."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    topics = list(dict.fromkeys(frame["seed_topic"])) if "seed_topic" in frame.columns else []
    if not set(topics) <= set(seed_labels):
        raise ValueError(f"seed topics {sorted(set(topics) - set(seed_labels))} have no label in seed_labels")
    needed = list(dict.fromkeys(["chain", "step", "seed_topic", target] + [seed_labels[t] for t in topics]))
    missing = [c for c in needed if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"frame must be non-empty with columns {needed}; missing {missing}")
    if baseline is None or not 0 < baseline < 1:
        raise ValueError(f"baseline must be a number in (0, 1) (1/L for L labels), got {baseline!r}")
    first, last = frame.step.min(), frame.step.max()
    rows = []
    for topic, group in frame.groupby("seed_topic", sort=False):
        label = seed_labels[topic]
        start, end, later = group[group.step == first], group[group.step == last], group[group.step > first]
        crossed = later.groupby("chain")[target].max() > baseline
        rows.append(
            {
                "seed topic": topic,
                "chains": group.chain.nunique(),
                f"{target} at start": start[target].mean(),
                f"{target} at end": end[target].mean(),
                "seed label": label,
                "seed score at start": start[label].mean(),
                "seed score at end": end[label].mean(),
                "chains crossing": int(crossed.sum()),
                f"peak {target}": later[target].max(),
            }
        )
    return pd.DataFrame(rows).set_index("seed topic")


def first_chains(frame: pd.DataFrame, per_topic: int, by: str = "seed_topic") -> pd.DataFrame:
    """The rows of the first `per_topic` chains (in chain order) of every group of `by`."""
    per_topic = check_count(per_topic, "per_topic", 1)
    keep = frame.groupby(by, sort=False).chain.unique().map(lambda chains: sorted(chains)[:per_topic])
    return frame[frame.chain.isin([c for chains in keep for c in chains])]


def endpoint_chains(available: int) -> int:
    """Chains per seed topic for Table 5's endpoint row: the paper's count (its protocol in
    paper_claims.csv), or all we have when fewer."""
    return min(int(bt.paper_protocol("endpoint_topics_crossing")["chains_per_topic"]), int(available))


def endpoint_frame(frame: pd.DataFrame, cfg: SimpleNamespace) -> pd.DataFrame:
    """Table 5's chains (B.5): recurrence_frame of the first endpoint_chains per seed topic, with
    politics as the target."""
    return recurrence_frame(first_chains(frame, endpoint_chains(cfg.n_seeds)), "politics", cfg.baseline)


# --------------------------------------------------------------------------------------------
# Prefix runs (C.4) and trajectories in embedding space (Figs. 1 and 4)
# --------------------------------------------------------------------------------------------


def with_prefix(cond: MaskedLMConditionals, prefix: str, tokens: torch.Tensor) -> tuple[torch.Tensor, int]:
    """States prefix + tokens[:, :n - k] of the same length n, and k = the prefix's token count (C.4)."""
    ids = cond.encode(prefix)
    tokens = check_tokens(cond, tokens).cpu()
    check_tokens(cond, ids, "prefix")
    if len(ids) >= tokens.shape[1]:
        raise ValueError(f"prefix {prefix!r} has {len(ids)} tokens, leaving no free site of n = {tokens.shape[1]}")
    return torch.cat([ids.expand(len(tokens), -1), tokens[:, : tokens.shape[1] - len(ids)]], 1), len(ids)


def pca_2d(vectors: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The first two principal components of vectors [R, d] (centred), and their explained-variance shares."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"need at least two vectors [R, d], got shape {x.shape}")
    x = x - x.mean(0)
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    signs = np.sign(vt[:2, np.abs(vt[:2]).argmax(1)].diagonal())  # a fixed sign per component
    total = (s**2).sum()
    return (u[:, :2] * s[:2]) * signs, (s[:2] ** 2 / total if total > 0 else np.zeros(2))


def pca_paths(cond: MaskedLMConditionals, trajectory: Trajectory, chains, embedder) -> dict:
    """Figs. 1 and 4: per chain, its recorded states' texts and their first two principal components
    (pca_2d) of their sentence embeddings (`embedder`, load_embedder's). Returns {chain: SimpleNamespace(texts,
    xy, explained)}."""
    paths = {}
    for chain in chains:
        texts = cond.decode_batch(trajectory.tokens[chain])
        xy, explained = pca_2d(embed(embedder, texts))
        paths[chain] = SimpleNamespace(texts=texts, xy=xy, explained=explained)
    return paths


# --------------------------------------------------------------------------------------------
# Chance text and the estimates the verdicts of section 6.2 are judged on (judging.py)
# --------------------------------------------------------------------------------------------


def chance_tokens(cond, count: int, n: int, *, seed: int = 0) -> torch.Tensor:
    """Basin-free text, the chance level of the chapter's claims: `count` states [count, n] of tokens
    drawn uniformly and independently from the model's allowed tokens (no model involved, so no basin,
    no seed topic and no structure). A model whose conditionals are uniform (a random-weight MLM is
    close to that) has exactly this law as its stationary law."""
    count, n = check_count(count, "count", 1), check_count(n, "n", 1)
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    generator = torch.Generator().manual_seed(int(seed))
    return allowed[torch.randint(len(allowed), (count, n), generator=generator)]


def other_labels_mean(frame: pd.DataFrame, labels, target: str = "politics", seed_labels: dict | None = None):
    """Per row of a topic_frame, the mean score of the labels that are neither `target` nor the row's seed label
    (the control of section 6.2's politics claims, issue 63): the scores sum to 1, so a chain that loses its seed
    topic raises the other labels on average, and the target is a basin only where it gains more than they do.
    Their mean, rather than one label picked by a rule, leaves nothing to choose and, with no basin, is
    exchangeable with the target. Returns a Series on the frame's index."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    names = list(topic_descriptions(labels))
    if target not in names:
        raise ValueError(f"target {target!r} is not among the labels {names}")
    scores = frame[names].to_numpy(float)
    own = frame.seed_topic.map(seed_labels).to_numpy()
    keep = np.array([[k not in (target, label) for k in names] for label in own], dtype=bool).reshape(-1, len(names))
    if len(keep) and not keep.any(1).all():
        raise ValueError(f"no label other than {target!r} and a seed label to serve as a control")
    return pd.Series((scores * keep).sum(1) / np.maximum(keep.sum(1), 1), index=frame.index)


def _outside_target(frame: pd.DataFrame, labels, target: str, seed_labels: dict) -> pd.DataFrame:
    """The rows of chains seeded outside `target`'s topic, checked to carry the columns the politics claims read."""
    missing = [c for c in ["chain", "step", "seed_topic", *labels] if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(
            f"frame must be non-empty with columns chain, step, seed_topic and the labels; missing {missing}"
        )
    return frame[frame.seed_topic.map(seed_labels) != target]


CROSSING_COLUMNS = [
    "chain",
    "seed_topic",
    "looks",
    "target_peak",
    "target_crossed",
    "control_crossed",
    "target_share",
    "control_share",
    "first_crossing",
]


def crossing_frame(
    frame: pd.DataFrame, labels, baseline: float, target: str = "politics", seed_labels: dict | None = None
) -> pd.DataFrame:
    """Per chain seeded outside `target`'s topic, from a topic_frame, over its records after the start
    (`looks` of them): whether `target` scores above `baseline` at some record (target_crossed) and
    its peak, the share of records where it does (target_share, the per-chain statistic the verdict
    uses: below ceiling unless every record crosses), the same over the other labels (neither the target
    nor the chain's seed label) on the same records, each label's share averaged (control_share) and the
    share of them that ever cross (control_crossed), and the first step at which `target` crosses (NaN:
    never)."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    if baseline is None or not 0 < baseline < 1:
        raise ValueError(f"baseline must be a number in (0, 1) (1/L for L labels), got {baseline!r}")
    labels = list(topic_descriptions(labels))
    outside = _outside_target(frame, labels, target, seed_labels)
    later = outside[outside.step > frame.step.min()]
    if later.empty:
        return pd.DataFrame(columns=CROSSING_COLUMNS)
    chains = later.groupby("chain", sort=True)
    peaks, topics = chains[labels].max(), chains.seed_topic.first()
    above = (later[labels] > baseline).groupby(later.chain, sort=True).mean()
    others = np.array([[k not in (target, seed_labels[t]) for k in labels] for t in topics])
    if not others.any(1).all():
        raise ValueError(f"no label other than {target!r} and a seed label to serve as a control")
    first = later[later[target] > baseline].groupby("chain").step.min().reindex(peaks.index)
    return pd.DataFrame(
        {
            "chain": peaks.index,
            "seed_topic": topics.to_numpy(),
            "looks": chains.size().to_numpy(),
            "target_peak": peaks[target].to_numpy(),
            "target_crossed": peaks[target].to_numpy() > baseline,
            "control_crossed": ((peaks[labels].to_numpy() > baseline) & others).sum(1) / others.sum(1),
            "target_share": above[target].to_numpy(),
            "control_share": (above[labels].to_numpy() * others).sum(1) / others.sum(1),
            "first_crossing": first.to_numpy(dtype=float),
        }
    ).reset_index(drop=True)


MEANS_COLUMNS = ["chain", "seed_topic", "target_start", "target_mean", "target_end", "control_start", "control_mean"]


def chain_means(frame: pd.DataFrame, labels, target: str = "politics", seed_labels: dict | None = None) -> pd.DataFrame:
    """Table 3a per chain seeded outside `target`'s topic, from a topic_frame, on every scored look (issue 63:
    the paper compares step 0 with the last step alone, and its own recurrence count shows that endpoints miss
    what happens between): the target's score and the mean of the other labels (other_labels_mean) at the start
    (target_start, control_start) and averaged over every look after it (target_mean, control_mean), and the
    target at the last step (target_end, shown)."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    labels = list(topic_descriptions(labels))
    outside = _outside_target(frame, labels, target, seed_labels)
    if outside.empty:
        return pd.DataFrame(columns=MEANS_COLUMNS)
    scored = outside.assign(control=other_labels_mean(outside, labels, target, seed_labels))
    first = scored.step == frame.step.min()
    start = scored[first].set_index("chain").sort_index()
    after = scored[~first].groupby("chain")[[target, "control"]].mean().reindex(start.index)
    end = scored[scored.step == frame.step.max()].set_index("chain").reindex(start.index)
    return pd.DataFrame(
        {
            "chain": start.index,
            "seed_topic": start.seed_topic.to_numpy(),
            "target_start": start[target].to_numpy(),
            "target_mean": after[target].to_numpy(),
            "target_end": end[target].to_numpy(),
            "control_start": start.control.to_numpy(),
            "control_mean": after.control.to_numpy(),
        }
    ).reset_index(drop=True)


def look_ranks(
    frame: pd.DataFrame, chance_target, labels, target: str = "politics", seed_labels: dict | None = None
) -> pd.Series:
    """politics_ends_above_basin_free's per-chain statistic: for each chain seeded outside `target`'s topic, the
    mean over its scored looks after the start of the share of basin-free texts (`chance_target`: their target
    scores) that score the target higher (verdicts.rank_shares, ties half; 1/2 on average for a chain that reads
    like basin-free text). A Series indexed by chain."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    labels = list(topic_descriptions(labels))
    outside = _outside_target(frame, labels, target, seed_labels)
    later = outside[outside.step > frame.step.min()]
    if later.empty:
        return pd.Series(dtype=float)
    shares = pd.Series(rank_shares(later[target].to_numpy(float), chance_target), index=later.index)
    # rounded, so that a chain exactly at the median (a tie the sign test leaves out) stays at 1/2
    return shares.groupby(later.chain.to_numpy()).mean().round(12).rename_axis("chain")


def seed_loss_intervals(start, end, chance_end, level: float = 0.95) -> dict:
    """Per chain, its seed label's score at the start and at the last step, and chance_end [M, C]: the
    same label's score on M basin-free texts (chance_tokens), in the chain's column. Returns
    {"fall": (estimate, low, high) of mean(start - end), Student's t interval over chains at `level` (NaNs with
    fewer than two chains), "shares": per chain, the share of chance texts scoring the seed label higher than its
    last state (verdicts.rank_shares: ties count half; 0.5 when the chain ends like basin-free text, whatever
    the skew of the scores), "beyond": (share, low, high), the share of chains ending with the seed label below
    the median of basin-free text (chains at it left out) with its 95% Wilson interval, the word-salad level the
    fall is read against}; with a non-finite score, NaNs and no share."""
    start, end, chance_end = (np.asarray(v, dtype=float) for v in (start, end, chance_end))
    if start.ndim != 1 or start.shape != end.shape or chance_end.ndim != 2 or chance_end.shape[1] != len(end):
        raise ValueError(
            f"need start and end [C] and chance_end [M, C] of one length C, got {start.shape}, "
            f"{end.shape}, {chance_end.shape}"
        )
    nothing = (math.nan, math.nan, math.nan)
    if not np.isfinite(np.concatenate([start, end, chance_end.ravel()])).all():
        return {"fall": nothing, "shares": np.zeros(0), "beyond": nothing}
    shares = rank_shares(end, chance_end)
    below, counted = int((shares > 0.5).sum()), int((shares != 0.5).sum())
    beyond = (below / counted, *(float(v[0]) for v in share_intervals([below], [counted]))) if counted else nothing
    return {"fall": mean_interval(start - end, level), "shares": shares, "beyond": beyond}
