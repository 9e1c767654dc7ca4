"""Chain-steps per second of `glauber_core.glauber`, as ratios against baselines run in this process.

(a) naive: one chain, full logits at every position, one forward per step (as common
    Gibbs-from-BERT scripts do); (b) bare: the encoder forward plus the LM head at the masked rows
    for the same batch, with no sampling or bookkeeping; (c) unblocked: the same Glauber run with the whole batch in
    one model call (`block_size` = B), the cost of fixed-shape blocks being `block_cost` = unblocked rate / rate
    (`larger_blocks`: the checked larger calls the batch used, see `MaskedLMConditionals`).
    Run: `make benchmark` or `python benchmarks/glauber_speed.py [--model NAME] [--device cuda]
    [--batches 1 16 64 256]`; `--model bert-base-shape` is a bert-base-sized masked LM with random weights (12
    layers, hidden 768, the bundled word-piece tokenizer) built in place, no download.
The table is also written as CSV (default `results/benchmarks/glauber_speed.csv`, committed: the book's
performance appendix reads it), one row per batch size, with the machine and a free-text `--note`.
"""

import argparse
import datetime
import os
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

import glauber_core as glauber


def timed(function, repeats: int) -> float:
    """Median wall time of one call over `repeats` calls, after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed_once(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def naive_steps(cond, x0: torch.Tensor, steps: int) -> None:
    """One chain, full [L, V] logits every step, multinomial on the masked position."""
    x = x0[0].clone()
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        site = int(torch.randint(len(x), (1,), generator=generator))
        ids = cond.model_inputs(x[None].to(cond.device), torch.tensor([site], device=cond.device))
        with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16, enabled=cond.autocast):
            logits = cond.model(input_ids=ids).logits[0, site + len(cond.prefix)].float()
        probs = torch.softmax(logits.masked_fill(~cond.allowed, float("-inf")), -1)
        x[site] = int(torch.multinomial(probs.cpu(), 1, generator=generator))


def bare_forward(cond, x0: torch.Tensor, positions: torch.Tensor) -> None:
    """Encoder forward plus the LM head at the masked rows: the floor for one batched step."""
    cond.log_scores(x0, positions)


BERT_BASE_SHAPE = "bert-base-shape"  #: --model name of the random-weight bert-base-sized masked LM


BERT_BASE_SIZE = dict(
    hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512
)  #: bert-base's shape: 12 layers, hidden 768, 12 heads, feed-forward 3072, 512 positions


def bert_base_shaped(device=None, name: str = BERT_BASE_SHAPE, size: dict = BERT_BASE_SIZE):
    """A BERT masked LM of `size` (bert-base's by default) with random weights and the bundled model's word-piece
    tokenizer (bert-base-uncased's 30,522 ids): its speed is that shape's, built from a config with no download."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(glauber.DEFAULT_MODEL_DIR)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), **size)
    return glauber.MaskedLMConditionals(BertForMaskedLM(config), tokenizer, device, name_or_path=name)


def load(model: str | None, device=None) -> glauber.MaskedLMConditionals:
    """The benchmarked model: `bert_base_shaped` for --model bert-base-shape, else `load_mlm`."""
    return bert_base_shaped(device) if model == BERT_BASE_SHAPE else glauber.load_mlm(model, device=device)


def random_states(cond, count: int, n: int, seed: int = 0) -> torch.Tensor:
    """`count` states of n allowed ids drawn uniformly (speed does not depend on the text)."""
    ids = cond.allowed.cpu().nonzero().squeeze(1)
    return ids[torch.randint(len(ids), (count, n), generator=torch.Generator().manual_seed(seed))]


def step_rate(cond, x0: torch.Tensor, steps: int, repeats: int, unblocked: bool = False) -> float:
    """Chain-steps per second of `glauber` from x0 [B, n]; `unblocked`: the whole batch in one model call."""
    kept = cond.block_size, cond.larger_blocks
    if unblocked:
        cond.block_size, cond.larger_blocks = len(x0), ()
    try:
        run = lambda: glauber.glauber(cond, x0, steps, record_every=steps, progress=False)  # noqa: E731
        return len(x0) * steps / timed(run, repeats)
    finally:
        cond.block_size, cond.larger_blocks = kept


def speed_rows(cond, x_all: torch.Tensor, batches, steps: int, repeats: int, naive_rate: float) -> list[dict]:
    """One row per batch size B: the Glauber rate with the model's blocks and unblocked, the bare forward's rate,
    and their ratios (``block_cost`` = unblocked rate / rate: above 1, the blocks cost that factor)."""
    rows = []
    for batch in batches:
        x0 = x_all[:batch]
        positions = torch.randint(x0.shape[1], (batch,), generator=torch.Generator().manual_seed(0)).to(cond.device)
        rate = step_rate(cond, x0, steps, repeats)
        unblocked = step_rate(cond, x0, steps, repeats, unblocked=True)
        bare = batch / timed(lambda: bare_forward(cond, x0, positions), repeats * 3)  # noqa: B023
        rows.append(
            dict(
                batch=batch,
                glauber_rate=rate,
                bare_rate=bare,
                naive_rate=naive_rate,
                speedup_vs_naive=rate / naive_rate,
                step_over_forward=bare / rate,
                block_size=cond.block_size,
                larger_blocks=" ".join(map(str, cond.checked_blocks(x0.shape[1], batch))),
                unblocked_rate=unblocked,
                block_cost=unblocked / rate,
            )
        )
        print(
            f"{batch:>6} {rate:>12.1f} {unblocked:>12.1f} {bare:>12.1f} {rate / naive_rate:>10.2f} "
            f"{bare / rate:>10.3f} {unblocked / rate:>10.3f}"
        )
    return rows


def device_name(cond) -> str:
    """The GPU's name, or the CPU and its core count."""
    return torch.cuda.get_device_name(cond.device) if cond.device.type == "cuda" else f"CPU, {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="masked LM name or folder (default: bundled)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--seq-len", type=int, default=24)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--steps", type=int, default=10, help="Glauber steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--csv",
        type=Path,
        default=glauber.REPO_ROOT / "results" / "benchmarks" / "glauber_speed.csv",
        help="where to write the table (default: results/benchmarks/glauber_speed.csv)",
    )
    parser.add_argument("--note", default="", help="free text stored with the table (e.g. machine load)")
    args = parser.parse_args()

    cold = timed_once(lambda: load(args.model, device=args.device))
    started = time.perf_counter()
    cond = load(args.model, device=args.device)
    print(
        f"load: {cold:.2f} s first call (with transformers' lazy imports), {time.perf_counter() - started:.2f} s after"
    )
    if args.model == BERT_BASE_SHAPE:
        x_all = random_states(cond, max(args.batches), args.seq_len).to(cond.device)
    else:
        x_all = glauber.seed_passages(cond, args.seq_len, max(args.batches), split="all").tokens.to(cond.device)
    print(f"model {cond.name_or_path} on {cond.device}, n = {args.seq_len}, torch threads {torch.get_num_threads()}")
    naive_rate = 1 / (timed(lambda: naive_steps(cond, x_all[:1], args.steps), args.repeats) / args.steps)
    print(f"naive loop (1 chain, full logits): {naive_rate:8.1f} chain-steps/s")
    print(
        f"{'B':>6} {'glauber/s':>12} {'unblocked/s':>12} {'bare/s':>12} {'vs naive':>10} {'step/fwd':>10} {'block cost':>10}"
    )
    rows = speed_rows(cond, x_all, args.batches, args.steps, args.repeats, naive_rate)
    table = pd.DataFrame(rows).assign(
        model=str(cond.name_or_path).replace(str(glauber.REPO_ROOT) + "/", ""),
        device=device_name(cond),
        seq_len=args.seq_len,
        steps=args.steps,
        repeats=args.repeats,
        torch_threads=torch.get_num_threads(),
        torch=torch.__version__,
        measured=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        note=args.note,
    )
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    table.round(4).to_csv(args.csv, index=False)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
