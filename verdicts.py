"""The book's judging module: the paper's side of every claim (book/paper_claims.csv), every verdict rule, the
intervals they use, the claims rows they make and the checks table. What decides a verdict lives here, so that
`book_tools.code_version` (which hashes this module) marks a result stale whenever a rule changes.

A chapter computes estimates and intervals and hands them to one of the rules below, one rule per
statistical shape; each docstring names the rule's null and its "differs" condition. Every rule can return
reproduced, differs and inconclusive (tests/test_verdicts.py), and every general claim's rule is calibrated
through its chapter's own estimator on chains whose answer is known: `make calibrate` (tools/calibration/)
measures how often it errs at the book's size over 50 seeds a case (at most 10% wrong, designed for 5%), and
tests/test_calibration_*.py check single draws.

An inconclusive verdict says what would decide it (`decide_text`). A check of the code path (an identity
such as a joint's delta being 0) is not a reproduction: `check_row` writes it to the Checks table.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

REPRODUCED, DIFFERS, INCONCLUSIVE, OTHER_SETUP, NOT_RUN = (
    "reproduced",
    "differs",
    "inconclusive",
    "other setup",
    "not run here",
)
VERDICTS = (REPRODUCED, DIFFERS, INCONCLUSIVE, OTHER_SETUP, NOT_RUN)
PASS, FAIL = "pass", "fail"
CHECK_COLUMNS = ("check", "proves", "result", "detail")


def finite(*values) -> bool:
    """True when every value is a finite number (None and NaN are not)."""
    try:
        return all(v is not None and math.isfinite(float(v)) for v in values)
    except (TypeError, ValueError):
        return False


def zero_width(low: float, high: float) -> bool:
    """True when an interval's width is at the level of floating-point rounding (relative 1e-12): a statistic
    with no measured spread, which decides nothing."""
    low, high = float(low), float(high)
    return math.isfinite(high - low) and high - low <= 1e-12 * max(1.0, abs(low), abs(high))


def cases_to_rule_out(rare: float, level: float = 0.95) -> int:
    """The fewest cases m for which 0 of m puts the Wilson upper bound of a share below `rare`:
    z^2 / (m + z^2) < rare, that is m > z^2 (1 - rare) / rare."""
    from scipy.stats import norm

    z2 = float(norm.ppf(0.5 + level / 2)) ** 2
    return math.floor(z2 * (1 - rare) / rare) + 1


def _counts(*values) -> None:
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in values):
        raise ValueError(f"counts must be non-negative integers, got {values}")


# --------------------------------------------------------------------------------------------
# Intervals (95% unless told): Wilson, percentile bootstrap, Spearman with a bootstrap interval
# --------------------------------------------------------------------------------------------


def share_intervals(successes, trials, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score intervals for binomial shares successes / trials, elementwise over arrays
    (scipy.stats.binomtest(...).proportion_ci(method="wilson"))."""
    from scipy.stats import binomtest

    k, m = np.asarray(successes), np.asarray(trials)
    if (m < 1).any() or (k < 0).any() or (k > m).any() or not 0 < level < 1:
        raise ValueError("share_intervals needs 0 <= successes <= trials, trials >= 1 and 0 < level < 1")
    k, m = np.broadcast_arrays(k, m)
    bounds = [binomtest(int(a), int(b)).proportion_ci(level, "wilson") for a, b in zip(k.reshape(-1), m.reshape(-1))]
    low = np.array([b.low for b in bounds], dtype=float).reshape(k.shape)
    high = np.array([b.high for b in bounds], dtype=float).reshape(k.shape)
    return low, high


def bootstrap_ci(
    values, statistic=np.mean, level: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Bias-corrected and accelerated (BCa) bootstrap interval (Efron and Tibshirani 1993) for
    statistic(values), rows resampled (scipy.stats.bootstrap); BCa corrects the skew of statistics such as
    trap durations (a percentile interval where BCa is undefined). Values with no spread give the zero-width interval at their value, which decides nothing."""
    from scipy.stats import bootstrap

    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) < 2 or not np.isfinite(values).all():
        raise ValueError(f"values must be a 1-d array of at least 2 finite numbers, got shape {values.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    if isinstance(resamples, bool) or int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be an integer >= 1, got {resamples!r}")
    if np.ptp(values) == 0:
        value = float(statistic(values))
        return value, value
    for method in ("BCa", "percentile"):  # BCa's acceleration is undefined on degenerate draws: percentile then
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = bootstrap(
                (values,),
                statistic,
                n_resamples=int(resamples),
                confidence_level=level,
                method=method,
                random_state=np.random.default_rng(seed),
            )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if finite(low, high):
            return low, high
    return low, high


def mean_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of `values` with Student's t interval (estimate, low, high); NaNs with fewer than two finite
    values. For few, roughly symmetric values, where a percentile bootstrap is too narrow."""
    from scipy.stats import t

    values = np.asarray(values, dtype=float).reshape(-1)
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return (float(values.mean()) if len(values) else math.nan), math.nan, math.nan
    mean, sem = float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))
    half = float(t.ppf(0.5 + level / 2, len(values) - 1)) * sem
    return mean, mean - half, mean + half


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
    draws = np.random.default_rng(seed).integers(0, len(x), (int(resamples), len(x)))
    low, high = np.nanquantile(rank_correlation(x[draws], y[draws]), [(1 - level) / 2, (1 + level) / 2])
    return float(rank_correlation(x, y)), float(low), float(high)


# --------------------------------------------------------------------------------------------
# What would decide an inconclusive row
# --------------------------------------------------------------------------------------------


# z_0.975 + z_0.8: an effect this many standard errors from the null is decided at 5% with 80% power
POWER_Z = 1.959964 + 0.841621


def decide_text(estimate: float, low: float, high: float, null: float, direction: str | None = None) -> str:
    """For an inconclusive interval: how much larger a run would have to be for 80% power at the observed effect
    (intervals shrinking as 1/sqrt(size): a normal test at 5% two-sided reaches 80% power where the effect is
    z_0.975 + z_0.8 = 2.80 standard errors from the null, so (2.80 / 1.96)^2 (half-width / distance)^2 times this
    run) and, given the paper's side (`direction`, "above" or "below"), the verdict that run would reach:
    reproduced where the estimate lies on that side of the null, differs where it lies on the other; or why no
    size would decide it."""
    if direction not in ("above", "below", None):
        raise ValueError(f"direction must be 'above' or 'below', got {direction!r}")
    if not finite(estimate, low, high, null):
        return "a run large enough to give an interval would decide it"
    distance = abs(estimate - null)
    half = max(estimate - low, high - estimate)
    if distance == 0 or half == 0:
        return "the estimate sits at the null: no run size decides it unless the effect is not zero"
    factor = (POWER_Z / 1.959964 * half / distance) ** 2
    text = f"about {max(factor, 1.1):.3g}x this run's size would decide it with 80% power if the estimate holds"
    if direction is None:
        return text
    return text + f", and would find it {REPRODUCED if (estimate > null) == (direction == 'above') else DIFFERS}"


# --------------------------------------------------------------------------------------------
# Rules: one per statistical shape
# --------------------------------------------------------------------------------------------


