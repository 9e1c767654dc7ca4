"""How the book shows: `ChapterRun` (a chapter's profile, model, results folder, saving, glue and claims), results
folders, claims and checks rows and their provenance (`code_version`), figure style, glued numbers, and the summary
pages' logic. It judges nothing: every interval and verdict rule is in `verdicts.py`.

The chapters write one `claims.csv` per notebook under `results/<notebook>/`; `book/paper_claims.csv` holds
the paper's side (the only place where the paper's numbers are typed, each with its section). This module
joins them; `book/reproduction.ipynb` and `book/performance.ipynb` display the result. It imports the
core; the core never imports it.
"""

from __future__ import annotations

import ast
import datetime
import functools
import hashlib
import html
import importlib.util
import json
import math
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from glauber_core import (
    DEFAULT_MODEL_DIR,
    MaskedLMConditionals,
    bbc_articles,
    germline_regions,
    germline_v_genes,
    is_protein,
    load_mlm,
)
from profiles import PROFILES, profile_settings  # noqa: F401 (defined once there, re-exported)

# The judging lives in verdicts.py; the names below are what the chapters and pages use through book_tools.
from verdicts import (  # noqa: F401 (re-exported: the chapters and pages read the paper's side through book_tools)
    CHECK_COLUMNS,
    DIFFERS,
    INCONCLUSIVE,
    KINDS,
    NOT_RUN,
    OPTIONAL_PAPER_COLUMNS,
    OTHER_SETUP,
    PAPER_CLAIMS,
    PAPER_COLUMNS,
    PASSAGE_NAMES,
    REPRODUCED,
    TABLES,
    VERDICTS,
    _check_columns,
    _check_values,
    bootstrap_ci,
    claim_row,
    decide_text,
    finite,
    interval_text,
    judge_model_specific,
    judge_on_paper_setup,
    model_specific_row,
    paper_band,
    paper_claim,
    paper_number,
    paper_protocol,
    parse_pairs,
    rank_correlation,
    read_paper_claims,
    share_intervals,
    share_text,
    spearman_ci,
)

REPO_ROOT = Path(__file__).resolve().parent
# `low`, `high`: our 95% interval where the rule has one; `null`: the value the rule judges against (the reproduction
# page's forest plot draws them); NaN where a rule has none (a count, a bound on exact values).
ROW_COLUMNS = (
    "claim",
    "table",
    "kind",
    "quantity",
    "ours",
    "low",
    "high",
    "null",
    "ours_text",
    "verdict",
    "reason",
    "setup",
)
NUMBER_COLUMNS = ("ours", "low", "high", "null")
# Each row also says which run made it: model, profile, the code version (a hash of the code that ran), the
# commit and the date, so that the summary pages can refuse to mix runs.
RUN_COLUMNS = ("model", "profile", "code", "commit", "run_date")
# `judged`: False for a row shown beside a claim's judged row and not judged (chapter 5's rows at the paper's tau
# when the claims are judged at a temperature matched to the model): outside the verdict count, the forest plot,
# the glue and the seed record. A row without the key is judged.
CLAIM_COLUMNS = ROW_COLUMNS + ("judged",) + RUN_COLUMNS
BENCHMARK_COLUMNS = ("batch", "glauber_rate", "bare_rate", "naive_rate", "speedup_vs_naive", "step_over_forward")


def results_root() -> Path:
    """results/ at the repository root, or $GLAUBER_RESULTS."""
    return Path(os.environ.get("GLAUBER_RESULTS") or REPO_ROOT / "results")


# --------------------------------------------------------------------------------------------
# Claims rows: what each chapter writes to results/<chapter>/claims.csv
# --------------------------------------------------------------------------------------------


def range_text(values, digits: int = 2, form: str = "f", missing: str = "undefined (no finite value)") -> str:
    """ "a to b", the smallest and largest finite values, or the words in `missing` when none is finite."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not len(values):
        return missing
    return f"{values.min():.{digits}{form}} to {values.max():.{digits}{form}}"


def _code_bytes(path: Path) -> bytes:
    """What of a file its numbers depend on: a Python module's syntax tree without docstrings (so comments,
    docstrings and layout do not count), any other file's bytes; b"" for a missing file."""
    if not path.exists():
        return b""
    if path.suffix != ".py":
        return path.read_bytes()
    return _syntax_bytes(path.read_text())


@functools.lru_cache(maxsize=512)
def _syntax_bytes(text: str) -> bytes:
    """A module's syntax tree without docstrings, parsed once per text (the trust page asks for every case's
    chapter version, and a parse of the core takes 0.2 s)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def code_version(notebook: str) -> str:
    """A short hash of the code a chapter's numbers depend on: the core, `verdicts`, the paper's side
    (book/paper_claims.csv), the profiles' settings reader (profiles.py), every module of the chapter
    packages its notebook imports except the presentation ones (``presentation*.py``: figures, display tables,
    prose) and the notebook's code cells; modules count by their syntax without docstrings. A fix to a figure, a
    sentence, a docstring, a comment or the book's plumbing (this module) leaves committed results valid; a change
    to an estimator, a rule or a protocol marks them stale."""
    folder = "book" if (REPO_ROOT / "book" / f"{notebook}.ipynb").exists() else "notebooks"
    source = REPO_ROOT / folder / f"{notebook}.ipynb"
    cells = json.loads(source.read_text()).get("cells", []) if source.exists() else []
    code = "\n".join("".join(cell["source"]) for cell in cells if cell.get("cell_type") == "code")
    names = sorted(
        {
            name
            for pair in re.findall(r"from chapters import (\w+)|import chapters\.(\w+)", code)
            for name in pair
            if name
        }
    )
    paths = [REPO_ROOT / "glauber_core.py", REPO_ROOT / "verdicts.py", REPO_ROOT / "profiles.py"]
    paths.append(REPO_ROOT / "book" / "paper_claims.csv")  # the paper's side: protocols, values and bands
    for name in names:
        package = REPO_ROOT / "chapters" / name
        modules = sorted(package.glob("*.py")) if package.is_dir() else [REPO_ROOT / "chapters" / f"{name}.py"]
        paths += [path for path in modules if not path.name.startswith("presentation")]
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + _code_bytes(path))
    digest.update(b"notebook code cells\n" + code.encode())
    return digest.hexdigest()[:12]


def git_commit() -> str:
    """The checked-out commit (short hash, "+changes" when the work tree differs), or "unknown"."""
    try:
        run = functools.partial(subprocess.run, cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        commit = run(["git", "rev-parse", "--short", "HEAD"]).stdout.strip()
        dirty = run(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit + ("+changes" if dirty else "")) if commit else "unknown"


def write_claims(rows: list[dict], notebook: str, model: str, profile: str) -> pd.DataFrame:
    """Check a chapter's claims rows and write them to results/<notebook>/claims.csv, every row naming the
    run that made it (model, profile, code version, commit, date); returns the frame."""
    frame = pd.DataFrame(rows)
    _check_columns(frame, ROW_COLUMNS, f"{notebook} claims")
    frame["judged"] = frame.judged.fillna(True).astype(bool) if "judged" in frame else True
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    frame = frame.assign(
        model=model, profile=profile, code=code_version(notebook), commit=git_commit(), run_date=stamp
    )[list(CLAIM_COLUMNS)]
    _check_values(frame, "verdict", VERDICTS, f"{notebook} claims")
    frame.to_csv(results_dir(notebook) / "claims.csv", index=False)
    return frame


def write_checks(rows: list[dict], notebook: str, model: str, profile: str) -> pd.DataFrame:
    """A chapter's checks of its code path (verdicts.check_row: identities and controls, pass or fail) to
    results/<notebook>/checks.csv, with the run columns; outside the verdict count."""
    frame = pd.DataFrame(rows, columns=list(CHECK_COLUMNS))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    frame = frame.assign(model=model, profile=profile, code=code_version(notebook), commit=git_commit(), run_date=stamp)
    frame.to_csv(results_dir(notebook) / "checks.csv", index=False)
    return frame


def read_checks(root: str | Path) -> pd.DataFrame:
    """Every `<root>/*/checks.csv` stacked, with the folder it came from in `source`; empty if none."""
    columns = [*CHECK_COLUMNS, *RUN_COLUMNS]
    frames = [
        pd.read_csv(path, dtype=str, keep_default_na=False)[columns].assign(source=path.parent.name)
        for path in sorted(Path(root).glob("*/checks.csv"))
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*columns, "source"])


def read_claims(root: str | Path) -> pd.DataFrame:
    """Every `<root>/*/claims.csv` stacked, with the folder it came from in `source`; empty if none."""
    frames = []
    for path in sorted(Path(root).glob("*/claims.csv")):
        frame = pd.read_csv(
            path, dtype={c: str for c in CLAIM_COLUMNS if c not in NUMBER_COLUMNS}, keep_default_na=False
        )
        frame = frame.assign(**{c: pd.to_numeric(frame[c], errors="coerce") for c in NUMBER_COLUMNS if c in frame})
        frame["judged"] = frame.judged.ne("False") if "judged" in frame else True  # older files: every row judged
        _check_columns(frame, CLAIM_COLUMNS, str(path))
        _check_values(frame, "verdict", VERDICTS, str(path))
        _check_values(frame, "table", TABLES, str(path))
        frames.append(frame[list(CLAIM_COLUMNS)].assign(source=path.parent.name))
    if not frames:
        return pd.DataFrame(columns=[*CLAIM_COLUMNS, "source"])
    return pd.concat(frames, ignore_index=True)


def check_one_run(ours: pd.DataFrame, profile: str | None = None, model: str | None = None) -> dict:
    """The summary pages show one run: every row must come from the build's profile and model (when given:
    `make book` passes them) and from the code that is checked out now. Raises one ValueError naming the
    first row that is not; returns {"profile", "model", "commit", "dates"} of the run."""
    for row in ours.itertuples(index=False):
        where = f"results/{row.source}/claims.csv row {row.claim!r}"
        if profile and row.profile != profile:
            raise ValueError(
                f"{where} comes from the {row.profile!r} profile, but this book is built at "
                f"{profile!r}: rerun the chapter (make book re-executes it) or remove the file"
            )
        if model and row.model != model:
            raise ValueError(f"{where} was made with model {row.model!r}, but this book uses {model!r}")
        if row.code != code_version(row.source):
            raise ValueError(
                f"{where} was made by other code (version {row.code}, now "
                f"{code_version(row.source)}): rerun the chapter"
            )
    profiles = sorted(set(ours.profile))
    if len(profiles) > 1:
        raise ValueError(f"the results mix profiles {profiles}: rebuild them from one run")
    return {
        "profile": profiles[0] if profiles else (profile or "—"),
        "model": ", ".join(sorted(set(ours.model))),
        "commit": ", ".join(sorted(set(ours.commit))) or "—",
        "dates": " to ".join(sorted({min(ours.run_date), max(ours.run_date)})) if len(ours) else "—",
    }


def unknown_claims(paper: pd.DataFrame, ours: pd.DataFrame) -> list[str]:
    """Claim ids found under results/ that book/paper_claims.csv does not list."""
    return sorted(set(ours.claim) - set(paper.claim))


def reproduction_table(
    paper: pd.DataFrame, ours: pd.DataFrame, table: str, rates: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The rows of one table ("paper" or "beyond") in paper_claims.csv's order: the paper's value beside ours.

    A claim with no row under results/ gets the verdict "not run here"; a claim measured for several models
    gets one row per model, and a row shown beside the judged one (`judged` False) follows it. Column
    `decide_at`: for an inconclusive judged row, the run that would decide it. Given `rates` (rule_rates), each claim's rule's measured rates join its rows.
    """
    if table not in TABLES:
        raise ValueError(f"table must be one of {list(TABLES)}, got {table!r}")
    rows = paper[paper.table == table].drop(columns="table")
    measured = ours.drop(columns=["table", "kind"])
    joined = rows.merge(measured, on="claim", how="left", sort=False)
    missing = joined.verdict.isna()
    joined.loc[missing, ["ours_text", "model", "profile", "setup"]] = "—"
    joined.loc[missing, "verdict"] = NOT_RUN
    joined.loc[missing, "reason"] = [
        f"no row in results/{c}/claims.csv: the chapter has not run in this build" for c in joined.chapter[missing]
    ]
    numbers = joined.reindex(columns=["ours", "low", "high", "null"]).apply(pd.to_numeric, errors="coerce")
    joined["judged"] = joined.judged.fillna(True).astype(bool)
    joined["decide_at"] = [
        decide_at(v, r, *n, side=side) if judged else ""
        for v, r, n, side, judged in zip(
            joined.verdict, joined.reason, numbers.itertuples(index=False), joined.side, joined.judged
        )
    ]
    if rates is not None:
        joined = joined.merge(rates, on="claim", how="left", sort=False)
        joined["rates"] = joined.rates.fillna("")
        joined["labels"] = joined.labels.fillna("")
    return joined.reset_index(drop=True)


