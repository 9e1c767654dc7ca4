"""Regenerate the results of the book's "Across models" and "A pretrained MLM: AntiBERTy" pages, through sweep.py.

    .venv/bin/python tools/across_models.py            # what `make across-models` runs (about 18 min on 2 cores)
    .venv/bin/python tools/across_models.py --set antiberty   # what `make antiberty` runs (69 min on 2 idle cores)
    .venv/bin/python tools/across_models.py --profile smoke
    .venv/bin/python tools/across_models.py --set antiberty --chapters 03_phase_diagram   # one chapter again

`--set family` (the default) runs chapters 1, 2 and 4 on every bundled model into results/across_models/;
`--set antiberty` runs every chapter on AntiBERTy (a protein MLM pretrained by others, offline from the
`antiberty` wheel) into results/antiberty/, each chapter with the sizes of `ANTIBERTY` (its quick profile with
a few overrides; at another profile the overrides are not applied). In whole genes it took 69 minutes on 2 idle cores
(2026-12-04), 37 of them chapter 5's (2,000 steps at tau = 1): within the 75 the run is meant to fit.

For each chapter of the set this runs

    python sweep.py notebooks/<chapter>.ipynb -p model <the set's models> [-p NAME VALUE ...] --profile <profile>
                    --out _build/sweeps/<set>/<profile>/<chapter>-<code version>

then copies the merged tables the page reads to `results/<set folder>/<chapter>/` and writes
`results/<set folder>/run.csv`: one row per chapter and model with its status, seconds, profile, this command,
and the commit and date its claims rows name. Commit `results/across_models/` afterwards: the book reads it as
it is and says when the code has changed since. A killed run resumes (sweep.py skips the cells already done);
after a change to the chapter's code (`book_tools.code_version`) the chapter is run afresh in a new folder.
With `--chapters`, only those chapters run and are copied; run.csv keeps the other chapters' rows, each row
naming the command that made it (the pages show the first row's). Exit status: sweep.py's (1 when a cell failed;
nothing is copied then), 2 for a chapter not in the set.
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
import glauber_core as glauber  # noqa: E402

KEPT = {
    "01_incompatibility": ("claims", "table1"),
    "02_mixing_bounds": ("claims", "alpha"),
    "04_basins": ("claims", "table3"),
}
# AntiBERTy: the tables its page reads (each chapter's with `context`, the residues of the whole gene, and `free`),
# and per chapter the papermill parameters that size its quick run (69 minutes in all on 2 idle cores, chapter 5 37 of
# them; other profiles run as they are)
ANTIBERTY = {
    "01_incompatibility": (("claims", "checks", "table1", "rectangles", "cut_versus_gene"), {}),
    "02_mixing_bounds": (("claims", "checks", "alpha", "windows_full", "slowest_window_states"), {}),
    "03_phase_diagram": (("claims", "coupling_times"), {}),
    "04_basins": (("claims", "reversion", "pll", "region_rates", "endpoint_entropy"), {}),
    # chapter 5 keeps 2,000 steps: this run is outside the quick book's 20 minutes, for which the quick profile
    # went to 1,000 (at 1,000 AntiBERTy had one approximate trap and none ended: too few to judge its duration)
    "05_traps": (("claims", "germline_gaps", "traps"), {"steps": 2000}),
}
SETS = {
    "family": {"kept": KEPT, "parameters": {}, "out": bt.ACROSS_MODELS},
    "antiberty": {
        "kept": {c: tables for c, (tables, _) in ANTIBERTY.items()},
        "parameters": {c: p for c, (_, p) in ANTIBERTY.items()},
        "out": bt.ANTIBERTY_RESULTS,
    },
}


def sweep_command(
    chapter: str, models: list[str], profile: str, out: Path, parameters: dict | None = None
) -> list[str]:
    """The sweep.py command line of one chapter over the models (each extra parameter a one-value -p)."""
    extra = [item for name, value in (parameters or {}).items() for item in ("-p", name, str(value))]
    return [
        sys.executable,
        str(ROOT / "sweep.py"),
        str(ROOT / "notebooks" / f"{chapter}.ipynb"),
        "-p",
        "model",
        *models,
        *extra,
        "--profile",
        profile,
        "--out",
        str(out),
    ]


def sweep_folder(sweeps: Path, chapter: str) -> Path:
    """Where one chapter's sweep runs: a new folder whenever the chapter's code version changes."""
    return sweeps / f"{chapter}-{bt.code_version(chapter)}"


def collect(
    sweeps: Path,
    results: Path,
    models: list[str],
    profile: str,
    command: str,
    kept: dict = KEPT,
    others_stay: bool = False,
) -> pd.DataFrame:
    """Copy each chapter's kept merged tables (rows of `models` only) from its sweep folder's merged/ to
    results/<chapter>/ and write results/run.csv from the sweeps' index.csv files and claims rows; returns the
    run table. Nothing is replaced unless every table is there. With `others_stay` (a run of some chapters only)
    run.csv keeps its rows of the chapters not in `kept`, and the rows come in chapter order."""
    missing = [
        path
        for chapter, tables in kept.items()
        for path in [
            sweep_folder(sweeps, chapter) / "index.csv",
            *(sweep_folder(sweeps, chapter) / "merged" / f"{table}.csv" for table in tables),
        ]
        if not path.exists()
    ]
    if missing:
        raise FileNotFoundError(f"the sweeps have not written {', '.join(map(str, missing))}")
    rows = []
    for chapter, tables in kept.items():
        folder = sweep_folder(sweeps, chapter)
        index = pd.read_csv(folder / "index.csv", dtype=str, keep_default_na=False)
        claims = pd.read_csv(folder / "merged" / "claims.csv", dtype=str, keep_default_na=False)
        for cell in index[index.model.isin(models)].itertuples(index=False):
            made = claims[claims.model_param == cell.model]
            rows.append(
                {
                    "chapter": chapter,
                    "model": cell.model,
                    "status": cell.status,
                    "seconds": cell.seconds,
                    "profile": profile,
                    "command": command,
                    "commit": ", ".join(sorted(set(made.commit))),
                    "finished": max(made.run_date, default=""),
                }
            )
        target = results / chapter
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for table in tables:
            frame = pd.read_csv(folder / "merged" / f"{table}.csv", dtype=str, keep_default_na=False)
            frame[frame.model_param.isin(models)].to_csv(target / f"{table}.csv", index=False)
    run = pd.DataFrame(rows, columns=list(bt.RUN_TABLE_COLUMNS))
    if others_stay and (results / "run.csv").exists():
        before = pd.read_csv(results / "run.csv", dtype=str, keep_default_na=False)
        run = pd.concat([before[~before.chapter.isin(list(kept))], run.astype(str)], ignore_index=True)
        run = run.sort_values("chapter", kind="stable", ignore_index=True)
    run.to_csv(results / "run.csv", index=False)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="family", choices=sorted(SETS), help="which page's results (default family)")
    parser.add_argument("--profile", default="quick", choices=bt.PROFILES)
    parser.add_argument("--models", nargs="+", help="masked LMs by name (default: every bundled model, or antiberty)")
    parser.add_argument("--out", type=Path, help="where the page's tables go (default: the set's results folder)")
    parser.add_argument(
        "--chapters",
        nargs="+",
        help="run only these chapters of the set (the others' tables and "
        "run.csv rows stay; each row names the command that made it)",
    )
    args = parser.parse_args(argv)
    chosen = SETS[args.set]
    models = args.models or (glauber.bundled_models() if args.set == "family" else ["antiberty"])
    out = args.out or chosen["out"]
    sweeps = ROOT / "_build" / "sweeps" / ("across_models" if args.set == "family" else args.set) / args.profile
    command = " ".join(["python tools/across_models.py", *(sys.argv[1:] if argv is None else argv)])
    unknown = sorted(set(args.chapters or []) - set(chosen["kept"]))
    if unknown:
        parser.error(f"--chapters: {', '.join(unknown)} not in the {args.set} set ({', '.join(chosen['kept'])})")
    kept = {chapter: chosen["kept"][chapter] for chapter in args.chapters} if args.chapters else chosen["kept"]
    for chapter in kept:
        folder = sweep_folder(sweeps, chapter)
        parameters = chosen["parameters"].get(chapter, {}) if args.profile == "quick" else {}
        status = subprocess.run(sweep_command(chapter, models, args.profile, folder, parameters)).returncode
        if status:
            print(f"across_models: the {chapter} sweep failed (see {folder}/index.csv)", file=sys.stderr)
            return status
    run = collect(sweeps, out, models, args.profile, command, kept, others_stay=bool(args.chapters))
    done = run[run.chapter.isin(list(kept))]
    print(f"across_models: {len(done)} runs, {done.seconds.astype(float).sum() / 60:.1f} min, tables in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
