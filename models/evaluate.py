"""Evaluate the bundled masked LM and its baseline on held-out BBC News.

    .venv/bin/python models/evaluate.py               # the default L4: metrics.csv, fill_mask.csv
    .venv/bin/python models/evaluate.py --layers 2    # a family member: metrics_l2.csv, fill_mask_l2.csv

Writes `results/model/metrics.csv` (one row per model x metric) and `results/model/fill_mask.csv`
(top-5 predictions for ten held-out sentences with one word masked). Models:

- `minilm-l<N>-bbc-mlm`: the shipped fine-tuned weights in `models/minilm-l<N>-bbc-mlm/` (N = 4 by default).
- `baseline-frozen-l<N>`: the same N pretrained MiniLM layers, frozen, with a fresh MLM head of
  which only the transform and the output bias are trained (a short fixed run; the decoder stays
  tied to the frozen word embeddings). It shows what the fine-tuning adds.

Metrics, on held-out articles deduplicated against training (see `train.split_paragraphs`):
held-out masked-token top-1 accuracy and cross-entropy under standard 15% masking (80/10/10, fixed
seed), and pseudo-perplexity (Salazar et al., 2020: mask each token in turn, PPPL = exp of minus
the mean log-probability over all tokens) of 200 fixed held-out passages of up to 32 tokens.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
from tqdm import tqdm
from transformers import BertForMaskedLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train  # noqa: E402

PLL_PASSAGES = 200
PLL_LEN = 32
FILL_MASK_EXAMPLES = 10
STOPWORDS = frozenset(
    [
        "about",
        "after",
        "also",
        "been",
        "before",
        "being",
        "both",
        "could",
        "does",
        "each",
        "from",
        "have",
        "here",
        "into",
        "just",
        "many",
        "more",
        "most",
        "much",
        "only",
        "other",
        "over",
        "said",
        "says",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "very",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
    ]
)


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


def load_fine_tuned(folder: Path = train.OUT_DIR) -> BertForMaskedLM:
    """The shipped fp16 weights, upcast to float32, in eval mode."""
    return BertForMaskedLM.from_pretrained(folder, dtype=torch.float32).eval()


def train_baseline(steps: int, seed: int, tokenizer, layers: int = train.N_LAYERS) -> BertForMaskedLM:
    """Frozen pretrained encoder of `layers` layers; train only the head's transform and bias (cached)."""
    suffix = "" if layers == train.N_LAYERS else f"-l{layers}"
    cache = train.CACHE_DIR / f"baseline-head{suffix}-steps{steps}-seed{seed}.pt"
    model = train.build_model(seed, layers).eval()  # eval: no dropout in the frozen encoder
    head = model.cls.predictions
    for p in model.parameters():
        p.requires_grad = False
    for p in [*head.transform.parameters(), head.bias]:
        p.requires_grad = True
    if cache.exists():
        model.load_state_dict(torch.load(cache, map_location="cpu"), strict=False)
        return model
    chunks = train.paragraph_chunks("train", tokenizer)
    optimizer = train.make_optimizer(model, lr=1e-3, weight_decay=0.0)
    args = SimpleNamespace(lr=1e-3, steps=steps, warmup=steps // 10, batch_size=32, seed=seed)
    for step in tqdm(range(steps), desc="baseline head", unit="step"):
        train.train_step(model, optimizer, chunks, tokenizer, step, args, torch.device("cpu"))
    cache.parent.mkdir(parents=True, exist_ok=True)
    torch.save({n: p.detach() for n, p in model.named_parameters() if p.requires_grad}, cache)
    return model


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def pll_passages(tokenizer, seed: int = 0) -> list[torch.Tensor]:
    """PLL_PASSAGES fixed held-out passages of up to PLL_LEN content tokens."""
    chunks = train.paragraph_chunks("heldout", tokenizer, size=PLL_LEN)
    order = torch.randperm(len(chunks), generator=torch.Generator().manual_seed(seed))
    return [chunks[i] for i in order[:PLL_PASSAGES].tolist()]


@torch.no_grad()
def pseudo_log_likelihoods(model, passages, tokenizer, batch_size: int = 256) -> torch.Tensor:
    """log p(x_i | x_-i) for every token of every passage (each masked in turn), concatenated."""
    queries = [(p, i) for p in passages for i in range(len(p))]
    scores = []
    for start in range(0, len(queries), batch_size):
        part = queries[start : start + batch_size]
        ids, attention = train.collate([p for p, _ in part], tokenizer)
        rows = torch.arange(len(part))
        cols = torch.tensor([i + 1 for _, i in part])  # +1 for [CLS]
        target = ids[rows, cols].clone()
        ids[rows, cols] = tokenizer.mask_token_id
        hidden = model.bert(input_ids=ids, attention_mask=attention).last_hidden_state
        logp = model.cls(hidden[rows, cols]).log_softmax(-1)
        scores.append(logp[rows, target])
    return torch.cat(scores)


def model_metrics(name: str, model, tokenizer, heldout, passages) -> list[dict]:
    """Tidy metric rows (model, metric, value, n_tokens) for one model."""
    masked = train.heldout_top1(model, heldout, tokenizer)
    pll = pseudo_log_likelihoods(model, passages, tokenizer)
    return [
        {"model": name, "metric": "heldout_masked_top1", "value": masked["top1"], "n_tokens": masked["n_tokens"]},
        {"model": name, "metric": "heldout_masked_loss", "value": masked["loss"], "n_tokens": masked["n_tokens"]},
        {
            "model": name,
            "metric": "heldout_pseudo_perplexity",
            "value": math.exp(-float(pll.mean())),
            "n_tokens": len(pll),
        },
    ]


# --------------------------------------------------------------------------------------------
# Fill-mask examples
# --------------------------------------------------------------------------------------------


def maskable(word: str, tokenizer) -> bool:
    """A lowercase content word of 4+ letters that is a single WordPiece token."""
    return (
        word.isalpha()
        and word.islower()
        and len(word) >= 4
        and word not in STOPWORDS
        and tokenizer.tokenize(word) == [word]
    )


def fill_mask_sentences(tokenizer) -> list[dict]:
    """Ten held-out sentences (two per topic, one per article), one word masked.

    Each is the first usable sentence of an article: the first sentence (8-25 words) of one of its
    deduplicated held-out paragraphs, with the maskable word nearest the middle masked.
    """
    per_topic = FILL_MASK_EXAMPLES // len(train.glauber_core.BBC_TOPICS)
    examples = []
    for topic in train.glauber_core.BBC_TOPICS:
        pairs = train.glauber_core.bbc_paragraphs("heldout", topic)
        by_article = itertools.groupby(pairs, key=lambda pair: pair[0])
        found = (masked_sentence(article, [p for _, p in group], tokenizer) for article, group in by_article)
        examples += itertools.islice((e for e in found if e is not None), per_topic)
    return examples


def masked_sentence(article, paragraphs: list[str], tokenizer) -> dict | None:
    """The first usable masked sentence among an article's held-out paragraphs, or None."""
    for paragraph in paragraphs:
        words = paragraph.split(". ")[0].rstrip(".").split()
        candidates = [i for i, w in enumerate(words) if maskable(w, tokenizer)]
        if 8 <= len(words) <= 25 and candidates:
            pick = min(candidates, key=lambda i: (abs(i - len(words) / 2), i))
            text = " ".join(tokenizer.mask_token if i == pick else w for i, w in enumerate(words))
            return {"article_id": article.id, "text": text + ".", "answer": words[pick]}
    return None


@torch.no_grad()
def fill_mask_rows(name: str, model, tokenizer, examples, k: int = 5) -> list[dict]:
    """Top-k predictions (softmax over the whole vocabulary) at the [MASK] of each example."""
    rows = []
    for number, example in enumerate(examples):
        ids = tokenizer(example["text"], return_tensors="pt")["input_ids"]
        position = int((ids[0] == tokenizer.mask_token_id).nonzero()[0])
        hidden = model.bert(input_ids=ids).last_hidden_state
        probs = model.cls(hidden[0, position]).softmax(-1)
        top = probs.topk(k)
        for rank, (p, token_id) in enumerate(zip(top.values.tolist(), top.indices.tolist()), 1):
            rows.append(
                {
                    "example": number,
                    **example,
                    "model": name,
                    "rank": rank,
                    "token": tokenizer.convert_ids_to_tokens(token_id),
                    "prob": round(p, 4),
                }
            )
    return rows


def write_csv(path: Path, rows: list[dict]):
    """Write dict rows as CSV (columns from the first row)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv=None):
    """Evaluate the fine-tuned model and the baseline; write the two CSVs."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layers", type=int, default=train.N_LAYERS, help="which bundled model (encoder layers)")
    p.add_argument("--baseline-steps", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=train.RESULTS_DIR)
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    tokenizer = train.load_tokenizer()
    name = train.model_name(args.layers)
    models = {
        name: load_fine_tuned(train.MODELS_DIR / name),
        f"baseline-frozen-l{args.layers}": train_baseline(args.baseline_steps, args.seed, tokenizer, args.layers),
    }
    heldout = train.paragraph_chunks("heldout", tokenizer)
    passages = pll_passages(tokenizer, args.seed)
    examples = fill_mask_sentences(tokenizer)
    metrics, fills = [], []
    for name, model in models.items():
        metrics += model_metrics(name, model, tokenizer, heldout, passages)
        fills += fill_mask_rows(name, model, tokenizer, examples)
    suffix = "" if args.layers == train.N_LAYERS else f"_l{args.layers}"
    write_csv(args.out / f"metrics{suffix}.csv", metrics)
    write_csv(args.out / f"fill_mask{suffix}.csv", fills)
    for row in metrics:
        print(f"{row['model']:>20} {row['metric']:<28} {row['value']:.4f}  (n={row['n_tokens']})")


if __name__ == "__main__":
    main()
