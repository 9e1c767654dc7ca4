"""Chapter 3's judging: the claims rows (claim_rows), one private helper per claim with the rule fixed before the
run, each verdict from a rule of verdicts.py, and the words that go into each row.

Imports the core, verdicts, book_tools and the chapter's estimators; never another chapter.
"""

from __future__ import annotations

import math

import pandas as pd

import book_tools as bt
import verdicts as vd

from .estimators import alpha_pairs, paired_difference


def claim_rows(
    cfg,
    model: str,
    *,
    fits: pd.DataFrame,
    scaled: pd.DataFrame,
    fixed: dict,
    budget_free: dict,
    hits: pd.DataFrame,
    scaling: pd.DataFrame,
    trend: dict,
    saturation_steps: int,
    rise: pd.DataFrame,
    alpha: pd.DataFrame,
) -> list[dict]:
    """The chapter's claims rows (section 6.1, Figs. 2, 3, 7, and the section 7 conjecture), for run.claims:
    Fig. 2's boundary at cfg.near from `fits`; its shift and the width ratio on the n log n budget
    (`budget_free`, from compare_lengths on `scaled`; `fixed` shown beside); Fig. 3b's fit (`scaling` of the
    hitting times at cfg.hit_tau among `hits`); Fig. 3a's `trend` after `saturation_steps`; Fig. 7's `rise`; and
    the context-averaged `alpha` past the boundary. A protein MLM's rows say how they were measured."""
    near_fit = fits.set_index("n").loc[cfg.near]
    reached = int((hits.hitting_time[hits.temperature == cfg.hit_tau] >= 0).sum())
    return _window_rows(
        cfg,
        [
            _boundary_row(near_fit, cfg.near, model=model, budget=cfg.budget, pairs=cfg.pairs, passages=cfg.passages),
            _boundary_shift_row(budget_free, int(scaled.coupled.sum()), cfg.small, cfg.large),
            _transition_width_row(budget_free, cfg.small, cfg.large, fixed),
            _nlogn_row(scaling, reached, cfg.hit_tau, cfg.hit_radius),
            _saturation_row(trend, cfg.saturation_tau, int(saturation_steps)),
            _crossover_row(rise),
            _alpha_row(alpha, near_fit.midpoint, cfg.drift_taus),
        ],
    )


def _window_scope(cfg) -> str:
    """What a protein MLM's claim row measured, for its quantity text."""
    return (
        f"; n = free sites in a frozen germline context of {cfg.context_length} residues, d = Hamming share "
        f"of free sites changed"
    )


# A protein MLM's drift distance is the Hamming share of free sites changed: at a fixed T it falls with n by
# construction (each site is visited about T / n times), so Fig. 3a's saturation has no protein meaning.
NO_PROTEIN_MEANING = ("distance_saturates",)


def _window_rows(cfg, rows: list[dict]) -> list[dict]:
    """The claims rows of a run: unchanged for a text model; for a protein MLM each quantity says it was
    measured on free sites of a frozen germline with the Hamming distance, and the rows of NO_PROTEIN_MEANING
    are left out (the page shows them as not run here)."""
    if not cfg.protein:
        return rows
    return [
        dict(row, quantity=row["quantity"] + _window_scope(cfg))
        for row in rows
        if row["claim"] not in NO_PROTEIN_MEANING
    ]


def boundary_setup(*, budget: int, pairs: int, n: int, passages: str) -> dict:
    """The setup of coupling_boundary_tau, keyed as its protocol in paper_claims.csv (budget, passages) plus
    the items the paper does not state (pairs per cell, n): `passages` is a seed_passages source name."""
    return {"budget": budget, "pairs": pairs, "n": n, "passages": bt.PASSAGE_NAMES.get(passages, passages)}


def _boundary_row(fit: pd.Series, n: int, *, model: str, budget: int, pairs: int, passages: str) -> dict:
    """coupling_boundary_tau (model-specific): tau_1/2 at length n, judged against the paper's band only on
    the paper's model and protocol (bt.model_specific_row), else "other setup" with each difference listed."""
    text = bt.interval_text(
        fit.midpoint,
        fit.midpoint_low,
        fit.midpoint_high,
        missing=f"no transition inside the temperature grid at n = {n}",
    )
    return bt.model_specific_row(
        "coupling_boundary_tau",
        f"tau where half the pairs couple, n = {n}",
        fit.midpoint,
        text,
        model=model,
        setup=boundary_setup(budget=budget, pairs=pairs, n=n, passages=passages),
        low=fit.midpoint_low,
        high=fit.midpoint_high,
    )