def rule_one_sided(
    low: float,
    high: float,
    null: float,
    direction: str = "above",
    *,
    events: int | None = None,
    zero_verdict: str = INCONCLUSIVE,
    estimate: float | None = None,
) -> tuple[str, str]:
    """An interval against a null. The paper says the quantity lies `direction` ("above" or "below") of
    `null`. Reproduced when [low, high] lies wholly on the paper's side; differs when it lies wholly on the
    other side or at the null; inconclusive when it contains the null, when there is no interval, or when the
    interval has zero width (a run whose statistic cannot vary, e.g. every chain at the same value, has measured
    no spread and decides nothing). With `events == 0`: `zero_verdict`, inconclusive by default (zero is what an underpowered run shows, e.g.
    no trap ended), or differs where zero is the answer (no rectangle above the rounding floor).
    Given `estimate`, an inconclusive reason says what run would decide it."""
    if direction not in ("above", "below"):
        raise ValueError(f"direction must be 'above' or 'below', got {direction!r}")
    if zero_verdict not in (INCONCLUSIVE, DIFFERS):
        raise ValueError(f"zero_verdict must be inconclusive or differs, got {zero_verdict!r}")
    if events == 0:
        if zero_verdict == DIFFERS:
            return DIFFERS, "zero events, and here zero is the answer: the claim fails"
        return INCONCLUSIVE, "zero events: the run is too small to decide; a run with events would decide it"
    if low is None or high is None or math.isnan(float(low)) or math.isnan(float(high)):
        return INCONCLUSIVE, "no interval could be estimated from this run"
    if low > high:
        raise ValueError(f"interval must have low <= high, got [{low}, {high}]")
    if zero_width(low, high):
        return INCONCLUSIVE, f"the 95% interval has zero width (every value {low:.3g}): no spread was measured"
    above = direction == "above"  # an infinite end (a one-sided interval) is compared as it stands
    if (low > null) if above else (high < null):
        return REPRODUCED, f"95% interval [{low:.3g}, {high:.3g}] lies {direction} the null {null:g}"
    if (high <= null) if above else (low >= null):
        other = "below" if above else "above"
        return DIFFERS, f"95% interval [{low:.3g}, {high:.3g}] lies {other} (or at) the null {null:g}"
    reason = f"95% interval [{low:.3g}, {high:.3g}] contains the null {null:g}"
    if estimate is not None:
        reason += f"; {decide_text(estimate, low, high, null, direction)}"
    return INCONCLUSIVE, reason


def rule_trend(
    slope: float, low: float, high: float, direction: str = "above", *, what: str = "slope"
) -> tuple[str, str]:
    """A trend across a grid (n, tau, depth). Null: no trend, slope 0. Reproduced when the slope's interval
    lies on the paper's side of 0 (`direction` "above": rises), differs when it lies at or on the other side,
    inconclusive when it contains 0 (rule_one_sided on the slope)."""
    verdict, reason = rule_one_sided(low, high, 0.0, direction, estimate=slope)
    return verdict, f"{what} {slope:+.3g}: {reason}" if finite(slope) else reason


def rule_share_above_chance(hits: int, trials: int, chance: float) -> tuple[str, str, float, float]:
    """A share against a chance level known without sampling (from the kernel, or a uniform site). Null: the
    chance share. Reproduced when the share's Wilson interval lies above it, differs when at or below it,
    inconclusive when it contains it or with zero trials. Returns (verdict, reason, low, high)."""
    _counts(hits, trials)
    if hits > trials or not (finite(chance) and 0 <= chance <= 1):
        raise ValueError(f"need 0 <= hits <= trials and a chance share in [0, 1], got {hits}, {trials}, {chance}")
    if trials == 0:
        return INCONCLUSIVE, "zero events: nothing to count; a run with events would decide it", math.nan, math.nan
    low, high = (float(v[0]) for v in share_intervals([hits], [trials]))
    verdict, reason = rule_one_sided(low, high, chance, "above", estimate=hits / trials)
    return verdict, f"{hits} of {trials} against chance {chance:.3g}: {reason}", low, high


def rule_equivalence(low: float, high: float, band_low: float, band_high: float) -> tuple[str, str]:
    """A number against the paper's, on the paper's own model and protocol: an equivalence band [band_low,
    band_high] (the paper's range, or its value with a stated tolerance). Reproduced when our interval lies
    inside the band, differs when it lies wholly outside, inconclusive when it straddles an edge (too wide)
    or there is no interval. A wide interval never reproduces."""
    if not finite(band_low, band_high) or band_low > band_high:
        raise ValueError(f"band must be finite with low <= high, got [{band_low}, {band_high}]")
    band = f"the paper's band [{band_low:.3g}, {band_high:.3g}]"
    if not finite(low, high):
        return INCONCLUSIVE, f"no interval to set against {band}"
    if band_low <= low and high <= band_high:
        return REPRODUCED, f"our interval [{low:.3g}, {high:.3g}] lies inside {band}"
    if high < band_low or low > band_high:
        return DIFFERS, f"our interval [{low:.3g}, {high:.3g}] lies outside {band}"
    return INCONCLUSIVE, f"our interval [{low:.3g}, {high:.3g}] straddles an edge of {band}: a larger run decides"


def rule_both_kinds(first: int, count: int, rare: float = 0.1, names=("perfect", "approximate")) -> tuple[str, str]:
    """Two kinds both occur among `count` cases, `first` of the first kind. Null: one kind is absent.
    Reproduced when each occurs at least once; differs when one is absent though the run has enough cases for
    the 95% upper bound on its share to fall below `rare`; inconclusive otherwise (no case, or too few)."""
    _counts(first, count)
    if first > count or not 0 < rare < 1:
        raise ValueError(f"need 0 <= first <= count and 0 < rare < 1, got {first}, {count}, {rare}")
    if count == 0:
        return INCONCLUSIVE, "zero cases: nothing to split; a run with cases would decide it"
    second = count - first
    if first and second:
        return REPRODUCED, f"{first} {names[0]} and {second} {names[1]} of {count}: both kinds occur"
    missing = names[0] if first == 0 else names[1]
    high = float(share_intervals([0], [count])[1][0])
    if high < rare:
        return DIFFERS, (
            f"no {missing} case among {count}: its share is below {high:.2f} (95% upper bound), under {rare:.0%}"
        )
    needed = cases_to_rule_out(rare)
    return INCONCLUSIVE, (
        f"no {missing} case among {count}: too few to rule out a share of {rare:.0%} "
        f"(95% upper bound {high:.2f}); about {needed} cases would decide it"
    )


def rule_preferred_form(scores: dict[str, float], claimed: str, margin: float = 2.0) -> tuple[str, str]:
    """Competing forms fitted to the same data. scores: an information criterion per form (lower is better,
    e.g. AIC). Reproduced when `claimed` beats every other form by more than `margin`, differs when another
    form beats it by more than `margin`, inconclusive otherwise."""
    if claimed not in scores:
        raise ValueError(f"claimed form {claimed!r} is not among {sorted(scores)}")
    if len(scores) < 2:
        raise ValueError("need at least two forms to compare")
    if not all(finite(v) for v in scores.values()):
        return INCONCLUSIVE, "a fit could not be made on this run"
    best_other = min((v, k) for k, v in scores.items() if k != claimed)
    gap = best_other[0] - scores[claimed]
    if gap > margin:
        return REPRODUCED, f"{claimed} beats the next form ({best_other[1]}) by {gap:.1f} > {margin:g}"
    if gap < -margin:
        return DIFFERS, f"{best_other[1]} beats {claimed} by {-gap:.1f} > {margin:g}"
    return INCONCLUSIVE, (
        f"{claimed} and {best_other[1]} are within {margin:g} of each other ({gap:+.1f}); "
        "more lengths or trials would decide it"
    )


def every_part_level(parts: int, level: float = 0.95) -> float:
    """The level of each part's interval on rule_every_part's differs side (Bonferroni): with K parts, 1 - (1 -
    level) / K, so that a claim true in every part is called "differs" by some part at most 1 - level of the time
    (any of K parts each wrong 2.5% of the time would be, at 12 parts, up to 26%)."""
    if isinstance(parts, bool) or int(parts) != parts or parts < 1 or not 0 < level < 1:
        raise ValueError(f"need an integer number of parts >= 1 and 0 < level < 1, got {parts!r}, {level!r}")
    return 1 - (1 - level) / parts


