"""Chapter 4: zero-shot topic scores and semantic basins (section 6.2, Tables 3 and 5, appendix C.4).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from glauber_core import (
    MaskedLMConditionals,
    Trajectory,
    check_count,
    check_tokens,
    embed,
    load_embedder,
    quiet_load,
    seed_passages,
)


# The paper's B.1 names eleven zero-shot labels, yet its baseline 1/9 implies nine. We keep nine and drop
# 'science' (overlaps 'technology') and 'art' (overlaps 'pop culture'), the two closest to another label.
TOPIC_LABELS = {
    "politics": "politics: government, elections, parliament, political parties, ministers and policy",
    "health": "health: medicine, doctors, hospitals, disease, patients and healthcare",
    "pop culture": "pop culture: films, music, celebrities, television, awards and entertainment",
    "sport": "sport: football, tennis, rugby, athletes, matches and championships",
    "food": "food: cooking, recipes, restaurants, meals and eating",
    "technology": "technology: computers, software, the internet, mobile phones and gadgets",
    "finance": "finance: business, markets, companies, banks, the economy and money",
    "education": "education: schools, universities, students, teachers and learning",
    "environment": "environment: climate change, pollution, nature, energy and wildlife",
}


# The label that stands for each BBC News topic (for validation, calibration and the seed-topic score).
BBC_TOPIC_LABELS = {"business": "finance", "entertainment": "pop culture", "politics": "politics",
                    "sports": "sport", "tech": "technology"}


# softmax(scale * cos) over the nine labels: the scale is fitted by fit_topic_scale on BBC *training*
# paragraphs cut to 20 tokens (calibrate_topic_scale(load_mlm(), count=200, n=20, seed=0)).
TOPIC_SCALE = 22.24


def topic_descriptions(labels) -> dict[str, str]:
    """Label -> description: a dict is taken as given; names in TOPIC_LABELS get its description,
    any other name describes itself. No labels, duplicates or blank names raise ValueError."""
    if isinstance(labels, str):
        raise ValueError(f"labels must be a list of label names or a dict, got the string {labels!r}")
    pairs = list(labels.items()) if isinstance(labels, dict) else [(k, TOPIC_LABELS.get(k, k)) for k in labels]
    names = [k for k, _ in pairs]
    if not names:
        raise ValueError("labels is empty: give at least one topic label")
    if not all(isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip() for k, v in pairs):
        raise ValueError(f"labels and their descriptions must be non-empty strings, got {pairs!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"labels must be distinct, got duplicates {sorted({k for k in names if names.count(k) > 1})}")
    return dict(pairs)


def _check_texts(texts) -> list[str]:
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty: give at least one text to score")
    if not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValueError("texts must all be non-empty strings")
    return texts


@functools.lru_cache(maxsize=1)
def _bundled_embedder():
    return load_embedder()


def label_similarities(texts, labels=tuple(TOPIC_LABELS), embedder=None, batch_size: int = 32) -> torch.Tensor:
    """cos(phi(text), phi(description of label)) [N, L] with the sentence embedder phi (None: MiniLM).
    Small batches keep padding short: the embedder sorts texts by length before batching."""
    texts, descriptions = _check_texts(texts), topic_descriptions(labels)
    vectors = embed(embedder or _bundled_embedder(), texts + list(descriptions.values()), batch_size=batch_size)
    return vectors[: len(texts)] @ vectors[len(texts) :].T


@functools.lru_cache(maxsize=2)
def _zero_shot_pipeline(name: str, device=None):
    from transformers import pipeline

    with quiet_load("zero-shot model", name, "Use model=None (papermill: -p scorer \"\") for the bundled "
                    "embedding scorer."):
        return pipeline("zero-shot-classification", model=name,
                        device=device if device is not None else (0 if torch.cuda.is_available() else -1))


def topic_scores(texts, labels=tuple(TOPIC_LABELS), *, model=None, scale: float = TOPIC_SCALE,
                 batch_size: int = 32) -> torch.Tensor:
    """Zero-shot topic probabilities [N, L] over `labels` (columns in label order, rows sum to 1).

    model None or a sentence embedder: softmax(scale * cos(phi(text), phi(description))), the offline
    stand-in for the paper's classifier (B.1). model a name or folder of an NLI model (the paper's
    "facebook/bart-large-mnli"): the transformers zero-shot pipeline over the label names, single-label.
    """
    texts, descriptions = _check_texts(texts), topic_descriptions(labels)
    if isinstance(model, (str, Path)):
        classify = _zero_shot_pipeline(str(model))
        names = list(descriptions)
        results = classify(texts, candidate_labels=names, multi_label=False, batch_size=batch_size)
        results = [results] if isinstance(results, dict) else results
        return torch.tensor([[dict(zip(r["labels"], r["scores"]))[k] for k in names] for r in results])
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    similarities = label_similarities(texts, descriptions, model, batch_size)
    return torch.softmax(scale * similarities.double(), -1).float()


def fit_topic_scale(similarities: torch.Tensor, targets, low: float = 1e-3, high: float = 1e4) -> float:
    """The scale s minimising the cross-entropy -mean log softmax(s * similarities)[target] (convex in s),
    found by bisection on its derivative mean(E_p[cos] - cos_target) in log s."""
    similarities = torch.as_tensor(similarities, dtype=torch.float64)
    targets = torch.as_tensor(targets, dtype=torch.long)
    if similarities.dim() != 2 or targets.shape != (similarities.shape[0],) or len(targets) == 0:
        raise ValueError(f"need similarities [N, L] and targets [N] with N >= 1, got {tuple(similarities.shape)} "
                         f"and {tuple(targets.shape)}")
    if ((targets < 0) | (targets >= similarities.shape[1])).any():
        raise ValueError(f"targets must be label indices in [0, {similarities.shape[1]})")
    true = similarities.gather(1, targets.unsqueeze(1)).squeeze(1)

    def slope(s: float) -> float:
        return float(((torch.softmax(s * similarities, -1) * similarities).sum(1) - true).mean())

    lo, hi = math.log(low), math.log(high)
    if slope(high) <= 0:
        raise ValueError(f"the cross-entropy still falls at scale {high:g}: the labels separate the texts perfectly")
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if slope(math.exp(mid)) < 0 else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def calibrate_topic_scale(cond: MaskedLMConditionals, count: int = 200, n: int = 20, *, seed: int = 0,
                          labels=tuple(TOPIC_LABELS), embedder=None) -> float:
    """fit_topic_scale on `count` BBC *training* paragraphs per topic cut to n tokens (never held-out text)."""
    names = list(topic_descriptions(labels))
    if not set(BBC_TOPIC_LABELS.values()) <= set(names):
        raise ValueError(f"labels must include the BBC topics' labels {sorted(BBC_TOPIC_LABELS.values())}")
    texts, targets = [], []
    for topic, label in BBC_TOPIC_LABELS.items():
        texts += seed_passages(cond, n, count, seed=seed, topic=topic, split="train").texts
        targets += [names.index(label)] * count
    return fit_topic_scale(label_similarities(texts, labels, embedder), targets)


def trajectory_topic_scores(cond: MaskedLMConditionals, trajectory: Trajectory, labels=tuple(TOPIC_LABELS),
                            every: int = 1, *, skip: int = 0, **scorer) -> tuple[torch.Tensor, torch.Tensor]:
    """Topic scores of every `every`-th record of every chain, all in one batched call:
    (scores [B, R', L], steps [R']). `skip` leaves out the first sites (a frozen prefix) from the text."""
    every = check_count(every, "every", 1)
    picks = torch.arange(0, len(trajectory.steps), every)
    if picks[-1] != len(trajectory.steps) - 1:
        picks = torch.cat([picks, torch.tensor([len(trajectory.steps) - 1])])
    tokens = trajectory.tokens[:, picks, skip:]
    batch, records, n = tokens.shape
    scores = scores_or_uniform(cond.decode_batch(tokens.reshape(-1, n)), labels, **scorer)
    return scores.reshape(batch, records, -1), trajectory.steps[picks]


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


def recurrence_table(frame: pd.DataFrame, target: str = "politics", baseline: float | None = None,
                     seed_labels: dict | None = None) -> pd.DataFrame:
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
        rows.append({"seed topic": topic, "chains": group.chain.nunique(),
                     f"{target} at start": start[target].mean(), f"{target} at end": end[target].mean(),
                     "seed label": label, "seed score at start": start[label].mean(),
                     "seed score at end": end[label].mean(), "chains crossing": int(crossed.sum()),
                     f"peak {target}": later[target].max()})
    return pd.DataFrame(rows).set_index("seed topic")


def confusion_table(true_labels, scores: torch.Tensor, labels) -> pd.DataFrame:
    """Counts of (true label, predicted label = argmax score) over all labels, rows true, columns predicted."""
    names = list(topic_descriptions(labels))
    if scores.dim() != 2 or scores.shape != (len(true_labels), len(names)):
        raise ValueError(f"scores must be [{len(true_labels)}, {len(names)}], got {tuple(scores.shape)}")
    predicted = pd.Categorical(np.asarray(names)[scores.argmax(1).numpy()], categories=names)
    true = pd.Categorical(list(true_labels), categories=names)
    if true.isna().any():
        raise ValueError(f"true labels must be among {names}")
    return pd.crosstab(true, predicted, dropna=False).rename_axis(index="true", columns="predicted")


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


# --------------------------------------------------------------------------------------------
# Chance controls and the verdict rules of section 6.2 (stated in the chapter before the run)
# --------------------------------------------------------------------------------------------


def scores_or_uniform(texts, labels=tuple(TOPIC_LABELS), **scorer) -> torch.Tensor:
    """topic_scores of texts, where a text that decodes to nothing visible (a chain of blank tokens)
    carries no topic and gets the uniform score 1/L on every label."""
    texts, names = list(texts), list(topic_descriptions(labels))
    scores = torch.full((len(texts), len(names)), 1.0 / len(names))
    visible = [k for k, t in enumerate(texts) if isinstance(t, str) and t.strip()]
    if visible:
        scores[visible] = topic_scores([texts[k] for k in visible], labels, **scorer).float()
    return scores


def shuffled_null(tokens: torch.Tensor, replicas: int = 1, *, seed: int = 0) -> torch.Tensor:
    """The chance control: the chains' own states [B, R, n] with, at every record and every position,
    the tokens dealt out afresh among the B chains (an independent random permutation per record and
    position), `replicas` times: [replicas * B, R, n], replica-major. Every position keeps the model's
    own tokens there; only what ties a chain's tokens to each other (the text's structure, its basin)
    is gone. Chains with no such structure are exchangeable with their shuffles."""
    tokens = torch.as_tensor(tokens).cpu()
    if tokens.dim() != 3 or tokens.shape[0] < 1:
        raise ValueError(f"tokens must be chain states [B, R, n], got shape {tuple(tokens.shape)}")
    replicas = check_count(replicas, "replicas", 1)
    batch, records, n = tokens.shape
    generator = torch.Generator().manual_seed(int(seed))
    order = torch.rand(replicas, batch, records, n, generator=generator).argsort(1)
    return tokens.unsqueeze(0).expand(replicas, -1, -1, -1).gather(1, order).reshape(-1, records, n)


def state_topic_scores(cond, tokens: torch.Tensor, labels=tuple(TOPIC_LABELS), **scorer) -> torch.Tensor:
    """Topic scores [B, R, L] of chain states [B, R, n], in one batched call."""
    batch, records, n = tokens.shape
    scores = scores_or_uniform(cond.decode_batch(tokens.reshape(-1, n)), labels, **scorer)
    return scores.reshape(batch, records, -1)


def control_labels(seed_labels, labels, target: str = "politics") -> list[str]:
    """Per chain, one control label that is neither `target` nor the chain's own seed label: the k-th
    chain of a seed label gets the k-th such label in label order, cycling."""
    names = list(topic_descriptions(labels))
    if target not in names:
        raise ValueError(f"target {target!r} is not among the labels {names}")
    seen: dict[str, int] = {}
    picks = []
    for label in seed_labels:
        others = [k for k in names if k not in (target, label)]
        if not others:
            raise ValueError(f"no label other than {target!r} and {label!r} to serve as a control")
        picks.append(others[seen.get(label, 0) % len(others)])
        seen[label] = seen.get(label, 0) + 1
    return picks


def crossing_table(frame: pd.DataFrame, labels, baseline: float, target: str = "politics",
                   seed_labels: dict | None = None) -> pd.DataFrame:
    """Per chain seeded outside `target`'s topic, from a topic_frame: whether `target` scores above
    `baseline` at some record after the start, and whether the chain's control label (control_labels)
    does, on the same records. Columns chain, seed_topic, control_label, target_peak, target_crossed,
    control_crossed."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    if baseline is None or not 0 < baseline < 1:
        raise ValueError(f"baseline must be a number in (0, 1) (1/L for L labels), got {baseline!r}")
    labels = list(topic_descriptions(labels))
    missing = [c for c in ["chain", "step", "seed_topic", *labels] if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"frame must be non-empty with columns chain, step, seed_topic and the labels; "
                         f"missing {missing}")
    later = frame[(frame.step > frame.step.min()) & (frame.seed_topic.map(seed_labels) != target)]
    if later.empty:
        return pd.DataFrame(columns=["chain", "seed_topic", "control_label", "target_peak", "target_crossed",
                                     "control_crossed"])
    peaks = later.groupby("chain", sort=True)[labels].max()
    topics = later.groupby("chain", sort=True).seed_topic.first()
    controls = control_labels([seed_labels[t] for t in topics], labels, target)
    control_peak = np.array([peaks.loc[c, k] for c, k in zip(peaks.index, controls)])
    return pd.DataFrame({"chain": peaks.index, "seed_topic": topics.to_numpy(), "control_label": controls,
                         "target_peak": peaks[target].to_numpy(),
                         "target_crossed": peaks[target].to_numpy() > baseline,
                         "control_crossed": control_peak > baseline}).reset_index(drop=True)


