"""Which verdicts move between runs of the chapters that differ only in their seed (issue 41's three-seed record).

    .venv/bin/python tools/compare_verdicts.py RUN0 RUN1 [RUN2 ...] --out results/seeds/quick_seeds.csv

Each RUN<k> is a results folder holding `<chapter>/claims.csv` (and `checks.csv` where a chapter has checks) of
the run with `seed` = k: e.g. `_build/results/quick` of a book build (seed 0) and the folders of papermill runs with
`-p seed 1`, `-p seed 2` (`make seed-record` makes them). The table has one row per claims or checks row found in
any run: chapter, claim, table, kind, and per seed k its verdict (or pass/fail result) `verdict_seed<k>`, text
`ours_text_seed<k>` and code version `code_seed<k>` (`book_tools.code_version`, equal when the runs ran the same
code); `flipped` when the verdicts are not all equal, and `opposed` when one seed says reproduced and another
differs (a rule a seed can overturn). A row missing from a run has the verdict "absent" there. It prints the
flips and a count per kind. With `--replace`, the chapters compared replace their rows in the existing `--out`
table and every other chapter's rows stay (one chapter rerun after a change to its code).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from verdicts import DIFFERS, REPRODUCED

KEY = ["chapter", "claim"]


def _rows(folder: Path, name: str, verdict: str, text: str) -> pd.DataFrame:
    """Every chapter's `name` table under `folder`, reduced to the key, the verdict and its text (a checks
    table names its rows `check`), all read as text ("NA" stays "NA")."""
    frames = [
        pd.read_csv(path, dtype=str, keep_default_na=False).assign(chapter=path.parent.name)
        for path in sorted(folder.glob(f"*/{name}"))
    ]
    if not frames:
        return pd.DataFrame(columns=[*KEY, "table", "kind", "verdict", "ours_text", "code", "source"])
    rows = pd.concat(frames, ignore_index=True)
    if "judged" in rows:  # rows shown beside a judged one carry no verdict of their own
        rows = rows[rows.judged != "False"]
    rows = rows.rename(columns={verdict: "verdict", text: "ours_text", "check": "claim"})
    defaults = {"table": "checks", "kind": "check", "code": ""}
    rows = rows.assign(**{column: value for column, value in defaults.items() if column not in rows})
    return rows[[*KEY, "table", "kind", "verdict", "ours_text", "code"]].assign(source=name)


def compare(*runs: Path) -> pd.DataFrame:
    """One row per claim or check of any run, with each run's verdict, text and code version (suffix
    `_seed<k>` for the k-th run), `flipped` and `opposed`; a row that a run lacks has the verdict "absent" there.
    A claim twice in one run (a folder of several models) is an error."""
    if len(runs) < 2:
        raise ValueError("compare at least two runs")
    tables = []
    for name, verdict, text in (("claims.csv", "verdict", "ours_text"), ("checks.csv", "result", "detail")):
        merged = None
        for k, folder in enumerate(runs):
            rows = _rows(folder, name, verdict, text)
            if rows.duplicated([*KEY, "source"]).any():
                raise ValueError(f"a {name} row appears twice in one run: compare one model's runs")
            rows = rows.rename(columns={c: f"{c}_seed{k}" for c in ("table", "kind", "verdict", "ours_text", "code")})
            merged = rows if merged is None else merged.merge(rows, on=[*KEY, "source"], how="outer")
        for column in ("table", "kind"):
            merged[column] = merged[[f"{column}_seed{k}" for k in range(len(runs))]].bfill(axis=1).iloc[:, 0]
        tables.append(merged)
    table = pd.concat(tables, ignore_index=True)
    verdicts = [f"verdict_seed{k}" for k in range(len(runs))]
    table[verdicts] = table[verdicts].fillna("absent")
    table["flipped"] = table[verdicts].nunique(axis=1) > 1
    table["opposed"] = table[verdicts].eq(REPRODUCED).any(axis=1) & table[verdicts].eq(DIFFERS).any(axis=1)
    columns = [*KEY, "table", "kind", *verdicts, "flipped", "opposed"]
    columns += [f"{c}_seed{k}" for c in ("ours_text", "code") for k in range(len(runs))]
    return table[columns].sort_values(KEY, ignore_index=True)


def replace_chapters(before: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """`before` with the rows of every chapter in `new` replaced by `new`'s, sorted as compare sorts."""
    if list(before.columns) != list(new.columns):
        raise ValueError("the existing table's columns are not a comparison table's")
    kept = before[~before.chapter.isin(set(new.chapter))]
    as_read = new.astype(object).where(new.notna(), "").astype(str)  # as the CSV reads back: text, "" if missing
    table = pd.concat([kept, as_read], ignore_index=True).sort_values(KEY, ignore_index=True)
    return table.assign(flipped=table.flipped == "True", opposed=table.opposed == "True")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="results folders of the runs with seed 0, 1, ...")
    parser.add_argument("--out", type=Path, help="write the comparison table here (CSV)")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="in the existing --out table, replace only the rows of the chapters compared here",
    )
    args = parser.parse_args(argv)
    if args.replace and not (args.out and args.out.is_file()):
        parser.error("--replace needs an existing --out table")
    if len(args.runs) < 2:
        parser.error("give at least two results folders")
    for folder in args.runs:
        if not any(folder.glob("*/claims.csv")):
            parser.error(f"{folder} holds no <chapter>/claims.csv")
    try:
        table = compare(*args.runs)
        if args.replace:
            table = replace_chapters(pd.read_csv(args.out, dtype=str, keep_default_na=False), table)
    except ValueError as problem:
        parser.error(str(problem))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    flips = table[table.flipped]
    verdicts = [c for c in table.columns if c.startswith("verdict_seed")]
    print(flips[[*KEY, "kind", *verdicts]].to_string(index=False) if len(flips) else "no flips")
    counts = table.groupby("kind")[["flipped", "opposed"]].sum().assign(rows=table.groupby("kind").size())
    print(counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