def decide_at(verdict: str, reason: str, ours: float, low: float, high: float, null: float, side: str = "") -> str:
    """What run would decide an inconclusive row: the clause of its reason that says so, else, where its interval
    contains its null, verdicts.decide_text (the size for 80% power at the observed effect, intervals shrinking
    like one over the square root of the run's size, and, given the paper's `side` of the null, the verdict it
    would reach); "" for a decided row or one with neither."""
    if verdict != INCONCLUSIVE:
        return ""
    said = [part for part in re.split(r"; |: ", str(reason)) if "would decide it" in part]
    if len(said) > 1:  # a claim of several parts: the part that needs the largest run binds
        return _binding_clause(said)
    if said:
        return said[0]
    values = (ours, low, high, null)
    direction = side if side in ("above", "below") else None
    return decide_text(*values, direction) if finite(*values) and low <= null <= high else ""


def _binding_clause(clauses: list[str]) -> str:
    """Of several parts' "would decide it" clauses, the one naming the largest run (a claim "in every part" is
    reproduced only when every part is); when the parts would reach different verdicts, the clause without its
    verdict, saying so."""
    sizes = [float(m.group(1).replace(",", "")) if (m := re.search(r"about ([\d.,]+)x", c)) else 0.0 for c in clauses]
    binding = clauses[int(np.argmax(sizes))]
    reached = {m.group(1) for c in clauses if (m := re.search(r"would find it (\w+)", c))}
    if len(reached) > 1:
        return re.sub(r", and would find it \w+", "", binding) + ", though its parts point to different verdicts"
    return binding


def chapter_href(chapter: str, root: str | Path = REPO_ROOT) -> str | None:
    """Relative link from a page in book/ to a chapter's page, or None while the chapter is not in the book
    (no notebook yet, or not listed in _toc.yml)."""
    root = Path(root)
    listed = f"notebooks/{chapter}" in (root / "_toc.yml").read_text()
    if listed and (root / "notebooks" / f"{chapter}.ipynb").exists():
        return f"../notebooks/{chapter}.html"
    return None


OPERATING_CHARACTERISTICS = REPO_ROOT / "results" / "calibration" / "operating_characteristics.csv"
POWER_FLOOR = 0.2  # below this lowest power where the claim holds, a rule "cannot decide at this size"
POWER_TARGET = 0.8  # the power DESIGN.md asks of a rule before the book judges a claim by it
CANNOT_DECIDE = "cannot decide at this size"
LOW_POWER = "low power at this size"
CANNOT_FAIL = "cannot fail at this size"
# Each label of a rule, by the rule that gives it (power_labels applies them to make calibrate's table).
POWER_LABELS = {
    CANNOT_DECIDE: f"some case where the claim holds is decided correctly on under {POWER_FLOOR:.0%} of seeds",
    LOW_POWER: f"some case where the claim holds is decided correctly on under {POWER_TARGET:.0%} of seeds "
    f"(every one on at least {POWER_FLOOR:.0%})",
    CANNOT_FAIL: "every case where the claim fails has power 0: the rule never said differs there, so at this "
    "size a claim that fails reads as inconclusive at best",
}


def power_labels(cases: pd.DataFrame) -> list[str]:
    """The POWER_LABELS one rule earns from its rows of make calibrate's table (`truth`, `power`): CANNOT_DECIDE
    when its lowest power where the claim holds is under POWER_FLOOR (or it has no such case), else LOW_POWER
    when under POWER_TARGET; CANNOT_FAIL when it has cases where the claim fails and every one has power 0."""
    holds, fails = cases.power[cases.truth == "holds"], cases.power[cases.truth == "fails"]
    lowest = float(holds.min()) if len(holds) else math.nan
    labels = [CANNOT_DECIDE] if not lowest >= POWER_FLOOR else [LOW_POWER] if lowest < POWER_TARGET else []
    return labels + ([CANNOT_FAIL] if len(fails) and (fails == 0).all() else [])


def power_labels_text(rates: pd.DataFrame) -> str:
    """A note (Markdown) stating each of POWER_LABELS with its rule and the claims that carry it in `rates`
    (rule_rates), so that the labels follow the table when make calibrate reruns."""
    items = []
    for label, rule in POWER_LABELS.items():
        claims = [c for c, labels in zip(rates.claim, rates.labels) if label in labels.split("; ")]
        carried = ", ".join(f"`{c}`" for c in claims) if claims else "no rule today"
        items.append(f"- **{label}**: {rule}. Carried by {carried}.")
    return "\n".join(items)