def recurrence_rule(crossed: int, chains: int, label_crossed: int, free_crossed: int,
                    free_chains: int) -> tuple[str, str, tuple[float, float]]:
    """The politics-recurrence rule: `crossed` of `chains` chains cross the politics baseline; against
    chance twice, with rule_against_chance: (a) the same chains' control label crossing the same
    baseline on the same records (label_crossed of chains), (b) shuffled chains (shuffled_null: the
    same looks, tokens dealt out among the chains per position) crossing it (free_crossed of
    free_chains). Reproduced when politics beats both; differs when either comparison lies at or below
    0; inconclusive otherwise.
    Returns (verdict, reason, (estimate, low, high) of the weaker difference: the lower interval)."""
    label = bt.rule_against_chance(crossed, chains, label_crossed, chains)
    free = bt.rule_against_chance(crossed, chains, free_crossed, free_chains)
    reason = f"vs another label: {label[1]}; vs shuffled chains: {free[1]}"
    compared = [(label, label_crossed, chains), (free, free_crossed, free_chains)]
    finite = [(v[2][0], v[2][1], crossed / chains - k / m) for v, k, m in compared if math.isfinite(v[2][0])]
    low, high, estimate = min(finite) if finite else (math.nan, math.nan, math.nan)
    interval = (estimate, low, high)
    if bt.DIFFERS in (label[0], free[0]):
        return bt.DIFFERS, reason, interval
    if label[0] == free[0] == bt.REPRODUCED:
        return bt.REPRODUCED, reason, interval
    return bt.INCONCLUSIVE, reason, interval