def rule_every_part(verdicts, parts=None, *, corrected) -> tuple[str, str]:
    """A claim stated "in every case" (every n, every threshold), judged part by part with one of the rules
    above. `verdicts`: each part's verdict with its 95% interval; `corrected`: each part's verdict with its
    interval at every_part_level(K) (the same list where the parts are exact, not sampled). Reproduced when every
    part is reproduced at 95% (a claim that fails in some part then reproduces at most 2.5% of the time);
    differs when some part differs at the corrected level (multiplicity: the claim is called "differs" if any
    of K parts does); inconclusive otherwise. `parts` names the parts in the reason."""
    verdicts, corrected = list(verdicts), list(corrected)
    if not verdicts:
        return INCONCLUSIVE, "no part could be judged"
    names = list(parts) if parts is not None else [str(k) for k in range(len(verdicts))]
    if len(names) != len(verdicts) or len(corrected) != len(verdicts):
        raise ValueError(f"{len(verdicts)} verdicts, {len(corrected)} corrected verdicts and {len(names)} part names")
    tally = ", ".join(f"{name}: {v}" for name, v in zip(names, verdicts))
    level = every_part_level(len(verdicts))
    if DIFFERS in corrected:
        differing = ", ".join(name for name, v in zip(names, corrected) if v == DIFFERS)
        return DIFFERS, f"a part differs at {level:.2%} per part ({differing}; at 95%: {tally})"
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED, f"every part reproduced ({tally})"
    return INCONCLUSIVE, f"not every part decided ({tally}; no part differs at {level:.2%} per part)"


# --------------------------------------------------------------------------------------------
# Model-specific numbers: judged only on the paper's model and protocol, against an equivalence band
# --------------------------------------------------------------------------------------------

_UNSTATED = re.compile(r"not stated|missing|number not stated", re.I)


def _same_item(ours, theirs: str) -> bool:
    try:
        return math.isclose(float(str(ours).replace(",", "")), float(theirs.replace(",", "")), rel_tol=1e-9)
    except ValueError:
        return str(ours).strip().lower() == theirs.strip().lower()


def compare_setup(model: str, setup: dict, paper_models, protocol: dict) -> tuple[list[str], list[str]]:
    """Our run's model and setup item by item against the paper's: (differences, unstated). The model is
    matched by its exact Hugging Face name (case-insensitive) among `paper_models`; an item the paper does
    not state (absent, or marked "not stated") goes to `unstated` and does not count as a difference; an item
    the paper states that the run does not record is a difference (nothing is assumed equal)."""
    names = {str(m).strip().lower() for m in paper_models}
    differences = (
        []
        if str(model).strip().lower() in names
        else [f"model {model} (paper: {', '.join(paper_models) or 'not named'})"]
    )
    unstated = []
    for key, ours in setup.items():
        theirs = protocol.get(key)
        if theirs is None or _UNSTATED.search(theirs):
            unstated.append(f"{key} {ours} (paper: not stated)")
        elif not _same_item(ours, theirs):
            differences.append(f"{key} {ours} (paper: {theirs})")
    for key, value in protocol.items():
        if key in setup:
            continue
        if _UNSTATED.search(value):
            unstated.append(f"{key} (paper: {value})")
        else:
            differences.append(f"{key} not recorded by this run (paper: {value})")
    return differences, unstated


def judge_model_specific(
    model: str, setup: dict, low: float, high: float, *, paper_models, protocol: dict, band: tuple[float, float] | None
) -> tuple[str, str, str]:
    """A model-specific claim: (verdict, reason, setup text). With any difference in model or protocol it is
    "other setup" (shown, not judged) and the setup text names each difference; on the paper's own setup it
    is judged by rule_equivalence against `band` (inconclusive when the paper gives none). Items the paper
    does not state are listed in the setup text without blocking."""
    differences, unstated = compare_setup(model, setup, paper_models, protocol)
    tail = f"; not stated by the paper: {', '.join(unstated)}" if unstated else ""
    if differences:
        return OTHER_SETUP, "measured on another setup: shown, not judged", "; ".join(differences) + tail
    setup_text = "the paper's model and protocol" + tail
    if band is None:
        return INCONCLUSIVE, "the paper gives no number to set a band on", setup_text
    verdict, reason = rule_equivalence(low, high, *band)
    return verdict, reason, setup_text


# --------------------------------------------------------------------------------------------
# Checks: identities and controls of the code path (pass / fail), outside the verdict count
# --------------------------------------------------------------------------------------------


def check_row(check: str, proves: str, passed: bool, detail: str) -> dict:
    """One row of a chapter's checks.csv: what the check proves about the code path and whether it passed."""
    if not check or not proves:
        raise ValueError("a check needs a name and a sentence saying what it proves")
    return dict(check=check, proves=proves, result=PASS if passed else FAIL, detail=detail)


def control_check(compatible: float, incompatible: dict[str, float], floor: float) -> tuple[bool, str]:
    """The compatible model must sit at the rounding floor (largest |statistic| <= floor) and every
    known-incompatible reference above it: (passed, detail)."""
    if not incompatible:
        raise ValueError("name at least one known-incompatible reference model")
    if not finite(compatible, floor, *incompatible.values()):
        return False, "a statistic could not be computed"
    weak = [name for name, value in incompatible.items() if value <= floor]
    refs = ", ".join(f"{name} {value:.2g}" for name, value in incompatible.items())
    detail = f"compatible {compatible:.1e} (floor {floor:g}); incompatible references {refs}"
    if compatible > floor:
        return False, detail + ": the compatible model exceeds the floor"
    if weak:
        return False, detail + f": {', '.join(weak)} also stay(s) at the floor"
    return True, detail


# --------------------------------------------------------------------------------------------
# Two thresholds on one exact grid (chapter 2: Theorem 5's condition against fast mixing)
# --------------------------------------------------------------------------------------------


def grid_threshold(grid, holds) -> tuple[float, float]:
    """Where a condition computed exactly on an increasing grid starts to hold for good: (before, first), the
    last grid value where it fails and the first one from which it holds to the grid's end. The true threshold
    lies in (before, first]. before = 0 when it holds on the whole grid; first = inf when it fails at the top
    (then the threshold lies above the grid: `before`, the top, is a lower bound)."""
    grid, holds = np.asarray(grid, dtype=float), np.asarray(holds, dtype=bool)
    if grid.ndim != 1 or len(grid) == 0 or grid.shape != holds.shape or not (np.diff(grid) > 0).all() or (grid[0] <= 0):
        raise ValueError("grid must be positive and increasing, with one `holds` value per grid point")
    failing = np.flatnonzero(~holds)
    if len(failing) == 0:
        return 0.0, float(grid[0])
    last = failing[-1]
    return float(grid[last]), (float(grid[last + 1]) if last + 1 < len(grid) else math.inf)


def rule_threshold_ratio(
    grid, reference_holds, claimed_holds, factor: float, *, names=("reference", "claimed")
) -> tuple[str, str, float, float]:
    """Two conditions computed exactly (not sampled) on one increasing grid, each holding from a threshold on
    (`grid_threshold`): the paper says the claimed condition's threshold lies more than `factor` times above
    the reference's. The grid brackets their ratio in [low, high] = [before_claimed / first_reference,
    first_claimed / before_reference] (high is inf when the reference holds on the whole grid or the claimed
    condition never holds on it: that case is a lower bound, not a value). Null: the ratio is at most
    `factor`. Reproduced when low > factor; differs when high <= factor, or when the claimed condition already
    holds wherever the reference does (first_claimed <= first_reference); inconclusive otherwise (a denser or
    wider grid would decide) or when the reference never holds on the grid. Returns (verdict, reason, low,
    high)."""
    if not (finite(factor) and factor >= 1):
        raise ValueError(f"factor must be a finite number >= 1, got {factor!r}")
    ref_before, ref_first = grid_threshold(grid, reference_holds)
    claim_before, claim_first = grid_threshold(grid, claimed_holds)
    reference, claimed = names
    if math.isinf(ref_first):
        return (
            INCONCLUSIVE,
            f"{reference} never holds to the grid's top: nothing to compare; a grid reaching further would decide it",
            math.nan,
            math.nan,
        )
    low = claim_before / ref_first
    high = claim_first / ref_before if ref_before > 0 else math.inf
    where = (
        f"{reference} from {ref_first:g} (after {ref_before:g}), {claimed} from "
        + (f"{claim_first:g}" if math.isfinite(claim_first) else f"above the grid's top {claim_before:g}")
        + f": ratio in [{low:.3g}, {high:.3g}]"
    )
    if low > factor:
        return REPRODUCED, f"{where}, above the factor {factor:g}", low, high
    if claim_first <= ref_first:
        return DIFFERS, f"{where}: {claimed} already holds wherever {reference} does", low, high
    if high <= factor:
        return DIFFERS, f"{where}, at most the factor {factor:g}", low, high
    return INCONCLUSIVE, f"{where} contains the factor {factor:g}; a denser grid would decide it", low, high


