"""Chapter 2's presentation: the sentences the prose quotes (`*_text`, glued as ch2_<name>), the tables
for the page (`*_view`) and the figures (`*_figure`). Nothing here changes a saved number or a verdict
(the code_version hash leaves presentation*.py out).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from glauber_core import Conditionals

from .judging import _alpha_at, _alpha_row_text, _ratio_text, _theorem5_row, _theorem8_holds
from .science import FAST_FACTOR, FULL_VOCABULARY_LIMIT, PAPER_TEMPERATURES

# --------------------------------------------------------------------------------------------
# Sentences the prose quotes (glued by the notebook as ch2_<name>)
# --------------------------------------------------------------------------------------------


def theorem_text(holds: bool, what: str = "holds in every case, as it must") -> str:
    """A theorem check in words: it must hold; a failure is a bug."""
    return what if holds else "FAILS in some case (a bug in this code)"


def crossing_text(tau_star: float, grid) -> str:
    """Where the context-averaged alpha drops below 1, in words."""
    if math.isinf(tau_star):
        return f"stays at or above 1 up to the grid's top, τ = {max(grid):g}"
    if tau_star <= min(grid):
        return f"is already below 1 at the grid's lowest temperature, τ = {tau_star:g}"
    return f"drops below 1 from τ = {tau_star:g} on"


def alpha_text(alpha: pd.DataFrame, tau_star: float) -> dict:
    """Where the context-averaged alpha crosses 1, and alpha at the paper's tau = 10 and 11 in words."""
    return {
        "crossing": crossing_text(tau_star, alpha.temperature),
        **{f"alpha{tau}": _alpha_row_text(_alpha_at(alpha, tau)) for tau in PAPER_TEMPERATURES},
    }


def lemma6_text(lemma6: pd.DataFrame) -> dict:
    """Lemma 6's violations, how many checks, and the range of the median share of the bound used."""
    return {
        "lemma6_violations": f"{int(lemma6.violations.sum())}",
        "lemma6_checks": f"{int(lemma6.pairs.sum()):,}",
        "lemma6_ratio": bt.range_text(lemma6.median_ratio),
    }


def corollary7_text(table: pd.DataFrame, tau_star: float) -> dict:
    """Corollary 7's temperature (context-averaged Delta) and how far above the crossing of alpha it lies."""
    tau7 = float(table.corollary7_temperature[table.contexts == "mean over contexts"].iloc[0])
    factor = (
        f"{tau7 / tau_star:.1f} times"
        if math.isfinite(tau_star) and tau_star > 0
        else "not comparable with (no crossing on the grid)"
    )
    return {"tau7": f"{tau7:.1f}", "tau7_factor": factor}


def theorem5_text(profiles: pd.DataFrame) -> dict:
    """Theorem 5 on the exact Potts profiles: where alpha < 1, whether the bound holds there and by how much it
    overshoots, the slowest chain where alpha >= 1, and the ratios tau_alpha / tau_fast (an illustration: the claim
    is judged on the model, in chapter 3)."""
    tight, unbounded = profiles[profiles.alpha < 1], profiles[profiles.alpha >= 1]
    row = _theorem5_row(profiles)
    return {
        "t5_cases": f"{len(tight)} of {len(profiles)}",
        "t5_holds": theorem_text(bool((tight.bound >= tight.t_mix).all())),
        "t5_ratio": bt.range_text(tight.ratio, 1),
        "t5_thresholds": row["ours_text"],
        "t5_unbounded_tmix": f"{unbounded.t_mix.max():.0f}",
    }


def theorem8_text(theorem8: pd.DataFrame) -> dict:
    """Whether Theorem 8's bounds hold, and the range of how loose each is."""
    return {
        "t8_holds": theorem_text(_theorem8_holds(theorem8), "Both bounds hold"),
        "t8_escape": bt.range_text(theorem8.escape_looseness, 3, "g"),
        "t8_tmix": bt.range_text(theorem8.t_mix_looseness, 3, "g"),
    }


