"""Regenerate the book's "Across models" page: chapters 1, 2 and 4 on every bundled model, through sweep.py.

    .venv/bin/python tools/across_models.py            # what `make across-models` runs (about 25 min on 2 cores)
    .venv/bin/python tools/across_models.py --profile smoke

For each chapter of `book_tools.ACROSS_CHAPTERS` this runs

    python sweep.py notebooks/<chapter>.ipynb -p model <every bundled model> --profile <profile>
                    --out _build/sweeps/across_models/<profile>/<chapter>-<code version>

then copies the merged tables the page reads (`KEPT`) to `results/across_models/<chapter>/` and writes
`results/across_models/run.csv`: one row per chapter and model with its status, seconds, profile, this command,
and the commit and date its claims rows name. Commit `results/across_models/` afterwards: the book reads it as
it is and says when the code has changed since. A killed run resumes (sweep.py skips the cells already done);
after a change to the chapter's code (`book_tools.code_version`) the chapter is run afresh in a new folder.
Exit status: sweep.py's (1 when a cell failed; nothing is copied then).
"""

from __future__ import annotations

import argparse
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


def sweep_folder(sweeps: Path, chapter: str) -> Path:
    """Where one chapter's sweep runs: a new folder whenever the chapter's code version changes."""
    return sweeps / f"{chapter}-{bt.code_version(chapter)}"


def collect(sweeps: Path, results: Path, models: list[str], profile: str, command: str) -> pd.DataFrame:
    """Copy each chapter's kept merged tables (rows of `models` only) from its sweep folder's merged/ to
    results/<chapter>/ and write results/run.csv from the sweeps' index.csv files and claims rows; returns the
    run table. Nothing is replaced unless every table is there."""
    missing = [path for chapter, tables in KEPT.items() for path in
               [sweep_folder(sweeps, chapter) / "index.csv",
                *(sweep_folder(sweeps, chapter) / "merged" / f"{table}.csv" for table in tables)]
               if not path.exists()]
    if missing:
        raise FileNotFoundError(f"the sweeps have not written {', '.join(map(str, missing))}")
    rows = []
    for chapter, tables in KEPT.items():
        folder = sweep_folder(sweeps, chapter)
        index = pd.read_csv(folder / "index.csv", dtype=str, keep_default_na=False)
        claims = pd.read_csv(folder / "merged" / "claims.csv", dtype=str, keep_default_na=False)
        for cell in index[index.model.isin(models)].itertuples(index=False):
            made = claims[claims.model_param == cell.model]
            rows.append({"chapter": chapter, "model": cell.model, "status": cell.status, "seconds": cell.seconds,
                         "profile": profile, "command": command, "commit": ", ".join(sorted(set(made.commit))),
                         "finished": max(made.run_date, default="")})
        target = results / chapter
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for table in tables:
            frame = pd.read_csv(folder / "merged" / f"{table}.csv", dtype=str, keep_default_na=False)
            frame[frame.model_param.isin(models)].to_csv(target / f"{table}.csv", index=False)
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
    command = " ".join(["python tools/across_models.py", *(sys.argv[1:] if argv is None else argv)])
    for chapter in KEPT:
        folder = sweep_folder(sweeps, chapter)
        status = subprocess.run(sweep_command(chapter, args.models, args.profile, folder)).returncode
        if status:
            print(f"across_models: the {chapter} sweep failed (see {folder}/index.csv)", file=sys.stderr)
            return status
    run = collect(sweeps, args.out, args.models, args.profile, command)
    print(f"across_models: {len(run)} runs, {run.seconds.astype(float).sum() / 60:.1f} min, tables in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
