"""Chapter 3's presentation: the figures (`*_figure`, each returns its Figure), the tables made for reading
(`*_view`) and the sentences glued into the page (`*_text`). Nothing here changes a saved number or a verdict.

Imports the core, verdicts, book_tools and the chapter's estimators; never another chapter.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import book_tools as bt
import verdicts as vd
from glauber_core import is_protein

from .estimators import SCALING_FORMS
from .protocol import run_lengths_text


def length_label(protein: bool) -> str:
    """The axis label of the chapter's n: tokens of a text model, free sites of a protein MLM's window."""
    return "free sites $n$ (frozen germline)" if protein else "sequence length $n$ (tokens)"


def model_note_text(cond, cfg) -> str:
    """One paragraph for the page: what this run's model measures its chains with, and on a protein MLM what
    replaces each English step."""
    if not is_protein(cond):
        return (
            "an English masked LM: seeds are held-out BBC News paragraphs and d(x_t, x_0) is the "
            "sentence-embedding distance of all-MiniLM-L6-v2, as described below."
        )
    return (
        f"a protein masked LM ({getattr(cond, 'name_or_path', 'protein MLM')}), whose 20 amino acids are all "
        "proposable. Full-length coupled chains to coalescence do not fit on two CPU cores (about 32 "
        "chain-steps per second at 96 residues), so every coupling and drift chain here updates only n free "
        f"sites spread evenly over the first {cfg.window_span} residues (FR1) of a whole human IMGT germline V "
        f"gene ({cfg.context_length} residues, FR1 to FR3), the rest frozen, and the number of free sites plays "
        "the role of the length n. Read 'passage' as 'germline context'. In the coupling grid one chain starts "
        "from the germline's own residues at the free sites and the other from uniformly drawn residues. "
        "No sentence embedder applies to a protein: d(x_t, x_0) is the Hamming distance to the start, the "
        "share of free sites whose residue differs from the germline's (0 at the start, at most 1), so "
        "R = 1 means every free site has changed (the coupon-collector case of n log n). Fig. 3a's "
        "saturation claim is left out of the claims (not run here): at a fixed T the Hamming share falls "
        "with n by construction, so it has no protein meaning; its table is still shown. The influence sums "
        "of section 6 are those of the window chain (c_ij over the free sites only). Each claim row says "
        "in its quantity that it was measured this way."
    )


def protocol_text(claim: str) -> str:
    """The paper's protocol of a claim in words, read from paper_claims.csv (never typed in the chapter)."""
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in bt.paper_protocol(claim).items())


def coupling_overview_text(cells: pd.DataFrame, budget: int) -> str:
    """One sentence on the grid as a whole: no coupling, coupling everywhere, or a transition."""
    total, met = int(cells.pairs.sum()), int(cells.coupled.sum())
    if met == 0:
        return (
            f"No pair met within the {budget}-step budget anywhere in the grid, so this run shows no "
            "transition; the fits and claims below are inconclusive for that reason."
        )
    if met == total:
        return (
            "Every pair met within the budget in every cell, down to the coldest temperature: the "
            "transition lies below the grid, and the fits below have nothing to locate."
        )
    share = cells.groupby("temperature").share.mean()
    return (
        f"{met} of {total} pairs met within the {budget}-step budget; averaged over lengths, the coupled "
        f"share is {share.iloc[0]:.0%} at the coldest temperature and {share.iloc[-1]:.0%} at the hottest."
    )


def boundary_text(cells: pd.DataFrame, n: int) -> str:
    """Where at least half the pairs of length n met, in words, for every case a model can produce."""
    sub = cells[cells.n == n]
    hot = sub[sub.share >= 0.5].temperature
    if sub.coupled.sum() == 0:
        return "beyond the grid: no pair met within the budget at any temperature"
    if not len(hot):
        return f"beyond the grid (at most {sub.share.max():.0%} of the pairs met in any cell)"
    if hot.min() == sub.temperature.min() and (sub.share >= 0.5).all():
        return f"at or below the coldest grid temperature, tau = {hot.min():g} (half or more met in every cell)"
    return f"tau = {hot.min():g}"