def seed_loss_intervals(start, end, null_end, resamples: int = 2_000, *, seed: int = 0) -> dict:
    """Per chain, its seed label's score at the start and at the last step, and null_end [r, C]: the
    same label's score on r shuffles of the final states (shuffled_null), at the chain's place. Returns
    {"fall": (estimate, low, high) of mean(start - end), "beyond_null": (estimate, low, high) of the
    mean over chains of the share of its shuffles that score higher than the chain (ties count half;
    0.5 when the chain is exchangeable with its shuffles, whatever the skew of the scores)}, percentile
    bootstrap over chains; NaNs with fewer than two chains or a non-finite score."""
    start, end, null_end = (np.asarray(v, dtype=float) for v in (start, end, null_end))
    if start.ndim != 1 or start.shape != end.shape or null_end.ndim != 2 or null_end.shape[1] != len(end):
        raise ValueError(f"need start and end [C] and null_end [r, C] of one length C, got {start.shape}, "
                         f"{end.shape}, {null_end.shape}")
    nothing = (math.nan, math.nan, math.nan)
    if len(start) < 2 or not np.isfinite(np.concatenate([start, end, null_end.ravel()])).all():
        return {"fall": nothing, "beyond_null": nothing}
    above = ((null_end > end) + 0.5 * (null_end == end)).mean(0)
    intervals = {}
    for name, values in (("fall", start - end), ("beyond_null", above)):
        if np.ptp(values) == 0:
            intervals[name] = (float(values[0]),) * 3
        else:
            intervals[name] = (float(values.mean()), *bt.bootstrap_ci(values, resamples=resamples, seed=seed))
    return intervals