def _undefined_reason(summary: dict, name: str) -> str:
    return (
        f"the transition falls outside the temperature grid in {summary[f'{name}_undefined']:.0%} of the "
        "bootstrap resamples, so the interval has an unknown tail"
    )


def _boundary_shift_row(shift: dict, events: int, small: int, large: int) -> dict:
    """boundary_shift_with_n (general), judged with the budget effect removed (scaled_budget_grid). Null: no
    shift. Reproduced when the 95% interval of tau_1/2(n_max) - tau_1/2(n_min) lies above 0, differs when at or
    below 0, inconclusive otherwise, with zero coupled pairs or no interval."""
    verdict, reason = vd.rule_one_sided(shift["shift_low"], shift["shift_high"], 0.0, "above", events=events)
    why = (
        _undefined_reason(shift, "shift")
        if bt.finite(shift["shift"])
        else "no transition inside the grid at one of the two lengths"
    )
    if small == large:
        verdict, reason = bt.INCONCLUSIVE, "one grid length only: nothing to compare"
    elif events and verdict == bt.INCONCLUSIVE and "no interval" in reason:
        reason = why
    text = bt.interval_text(
        shift["shift"],
        shift["shift_low"],
        shift["shift_high"],
        signed=True,
        missing=why if events else "zero pairs met within the scaled budget",
    )
    return bt.claim_row(
        "boundary_shift_with_n",
        f"tau_1/2(n={large}) - tau_1/2(n={small}), budget scaled by n log n",
        shift["shift"],
        text,
        verdict,
        f"null: no shift; {reason}",
        low=shift["shift_low"],
        high=shift["shift_high"],
        null=0.0,
    )


def width_null(small: int, large: int) -> float:
    """The null of transition_width: the relative width ratio (small / large)^(1/4), an exponent of -1/4,
    halfway on the log scale between no sharpening (exponent 0, ratio 1) and the n^-1/2 sharpening of a
    mean-field (Curie-Weiss) transition (ratio sqrt(small / large))."""
    return (small / large) ** 0.25


def _transition_width_row(width: dict, small: int, large: int, fixed: dict | None = None) -> dict:
    """transition_width (general): "the crossover does not sharpen as n grows", judged on the relative width
    (scale / midpoint, the width in log tau: relative_width) of the logistic fits on the grid whose budget is
    scaled by n log n (scaled_budget_grid, as for the boundary shift), as the ratio n_max / n_min. An absolute
    width in tau grows or shrinks with the boundary's location alone, so it is shown, not judged; so is the
    fixed-budget relative ratio (`fixed`; a fixed budget widens the transition at larger n by itself).
    Null: a relative width shrinking like n^-1/4 (width_null), halfway between no sharpening and mean-field
    n^-1/2 sharpening. Reproduced (does not sharpen, or more slowly than n^-1/4) when the ratio's 95%
    interval lies above the null, differs (sharpens) when at or below it (vd.rule_one_sided), inconclusive
    otherwise."""
    null = width_null(small, large)
    verdict, reason = vd.rule_one_sided(
        width["relative_low"],
        width["relative_high"],
        null,
        "above",
        estimate=width["relative"] if bt.finite(width["relative"]) else None,
    )
    why = (
        _undefined_reason(width, "relative")
        if bt.finite(width["relative"])
        else "no transition inside the grid (at a positive tau) at one of the two lengths"
    )
    if small == large:
        verdict, reason = bt.INCONCLUSIVE, "one grid length only: nothing to compare"
    elif not bt.finite(width["relative_low"], width["relative_high"]):
        reason = why
    return bt.claim_row(
        "transition_width",
        f"relative width ratio n={large} / n={small} (scale / midpoint), "
        f"budget scaled by n log n (n^-1/4: {null:.2f}; mean-field n^-1/2: "
        f"{math.sqrt(small / large):.2f})",
        width["relative"],
        _width_text(width, fixed, why),
        verdict,
        f"null: relative width shrinking like n^-1/4, ratio {null:.2f}; {reason}",
        low=width["relative_low"],
        high=width["relative_high"],
        null=null,
    )


