"""Chapter 3's judging: the claims rows (claim_rows), one private helper per claim with the rule fixed before the
run, each verdict from a rule of verdicts.py, and the words that go into each row.

Imports the core, verdicts, book_tools and the chapter's estimators; never another chapter.
"""

from __future__ import annotations

import math

import pandas as pd

import book_tools as bt
import verdicts as vd

from .estimators import alpha_pairs, criterion_threshold
from .protocol import run_lengths_text


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
    ceiling: pd.DataFrame,
    saturation_steps: int | dict,
    rise: pd.DataFrame,
    alpha: pd.DataFrame,
) -> list[dict]:
    """The chapter's claims rows (section 6.1, Figs. 2, 3, 7, and the section 7 conjecture), for run.claims:
    Fig. 2's boundary at cfg.near from `fits`; its shift and the width ratio on the n log n budget
    (`budget_free`, pooled_transition_fit on `scaled`; `fixed` shown beside); Fig. 3b's fit (`scaling` of the
    hitting times at cfg.hit_tau among `hits`); Fig. 3a's `ceiling` ratios (`trend` shown) after
    `saturation_steps` (one T, or {n: T} per length: cfg.saturation_steps_at); Fig. 7's `rise`; and
    the context-averaged `alpha` past the boundary; Theorem 5's looseness from `alpha` on the seed passages over
    cfg.alpha_grid against the boundary. Both alpha rows read the boundary at the length alpha is scored at,
    cfg.alpha_length (one of the grid's lengths): Theorem 5 speaks of one chain. A protein MLM's rows say how they
    were measured."""
    near_fit, alpha_fit = (fits.set_index("n").loc[m] for m in (cfg.near, cfg.alpha_length))
    reached = int((hits.hitting_time[hits.temperature == cfg.hit_tau] >= 0).sum())
    return _window_rows(
        cfg,
        [
            _boundary_row(
                near_fit,
                cfg.near,
                model=model,
                budget=cfg.budget,
                pairs=cfg.pairs + cfg.stage_pairs,
                passages=cfg.passages,
            ),
            _boundary_shift_row(budget_free, int(scaled.coupled.sum()), cfg.small, cfg.large),
            _transition_width_row(budget_free, cfg.small, cfg.large, fixed),
            _nlogn_row(scaling, reached, cfg.hit_tau, cfg.hit_radius),
            _saturation_row(ceiling, trend, cfg.saturation_tau, saturation_steps),
            _crossover_row(rise),
            _alpha_row(alpha, alpha_fit.midpoint, cfg.drift_taus),
            _theorem5_row(alpha, alpha_fit, cfg.alpha_length),
        ],
    )