def seed_loss_rule(fall: tuple, beyond_null: tuple) -> tuple[str, str]:
    """The seed-topic-loss rule. The paper says the seed label's score falls; a fall that word salad
    explains does not count. Null: a chain ends no further from its topic than its shuffles (the same
    final tokens per position dealt out among the chains): a share 0.5 of them score higher.
    Reproduced when the interval of that share lies above 0.5; differs when the interval of
    mean(start - final) lies at or below 0 (no fall at all); inconclusive otherwise or without
    intervals."""
    if not all(math.isfinite(v) for v in (*fall, *beyond_null)):
        return bt.INCONCLUSIVE, "too few chains for an interval"
    words = (f"fall from the start {fall[0]:+.3f} [{fall[1]:+.3f}, {fall[2]:+.3f}]; shuffles "
             f"scoring higher {beyond_null[0]:.2f} [{beyond_null[1]:.2f}, {beyond_null[2]:.2f}] (null 0.5)")
    if fall[2] <= 0:
        return bt.DIFFERS, words + ": the seed score does not fall"
    if beyond_null[1] > 0.5:
        return bt.REPRODUCED, words + ": the chains end further from their topic than their shuffles"
    return bt.INCONCLUSIVE, words + ": not clearly further from the topic than their shuffles"


# --------------------------------------------------------------------------------------------
# The chapter's claims rows and the words its prose quotes (kept out of the notebook's visible cells)
# --------------------------------------------------------------------------------------------


