"""Operating characteristics of the book's verdict rules at the book's own size (issue "Verdicts a referee signs"),
and at multiples of it (the power curves).

    .venv/bin/python tools/calibrate.py [--seeds 50] [--claims nlogn_fit ...] [--scale 4] [--out results/calibration]

For each case (a general claim, a chain whose answer is known by mathematics, and whether the claim holds or
fails on it) the chapter's own estimator and rule run at the quick profile's sizes, once per seed, and the
verdict is recorded. `runs.csv` keeps one row per (claim, case, seed) with the code version it was made at;
a rerun skips the rows already made at the current code version (resumable), and `operating_characteristics.csv`
summarises each case: the shares reproduced / differs / inconclusive, the wrong-decision share (differs where
the claim holds, reproduced where it fails) with its Wilson interval, and the power (decided correctly).

With `--scale K` every case runs with the sizes its claim names (Case.sizes: pairs, chains or steps) K times the
quick ones, into results/calibration/power/xK/ (the same two files); `power_curves.csv` beside the quick summary
gathers every scale's summary, one row per (case, scale). The cases live in tools/calibration/, one module a chapter
(each module's CASES).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import multiprocessing
import sys
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import book_tools as bt  # noqa: E402
import verdicts as vd  # noqa: E402
from calibration import Case, all_cases  # noqa: E402, F401 (Case: the cases' type, for callers)

CASES = all_cases()

OUT = bt.REPO_ROOT / "results" / "calibration"
RUN_COLUMNS = ("claim", "case", "truth", "seed", "verdict", "code")
SUMMARY_COLUMNS = (
    "claim",
    "case",
    "truth",
    "seeds",
    "reproduced",
    "differs",
    "inconclusive",
    "wrong",
    "wrong_share",
    "wrong_low",
    "wrong_high",
    "power",
    "code",
)


def case_version(case: Case) -> str:
    """The chapter's code version (book_tools.code_version) and the text of the case's module: a change to either
    remakes the case's rows (a change to this runner does not)."""
    source = case.source.read_bytes() if case.source else b""
    digest = hashlib.sha256(bt.code_version(case.chapter).encode() + source)
    return digest.hexdigest()[:12]


def read_runs(path: Path) -> pd.DataFrame:
    """runs.csv, or an empty table with its columns."""
    if not path.exists():
        return pd.DataFrame(columns=list(RUN_COLUMNS))
    return pd.read_csv(path, dtype={"code": str, "verdict": str})


def current_runs(runs: pd.DataFrame, versions: dict) -> pd.DataFrame:
    """The rows of `runs` made at their case's version in `versions` ((claim, case) -> version); a case not in
    `versions` keeps its rows."""
    if runs.empty:
        return runs
    return runs[[versions.get((r.claim, r.case), r.code) == r.code for r in runs.itertuples()]]


_PENDING: list = []  # the (case, seed, scale) a pool of worker processes runs (inherited by fork)


def _verdict_of(index: int) -> tuple[int, str]:
    case, seed, scale = _PENDING[index]
    return index, case.run(seed) if scale == 1 else case.run(seed, scale)


def scale_folder(out: Path, scale: int) -> Path:
    """Where the runs at `scale` times the quick sizes go: `out` itself for the quick size, else out/power/x<scale>."""
    return out if scale == 1 else out / "power" / f"x{scale}"


