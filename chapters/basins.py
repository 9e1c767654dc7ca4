"""Chapter 4: zero-shot topic scores and semantic basins (section 6.2, Tables 3 and 5, appendix C.4).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import functools
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
    bbc_paragraphs,
    check_count,
    check_temperature,
    check_tokens,
    embed,
    germline_v_genes,
    is_protein,
    load_embedder,
    quiet_load,
    seed_passages,
)
from verdicts import INCONCLUSIVE, finite, mean_interval, rule_every_part, rule_one_sided

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
    if model == FAMILY_SCORER:  # a protein model's "topics": the germline families (family_scores)
        return family_scores(texts, list(descriptions))
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
# A protein model (AntiBERTy): human germline V-gene families stand in for the topics
# --------------------------------------------------------------------------------------------


# topic_scores(..., model=FAMILY_SCORER) scores residue strings by germline family (family_scores)
FAMILY_SCORER = "germline family identity"
# The commonest human heavy-chain family (111 of 249 IMGT heavy alleles) plays politics' part
FAMILY_TARGET = "IGHV3"
# Seed families: the three largest heavy families, the largest kappa and the largest lambda family
FAMILY_SEEDS = ("IGHV1", "IGHV3", "IGHV4", "IGKV1", "IGLV3")
# What the prefix section (C.4) prints on a protein model
NO_PREFIX = 'protein model: no prefix runs (a spoken prefix such as "X said that" has no residue counterpart)'


@functools.lru_cache(maxsize=8)
def _germline_table(n: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Families (heavy, kappa, lambda; by number), alleles' first n residues as bytes [A, n] (0 past the
    end) and each allele's family index [A]."""
    genes = germline_v_genes("human")
    order = {"heavy": 0, "kappa": 1, "lambda": 2}
    families = sorted({(order[c], int(f[4:]), f) for _, f, c, _ in genes})
    families = [f for *_, f in families]
    codes = np.zeros((len(genes), n), np.uint8)
    for k, (_, _, _, residues) in enumerate(genes):
        cut = residues[:n].encode()
        codes[k, : len(cut)] = np.frombuffer(cut, np.uint8)
    return families, codes, np.array([families.index(f) for _, f, _, _ in genes])


def germline_families() -> list[str]:
    """The human IMGT germline V-gene families (IGHV1-7, then kappa, then lambda), the protein labels."""
    return list(_germline_table(1)[0])