# ---- chapter 3 rules (issue 41) ----


def percentile_interval(draws, level: float = 0.95, max_undefined: float = 0.025) -> tuple[float, float, float]:
    """(low, high, undefined share) of a percentile bootstrap interval from `draws` (Efron and Tibshirani 1993),
    NaN-safe: a NaN draw is undefined (its resample had no estimate), an infinite one is kept (it orders). With
    more than `max_undefined` of the draws undefined, one tail is unknown: (nan, nan, share)."""
    draws = np.asarray(draws, dtype=float).reshape(-1)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    defined = draws[~np.isnan(draws)]
    undefined = 1 - len(defined) / len(draws) if len(draws) else 1.0
    if not len(defined) or undefined > max_undefined:
        return math.nan, math.nan, undefined
    low, high = np.quantile(defined, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(low), float(high), undefined


def group_bootstrap(groups, statistic, resamples: int = 200, seed: int = 0) -> np.ndarray:
    """Bootstrap draws of statistic(groups) with each group resampled within itself (chains within a length):
    statistic takes one array [resamples, size of group g] per group and returns [resamples] values."""
    if isinstance(resamples, bool) or int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be an integer >= 1, got {resamples!r}")
    groups = [np.asarray(g, dtype=float) for g in groups]
    if not groups or any(g.ndim != 1 or len(g) < 1 for g in groups):
        raise ValueError("groups must be non-empty 1-d arrays")
    rng = np.random.default_rng(seed)
    return np.asarray(statistic([g[rng.integers(0, len(g), (int(resamples), len(g)))] for g in groups]), dtype=float)


def rule_two_lengths(
    low: float,
    high: float,
    null: float,
    direction: str = "above",
    *,
    small: int,
    large: int,
    events: int | None = None,
    estimate: float | None = None,
    missing: str = "",
) -> tuple[str, str]:
    """A statistic that compares two grid lengths (section 6.1: the boundary's shift, the width ratio), by
    rule_one_sided against `null`. Inconclusive when the grid has one length only (small == large: nothing to
    compare); `missing` says why there is no interval when there is none."""
    if small == large:
        return INCONCLUSIVE, "one grid length only: nothing to compare"
    verdict, reason = rule_one_sided(low, high, null, direction, events=events, estimate=estimate)
    if missing and events != 0 and any(v is None or math.isnan(float(v)) for v in (low, high)):
        reason = f"no interval: {missing}"  # an infinite end is a one-sided interval, not a missing one
    return verdict, reason


def rule_growth_exponent(
    low: float,
    high: float,
    claimed: tuple[float, float],
    alternatives: dict[str, float],
    *,
    lengths: int,
    events: int,
    needed: int = 3,
) -> tuple[str, str]:
    """Hitting times against n (section 6.1, Fig. 3b): [low, high] the 95% bootstrap interval (chains resampled
    within each length) of the exponent beta of a power-law fit to the mean times per length; `claimed` the range of
    exponents the claimed form takes over the run's lengths (n (log n + c), c in [0, 1]); `alternatives` the
    exponents of the competing forms (n: 1, n^2: 2). Null: a competing form. Reproduced when the interval
    excludes every alternative and meets the claimed range; differs when it misses the claimed range; else
    inconclusive, and with zero hits or fewer than `needed` lengths where every chain hit."""
    if events == 0:
        return INCONCLUSIVE, "zero events: no chain reached the radius within the cutoff"
    if lengths < needed:
        return INCONCLUSIVE, f"only {lengths} length(s) where every chain hit; {needed} are needed for a trend"
    if not finite(low, high):
        return INCONCLUSIVE, "no interval could be estimated from this run"
    if zero_width(low, high):
        return INCONCLUSIVE, f"the 95% interval has zero width (every draw {low:.3g}): no spread was measured"
    where = f"exponent's 95% interval [{low:.2f}, {high:.2f}], claimed form's [{claimed[0]:.2f}, {claimed[1]:.2f}]"
    if high < claimed[0] or low > claimed[1]:
        return DIFFERS, f"{where}: they do not meet"
    inside = [name for name, beta in alternatives.items() if low <= beta <= high]
    if inside:
        return INCONCLUSIVE, f"{where}; it also contains {', '.join(inside)}: more chains would decide it"
    return REPRODUCED, f"{where}; it excludes " + ", ".join(f"{k} ({v:g})" for k, v in alternatives.items())


def rule_reaches_ceiling(parts, floor: float, names=None, *, corrected) -> tuple[str, str]:
    """A distance at a fixed T against its ceiling (section 6.1, Fig. 3a: the distance saturates), per length.
    parts: one (low, high, rise_low, rise_high) per length, [low, high] the 95% interval of the mean distance
    over the ceiling d_ref (what unrelated starts of that length give) and [rise_low, rise_high] that of the
    distance's rise over the run's last third, in units of the ceiling; `corrected`: one (low, high) per length,
    the ratio's interval at every_part_level(K). Null: below `floor` of the ceiling. A
    part is reproduced when its interval lies above the floor; differs when it lies at or below it and the
    distance is shown to have stopped rising (the rise's interval reaches 0 and its upper end is at most
    flat_rise: a rise over the last third that could not close the gap to the floor in the run's length again);
    inconclusive otherwise, a still-rising distance included (a longer run decides). Every part must be reproduced
    (rule_every_part, differs judged on the corrected intervals)."""
    if not (finite(floor) and 0 < floor <= 1):
        raise ValueError(f"floor must lie in (0, 1], got {floor!r}")
    parts, corrected = list(parts), list(corrected)
    if len(corrected) != len(parts):
        raise ValueError(f"{len(parts)} parts but {len(corrected)} corrected intervals")

    def verdict_of(low, high, rise_low, rise_high):
        verdict = rule_one_sided(low, high, floor, "above")[0]
        stopped = finite(rise_low, rise_high, high) and rise_low <= 0 and rise_high <= flat_rise(floor, high)
        return INCONCLUSIVE if verdict == DIFFERS and not stopped else verdict

    verdicts = [verdict_of(*part) for part in parts]
    at_level = [verdict_of(low, high, *part[2:]) for (low, high), part in zip(corrected, parts)]
    return rule_every_part(verdicts, names, corrected=at_level)


def flat_rise(floor: float, high: float) -> float:
    """The largest rise over a run's last third that still counts as stopped for rule_reaches_ceiling: a third of
    the gap between the distance's upper end `high` and the `floor`, so that three more such thirds could not
    reach the floor."""
    return max(floor - float(high), 0.0) / 3


def rule_paired_mean(
    differences, null: float = 0.0, direction: str = "above", *, missing: str, level: float = 0.95
) -> tuple:
    """A mean of paired differences (one per context) against `null` with Student's t interval at `level`
    (mean_interval), by rule_one_sided. `missing` says why there is no difference at all. Returns (verdict, reason,
    mean, low, high)."""
    values = np.asarray(differences, dtype=float).reshape(-1)
    if not np.isfinite(values).any():
        return INCONCLUSIVE, f"no interval: {missing}", math.nan, math.nan, math.nan
    mean, low, high = mean_interval(values, level)
    verdict, reason = rule_one_sided(low, high, null, direction, estimate=mean)
    return verdict, reason, mean, low, high


def rule_lower_bound_ratio(bound: float, low: float, high: float, null: float = 1.0) -> tuple[str, str, float]:
    """A lower bound on one threshold against another measured with an interval (section 5.2 "On tightness",
    A.1: the temperature up to which alpha-hat, a lower bound on alpha, still reaches 1 bounds Theorem 5's
    threshold tau_alpha from below; [low, high] the interval of the coupling boundary tau_1/2). The ratio
    tau_alpha / tau_1/2 is then at least bound / high. Null: the ratio is at most `null`. Reproduced when
    bound / high > null; otherwise inconclusive, never differs: a lower bound cannot show the ratio is small.
    Returns (verdict, reason, the ratio's lower confidence end)."""
    if not finite(bound) or bound <= 0:
        return INCONCLUSIVE, "alpha-hat stays below 1 on the whole grid: no lower bound on the threshold", math.nan
    if low is None or high is None or math.isnan(float(low)) or math.isnan(float(high)) or high <= 0:
        return INCONCLUSIVE, "no interval for the coupling boundary", math.nan
    if math.isinf(float(high)):
        return INCONCLUSIVE, "the coupling boundary's interval has no upper end: no lower bound on the ratio", math.nan
    ratio = bound / high
    where = f"lower bound {bound:.3g} over the boundary's upper end {high:.3g}: ratio at least {ratio:.3g}"
    if ratio > null:
        return REPRODUCED, f"{where}, above the null {null:g}", ratio
    return INCONCLUSIVE, f"{where}, not above the null {null:g}; a lower bound cannot show the ratio is small", ratio


# --------------------------------------------------------------------------------------------
# ---- chapter 4 rules (issue 41) ----
# Section 6.2's statistics: scores of chains against each other (paired per chain) and against basin-free text
# --------------------------------------------------------------------------------------------


def welch_interval(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """mean(x) - mean(y) with Welch's t interval (two independent samples, unequal variances): (estimate, low,
    high); NaNs when either sample has fewer than two finite values. Both samples constant: the interval is the
    estimate itself (a zero-width interval, which decides nothing)."""
    from scipy.stats import t

    x, y = (np.asarray(v, dtype=float).reshape(-1) for v in (x, y))
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) < 2 or len(y) < 2:
        return math.nan, math.nan, math.nan
    estimate = float(x.mean() - y.mean())
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if vx + vy == 0:
        return estimate, estimate, estimate
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    half = float(t.ppf(0.5 + level / 2, df)) * math.sqrt(vx + vy)
    return estimate, estimate - half, estimate + half


def excess_rise_interval(
    target_start, target_end, control_start, control_end, level: float = 0.95
) -> tuple[float, float, float]:
    """Table 3a's rise, paired per chain (section 6.2.1): the mean over chains of (target_end - target_start) -
    (control_end - control_start), the target label's rise beyond its control's on the same chain (chapter 4 passes
    each chain's mean over its looks after the start as the "end", and the other labels' mean as the control), with
    Student's t interval over chains (mean_interval: a handful of chains a topic, where a bootstrap is too
    narrow) at `level`. NaNs with fewer than two chains."""
    values = [np.asarray(v, dtype=float).reshape(-1) for v in (target_start, target_end, control_start, control_end)]
    if len({len(v) for v in values}) != 1:
        raise ValueError(f"need four per-chain scores of one length, got lengths {[len(v) for v in values]}")
    start, end, control_start, control_end = values
    return mean_interval((end - start) - (control_end - control_start), level)


def rank_shares(values, reference) -> np.ndarray:
    """Where each value sits in a reference law, by ranks (so the skew of topic scores cannot tip it): per value
    (a chain's score), the share of `reference` draws (basin-free texts' scores) above it, ties counting half; 0.5
    on average when the values follow the reference's law. reference: [M] draws shared by every value, or [M, C],
    one column per value. Returns [C]."""
    values, reference = np.asarray(values, dtype=float).reshape(-1), np.asarray(reference, dtype=float)
    reference = reference[:, None] if reference.ndim == 1 else reference
    if reference.ndim != 2 or len(reference) == 0 or reference.shape[1] not in (1, len(values)):
        raise ValueError(f"reference must be [M] or [M, {len(values)}] with M >= 1, got shape {reference.shape}")
    return ((reference > values) + 0.5 * (reference == values)).mean(0)


def rule_median_sign(shares, side: str) -> tuple[str, str, float, float, float]:
    """A sign test against a reference law's median (section 6.2: chains against basin-free text). shares: per
    chain, rank_shares of its score (above 0.5: the chain scores below the reference's median). The paper's side
    puts chains `side` ("below" or "above") of that median. Null: a chain is as likely on either side (it ends
    like basin-free text), share 1/2. The share of chains on `side` (chains at exactly 0.5 left out, as a sign
    test leaves ties) and its Wilson interval, by rule_share_above_chance: reproduced when the interval lies
    above 1/2, differs at or below it, inconclusive otherwise or with no chain. Unlike a t interval on the
    shares, it keeps its width when every chain sits beyond every reference draw. Returns (verdict, reason,
    share, low, high)."""
    if side not in ("below", "above"):
        raise ValueError(f"side must be 'below' or 'above', got {side!r}")
    shares = np.asarray(shares, dtype=float).reshape(-1)
    if not np.isfinite(shares).all() or ((shares < 0) | (shares > 1)).any():
        raise ValueError("shares must be finite rank shares in [0, 1]")
    hits = int(((shares > 0.5) if side == "below" else (shares < 0.5)).sum())
    trials = int((shares != 0.5).sum())
    verdict, reason, low, high = rule_share_above_chance(hits, trials, 0.5)
    share = hits / trials if trials else math.nan
    return verdict, f"chains {side} the median of basin-free text, {reason}", share, low, high


def rule_recurrence(target_share, control_share, chance_above) -> dict:
    """Politics recurrence (section 6.2.1, Table 3), per chain seeded outside the target's topic, on the share of
    its looks with the target's score above 1/L. Two comparisons against 0, each by rule_one_sided, combined by
    rule_every_part (reproduced when both are, differs when either differs): (a) "politics is no different from
    the other labels": the mean of target_share - control_share (the other labels' mean share on the same looks),
    paired over chains, t interval; (b) "the chains carry no basin": mean target_share minus the share of
    basin-free texts above 1/L (`chance_above`, one 0/1 value a text), Welch's interval. Fewer than two chains:
    inconclusive. Returns {"verdict", "reason", "label": (est, low, high), "chance": (est, low, high),
    "chance_share"}."""
    target_share, control_share = (np.asarray(v, dtype=float).reshape(-1) for v in (target_share, control_share))
    chance = np.asarray(chance_above, dtype=float).reshape(-1)
    chance_share = float(chance.mean()) if len(chance) else math.nan
    if len(target_share) < 2:
        nothing = (math.nan,) * 3
        return {
            "verdict": INCONCLUSIVE,
            "reason": "fewer than two chains seeded outside politics: no interval",
            "label": nothing,
            "chance": nothing,
            "chance_share": chance_share,
        }
    names = ["vs the other labels", "vs basin-free text"]

    def intervals(level):
        return mean_interval(target_share - control_share, level), welch_interval(target_share, chance, level)

    (label, against), corrected = intervals(0.95), intervals(every_part_level(2))
    parts, reasons = [], []
    for name, (estimate, low, high) in zip(names, (label, against)):
        verdict, reason = rule_one_sided(low, high, 0.0, "above", estimate=estimate)
        parts.append(verdict)
        reasons.append(f"{name}: {estimate:+.2f}, {reason}" if math.isfinite(estimate) else f"{name}: {reason}")
    at_level = [rule_one_sided(low, high, 0.0, "above")[0] for _, low, high in corrected]
    verdict, tally = rule_every_part(parts, names, corrected=at_level)
    return {
        "verdict": verdict,
        "reason": f"{tally}; " + "; ".join(reasons),
        "label": label,
        "chance": against,
        "chance_share": chance_share,
    }


# ---- chapter 5 rules (issue 41) ----
# Chapter 5's intervals and rules (appendix A.1, Table 4, C.2, C.3): chapters/traps computes the estimates and
# hands them here; tests/test_verdicts.py drives each rule to every outcome and tools/calibration/traps.py runs
# each, through the chapter's own estimators, on chains whose answer is known.

# A metastable trap outlasts what the detector gives a chain without collective persistence by more than this
# factor (fixed before any run; the null chain's ratio is 1 in expectation, so "differs" is reachable).
DURATION_FACTOR = 2.0
# A cold chain "stays" when its distance from the start (eq. B.1) is less than this share of the warm chain's from the
# same start after as many steps (fixed before any run; a temperature-blind chain, or one that falls from a random
# start to its favourites, lies as far: ratio 1).
COLD_FACTOR = 0.5
# Two scores closer than this (nats) are a tie: a score gap Delta_i is called negative (or positive) only beyond it.
# Fixed before any run: fp32 scores of size ~10 carry rounding of ~1e-5 relative after a transformer's layers (~1e-4
# nats; a GPU's bf16 autocast rounds far coarser, so sign small gaps there with autocast off); 1e-3 nats is ten times
# the fp32 rounding and far below the smallest gap the paper names (0.39), so only a gap the scores cannot sign is a tie.
TIE_TOLERANCE = 1e-3


def poisson_interval(count: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval for the mean of a Poisson variable observed at `count`."""
    from scipy.stats import chi2

    _counts(count)
    low = chi2.ppf((1 - level) / 2, 2 * count) / 2 if count else 0.0
    return float(low), float(chi2.ppf((1 + level) / 2, 2 * count + 2) / 2)


def ratio_of_means_ci(
    numerator, denominator, level: float = 0.95, resamples: int = 4000, seed: int = 0
) -> tuple[float, float, float]:
    """mean(numerator) / mean(denominator) of two independent samples (at least 2 values each) with its
    percentile bootstrap interval, each sample resampled on its own: (ratio, low, high)."""
    x, y = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if x.ndim != 1 or y.ndim != 1 or len(x) < 2 or len(y) < 2:
        raise ValueError(f"need two 1-d samples of at least 2 values, got shapes {x.shape} and {y.shape}")
    rng = np.random.default_rng(seed)
    means_x = x[rng.integers(0, len(x), (resamples, len(x)))].mean(1)
    boot = means_x / y[rng.integers(0, len(y), (resamples, len(y)))].mean(1)
    low, high = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(x.mean() / y.mean()), float(low), float(high)


def spearman_difference_ci(
    x, y, z, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float, float]:
    """Spearman's rho(x, y) - rho(x, z) over the same rows, with a percentile bootstrap interval (rows
    resampled): (rho_xy, rho_xz, low, high); NaN where fewer than 3 rows or no resample gives both."""
    x, y, z = (np.asarray(v, dtype=float) for v in (x, y, z))
    if not (x.shape == y.shape == z.shape) or x.ndim != 1:
        raise ValueError(f"x, y and z must be paired 1-d arrays, got {x.shape}, {y.shape}, {z.shape}")
    if len(x) < 3:
        return (math.nan,) * 4
    rows = np.random.default_rng(seed).integers(0, len(x), (resamples, len(x)))
    boot = rank_correlation(x[rows], y[rows]) - rank_correlation(x[rows], z[rows])
    low, high = np.nanquantile(boot, [(1 - level) / 2, (1 + level) / 2]) if np.isfinite(boot).any() else (math.nan,) * 2
    return float(rank_correlation(x, y)), float(rank_correlation(x, z)), float(low), float(high)


def rule_trap_split(min_gaps, tolerance: float = TIE_TOLERANCE) -> tuple[str, str]:
    """trap_split (A.1, Table 4): perfect and approximate traps both occur. `min_gaps`: Delta* of each distinct held
    state (a state that one chain re-enters is one case, not one per detection); a state is perfect when Delta* >
    `tolerance`, approximate when Delta* < -`tolerance` (a gap negative beyond a tie), and tied otherwise (its sign
    is within the scores' noise: neither kind, left out of the split and named in the reason). By rule_both_kinds
    (null: one kind absent), saying when the run has too few states for an absent kind to reach differs."""
    gaps = np.asarray(min_gaps, dtype=float).reshape(-1)
    if np.isnan(gaps).any() or not (finite(tolerance) and tolerance >= 0):
        raise ValueError(f"need finite minimum gaps and a tolerance >= 0, got {gaps} and {tolerance!r}")
    perfect, approximate = int((gaps > tolerance).sum()), int((gaps < -tolerance).sum())
    count, tied = perfect + approximate, len(gaps) - perfect - approximate
    verdict, reason = rule_both_kinds(perfect, count)
    needed = cases_to_rule_out(0.1)  # rule_both_kinds' default rare share
    if verdict == INCONCLUSIVE and 0 < count < needed:
        reason += f"; with {count} < {needed} held states an absent kind cannot reach differs"
    if tied:
        reason += f"; {tied} tied held state(s) (|Δ*| <= {tolerance:g} nats) left out"
    return verdict, reason


def rule_outlasts_null(
    ended, null, run_steps: int, factor: float = DURATION_FACTOR, *, held: int = 0, seed: int = 0
) -> tuple[str, str, float, float, float]:
    """approximate_trap_duration (A.1): the mean duration of the approximate traps that ended inside a run of
    `run_steps` steps (`ended`; `held`: how many approximate traps there were, censored ones included) over the mean
    duration of the ended traps the same detector finds on a chain without collective persistence (`null`), with
    ratio_of_means_ci's interval, against `factor` by rule_one_sided (null: the ratio is at most `factor`).
    A trap counts only if it ends inside the run, so both means are capped by the run: the ratio cannot exceed about
    run_steps / mean(null). Differs needs room for twice the factor (run_steps >= 2 * factor * mean(null)); in a
    shorter run a ratio at or below the factor is inconclusive (the run caps what it can show). Inconclusive with
    fewer than 2 durations on either side. (verdict, reason, ratio, low, high)."""
    ended, null = np.asarray(ended, dtype=float).reshape(-1), np.asarray(null, dtype=float).reshape(-1)
    nan3 = (math.nan,) * 3
    if len(ended) == 0:
        why = f"{held} approximate trap(s), none ended inside the run" if held else "zero approximate traps"
        return INCONCLUSIVE, f"{why}: a run with approximate traps that escape would decide it", *nan3
    if len(null) == 0:
        return (
            INCONCLUSIVE,
            "the detector found no ended trap on the chain without collective persistence: no null duration to "
            "compare with; a longer run would give one",
            *nan3,
        )
    ratio = float(ended.mean() / null.mean())
    if len(ended) < 2 or len(null) < 2:
        why = f"{len(ended)} ended approximate trap(s), {len(null)} null trap(s): at least 2 of each give an interval"
        return INCONCLUSIVE, why, ratio, math.nan, math.nan
    _, low, high = ratio_of_means_ci(ended, null, seed=seed)
    verdict, reason = rule_one_sided(low, high, factor, "above", events=len(ended), estimate=ratio)
    reason = f"{len(ended)} ended approximate traps against {len(null)} null traps: {reason}"
    room = run_steps / null.mean()
    if verdict == DIFFERS and room < 2 * factor:
        verdict = INCONCLUSIVE
        reason += (
            f"; but the run ({run_steps} steps) caps the ratio near {room:.2g}, under twice the factor: "
            f"a run of {math.ceil(2 * factor * null.mean())} steps or more could show differs"
        )
    return verdict, reason, ratio, low, high


def rule_mean_gap_tracks_duration(duration, mean_gap, min_gap, *, seed: int = 0) -> tuple[str, str, dict]:
    """mean_gap_correlation (A.1): rho(duration, mean gap) - rho(duration, min gap) over the traps
    (spearman_difference_ci) against 0 by rule_one_sided (null: the mean gap tracks duration no better).
    Inconclusive with fewer than 3 traps or no interval. (verdict, reason, dict of rho_mean, rho_min,
    rho_difference, difference_low, difference_high)."""
    rho_mean, rho_min, low, high = spearman_difference_ci(duration, mean_gap, min_gap, seed=seed)
    stats = dict(rho_mean=rho_mean, rho_min=rho_min, rho_difference=rho_mean - rho_min, difference_low=low,
                 difference_high=high)  # fmt: skip
    if not finite(stats["rho_difference"], low, high):
        return (
            INCONCLUSIVE,
            f"{len(np.asarray(duration))} trap(s): a rank correlation needs at least 3 traps with varying durations "
            "and gaps; a run with more traps would decide it",
            stats,
        )
    verdict, reason = rule_one_sided(low, high, 0.0, "above", estimate=stats["rho_difference"])
    return verdict, reason, stats


def rule_escapes_at_weakest(hits: int, tries: int, chance: float) -> tuple[str, str, float, float]:
    """escape_weakest_site (C.2): `hits` of `tries` final escapes at a weakest-gap site against `chance`, the
    kernel's one-step share at the same held states, by rule_share_above_chance (null: the kernel's share).
    Inconclusive with no escape or no chance share. (verdict, reason, low, high)."""
    if not tries or not finite(chance):
        why = "zero escapes: no trap ended inside the run; a run with escapes would decide it"
        return INCONCLUSIVE, why, math.nan, math.nan
    verdict, reason, low, high = rule_share_above_chance(hits, tries, chance)
    return verdict, reason, low, high


def rule_cold_stays_near(
    distance, warm_distance, factor: float = COLD_FACTOR, level: float = 0.95
) -> tuple[str, str, float, float, float]:
    """cold_chains_stay (C.3), one cold temperature at one step: per chain, the cold chain's distance from its start
    d(x_t, x_0) (eq. B.1, `distance`) against the warm chain's from the same start at the same step
    (`warm_distance`). The paper says the cold chain stays near its start: mean(distance) < factor *
    mean(warm_distance). Null: equality; judged on the paired excess distance - factor * warm_distance by
    rule_paired_mean (Student's t interval at `level`): reproduced when it lies below 0, differs at or above it. A
    chain that falls far from its start and then freezes does not stay. (verdict, reason, mean excess, low, high)."""
    distance = np.asarray(distance, dtype=float).reshape(-1)
    warm_distance = np.asarray(warm_distance, dtype=float).reshape(-1)
    if distance.shape != warm_distance.shape:
        raise ValueError(
            f"distance and warm_distance must pair chain for chain, got {distance.shape} and {warm_distance.shape}"
        )
    if len(distance) < 2:
        return INCONCLUSIVE, f"{len(distance)} chain(s): too few for an interval; 2 or more decide it", *(math.nan,) * 3
    excess = distance - factor * warm_distance
    return rule_paired_mean(excess, 0.0, "below", missing="no chain has a distance", level=level)


def rule_not_run(why: str) -> tuple[str, str]:
    """A claim whose protocol the run lacks (e.g. no chain at the paper's temperature): not run here, saying why."""
    return NOT_RUN, why


def deciding_part(parts: list[dict]) -> dict | None:
    """The part that decides a rule_every_part verdict, for display: a differing one first, then an undecided one,
    then the one whose interval's upper end is largest (None with no part). Each part: a dict with `verdict` and
    `high`."""
    order = {DIFFERS: 0, INCONCLUSIVE: 1}
    return min(
        parts, key=lambda p: (order.get(p["verdict"], 2), -(p["high"] if finite(p["high"]) else math.inf)), default=None
    )


# --------------------------------------------------------------------------------------------
# The paper's side (book/paper_claims.csv, the only place the paper's numbers are typed): what each claim is judged
# against, its protocol (which sizes some chapters run) and its equivalence band
# --------------------------------------------------------------------------------------------

PAPER_CLAIMS = Path(__file__).resolve().parent / "book" / "paper_claims.csv"
# The paper's side, typed once: `values` holds the paper's numbers as "key=number; ...", `protocol` how it
# measured them ("key=value; ..."), `paper_model` the model(s) it measured on.
# `paper_models` the exact Hugging Face names of those models ("; "-separated) and `band` the equivalence band a
# model-specific number is judged against on the paper's own setup ("low=...; high=...": the paper's range, or its
# value with the tolerance stated in `band_why`); `calibration`, for a general claim, the ground-truth chains its rule is
# calibrated on ("holds on ...; fails on ...", tests/test_calibration_*.py).
PAPER_COLUMNS = (
    "claim",
    "table",
    "kind",
    "chapter",
    "section",
    "what",
    "paper_value",
    "values",
    "paper_model",
    "protocol",
    "paper_models",
    "band",
    "band_why",
    "calibration",
    "title",
    "side",
)
# empty when a file lacks them; `title` then reads as the claim id
OPTIONAL_PAPER_COLUMNS = ("paper_models", "band", "band_why", "calibration", "title", "side")
SIDES = ("above", "below", "")  # where the paper puts a general claim's quantity against its rule's null
MAX_TITLE_WORDS = 12
KINDS = ("general", "model-specific")
TABLES = ("paper", "beyond")


def _check_columns(frame: pd.DataFrame, expected: tuple[str, ...], source: str) -> None:
    missing = [c for c in expected if c not in frame.columns]
    if missing:
        raise ValueError(f"{source} lacks the column(s) {missing}; expected {list(expected)}")


def _check_values(frame: pd.DataFrame, column: str, allowed: tuple[str, ...], source: str) -> None:
    bad = sorted(set(frame[column]) - set(allowed))
    if bad:
        raise ValueError(f"{source}: {column} must be one of {list(allowed)}, got {bad}")


def parse_pairs(text: str) -> dict[str, str]:
    """ "key=value; key=value" -> {key: value} (the `values` and `protocol` columns of paper_claims.csv)."""
    pairs = {}
    for item in filter(None, (part.strip() for part in str(text).split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {item!r} in {text!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def read_paper_claims(path: str | Path = PAPER_CLAIMS) -> pd.DataFrame:
    """The paper's side: one row per claim id (columns PAPER_COLUMNS), checked."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame = frame.assign(**{c: "" for c in OPTIONAL_PAPER_COLUMNS if c not in frame})
    _check_columns(frame, PAPER_COLUMNS, str(path))
    _check_values(frame, "table", TABLES, str(path))
    _check_values(frame, "kind", KINDS, str(path))
    _check_values(frame, "side", SIDES, str(path))
    frame["title"] = frame.title.where(frame.title != "", frame.claim)
    wordy = frame.claim[frame.title.str.split().str.len() > MAX_TITLE_WORDS].tolist()
    if wordy:
        raise ValueError(f"{path}: a title has at most {MAX_TITLE_WORDS} words; too long for {wordy}")
    duplicated = sorted(set(frame.claim[frame.claim.duplicated()]))
    if duplicated:
        raise ValueError(f"{path}: claim ids listed twice: {duplicated}")
    for column in ("values", "protocol"):
        frame[column].map(parse_pairs)
    return frame[list(PAPER_COLUMNS)]


@functools.cache
def _paper_claims_cached(path: str) -> pd.DataFrame:
    return read_paper_claims(path).set_index("claim")


def paper_claim(claim: str, path: str | Path = PAPER_CLAIMS) -> pd.Series:
    """One row of paper_claims.csv by id (ValueError naming the id when it is not listed)."""
    table = _paper_claims_cached(str(path))
    if claim not in table.index:
        raise ValueError(f"claim {claim!r} is not in {path}")
    return table.loc[claim]


def paper_number(claim: str, key: str, path: str | Path = PAPER_CLAIMS) -> float:
    """A number the paper reports, read from paper_claims.csv's `values` column (the only place it is typed)."""
    values = parse_pairs(paper_claim(claim, path)["values"])
    if key not in values:
        raise ValueError(f"claim {claim!r} has no value {key!r} in {path} (it has {sorted(values)})")
    return float(values[key].replace(",", ""))


def paper_protocol(claim: str, path: str | Path = PAPER_CLAIMS) -> dict[str, str]:
    """How the paper measured a claim (n, budget, chains, tau, ...), from paper_claims.csv's `protocol`."""
    return parse_pairs(paper_claim(claim, path)["protocol"])


def paper_band(claim: str, model: str = "", path: str | Path = PAPER_CLAIMS) -> tuple[float, float] | None:
    """The equivalence band of a model-specific claim (paper_claims.csv's `band`: "low=a; high=b", or one
    "<model>=a..b" per model for a number the paper gives per model), or None when it has none."""
    band = {k.lower(): v for k, v in parse_pairs(paper_claim(claim, path)["band"]).items()}
    if not band:
        return None
    if str(model).lower() in band:
        low, sep, high = band[str(model).lower()].partition("..")
        return float(low), float(high if sep else low)
    if set(band) >= {"low", "high"}:
        return float(band["low"]), float(band["high"])
    return None


# --------------------------------------------------------------------------------------------
# Claims rows: a verdict with its numbers, the way every chapter's judging writes it (book_tools.write_claims
# checks and saves them)
# --------------------------------------------------------------------------------------------

# How a chapter names its seed passages in setups and on its page (glauber_core.seed_passages(passages=...)).
PASSAGE_NAMES = {"bbc": "BBC News", "ms_marco": "MS MARCO", "germline": "IMGT germline V genes"}


def judge_on_paper_setup(claim: str, model: str, setup: dict, low: float, high: float) -> tuple[str, str, str]:
    """A model-specific claim: (verdict, reason, setup text) by verdicts.judge_model_specific, with the
    paper's models, protocol and equivalence band read from paper_claims.csv."""
    paper = paper_claim(claim)
    models = [m.strip() for m in paper["paper_models"].split(";") if m.strip()]
    return judge_model_specific(
        model,
        setup,
        low,
        high,
        paper_models=models,
        protocol=parse_pairs(paper["protocol"]),
        band=paper_band(claim, model),
    )


def interval_text(
    estimate: float,
    low: float,
    high: float,
    *,
    digits: int = 2,
    missing: str,
    signed: bool = False,
    significant: int | None = None,
) -> str:
    """ "estimate [low, high]" for the tables and prose (an end may be infinite), with `digits` decimals (or,
    given `significant`, enough decimals, at least `digits`, to show that many significant digits of the largest
    finite |value|) and a sign when `signed`; when the run has no estimate, the words in `missing` (why). A
    degenerate interval (low == high) is not printed: the estimate stands alone."""
    if not finite(estimate):
        return missing
    if significant is not None:
        largest = max(abs(float(v)) for v in (estimate, low, high) if finite(v))
        if largest > 0:
            digits = max(digits, significant - 1 - math.floor(math.log10(largest)))
    form = f"{{:{'+' if signed else ''}.{digits}f}}".format
    if any(v is None or math.isnan(float(v)) for v in (low, high)):  # an infinite end is a one-sided interval
        return f"{form(estimate)} (no interval: {missing})"
    if float(low) == float(high):
        return form(estimate)
    return f"{form(estimate)} [{form(low)}, {form(high)}]"


def share_text(successes: int, trials: int, *, digits: int = 2, missing: str = "no trials") -> str:
    """A share for the tables: "k of m" when m < 5 or k is 0 or m (a count, not an interval), else
    "share [Wilson low, high] (k of m)"."""
    if trials == 0:
        return missing
    if trials < 5 or successes in (0, trials):
        return f"{successes} of {trials}"
    low, high = (float(v[0]) for v in share_intervals([successes], [trials]))
    return f"{successes / trials:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}] ({successes} of {trials})"


def claim_row(
    claim: str,
    quantity: str,
    ours: float,
    ours_text: str,
    verdict: str,
    reason: str,
    setup: str = "",
    *,
    low: float = math.nan,
    high: float = math.nan,
    null: float = math.nan,
) -> dict:
    """One row of a chapter's claims.csv; table and kind come from paper_claims.csv, so a chapter cannot
    judge a model-specific claim as general or the other way round. `low`, `high`: our interval; `null`: what
    the rule judged against (NaN where there is none)."""
    paper = paper_claim(claim)
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {list(VERDICTS)}, got {verdict!r}")
    if paper["kind"] == "general" and verdict == OTHER_SETUP:
        raise ValueError(f"{claim} is a general claim: judge it by its rule, not as 'other setup'")
    if not ours_text or "nan" in ours_text.lower().split(" ") or ours_text.lower().startswith("nan"):
        raise ValueError(f"{claim}: ours_text must say in words why there is no estimate, got {ours_text!r}")
    number = {
        name: float(v) if finite(v) else math.nan
        for name, v in (("ours", ours), ("low", low), ("high", high), ("null", null))
    }
    return dict(
        claim=claim,
        table=paper["table"],
        kind=paper["kind"],
        quantity=quantity,
        **number,
        ours_text=ours_text,
        verdict=verdict,
        reason=reason,
        setup=setup or ("—" if paper["kind"] == "general" else ""),
    )


def model_specific_row(
    claim: str,
    quantity: str,
    ours: float,
    ours_text: str,
    *,
    model: str,
    setup: dict,
    low: float = math.nan,
    high: float = math.nan,
) -> dict:
    """A claims row for a number the paper measured on its own model: judged only on the paper's setup
    (judge_on_paper_setup), else "other setup" with each difference listed."""
    verdict, reason, setup_text = judge_on_paper_setup(claim, model, setup, low, high)
    return claim_row(claim, quantity, ours, ours_text, verdict, reason, setup_text, low=low, high=high)


# --------------------------------------------------------------------------------------------
# ---- chapter 4 protein rule (issue 42) ----
# A germline-reversion basin on a protein MLM (section 6.2's basins, ours): chains started at a human germline V gene
# with framework substitutions, against the no-pull value; each temperature its own claim (issue 53)
# --------------------------------------------------------------------------------------------


def rule_reversion(differences: dict, alphabet: int) -> dict:
    """Germline reversion (section 6.2's basins on a protein MLM; ours, beyond the paper), one verdict a
    temperature. `differences` maps each temperature to its per-chain values: for a chain started at a germline V
    gene with k >= 1 framework substitutions, the share of its mutated sites back at the germline residue after T
    steps minus the share of its unmutated framework sites that left the germline residue, both over the sites the
    chain updated (NaN: none, left out); `alphabet`: |V|, the tokens a chain may propose.

    Null: no pull toward the germline, a model whose conditionals are uniform over the |V| tokens (field-free). A
    site the chain has updated holds its last draw, which such a model makes uniform whatever the rest of the
    sequence and the temperature; random scan picks sites without looking at them. So a visited mutated site is
    back with probability 1/|V| and a visited unmutated one has left with probability (|V| - 1)/|V|, and each
    chain's difference has mean exactly 2/|V| - 1 (-0.9 with 20 residues, 0 with two). The null is set on the
    difference, the chapter's per-chain statistic, rather than each share on its own: one interval a temperature,
    and a chain with two mutated sites (its reverted share 0, 1/2 or 1) is steadied by its framework sites.

    Per temperature rule_paired_mean above the null (Student's t interval over chains, rule_one_sided: a
    zero-width interval, every chain at one value, decides nothing; fewer than two chains, no interval):
    reproduced above the no-pull value, differs at or below it, inconclusive otherwise. Returns {"null", "parts":
    one dict a temperature, in the order given (temperature, chains, verdict, reason, estimate, low, high)}."""
    alphabet = int(alphabet)
    if alphabet < 2:
        raise ValueError(f"alphabet must count at least two tokens, got {alphabet}")
    null = 2 / alphabet - 1
    parts = []
    for temperature, values in differences.items():
        values = np.asarray(values, dtype=float).reshape(-1)
        values = values[np.isfinite(values)]
        if len(values) < 2:
            verdict, reason, *interval = INCONCLUSIVE, "fewer than two mutated chains: no interval", *(math.nan,) * 3
        else:
            verdict, reason, *interval = rule_paired_mean(values, null, "above", missing="no mutated chain")
        parts.append(
            dict(
                zip(
                    ("temperature", "chains", "verdict", "reason", "estimate", "low", "high"),
                    (float(temperature), len(values), verdict, reason, *interval),
                )
            )
        )
    return {"null": null, "parts": parts}