def scorer_check_words(check: pd.DataFrame, accuracy: pd.DataFrame, cut_name: str,
                       target: str = "politics") -> dict:
    """Glue values for the scorer check: accuracy on snippets and whole paragraphs, the share of the
    scorer's mistakes on non-`target` snippets that go to `target`, and where its misses on `target`
    snippets went."""
    snips = check[check.length == cut_name]
    wrong = snips[snips.predicted != snips.label]
    others_wrong = wrong[wrong.label != target]
    misses = wrong[wrong.label == target].predicted.value_counts()
    return {"ch4_acc_cut": f"{accuracy.accuracy[cut_name]:.0%}",
            "ch4_acc_whole": f"{accuracy.accuracy['whole paragraph']:.0%}",
            "ch4_errors_to_politics": ("none (it made none)" if others_wrong.empty
                                       else f"{(others_wrong.predicted == target).mean():.0%}"),
            "ch4_politics_misread_as": ", ".join(f"{k} ({v})" for k, v in misses.head(3).items()) or "none"}


def trajectory_words(records: int, distinct: int, every: int) -> dict:
    """Glue values for the PCA section: records drawn, distinct states among them, and what repeats mean."""
    repeats = records - distinct
    return {"ch4_pca_records": f"{records:,}", "ch4_pca_distinct": f"{distinct:,}",
            "ch4_pca_every": f"{every}",
            "ch4_pca_repeats": ("no recorded state repeats: at this temperature the chains do not sit in exact "
                                "traps between records") if not repeats else
                               (f"{repeats} records repeat an earlier state of their chain: exact traps, drawn "
                                "as dark, tight clusters")}