def read_operating_characteristics(path: str | Path = OPERATING_CHARACTERISTICS) -> pd.DataFrame:
    """make calibrate's table (tools/calibrate.py): one row per (claim, known-answer case) with its verdict counts
    over the seeds, wrong-decision share and Wilson interval, power and code version; empty when not made."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=["claim", "case", "truth", "seeds", "wrong", "wrong_share", "power", "code"])
    return pd.read_csv(path, dtype={"code": str})


def rule_rates(characteristics: pd.DataFrame) -> pd.DataFrame:
    """Per claim, from make calibrate's table: `rates`, the worst case's wrong decisions (count, seeds and the
    Wilson interval of the share) and the lowest power where the claim holds and where it fails, in words;
    `power_holds` and `power_fails`, those lowest powers (NaN without such a case); and `labels`, its
    power_labels joined by "; " ("" when none)."""
    rows = []
    for claim, cases in characteristics.groupby("claim", sort=False):
        worst = cases.loc[cases.wrong_share.idxmax()]
        lowest = {truth: cases.power[cases.truth == truth].min() for truth in ("holds", "fails")}
        decides = [
            f"decides {lowest[truth]:.0%} of the cases where the claim {truth}"
            if math.isfinite(lowest[truth])
            else f"no case where it {truth}"
            for truth in ("holds", "fails")
        ]
        text = (
            f"at this size, wrong in {int(worst.wrong)} of {int(worst.seeds)} seeds on its hardest known case "
            f"(95% up to {worst.wrong_high:.0%}); at least, " + " and ".join(decides)
        )
        rows.append(
            dict(
                claim=claim,
                rates=text,
                power_holds=float(lowest["holds"]),
                power_fails=float(lowest["fails"]),
                labels="; ".join(power_labels(cases)),
            )
        )
    return pd.DataFrame(rows, columns=["claim", "rates", "power_holds", "power_fails", "labels"])


# Okabe-Ito colours, told apart by colour-blind readers, each with its own marker and label.
_VERDICT_STYLE = {
    REPRODUCED: "#009e73",
    DIFFERS: "#d55e00",
    INCONCLUSIVE: "#6f6f6f",
    OTHER_SETUP: "#0072b2",
    NOT_RUN: "#999999",
}
_VERDICT_MARKER = {REPRODUCED: "o", DIFFERS: "s", INCONCLUSIVE: "D", OTHER_SETUP: "^", NOT_RUN: "x"}
_VERDICT_SYMBOL = {REPRODUCED: "●", DIFFERS: "■", INCONCLUSIVE: "◆", OTHER_SETUP: "▲", NOT_RUN: "✕"}
_CSS = (
    "<style>.claims-table{font-size:.85em;width:100%;table-layout:fixed;border-collapse:collapse}"
    ".claims-table td,.claims-table th{vertical-align:top;padding:.35em .45em;border-bottom:1px solid #d0d7de;"
    "overflow-wrap:anywhere}.claims-table small{color:#57606a}.claims-table details{margin-top:.3em}"
    ".claims-table summary{cursor:pointer;color:#57606a;font-size:.9em}</style>"
)
_CLAIM_COLUMNS = (("claim", "24%"), ("paper", "17%"), ("ours", "31%"), ("verdict", "20%"), ("chapter", "8%"))


def verdict_label(verdict: str) -> str:
    """A verdict as a coloured label with its symbol (HTML), told apart without colour too."""
    style = f"color:{_VERDICT_STYLE[verdict]};font-weight:600;white-space:nowrap"
    return f'<span style="{style}">{_VERDICT_SYMBOL[verdict]} {html.escape(verdict)}</span>'


def claims_html(table: pd.DataFrame, root: str | Path = REPO_ROOT) -> str:
    """A reproduction table as an HTML table that fits the page's column: per row the claim's short title and
    section, the paper's value and model, ours with its run, the verdict as a coloured label and the chapter
    link; under the verdict, the rule's power labels and, for an inconclusive row, the run that would decide it
    (decide_at); the full statement, the setup differences, the rule's reason, its calibration and its measured
    rates in a dropdown under it. Every text is escaped."""
    esc = html.escape
    body = []
    for row in table.itertuples(index=False):
        href = chapter_href(row.chapter, root)
        number = row.chapter.split("_")[0]
        chapter = f'<a href="{esc(href)}">{esc(number)}</a>' if href else esc(number)
        claim = f"{esc(row.title)}<br><small>§ {esc(row.section)}</small>"
        paper = f"{esc(row.paper_value)}<br><small>{esc(row.paper_model)}</small>"
        ours = (
            esc(row.ours_text)
            if row.verdict == NOT_RUN and row.model == "—"
            else f"{esc(row.ours_text)}<br><small>{esc(row.model)}, {esc(row.profile)}</small>"
        )
        labels = str(getattr(row, "labels", "") or "")
        weak = f"<br><small><b>{esc(labels)}</b></small>" if labels else ""
        details = [("claim", row.what), ("setup differences", row.setup), ("why", row.reason)]
        details += [("rule calibrated", getattr(row, "calibration", "")), ("rule's rates", getattr(row, "rates", ""))]
        decide = str(getattr(row, "decide_at", "") or "")
        weak += f"<br><small>{esc(decide)}</small>" if decide else ""
        items = "".join(f"<p><b>{name}:</b> {esc(str(text))}</p>" for name, text in details if str(text or "").strip())
        if not getattr(row, "judged", True):
            weak = "<br><small><b>shown beside, not judged</b></small>"
        verdict = f"{verdict_label(row.verdict)}{weak}<details><summary>why</summary>{items}</details>"
        cells = (claim, paper, ours, verdict, chapter)
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    columns = "".join(f'<col style="width:{width}">' for _, width in _CLAIM_COLUMNS)
    head = "".join(f"<th>{name}</th>" for name, _ in _CLAIM_COLUMNS)
    return (
        f'{_CSS}<table class="claims-table"><colgroup>{columns}</colgroup><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def judged_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows that carry a verdict: all but those shown beside a judged row (`judged` False)."""
    return rows[rows.judged.fillna(True).astype(bool)] if "judged" in rows else rows


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """How many rows carry each verdict (all five keys present)."""
    return {v: int((table.verdict == v).sum()) for v in VERDICTS}


def run_summary_text(run: dict, tables: dict[str, pd.DataFrame]) -> str:
    """The reproduction page's first line: which run it shows (check_one_run's `run`) and its verdicts, the
    general claims' and the model-specific ones' counted apart; rows shown beside, not judged, are not counted."""
    rows = judged_rows(pd.concat(list(tables.values()), ignore_index=True))
    counts = []
    for kind in ("general", "model-specific"):
        tally = verdict_counts(rows[rows.kind == kind])
        counts.append(f"{kind} claims: " + ", ".join(f"{n} {verdict}" for verdict, n in tally.items() if n))
    return (
        f"**This run:** model `{run['model']}`, profile `{run['profile']}`, commit `{run['commit']}`, "
        f"{run['dates']}. **Verdicts**, " + "; ".join(counts) + "."
    )


def checks_html(checks: pd.DataFrame) -> str:
    """The Checks table: identities and controls of the code path, pass or fail, with what each proves."""
    esc = html.escape
    body = []
    for row in checks.itertuples(index=False):
        colour = _VERDICT_STYLE[REPRODUCED] if row.result == "pass" else _VERDICT_STYLE[DIFFERS]
        cells = (
            esc(row.check),
            esc(row.proves),
            f'<span style="color:{colour};font-weight:600">{esc(row.result)}'
            f"</span><br><small>{esc(row.detail)}</small>",
            esc(row.source),
        )
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    widths = (("check", "20%"), ("what it proves", "34%"), ("result", "32%"), ("chapter", "14%"))
    columns = "".join(f'<col style="width:{width}">' for _, width in widths)
    head = "".join(f"<th>{name}</th>" for name, _ in widths)
    return (
        f'{_CSS}<table class="claims-table"><colgroup>{columns}</colgroup><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def forest_rows(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The general claims that ran, in paper_claims.csv's order, each with its place on the forest plot's common
    scale (standardised_interval): `z`, `z_low`, `z_high`, NaN for a rule with no interval against a null."""
    rows = judged_rows(pd.concat([t[t.kind == "general"] for t in tables.values()], ignore_index=True))
    rows = rows[rows.verdict != NOT_RUN].reset_index(drop=True)
    scaled = [standardised_interval(r.ours, r.low, r.high, r.null, r.side) for r in rows.itertuples(index=False)]
    return rows.assign(**dict(zip(("z", "z_low", "z_high"), np.array(scaled, dtype=float).reshape(-1, 3).T)))


def standardised_interval(estimate, low, high, null, side: str) -> tuple[float, float, float]:
    """An estimate and its interval on a scale common to every claim: their distance from the null in units of
    the interval's half-width on the null's side, signed so that the paper's side (`side`, "above" or "below"
    the null) is positive. The interval clears the null exactly where its near end is past 0, that is where
    |z| > 1. NaNs when there is no interval, no null, no side or no width (which decides nothing). An estimate
    outside its own interval is placed at the interval's nearer end."""
    sign = {"above": 1.0, "below": -1.0}.get(side)
    if sign is None or not finite(estimate, low, high, null) or not low <= high:
        return math.nan, math.nan, math.nan
    estimate = min(max(estimate, low), high)  # a percentile or BCa interval need not hold its estimate
    z, ends = sign * (estimate - null), sorted((sign * (low - null), sign * (high - null)))
    half = z - ends[0] if z >= 0 else ends[1] - z
    return (z / half, ends[0] / half, ends[1] / half) if half > 0 else (math.nan, math.nan, math.nan)


