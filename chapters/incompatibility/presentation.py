"""Chapter 1's presentation: the page's display tables (`*_view`), figures (`*_figure`) and prose (`*_text`).

Nothing here changes a saved number or a verdict: the data stay in the CSVs that `science` computes, the
verdicts in the rows that `judging` builds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

import book_tools as bt
import verdicts as vd
from glauber_core import rectangle_states

from .judging import mean_text, rho_text
from .science import Rectangles, kind

# ---------------------------------------------------------------------------------------------
# Tables and figures for the page (the data stay in the CSVs)
# ---------------------------------------------------------------------------------------------


def rectangles_view(frame: pd.DataFrame):
    """A few rectangles for reading: the two swaps, delta, and the influence where the model has one."""

    def swaps(site, old, new):
        return [f"{s}: {a} → {b}" for s, a, b in zip(frame[site], frame[old], frame[new])]

    view = pd.DataFrame(
        {
            "site i: A → A′": swaps("i", "A", "A_new"),
            "site j: B → B′": swaps("j", "B", "B_new"),
            "δ (nats)": frame.delta.to_numpy(),
        }
    )
    if frame.influence.notna().any():
        view["influence (TV)"] = frame.influence.to_numpy()
    return bt.reading_table(view)


def floors_view(floors: pd.DataFrame):
    """The rounding floors for reading: per model the floor c and the bounds it is the larger of."""
    view = floors[["model", "floor", "a_priori", "jitter", "precision_gap"]].rename(
        columns={
            "floor": "floor c",
            "a_priori": "a priori bound",
            "jitter": "batching change",
            "precision_gap": "fp32 vs fp64",
        }
    )
    return bt.reading_table(view, {c: "{:.1e}" for c in view.columns[1:]})


def table_one_view(table: pd.DataFrame):
    """Table 1 for reading: per model its role, mean |delta| with its 95% interval, the rectangles above the
    floor and the sign test's p, and the paper's value."""

    def mean(row):
        if not vd.finite(row.mean_abs_delta):
            return "no finite δ"
        interval = f" [{row.ci_low:.2g}, {row.ci_high:.2g}]" if vd.finite(row.ci_low, row.ci_high) else ""
        return f"{row.mean_abs_delta:.2g}{interval}"

    view = pd.DataFrame(
        {
            "model": table.model,
            "role": table.role,
            "mean |δ| [95% CI]": [mean(r) for r in table.itertuples()],
            "above floor c": [
                f"{k} of {n} (c = {c:.1e})" for k, n, c in zip(table.above_floor, table.finite, table.floor)
            ],
            "sign test p": table.sign_test_p,
            "paper": table.paper,
        }
    )
    return bt.reading_table(view, {"sign test p": "{:.1e}"})


def temperature_view(check: pd.DataFrame):
    """temperature_check_frame for reading."""
    view = check.rename(
        columns={"temperature": "τ", "max_abs_delta": "max |δ(τ)|", "identity_gap": "max |τ δ(τ) − δ(1)|"}
    )
    return bt.reading_table(view, {"τ": "{:g}", "max |τ δ(τ) − δ(1)|": "{:.1e}"})


ZERO_AT = 1e-18  # where ecdf_figure draws an exact 0 on its log axis


def ecdf_figure(models: dict[str, tuple], floor: float):
    """Fig. 5: the empirical CDF of |delta| per model on a log axis (zeros at ZERO_AT), with the masked LM's
    rounding floor. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, (cond, _, frame) in models.items():
        values = np.sort(np.maximum(frame.abs_delta.dropna().to_numpy(), ZERO_AT))
        values = np.r_[values[:1], values]
        share = np.arange(len(values)) / max(len(values) - 1, 1)
        ax.step(values, share, where="post", label=f"{kind(name, cond)}, N = {len(frame)}")
    ax.axvline(floor, color="grey", ls="--", label="the masked LM's floor")
    ax.set(
        xscale="log",
        xlabel=r"$|\delta|$ (nats; zeros drawn at $10^{-18}$)",
        ylabel="share of rectangles with $|\\delta|$ at most x",
        title=r"Fig. 5: rectangle incompatibility $|\delta|$, ECDF",
    )
    ax.legend(loc="center left", fontsize="small")
    return fig


