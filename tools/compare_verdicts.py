"""Which verdicts flip between two runs of the chapters (issue 23: the quick chapters rerun with seed 1).

    .venv/bin/python tools/compare_verdicts.py BASE OTHER --out results/seeds/quick_seed0_vs_seed1.csv

BASE and OTHER are results folders holding `<chapter>/claims.csv` (and `checks.csv` where a chapter has
checks), e.g. `_build/results/quick` of a book build (seed 0) and the folder of a papermill run with
`-p seed 1`. The table has one row per claims or checks row found in either run: chapter, claim, table, kind,
both verdicts (or pass/fail results), their text and code version (`book_tools.code_version`, equal when
both runs ran the same code), and `flipped`. It prints the flips and a count per kind.
A row in one run only is reported as flipped, with "absent" as the other verdict.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

KEY = ["chapter", "claim"]


def _rows(folder: Path, name: str, verdict: str, text: str) -> pd.DataFrame:
    """Every chapter's `name` table under `folder`, reduced to the key, the verdict and its text (a checks
    table names its rows `check`)."""
    frames = [pd.read_csv(path).assign(chapter=path.parent.name) for path in sorted(folder.glob(f"*/{name}"))]
    if not frames:
        return pd.DataFrame(columns=[*KEY, "table", "kind", "verdict", "ours_text", "code", "source"])
    rows = pd.concat(frames, ignore_index=True)
    if "table" not in rows:
        rows["table"] = "checks"
    if "kind" not in rows:
        rows["kind"] = "check"
    if "code" not in rows:
        rows["code"] = ""
    rows = rows.rename(columns={verdict: "verdict", text: "ours_text", "check": "claim"})
    return rows[[*KEY, "table", "kind", "verdict", "ours_text", "code"]].assign(source=name)


def compare(base: Path, other: Path) -> pd.DataFrame:
    """One row per claim or check of either run, with both verdicts and whether they differ."""
    tables = []
    for name, verdict, text in (("claims.csv", "verdict", "ours_text"), ("checks.csv", "result", "detail")):
        a, b = _rows(base, name, verdict, text), _rows(other, name, verdict, text)
        merged = a.merge(b, on=[*KEY, "source"], how="outer", suffixes=("_base", "_other"))
        for column in ("table", "kind"):
            merged[column] = merged[f"{column}_base"].fillna(merged[f"{column}_other"])
        tables.append(merged)
    table = pd.concat(tables, ignore_index=True)
    for side in ("base", "other"):
        table[f"verdict_{side}"] = table[f"verdict_{side}"].fillna("absent")
    table["flipped"] = table.verdict_base != table.verdict_other
    return table[[*KEY, "table", "kind", "verdict_base", "verdict_other", "flipped", "ours_text_base",
                  "ours_text_other", "code_base", "code_other"]].sort_values(KEY, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("other", type=Path)
    parser.add_argument("--out", type=Path, help="write the comparison table here (CSV)")
    args = parser.parse_args(argv)
    for folder in (args.base, args.other):
        if not any(folder.glob("*/claims.csv")):
            parser.error(f"{folder} holds no <chapter>/claims.csv")
    table = compare(args.base, args.other)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    flips = table[table.flipped]
    print(flips[[*KEY, "kind", "verdict_base", "verdict_other"]].to_string(index=False) if len(flips) else "no flips")
    print(table.groupby("kind").flipped.agg(["sum", "size"]).rename(columns={"sum": "flipped", "size": "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