def forest_figure(rows: pd.DataFrame, limit: float = 4.0):
    """Every general claim on one scale (forest_rows): its estimate and 95% interval as distances from the null
    in half-widths, the paper's side to the right, the null at 0 (dashed), ends past `limit` drawn as arrows.
    A rule with no interval against a null (a count, "in every part") shows its verdict as a marker in the
    right-hand strip. Colour, marker and label give the verdict. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(8.5, 0.38 * len(rows) + 1.5))
    strip = limit + 1.6
    for y, row in rows.iterrows():
        colour, marker = _VERDICT_STYLE[row.verdict], _VERDICT_MARKER[row.verdict]
        if not finite(row.z):
            ax.plot([strip], [y], marker, color=colour, ms=8)
            continue
        ax.plot([max(row.z_low, -limit), min(row.z_high, limit)], [y, y], color=colour, lw=2.5)
        if row.z_low < -limit:
            ax.plot([-limit], [y], "<", color=colour, ms=6)
        if row.z_high > limit:
            ax.plot([limit], [y], ">", color=colour, ms=6)
        ax.plot([min(max(row.z, -limit), limit)], [y], marker, color=colour, ms=7)
    ax.axvline(0, color="black", ls="--", lw=1)
    ax.axvspan(limit + 0.6, strip + 0.8, color="#f0f0f0", zorder=0)
    ax.text(strip, -0.9, "no interval", ha="center", va="bottom", fontsize=8, color="#57606a")
    ax.set(xlim=(-limit - 0.3, strip + 0.8), ylim=(len(rows) - 0.5, -1.2), yticks=range(len(rows)))
    ax.set_yticklabels([_short(r.title) for r in rows.itertuples(index=False)], fontsize=9)
    ax.set_xticks(range(-int(limit), int(limit) + 1))
    ax.set_xlabel("distance from the null in half-widths of the 95% interval (paper's side to the right)")
    shown = [v for v in (REPRODUCED, DIFFERS, INCONCLUSIVE) if v in set(rows.verdict)] or [INCONCLUSIVE]
    handles = [Line2D([], [], color=_VERDICT_STYLE[v], marker=_VERDICT_MARKER[v], lw=2.5, ms=7, label=v) for v in shown]
    handles.append(Line2D([], [], color="black", ls="--", lw=1, label="null of the rule"))
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.45, 1.0), ncol=len(handles), frameon=False)
    ax.grid(axis="y", visible=False)
    fig.tight_layout()
    return fig


def _short(title: str, width: int = 48) -> str:
    """A claim's title cut to `width` characters for a figure's axis."""
    return title if len(title) <= width else title[: width - 1] + "…"


def seed_record_text(seeds: pd.DataFrame) -> str:
    """The seed record (tools/compare_verdicts.py's table, read as text) in words: per kind, how many rows
    changed between the seeds and how many were reproduced at one seed and differs at another; rows that are
    "other setup" at every seed are left out, and a warning follows when the seeds ran different code or a
    chapter's code has changed since."""
    verdicts = [c for c in seeds.columns if c.startswith("verdict_seed")]
    codes = [c for c in seeds.columns if c.startswith("code_seed")]
    unjudged = seeds[verdicts].eq(OTHER_SETUP).all(axis=1)
    judged = seeds[~unjudged]
    counts = judged.groupby("kind")[["flipped", "opposed"]].agg(lambda c: int((c == "True").sum()))
    sizes = judged.groupby("kind").size()
    text = f"Across {len(verdicts)} seeds at the quick profile on the bundled model: " + "; ".join(
        f"{row.flipped} of {sizes[kind]} {kind} rows changed, {row.opposed} of them between reproduced and differs"
        for kind, row in counts.iterrows()
    )
    text += f" (the {int(unjudged.sum())} rows that are *other setup* at every seed are not judged on this model)."
    same = seeds[codes].replace("", np.nan).nunique(axis=1).le(1).all()
    made_at = seeds[codes].replace("", np.nan).bfill(axis=1).iloc[:, 0].fillna("")  # a row absent at seed 0 too
    moved = sorted(c for c, code in made_at.groupby(seeds.chapter).first().items() if code != code_version(c))
    if not same:
        text += "\n\n> **Warning:** the seeds did not run the same code."
    if moved:
        text += f"\n\n> **Warning:** the code of {', '.join(moved)} has changed since this record was made."
    return text


def operating_characteristics_figure(table: pd.DataFrame):
    """make calibrate's cases, one line each: the wrong-decision share over the seeds with its 95% Wilson
    interval, against the 10% check (dashed) and the 5% design (dotted); a circle where the claim holds, a
    square where it fails. Returns the figure."""
    import matplotlib.pyplot as plt

    rows = table.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.6))
    for y, row in rows.iterrows():
        colour = "#0072b2" if row.truth == "holds" else "#d55e00"
        ax.plot([row.wrong_low, row.wrong_high], [y, y], color=colour, lw=2)
        ax.plot([row.wrong_share], [y], "o" if row.truth == "holds" else "s", color=colour, ms=6)
    ax.axvline(0.10, color="black", ls="--", lw=1)
    ax.axvline(0.05, color="black", ls=":", lw=1)
    labels = [_short(f"{r.claim.replace('_', ' ')}: {r.case}", 56) for r in rows.itertuples()]
    ax.set(yticks=range(len(rows)), xlim=(-0.02, max(0.3, float(rows.wrong_high.max()) + 0.02)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("share of seeds decided wrongly (95% Wilson interval)")
    ax.plot([], [], "o", color="#0072b2", label="claim holds: wrong = differs")
    ax.plot([], [], "s", color="#d55e00", label="claim fails: wrong = reproduced")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def operating_characteristics_html(table: pd.DataFrame) -> str:
    """make calibrate's table for the page: claim, case, truth, seeds, the three verdict counts, the wrong share
    with its Wilson interval and the power, every text escaped."""
    esc = html.escape
    head = (
        "claim",
        "known-answer case",
        "the claim",
        "seeds",
        "reproduced",
        "differs",
        "inconclusive",
        "wrong",
        "power",
    )
    body = []
    for row in table.itertuples(index=False):
        wrong = f"{row.wrong_share:.0%} [{row.wrong_low:.0%}, {row.wrong_high:.0%}]"
        cells = (row.claim, row.case, row.truth, row.seeds, row.reproduced, row.differs, row.inconclusive, wrong)
        body.append("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells) + f"<td>{row.power:.0%}</td></tr>")
    header = "".join(f"<th>{h}</th>" for h in head)
    return f'{_CSS}<table class="claims-table"><thead><tr>{header}</tr></thead><tbody>{"".join(body)}</tbody></table>'


POWER_CURVES = REPO_ROOT / "results" / "calibration" / "power_curves.csv"


def read_power_curves(path: str | Path = POWER_CURVES) -> pd.DataFrame:
    """make power-curves' table (tools/calibrate.py --scale): make calibrate's columns plus `scale` (a multiple of
    the quick sizes) and `sizes` (the settings it multiplies), one row per (case, scale); empty when not made."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=["claim", "case", "truth", "scale", "sizes", "seeds", "wrong_share", "power"])
    return pd.read_csv(path, dtype={"code": str})


def power_at_scales(curves: pd.DataFrame) -> pd.DataFrame:
    """Per claim, from the power curves: the sizes scaled, the lowest power over its cases where the claim holds
    and the worst wrong share over all its cases at each scale (columns `holds x<K>` and `wrong x<K>`), and
    `80% at`, the smallest scale from which on (at it and every larger scale run) every case where the claim
    holds is decided correctly on at least POWER_TARGET of its seeds (NaN where no scale run is such)."""
    rows = []
    scales = sorted(curves.scale.unique())
    for claim, part in curves.groupby("claim", sort=False):
        row = {"claim": claim, "sizes": part.sizes.iloc[0]}
        for scale in scales:
            at = part[part.scale == scale]
            holds = at.power[at.truth == "holds"]
            row[f"holds x{scale}"] = float(holds.min()) if len(holds) else math.nan
            row[f"wrong x{scale}"] = float(at.wrong_share.max()) if len(at) else math.nan
        reached = [k for i, k in enumerate(scales) if all(row[f"holds x{j}"] >= POWER_TARGET for j in scales[i:])]
        row["80% at"] = f"x{reached[0]}" if reached else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def power_reach_text(scaled: pd.DataFrame) -> str:
    """A note (Markdown) on power_at_scales' table: how many rules reach POWER_TARGET on every case where their
    claim holds at each scale, which do not keep it up to the largest, whose power falls by over 20 points from the
    smallest scale to the largest, and which err on over 10% of seeds at some scale."""
    if scaled.empty:
        return "No power curves yet: run `make power-curves`."
    scales = [int(c.removeprefix("holds x")) for c in scaled.columns if c.startswith("holds x")]
    reach = [f"{int((scaled[f'holds x{k}'] >= POWER_TARGET).sum())} at x{k}" for k in scales]
    never = scaled.claim[scaled["80% at"].isna()].tolist()
    first, last = f"holds x{scales[0]}", f"holds x{scales[-1]}"
    falls = [
        f"`{r.claim}` ({r[first]:.0%} at x{scales[0]}, {r[last]:.0%} at x{scales[-1]})"
        for _, r in scaled.iterrows()
        if r[last] < r[first] - 0.2
    ]
    errs = [
        f"`{r.claim}` (x{k}: {r[f'wrong x{k}']:.0%})"
        for _, r in scaled.iterrows()
        for k in scales
        if r[f"wrong x{k}"] > 0.10
    ]
    text = f"Of {len(scaled)} rules, the number with {POWER_TARGET:.0%} power on every true case: {', '.join(reach)}."
    text += (
        f" Not by x{scales[-1]}: " + ", ".join(f"`{c}`" for c in never) + "."
        if never
        else f" Every rule reaches it by x{scales[-1]}."
    )
    if falls:
        text += (
            " Power that falls as the run grows (typically a rule that needs every part to clear: more parts, more"
            " chances for one to fall short): "
        )
        text += ", ".join(falls) + "."
    return text + (
        " Over the 10% check at some size: " + ", ".join(errs) + "."
        if errs
        else " None errs on over 10% of seeds at any size."
    )


def power_curves_figure(curves: pd.DataFrame, columns: int = 4):
    """One panel per claim: each known-answer case's power (solid, circles where the claim holds, squares where it
    fails) and wrong-decision share (dotted) against the scale of the run, a multiple of the quick sizes (log
    axis), with the POWER_TARGET (dashed) and the 10% check (grey). Returns the figure."""
    import matplotlib.pyplot as plt

    if curves.empty:
        raise ValueError("no power curves to draw: run `make power-curves`")
    claims = list(dict.fromkeys(curves.claim))
    rows = math.ceil(len(claims) / columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(3.0 * columns, 2.3 * rows), sharex=True, sharey=True, squeeze=False
    )
    scales = sorted(curves.scale.unique())
    for ax, claim in zip(axes.flat, claims):
        for (_, truth), case in curves[curves.claim == claim].groupby(["case", "truth"], sort=False):
            case = case.sort_values("scale")
            colour = "#0072b2" if truth == "holds" else "#d55e00"
            ax.plot(case.scale, case.power, "-o" if truth == "holds" else "-s", color=colour, ms=4, lw=1.2)
            ax.plot(case.scale, case.wrong_share, ":", color=colour, lw=1)
        ax.axhline(POWER_TARGET, color="black", ls="--", lw=0.8)
        ax.axhline(0.10, color="grey", lw=0.8)
        ax.set_title(_short(claim.replace("_", " "), 34), fontsize=9)
        ax.set_xscale("log")
        ax.set_xticks(scales, labels=[f"x{k}" for k in scales])
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.03)
    for ax in axes.flat[len(claims) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("share of seeds")
    fig.legend(
        handles=[
            plt.Line2D([], [], color="#0072b2", marker="o", label="power, claim holds"),
            plt.Line2D([], [], color="#d55e00", marker="s", label="power, claim fails"),
            plt.Line2D([], [], color="grey", ls=":", label="wrong share"),
            plt.Line2D([], [], color="black", ls="--", label=f"{POWER_TARGET:.0%} power"),
        ],
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=4,
        frameon=False,
        fontsize=8,
    )
    fig.supxlabel("size of the run, as a multiple of the quick profile's (the claim's named sizes)", fontsize=9)
    fig.tight_layout()
    return fig


def read_benchmark(path: str | Path) -> pd.DataFrame:
    """The benchmark's CSV (benchmarks/glauber_speed.py), sorted by batch size; an empty text field (a run
    without --note) reads as "", not NaN."""
    frame = pd.read_csv(path)
    _check_columns(frame, BENCHMARK_COLUMNS, str(path))
    if frame.empty:
        raise ValueError(f"{path} has no rows")
    texts = [
        c
        for c in frame.columns
        if c not in BENCHMARK_COLUMNS and (frame[c].isna().all() or not pd.api.types.is_numeric_dtype(frame[c]))
    ]
    return frame.fillna({c: "" for c in texts}).sort_values("batch", ignore_index=True)


_BENCHMARK_HEADERS = {
    "batch": "chains B",
    "glauber_rate": "Glauber chain-steps/s",
    "bare_rate": "bare forward, chain-steps/s",
    "naive_rate": "naive loop, chain-steps/s",
    "speedup_vs_naive": "speedup vs naive",
    "step_over_forward": "step / bare forward",
}


_BLOCK_HEADERS = {
    "block_size": "block size",
    "larger_blocks": "larger calls",
    "unblocked_rate": "unblocked, chain-steps/s",
    "block_cost": "block cost",
}


def benchmark_table(bench: pd.DataFrame):
    """The benchmark's rates and ratios as a reading table, one row per batch size (and model and n where the table
    has several); the fixed-shape blocks' size, the checked larger calls the batch used, and their cost where it
    measured them."""
    if "larger_blocks" in bench:
        bench = bench.assign(
            larger_blocks=[str(v).removesuffix(".0") if pd.notna(v) else "none" for v in bench.larger_blocks]
        )
    headers = {c: h for c, h in ({"model": "model", "seq_len": "n"}).items() if c in bench and bench[c].nunique() > 1}
    headers |= _BENCHMARK_HEADERS | {c: h for c, h in _BLOCK_HEADERS.items() if c in bench}
    table = bench[list(headers)].rename(columns=headers)
    rates = {name: "{:.1f}" for name in [*list(_BENCHMARK_HEADERS.values())[1:4], _BLOCK_HEADERS["unblocked_rate"]]}
    ratios = {name: "{:.2f}" for name in ("speedup vs naive", "step / bare forward", "block cost")}
    formats = rates | ratios | {"chains B": "{:d}", "block size": "{:d}"}
    return reading_table(table, {c: f for c, f in formats.items() if c in table.columns})


# --------------------------------------------------------------------------------------------
# Across models: chapters 1, 2 and 4 on every bundled model (tools/across_models.py writes
# results/across_models/, book/across_models.ipynb reads it)
# --------------------------------------------------------------------------------------------

ACROSS_MODELS = REPO_ROOT / "results" / "across_models"
ACROSS_CHAPTERS = ("01_incompatibility", "02_mixing_bounds", "04_basins")
ACROSS_COMMAND = "make across-models"
ANTIBERTY_RESULTS = REPO_ROOT / "results" / "antiberty"  # make antiberty (tools/across_models.py --set antiberty)
RUN_TABLE_COLUMNS = ("chapter", "model", "status", "seconds", "profile", "command", "commit", "finished")


def family_table(
    models_dir: str | Path = REPO_ROOT / "models", metrics_dir: str | Path = REPO_ROOT / "results" / "model"
) -> pd.DataFrame:
    """The bundled family, one row per folder of models/ (shallowest first): layers, fp16 size, training steps,
    and held-out masked top-1 (over `tokens` masked tokens) and pseudo-perplexity beside the frozen-encoder
    baseline's (models/evaluate.py)."""
    metrics_dir = Path(metrics_dir)
    paths = sorted(metrics_dir.glob("metrics*.csv"))
    if not paths:
        raise FileNotFoundError(f"no metrics*.csv under {metrics_dir}: run `python models/evaluate.py --layers N`")
    metrics = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    value = metrics.set_index(["model", "metric"]).value
    tokens = metrics.set_index(["model", "metric"]).n_tokens
    rows = []
    for config in Path(models_dir).glob("*/config.json"):
        name, layers = config.parent.name, json.loads(config.read_text())["num_hidden_layers"]
        suffix = "" if name == DEFAULT_MODEL_DIR.name else f"_l{layers}"
        log = metrics_dir / f"train_log{suffix}.csv"
        steps = int(pd.read_csv(log).step.max()) if log.exists() else pd.NA
        baseline = f"baseline-frozen-l{layers}"
        size_mb = (config.parent / "model.safetensors").stat().st_size / 1e6
        rows.append(
            {
                "model": name,
                "layers": layers,
                "size_mb": size_mb,
                "steps": steps,
                "top1": value.get((name, "heldout_masked_top1"), math.nan),
                "tokens": tokens.get((name, "heldout_masked_top1"), 0),
                "baseline_top1": value.get((baseline, "heldout_masked_top1"), math.nan),
                "pppl": value.get((name, "heldout_pseudo_perplexity"), math.nan),
                "baseline_pppl": value.get((baseline, "heldout_pseudo_perplexity"), math.nan),
            }
        )
    return pd.DataFrame(rows).astype({"steps": "Int64"}).sort_values("layers", ignore_index=True)