def direction_text(low: float, high: float, null: float, above: str, below: str, between: str) -> str:
    """Which side of `null` an interval lies on, in the words given (or that it has none)."""
    if not bt.finite(low, high):
        return "not estimable in this run"
    return above if low > null else below if high < null else between


def rise_text(rise: pd.DataFrame) -> str:
    """How many (n, R) parts of rise_with_temperature rise, fall or stay undecided at 95%, in words, and how many
    fall at the corrected level (the claims row's differs side, vd.every_part_level of the parts)."""
    if rise.empty or rise.slope_low.isna().all():
        return "no part has two temperatures to compare"
    up, down = rise[rise.slope_low > 0], rise[rise.slope_high <= 0]
    text = f"{len(up)} of {len(rise)} parts rise with tau (slope interval above 0), {len(down)} fall or stay flat"
    if len(down):
        text += " (" + ", ".join(f"n = {r.n:g}, R = {r.radius:g}" for r in down.itertuples()) + ")"
    text += f" and {len(rise) - len(up) - len(down)} are undecided at 95%"
    if len(down):
        text += (
            f"; {int((rise.corrected_high <= 0).sum())} fall or stay flat at the corrected "
            f"{vd.every_part_level(len(rise)):.2%} per part"
        )
    return text


def alpha_means_text(alpha: pd.DataFrame) -> str:
    """The mean alpha per drift temperature, visited states against seed passages, in words."""
    means = alpha.groupby(["temperature", "states"]).alpha.mean().unstack("states").dropna()
    return "; ".join(
        f"tau = {t:g}: {row['visited']:.2f} visited vs {row['seed passages']:.2f} seeds" for t, row in means.iterrows()
    )


def coupling_figure(cells: pd.DataFrame, cfg):
    """Fig. 2: the median steps to coupling per (tau, n) cell, annotated with the pairs that met; black where
    fewer than half met within the budget (coupling_summary's NaN median). Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    median = cells.pivot(index="n", columns="temperature", values="median_time")
    met = cells.pivot(index="n", columns="temperature", values="coupled")
    labels = met.astype(int).astype(str) + f"/{cfg.pairs}"
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.heatmap(
        median,
        annot=labels,
        fmt="",
        cmap="viridis",
        ax=ax,
        vmin=0,
        vmax=cfg.budget,
        cbar_kws={"label": "median steps to coupling"},
    )
    ax.set_facecolor("black")
    ax.grid(False)
    for (row, col), text in np.ndenumerate(labels.to_numpy()):
        if np.isnan(median.to_numpy()[row, col]):  # seaborn skips masked cells
            ax.text(col + 0.5, row + 0.5, text, color="white", ha="center", va="center")
    ax.invert_yaxis()
    ax.set(
        xlabel=r"temperature $\tau$",
        ylabel=length_label(cfg.protein),
        title=f"Coupling within {cfg.budget} steps (black: median not reached)",
    )
    return fig


def transition_figure(cells: pd.DataFrame, fits: pd.DataFrame, cfg):
    """The coupled share per cell with its 95% Wilson interval and the logistic fit per n (transition_fits).
    Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7, 4))
    taus = np.linspace(cells.temperature.min(), cells.temperature.max())
    palette = dict(zip(cfg.lengths, sns.color_palette(n_colors=9)))
    for k, (n, sub) in enumerate(cells.groupby("n")):
        ax.errorbar(
            sub.temperature + 0.02 * (k - 1),
            sub.share,
            yerr=[sub.share - sub.share_low, sub.share_high - sub.share],
            fmt="o",
            color=palette[n],
            capsize=3,
            label=f"n = {n}",
        )
        fit = fits.set_index("n").loc[n]
        if np.isfinite(fit.midpoint):
            ax.plot(taus, 1 / (1 + np.exp(-(taus - fit.midpoint) / fit.scale)), color=palette[n])
    ax.set(
        xlabel=r"temperature $\tau$",
        ylabel="share of pairs coupled",
        title="Coupled share with 95% intervals and logistic fits",
    )
    ax.legend()
    return fig


