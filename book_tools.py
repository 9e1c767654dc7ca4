"""Book plumbing: the "Reproduction at a glance" join and the performance appendix's table.

The chapters write one `claims.csv` per notebook under `results/<notebook>/`; `book/paper_claims.csv` holds
the paper's side (the only place where the paper's numbers are typed, each with its section). This module
joins them; `book/reproduction.ipynb` and `book/performance.ipynb` display the result.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent
CLAIM_COLUMNS = ("claim", "table", "quantity", "ours", "ours_text", "verdict", "reason", "model", "profile")
PAPER_COLUMNS = ("claim", "table", "chapter", "section", "what", "paper_value")
VERDICTS = ("reproduced", "differs", "not run here")
TABLES = ("paper", "beyond")
NOT_RUN = "not run here"
BENCHMARK_COLUMNS = ("batch", "glauber_rate", "bare_rate", "naive_rate", "speedup_vs_naive", "step_over_forward")


def results_root() -> Path:
    """results/ at the repository root, or $GLAUBER_RESULTS (the rule of `glauber_core.results_dir`)."""
    return Path(os.environ.get("GLAUBER_RESULTS") or REPO_ROOT / "results")


def _check_columns(frame: pd.DataFrame, expected: tuple[str, ...], source: str) -> None:
    missing = [c for c in expected if c not in frame.columns]
    if missing:
        raise ValueError(f"{source} lacks the column(s) {missing}; expected {list(expected)}")


def _check_values(frame: pd.DataFrame, column: str, allowed: tuple[str, ...], source: str) -> None:
    bad = sorted(set(frame[column]) - set(allowed))
    if bad:
        raise ValueError(f"{source}: {column} must be one of {list(allowed)}, got {bad}")


def read_paper_claims(path: str | Path) -> pd.DataFrame:
    """The paper's side: one row per claim id (claim, table, chapter, section, what, paper_value)."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    _check_columns(frame, PAPER_COLUMNS, str(path))
    _check_values(frame, "table", TABLES, str(path))
    duplicated = sorted(set(frame.claim[frame.claim.duplicated()]))
    if duplicated:
        raise ValueError(f"{path}: claim ids listed twice: {duplicated}")
    return frame[list(PAPER_COLUMNS)]


def read_claims(root: str | Path) -> pd.DataFrame:
    """Every `<root>/*/claims.csv` stacked, with the folder it came from in `source`; empty if none."""
    frames = []
    for path in sorted(Path(root).glob("*/claims.csv")):
        frame = pd.read_csv(path, dtype={c: str for c in CLAIM_COLUMNS if c != "ours"}, keep_default_na=False)
        _check_columns(frame, CLAIM_COLUMNS, str(path))
        _check_values(frame, "verdict", VERDICTS, str(path))
        _check_values(frame, "table", TABLES, str(path))
        frames.append(frame[list(CLAIM_COLUMNS)].assign(source=path.parent.name))
    if not frames:
        return pd.DataFrame(columns=[*CLAIM_COLUMNS, "source"])
    return pd.concat(frames, ignore_index=True)


def unknown_claims(paper: pd.DataFrame, ours: pd.DataFrame) -> list[str]:
    """Claim ids found under results/ that book/paper_claims.csv does not list."""
    return sorted(set(ours.claim) - set(paper.claim))


def reproduction_table(paper: pd.DataFrame, ours: pd.DataFrame, table: str) -> pd.DataFrame:
    """The rows of one table ("paper" or "beyond") in paper_claims.csv's order: the paper's value beside ours.

    A claim with no row under results/ gets the verdict "not run here"; a claim measured for several models
    gets one row per model.
    """
    if table not in TABLES:
        raise ValueError(f"table must be one of {list(TABLES)}, got {table!r}")
    rows = paper[paper.table == table].drop(columns="table")
    measured = ours.drop(columns="table")
    joined = rows.merge(measured, on="claim", how="left", sort=False)
    missing = joined.verdict.isna()
    joined.loc[missing, ["ours_text", "model", "profile"]] = "—"
    joined.loc[missing, "verdict"] = NOT_RUN
    joined.loc[missing, "reason"] = [f"no row in results/{c}/claims.csv: the chapter has not run in this build"
                                     for c in joined.chapter[missing]]
    return joined.reset_index(drop=True)


def chapter_href(chapter: str, root: str | Path = REPO_ROOT) -> str | None:
    """Relative link from a page in book/ to a chapter's page, or None while the chapter is not in the book
    (no notebook yet, or not listed in _toc.yml)."""
    root = Path(root)
    listed = f"notebooks/{chapter}" in (root / "_toc.yml").read_text()
    if listed and (root / "notebooks" / f"{chapter}.ipynb").exists():
        return f"../notebooks/{chapter}.html"
    return None


_VERDICT_STYLE = {"reproduced": "#1a7f37", "differs": "#b35900", NOT_RUN: "#6e7781"}
_HEADERS = ("claim (paper section)", "paper", "ours (model, profile)", "verdict and why", "chapter")
_CSS = ("<style>.claims-table{font-size:.85em;width:100%;border-collapse:collapse}"
        ".claims-table td,.claims-table th{vertical-align:top;padding:.35em .5em;border-bottom:1px solid #d0d7de}"
        ".claims-table small{color:#57606a}</style>")


def claims_html(table: pd.DataFrame, root: str | Path = REPO_ROOT) -> str:
    """One reproduction table as an HTML table (every text escaped; verdicts coloured; chapter linked)."""
    esc = html.escape
    body = []
    for row in table.itertuples(index=False):
        href = chapter_href(row.chapter, root)
        chapter = f'<a href="{esc(href)}">{esc(row.chapter)}</a>' if href else esc(row.chapter)
        claim = f"{esc(row.what)}<br><small>§ {esc(row.section)}</small>"
        ours = (esc(row.ours_text) if row.verdict == NOT_RUN and row.model == "—"
                else f"{esc(row.ours_text)}<br><small>{esc(row.model)}, {esc(row.profile)}</small>")
        verdict = (f'<span style="color:{_VERDICT_STYLE[row.verdict]};font-weight:600">{esc(row.verdict)}</span>'
                   f"<br><small>{esc(row.reason)}</small>")
        cells = (claim, esc(row.paper_value), ours, verdict, chapter)
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in _HEADERS)
    return (f'{_CSS}<table class="claims-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """How many rows carry each verdict (all three keys present)."""
    return {v: int((table.verdict == v).sum()) for v in VERDICTS}


def read_benchmark(path: str | Path) -> pd.DataFrame:
    """The benchmark's CSV (benchmarks/glauber_speed.py), sorted by batch size."""
    frame = pd.read_csv(path)
    _check_columns(frame, BENCHMARK_COLUMNS, str(path))
    if frame.empty:
        raise ValueError(f"{path} has no rows")
    return frame.sort_values("batch", ignore_index=True)