def endpoint_row(table3: pd.DataFrame, baseline: float, *, setup: dict, model: str,
                 target: str = "politics") -> dict:
    """Table 5's endpoint comparison (B.5) as a model-specific claims row: how many seed topics other
    than the target end, on average over their chains, above the baseline. table3: recurrence_table of
    the run; setup: our protocol items (chains per topic are read from table3)."""
    ends = table3.drop(index=target, errors="ignore")[f"{target} at end"]
    chains = sorted(set(table3.chains.astype(int)))
    per_topic = str(chains[0]) if len(chains) == 1 else f"{chains[0]}-{chains[-1]}"
    # Table 5 counts chains per topic and reports endpoints only: no total, no recording interval
    setup = {**{k: v for k, v in setup.items() if k not in ("chains", "record_every")},
             "chains_per_topic": per_topic}
    quantity = (f"seed topics other than {target} whose chains' mean {target} score at the last step is above "
                f"{baseline:.3f} (Table 5)")
    if ends.empty:
        return bt.model_specific_row("endpoint_topics_crossing", quantity, math.nan,
                                     f"no seed topic outside {target} in this run", model=model, setup=setup)
    marks = ", ".join(f"{topic} {value:.2f}{' ✓' if value > baseline else ''}" for topic, value in ends.items())
    above = int((ends > baseline).sum())
    return bt.model_specific_row("endpoint_topics_crossing", quantity, above, f"{above} of {len(ends)} topics "
                                 f"({marks})", model=model, setup=setup, low=above, high=above)


def chapter_verdicts(crossings: pd.DataFrame, recurrence: tuple, loss: tuple, loss_verdict: tuple, *,
                     setup: dict, model: str, free: tuple[int, int]) -> tuple[list[dict], dict]:
    """The chapter's claims rows (Table 5's endpoint row is endpoint_row's) and the verdict words its prose
    quotes.

    crossings: crossing_table of the run; recurrence: recurrence_rule's (verdict, reason, interval);
    loss: seed_loss_intervals' {"fall", "beyond_null"} and loss_verdict seed_loss_rule's (verdict, reason);
    setup: our protocol items (keys as in paper_claims.csv's protocol column); free: (shuffled
    chains crossing, shuffled chains)."""
    chains, crossed = len(crossings), int(crossings.target_crossed.sum()) if len(crossings) else 0
    label_crossed = int(crossings.control_crossed.sum()) if chains else 0
    share = crossed / chains if chains else math.nan
    if chains:
        low, high = (float(v[0]) for v in bt.share_intervals([crossed], [chains]))
        difference = bt.interval_text(*recurrence[2], missing="no difference estimable (zero events)")
        recurrence_text = f"{crossed} of {chains} ({share:.2f}); minus chance (weaker control): {difference}"
    else:
        low = high = math.nan
        recurrence_text = "no chain seeded outside politics in this run"
    missing = "fewer than two chains: no estimate"
    excess_text = (f"{bt.interval_text(*loss['beyond_null'], digits=2, missing=missing)} (fall from the start "
                   f"{bt.interval_text(*loss['fall'], digits=3, missing=missing)})")
    peak = float(crossings.target_peak.max()) if chains else math.nan
    peak_text = f"{peak:.3f}" if chains else "no chain seeded outside politics was scored after its start"
    rows = [
        bt.claim_row("politics_recurrence",
                     "share of non-politics chains ever above 1/9 politics, against a control label on the "
                     "same looks and against the chains' shuffles", share, recurrence_text, recurrence[0],
                     recurrence[1]),
        bt.claim_row("seed_topic_loss",
                     "share of shuffled final states scoring the seed label higher than their chain "
                     "(mean over chains; null 0.5)", loss["beyond_null"][0], excess_text, *loss_verdict),
        bt.model_specific_row("politics_recurrence_count", "non-politics chains ever above 1/9 politics",
                              crossed, f"{crossed} of {chains} non-politics chains" if chains else
                              recurrence_text, model=model, setup=setup,
                              low=low * chains, high=high * chains),
        bt.model_specific_row("politics_peak", "highest politics score after step 0, non-politics chains",
                              peak, peak_text, model=model, setup=setup),
    ]
    below = {bt.REPRODUCED: "clearly below theirs", bt.DIFFERS: "no lower than at the start"}.get(
        loss_verdict[0], "not clearly below theirs")
    strong = int((crossings.target_peak > 0.5).sum()) if chains else 0
    words = {"ch4_verdict_politics_recurrence": recurrence[0], "ch4_verdict_seed_topic_loss": loss_verdict[0],
             "ch4_crossed": f"{crossed} of {chains}", "ch4_label_crossed": f"{label_crossed} of {chains}",
             "ch4_free_crossed": f"{free[0]} of {free[1]}", "ch4_peak": peak_text,
             "ch4_strong": f"{strong} of {chains}",
             "ch4_seed_loss": f"{below} (share of shuffles scoring higher: {excess_text})"}
    return rows, words


