"""Chapter 4's topic scorer (section 6.2, appendix B.1): the nine labels, the zero-shot scores (the MiniLM
embedding stand-in or an NLI model), the scale's calibration and the scorer checks on text whose topic is known."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from glauber_core import (
    MaskedLMConditionals,
    Trajectory,
    bbc_paragraphs,
    check_count,
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
BBC_TOPIC_LABELS = {
    "business": "finance",
    "entertainment": "pop culture",
    "politics": "politics",
    "sports": "sport",
    "tech": "technology",
}


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

    with quiet_load(
        "zero-shot model", name, 'Use model=None (papermill: -p scorer "") for the bundled embedding scorer.'
    ):
        return pipeline(
            "zero-shot-classification",
            model=name,
            device=device if device is not None else (0 if torch.cuda.is_available() else -1),
        )


def topic_scores(
    texts, labels=tuple(TOPIC_LABELS), *, model=None, scale: float = TOPIC_SCALE, batch_size: int = 32
) -> torch.Tensor:
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


# --------------------------------------------------------------------------------------------
# The scale of the embedding scorer, fitted on BBC training paragraphs
# --------------------------------------------------------------------------------------------


def fit_topic_scale(similarities: torch.Tensor, targets, low: float = 1e-3, high: float = 1e4) -> float:
    """The scale s minimising the cross-entropy -mean log softmax(s * similarities)[target] (convex in s),
    found by bisection on its derivative mean(E_p[cos] - cos_target) in log s."""
    similarities = torch.as_tensor(similarities, dtype=torch.float64)
    targets = torch.as_tensor(targets, dtype=torch.long)
    if similarities.dim() != 2 or targets.shape != (similarities.shape[0],) or len(targets) == 0:
        raise ValueError(
            f"need similarities [N, L] and targets [N] with N >= 1, got {tuple(similarities.shape)} "
            f"and {tuple(targets.shape)}"
        )
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


def calibrate_topic_scale(
    cond: MaskedLMConditionals,
    count: int = 200,
    n: int = 20,
    *,
    seed: int = 0,
    labels=tuple(TOPIC_LABELS),
    embedder=None,
) -> float:
    """fit_topic_scale on `count` BBC *training* paragraphs per topic cut to n tokens (never held-out text)."""
    names = list(topic_descriptions(labels))
    if not set(BBC_TOPIC_LABELS.values()) <= set(names):
        raise ValueError(f"labels must include the BBC topics' labels {sorted(BBC_TOPIC_LABELS.values())}")
    texts, targets = [], []
    for topic, label in BBC_TOPIC_LABELS.items():
        texts += seed_passages(cond, n, count, seed=seed, topic=topic, split="train").texts
        targets += [names.index(label)] * count
    return fit_topic_scale(label_similarities(texts, labels, embedder), targets)


# --------------------------------------------------------------------------------------------
# Scoring chain states (a blank state carries no topic)
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


def state_topic_scores(cond, tokens: torch.Tensor, labels=tuple(TOPIC_LABELS), **scorer) -> torch.Tensor:
    """Topic scores [B, R, L] of chain states [B, R, n] (or [B, L] of states [B, n]), in one batched call."""
    if tokens.dim() == 2:
        return scores_or_uniform(cond.decode_batch(tokens), labels, **scorer)
    batch, records, n = tokens.shape
    scores = scores_or_uniform(cond.decode_batch(tokens.reshape(-1, n)), labels, **scorer)
    return scores.reshape(batch, records, -1)


def trajectory_topic_scores(
    cond: MaskedLMConditionals,
    trajectory: Trajectory,
    labels=tuple(TOPIC_LABELS),
    every: int = 1,
    *,
    skip: int = 0,
    **scorer,
) -> tuple[torch.Tensor, torch.Tensor]:
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


# --------------------------------------------------------------------------------------------
# The scorer check on text whose topic is known (held-out BBC)
# --------------------------------------------------------------------------------------------


def _cut_name(n: int) -> str:
    return f"first {n} tokens"


def bbc_check_frame(
    cond: MaskedLMConditionals, n: int, count: int, labels=tuple(TOPIC_LABELS), *, seed: int = 0, model=None
) -> pd.DataFrame:
    """The scorer check on text whose topic we know: per BBC topic, `count` held-out paragraphs cut to
    their first n tokens (what the chains look like) and `count` whole ones, scored by topic_scores
    (`model` as there). One row per text: length, topic, label, text, the labels' scores, predicted."""
    names = list(topic_descriptions(labels))
    rng = np.random.default_rng(seed)
    rows = []
    for topic, label in BBC_TOPIC_LABELS.items():
        cut = seed_passages(cond, n, count, seed=seed, topic=topic)
        pool = [p for _, p in bbc_paragraphs("heldout", topic)]
        whole = rng.choice(pool, count, replace=False).tolist()
        rows += [dict(length=_cut_name(n), topic=topic, label=label, text=t) for t in cut.texts]
        rows += [dict(length="whole paragraph", topic=topic, label=label, text=t) for t in whole]
    check = pd.DataFrame(rows)
    scores = topic_scores(check.text.tolist(), names, model=model)
    check = check.join(pd.DataFrame(scores.numpy(), columns=names))
    check["predicted"] = check[names].idxmax(axis=1)
    return check


def accuracy_frame(check: pd.DataFrame) -> pd.DataFrame:
    """Per text length of bbc_check_frame: paragraphs scored and the share whose predicted label is right."""
    return (
        check.assign(correct=check.predicted == check.label)
        .groupby("length")
        .correct.agg(["count", "mean"])
        .rename(columns={"count": "paragraphs", "mean": "accuracy"})
    )


def confusion_frame(true_labels, scores: torch.Tensor, labels) -> pd.DataFrame:
    """Counts of (true label, predicted label = argmax score) over all labels, rows true, columns predicted."""
    names = list(topic_descriptions(labels))
    if scores.dim() != 2 or scores.shape != (len(true_labels), len(names)):
        raise ValueError(f"scores must be [{len(true_labels)}, {len(names)}], got {tuple(scores.shape)}")
    predicted = pd.Categorical(np.asarray(names)[scores.argmax(1).numpy()], categories=names)
    true = pd.Categorical(list(true_labels), categories=names)
    if true.isna().any():
        raise ValueError(f"true labels must be among {names}")
    return pd.crosstab(true, predicted, dropna=False).rename_axis(index="true", columns="predicted")