def margin_text(margins: pd.DataFrame, cond: Conditionals, n: int) -> dict:
    """How many states are perfect traps, their n sites, and the model's |V|."""
    return {
        "perfect_traps": f"{int(margins.perfect_trap.sum())} of {len(margins)}",
        "sites": f"{n}",
        "size_v": f"{int(cond.allowed.sum()):,}",
    }


def drift_text(summary: pd.DataFrame | None, reason: str = "") -> dict:
    """Sentences for the drift section, per temperature, and whether the certificate holds."""
    if summary is None or summary.empty:
        return {"drift_result": f"could not be computed: {reason}", "drift_text": "is not available"}
    parts = [
        f"at τ = {r.temperature:g}, {r.positive} of {r.states} positive (median {r.median:.2f}, min {r.min:.2f})"
        for r in summary.itertuples()
    ]
    holds = bool((summary.positive == summary.states).all())
    return {"drift_result": "; ".join(parts), "drift_text": "holds" if holds else "fails"}


def window_text(windows: pd.DataFrame) -> dict:
    """Sentences for the window comparison (TV of each pseudo-likelihood law from mu_tau, over windows)."""
    return {
        "window_count": f"{len(windows)}",
        "window_tv_model": bt.range_text(windows.tv_model_pl),
        "window_tv_own": bt.range_text(windows.tv_compatible_pl),
        "window_pl_gap": bt.range_text(windows.pl_gap, 2, "e"),
        "window_pl_floor": f"{bt.range_text(windows.pl_floor, 1, 'e')} ({', '.join(sorted(set(windows.score_dtype)))})",
        "window_closer": f"{int((windows.tv_model_pl < windows.tv_compatible_pl).sum())} of {len(windows)}",
        "window_conditional_gap": bt.range_text(windows.conditional_gap, 3),
        "window_spearman": bt.range_text(windows.spearman),
    }


def asymmetry_text(asymmetry: pd.DataFrame) -> dict:
    """The Potts chain's distances at the smallest and the largest asymmetry (potts_a<a>)."""
    ends = asymmetry.set_index("asymmetry").iloc[[0, -1]]
    return {
        f"potts_a{int(a)}": (
            f"{row.tv_gibbs_of_symmetric_part:.2g} from the Gibbs law of S and "
            f"{row.tv_pseudo_likelihood:.2f} from the pseudo-likelihood law "
            f"(PL gap {row.pl_gap:.2g})"
        )
        for a, row in ends.iterrows()
    }


def full_window_text(table: pd.DataFrame | None, plan) -> dict:
    """The full-vocabulary windows in words (section 8): what ran, the exact t_mix, where Theorem 5 gives a
    bound and how far it overshoots, the PL gap at tau = 1; "not computed" when they did not run."""
    names = ("full_rows", "full_plan", "full_tmix", "full_bounded", "full_ratio", "full_pl_gap")
    if table is None:
        return {name: f"not computed (more than {FULL_VOCABULARY_LIMIT} tokens)" for name in names}
    bounded = table[np.isfinite(table.bound)]
    return dict(
        zip(
            names,
            (
                f"{len(table)}",
                "; ".join(
                    f"k = {k}: {count} germlines at tau = " + ", ".join(f"{t:g}" for t in temperatures)
                    for k, count, temperatures in plan
                ),
                bt.range_text(table.t_mix, 0),
                f"{len(bounded)} of {len(table)}",
                bt.range_text(bounded.bound / bounded.t_mix, 1),
                bt.range_text(table[table.temperature == 1.0].pl_gap, 2, "e"),
            ),
        )
    )


# --------------------------------------------------------------------------------------------
# Tables for the page (bt.reading_table: no index, formatted numbers, a dash for missing)
# --------------------------------------------------------------------------------------------


def corollary7_view(corollary7: pd.DataFrame):
    """Corollary 7's temperature, from the oscillation averaged and maximised over contexts."""
    return bt.reading_table(
        corollary7.rename(
            columns={"contexts": "oscillation", "corollary7_temperature": "Corollary 7's τ (α < 1 above)"}
        ),
        formats={"Corollary 7's τ (α < 1 above)": "{:.1f}"},
    )