def _rho_title(rho: tuple) -> str:
    return bt.interval_text(*rho[:3], missing="not estimable")


def influence_figure(frame: pd.DataFrame, influence: tuple, shared: tuple):
    """Fig. 6: |delta| against the influence measured apart from delta (left) and against the paper's
    measure, which shares delta's terms (right), each with Spearman's rho. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, column, rho, label in (
        (axes[0], "influence", influence, r"influence $\max(c(i \leftarrow j), c(j \leftarrow i))$ (TV)"),
        (axes[1], "paper_influence", shared, r"paper's $\max(I(i,j), I(j,i))$ (nats; shares $\delta$'s terms)"),
    ):
        sns.scatterplot(data=frame, x=column, y="abs_delta", s=18, ax=ax)
        ax.set(
            xscale="log", yscale="log", xlabel=label, ylabel=r"$|\delta|$", title="Spearman rho = " + _rho_title(rho)
        )
    fig.suptitle("Fig. 6: influence and rectangle incompatibility")
    return fig


def distance_figure(frame: pd.DataFrame, distance: tuple):
    """Mean |delta| by the distance |i - j| with 95% bootstrap bars, and Spearman's rho. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7, 4))
    sns.pointplot(data=frame, x="distance", y="abs_delta", errorbar=("ci", 95), linestyle="none", ax=ax)
    ax.set(
        xlabel="distance $|i - j|$ (tokens)",
        ylabel=r"mean $|\delta|$ (nats)",
        title="|delta| vs distance: Spearman rho = " + _rho_title(distance),
    )
    return fig


def cut_versus_gene_figure(frame: pd.DataFrame):
    """The cut against the whole gene (cut_versus_gene_run's frame): per site, the total variation between the two
    conditionals (each gene a dot, the mean a line); per gene, the share of its sites where the germline residue
    is the top prediction, cut vs whole gene. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[3, 2])
    shown = frame.assign(position=frame.site + 1)
    sns.stripplot(data=shown, x="position", y="tv", color="0.6", size=3, jitter=0.2, ax=axes[0])
    sns.pointplot(data=shown, x="position", y="tv", errorbar=None, color="C0", markers="o", ax=axes[0])
    axes[0].set(
        xlabel="site (residue from the gene's start)",
        ylabel="TV(cut, whole gene)",
        ylim=(0, 1),
        title=f"Conditionals: the first {frame.free.iloc[0]} residues alone vs in {frame.context.iloc[0]}",
    )
    top = frame.groupby("gene")[["top_cut", "top_gene"]].mean().set_axis(["cut", "whole gene"], axis=1)
    top = top.reset_index(names="gene").melt("gene", var_name="context")
    sns.pointplot(data=top, x="context", y="value", hue="gene", legend=False, ax=axes[1])
    axes[1].set(ylabel="share of sites, germline residue top-1", xlabel="", ylim=(0, 1.02), title="Per gene")
    fig.suptitle("Cutting a gene changes what the model predicts at the same sites")
    fig.tight_layout()
    return fig


def cut_versus_gene_text(frame: pd.DataFrame) -> str:
    """One sentence on cut_versus_gene_run's frame: the mean and largest TV, and the germline top-1 shares."""
    return (
        f"Over {frame.gene.nunique()} genes and {frame.free.iloc[0]} sites each, the two conditionals are "
        f"{frame.tv.mean():.2f} apart in total variation on average (largest {frame.tv.max():.2f}); the "
        f"germline residue is the top prediction at {frame.top_cut.mean():.0%} of the sites given the cut "
        f"and at {frame.top_gene.mean():.0%} given the whole gene of {frame.context.iloc[0]} residues."
    )


