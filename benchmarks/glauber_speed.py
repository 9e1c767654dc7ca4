"""Chain-steps per second of `glauber_core.glauber`, as ratios against two baselines run in this process.

(a) naive: one chain, full logits at every position, one forward per step (as common
    Gibbs-from-BERT scripts do); (b) bare: the encoder forward plus the LM head at the masked rows
    for the same batch, with no sampling or bookkeeping. Run: `make benchmark` or
    `python benchmarks/glauber_speed.py [--model NAME] [--device cuda] [--batches 1 16 64 256]`.
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

    cold = timed_once(lambda: glauber.load_mlm(args.model, device=args.device))
    started = time.perf_counter()
    cond = glauber.load_mlm(args.model, device=args.device)
    print(
        f"load_mlm: {cold:.2f} s first call (with transformers' lazy imports), "
        f"{time.perf_counter() - started:.2f} s after"
    )
    passages = glauber.seed_passages(cond, args.seq_len, max(args.batches), split="all")
    x_all = passages.tokens.to(cond.device)
    print(f"model {cond.name_or_path} on {cond.device}, n = {args.seq_len}, torch threads {torch.get_num_threads()}")

    naive_time = timed(lambda: naive_steps(cond, x_all[:1], args.steps), args.repeats) / args.steps
    naive_rate = 1 / naive_time
    print(f"naive loop (1 chain, full logits): {naive_rate:8.1f} chain-steps/s")
    print(f"{'B':>6} {'glauber/s':>12} {'bare/s':>12} {'speedup_vs_naive':>17} {'step_over_forward':>18}")
    summary, rows = {}, []
    for batch in args.batches:
        x0 = x_all[:batch]
        positions = torch.randint(args.seq_len, (batch,), generator=torch.Generator().manual_seed(0)).to(cond.device)
        step_time = (
            timed(
                lambda: glauber.glauber(cond, x0, args.steps, record_every=args.steps, progress=False),  # noqa: B023
                args.repeats,
            )
            / args.steps
        )
        bare_time = timed(lambda: bare_forward(cond, x0, positions), args.repeats * 3)  # noqa: B023
        summary[batch] = (batch / step_time / naive_rate, step_time / bare_time)
        print(
            f"{batch:>6} {batch / step_time:>12.1f} {batch / bare_time:>12.1f} {summary[batch][0]:>17.2f} "
            f"{summary[batch][1]:>18.3f}"
        )
        rows.append(
            dict(
                batch=batch,
                glauber_rate=batch / step_time,
                bare_rate=batch / bare_time,
                naive_rate=naive_rate,
                speedup_vs_naive=summary[batch][0],
                step_over_forward=summary[batch][1],
            )
        )
    device = torch.cuda.get_device_name() if str(cond.device).startswith("cuda") else f"CPU, {os.cpu_count()} cores"
    table = pd.DataFrame(rows).assign(
        model=str(cond.name_or_path).replace(str(glauber.REPO_ROOT) + "/", ""),
        device=device,
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
    if 64 in summary:
        print(f"B=64 speedup_vs_naive={summary[64][0]:.2f} step_over_forward={summary[64][1]:.3f}")


if __name__ == "__main__":
    main()
