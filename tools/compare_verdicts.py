"""Which verdicts flip between two runs of the chapters (issue 23: the quick chapters rerun with seed 1).

    .venv/bin/python tools/compare_verdicts.py BASE OTHER --out results/seeds/quick_seed0_vs_seed1.csv

BASE and OTHER are results folders holding `<chapter>/claims.csv` (and `checks.csv` where a chapter has
checks), e.g. `_build/results/quick` of a book build (seed 0) and the folder of a papermill run with
`-p seed 1`. The table has one row per claims or checks row found in either run: chapter, claim, table, kind,
both verdicts (or pass/fail results), their text and code version (`book_tools.code_version`, equal when
both runs ran the same code), and `flipped`. It prints the flips and a count per kind.
A row in one run only is reported as flipped, with "absent" as the other verdict. With `--replace`, the
chapters compared replace their rows in the existing `--out` table and every other chapter's rows stay (one
chapter rerun after a change to its code):

    .venv/bin/python tools/compare_verdicts.py BASE OTHER --out results/seeds/quick_seed0_vs_seed1.csv --replace
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

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
    rows = rows.rename(columns={verdict: "verdict", text: "ours_text", "check": "claim"})
    defaults = {"table": "checks", "kind": "check", "code": ""}
    rows = rows.assign(**{column: value for column, value in defaults.items() if column not in rows})
    return rows[[*KEY, "table", "kind", "verdict", "ours_text", "code"]].assign(source=name)


def compare(base: Path, other: Path) -> pd.DataFrame:
    """One row per claim or check of either run, with both verdicts and whether they differ; a row that one
    run lacks has the verdict "absent" there. A claim twice in one run (a folder of several models) is an error."""
    tables = []
    for name, verdict, text in (("claims.csv", "verdict", "ours_text"), ("checks.csv", "result", "detail")):
        a, b = _rows(base, name, verdict, text), _rows(other, name, verdict, text)
        try:
            merged = a.merge(
                b, on=[*KEY, "source"], how="outer", suffixes=("_base", "_other"), validate="one_to_one", indicator=True
            )
        except pd.errors.MergeError:
            raise ValueError(f"a {name} row appears twice in one run: compare one model's runs") from None
        for side, only in (("base", "right_only"), ("other", "left_only")):
            merged.loc[merged._merge == only, f"verdict_{side}"] = "absent"
        for column in ("table", "kind"):
            merged[column] = merged[f"{column}_base"].fillna(merged[f"{column}_other"])
        tables.append(merged)
    table = pd.concat(tables, ignore_index=True)
    table["flipped"] = table.verdict_base != table.verdict_other
    return table[
        [
            *KEY,
            "table",
            "kind",
            "verdict_base",
            "verdict_other",
            "flipped",
            "ours_text_base",
            "ours_text_other",
            "code_base",
            "code_other",
        ]
    ].sort_values(KEY, ignore_index=True)


def replace_chapters(before: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """`before` with the rows of every chapter in `new` replaced by `new`'s, sorted as compare sorts."""
    if list(before.columns) != list(new.columns):
        raise ValueError("the existing table's columns are not a comparison table's")
    kept = before[~before.chapter.isin(set(new.chapter))]
    as_read = new.astype(object).where(new.notna(), "").astype(str)  # as the CSV reads back: text, "" if missing
    table = pd.concat([kept, as_read], ignore_index=True).sort_values(KEY, ignore_index=True)
    return table.assign(flipped=table.flipped == "True")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("other", type=Path)
    parser.add_argument("--out", type=Path, help="write the comparison table here (CSV)")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="in the existing --out table, replace only the rows of the chapters compared here",
    )
    args = parser.parse_args(argv)
    if args.replace and not (args.out and args.out.is_file()):
        parser.error("--replace needs an existing --out table")
    for folder in (args.base, args.other):
        if not any(folder.glob("*/claims.csv")):
            parser.error(f"{folder} holds no <chapter>/claims.csv")
    try:
        table = compare(args.base, args.other)
        if args.replace:
            table = replace_chapters(pd.read_csv(args.out, dtype=str, keep_default_na=False), table)
    except ValueError as problem:
        parser.error(str(problem))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    flips = table[table.flipped]
    print(flips[[*KEY, "kind", "verdict_base", "verdict_other"]].to_string(index=False) if len(flips) else "no flips")
    print(table.groupby("kind").flipped.agg(["sum", "size"]).rename(columns={"sum": "flipped", "size": "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