def read_across(chapter: str, table: str, root: str | Path = ACROSS_MODELS) -> pd.DataFrame:
    """One merged table of the across-models sweep (<root>/<chapter>/<table>.csv: every model's rows)."""
    path = Path(root) / chapter / f"{table}.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{ACROSS_COMMAND}` (tools/across_models.py)")
    return pd.read_csv(path, dtype={column: str for column in RUN_COLUMNS})


def across_run(root: str | Path = ACROSS_MODELS) -> dict:
    """How the across-models results were made (<root>/run.csv: one row per chapter and model) and whether
    the code has changed since: {"command", "commit", "profile", "finished", "models", "minutes", "stale"},
    where "stale" lists the chapters whose code version (code_version) differs from their claims rows'.
    Raises ValueError naming a cell that did not finish."""
    path = Path(root) / "run.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{ACROSS_COMMAND}` (tools/across_models.py)")
    run = pd.read_csv(path, dtype=str, keep_default_na=False)
    _check_columns(run, RUN_TABLE_COLUMNS, str(path))
    failed = run[run.status != "done"]
    if len(failed):
        first = failed.iloc[0]
        raise ValueError(
            f"across-models cell {first.chapter} on {first.model} is {first.status!r}: rerun `{ACROSS_COMMAND}`"
        )
    claims = {chapter: read_across(chapter, "claims", root) for chapter in dict.fromkeys(run.chapter)}
    stale = [chapter for chapter, rows in claims.items() if set(rows.code) != {code_version(chapter)}]
    return {
        "command": run.command.iloc[0],
        "commit": ", ".join(sorted(set(run.commit))),
        "profile": ", ".join(sorted(set(run.profile))),
        "finished": max(run.finished),
        "models": list(dict.fromkeys(run.model)),
        "minutes": run.seconds.astype(float).sum() / 60,
        "stale": stale,
    }