def drift_view(drift_table: pd.DataFrame):
    """The '!'-basin's drift per temperature: boundary states, least and median drift, how many positive."""
    return bt.reading_table(
        drift_table.rename(columns={"min": "least drift", "median": "median drift", "positive": "positive drifts"}),
        formats={"temperature": "{:g}"},
    )


def lemma6_view(lemma6: pd.DataFrame):
    """Lemma 6 per temperature: pairs checked, violations, the least slack and the median share of the bound."""
    return bt.reading_table(
        lemma6.rename(columns={"min_slack": "least slack", "median_ratio": "median c / bound"}),
        formats={"temperature": "{:g}"},
    )


def thresholds_view(thresholds: pd.DataFrame):
    """Per chain (judged and calibration): tau_fast, tau_alpha, their ratio as the grid brackets it, verdict."""
    ratios = [_ratio_text(row) for row in thresholds.itertuples()]
    view = pd.DataFrame(
        {
            "chain": thresholds.chain,
            "role": thresholds.role,
            "τ_fast": thresholds.tau_fast,
            "τ_α": thresholds.tau_alpha,
            "τ_α / τ_fast": ratios,
            "verdict": thresholds.verdict,
        }
    )
    return bt.reading_table(view, formats={"τ_fast": _grid_value, "τ_α": _grid_value})


def _grid_value(value: float) -> str:
    """A threshold on the grid; inf (it holds nowhere up to the top) in words."""
    return "above the grid" if math.isinf(value) else f"{value:g}"


def theorem8_view(theorem8: pd.DataFrame):
    """Theorem 8 per temperature: exact escape against its bound, exact t_mix against its lower bound."""
    view = theorem8[["temperature", "escape", "escape_bound", "t_mix", "t_mix_lower", "t_mix_looseness"]]
    return bt.reading_table(
        view.rename(
            columns={
                "escape_bound": "escape bound",
                "t_mix_lower": "t_mix lower bound",
                "t_mix_looseness": "t_mix / bound",
            }
        ),
        formats={"temperature": "{:g}", "t_mix": "{:,.0f}"},
    )


def margins_view(margins: pd.DataFrame):
    """Per state: its text, Delta_star, how many sites have a positive margin, and Theorem 8's bound on t_mix
    where it is a perfect trap (a dash elsewhere)."""
    bounds = [c for c in margins.columns if c.startswith("bound_tau_")]
    view = margins[["state", "text", "delta_star", "positive_sites", *bounds]]
    return bt.reading_table(
        view.rename(
            columns={
                "delta_star": "Δ*",
                "positive_sites": "sites with Δ_i > 0",
                **{c: f"bound, τ = {c.removeprefix('bound_tau_')}" for c in bounds},
            }
        )
    )


def windows_view(windows: pd.DataFrame):
    """Per window: mu_tau's TV from the model's and from its own PL law and which is the smaller, the PL gap and
    its rounding floor (with the dtype of the scores), the conditional gap and the rank correlation of mu_tau with
    the model's PL law."""
    view = windows.assign(closer=np.where(windows.tv_model_pl < windows.tv_compatible_pl, "model's", "own"))
    columns = ["tv_model_pl", "tv_compatible_pl", "closer", "pl_gap", "pl_floor", "score_dtype", "conditional_gap"]
    view = view[["window", *columns, "spearman"]]
    return bt.reading_table(
        view.rename(
            columns={
                "tv_model_pl": "TV(μ, model's PL)",
                "tv_compatible_pl": "TV(μ, own PL)",
                "closer": "closer to μ",
                "pl_gap": "PL gap",
                "pl_floor": "floor",
                "score_dtype": "scores in",
                "conditional_gap": "conditional gap",
                "spearman": "Spearman",
            }
        )
    )


def full_windows_view(table: pd.DataFrame):
    """Per full-vocabulary window and temperature: the exact t_mix, the exact alpha and Theorem 5's bound."""
    view = table[["germline", "k", "temperature", "t_mix", "alpha", "bound"]]
    return bt.reading_table(view, formats={"temperature": "{:g}", "t_mix": "{:,.0f}"})


