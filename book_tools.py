"""How the book measures and judges: profiles, results folders, figure style, glued numbers, intervals,
the verdict rules and claims rows, and the summary pages' logic.

The chapters write one `claims.csv` per notebook under `results/<notebook>/`; `book/paper_claims.csv` holds
the paper's side (the only place where the paper's numbers are typed, each with its section). This module
joins them; `book/reproduction.ipynb` and `book/performance.ipynb` display the result. It imports the
core; the core never imports it.
"""

from __future__ import annotations

import functools
import html
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from glauber_core import MaskedLMConditionals, all_states, bbc_articles, check_count

REPO_ROOT = Path(__file__).resolve().parent
CLAIM_COLUMNS = ("claim", "table", "quantity", "ours", "ours_text", "verdict", "reason", "model", "profile")
PAPER_COLUMNS = ("claim", "table", "chapter", "section", "what", "paper_value")
VERDICTS = ("reproduced", "differs", "not run here")
TABLES = ("paper", "beyond")
NOT_RUN = "not run here"
BENCHMARK_COLUMNS = ("batch", "glauber_rate", "bare_rate", "naive_rate", "speedup_vs_naive", "step_over_forward")


def results_root() -> Path:
    """results/ at the repository root, or $GLAUBER_RESULTS."""
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


# --------------------------------------------------------------------------------------------
# Profiles, results folders, figure style and glued numbers
# --------------------------------------------------------------------------------------------

PROFILES = ("smoke", "quick", "paper")


def profile_settings(profile: str, table: dict, **overrides) -> SimpleNamespace:
    """A notebook's settings: GLAUBER_PROFILE (if set) picks the profile, else `profile`; overrides
    that are not None, 0 or "" replace the profile's value."""
    profile = os.environ.get("GLAUBER_PROFILE") or profile
    if profile not in table:
        raise ValueError(f"profile must be one of {sorted(table)}, got {profile!r}")
    settings = dict(table[profile])
    settings.update({k: v for k, v in overrides.items() if v not in (None, 0, "")})
    return SimpleNamespace(profile=profile, **settings)


def results_dir(notebook: str) -> Path:
    """results/<notebook>/ at the repository root (or under $GLAUBER_RESULTS), created if needed."""
    path = results_root() / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path


def set_book_style() -> None:
    """The book's seaborn look for every figure."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def glue(name: str, value) -> None:
    """Make a computed value quotable in a chapter's prose as {glue:text}`name` (myst-nb), so the text
    always states this run's number; a no-op where myst-nb is not installed (e.g. Colab)."""
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, value, display=False)


# --------------------------------------------------------------------------------------------
# Tables and checks the chapters show
# --------------------------------------------------------------------------------------------

def trajectory_frame(values: torch.Tensor, steps: torch.Tensor, name: str = "distance", **labels) -> pd.DataFrame:
    """Tidy table of a per-record quantity [B, R]: one row per (chain, step), plus constant label columns."""
    batch, records = values.shape
    frame = pd.DataFrame({"chain": np.repeat(np.arange(batch), records),
                          "step": np.tile(steps.numpy(), batch), name: values.reshape(-1).numpy()})
    return frame.assign(**labels)


def text_snapshots(cond: MaskedLMConditionals, trajectories: dict, chain: int = 0, count: int = 5) -> pd.DataFrame:
    """Text of one chain at `count` evenly spaced records, one column per trajectory label."""
    first = next(iter(trajectories.values()))
    picks = np.unique(np.linspace(0, len(first.steps) - 1, count).round().astype(int))
    return pd.DataFrame({label: cond.decode_batch(t.tokens[chain, picks]) for label, t in trajectories.items()},
                        index=[f"step {int(first.steps[k])}" for k in picks])