def _width_text(width: dict, fixed: dict | None, missing: str) -> str:
    """transition_width's estimate in words: the judged relative ratio, the absolute one and the fixed budget's."""
    text = bt.interval_text(width["relative"], width["relative_low"], width["relative_high"], missing=missing)
    text += (
        " (width in log tau, budget scaled by n log n; absolute width ratio in tau "
        + bt.interval_text(width["ratio"], width["ratio_low"], width["ratio_high"], missing="not estimable")
        + ")"
    )
    if fixed is not None:
        text += "; at the fixed budget " + bt.interval_text(
            fixed["relative"], fixed["relative_low"], fixed["relative_high"], missing="not estimable"
        )
    return text


def _nlogn_row(scaling: pd.DataFrame, events: int, tau: float, radius: float, margin: float = 2.0) -> dict:
    """nlogn_fit (general): AIC of C n log n against c n and c n^2 on the median hitting times (Fig. 3b), by
    vd.rule_preferred_form (null: another form fits as well; margin 2 in AIC); zero hits: inconclusive."""
    table = scaling.set_index("form")
    fit = table.loc["n log n"]
    if events == 0:
        verdict, reason = bt.INCONCLUSIVE, f"zero events: no chain reached d >= {radius:g} within the cutoff"
    elif not table.aic.notna().all():
        verdict, reason = (
            bt.INCONCLUSIVE,
            (
                f"only {int(fit.lengths)} length(s) had half their chains reach "
                f"d >= {radius:g}; three are needed to compare the forms"
            ),
        )
    else:
        verdict, reason = vd.rule_preferred_form(table.aic.to_dict(), "n log n", margin)
    text = bt.interval_text(fit.C, fit.C_low, fit.C_high, missing="no fit: too few lengths reached the radius")
    if table.aic.notna().all():
        text += "; AIC " + ", ".join(f"{form} {aic:.1f}" for form, aic in table.aic.items())
    return bt.claim_row(
        "nlogn_fit",
        f"C of C n log n at tau = {tau:g}, R = {radius:g}",
        fit.C,
        text,
        verdict,
        f"null: c n or c n^2 fits as well (AIC margin {margin:g}); {reason}",
    )


def _saturation_row(trend: dict, tau: float, steps: int) -> dict:
    """distance_saturates (general, Fig. 3a): d(x_T, x_0) at a fixed T grows with n, but slower than
    linearly. Two parts, both needed (vd.rule_every_part): "grows", the slope of the median d against log n
    (vd.rule_trend, null 0: a flat or falling median differs), and "slower than linear", the exponent of
    median d against n (vd.rule_one_sided, null 1: reproduced below 1, differs at or above it)."""
    grows = vd.rule_trend(
        trend["slope"], trend["slope_low"], trend["slope_high"], "above", what="slope of median d against log n"
    )
    sublinear = vd.rule_one_sided(
        trend["exponent_low"],
        trend["exponent_high"],
        1.0,
        "below",
        estimate=trend["exponent"] if bt.finite(trend["exponent"]) else None,
    )
    if trend["lengths"] < 3:
        verdict, reason = bt.INCONCLUSIVE, f"only {trend['lengths']} length(s): three are needed for a trend"
    else:
        verdict, tally = vd.rule_every_part([grows[0], sublinear[0]], ["grows", "slower than linear"])
        reason = f"{tally}; grows: {grows[1]}; slower than linear: exponent {sublinear[1]}"
    return bt.claim_row(
        "distance_saturates",
        f"slope of median d(x_T, x_0) against log n, tau = {tau:g}, T = {steps}",
        trend["slope"],
        _saturation_text(trend),
        verdict,
        f"null: no growth (slope 0) or linear growth (exponent 1); {reason}",
        low=trend["slope_low"],
        high=trend["slope_high"],
        null=0.0,
    )


