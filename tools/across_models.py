"""Regenerate the book's "Across models" page: chapters 1, 2 and 4 on every bundled model, through sweep.py.

    .venv/bin/python tools/across_models.py            # what `make across-models` runs (about 25 min on 2 cores)
    .venv/bin/python tools/across_models.py --profile smoke

For each chapter of `book_tools.ACROSS_CHAPTERS` this runs

    python sweep.py notebooks/<chapter>.ipynb -p model <every bundled model> --profile <profile>
                    --out _build/sweeps/across_models/<profile>/<chapter>

then copies the merged tables the page reads (`KEPT`) to `results/across_models/<chapter>/` and writes
`results/across_models/run.csv`: one row per chapter and model with its status, seconds, profile, this command,
the commit and the time it finished. Commit `results/across_models/` afterwards: the book reads it as it is
and says when the code has changed since. A killed run resumes: sweep.py skips the cells already done.
Exit status: sweep.py's (1 when a cell failed; nothing is copied then).
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import book_tools as bt  # noqa: E402
import glauber_core as gc  # noqa: E402

KEPT = {"01_incompatibility": ("claims", "table1"), "02_mixing_bounds": ("claims", "alpha"),
        "04_basins": ("claims", "table3")}


def sweep_command(chapter: str, models: list[str], profile: str, out: Path) -> list[str]:
    """The sweep.py command line of one chapter over the models."""
    return [sys.executable, str(ROOT / "sweep.py"), str(ROOT / "notebooks" / f"{chapter}.ipynb"),
            "-p", "model", *models, "--profile", profile, "--out", str(out)]


def collect(sweeps: Path, results: Path, profile: str, command: str) -> pd.DataFrame:
    """Copy each chapter's kept merged tables from sweeps/<chapter>/merged/ to results/<chapter>/ and write
    results/run.csv from the sweeps' index.csv files; returns the run table."""
    commit = bt.git_commit()
    rows = []
    for chapter, tables in KEPT.items():
        index = pd.read_csv(sweeps / chapter / "index.csv", dtype=str, keep_default_na=False)
        finished = datetime.datetime.fromtimestamp((sweeps / chapter / "index.csv").stat().st_mtime,
                                                   datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        rows += [{"chapter": chapter, "model": cell.model, "status": cell.status, "seconds": cell.seconds,
                  "profile": profile, "command": command, "commit": commit, "finished": finished}
                 for cell in index.itertuples(index=False)]
        target = results / chapter
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for table in tables:
            shutil.copyfile(sweeps / chapter / "merged" / f"{table}.csv", target / f"{table}.csv")
    run = pd.DataFrame(rows, columns=list(bt.RUN_TABLE_COLUMNS))
    run.to_csv(results / "run.csv", index=False)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick", choices=bt.PROFILES)
    parser.add_argument("--models", nargs="+", default=gc.bundled_models(),
                        help="masked LMs by name (default: every bundled model)")
    parser.add_argument("--out", type=Path, default=bt.ACROSS_MODELS, help="where the page's tables go")
    args = parser.parse_args(argv)
    sweeps = ROOT / "_build" / "sweeps" / "across_models" / args.profile
    command = "python tools/across_models.py" + ("" if args.profile == "quick" else f" --profile {args.profile}")
    for chapter in KEPT:
        status = subprocess.run(sweep_command(chapter, args.models, args.profile, sweeps / chapter)).returncode
        if status:
            print(f"across_models: the {chapter} sweep failed (see {sweeps / chapter}/index.csv)", file=sys.stderr)
            return status
    run = collect(sweeps, args.out, args.profile, command)
    print(f"across_models: {len(run)} runs, {run.seconds.astype(float).sum() / 60:.1f} min, tables in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
