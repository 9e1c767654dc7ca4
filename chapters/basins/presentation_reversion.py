"""Chapter 4's presentation on a protein model (the germline basin, ours): the reversion tables and figure, and
what protein-MLM users read beside them (pseudo-log-likelihood, end-state logos and entropies, rates of change per
IMGT region, a user's antibody). Nothing here changes a number the chapter saves or a verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd

import book_tools as bt

from .presentation import _interval_column
from .reversion import REGIONS, pll_summary, region_summary, reversion_ends, reversion_summary

# --------------------------------------------------------------------------------------------
# The tables a reader sees
# --------------------------------------------------------------------------------------------


def reversion_view(frame: pd.DataFrame):
    """reversion_summary for the page: per temperature and substitution count k, the chains, the mean share of
    visited mutated sites back at the germline residue after T steps, the mean share of visited unmutated
    framework sites off it, and the mean difference (the verdict's per-chain estimate)."""
    summary = reversion_summary(frame)
    view = pd.DataFrame(
        {
            "τ": summary.temperature.map("{:g}".format),
            "k": summary.substitutions.to_numpy(),
            "chains": summary.chains.to_numpy(),
            "mutated sites reverted": summary.reverted_share.to_numpy(),
            "framework sites left": summary.left_share.to_numpy(),
            "difference": summary.difference.to_numpy(),
        }
    )
    shares = {c: "{:.2f}" for c in ("mutated sites reverted", "framework sites left")}
    return bt.reading_table(view, formats={**shares, "difference": "{:+.2f}"})


def reversion_verdicts_view(judged: dict):
    """reversion_verdict's parts for the page: per judged temperature, the mutated chains, their mean difference
    with its 95% t interval, the no-pull value it is judged against, and the temperature's verdict."""
    parts = pd.DataFrame(judged["parts"], columns=["temperature", "chains", "verdict", "estimate", "low", "high"])
    view = pd.DataFrame(
        {
            "τ": parts.temperature.map("{:g}".format),
            "mutated chains": parts.chains.to_numpy(),
            "reverted minus left": _interval_column(parts, "estimate", "low", "high", 2),
            "no pull": f"{judged['null']:+.2f}",
            "verdict": parts.verdict.to_numpy(),
        }
    )
    return bt.reading_table(view)


def pll_view(pll: pd.DataFrame):
    """pll_summary for the page: per temperature and k, the chains and their mean pseudo-log-likelihood per
    residue at the start and after the last step, and its change."""
    summary = pll_summary(pll)
    view = pd.DataFrame(
        {
            "τ": summary.temperature.map("{:g}".format),
            "k": summary.substitutions.to_numpy(),
            "chains": summary["chains"].to_numpy(),
            "PLL / residue at start": summary.start.to_numpy(),
            "after the last step": summary.end.to_numpy(),
            "change": summary.change.to_numpy(),
        }
    )
    formats = {"PLL / residue at start": "{:.3f}", "after the last step": "{:.3f}", "change": "{:+.3f}"}
    return bt.reading_table(view, formats=formats)


def region_view(rates: pd.DataFrame):
    """region_summary for the page: per temperature (rows) and IMGT region (columns), the share of the region's
    sites changed from the start after the last step, with its moves per visit in brackets."""
    summary = region_summary(rates)
    cells = summary.assign(
        cell=[
            f"{s:.0%} ({m:.2f})" if m == m else f"{s:.0%} (no visit)"
            for s, m in zip(summary.changed_share, summary.moves_per_visit)
        ]
    )
    table = cells.pivot(index="temperature", columns="region", values="cell")
    table = table[[r for r in REGIONS if r in table.columns]].rename(columns=str.upper)
    table.insert(0, "τ", [f"{t:g}" for t in table.index])
    return bt.reading_table(table.reset_index(drop=True))


def antibody_view(reversion: pd.DataFrame, pll: pd.DataFrame):
    """The user's antibody chain per temperature (reversion_frame and pll_frame of its one chain): its mutations
    back at the germline residue after the last step (of those drawn), its unmutated framework sites off it, and
    its pseudo-log-likelihood per residue at the start and at the end."""
    ends = reversion_ends(reversion)
    summary = pll_summary(pll).set_index("temperature")
    view = pd.DataFrame(
        {
            "τ": ends.temperature.map("{:g}".format),
            "mutations drawn": ends.mutated_visited.astype(str) + " of " + ends.mutated.astype(str),
            "back at the germline": ends.reverted.to_numpy(),
            "framework sites left": ends.left.astype(str) + " of " + ends.kept_visited.astype(str) + " drawn",
            "PLL / residue, start → end": [f"{summary.start[t]:.3f} → {summary.end[t]:.3f}" for t in ends.temperature],
        }
    )
    return bt.reading_table(view)


# --------------------------------------------------------------------------------------------
# The figures
# --------------------------------------------------------------------------------------------


def reversion_figure(frame: pd.DataFrame):
    """reversion_frame along the run, one panel a temperature: the mean share of visited mutated sites back at
    the germline residue, per substitution count k, and the mean share of visited unmutated framework sites off
    it (all chains), with both shares' no-pull values 1/|V| and (|V| - 1)/|V| (dotted). Returns the figure."""
    import matplotlib.pyplot as plt

    temperatures = sorted(frame.temperature.unique())
    fig, axes = plt.subplots(1, len(temperatures), figsize=(4.2 * len(temperatures), 3.6), sharey=True, squeeze=False)
    for ax, tau in zip(axes[0], temperatures):
        part = frame[frame.temperature == tau]
        for k, chains in part[part.substitutions > 0].groupby("substitutions"):
            mean = chains.groupby("step").reverted_share.mean()
            ax.plot(mean.index, mean.to_numpy(), marker="o", ms=3, label=f"reverted, k = {k}")
        left = part.groupby("step").left_share.mean()
        ax.plot(left.index, left.to_numpy(), color="k", ls="--", label="framework sites left")
        alphabet = int(part.alphabet.iloc[0])
        for level, label in ((1 / alphabet, "no pull (1/|V|, 1 - 1/|V|)"), (1 - 1 / alphabet, None)):
            ax.axhline(level, color="grey", ls=":", lw=1, label=label)

        ax.set(title=f"τ = {tau:g}", xlabel="Glauber step $t$", ylim=(-0.02, 1.02))
    axes[0, 0].set(ylabel="share of sites")
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def pll_figure(pll: pd.DataFrame, antibody: pd.DataFrame | None = None):
    """pll_frame along the run, one panel a temperature: the mean pseudo-log-likelihood per residue over the
    chains of each substitution count k, and the user's antibody chain (its pll_frame) in black. Returns the
    figure."""
    import matplotlib.pyplot as plt

    temperatures = sorted(pll.temperature.unique())
    fig, axes = plt.subplots(1, len(temperatures), figsize=(4.2 * len(temperatures), 3.4), sharey=True, squeeze=False)
    for ax, tau in zip(axes[0], temperatures):
        part = pll[pll.temperature == tau]
        for k, chains in part.groupby("substitutions"):
            mean = chains.groupby("step").pll_per_residue.mean()
            ax.plot(mean.index, mean.to_numpy(), marker="o", ms=3, label=f"germline, k = {k}")
        if antibody is not None:
            own = antibody[antibody.temperature == tau]
            ax.plot(own.step, own.pll_per_residue, color="k", marker="s", ms=3, label="your antibody")
        ax.set(title=f"τ = {tau:g}", xlabel="Glauber step $t$")
    axes[0, 0].set(ylabel="PLL per residue (nats)")
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def region_figure(rates: pd.DataFrame):
    """region_summary as bars: per IMGT region, one bar a temperature, the share of sites changed from the start
    after the last step (left) and the moves per visit (right). Returns the figure."""
    import matplotlib.pyplot as plt

    summary = region_summary(rates)
    temperatures = sorted(summary.temperature.unique())
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    width = 0.8 / len(temperatures)
    for k, tau in enumerate(temperatures):
        part = summary[summary.temperature == tau].set_index("region").reindex(list(REGIONS))
        x = np.arange(len(REGIONS)) + (k - (len(temperatures) - 1) / 2) * width
        axes[0].bar(x, part.changed_share, width, label=f"τ = {tau:g}")
        axes[1].bar(x, part.moves_per_visit, width, label=f"τ = {tau:g}")
    for ax, label in zip(axes, ("share of sites changed at the end", "moves per visit")):
        ax.set_xticks(np.arange(len(REGIONS)), [r.upper() for r in REGIONS])
        ax.set(ylabel=label)
        ax.set_ylim(bottom=0)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


# residue colours by chemistry, as in common logo tools
_RESIDUE_COLOURS = {
    **dict.fromkeys("AVLIMFWPG", "#333333"),
    **dict.fromkeys("STYCNQ", "#2a9d3b"),
    **dict.fromkeys("KRH", "#1f4fbf"),
    **dict.fromkeys("DE", "#c8281e"),
}


def _region_bands(ax, profile: pd.DataFrame, labels: bool = True) -> None:
    """Shade a gene's CDRs and name its IMGT regions (profile: endpoint_profile's rows of one gene and one
    temperature, in site order)."""
    for region, sites in profile.groupby("region", sort=False).site:
        if region.startswith("cdr"):
            ax.axvspan(sites.min() - 0.5, sites.max() + 0.5, color="#f4d58d", alpha=0.45, lw=0)
        if labels:
            ax.text(
                sites.mean(),
                1.0,
                region.upper(),
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=8,
            )


def _letter(ax, letter: str, x: float, bottom: float, height: float) -> None:
    """Draw `letter` filling the box [x - 0.45, x + 0.45] x [bottom, bottom + height]."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import PathPatch
    from matplotlib.textpath import TextPath
    from matplotlib.transforms import Affine2D

    path = TextPath((0, 0), letter, size=1, prop=FontProperties(family="DejaVu Sans", weight="bold"))
    box = path.get_extents()
    place = Affine2D().translate(-box.x0, -box.y0).scale(0.9 / box.width, height / box.height)
    ax.add_patch(
        PathPatch(place.translate(x - 0.45, bottom).transform_path(path), color=_RESIDUE_COLOURS.get(letter, "k"), lw=0)
    )


def _residues(profile: pd.DataFrame) -> list[str]:
    """endpoint_profile's residue columns (between `entropy` and `context`)."""
    columns = list(profile.columns)
    return columns[columns.index("entropy") + 1 : columns.index("context")]


def logo_figure(profile: pd.DataFrame, gene: str, floor: float = 0.03):
    """A sequence logo of one gene's end states (endpoint_profile), one row a temperature: at each site the
    residues of mean conditional probability p >= `floor` stacked, each p x (log2 20 - entropy) bits high (the
    site's information), the CDRs shaded. Returns the figure."""
    import matplotlib.pyplot as plt

    part = profile[profile.gene == gene]
    temperatures = sorted(part.temperature.unique())
    residues = _residues(profile)
    n = int(part.site.max()) + 1
    fig, axes = plt.subplots(len(temperatures), 1, figsize=(max(8, n * 0.16), 1.9 * len(temperatures)), squeeze=False)
    for ax, tau in zip(axes[:, 0], temperatures):
        rows = part[part.temperature == tau].sort_values("site")
        _region_bands(ax, rows, labels=ax is axes[0, 0])
        for _, row in rows.iterrows():
            information = np.log2(len(residues)) - row.entropy
            bottom = 0.0
            for residue in sorted(residues, key=lambda r: row[r]):
                if row[residue] >= floor:
                    _letter(ax, residue, row.site, bottom, row[residue] * information)
                    bottom += row[residue] * information
        ax.set(xlim=(-0.5, n - 0.5), ylim=(0, np.log2(len(residues))), ylabel=f"τ = {tau:g}\nbits")
        ax.set_xticks(range(0, n, 10))
    axes[-1, 0].set(xlabel=f"site (residue from FR1), {gene}")
    fig.tight_layout()
    return fig


def entropy_figure(profile: pd.DataFrame, gene: str):
    """Per-site entropy (bits) of one gene's end-state profile (endpoint_profile), a line a temperature, the CDRs
    shaded. Returns the figure."""
    import matplotlib.pyplot as plt

    part = profile[profile.gene == gene]
    n = int(part.site.max()) + 1
    fig, ax = plt.subplots(figsize=(max(8, n * 0.12), 3.0))
    for tau, rows in part.groupby("temperature"):
        rows = rows.sort_values("site")
        ax.step(rows.site, rows.entropy, where="mid", label=f"τ = {tau:g}")
    _region_bands(ax, rows)
    ax.set(xlim=(-0.5, n - 0.5), ylim=(0, np.log2(len(_residues(profile))) + 0.1), ylabel="entropy (bits)")
    ax.set(xlabel=f"site (residue from FR1), {gene}")
    ax.legend(fontsize=8, ncols=len(part.temperature.unique()))
    fig.tight_layout()
    return fig