def _saturation_text(trend: dict) -> str:
    """distance_saturates' estimate in words: the median d at the two ends, the slope and the exponent."""
    ends = trend["medians"].iloc[[0, -1]]
    return (
        "median d "
        + " to ".join(f"{d:.2f} (n = {n:.0f})" for n, d in zip(ends.n, ends.median_distance))
        + "; slope per unit log n "
        + bt.interval_text(
            trend["slope"], trend["slope_low"], trend["slope_high"], signed=True, missing="not estimable"
        )
        + "; exponent "
        + bt.interval_text(
            trend["exponent"],
            trend["exponent_low"],
            trend["exponent_high"],
            missing="not estimable (a median distance is 0)",
        )
    )


def _crossover_row(rise: pd.DataFrame) -> dict:
    """crossover_fractions (general, Fig. 7): the share of chains reaching d >= R rises with tau at every
    n and threshold. Per (n, R) part, vd.rule_trend on the slope of the share against tau (null: no rise);
    the parts are combined by vd.rule_every_part (differs when any part differs, reproduced when all are)."""
    parts = [vd.rule_trend(r.slope, r.slope_low, r.slope_high, "above", what="slope")[0] for r in rise.itertuples()]
    names = [f"n={r.n:g} R={r.radius:g}" for r in rise.itertuples()]
    verdict, reason = vd.rule_every_part(parts, names)
    rising = sum(v == bt.REPRODUCED for v in parts)
    if len(rise) and rise.slope_low.notna().any():
        weakest = rise.loc[rise.slope_low.idxmin()]
        text = (
            f"{rising} of {len(rise)} (n, R) parts rise with tau; weakest n = {weakest.n:g}, R = "
            f"{weakest.radius:g}: reached {weakest.reached} at tau {weakest.temperatures}, slope "
            + bt.interval_text(
                weakest.slope, weakest.slope_low, weakest.slope_high, signed=True, missing="not estimable"
            )
            + " per unit tau"
        )
        ours, low, high = weakest.slope, weakest.slope_low, weakest.slope_high
    else:
        text, ours, low, high = "no part with two temperatures to compare", math.nan, math.nan, math.nan
    return bt.claim_row(
        "crossover_fractions",
        "slope of the share reaching d >= R against tau, weakest (n, R) part",
        ours,
        text,
        verdict,
        f"null: no rise with tau in some part; {reason}",
        low=low,
        high=high,
        null=0.0,
    )


def _alpha_row(alpha: pd.DataFrame, boundary: float, temperatures) -> dict:
    """context_averaged_alpha (general, beyond the paper): at the first drift temperature at or above the
    coupling boundary, the mean over contexts of alpha(seed passage) - alpha(visited state), paired, with
    Student's t interval over contexts. Null: no difference. Reproduced (visited states less coupled) when the
    interval lies above 0, differs when at or below 0, inconclusive otherwise."""
    above = [t for t in sorted(temperatures) if bt.finite(boundary) and t >= boundary]
    if not above:
        why = (
            "no coupling boundary inside the grid"
            if not bt.finite(boundary)
            else f"no drift temperature at or above the boundary {boundary:.2f}"
        )
        return bt.claim_row(
            "context_averaged_alpha",
            "mean alpha(seed) - alpha(visited) past the boundary",
            math.nan,
            why,
            bt.INCONCLUSIVE,
            f"null: no difference; {why}",
        )
    tau = above[0]
    pairs = alpha_pairs(alpha, tau)
    diff, low, high = (
        paired_difference(pairs["seed passages"], pairs["visited"]) if len(pairs) else (math.nan, math.nan, math.nan)
    )
    verdict, reason = vd.rule_one_sided(low, high, 0.0, "above")
    text = bt.interval_text(diff, low, high, signed=True, missing="no paired contexts")
    if len(pairs):
        text += (
            f" at tau = {tau:g} over {len(pairs)} contexts (means: seeds "
            f"{pairs['seed passages'].mean():.2f}, visited {pairs['visited'].mean():.2f})"
        )
    return bt.claim_row(
        "context_averaged_alpha",
        f"mean alpha(seed) - alpha(visited) at tau = {tau:g}",
        diff,
        text,
        verdict,
        f"null: no difference; {reason}",
    )