def _window_scope(cfg) -> str:
    """What a protein MLM's claim row measured, for its quantity text."""
    return (
        f"; n = free sites in FR1 of a whole germline gene of {cfg.context_length} residues, d = Hamming share "
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
    below 0, inconclusive otherwise, with zero coupled pairs, no interval or one grid length (vd.rule_two_lengths)."""
    why = (
        _undefined_reason(shift, "shift")
        if bt.finite(shift["shift"])
        else "no transition inside the grid at one of the two lengths"
    )
    verdict, reason = vd.rule_two_lengths(
        shift["shift_low"], shift["shift_high"], 0.0, "above", small=small, large=large, events=events, missing=why
    )
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
    (scale / midpoint, the width in log tau) of the pooled fit (pooled_transition_fit) on the grid whose budget is
    scaled by n log n (scaled_budget_grid, as for the boundary shift), as the ratio n_max / n_min. An absolute
    width in tau grows or shrinks with the boundary's location alone, so it is shown, not judged; so is the
    fixed-budget relative ratio (`fixed`; a fixed budget widens the transition at larger n by itself).
    Null: a relative width shrinking like n^-1/4 (width_null), halfway between no sharpening and mean-field
    n^-1/2 sharpening. Reproduced (does not sharpen, or more slowly than n^-1/4) when the ratio's 95%
    interval lies above the null, differs (sharpens) when at or below it, inconclusive otherwise
    (vd.rule_two_lengths)."""
    null = width_null(small, large)
    why = (
        _undefined_reason(width, "relative")
        if bt.finite(width["relative"])
        else "no transition inside the grid (at a positive tau) at one of the two lengths"
    )
    verdict, reason = vd.rule_two_lengths(
        width["relative_low"],
        width["relative_high"],
        null,
        "above",
        small=small,
        large=large,
        estimate=width["relative"] if bt.finite(width["relative"]) else None,
        missing=why,
    )
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


def _nlogn_row(scaling: pd.DataFrame, events: int, tau: float, radius: float) -> dict:
    """nlogn_fit (general, Fig. 3b): the exponent of the mean hitting times against n, with its bootstrap
    interval over chains (growth_exponent, scaling_fits' attrs["exponent"]), judged by vd.rule_growth_exponent against the exponents
    n (log n + c), c in [0, 1], shows over the run's lengths. Null: linear (exponent 1) or quadratic (2) growth."""
    exponent = scaling.attrs["exponent"]
    verdict, reason = vd.rule_growth_exponent(
        exponent["low"],
        exponent["high"],
        (exponent["claimed_low"], exponent["claimed_high"]),
        {"n": 1.0, "n^2": 2.0},
        lengths=exponent["lengths"],
        events=events,
    )
    fit = scaling.set_index("form").loc["n log n"]
    text = bt.interval_text(
        exponent["beta"],
        exponent["low"],
        exponent["high"],
        missing="no fit: fewer than three lengths where every chain reached the radius",
    )
    if bt.finite(exponent["beta"]):
        text += f" (n log n: {exponent['claimed_low']:.2f}-{exponent['claimed_high']:.2f}); C of C n log n " + (
            bt.interval_text(fit.C, fit.C_low, fit.C_high, missing="not estimable")
        )
    return bt.claim_row(
        "nlogn_fit",
        f"exponent of the mean hitting time in n at tau = {tau:g}, R = {radius:g}",
        exponent["beta"],
        text,
        verdict,
        f"null: linear (1) or quadratic (2) growth; {reason}",
        low=exponent["low"],
        high=exponent["high"],
    )


SATURATION_FLOOR = 0.9  # distance_saturates' null: a mean distance below 90% of the ceiling has not saturated


def _saturation_row(ceiling: pd.DataFrame, trend: dict, tau: float, steps: int | dict) -> dict:
    """distance_saturates (general, Fig. 3a): after T steps the distance has saturated, i.e. at every length the
    mean d(x_T, x_0) reaches the embedder's ceiling d_ref(n), the mean distance between unrelated starts of
    that length (ceiling_ratios, both as means over chains and pairs). Null: below SATURATION_FLOOR of the
    ceiling at some length. By vd.rule_reaches_ceiling: reproduced when every length's ratio interval lies above the
    floor, differs when one lies at or below it and its distance is shown to have stopped rising over the run's last
    third (its rise, in units of the ceiling, too small to reach the floor: inconclusive while it may still rise),
    the ratio's interval then taken at vd.every_part_level(K) over the K lengths (corrected_low, corrected_high:
    Bonferroni, so that a ceiling reached at every length is called "differs" by some length at most 5% of the time).
    The growth with n (`trend`) is shown, not judged: at the ceiling it is the embedder's."""
    in_ceilings = ceiling.assign(
        rise_low=ceiling.rise_low / ceiling.ceiling, rise_high=ceiling.rise_high / ceiling.ceiling
    )
    verdict, reason = vd.rule_reaches_ceiling(
        in_ceilings[["ratio_low", "ratio_high", "rise_low", "rise_high"]].itertuples(index=False, name=None),
        SATURATION_FLOOR,
        [f"n={m:g}" for m in ceiling.n],
        corrected=ceiling[["corrected_low", "corrected_high"]].itertuples(index=False, name=None),
    )
    weakest = ceiling.loc[ceiling.ratio.idxmin()] if ceiling.ratio.notna().any() else None
    return bt.claim_row(
        "distance_saturates",
        f"mean d(x_T, x_0) / d_ref(n) at the weakest length, tau = {tau:g}, T = "
        + (run_lengths_text(steps) if isinstance(steps, dict) else f"{int(steps):,}"),
        math.nan if weakest is None else weakest.ratio,
        _saturation_text(ceiling, trend),
        verdict,
        f"null: below {SATURATION_FLOOR:g} of the ceiling at some length; {reason}",
        low=math.nan if weakest is None else weakest.ratio_low,
        high=math.nan if weakest is None else weakest.ratio_high,
        null=SATURATION_FLOOR,
    )


def _saturation_text(ceiling: pd.DataFrame, trend: dict) -> str:
    """distance_saturates' estimate in words: each length's mean d over its ceiling, and the slope against log n."""
    parts = [
        f"n = {r.n:g}: {r.mean_distance:.2f} / {r.ceiling:.2f} = "
        + bt.interval_text(r.ratio, r.ratio_low, r.ratio_high, missing="no ratio")
        for r in ceiling.itertuples()
    ]
    return (
        "mean d over the ceiling d_ref(n): "
        + "; ".join(parts)
        + "; slope of median d per unit log n "
        + bt.interval_text(
            trend["slope"], trend["slope_low"], trend["slope_high"], signed=True, missing="not estimable"
        )
    )


def _crossover_row(rise: pd.DataFrame) -> dict:
    """crossover_fractions (general, Fig. 7): the share of chains reaching d >= R rises with tau at every
    n and threshold. Per (n, R) part, vd.rule_trend on the slope against tau of the share read at the part's cutoff
    (rise_with_temperature: the step by which half its chains had reached R) (null: no rise);
    the parts are combined by vd.rule_every_part: reproduced when every part's 95% interval lies above 0, differs
    when some part's interval at vd.every_part_level(K) over the K parts (corrected_low, corrected_high:
    Bonferroni) lies at or below 0, so that a claim true in every part is called "differs" at most 5% of the time."""
    parts = [vd.rule_trend(r.slope, r.slope_low, r.slope_high, "above", what="slope")[0] for r in rise.itertuples()]
    corrected = [vd.rule_trend(r.slope, r.corrected_low, r.corrected_high, "above")[0] for r in rise.itertuples()]
    names = [f"n={r.n:g} R={r.radius:g}" for r in rise.itertuples()]
    verdict, reason = vd.rule_every_part(parts, names, corrected=corrected)
    rising = int((rise.slope_low > 0).sum())
    if len(rise) and rise.slope_low.notna().any():
        weakest = rise.loc[rise.slope_low.idxmin()]
        text = (
            f"{rising} of {len(rise)} (n, R) parts rise with tau; weakest n = {weakest.n:g}, R = "
            f"{weakest.radius:g}: reached {weakest.reached} by step {weakest.cutoff:g} at tau {weakest.temperatures}, slope "
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
    Student's t interval over contexts (vd.rule_paired_mean). Null: no difference. Reproduced (visited states
    less coupled) when the interval lies above 0, differs when at or below 0, inconclusive otherwise."""
    above = [t for t in sorted(temperatures) if bt.finite(boundary) and t >= boundary]
    tau = above[0] if above else math.nan
    pairs = alpha_pairs(alpha, tau) if above else alpha.iloc[:0]
    why = (
        "no coupling boundary inside the grid"
        if not bt.finite(boundary)
        else f"no drift temperature at or above the boundary {boundary:.2f}"
        if not above
        else "no paired contexts"
    )
    differences = (pairs["seed passages"] - pairs["visited"]) if len(pairs) else []
    verdict, reason, diff, low, high = vd.rule_paired_mean(differences, 0.0, "above", missing=why)
    text = bt.interval_text(diff, low, high, signed=True, missing=why)
    if len(pairs):
        text += (
            f" at tau = {tau:g} over {len(pairs)} contexts (means: seeds "
            f"{pairs['seed passages'].mean():.2f}, visited {pairs['visited'].mean():.2f})"
        )
    return bt.claim_row(
        "context_averaged_alpha",
        f"mean alpha(seed) - alpha(visited) at tau = {tau:g}" if above else "mean alpha(seed) - alpha(visited)",
        diff,
        text,
        verdict,
        f"null: no difference; {reason}",
        low=low,
        high=high,
        null=0.0,
    )


def _theorem5_row(alpha: pd.DataFrame, fit: pd.Series, n: int) -> dict:
    """theorem5_bound_loose (general, section 5.2 "On tightness", A.1), measured on the model: the highest grid
    temperature where alpha-hat on a seed passage still reaches 1 (criterion_threshold, a lower bound on Theorem
    5's threshold tau_alpha) over the coupling boundary tau_1/2 at length n, a lower bound on tau_alpha / tau_1/2.
    Null: at most 1 (the criterion certifies fast mixing wherever pairs already meet). By vd.rule_lower_bound_ratio
    on the boundary's upper end: reproduced when even that ratio exceeds 1, else inconclusive; never differs."""
    bound = criterion_threshold(alpha)
    verdict, reason, ratio = vd.rule_lower_bound_ratio(bound, fit.midpoint_low, fit.midpoint_high, 1.0)
    if bt.finite(bound, fit.midpoint) and fit.midpoint > 0:
        text = (
            f"at least {ratio:.2f} (alpha-hat reaches 1 up to tau = {bound:g}; boundary "
            + bt.interval_text(fit.midpoint, fit.midpoint_low, fit.midpoint_high, missing="not estimable")
            + f" at n = {n})"
            if bt.finite(ratio)
            else f"alpha-hat reaches 1 up to tau = {bound:g}; the boundary at n = {n} has no upper end"
        )
    else:
        text = (
            "alpha-hat stays below 1 at every temperature scored"
            if not bt.finite(bound)
            else f"no coupling boundary inside the grid at n = {n}"
        )
    return bt.claim_row(
        "theorem5_bound_loose",
        f"lower bound on tau_alpha / tau_1/2 (alpha-hat on seed passages, boundary at n = {n})",
        ratio,
        text,
        verdict,
        f"null: tau_alpha / tau_1/2 at most 1; {reason}; a lower bound can show looseness, never its absence",
        low=ratio,
        null=1.0,
    )