# --------------------------------------------------------------------------------------------
# Figures (each returns its Figure)
# --------------------------------------------------------------------------------------------


def alpha_figure(alpha: pd.DataFrame, tau_star: float, model: str, n: int):
    """alpha(tau) averaged and maximised over contexts, with the bootstrap band, the paper's BERT values at
    tau = 10 and 11 and our crossing of 1."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(alpha.temperature, alpha.alpha_mean, "o-", label="mean over contexts")
    ax.plot(alpha.temperature, alpha.alpha_max, "s--", label="max over contexts")
    ax.fill_between(alpha.temperature, alpha.low, alpha.high, alpha=0.2, label="95% bootstrap interval over contexts")
    ax.plot(
        list(PAPER_TEMPERATURES),
        [bt.paper_number(f"alpha_tau{t}", "value") for t in PAPER_TEMPERATURES],
        "k*",
        ms=12,
        label="paper, BERT",
    )
    ax.axhline(1, color="grey", lw=1)
    if math.isfinite(tau_star):
        ax.axvline(tau_star, color="C2", ls=":", label=rf"ours: $\alpha < 1$ from $\tau$ = {tau_star:g}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"temperature $\tau$",
        ylabel=r"$\hat\alpha(\tau)$ (lower bound)",
        title=rf"Influence sum, {model}, n = {n}",
    )
    ax.legend()
    return fig


def influence_figure(influence: torch.Tensor, temperatures, temperature: float = 10.0):
    """The context-averaged c_ij at the grid temperature nearest `temperature`, as a heatmap (row i: the
    site whose conditional moves; column j: the site that changes)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    temperatures = np.asarray(temperatures, dtype=float)
    at = int(np.argmin(np.abs(temperatures - temperature)))
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    sns.heatmap(influence[at].mean(0).numpy(), cmap="mako_r", square=True, cbar_kws={"label": r"$\hat c_{ij}$"}, ax=ax)
    ax.set(
        xlabel="changed site j",
        ylabel="updated site i",
        title=rf"$\hat c_{{ij}}$ at $\tau$ = {temperatures[at]:g}, mean of {influence.shape[1]} contexts",
    )
    return fig


def bound_figure(alpha: pd.DataFrame, n: int):
    """Theorem 5's bound on t_mix(1/4) from the estimated alpha, where it is below 1 (`theorem5_bounds`)."""
    import matplotlib.pyplot as plt

    bounded = alpha[np.isfinite(alpha.bound_mean)]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(bounded.temperature, bounded.bound_mean, "o-", label="mean over contexts")
    ax.plot(bounded.temperature, bounded.bound_max, "s--", label="max over contexts")
    ax.set(
        xscale="log",
        xlabel=r"temperature $\tau$",
        ylabel=r"bound on $t_{\mathrm{mix}}(1/4)$ (steps)",
        title=f"Theorem 5 with the estimated alpha, n = {n}",
    )
    if len(bounded):
        ax.set_yscale("log")
        ax.legend()
    return fig


def potts_mixing_figure(profiles: pd.DataFrame):
    """Exact t_mix(1/4) against Theorem 5's bound per Potts chain, with the fast-mixing line of the rule."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for k, (name, part) in enumerate(profiles.groupby("chain")):
        ax.plot(part.temperature, part.t_mix, "o-", color=f"C{k}", label=f"{name}: exact")
        ax.plot(part.temperature, part.bound, "s--", color=f"C{k}", label=f"{name}: Theorem 5")
    ax.axhline(
        FAST_FACTOR * profiles.t_independent.iloc[0],
        color="grey",
        lw=1,
        ls=":",
        label="fast: twice the independent sites' time",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"temperature $\tau$",
        ylabel=r"$t_{\mathrm{mix}}(1/4)$ (steps)",
        title="Potts chain, 5 sites, 3 colours: exact vs bound",
    )
    ax.legend(fontsize=8)
    return fig


def asymmetry_figure(asymmetry: pd.DataFrame):
    """The Potts chain's distances and PL gap as its asymmetry grows (`asymmetry_frame`)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(asymmetry.asymmetry, asymmetry.tv_pseudo_likelihood, "o-", label=r"TV($\mu_\tau$, pseudo-likelihood law)")
    ax.plot(asymmetry.asymmetry, asymmetry.tv_gibbs_of_symmetric_part, "s--", label=r"TV($\mu_\tau$, Gibbs law of $S$)")
    ax.plot(asymmetry.asymmetry, asymmetry.pl_gap, "^:", label="PL gap (model's PL law vs $\\mu_\\tau$'s)")
    ax.set(
        xlabel=r"asymmetry $a$ in $J = S + aA$",
        ylabel="total variation",
        ylim=(0, None),
        title=r"Potts chain, 5 sites, 3 colours, $\tau = 1$",
    )
    ax.legend()
    return fig