def verdict_grid(
    claims: pd.DataFrame, models: list[str], chapters=ACROSS_CHAPTERS, paper: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The verdicts of every general claim of `chapters`, one row per claim (paper_claims.csv's order), one
    column per model (in the order given); a claim a model has no row for is "not run here"."""
    paper = read_paper_claims() if paper is None else paper
    order = paper.claim[(paper.kind == "general") & paper.chapter.isin(chapters)].tolist()
    general = judged_rows(claims[claims.kind == "general"])
    grid = general.pivot_table(index="claim", columns="model", values="verdict", aggfunc="first")
    return grid.reindex(index=order, columns=models).fillna(NOT_RUN).rename_axis(index="claim", columns="model")


def table1_across(table1: pd.DataFrame, claims: pd.DataFrame, models: list[str]) -> pd.DataFrame:
    """Table 1's shape: one row per masked LM (mean |δ| with its interval, share above the floor, the
    incompatibility verdict), then the controls of the first model's run (causal LM, Potts references; the
    same in every run)."""
    verdicts = claims[claims.claim == "incompatibility_detected"].set_index("model").verdict
    tested = table1[table1.role == "masked LM under test"].set_index("model").reindex(models)

    def number(value, form):
        return f"{value:{form}}" if finite(value) else "—"

    rows = [
        {
            "model": name,
            "role": "masked LM",
            "rectangles": number(row.rectangles, ".0f"),
            "mean |δ| [95% CI]": interval_text(
                row.mean_abs_delta, row.ci_low, row.ci_high, missing="no finite δ in this run"
            ),
            "share above floor": number(row.share_above, ".2f"),
            "largest |δ|": number(row.max_abs_delta, ".2g"),
            "verdict": verdicts.get(name, NOT_RUN),
        }
        for name, row in tested.iterrows()
    ]
    first = table1[(table1.role != "masked LM under test") & (table1.model_param == models[0])]
    rows += [
        {
            "model": row.model,
            "role": row.role,
            "rectangles": number(row.rectangles, ".0f"),
            "mean |δ| [95% CI]": (
                f"{row.mean_abs_delta:.2g} [{row.ci_low:.2g}, {row.ci_high:.2g}]"
                if finite(row.mean_abs_delta)
                else "no finite δ in this run"
            ),
            "share above floor": number(row.share_above, ".2f"),
            "largest |δ|": number(row.max_abs_delta, ".2g"),
            "verdict": "",
        }
        for row in first.itertuples(index=False)
    ]
    return pd.DataFrame(rows).set_index("model")


def table5_across(
    table3: pd.DataFrame, claims: pd.DataFrame, models: list[str], baseline: float, target: str = "politics"
) -> pd.DataFrame:
    """Table 5's shape: mean target score at the last step, one row per seed topic, one column per model,
    "✓" where it is above the baseline (the target's own seed topic is labelled "(seed)"); then chapter 4's
    count of crossing topics and its recurrence verdict for each model."""
    ends = table3.pivot_table(index="seed topic", columns="model", values=f"{target} at end", sort=False)
    ends = ends.reindex(columns=models)
    marked = ends.map(lambda v: "—" if not math.isfinite(v) else f"{v:.3f}{' ✓' if v > baseline else ''}")
    by_claim = claims.set_index(["claim", "model"])
    counts = by_claim.loc["endpoint_topics_crossing", "ours"] if "endpoint_topics_crossing" in by_claim.index else {}
    verdicts = by_claim.loc["politics_recurrence", "verdict"] if "politics_recurrence" in by_claim.index else {}
    others = int((ends.index != target).sum())
    marked.loc["topics crossing"] = [
        f"{counts[m]:.0f} of {others}" if finite(counts.get(m, math.nan)) else "—" for m in models
    ]
    marked.loc["recurrence verdict (chapter 4)"] = [verdicts.get(m, NOT_RUN) for m in models]
    return marked.rename(index={target: f"{target} (seed)"}).rename_axis(index="seed topic", columns=None)


def depth_text(family: pd.DataFrame, table1: pd.DataFrame, alpha: pd.DataFrame, grid: pd.DataFrame) -> str:
    """The page's sentence on what depth changes: depth_trend of held-out top-1 (Wilson intervals), mean |δ|
    and α(τ ≈ 1) over the models of `grid` (shallowest first), then which general verdicts change with depth."""
    models = list(grid.columns)
    family = family.reindex(models)
    low, high = share_intervals(np.round(family.top1 * family.tokens), np.maximum(family.tokens, 1))
    tested = table1[table1.role == "masked LM under test"].set_index("model").reindex(models)
    series = {
        "held-out top-1": list(zip(family.top1, low, high)),
        "mean |δ|": list(zip(tested.mean_abs_delta, tested.ci_low, tested.ci_high)),
        f"α(τ ≈ {alpha.temperature.iloc[0]:g})": list(
            zip(alpha.reindex(models).alpha_mean, alpha.reindex(models).low, alpha.reindex(models).high)
        ),
    }
    layers = " to ".join(str(n) for n in (family.layers.iloc[0], family.layers.iloc[-1]))
    parts = [
        f"{name} **{depth_trend(values)}** ({', '.join(f'{v[0]:.3g}' for v in values)})"
        for name, values in series.items()
    ]
    changing = [claim for claim, row in grid.iterrows() if row[row != NOT_RUN].nunique() > 1]
    verdicts = (
        f"every general claim gets the same verdict at every depth ({len(grid)} claims)"
        if not changing
        else f"{len(grid) - len(changing)} of {len(grid)} general claims get the same verdict at every "
        f"depth; {', '.join(changing)} change(s) with the model"
    )
    return f"From {layers} layers: {'; '.join(parts)}; {verdicts}."


def alpha_near(alpha: pd.DataFrame, temperature: float = 1.0) -> pd.DataFrame:
    """Chapter 2's α(τ) rows at the run's temperature closest to `temperature`, one row per model (indexed by it)."""
    nearest = alpha.loc[(alpha.temperature - temperature).abs().groupby(alpha.model).idxmin()]
    return nearest.set_index("model")


def verdict_grid_figure(grid: pd.DataFrame, layers: pd.Series):
    """The verdict grid as coloured cells (the reproduction page's verdict colours), one column per model
    labelled with its depth; returns (figure, axes)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    codes = grid.apply(lambda column: column.map(VERDICTS.index)).to_numpy()
    fig, ax = plt.subplots(figsize=(2.2 + 1.8 * grid.shape[1], 0.9 + 0.45 * len(grid)))
    ax.imshow(
        codes,
        cmap=ListedColormap([_VERDICT_STYLE[v] for v in VERDICTS]),
        vmin=-0.5,
        vmax=len(VERDICTS) - 0.5,
        aspect="auto",
    )
    for (i, j), verdict in np.ndenumerate(grid.to_numpy()):
        ax.text(j, i, verdict, ha="center", va="center", color="white", fontsize=9, fontweight="bold")
    ax.set_xticks(range(grid.shape[1]), [f"{m}\n({layers[m]} layers)" for m in grid.columns], fontsize=9)
    ax.set_yticks(range(len(grid)), [c.replace("_", " ") for c in grid.index], fontsize=9)
    ax.grid(False)
    ax.set_title("General claims: verdict of each chapter's rule, per model")
    fig.tight_layout()
    return fig, ax


def depth_figure(
    table1: pd.DataFrame,
    alpha: pd.DataFrame,
    table3: pd.DataFrame,
    family: pd.DataFrame,
    models: list[str],
    target: str = "politics",
    baseline: float = 1 / 9,
):
    """Three panels against the number of layers: mean |δ| (chapter 1), α(τ ≈ 1) (chapter 2), each with
    its 95% interval, and the mean target score at the last step per seed topic (chapter 4)."""
    import matplotlib.pyplot as plt

    layers = family.reindex(models).layers.to_numpy()
    tested = table1[table1.role == "masked LM under test"].set_index("model").reindex(models)
    near = alpha.reindex(models)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, mid, low, high, label in (
        (axes[0], tested.mean_abs_delta, tested.ci_low, tested.ci_high, "mean |δ| over rectangles"),
        (axes[1], near.alpha_mean, near.low, near.high, f"α(τ = {near.temperature.iloc[0]:g}), mean over contexts"),
    ):
        mid, low, high = (np.asarray(v, dtype=float) for v in (mid, low, high))
        ax.errorbar(layers, mid, yerr=np.clip([mid - low, high - mid], 0, None), fmt="o-", capsize=4)
        ax.set(ylabel=label, ylim=(0, None))
    ends = (
        table3[table3["seed topic"] != target]
        .pivot_table(index="model", columns="seed topic", values=f"{target} at end")
        .reindex(models)
    )
    for topic in ends.columns:
        axes[2].plot(layers, ends[topic], "o-", label=topic)
    axes[2].axhline(baseline, color="grey", linestyle="--", label=f"1/{round(1 / baseline)}")
    axes[2].set(ylabel=f"{target} score at the last step", ylim=(0, None))
    axes[2].legend(fontsize=8, ncol=2)
    for ax, title in zip(axes, ("chapter 1: incompatibility", "chapter 2: influence", "chapter 4: recurrence")):
        ax.set(xlabel="layers", xticks=layers, title=title)
    fig.tight_layout()
    return fig


def depth_trend(estimates: list[tuple[float, float, float]]) -> str:
    """How a measured quantity changes with depth, from (estimate, low, high) per model, shallowest first:
    "rises" or "falls" when the estimates move one way from model to model and the shallowest and deepest
    models' intervals do not overlap, "does not change clearly" otherwise (and for fewer than two models)."""
    if len(estimates) < 2 or not all(finite(*e) for e in estimates):
        return "does not change clearly"
    values = [e[0] for e in estimates]
    (_, low_first, high_first), (_, low_last, high_last) = estimates[0], estimates[-1]
    steps = np.diff(values)
    if (steps > 0).all() and low_last > high_first:
        return "rises"
    if (steps < 0).all() and high_last < low_first:
        return "falls"
    return "does not change clearly"


# --------------------------------------------------------------------------------------------
# Profiles, results folders, figure style and glued numbers
# --------------------------------------------------------------------------------------------


def model_label(model: str = "") -> str:
    """The name a run's rows carry: the model name as given, or the bundled model's folder name for ""."""
    return model or DEFAULT_MODEL_DIR.name


def glue_prefix(notebook: str) -> str:
    """The glue-key prefix of a notebook: "ch5" for "05_traps", the notebook's name for a page that is not a
    numbered chapter ("quick_tour"). Every key a chapter glues is `<prefix>_<name>`; a claim's verdict is
    `<prefix>_<claim>_verdict`."""
    number = re.match(r"(\d+)_", notebook)
    return f"ch{int(number.group(1))}" if number else notebook


def results_dir(notebook: str) -> Path:
    """results/<notebook>/ at the repository root (or under $GLAUBER_RESULTS), created if needed."""
    path = results_root() / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path


class ChapterRun:
    """One run of a chapter (or book page): the profile and model resolved once, the model's conditionals
    (`cond`, loaded on first use), the results folder (`out`), and the one way to save a table (`save`), the
    claims rows (`claims`), the checks (`checks`) and glued numbers (`glue`). It sets the book's figure style
    and glues the paper's side of the notebook's claims (glue_paper)."""

    def __init__(self, notebook: str, profile: str, model: str = ""):
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        self.notebook, self.profile, self.model_arg = notebook, profile, model
        self.model = model_label(model)
        self.prefix = glue_prefix(notebook)
        self._cond = None
        self._state: dict = {}
        set_book_style()
        glue_paper(notebook)

    @property
    def cond(self) -> MaskedLMConditionals:
        """The masked LM's conditionals (glauber_core.load_mlm), loaded once."""
        if self._cond is None:
            self._cond = load_mlm(self.model_arg or None)
        return self._cond

    @property
    def out(self) -> Path:
        """The run's results folder: results/<notebook>/ (or under $GLAUBER_RESULTS)."""
        return results_dir(self.notebook)

    def state(self, context: int, free: int) -> None:
        """Name the run's protein state, `context` residues of which `free` move, for `save` to stamp."""
        self._state = dict(context=int(context), free=int(free))

    def save(self, frame: pd.DataFrame, name: str, index: bool = False) -> pd.DataFrame:
        """Write `frame` to <out>/<name>.csv with `model` (kept when the frame has one: a reference chain's
        name) and `profile` columns; returns the frame as written. On a protein model every table of its states
        says what the state was: a table without `context` (residues in the state) and `free` (free sites) columns
        gets the run's (`state`), a table with its own `n` taking n as its free sites. Rows of other models (a
        table's control and reference chains, by their own `model`) are left empty, a table of only other models'
        rows left as it is."""
        mine = "model" not in frame.columns
        ours = pd.Series(True, index=frame.index) if mine else frame["model"].eq(self.model)
        if self._state and (mine or ours.any()) and is_protein(self.cond):
            stamp = {**self._state, **({"free": frame["n"]} if "n" in frame.columns else {})}
            for column in ("context", "free"):
                if column not in frame:  # object where rows are left empty: integers stay integers
                    value = pd.Series(stamp[column], index=frame.index)
                    frame = frame.assign(**{column: value if ours.all() else value.astype(object).where(ours)})
        frame = frame if "model" in frame.columns else frame.assign(model=self.model)
        frame = frame.assign(profile=self.profile)
        frame.to_csv(self.out / f"{name}.csv", index=index)
        return frame

    def glue(self, values: dict) -> None:
        """Glue each name -> value as {glue:text}`<prefix>_<name>`."""
        glue_all({f"{self.prefix}_{name}": value for name, value in values.items()})

    def claims(self, rows: list[dict]):
        """Write the claims rows (write_claims, stamped with this run), glue each claim's verdict as
        `<prefix>_<claim>_verdict` and return the verdicts table a reader sees (claims_view)."""
        frame = write_claims(rows, self.notebook, self.model, self.profile)
        self.glue({f"{row.claim}_verdict": row.verdict for row in judged_rows(frame).itertuples(index=False)})
        return claims_view(frame)

    def checks(self, rows: list[dict]) -> pd.DataFrame:
        """Write the checks rows (write_checks, stamped with this run); returns the frame."""
        return write_checks(rows, self.notebook, self.model, self.profile)


def settings_view(cfg: SimpleNamespace):
    """A run's settings as a reader sees them: one row a setting, its value as text (cut to 70 characters)."""
    values = [str(value) if len(str(value)) <= 70 else str(value)[:69] + "…" for value in vars(cfg).values()]
    return reading_table(pd.DataFrame({"setting": list(vars(cfg)), "value": values}))


def checks_view(frame: pd.DataFrame):
    """A chapter's checks as a reader sees them: what each proves, pass or fail, and its detail."""
    return reading_table(frame[["check", "proves", "result", "detail"]])


def claims_view(frame: pd.DataFrame):
    """A chapter's verdicts as a reader sees them: the reproduction page's table (claims_html) for its rows,
    with the paper's side from paper_claims.csv and each rule's measured rates."""
    from IPython.display import HTML

    paper = read_paper_claims().drop(columns=["table", "kind"])
    rows = frame.merge(paper, on="claim", how="left", sort=False)
    rows = rows.merge(rule_rates(read_operating_characteristics()), on="claim", how="left", sort=False)
    rows = rows.assign(rates=rows.rates.fillna(""), labels=rows.labels.fillna(""))
    return HTML(claims_html(rows))


def reading_table(frame: pd.DataFrame, formats: dict | None = None, missing: str = "—"):
    """A table made for the page: no index column, numbers formatted (`formats`: column -> format string
    such as "{:.2f}"; other float columns get 3 significant digits) and `missing` for NaN."""
    floats = [c for c in frame.columns if pd.api.types.is_float_dtype(frame[c])]
    style = {c: "{:.3g}" for c in floats} | (formats or {})
    return frame.style.hide(axis="index").format(na_rep=missing).format(style, na_rep=missing)


def set_book_style() -> None:
    """The book's seaborn look for every figure."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


GLUE_PREFIX = "application/papermill.record/"  # the mime prefix of myst-nb's glued outputs (myst_nb.ext.glue)


def glue(name: str, value) -> None:
    """Make a computed value quotable in a chapter's prose as {glue:text}`name` (myst-nb), so the text
    always states this run's number; a no-op where myst-nb is not installed (e.g. Colab). The output is
    myst_nb.glue(name, value, display=False)'s, written here: importing myst-nb in a kernel pulls in
    jsonschema's IRI grammar, 3 s a notebook."""
    if importlib.util.find_spec("myst_nb") is None:
        return
    from IPython.core.formatters import format_display_data
    from IPython.display import display

    bundle, metadata = format_display_data(value)
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
    display({GLUE_PREFIX + kind: data for kind, data in bundle.items()}, raw=True, metadata=metadata)


def glue_all(values: dict) -> None:
    """Glue every name -> value of `values` (one call per section of a chapter)."""
    for name, value in values.items():
        glue(name, value)


def glue_paper(chapter: str, path: str | Path = PAPER_CLAIMS) -> None:
    """Make the paper's side of a chapter's claims quotable in its prose: {glue:text}`paper_<claim>` is the
    paper's value as paper_claims.csv states it, and {glue:text}`paper_<claim>_<key>` each number of its
    `values` column, so a chapter never types a paper number itself."""
    claims = read_paper_claims(path)
    for row in claims[claims.chapter == chapter].itertuples(index=False):
        glue(f"paper_{row.claim}", row.paper_value)
        for key, value in parse_pairs(row.values).items():
            glue(f"paper_{row.claim}_{key}", value)


# --------------------------------------------------------------------------------------------
# Tables and checks the chapters show
# --------------------------------------------------------------------------------------------


def trajectory_frame(values: torch.Tensor, steps: torch.Tensor, name: str = "distance", **labels) -> pd.DataFrame:
    """Tidy table of a per-record quantity [B, R]: one row per (chain, step), plus constant label columns."""
    batch, records = values.shape
    frame = pd.DataFrame(
        {
            "chain": np.repeat(np.arange(batch), records),
            "step": np.tile(steps.numpy(), batch),
            name: values.reshape(-1).numpy(),
        }
    )
    return frame.assign(**labels)


def text_snapshots(cond: MaskedLMConditionals, trajectories: dict, chain: int = 0, count: int = 5) -> pd.DataFrame:
    """Text of one chain at `count` evenly spaced records, one column per trajectory label."""
    first = next(iter(trajectories.values()))
    picks = np.unique(np.linspace(0, len(first.steps) - 1, count).round().astype(int))
    return pd.DataFrame(
        {label: cond.decode_batch(t.tokens[chain, picks]) for label, t in trajectories.items()},
        index=[f"step {int(first.steps[k])}" for k in picks],
    )


def sampling_noise_tv(probs, draws: int) -> float:
    """Expected TV between a law and the empirical law of `draws` samples from it (normal approximation):
    1/2 sum_s sqrt(2 p_s (1 - p_s) / (pi draws))."""
    probs = np.asarray(probs, dtype=float)
    return float(0.5 * np.sqrt(2 * probs * (1 - probs) / (np.pi * draws)).sum())


_WORD = re.compile(r"[a-z]+")


@functools.lru_cache(maxsize=1)
def bbc_vocabulary() -> frozenset:
    """Lower-case alphabetic words of the BBC training articles."""
    return frozenset(w for a in bbc_articles("train") for p in a.paragraphs for w in _WORD.findall(p.lower()))


def known_word_share(texts) -> list[float]:
    """Per text, the share of its alphabetic words that occur in the BBC training text."""
    vocabulary = bbc_vocabulary()
    shares = []
    for text in texts:
        found = _WORD.findall(text.lower())
        shares.append(sum(w in vocabulary for w in found) / len(found) if found else 0.0)
    return shares


def fill_mask_table(fills: pd.DataFrame):
    """One row per fill-mask example: the sentence, the masked word and the top predictions (a reading table)."""
    ranked = fills.sort_values(["example", "rank"])
    top = ranked.groupby("example").apply(
        lambda rows: ", ".join(f"{t} ({p:.2f})" for t, p in zip(rows.token, rows.prob)), include_groups=False
    )
    first = ranked.groupby("example").first()
    return reading_table(
        pd.DataFrame(
            {"sentence": first.text, "answer": first.answer, "top predictions (probability)": top}
        ).reset_index(drop=True)
    )


# --------------------------------------------------------------------------------------------
# A pretrained MLM: AntiBERTy (tools/across_models.py --set antiberty writes results/antiberty/,
# book/antiberty.ipynb reads it)
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def fr1_length() -> int:
    """The residues of the shortest FR1 among the human germline V genes (IMGT positions 1-26, 25 or 26 residues)."""
    return min(germline_regions(allele)["fr1"][1] for allele, *_ in germline_v_genes("human"))


def fr1_window(n: int, name: str = "seq_len") -> int:
    """n, checked as a protein chapter's free sites: the first n residues of a whole gene, which the chapters
    call FR1, so at most fr1_length(); raises ValueError naming the parameter and the limit otherwise."""
    if not 1 <= n <= fr1_length():
        raise ValueError(
            f"{name} = {n}: on a protein model the free sites lie within the first {name} residues of each gene, its FR1, "
            f"which has {fr1_length()} residues in the shortest human V gene; give {name} from 1 to {fr1_length()}"
        )
    return n


def verdicts_beside(claims: dict[str, pd.DataFrame], paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every general claim (paper_claims.csv's order), one column per model of `claims` (label -> that model's
    claims rows): its verdict, "not run here" where the model has no row. The quantity of the last model's row
    says what was measured on it."""
    paper = read_paper_claims() if paper is None else paper
    general = paper[paper.kind == "general"]
    frame = pd.DataFrame({"claim": general.claim.to_numpy(), "chapter": general.chapter.to_numpy()})
    for label, rows in claims.items():
        verdicts = judged_rows(rows[rows.kind == "general"]).drop_duplicates("claim").set_index("claim")
        frame[label] = frame.claim.map(verdicts.verdict).fillna(NOT_RUN)
        frame[f"{label}: what was measured"] = frame.claim.map(verdicts.quantity).fillna("—")
    return frame


def verdicts_beside_html(beside: pd.DataFrame, paper: pd.DataFrame | None = None) -> str:
    """verdicts_beside's table in the claims tables' form, fitting the page's column: the claim's short title,
    one coloured verdict label per model, and what was measured on each model in a dropdown."""
    esc = html.escape
    paper = (read_paper_claims() if paper is None else paper).set_index("claim")
    labels = [c for c in beside.columns if c not in ("claim", "chapter") and not c.endswith(": what was measured")]
    body = []
    for row in beside.to_dict("records"):
        measured = "".join(
            f"<p><b>{esc(label)}:</b> {esc(str(row.get(f'{label}: what was measured', '—')))}</p>" for label in labels
        )
        title = f"{esc(paper.title[row['claim']])}<br><small>{esc(row['chapter'])}</small>"
        cells = [f"{title}<details><summary>what was measured</summary>{measured}</details>"]
        cells += [verdict_label(row[label]) for label in labels]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    width = 60 // max(len(labels), 1)
    columns = '<col style="width:40%">' + "".join(f'<col style="width:{width}%">' for _ in labels)
    head = "<th>claim</th>" + "".join(f"<th>{esc(label)}</th>" for label in labels)
    return (
        f'{_CSS}<table class="claims-table"><colgroup>{columns}</colgroup><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