def family_identity(texts, labels=None, *, counts: bool = False) -> torch.Tensor:
    """Per residue string and family [N, L]: the share of its residues identical (same position from
    the gene's start) to a human germline allele of the family, max over the family's alleles (1 for a
    germline cut against its own family); with `counts`, the number of identical residues instead.
    labels: family names (None: all, germline_families order)."""
    texts = ["".join(t.split()) for t in _check_texts(texts)]
    length = max(len(t) for t in texts)
    families, codes, member = _germline_table(length)
    labels = families if labels is None else list(topic_descriptions(labels))
    unknown = [k for k in labels if k not in families]
    if unknown:
        raise ValueError(f"labels {unknown} are no human germline families; families: {families}")
    states = np.ones((len(texts), length), np.uint8)  # 1 past a text's end matches no residue (nor the 0s)
    for k, text in enumerate(texts):
        states[k, : len(text)] = np.frombuffer(text.encode(), np.uint8)
    matches = np.concatenate(
        [(part[:, None, :] == codes[None]).sum(-1) for part in np.array_split(states, max(1, len(states) // 256))]
    )
    best = np.stack([matches[:, member == families.index(k)].max(1) for k in labels], 1).astype(float)
    sizes = np.array([len(t) for t in texts], dtype=float)[:, None]
    return torch.tensor(best if counts else best / sizes)


def family_scores(texts, labels=None) -> torch.Tensor:
    """A protein state's "topic scores" [N, L] (rows sum to 1): softmax over the families of the number
    of residues identical to the family's nearest allele (family_identity with counts), so that every
    identical residue multiplies a family's weight by e; the largest score is the nearest family."""
    return torch.softmax(family_identity(texts, labels, counts=True), -1).float()


def family_seeds(cond: MaskedLMConditionals, n: int, count: int, families=FAMILY_SEEDS, *, seed: int = 0) -> list:
    """seed_passages per germline family: `count` distinct n-residue germline cuts, or all the family
    has when fewer (IGHV1 has 6 distinct 20-residue cuts)."""
    cuts = {f: {r[:n] for _, g, _, r in germline_v_genes("human") if g == f and len(r) >= n} for f in families}
    return [seed_passages(cond, n, min(count, len(cuts[f])), seed=seed, topic=f) for f in families]


def germline_check(n: int, labels, target: str = FAMILY_TARGET) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The family scorer on the germlines themselves: every distinct n-residue cut of a human germline
    V gene (its first allele), its family, the family the scorer puts first and its scores. Returns
    (check: one row per cut, columns allele, chain, label, predicted, identity to its own family and the
    labels' scores; accuracy per chain: cuts, share read as their own family, share with `target`'s
    score above 1/L among cuts of other families)."""
    names = list(topic_descriptions(labels))
    cuts = {}
    for allele, family, chain, residues in germline_v_genes("human"):
        if len(residues) >= n and family in names:
            cuts.setdefault(residues[:n], (allele, chain, family))
    texts = list(cuts)
    scores = family_scores(texts, names).numpy()
    own = family_identity(texts, names).numpy()
    check = pd.DataFrame([dict(zip(("allele", "chain", "label"), v)) for v in cuts.values()])
    check["predicted"] = np.asarray(names)[scores.argmax(1)]
    check["own identity"] = own[np.arange(len(texts)), [names.index(k) for k in check.label]]
    check = check.join(pd.DataFrame(scores, columns=names))
    others = check[check.label != target]
    accuracy = (
        check.assign(correct=check.predicted == check.label)
        .groupby("chain")
        .agg(cuts=("correct", "size"), accuracy=("correct", "mean"))
    )
    accuracy[f"{target} above 1/L (other families)"] = (others[target] > 1 / len(names)).groupby(others.chain).mean()
    return check, accuracy


def protein_words(check: pd.DataFrame, target: str = FAMILY_TARGET) -> dict:
    """Glue values for the germline check of a protein model (the BBC scorer check's counterpart)."""
    wrong = check[check.predicted != check.label]
    return {
        "acc_cut": f"{(check.predicted == check.label).mean():.0%}",
        "acc_whole": "not measured (germline cuts only)",
        "errors_to_politics": ("none (it made none)" if wrong.empty else f"{(wrong.predicted == target).mean():.0%}"),
        "politics_misread_as": ", ".join(
            f"{k} ({v})" for k, v in wrong[wrong.label == target].predicted.value_counts().head(3).items()
        )
        or "none",
    }


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


def recurrence_table(
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
# Chance text and the estimates the verdicts of section 6.2 are judged on (rules: verdicts.py)
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


def chance_tokens(cond, count: int, n: int, *, seed: int = 0) -> torch.Tensor:
    """Basin-free text, the chance level of the chapter's claims: `count` states [count, n] of tokens
    drawn uniformly and independently from the model's allowed tokens (no model involved, so no basin,
    no seed topic and no structure). A model whose conditionals are uniform (a random-weight MLM is
    close to that) has exactly this law as its stationary law."""
    count, n = check_count(count, "count", 1), check_count(n, "n", 1)
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    generator = torch.Generator().manual_seed(int(seed))
    return allowed[torch.randint(len(allowed), (count, n), generator=generator)]


def state_topic_scores(cond, tokens: torch.Tensor, labels=tuple(TOPIC_LABELS), **scorer) -> torch.Tensor:
    """Topic scores [B, R, L] of chain states [B, R, n] (or [B, L] of states [B, n]), in one batched call."""
    if tokens.dim() == 2:
        return scores_or_uniform(cond.decode_batch(tokens), labels, **scorer)
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


CROSSING_COLUMNS = [
    "chain",
    "seed_topic",
    "control_label",
    "looks",
    "target_peak",
    "target_crossed",
    "control_crossed",
    "target_share",
    "control_share",
    "first_crossing",
]


def crossing_table(
    frame: pd.DataFrame, labels, baseline: float, target: str = "politics", seed_labels: dict | None = None
) -> pd.DataFrame:
    """Per chain seeded outside `target`'s topic, from a topic_frame, over its records after the start
    (`looks` of them): whether `target` scores above `baseline` at some record (target_crossed) and
    its peak, the share of records where it does (target_share, the per-chain statistic the verdict
    uses: below ceiling unless every record crosses), the same two for the chain's control label
    (control_labels) on the same records, and the first step at which `target` crosses (NaN: never)."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    if baseline is None or not 0 < baseline < 1:
        raise ValueError(f"baseline must be a number in (0, 1) (1/L for L labels), got {baseline!r}")
    labels = list(topic_descriptions(labels))
    missing = [c for c in ["chain", "step", "seed_topic", *labels] if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(
            f"frame must be non-empty with columns chain, step, seed_topic and the labels; missing {missing}"
        )
    later = frame[(frame.step > frame.step.min()) & (frame.seed_topic.map(seed_labels) != target)]
    if later.empty:
        return pd.DataFrame(columns=CROSSING_COLUMNS)
    chains = later.groupby("chain", sort=True)
    peaks, topics = chains[labels].max(), chains.seed_topic.first()
    above = (later[labels] > baseline).groupby(later.chain, sort=True).mean()
    controls = control_labels([seed_labels[t] for t in topics], labels, target)
    control_peak = np.array([peaks.loc[c, k] for c, k in zip(peaks.index, controls)])
    control_share = np.array([above.loc[c, k] for c, k in zip(peaks.index, controls)])
    first = later[later[target] > baseline].groupby("chain").step.min().reindex(peaks.index)
    return pd.DataFrame(
        {
            "chain": peaks.index,
            "seed_topic": topics.to_numpy(),
            "control_label": controls,
            "looks": chains.size().to_numpy(),
            "target_peak": peaks[target].to_numpy(),
            "target_crossed": peaks[target].to_numpy() > baseline,
            "control_crossed": control_peak > baseline,
            "target_share": above[target].to_numpy(),
            "control_share": control_share,
            "first_crossing": first.to_numpy(dtype=float),
        }
    ).reset_index(drop=True)


def welch_interval(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """mean(x) - mean(y) with Welch's t interval (two independent samples, unequal variances):
    (estimate, low, high); NaNs when either sample has fewer than two finite values. Both samples
    constant: the interval is the estimate itself."""
    from scipy.stats import t

    x, y = (np.asarray(v, dtype=float).reshape(-1) for v in (x, y))
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) < 2 or len(y) < 2:
        return math.nan, math.nan, math.nan
    estimate = float(x.mean() - y.mean())
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if vx + vy == 0:
        return estimate, estimate, estimate
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    half = float(t.ppf(0.5 + level / 2, df)) * math.sqrt(vx + vy)
    return estimate, estimate - half, estimate + half


def recurrence_verdict(crossings: pd.DataFrame, chance_target, baseline: float) -> dict:
    """The politics-recurrence verdict, per chain and below ceiling. Two comparisons, each judged by
    verdicts.rule_one_sided against 0 and combined by rule_every_part (reproduced when both are,
    differs when either differs):
    (a) politics against another label: the mean over chains of target_share - control_share (the
        share of a chain's records above the baseline for the target minus that for its control label,
        paired on the same chain and records), Student's t interval;
    (b) politics against basin-free text: mean target_share minus the share of chance texts
        (chance_tokens, scored the same way: `chance_target` holds their target scores) above the
        baseline, Welch's interval.
    Returns {"verdict", "reason", "label": (est, low, high), "chance": (est, low, high), "chance_share"}."""
    chance = np.asarray(chance_target, dtype=float) > baseline
    nothing = (math.nan,) * 3
    if len(crossings) < 2:
        return {
            "verdict": INCONCLUSIVE,
            "reason": "fewer than two chains seeded outside politics: no interval",
            "label": nothing,
            "chance": nothing,
            "chance_share": float(chance.mean()) if len(chance) else math.nan,
        }
    share = crossings.target_share.to_numpy(dtype=float)
    label = mean_interval(share - crossings.control_share.to_numpy(dtype=float))
    against = welch_interval(share, chance.astype(float))
    parts, reasons = [], []
    for name, (estimate, low, high) in (("vs a control label", label), ("vs basin-free text", against)):
        verdict, reason = rule_one_sided(low, high, 0.0, "above", estimate=estimate)
        parts.append(verdict)
        reasons.append(f"{name}: {estimate:+.2f}, {reason}" if math.isfinite(estimate) else f"{name}: {reason}")
    verdict, tally = rule_every_part(parts, ["vs a control label", "vs basin-free text"])
    return {
        "verdict": verdict,
        "reason": f"{tally}; " + "; ".join(reasons),
        "label": label,
        "chance": against,
        "chance_share": float(chance.mean()),
    }


def rise_table(
    frame: pd.DataFrame, chance_target, target: str = "politics", seed_labels: dict | None = None
) -> pd.DataFrame:
    """Table 3a per seed topic outside `target`'s: the target score's mean rise from the first to the
    last step over the topic's chains (t interval) and its mean at the last step minus its mean on
    basin-free text (`chance_target`: the chance texts' target scores; Welch's interval). A part is
    reproduced when both lie above 0 (rule_every_part over the two rule_one_sided verdicts): a rise
    that dissolving into word salad explains does not count. Columns chains, rise, rise_low,
    rise_high, end_vs_chance, end_low, end_high, verdict, reason."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    missing = [c for c in ("chain", "step", "seed_topic", target) if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"frame must be non-empty with columns chain, step, seed_topic, {target}; missing {missing}")
    first, last = frame.step.min(), frame.step.max()
    rows = []
    for topic, group in frame[frame.seed_topic.map(seed_labels) != target].groupby("seed_topic", sort=False):
        start = group[group.step == first].set_index("chain")[target]
        end = group[group.step == last].set_index("chain")[target].reindex(start.index)
        rise, versus = mean_interval(end - start), welch_interval(end, chance_target)
        verdicts = [rule_one_sided(v[1], v[2], 0.0, "above", estimate=v[0]) for v in (rise, versus)]
        verdict, reason = rule_every_part([v for v, _ in verdicts], ["rise from the start", "end vs chance"])
        rows.append(
            {
                "seed topic": topic,
                "chains": len(start),
                "rise": rise[0],
                "rise_low": rise[1],
                "rise_high": rise[2],
                "end_vs_chance": versus[0],
                "end_low": versus[1],
                "end_high": versus[2],
                "verdict": verdict,
                "reason": reason,
            }
        )
    columns = ["chains", "rise", "rise_low", "rise_high", "end_vs_chance", "end_low", "end_high", "verdict", "reason"]
    return pd.DataFrame(rows, columns=["seed topic", *columns]).set_index("seed topic")


def seed_loss_intervals(start, end, chance_end) -> dict:
    """Per chain, its seed label's score at the start and at the last step, and chance_end [M, C]: the
    same label's score on M basin-free texts (chance_tokens), in the chain's column. Returns
    {"fall": (estimate, low, high) of mean(start - end), "beyond_chance": (estimate, low, high) of the
    mean over chains of the share of chance texts scoring the seed label higher than the chain's last
    state (ties count half; 0.5 when the chain ends like basin-free text, whatever the skew of the
    scores)}, Student's t intervals over chains; NaNs with fewer than two chains or a non-finite score."""
    start, end, chance_end = (np.asarray(v, dtype=float) for v in (start, end, chance_end))
    if start.ndim != 1 or start.shape != end.shape or chance_end.ndim != 2 or chance_end.shape[1] != len(end):
        raise ValueError(
            f"need start and end [C] and chance_end [M, C] of one length C, got {start.shape}, "
            f"{end.shape}, {chance_end.shape}"
        )
    nothing = (math.nan, math.nan, math.nan)
    if len(start) < 2 or not np.isfinite(np.concatenate([start, end, chance_end.ravel()])).all():
        return {"fall": nothing, "beyond_chance": nothing}
    above = ((chance_end > end) + 0.5 * (chance_end == end)).mean(0)
    return {"fall": mean_interval(start - end), "beyond_chance": mean_interval(above)}


def seed_loss_verdict(loss: dict) -> tuple[str, str]:
    """The seed-topic-loss verdict: verdicts.rule_one_sided on the interval of the share of basin-free
    texts scoring the seed label higher than the chain's last state, against 0.5 (the chain ends no
    further from its topic than word salad). Reproduced above 0.5 (the chains end further from their
    topic than salad: they moved on to other readable text); differs at or below 0.5 (they keep their
    topic than salad has); inconclusive when it contains 0.5 (a chain that dissolves into salad)."""
    estimate, low, high = loss["beyond_chance"]
    verdict, reason = rule_one_sided(low, high, 0.5, "above", estimate=estimate)
    fall = loss["fall"]
    words = f"fall from the start {fall[0]:+.3f} [{fall[1]:+.3f}, {fall[2]:+.3f}]; " if finite(*fall) else ""
    return verdict, words + f"chance texts scoring higher: {reason}"


def seed_loss_table(seed_topic, start, end, chance_end) -> pd.DataFrame:
    """seed_loss_intervals and seed_loss_verdict per seed topic (the paper: seed-topic scores fall "in
    every case"): seed_topic [C] names each chain's topic; start, end [C] and chance_end [M, C] as in
    seed_loss_intervals. Columns chains, fall, fall_low, fall_high, beyond, beyond_low, beyond_high,
    verdict, reason; one row per seed topic, in order of first appearance."""
    seed_topic = np.asarray(list(seed_topic), dtype=object)
    start, end, chance_end = (np.asarray(v, dtype=float) for v in (start, end, chance_end))
    if seed_topic.shape != start.shape or chance_end.ndim != 2 or chance_end.shape[1] != len(seed_topic):
        raise ValueError(
            f"need seed_topic, start and end [C] and chance_end [M, C] of one length C, got "
            f"{seed_topic.shape}, {start.shape}, {chance_end.shape}"
        )
    rows = []
    for topic in dict.fromkeys(seed_topic):
        at = seed_topic == topic
        loss = seed_loss_intervals(start[at], end[at], chance_end[:, at])
        verdict, reason = seed_loss_verdict(loss)
        rows.append(
            {
                "seed topic": topic,
                "chains": int(at.sum()),
                **dict(zip(("fall", "fall_low", "fall_high"), loss["fall"])),
                **dict(zip(("beyond", "beyond_low", "beyond_high"), loss["beyond_chance"])),
                "verdict": verdict,
                "reason": reason,
            }
        )
    columns = ["chains", "fall", "fall_low", "fall_high", "beyond", "beyond_low", "beyond_high", "verdict", "reason"]
    return pd.DataFrame(rows, columns=["seed topic", *columns]).set_index("seed topic")


def seed_loss_topics_verdict(losses: pd.DataFrame) -> tuple[str, str]:
    """seed_topic_loss: rule_every_part over the seed topics of seed_loss_table (a new rule shape made of
    verdicts' rules: rule_one_sided per topic, combined by rule_every_part)."""
    return rule_every_part(losses.verdict.tolist(), losses.index.tolist())


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
# A protein MLM (AntiBERTy): germline seeds always, shorter chains at quick (sized to 2 CPUs)
PROTEIN_SETTINGS = {
    "smoke": {**SETTINGS["smoke"], "passages": "germline"},
    "quick": {**SETTINGS["quick"], "steps": 600, "record_every": 25, "passages": "germline"},
    "paper": {**SETTINGS["paper"], "passages": "germline"},
}

# MS MARCO passages carry no topic. The paper's five seed topics are not named beyond food, and every
# one of them gains politics, so none is politics: we take five non-politics labels, and each MS MARCO
# passage's topic is the label the scorer puts first on it (leading_label_seeds).
MS_MARCO_TOPICS = ("health", "food", "sport", "technology", "finance")
# MS MARCO passages scored per chain wanted, to find enough passages led by each topic
MS_MARCO_POOL = 40


def settings(profile: str, cond=None, **overrides) -> SimpleNamespace:
    """The chapter's settings (section 6.2.1): the profile's row of SETTINGS, or of PROTEIN_SETTINGS when
    `cond` is a protein model (its seeds are always germline V genes), overridden where an override is set
    (bt.profile_settings; `passages` "" is the profile's). Derived: `protein`, `temperature` (1 unless
    given), `scorer` (topic_scores' model: None for the embedding stand-in, an NLI model's name, or
    FAMILY_SCORER), `labels`, the `target` label (politics, or FAMILY_TARGET), `seed_labels` (seed topic
    -> its label), `baseline` 1/L and `score_every` (records between scored states)."""
    protein = is_protein(cond)
    temperature = check_temperature(overrides.pop("temperature", 1.0))
    scorer = overrides.pop("scorer", "")
    cfg = bt.profile_settings(profile, PROTEIN_SETTINGS if protein else SETTINGS, **overrides)
    cfg.passages = "germline" if protein else cfg.passages
    allowed = ("germline",) if protein else ("bbc", "ms_marco")
    if cfg.passages not in allowed:
        raise ValueError(f"passages must be one of {allowed} for this model, got {cfg.passages!r}")
    labels = germline_families() if protein else list(TOPIC_LABELS)
    return SimpleNamespace(
        **vars(cfg),
        protein=protein,
        temperature=temperature,
        scorer=FAMILY_SCORER if protein else (scorer or None),
        labels=labels,
        target=FAMILY_TARGET if protein else "politics",
        seed_labels=seed_labels_for(cfg.passages),
        baseline=1 / len(labels),
        score_every=max(1, round(cfg.record_every / cfg.pca_every)),
    )


def seed_labels_for(passages: str) -> dict:
    """Seed topic -> the label that stands for it: BBC's five sections, MS_MARCO_TOPICS (labels
    themselves) or the germline seed families."""
    if passages == "bbc":
        return dict(BBC_TOPIC_LABELS)
    if passages == "ms_marco":
        return {t: t for t in MS_MARCO_TOPICS}
    if passages == "germline":
        return {f: f for f in FAMILY_SEEDS}
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


def chain_seeds(cond: MaskedLMConditionals, cfg: SimpleNamespace, *, seed: int = 0) -> list[Passages]:
    """The chains' seeds (settings' cfg), one Passages of cfg.n_seeds per seed topic of cfg.seed_labels."""
    topics = list(cfg.seed_labels)
    if cfg.passages == "germline":
        return family_seeds(cond, cfg.seq_len, cfg.n_seeds, seed=seed)
    if cfg.passages == "ms_marco":
        return leading_label_seeds(cond, cfg.seq_len, cfg.n_seeds, cfg.labels, topics, seed=seed, model=cfg.scorer)
    return [seed_passages(cond, cfg.seq_len, cfg.n_seeds, seed=seed, topic=t) for t in topics]


def run_setup(cfg: SimpleNamespace, seed_topic) -> dict:
    """The protocol items of a run, keyed as paper_claims.csv's protocol: `chains` counts the chains the
    statistics cover, those seeded outside the target's topic (the paper's 50 are 5 topics x 10 seeds,
    none of them politics: every topic gains politics); `scorer` names the scorer ("MiniLM embedding
    zero-shot" for the stand-in); `labels` their number."""
    chains = sum(cfg.seed_labels[t] != cfg.target for t in seed_topic)
    scorer = (
        cfg.scorer
        if cfg.scorer == FAMILY_SCORER
        else Path(cfg.scorer).name
        if cfg.scorer
        else "MiniLM embedding zero-shot"
    )
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
# The scorer check, the tables a reader sees and the chapter's figures
# --------------------------------------------------------------------------------------------


def _cut_name(n: int) -> str:
    return f"first {n} tokens"


def bbc_check(
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


def check_accuracy(check: pd.DataFrame) -> pd.DataFrame:
    """Per text length of bbc_check: paragraphs scored and the share whose predicted label is right."""
    return (
        check.assign(correct=check.predicted == check.label)
        .groupby("length")
        .correct.agg(["count", "mean"])
        .rename(columns={"count": "paragraphs", "mean": "accuracy"})
    )


def accuracy_view(accuracy: pd.DataFrame):
    """check_accuracy's (or germline_check's) table for the page: shares as percentages."""
    shares = {c: "{:.0%}" for c in accuracy.columns if c not in ("paragraphs", "cuts")}
    return bt.reading_table(accuracy.reset_index(), formats=shares)


def labels_view(labels=tuple(TOPIC_LABELS)):
    """The topic labels, their descriptions (what the embedding scorer compares a text with) and the BBC
    topic each stands for."""
    bbc = {label: topic for topic, label in BBC_TOPIC_LABELS.items()}
    descriptions = topic_descriptions(labels)
    return bt.reading_table(
        pd.DataFrame(
            {
                "label": list(descriptions),
                "description": descriptions.values(),
                "BBC topic": [bbc.get(k, "—") for k in descriptions],
            }
        )
    )


def table3_view(table3: pd.DataFrame, target: str = "politics"):
    """Table 3 (recurrence_table, with the seed label's score on basin-free text) for the page: per seed
    topic, the target's and the seed label's mean score from start to end, the chains crossing the
    baseline, the target's peak and the seed label's mean score on basin-free text."""

    def arrow(start, end):
        return [f"{a:.3f} → {b:.3f}" for a, b in zip(table3[start], table3[end])]

    view = pd.DataFrame(
        {
            "seed topic (label)": [f"{t} ({k})" for t, k in zip(table3.index, table3["seed label"])],
            f"{target}, start → end": arrow(f"{target} at start", f"{target} at end"),
            "seed label, start → end": arrow("seed score at start", "seed score at end"),
            "chains crossing": [f"{c} of {n}" for c, n in zip(table3["chains crossing"], table3.chains)],
            f"peak {target}": table3[f"peak {target}"].to_numpy(),
            "seed label, basin-free text": table3["seed score, basin-free text"].to_numpy(),
        }
    )
    return bt.reading_table(view, formats={"seed label, basin-free text": "{:.3f}", f"peak {target}": "{:.3f}"})


def recurrence_view(
    crossings: pd.DataFrame, recurrence: dict, chance_texts: int, labels: int, target: str = "politics"
):
    """The politics looks against chance: per row (the target on our chains, their control labels on the
    same looks, the target on basin-free text) how many chains or texts, the mean share of looks above
    1/L and the share ever above it (no such share for single texts)."""
    above = f"1/{labels}"
    view = pd.DataFrame(
        {
            "": [f"{target}, our chains", "control label, same chains and looks", f"{target}, basin-free text"],
            "chains or texts": [len(crossings)] * 2 + [chance_texts],
            f"share of looks above {above}": [
                crossings.target_share.mean(),
                crossings.control_share.mean(),
                recurrence["chance_share"],
            ],
            f"ever above {above}": [crossings.target_crossed.mean(), crossings.control_crossed.mean(), math.nan],
        }
    )
    return bt.reading_table(view, formats={c: "{:.2f}" for c in view.columns[2:]})


def _interval_column(
    frame: pd.DataFrame, estimate: str, low: str, high: str, digits: int, signed: bool = True
) -> list[str]:
    return [
        bt.interval_text(r[estimate], r[low], r[high], digits=digits, signed=signed, missing="fewer than two chains")
        for _, r in frame.iterrows()
    ]


def rises_view(rises: pd.DataFrame, target: str = "politics"):
    """Table 3a (rise_table) for the page: per seed topic, the target's rise and its end against
    basin-free text, each with its 95% interval, and the topic's verdict."""
    view = pd.DataFrame(
        {
            "seed topic": rises.index,
            "chains": rises.chains.to_numpy(),
            f"{target} rise": _interval_column(rises, "rise", "rise_low", "rise_high", 3),
            "end minus basin-free text": _interval_column(rises, "end_vs_chance", "end_low", "end_high", 3),
            "verdict": rises.verdict.to_numpy(),
        }
    )
    return bt.reading_table(view)


def loss_view(loss: pd.DataFrame):
    """seed_loss_table for the page: per seed topic, the seed label's fall from the start and the share of
    basin-free texts scoring it higher than the last state (null 0.5), each with its 95% interval, and
    the topic's verdict."""
    view = pd.DataFrame(
        {
            "seed topic": loss.index,
            "chains": loss.chains.to_numpy(),
            "fall from the start": _interval_column(loss, "fall", "fall_low", "fall_high", 3),
            "basin-free texts scoring higher": _interval_column(
                loss, "beyond", "beyond_low", "beyond_high", 2, signed=False
            ),
            "verdict": loss.verdict.to_numpy(),
        }
    )
    return bt.reading_table(view)


def overall_view(overall: pd.DataFrame, target: str = "politics", top: int = 5):
    """leading_label_shares over all chains (one row) for the page: the `top` labels that lead most often
    and the target, with their shares of the recorded states."""
    shares = overall.iloc[0].sort_values(ascending=False)
    keep = list(shares.index[:top]) + ([target] if target not in shares.index[:top] else [])
    view = pd.DataFrame({"leading label": keep, "share of recorded states": shares[keep].to_numpy()})
    return bt.reading_table(view, formats={"share of recorded states": "{:.0%}"})


def endpoints_view(endpoints: pd.DataFrame):
    """One example endpoint per prefix run (the prefix is part of the text)."""
    return bt.reading_table(endpoints.groupby("prefix", sort=False).endpoint.first().reset_index())


def confusion_figure(check: pd.DataFrame, labels):
    """The scorer check as confusion heatmaps, one per text length (true BBC topic's label against the
    predicted label). Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    names = list(topic_descriptions(labels))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (length, part) in zip(axes, check.groupby("length")):
        table = confusion_table(part.label, torch.tensor(part[names].to_numpy()), names)
        table = table.loc[list(BBC_TOPIC_LABELS.values())]
        sns.heatmap(table, annot=True, fmt="d", cmap="Blues", cbar=False, ax=ax)
        ax.set(title=f"held-out BBC, {length}", xlabel="predicted label", ylabel="true label (BBC topic)")
    fig.tight_layout()
    return fig


def leading_figure(shares: pd.DataFrame, cfg: SimpleNamespace):
    """leading_label_shares per seed topic as a heatmap. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(9, 3.6))
    sns.heatmap(
        shares,
        annot=True,
        fmt=".2f",
        cmap="rocket_r",
        vmin=0,
        vmax=1,
        ax=ax,
        cbar_kws={"label": "share of recorded states"},
    )
    ax.set(
        xlabel="leading label",
        ylabel="seed topic",
        title=f"Leading topic label along the chains (steps 1 to {cfg.steps:,}, tau = {cfg.temperature:g})",
    )
    return fig


def mean_scores_figure(frame: pd.DataFrame, cfg: SimpleNamespace):
    """Mean topic score over all chains along the run, per label (the seed families only on a protein
    model: 22 families crowd the plot), with the baseline 1/L. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    shown = list(cfg.seed_labels.values()) if cfg.protein else cfg.labels
    path = frame.melt(id_vars=["chain", "step", "seed_topic"], value_vars=shown, var_name="label", value_name="score")
    fig, ax = plt.subplots(figsize=(9, 4))
    sns.lineplot(data=path, x="step", y="score", hue="label", palette="tab10", errorbar=None, ax=ax)
    ax.axhline(cfg.baseline, color="grey", ls="--", lw=1, label=f"baseline 1/{len(cfg.labels)}")
    ax.set(xlabel="Glauber step $t$", ylabel="mean topic score", title="Mean topic scores over all chains")
    ax.legend(ncol=2, fontsize=8)
    return fig


def pca_paths(cond: MaskedLMConditionals, trajectory: Trajectory, chains, embedder=None) -> dict:
    """Figs. 1 and 4: per chain, its recorded states' texts and their first two principal components
    (pca_2d) of the sentence embeddings, or of family_identity on a protein model (embedder None).
    Returns {chain: SimpleNamespace(texts, xy, explained)}."""
    paths = {}
    for chain in chains:
        texts = cond.decode_batch(trajectory.tokens[chain])
        xy, explained = pca_2d(family_identity(texts) if embedder is None else embed(embedder, texts))
        paths[chain] = SimpleNamespace(texts=texts, xy=xy, explained=explained)
    return paths


def pca_figure(paths: dict, steps, seed_topic):
    """pca_paths drawn side by side: consecutive states joined, coloured from warm (early) to cool
    (late) by Glauber step, first and last state marked. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(paths), figsize=(6 * len(paths), 5), squeeze=False)
    for ax, (chain, path) in zip(axes[0], paths.items()):
        xy = path.xy
        ax.plot(xy[:, 0], xy[:, 1], color="grey", lw=0.4, alpha=0.5)
        dots = ax.scatter(xy[:, 0], xy[:, 1], c=np.asarray(steps), cmap="coolwarm_r", s=14, alpha=0.6)
        ax.set(
            xlabel=f"PC 1 ({path.explained[0]:.0%} of variance)",
            ylabel=f"PC 2 ({path.explained[1]:.0%})",
            title=f"chain {chain} ({seed_topic[chain]}): {len(set(path.texts))} distinct of {len(path.texts)} states",
        )
        ax.scatter(*xy[0], marker="o", s=90, facecolor="none", color="k", label="first state")
        ax.scatter(*xy[-1], marker="X", s=90, color="k", label="last state")
        ax.legend(loc="best", fontsize=8)
        fig.colorbar(dots, ax=ax, label="Glauber step")
    fig.tight_layout()
    return fig


def prefix_figure(mix: pd.DataFrame):
    """The topic mix of the free part per frozen prefix (C.4) and its change against no prefix, as two
    heatmaps. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    sns.heatmap(mix, annot=True, fmt=".2f", cmap="rocket_r", vmin=0, ax=axes[0], cbar=False)
    sns.heatmap(mix - mix.loc["(none)"], annot=True, fmt="+.2f", cmap="vlag", center=0, ax=axes[1], cbar=False)
    axes[0].set(title="mean topic score of the free part, second half", xlabel="", ylabel="frozen prefix")
    axes[1].set(title="change against no prefix", xlabel="label", ylabel="frozen prefix")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# The chapter's claims rows and the words its prose quotes (kept out of the notebook's visible cells)
# --------------------------------------------------------------------------------------------

_MISSING = "fewer than two chains: no estimate"


def scorer_check_words(check: pd.DataFrame, accuracy: pd.DataFrame, n: int, target: str = "politics") -> dict:
    """Glue values for the scorer check (bbc_check with n-token snippets): accuracy on snippets and whole
    paragraphs, the share of the scorer's mistakes on non-`target` snippets that go to `target`, and
    where its misses on `target` snippets went."""
    cut_name = _cut_name(n)
    snips = check[check.length == cut_name]
    wrong = snips[snips.predicted != snips.label]
    others_wrong = wrong[wrong.label != target]
    misses = wrong[wrong.label == target].predicted.value_counts()
    return {
        "acc_cut": f"{accuracy.accuracy[cut_name]:.0%}",
        "acc_whole": f"{accuracy.accuracy['whole paragraph']:.0%}",
        "errors_to_politics": (
            "none (it made none)" if others_wrong.empty else f"{(others_wrong.predicted == target).mean():.0%}"
        ),
        "politics_misread_as": ", ".join(f"{k} ({v})" for k, v in misses.head(3).items()) or "none",
    }


def trajectory_words(paths: dict, every: int) -> dict:
    """Glue values for the PCA section (pca_paths): records drawn, distinct states among them, and what
    repeats mean."""
    records = sum(len(p.texts) for p in paths.values())
    distinct = sum(len(set(p.texts)) for p in paths.values())
    repeats = records - distinct
    return {
        "pca_records": f"{records:,}",
        "pca_distinct": f"{distinct:,}",
        "pca_every": f"{every}",
        "pca_repeats": (
            "no recorded state repeats: at this temperature the chains do not sit in exact traps between records"
        )
        if not repeats
        else (f"{repeats} records repeat an earlier state of their chain: exact traps, drawn as dark, tight clusters"),
    }


def first_chains(frame: pd.DataFrame, per_topic: int, by: str = "seed_topic") -> pd.DataFrame:
    """The rows of the first `per_topic` chains (in chain order) of every group of `by`."""
    per_topic = check_count(per_topic, "per_topic", 1)
    keep = frame.groupby(by, sort=False).chain.unique().map(lambda chains: sorted(chains)[:per_topic])
    return frame[frame.chain.isin([c for chains in keep for c in chains])]


def endpoint_chains(available: int) -> int:
    """Chains per seed topic for Table 5's endpoint row: the paper's count (its protocol in
    paper_claims.csv), or all we have when fewer."""
    return min(int(bt.paper_protocol("endpoint_topics_crossing")["chains_per_topic"]), int(available))


def endpoint_table(frame: pd.DataFrame, cfg: SimpleNamespace) -> pd.DataFrame | None:
    """Table 5's chains (B.5): recurrence_table of the first endpoint_chains per seed topic, with
    politics as the target; None on a protein model (Table 5 is BERT-family politics)."""
    if cfg.protein:
        return None
    return recurrence_table(first_chains(frame, endpoint_chains(cfg.n_seeds)), "politics", cfg.baseline)


def _endpoint_row(table3: pd.DataFrame, baseline: float, *, setup: dict, model: str, target: str = "politics") -> dict:
    """Table 5's endpoint comparison (B.5) as a model-specific claims row: how many seed topics other
    than the target end, on average over their chains, above the baseline. table3: endpoint_table;
    setup: our protocol items (chains per topic are read from table3)."""
    ends = table3.drop(index=target, errors="ignore")[f"{target} at end"]
    chains = sorted(set(table3.chains.astype(int)))
    per_topic = str(chains[0]) if len(chains) == 1 else f"{chains[0]}-{chains[-1]}"
    # Table 5 counts chains per topic and reports endpoints only: no total, no recording interval
    setup = {**{k: v for k, v in setup.items() if k not in ("chains", "record_every")}, "chains_per_topic": per_topic}
    quantity = (
        f"seed topics other than {target} whose chains' mean {target} score at the last step is above "
        f"{baseline:.3f} (Table 5)"
    )
    if ends.empty:
        return bt.model_specific_row(
            "endpoint_topics_crossing",
            quantity,
            math.nan,
            f"no seed topic outside {target} in this run",
            model=model,
            setup=setup,
        )
    marks = ", ".join(f"{topic} {value:.2f}{' ✓' if value > baseline else ''}" for topic, value in ends.items())
    above = int((ends > baseline).sum())
    return bt.model_specific_row(
        "endpoint_topics_crossing",
        quantity,
        above,
        f"{above} of {len(ends)} topics ({marks})",
        model=model,
        setup=setup,
        low=above,
        high=above,
    )


def rises_verdict(rises: pd.DataFrame) -> tuple[str, str]:
    """politics_rises_every_topic: rule_every_part over the seed topics of rise_table."""
    return rule_every_part(rises.verdict.tolist(), rises.index.tolist())


def _protein_quantities(target: str = FAMILY_TARGET, labels: int | None = None) -> dict:
    """The general claims' quantity texts on a protein model: germline families as topics, `target` for
    politics, uniform random residues as basin-free text."""
    scorer = (
        f"topic = nearest human germline family by identity, softmax over {labels or 'the'} families of "
        "the identical-residue count"
    )
    return {
        "politics_recurrence": f"{target} minus a control family, and minus uniform random residues, in the share "
        f"of a chain's looks with {target}'s score above 1/L (chains seeded outside "
        f"{target}; {scorer}; the weaker difference)",
        "politics_rises_every_topic": f"per seed family outside {target}: mean {target} score rise from start "
        f"to end, and end minus uniform random residues ({scorer})",
        "seed_topic_loss": "per seed family: share of uniform random residue strings scoring the seed family "
        f"higher than the chain's last state (mean over its chains; null 0.5; {scorer})",
    }


def _recurrence_text(crossings: pd.DataFrame, recurrence: dict, target: str) -> str:
    if crossings.empty:
        return f"no chain seeded outside {target} in this run"
    return (
        f"share of a chain's looks above 1/L: {target} {crossings.target_share.mean():.2f}, control label "
        f"{crossings.control_share.mean():.2f}, basin-free text {recurrence['chance_share']:.2f}; {target} "
        f"minus control {bt.interval_text(*recurrence['label'], signed=True, missing=_MISSING)}, minus "
        f"basin-free text {bt.interval_text(*recurrence['chance'], signed=True, missing=_MISSING)}"
    )


def _rises_text(rises: pd.DataFrame, target: str) -> str:
    return (
        "; ".join(
            f"{topic}: rise {bt.interval_text(r.rise, r.rise_low, r.rise_high, signed=True, missing=_MISSING)}, "
            f"end minus chance {bt.interval_text(r.end_vs_chance, r.end_low, r.end_high, signed=True, missing=_MISSING)}"
            for topic, r in rises.iterrows()
        )
        or f"no seed topic outside {target} in this run"
    )


def _loss_text(loss: pd.DataFrame) -> str:
    return (
        "; ".join(
            f"{topic}: {bt.interval_text(r.beyond, r.beyond_low, r.beyond_high, digits=2, missing=_MISSING)} (fall "
            f"from the start {bt.interval_text(r.fall, r.fall_low, r.fall_high, digits=3, missing=_MISSING)})"
            for topic, r in loss.iterrows()
        )
        or "no seed topic in this run"
    )


def _peak_text(crossings: pd.DataFrame, target: str) -> str:
    if crossings.empty:
        return f"no chain seeded outside {target} was scored after its start"
    return f"{float(crossings.target_peak.max()):.3f}"


def _recurrence_row(crossings: pd.DataFrame, recurrence: dict, target: str, quantity: str) -> dict:
    """politics_recurrence: the weaker of the two differences (recurrence_verdict) as the estimate."""
    weaker = min((recurrence["label"], recurrence["chance"]), key=lambda v: v[1] if finite(v[1]) else -math.inf)
    return bt.claim_row(
        "politics_recurrence",
        quantity,
        weaker[0],
        _recurrence_text(crossings, recurrence, target),
        recurrence["verdict"],
        recurrence["reason"],
        low=weaker[1],
        high=weaker[2],
        null=0.0,
    )


def _rises_row(rises: pd.DataFrame, target: str, quantity: str) -> dict:
    """politics_rises_every_topic: the number of seed topics reproduced, judged by rises_verdict."""
    return bt.claim_row(
        "politics_rises_every_topic",
        quantity,
        int((rises.verdict == bt.REPRODUCED).sum()),
        _rises_text(rises, target),
        *rises_verdict(rises),
    )


def _loss_row(loss: pd.DataFrame, quantity: str) -> dict:
    """seed_topic_loss: the number of seed topics reproduced, judged by seed_loss_topics_verdict."""
    return bt.claim_row(
        "seed_topic_loss",
        quantity,
        int((loss.verdict == bt.REPRODUCED).sum()),
        _loss_text(loss),
        *seed_loss_topics_verdict(loss),
    )


def _count_row(crossings: pd.DataFrame, recurrence: dict, *, setup: dict, model: str) -> dict:
    """politics_recurrence_count (BERT's 46 of 50): the share of non-politics chains ever above 1/9."""
    chains, crossed = len(crossings), int(crossings.target_crossed.sum()) if len(crossings) else 0
    low, high = (float(v[0]) for v in bt.share_intervals([crossed], [chains])) if chains else (math.nan, math.nan)
    text = (
        f"{crossed} of {chains} non-politics chains" if chains else _recurrence_text(crossings, recurrence, "politics")
    )
    return bt.model_specific_row(
        "politics_recurrence_count",
        "share of non-politics chains ever above 1/9 politics",
        crossed / chains if chains else math.nan,
        text,
        model=model,
        setup=setup,
        low=low,
        high=high,
    )


def _peak_row(crossings: pd.DataFrame, *, setup: dict, model: str) -> dict:
    """politics_peak (BERT's 0.979): the highest politics score after the start."""
    peak = float(crossings.target_peak.max()) if len(crossings) else math.nan
    return bt.model_specific_row(
        "politics_peak",
        "highest politics score after step 0, non-politics chains",
        peak,
        _peak_text(crossings, "politics"),
        model=model,
        setup=setup,
        low=peak,
        high=peak,
    )


def claim_rows(
    crossings: pd.DataFrame,
    recurrence: dict,
    rises: pd.DataFrame,
    loss: pd.DataFrame,
    table5: pd.DataFrame | None = None,
    *,
    setup: dict,
    model: str,
    target: str = "politics",
    baseline: float | None = None,
) -> list[dict]:
    """The chapter's claims rows (section 6.2): the three general claims, then, with politics as the
    target, BERT's politics count and peak and (given table5, endpoint_table, and the baseline 1/L)
    Table 5's endpoint row.

    crossings: crossing_table; recurrence: recurrence_verdict's dict; rises: rise_table; loss:
    seed_loss_table (per seed topic); setup: run_setup's protocol items. Another target (a protein
    model's germline family) keeps the general rows only, worded for families: the model-specific ones
    are BERT's politics numbers, with no counterpart there."""
    quantities = {} if target == "politics" else _protein_quantities(target, setup.get("labels"))
    rows = [
        _recurrence_row(
            crossings,
            recurrence,
            target,
            quantities.get(
                "politics_recurrence",
                "politics minus control label, and minus basin-free text, in the share of a "
                "chain's looks above 1/L (chains seeded outside politics; the weaker difference)",
            ),
        ),
        _rises_row(
            rises,
            target,
            quantities.get(
                "politics_rises_every_topic",
                "per seed topic outside politics: mean politics rise from start to end, and end minus basin-free text",
            ),
        ),
        _loss_row(
            loss,
            quantities.get(
                "seed_topic_loss",
                "per seed topic: share of basin-free texts scoring the seed label higher than the "
                "chain's last state (mean over its chains; null 0.5)",
            ),
        ),
    ]
    if target != "politics":  # BERT's politics count, peak and Table 5: no protein counterpart
        return rows
    rows += [
        _count_row(crossings, recurrence, setup=setup, model=model),
        _peak_row(crossings, setup=setup, model=model),
    ]
    if table5 is not None:
        rows.append(_endpoint_row(table5, baseline, setup=setup, model=model))
    return rows


def verdict_words(
    crossings: pd.DataFrame, recurrence: dict, rises: pd.DataFrame, loss: pd.DataFrame, target: str = "politics"
) -> dict:
    """Glue values for the prose around the verdicts (the verdicts themselves are glued by the claims):
    chains crossing the baseline, the look shares, the peak, chains ever above 0.5 and the per-topic
    rise and loss texts."""
    chains = len(crossings)
    crossed = int(crossings.target_crossed.sum()) if chains else 0
    label_crossed = int(crossings.control_crossed.sum()) if chains else 0
    strong = int((crossings.target_peak > 0.5).sum()) if chains else 0
    politics, control = (
        (crossings.target_share.mean(), crossings.control_share.mean()) if chains else (math.nan, math.nan)
    )
    return {
        "crossed": f"{crossed} of {chains}",
        "label_crossed": f"{label_crossed} of {chains}",
        "share_politics": f"{politics:.2f}",
        "share_control": f"{control:.2f}",
        "share_chance": f"{recurrence['chance_share']:.2f}",
        "peak": _peak_text(crossings, target),
        "strong": f"{strong} of {chains}",
        "rises": _rises_text(rises, target),
        "seed_loss": _loss_text(loss),
    }


def summary_words(
    table3: pd.DataFrame,
    frame: pd.DataFrame,
    labels,
    mix: pd.DataFrame,
    *,
    q: float,
    looks: int,
    by_chance: float,
    run: str,
    target: str = "politics",
) -> dict:
    """Glue values for the chapter's closing section: seed-topic falls, politics at the start, the
    chance of a crossing, the leading labels over all chains and the prefix shifts (mix None: no prefix
    runs, as on a protein model)."""
    names = list(topic_descriptions(labels))
    rest = table3.drop(index=target, errors="ignore")
    falls = rest.index[rest["seed score at end"] < rest["seed score at start"]]
    own_start = table3.loc[target, "seed score at start"] if target in table3.index else math.nan
    other_start = rest["seed score at start"].mean()
    overall = (
        leading_label_shares(frame[frame.step > frame.step.min()].assign(chains="all"), names, by="chains")
        .loc["all"]
        .sort_values(ascending=False)
    )
    rank = list(overall.index).index(target) + 1
    shift = (mix - mix.loc["(none)"]).drop(index="(none)") if mix is not None else pd.DataFrame()
    kid = [p for p in shift.index if "little kid" in p.lower()]
    return {
        "run": run,
        "seed_falls": f"{len(falls)} of the {len(rest)} non-{target} seed topics ({', '.join(falls) or 'none'})",
        "politics_seed": (
            f"no chain is seeded from {target} in this run"
            if not finite(own_start)
            else f"the {target} row starts from a mean seed-label score of {own_start:.2f}, against "
            f"{other_start:.2f} for the other topics' own labels "
            f"({'lower' if own_start < other_start else 'not lower'})"
        ),
        "false_alarm": f"{q:.0%}",
        "records": f"{looks}",
        "by_chance": f"{by_chance:.2f}",
        "top_labels": ", ".join(f"{k} ({v:.0%})" for k, v in overall.head(3).items()),
        "politics_lead": f"{overall[target]:.0%}",
        "politics_rank": "the label that leads most often" if rank == 1 else f"number {rank} of {len(names)} labels",
        "prefix_gains": "; ".join(f'"{p}": {shift.loc[p].idxmax()} ({shift.loc[p].max():+.2f})' for p in shift.index)
        or "no prefix run",
        "kid_politics": f"{shift.loc[kid[0], target]:+.2f}" if kid else "not measured (no such prefix in this run)",
    }