def run_cases(
    cases, seeds: int, out: Path, version=None, progress: bool = True, jobs: int = 1, scale: int = 1
) -> pd.DataFrame:
    """Run every case over seeds 0..seeds-1 (at `scale` times its claim's sizes), skipping the (claim, case, seed)
    rows already in out/runs.csv at
    the case's current version; each new row is appended as soon as it is made, so an interrupted run resumes
    with nothing lost. Rows made at another version (`version(case)`, case_version by default) are dropped.
    `jobs` > 1 runs the seeds in that many processes, one torch thread each (a seed's verdict does not depend
    on which process runs it). Returns the runs of these cases."""
    version = version or case_version
    out.mkdir(parents=True, exist_ok=True)
    path = out / "runs.csv"
    runs = read_runs(path)
    versions = {(c.claim, c.name): version(c) for c in cases}
    runs = current_runs(runs, versions)
    runs.to_csv(path, index=False)
    done = set(zip(runs.claim, runs.case, runs.seed.astype(int))) if len(runs) else set()
    todo = [(c, s, scale) for c in cases for s in range(seeds) if (c.claim, c.name, s) not in done]
    _PENDING[:] = todo
    if jobs > 1:
        pool = multiprocessing.get_context("fork").Pool(jobs, initializer=torch.set_num_threads, initargs=(1,))
        made = pool.imap_unordered(_verdict_of, range(len(todo)))
    else:
        pool, made = None, map(_verdict_of, range(len(todo)))
    try:
        for index, verdict in tqdm(made, total=len(todo), desc=f"calibration x{scale}", disable=not progress):
            case, seed, _ = todo[index]
            row = pd.DataFrame([dict(claim=case.claim, case=case.name, truth=case.truth, seed=seed, verdict=verdict,
                                     code=versions[(case.claim, case.name)])])  # fmt: skip
            row.to_csv(path, mode="a", header=not path.exists() or path.stat().st_size == 0, index=False)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    runs = read_runs(path)
    names = {(c.claim, c.name) for c in cases}
    return runs[[(a, b) in names for a, b in zip(runs.claim, runs.case)]]


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per case: counts of each verdict, the wrong-decision share (differs where the claim holds,
    reproduced where it fails) with its 95% Wilson interval, and the power (the share decided correctly)."""
    rows = []
    if runs.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    for (claim, case, truth), part in runs.groupby(["claim", "case", "truth"], sort=False):
        counts = part.verdict.value_counts()
        wrong_verdict = vd.DIFFERS if truth == "holds" else vd.REPRODUCED
        right_verdict = vd.REPRODUCED if truth == "holds" else vd.DIFFERS
        seeds, wrong = len(part), int(counts.get(wrong_verdict, 0))
        low, high = (float(v[0]) for v in vd.share_intervals([wrong], [seeds]))
        rows.append(
            dict(
                claim=claim,
                case=case,
                truth=truth,
                seeds=seeds,
                reproduced=int(counts.get(vd.REPRODUCED, 0)),
                differs=int(counts.get(vd.DIFFERS, 0)),
                inconclusive=int(counts.get(vd.INCONCLUSIVE, 0)),
                wrong=wrong,
                wrong_share=wrong / seeds,
                wrong_low=low,
                wrong_high=high,
                power=int(counts.get(right_verdict, 0)) / seeds,
                code=",".join(sorted(set(part.code))),
            )
        )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def stale_cases(summary: pd.DataFrame, cases=None) -> list[str]:
    """The cases whose row in make calibrate's summary is missing or was made at another code version than
    case_version gives today, and the rows of cases that no longer exist, as "claim: case" names."""
    cases = CASES if cases is None else cases
    made = {(r.claim, r.case): r.code for r in summary.itertuples()}
    stale = [f"{c.claim}: {c.name}" for c in cases if made.get((c.claim, c.name)) != case_version(c)]
    known = {(c.claim, c.name) for c in cases}
    return stale + [f"{claim}: {case} (no such case)" for claim, case in made if (claim, case) not in known]


def power_curves(out: Path = OUT, cases=None) -> pd.DataFrame:
    """Every scale's summary (the quick one and each out/power/x<K>/), one row per (case, scale) with the sizes the
    claim scales; rows made at another code version than the case's today are left out (the files are only read)."""
    cases = CASES if cases is None else cases
    sizes = {(c.claim, c.name): " and ".join(c.sizes) for c in cases}
    versions = {(c.claim, c.name): case_version(c) for c in cases}
    folders = [(1, out), *sorted((int(f.name[1:]), f) for f in (out / "power").glob("x*") if f.name[1:].isdigit())]
    parts = []
    for scale, folder in folders:
        runs = current_runs(read_runs(folder / "runs.csv"), versions)  # read only: a job may be appending to it
        summary = summarise(runs[[key in versions for key in zip(runs.claim, runs.case)]])
        if len(summary):
            parts.append(summary.assign(scale=scale, sizes=[sizes[(r.claim, r.case)] for r in summary.itertuples()]))
    columns = ["claim", "case", "truth", "scale", "sizes", *SUMMARY_COLUMNS[3:]]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="independent seeds per case (default 50)")
    parser.add_argument("--claims", nargs="*", help="only these claims (default: every claim with cases)")
    parser.add_argument("--out", type=Path, default=OUT, help="folder of runs.csv and operating_characteristics.csv")
    parser.add_argument("--jobs", type=int, default=1, help="processes running seeds at once (default 1)")
    parser.add_argument(
        "--scale", type=int, default=1, help="run at this many times each claim's quick sizes (default 1: the book's)"
    )
    args = parser.parse_args(argv)
    known = sorted({c.claim for c in CASES})
    unknown = sorted(set(args.claims or []) - set(known))
    if unknown or args.seeds < 1 or args.scale < 1:
        parser.error(
            f"--claims must be among {known}, --seeds and --scale at least 1"
            + (f"; unknown: {unknown}" if unknown else "")
        )
    cases = [c for c in CASES if not args.claims or c.claim in args.claims]
    folder = scale_folder(args.out, args.scale)
    run_cases(cases, args.seeds, folder, jobs=args.jobs, scale=args.scale)
    summary = summarise(run_cases(CASES, 0, folder, progress=False))  # every case's current rows, run or not
    summary.to_csv(folder / "operating_characteristics.csv", index=False)
    power_curves(args.out).to_csv(args.out / "power_curves.csv", index=False)
    with pd.option_context("display.width", 160, "display.max_colwidth", 48):
        print(summary.drop(columns=["code"]).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0 if (summary.wrong_share <= 0.10).all() or math.isnan(summary.wrong_share.max()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