def saturation_figure(last: pd.DataFrame, cfg):
    """Protocol 1 (Fig. 3a): d(x_T, x_0) at each length's read-out step T(n) per n and temperature, mean with a 95%
    band.
    Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7, 4))
    sns.pointplot(
        data=last, x="n", y="distance", hue="temperature", errorbar=("ci", 95), dodge=0.3, palette="viridis", ax=ax
    )
    ax.set(
        xlabel=length_label(cfg.protein),
        ylabel=r"$d(x_T, x_0)$ at the last step",
        title="Protocol 1: distance after T = " + run_lengths_text(last.groupby("n").step.max().to_dict()) + " steps",
    )
    ax.legend(title=r"$\tau$")
    return fig


def hitting_figure(hits: pd.DataFrame, scaling: pd.DataFrame, cfg):
    """Protocol 2 (Fig. 3b): the hitting times at cfg.hit_tau, their median per n and each fitted form
    C f(n) of scaling_fits. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    reached = hits[(hits.temperature == cfg.hit_tau) & (hits.hitting_time >= 0)]
    medians = scaling.attrs["medians"]
    ax.scatter(reached.n, reached.hitting_time, alpha=0.3, color="grey", label="chains that reached R")
    ax.plot(medians.n, medians.median_time, "ko", label="median")
    grid_n = np.linspace(min(cfg.drift_lengths), max(cfg.drift_lengths))
    for form, row in scaling.set_index("form").iterrows():
        if np.isfinite(row.C):
            ax.plot(grid_n, row.C * SCALING_FORMS[form](grid_n), label=f"{form}: C = {row.C:.2f}")
    ax.set(
        xlabel=length_label(cfg.protein),
        ylabel=f"steps to reach d >= {cfg.hit_radius}",
        title=rf"Protocol 2 at $\tau$ = {cfg.hit_tau}",
    )
    ax.legend()
    return fig


def threshold_figure(shares: pd.DataFrame, records: int):
    """Fig. 7: the share of chains reaching each threshold per (tau, n), one heatmap per threshold
    (threshold_shares within `records` records). Returns the figure."""
    import seaborn as sns

    grid = sns.FacetGrid(shares, col="radius", height=3, aspect=1.1)
    grid.map_dataframe(
        lambda data, **kw: sns.heatmap(
            data.pivot(index="n", columns="temperature", values="share"),
            vmin=0,
            vmax=1,
            cmap="magma",
            annot=True,
            fmt=".2f",
            cbar=False,
        )
    )
    grid.set_axis_labels(r"temperature $\tau$", "length $n$")
    grid.set_titles(col_template="share reaching d >= {col_name}")
    grid.figure.suptitle(f"Chains reaching each distance within {records} records", y=1.05)
    return grid.figure