# ---------------------------------------------------------------------------------------------
# Prose for the page: the most incompatible rectangles as text, and the phrases glued as ch1_<name>
# ---------------------------------------------------------------------------------------------


def rectangle_corner_texts(cond, rectangles: Rectangles, rows) -> list[dict]:
    """For each of `rows`: the texts of the four states x, y, w, z and the two swaps, for display."""
    picked = rectangles.take(torch.tensor(np.array(rows, dtype=np.int64)))
    corners = rectangle_states(*picked.args())
    name = cond.tokenizer.convert_ids_to_tokens
    out = []
    for k in range(len(picked)):
        i, j = int(picked.i[k]), int(picked.j[k])
        swaps = (
            f"i={i}: {name(int(picked.tokens[k, i]))} -> {name(int(picked.a_new[k]))}; "
            f"j={j}: {name(int(picked.tokens[k, j]))} -> {name(int(picked.b_new[k]))}"
        )
        out.append({"swaps": swaps, **{s: cond.decode(c[k]) for s, c in zip("xywz", corners)}})
    return out


def most_incompatible_text(cond, rectangles: Rectangles, frame: pd.DataFrame, count: int = 3) -> str:
    """The `count` rectangles of largest |delta| as text: delta and the two swaps, then the four states."""
    top = frame.nlargest(count, "abs_delta")
    blocks = []
    for r, texts in zip(top.rectangle, rectangle_corner_texts(cond, rectangles, top.rectangle)):
        lines = [f"delta = {frame.delta[r]:+.3f}   {texts['swaps']}"]
        blocks.append("\n".join(lines + [f"  {state}: {texts[state]}" for state in "xywz"]))
    return "\n\n".join(blocks)


def correlation_text(low: float, high: float, why: str = "") -> str:
    """How the rank correlation of |delta| with the distance |i - j| reads, from its interval."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"no interval could be estimated ({why or 'too few distinct values'})"
    if high < 0:
        return "closer sites show more incompatibility"
    if low > 0:
        return "farther sites show more incompatibility"
    return "the interval includes 0: no clear trend"


def band_position_text(low: float, high: float, target_low: float, target_high: float) -> str:
    """Where an interval [low, high] sits against a range: "lies below", "lies above" or "overlaps"."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "cannot be set beside (this run has no interval for)"
    if high < target_low:
        return "lies below"
    if low > target_high:
        return "lies above"
    return "overlaps"


def _row(rows: list[dict], claim: str) -> dict:
    return next(row for row in rows if row["claim"] == claim)


def prose_text(
    rows: list[dict],
    summary: dict,
    *,
    influence: tuple,
    shared: tuple,
    distance: tuple,
    check: pd.DataFrame,
    temperature: float,
) -> dict[str, str]:
    """The numbers and phrases the chapter's prose quotes (glued as ch1_<name>): from the claims rows, the
    masked LM's summary, the three rank correlations (influence judged, the paper's measure, the distance)
    and the temperature_check_frame table."""
    m = summary
    paper_low = bt.paper_number("incompatibility_mean_abs_delta", "low")
    paper_high = bt.paper_number("incompatibility_mean_abs_delta", "high")
    return {
        "above_floor": f"{m['above_floor']} of {m['finite']}",
        "floor": f"{m['floor']:.1e}",
        "sign_p": f"{m['sign_test_p']:.0e}" if math.isfinite(m["sign_test_p"]) else "not defined",
        "rho_influence": rho_text(influence),
        "mean_text": mean_text(m),
        "mean_setup": _row(rows, "incompatibility_mean_abs_delta")["setup"],
        "size_text": band_position_text(m["ci_low"], m["ci_high"], paper_low, paper_high),
        "rho_shared": _rho_title(shared),
        "rho_distance": _rho_title(distance),
        "distance_correlation_text": correlation_text(*distance[1:4]),
        "temperature": f"{temperature:g}",
        "temperature_gap": f"{float(check.identity_gap.max()):.1e}",
        "temperature_rows": f"{check.rectangles.iloc[0]}",
    }