def state_frequencies(states: torch.Tensor, q: int) -> pd.DataFrame:
    """Empirical law of a batch of small states [B, n] over all q^n states (lexicographic order)."""
    n = states.shape[1]
    codes = (states.cpu() * q ** torch.arange(n - 1, -1, -1)).sum(1)
    counts = torch.bincount(codes, minlength=q**n).double() / len(states)
    labels = ["".join(map(str, s)) for s in all_states(q, n).tolist()]
    return pd.DataFrame({"state": labels, "empirical": counts.numpy()})


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


def fill_mask_table(fills: pd.DataFrame) -> pd.DataFrame:
    """One row per fill-mask example: the sentence, the masked word and the top predictions."""
    ranked = fills.sort_values(["example", "rank"])
    top = ranked.groupby("example").apply(
        lambda rows: ", ".join(f"{t} ({p:.2f})" for t, p in zip(rows.token, rows.prob)), include_groups=False)
    first = ranked.groupby("example").first()
    return pd.DataFrame({"sentence": first.text, "answer": first.answer, "top predictions (probability)": top})


# --------------------------------------------------------------------------------------------
# Intervals: bootstrap, rank correlation, Wilson
# --------------------------------------------------------------------------------------------

def bootstrap_ci(values, statistic=np.mean, level: float = 0.95, resamples: int = 10_000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (Efron and Tibshirani 1993) for statistic(values), rows resampled."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) < 2 or not np.isfinite(values).all():
        raise ValueError(f"values must be a 1-d array of at least 2 finite numbers, got shape {values.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    draws = np.random.default_rng(seed).integers(0, len(values), (check_count(resamples, "resamples", 1),
                                                                  len(values)))
    stats = statistic(values[draws], axis=1)
    return tuple(float(q) for q in np.quantile(stats, [(1 - level) / 2, (1 + level) / 2]))


def rank_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rank correlation along the last axis (average ranks for ties); NaN where a row is constant."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    denominator = np.sqrt((rx**2).sum(-1) * (ry**2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (rx * ry).sum(-1) / denominator, np.nan)


def spearman_ci(x, y, level: float = 0.95, resamples: int = 2_000, seed: int = 0) -> tuple[float, float, float]:
    """Spearman's rank correlation of paired x, y and its percentile bootstrap interval (pairs resampled)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 3:
        raise ValueError(f"x and y must be paired 1-d arrays of at least 3 values, got {x.shape} and {y.shape}")
    draws = np.random.default_rng(seed).integers(0, len(x), (check_count(resamples, "resamples", 1), len(x)))
    low, high = np.nanquantile(rank_correlation(x[draws], y[draws]), [(1 - level) / 2, (1 + level) / 2])
    return float(rank_correlation(x, y)), float(low), float(high)


def share_intervals(successes, trials, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score intervals for binomial shares successes / trials, elementwise over arrays."""
    from scipy.stats import norm

    k, m = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    if (m < 1).any() or (k < 0).any() or (k > m).any() or not 0 < level < 1:
        raise ValueError("share_intervals needs 0 <= successes <= trials, trials >= 1 and 0 < level < 1")
    z = norm.ppf(0.5 + level / 2)
    share = k / m
    centre = (share + z**2 / (2 * m)) / (1 + z**2 / m)
    half = z * np.sqrt(share * (1 - share) / m + z**2 / (4 * m**2)) / (1 + z**2 / m)
    return np.clip(np.minimum(centre - half, share), 0, 1), np.clip(np.maximum(centre + half, share), 0, 1)


# --------------------------------------------------------------------------------------------
# Claims rows
# --------------------------------------------------------------------------------------------

def claims_frame(rows: list[dict], model: str, profile: str) -> pd.DataFrame:
    """A chapter's claims.csv table: one row per checked claim, columns as the summary chapter reads them."""
    columns = ["claim", "table", "quantity", "ours", "ours_text", "verdict", "reason", "model", "profile"]
    frame = pd.DataFrame(rows).assign(model=model, profile=profile)
    if set(frame.columns) != set(columns) or not frame.verdict.isin(["reproduced", "differs", "not run here"]).all():
        raise ValueError(f"claims need exactly the columns {columns} and verdicts reproduced/differs/not run here")
    return frame[columns]