def _bound_panel(ax, windows: pd.DataFrame) -> None:
    """Draw on `ax` the exact t_mix(1/4) against Theorem 5's bound (exact alpha) per full-vocabulary window
    (`full_window_frame`, or windows_full.csv read back), where the window's alpha < 1; a window with
    alpha >= 1 has no bound and is marked by a triangle at the bottom."""
    bound = pd.to_numeric(windows.bound, errors="coerce")
    has_bound = np.isfinite(bound)
    floor = 0.8 * float(windows.t_mix.min())
    for k in sorted(windows.k.unique()):
        rows = windows.k == k
        if (rows & has_bound).any():
            ax.scatter(windows.t_mix[rows & has_bound], bound[rows & has_bound], s=30, label=f"k = {k}, α < 1")
        if (rows & ~has_bound).any():
            ax.scatter(
                windows.t_mix[rows & ~has_bound],
                np.full(int((rows & ~has_bound).sum()), floor),
                marker="v",
                s=30,
                label=f"k = {k}, α ≥ 1 (no bound)",
            )
    line = [floor, max(float(windows.t_mix.max()), float(bound[has_bound].max()) if has_bound.any() else 10.0)]
    ax.plot(line, line, color="grey", lw=1, label="bound = exact")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="exact $t_{\\mathrm{mix}}(1/4)$, steps",
        ylabel="Theorem 5's bound (exact α), steps",
        title="Exact mixing time against Theorem 5",
    )
    ax.legend(fontsize=8)


def full_windows_figure(table: pd.DataFrame, laws: list):
    """Left: exact t_mix against Theorem 5's bound per full-vocabulary window (`_bound_panel`); right: mu_tau
    against the model's PL law per state at tau = 1."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    _bound_panel(axes[0], table)
    ax = axes[1]
    for label, k, t, _ids, mu, pl in laws:
        if t == 1.0:
            ax.scatter(pl.numpy(), mu.numpy(), s=4, alpha=0.5, label=f"{label}, k = {k}")
    ax.plot([1e-12, 1], [1e-12, 1], color="grey", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(1e-12, 1),
        ylim=(1e-12, 1),
        xlabel="pseudo-likelihood law",
        ylabel=r"$\mu_\tau$",
        title=r"$\mu_\tau$ against the PL law, $\tau = 1$",
    )
    ax.legend(fontsize=7, markerscale=3)
    return fig


def windows_figure(windows: pd.DataFrame):
    """Exact full-vocabulary windows of a protein MLM from the saved table (windows_full.csv): left, exact
    t_mix(1/4) against Theorem 5's bound (`_bound_panel`); right, per window at tau = 1 the PL gap TV(PL law of
    the model, PL law of mu_tau's own conditionals), exactly 0 for a compatible chain. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    _bound_panel(axes[0], windows)
    at_one = windows[np.isclose(windows.temperature, 1.0)]
    labels = [f"{g} (k = {k})" for g, k in zip(at_one.germline, at_one.k)]
    axes[1].barh(labels, at_one.pl_gap, color="#0969da")
    axes[1].set(
        xlabel="PL gap: TV(PL law of the model, PL law of $\\mu_\\tau$'s conditionals)",
        title="$\\mu_\\tau$ against the pseudo-likelihood law, τ = 1",
    )
    axes[1].tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return fig