def summary_words(table3: pd.DataFrame, frame: pd.DataFrame, labels, mix: pd.DataFrame, *, q: float,
                  looks: int, by_chance: float, run: str, target: str = "politics") -> dict:
    """Glue values for the chapter's closing section: seed-topic falls, politics at the start, the
    chance of a crossing, the leading labels over all chains and the prefix shifts."""
    names = list(topic_descriptions(labels))
    rest = table3.drop(index=target, errors="ignore")
    falls = rest.index[rest["seed score at end"] < rest["seed score at start"]]
    own_start = table3.loc[target, "seed score at start"] if target in table3.index else math.nan
    other_start = rest["seed score at start"].mean()
    overall = leading_label_shares(frame[frame.step > frame.step.min()].assign(chains="all"), names,
                                   by="chains").loc["all"].sort_values(ascending=False)
    rank = list(overall.index).index(target) + 1
    shift = (mix - mix.loc["(none)"]).drop(index="(none)")
    kid = [p for p in shift.index if "little kid" in p.lower()]
    return {
        "ch4_run": run,
        "ch4_seed_falls": f"{len(falls)} of the {len(rest)} non-politics seed topics "
                          f"({', '.join(falls) or 'none'})",
        "ch4_politics_seed_start": f"{own_start:.2f}", "ch4_other_seed_start": f"{other_start:.2f}",
        "ch4_politics_seed_note": "lower, as its seed passages are often about policy areas (health, "
                                  "schools, the environment) that the scorer files elsewhere"
                                  if own_start < other_start else "not lower",
        "ch4_false_alarm": f"{q:.0%}", "ch4_records": f"{looks}", "ch4_by_chance": f"{by_chance:.2f}",
        "ch4_top_labels": ", ".join(f"{k} ({v:.0%})" for k, v in overall.head(3).items()),
        "ch4_politics_lead": f"{overall[target]:.0%}",
        "ch4_politics_rank": "the label that leads most often" if rank == 1
                             else f"number {rank} of {len(names)} labels",
        "ch4_prefix_gains": "; ".join(f"\"{p}\": {shift.loc[p].idxmax()} ({shift.loc[p].max():+.2f})"
                                      for p in shift.index) or "no prefix run",
        "ch4_kid_politics": f"{shift.loc[kid[0], target]:+.2f}" if kid
                            else "not measured (no such prefix in this run)",
    }