def alpha_figure(alpha: pd.DataFrame, cfg):
    """Section 7's conjecture: alpha per context on the visited states and on the seed passages, per drift
    temperature (context_alpha), with Theorem 5's threshold 1. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7, 4))
    sns.pointplot(data=alpha, x="temperature", y="alpha", hue="states", errorbar=("ci", 95), dodge=0.2, ax=ax)
    ax.axhline(1, color="k", ls=":", label=r"$\alpha = 1$ (Theorem 5)")
    ax.set(
        xlabel=r"temperature $\tau$",
        ylabel=r"$\hat\alpha$ per context (lower bound)",
        title=f"Influence sums on visited vs seed states, n = {cfg.alpha_length}",
    )
    ax.legend()
    return fig


def fits_view(fits: pd.DataFrame):
    """The logistic fits for reading: per n, the boundary tau_1/2 and the 10-90% width with their 95%
    bootstrap intervals, and the resamples whose share does not rise with tau (no boundary)."""
    return bt.reading_table(
        pd.DataFrame(
            {
                "n": fits.n,
                "pairs": fits.pairs,
                "boundary tau_1/2": [
                    bt.interval_text(
                        f.midpoint, f.midpoint_low, f.midpoint_high, missing="no transition inside the grid"
                    )
                    for f in fits.itertuples()
                ],
                "width (10-90%)": [
                    bt.interval_text(f.width, f.width_low, f.width_high, missing="no fit") for f in fits.itertuples()
                ],
                "resamples without a boundary": fits.boot_undefined,
            }
        )
    )


def comparison_view(fixed: dict, budget_free: dict):
    """pooled_transition_fit at the fixed budget and on the n log n budget, for reading: the boundary shift and the
    relative and absolute width ratios, each with its 95% interval (pairs resampled within each length)."""

    def text(result, name, signed=False):
        return bt.interval_text(
            result[name], result[f"{name}_low"], result[f"{name}_high"], signed=signed, missing="not estimable"
        )

    return bt.reading_table(
        pd.DataFrame(
            [
                {
                    "budget": label,
                    "boundary shift": text(result, "shift", signed=True),
                    "relative width ratio": text(result, "relative"),
                    "absolute width ratio": text(result, "ratio"),
                }
                for label, result in (("fixed", fixed), ("scaled by n log n", budget_free))
            ]
        )
    )


def saturation_view(ceiling: pd.DataFrame):
    """Fig. 3a against the ceiling for reading: per length, the mean d(x_T, x_0), the ceiling d_ref(n) of unrelated
    passages, their ratio and the rise over the run's last third, with 95% intervals (ceiling_ratios)."""
    return bt.reading_table(
        pd.DataFrame(
            {
                "n": ceiling.n.astype(int),
                "mean d(x_T, x_0)": ceiling.mean_distance,
                "ceiling d_ref(n)": ceiling.ceiling,
                "ratio": [
                    bt.interval_text(r.ratio, r.ratio_low, r.ratio_high, missing="no interval")
                    for r in ceiling.itertuples()
                ],
                "rise over the last third": [
                    bt.interval_text(r.rise, r.rise_low, r.rise_high, signed=True, missing="no interval")
                    for r in ceiling.itertuples()
                ],
            }
        ),
        formats={"mean d(x_T, x_0)": "{:.3f}", "ceiling d_ref(n)": "{:.3f}"},
    )


def scaling_view(scaling: pd.DataFrame):
    """Fig. 3b's fits for reading: per form, C with its 95% bootstrap interval, AIC (the lowest marked) and
    the leave-one-length-out error in log T."""
    return bt.reading_table(
        pd.DataFrame(
            {
                "form": scaling.form,
                "C": [bt.interval_text(r.C, r.C_low, r.C_high, missing="no fit") for r in scaling.itertuples()],
                "AIC": scaling.aic,
                "leave-one-out error": scaling.loo_mse_log,
                "best by AIC": np.where(scaling.best_aic, "yes", ""),
            }
        ),
        formats={"AIC": "{:.2f}"},
    )


def diagnostics_view(diagnostics: pd.DataFrame, value: str):
    """One convergence diagnostic (`rhat` or `ess_bulk`) per length and temperature, for reading."""
    table = diagnostics.pivot(index="n", columns="temperature", values=value)
    table.columns = [f"tau = {t:g}" for t in table.columns]
    digits = "{:.2f}" if value == "rhat" else "{:.0f}"
    return bt.reading_table(table.reset_index(), formats={c: digits for c in table.columns})


def regimes_view(excerpts: pd.DataFrame):
    """chain_excerpts for reading: one row per temperature, one column per recorded step."""
    return bt.reading_table(excerpts.T.rename_axis("chain").reset_index())
