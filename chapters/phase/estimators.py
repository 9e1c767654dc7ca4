"""Chapter 3's estimators (section 6.1, Figs. 2, 3, 7, and the section 7 conjecture): coupling summaries, Firth
logistic fits of the slow-to-fast boundary with bootstrap intervals, the length comparison on an n log n budget,
hitting-time scaling fits, saturation and crossover trends, convergence diagnostics and context-averaged influence.

Imports the core and book_tools; never another chapter.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import torch

import book_tools as bt
import verdicts as vd
from book_tools import share_intervals
from glauber_core import (
    Conditionals,
    WindowConditionals,
    alpha_from_influence,
    check_count,
    free_sites,
    influence_candidates,
    influence_coefficients,
)


def coupling_summary(grid: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (n, temperature) cell of a coupling grid: pairs, share coupled with its Wilson interval, and the
    median and quartiles of the coupling time counting uncoupled pairs as infinite (NaN when undefined)."""
    if not {"n", "temperature", "time"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, time)")
    rows = []
    for (n, tau), cell in grid.groupby(["n", "temperature"]):
        times = np.where(cell.time >= 0, cell.time, np.inf)
        q1, median, q3 = np.quantile(times, [0.25, 0.5, 0.75], method="inverted_cdf")
        rows.append(
            {
                "n": n,
                "temperature": tau,
                "pairs": len(cell),
                "coupled": int((cell.time >= 0).sum()),
                "median_time": median,
                "q1_time": q1,
                "q3_time": q3,
            }
        )
    table = pd.DataFrame(rows)
    table["share"] = table.coupled / table.pairs
    table["share_low"], table["share_high"] = share_intervals(table.coupled, table.pairs, level)
    return table.replace(np.inf, np.nan)


def logistic_fit(x, y) -> tuple[float, float]:
    """(midpoint, scale) of P(y = 1) = 1 / (1 + exp(-(x - midpoint) / scale)) from 0/1 outcomes.

    Firth's penalised likelihood (Jeffreys prior; firth_logistic) keeps the fit finite when the outcomes are
    perfectly separated; (nan, nan) when every outcome (or every x) is the same, as no transition lies inside
    the data."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2 or not np.isin(y, (0, 1)).all() or not np.isfinite(x).all():
        raise ValueError("logistic_fit needs equal-length 1-d x (finite) and y (0/1 outcomes), at least 2")
    if y.min() == y.max() or x.min() == x.max():
        return math.nan, math.nan
    centre, spread = x.mean(), x.std()
    ((b0, b1),) = firth_logistic(np.stack([np.ones_like(x), (x - centre) / spread], 1), y, np.ones((1, len(x))))
    return float(centre - spread * b0 / b1), float(spread / b1)


def _rising(midpoint, scale):
    """(midpoint, scale) with NaN where the fitted share falls with temperature (scale < 0): a slow-to-fast
    transition needs coupling to rise with tau, so a falling fit has no boundary."""
    falling = scale < 0
    return np.where(falling, math.nan, midpoint), np.where(falling, math.nan, scale)


def _pair_weights(grid: pd.DataFrame, n_boot: int, rng) -> np.ndarray:
    """Bootstrap frequency weights [n_boot + 1, rows of grid] that resample pairs within each length (a pair keeps
    all its cells): row 0 all ones (the fit itself), row r the r-th resample's count of each row's pair."""
    weights = np.ones((n_boot + 1, len(grid)))
    for _, sub in grid.groupby("n"):
        at = grid.index.get_indexer(sub.index)
        pairs = np.sort(sub.pair.unique())
        counts = rng.multinomial(len(pairs), np.full(len(pairs), 1 / len(pairs)), n_boot)
        weights[1:, at] = counts[:, np.searchsorted(pairs, sub.pair.to_numpy())]
    return weights


def _flat_resamples(weights: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flat, all met) per weight row: the resample's outcomes are all the same (no transition inside the grid),
    and whether they are all met (the boundary below the grid) rather than all missed (above it)."""
    met, seen = weights @ y, weights.sum(1)
    return (met == 0) | (met == seen), met == seen


def transition_fits(grid: pd.DataFrame, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per n, the logistic fit of coupled share against temperature: midpoint (where half the pairs couple),
    scale and the 10-90% width 2 ln(9) scale, with percentile bootstrap intervals from resampling pairs
    (a pair keeps its outcomes at every temperature of every stage; Efron and Tibshirani 1993). A resample
    without a transition has midpoint -inf (every pair met: the boundary lies below the grid) or +inf (none
    met) and no scale; the midpoint's interval may then have an infinite end. A fit whose share falls with
    temperature has no boundary (NaN). All resamples of one length are fitted in one vectorised solve
    (firth_logistic with frequency weights), drawn from a stream seeded by (seed, n), so a length's interval
    does not depend on which other lengths ran. The bootstrap draws are kept in .attrs["boot"] (columns n,
    replicate, midpoint, scale)."""
    n_boot = check_count(n_boot, "n_boot", 1)
    if not {"n", "temperature", "pair", "coupled"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, pair, coupled)")
    rows, boots = [], []
    for n, sub in grid.groupby("n"):
        rng = np.random.default_rng([seed, int(n)])  # a length's resamples do not depend on the other lengths
        sub = sub.reset_index(drop=True)
        weights = _pair_weights(sub, n_boot, rng)
        tau, y = sub.temperature.to_numpy(dtype=float), sub.coupled.to_numpy(dtype=float)
        midpoint, scale = np.full(n_boot + 1, math.nan), np.full(n_boot + 1, math.nan)
        if tau.min() != tau.max():
            centre, spread = tau.mean(), tau.std()
            beta = firth_logistic(np.stack([np.ones_like(tau), (tau - centre) / spread], 1), y, weights)
            with np.errstate(all="ignore"):
                midpoint, scale = _rising(centre - spread * beta[:, 0] / beta[:, 1], spread / beta[:, 1])
        flat, all_met = _flat_resamples(weights, y)
        midpoint[flat], scale[flat] = np.where(all_met[flat], -math.inf, math.inf), math.nan
        if flat[0]:
            midpoint[0] = math.nan  # the run itself without a transition: no boundary to report
        draws = pd.DataFrame({"n": n, "replicate": np.arange(n_boot), "midpoint": midpoint[1:], "scale": scale[1:]})
        boots.append(draws)
        row = {"n": n, "pairs": sub.pair.nunique(), "midpoint": midpoint[0], "scale": scale[0]}
        row["width"] = 2 * math.log(9) * row["scale"]
        for name in ("midpoint", "scale"):
            row[f"{name}_low"], row[f"{name}_high"], _ = vd.percentile_interval(draws[name], level, max_undefined=1.0)
        row["width_low"], row["width_high"] = 2 * math.log(9) * row["scale_low"], 2 * math.log(9) * row["scale_high"]
        row["boot_undefined"] = int(draws.midpoint.isna().sum())
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["boot"] = pd.concat(boots, ignore_index=True)
    return table


def firth_logistic(design, y, weights, max_iter: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Firth-penalised logistic regression of 0/1 outcomes y [m] on design [m, k], once per row of frequency
    weights [R, m] (a bootstrap resample's counts of each observation; 0 leaves it out): beta [R, k].

    Newton's method on the modified score X'(w (y - p) + h (1/2 - p)), h the hat values of the weighted
    information (Firth 1993; Heinze and Schemper 2002), steps capped at 5 and halved until the penalised
    log-likelihood does not fall; finite even when the outcomes separate perfectly."""
    X, y = np.asarray(design, dtype=float), np.asarray(y, dtype=float)
    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    if X.ndim != 2 or y.shape != (len(X),) or weights.shape[1:] != y.shape or not np.isin(y, (0, 1)).all():
        raise ValueError("firth_logistic needs design [m, k], 0/1 outcomes y [m] and weights [R, m]")
    ridge = 1e-10 * np.eye(X.shape[1])

    def parts(beta):
        eta = beta @ X.T
        p = 1 / (1 + np.exp(-eta))
        w = weights * np.clip(p * (1 - p), 1e-300, None)
        info = np.einsum("rm,mi,mj->rij", w, X, X) + ridge
        sign, logdet = np.linalg.slogdet(info)
        loglik = (weights * (y * eta - np.logaddexp(0, eta))).sum(1) + 0.5 * logdet
        return p, w, info, loglik

    beta = np.zeros((len(weights), X.shape[1]))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        p, w, info, loglik = parts(beta)
        active = np.ones(len(beta), dtype=bool)
        for _ in range(max_iter):
            inverse = np.linalg.inv(info)
            hat = w * np.einsum("mi,rij,mj->rm", X, inverse, X)
            score = np.einsum("rm,mi->ri", weights * (y - p) + hat * (0.5 - p), X)
            step = np.einsum("rij,rj->ri", inverse, score)
            step *= np.minimum(1.0, 5.0 / np.clip(np.abs(step).max(1, keepdims=True), 1e-300, None))
            step[~active] = 0
            for _ in range(30):  # halve a step until the penalised log-likelihood does not fall
                worse = active & ~(parts(beta + step)[3] >= loglik - 1e-12)
                if not worse.any():
                    break
                step[worse] /= 2
            beta = beta + step
            p, w, info, loglik = parts(beta)
            active &= np.abs(step).max(1) > tol
            if not active.any():
                break
    return beta


def _length_position(n, small: int, large: int) -> np.ndarray:
    """log(n / small) / log(large / small): 0 at the shortest length, 1 at the longest (the pooled fit's axis)."""
    return np.log(np.asarray(n, dtype=float) / small) / math.log(large / small)


def _pooled_curves(beta: np.ndarray, centre: float, position: float) -> tuple[np.ndarray, np.ndarray]:
    """(midpoint tau_1/2, relative width scale / tau_1/2) at a length's `position` from pooled coefficients beta
    [R, 4] of logit P(met) = b0 + b1 u + b2 l + b3 u l (u = tau - centre); NaN where the share falls with tau or
    the midpoint is not positive."""
    slope = beta[:, 1] + beta[:, 3] * position
    with np.errstate(all="ignore"):
        midpoint = centre - (beta[:, 0] + beta[:, 2] * position) / slope
        relative = 1 / (slope * midpoint)
    defined = (slope > 0) & (midpoint > 0)
    return np.where(slope > 0, midpoint, math.nan), np.where(defined, relative, math.nan)


def pooled_transition_fit(
    grid: pd.DataFrame, small: int, large: int, n_boot: int = 200, seed: int = 0, level: float = 0.95
) -> dict:
    """One logistic fit across every length of a coupling grid (issue 63's pooled design): logit P(met) =
    b0 + b1 tau + b2 l + b3 tau l, l = log(n / small) / log(large / small), so the boundary tau_1/2(n) and the
    scale s(n) change smoothly with log n and every pair of every length informs both ends. The boundary shift
    tau_1/2(large) - tau_1/2(small), the relative width ratio ("relative": of s / tau_1/2, the width in log
    tau) and the absolute width ratio ("ratio": of s) come with percentile intervals from resampling pairs
    within each length (frequency weights, all resamples in one vectorised solve, firth_logistic). At a length
    whose (resampled) outcomes are all met (all missed) the boundary lies below (above) the grid: -inf (+inf),
    no width. Keys: shift, relative, ratio (each with _low, _high, _undefined), and `curves` {n: (tau_1/2,
    s / tau_1/2)} for drawing."""
    n_boot = check_count(n_boot, "n_boot", 1)
    if not {"n", "temperature", "pair", "coupled"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, pair, coupled)")
    grid = grid.reset_index(drop=True)
    tau = grid.temperature.to_numpy(dtype=float)
    centre = float(tau.mean())
    position = _length_position(grid.n, small, large)
    design = np.stack([np.ones(len(grid)), tau - centre, position, (tau - centre) * position], 1)
    y = grid.coupled.to_numpy(dtype=float)
    weights = _pair_weights(grid, n_boot, np.random.default_rng([seed, small, large]))
    beta = firth_logistic(design, y, weights)
    ends = {}
    for n in (small, large):
        at = (grid.n == n).to_numpy()
        midpoint, relative = _pooled_curves(beta, centre, float(_length_position(n, small, large)))
        flat, all_met = _flat_resamples(weights[:, at], y[at])
        midpoint[flat], relative[flat] = np.where(all_met[flat], -math.inf, math.inf), math.nan
        ends[n] = midpoint, relative
    (mid_s, rel_s), (mid_l, rel_l) = ends[small], ends[large]
    with np.errstate(all="ignore"):
        draws = {"shift": mid_l - mid_s, "relative": rel_l / rel_s, "ratio": rel_l * mid_l / (rel_s * mid_s)}
    out = {}
    for name, values in draws.items():
        low, high, undefined = vd.percentile_interval(values[1:], level)
        out[name] = float(values[0]) if math.isfinite(values[0]) else math.nan
        out[f"{name}_low"], out[f"{name}_high"], out[f"{name}_undefined"] = low, high, undefined
    out["curves"] = {
        int(n): tuple(float(v[0]) for v in _pooled_curves(beta[:1], centre, float(_length_position(n, small, large))))
        for n in sorted(grid.n.unique())
    }
    return out


def pooled_frame(**fits: dict) -> pd.DataFrame:
    """pooled_transition_fit results side by side for saving: one row per named fit (its `curves` left out)."""
    return pd.DataFrame(
        [{"budget": name, **{k: v for k, v in fit.items() if k != "curves"}} for name, fit in fits.items()]
    )


def scaled_budget_grid(grid: pd.DataFrame, budget: int, large: int = 0) -> pd.DataFrame:
    """The coupling grid with the budget removed as a cause of the boundary's shift: a pair counts as
    coupled only if it met within budget * n log n / (large log large) steps, the same allowance per unit of
    the fast-mixing time C n log n at every length (`large`, the longest length of the design, keeps the whole
    budget; 0: the grid's longest). A pair that never met is censored at the budget, beyond every allowance."""
    large = large or grid.n.max()
    allowance = budget * grid.n * np.log(grid.n) / (large * math.log(large))
    return grid.assign(coupled=(grid.time >= 0) & (grid.time <= allowance), allowance=allowance.round().astype(int))


def hitting_times(distances, steps, radius: float) -> torch.Tensor:
    """T_R = first recorded step with d(x_t, x_0) >= radius per chain (protocol 2, Appendix B.1); -1 if never.

    distances [B, R] as from trajectory_distances, steps [R] the recorded step numbers."""
    distances, steps = torch.as_tensor(distances), torch.as_tensor(steps)
    if distances.dim() != 2 or steps.shape != (distances.shape[1],):
        raise ValueError(
            f"distances must be [B, R] and steps [R], got {tuple(distances.shape)} and {tuple(steps.shape)}"
        )
    if not isinstance(radius, (int, float)) or not math.isfinite(radius):
        raise ValueError(f"radius must be a finite number, got {radius!r}")
    reached = distances >= radius
    first = reached.int().argmax(1)
    return torch.where(reached.any(1), steps.long()[first], -1)


SCALING_FORMS = {"n log n": lambda n: n * np.log(n), "n": lambda n: n * 1.0, "n^2": lambda n: n**2.0}


def form_exponent(lengths, form) -> float:
    """The exponent a form f(n) shows over `lengths`: the least-squares slope of log f(n) against log n (n log n
    over n = 8..24 shows 1.39, n (log n + 1) shows 1.28)."""
    x = np.log(np.asarray(lengths, dtype=float))
    return float(np.polyfit(x, np.log(form(np.exp(x))), 1)[0])


def _medians(groups) -> np.ndarray:
    """Median (inverted CDF, so infinite times order) of every resample of every group: [resamples, groups]."""
    return np.stack([np.quantile(g, 0.5, axis=-1, method="inverted_cdf") for g in groups], -1)


EXPONENT_RESAMPLES = 2000  # growth_exponent's draws: a 95% interval's ends are its 2.5% tails, the 5th draw of 200


def growth_exponent(n, times, n_boot: int = EXPONENT_RESAMPLES, seed: int = 0, level: float = 0.95) -> dict:
    """Fig. 3b's judged number: the exponent beta of a power law c n^beta fitted (least squares on logs) to the mean
    hitting time per length, with a percentile interval from a bootstrap over chains within each length
    (verdicts.group_bootstrap, `n_boot` draws: with 200 the ends are single draws whose noise made the interval miss
    n H_n's exponent too often), beside the exponents the claimed form n (log n + c), c in [0, 1], shows over the same
    lengths (claimed_low at c = 1, claimed_high at c = 0; form_exponent; n H_n, the coupon collector's mean, has
    c near 0.58). The mean, not the median: times of a few steps are integers, and a median of them sits on the
    smallest possible value at short lengths, which bends the fitted exponent. A length where some chain never hit
    (times < 0) has no mean and is left out; a resample of a kept length always has one. Keys beta, low, high,
    claimed_low, claimed_high, lengths (the lengths kept); NaN with fewer than 3."""
    n, times = np.asarray(n, dtype=float), np.asarray(times, dtype=float)
    if n.shape != times.shape or n.ndim != 1 or (n < 2).any():
        raise ValueError("n and times must be equal-length 1-d arrays with every n >= 2")
    lengths = np.unique(n)
    groups = [times[n == m] for m in lengths]
    keep = np.array([(g > 0).all() for g in groups])
    out = dict.fromkeys(("beta", "low", "high", "claimed_low", "claimed_high"), math.nan) | {"lengths": int(keep.sum())}
    if keep.sum() < 3:
        return out
    x = np.log(lengths[keep])
    centred = x - x.mean()

    def slope(means):  # [..., lengths] -> the exponent of each row
        logs = np.log(means)
        return (logs - logs.mean(-1, keepdims=True)) @ centred / (centred**2).sum()

    kept = [g for g, k in zip(groups, keep) if k]
    draws = vd.group_bootstrap(kept, lambda g: slope(np.stack([r.mean(1) for r in g], -1)), n_boot, seed)
    low, high, _ = vd.percentile_interval(draws, level)
    return out | {
        "beta": float(slope(np.array([g.mean() for g in kept]))),
        "low": low,
        "high": high,
        "claimed_low": form_exponent(lengths[keep], lambda m: m * (np.log(m) + 1)),
        "claimed_high": form_exponent(lengths[keep], lambda m: m * np.log(m)),
    }


def scaling_fits(
    n, times, n_boot: int = 200, seed: int = 0, level: float = 0.95, forms: dict | None = None
) -> pd.DataFrame:
    """Median hitting time T(n) against n, as Fig. 3b plots it, shown, not judged. Per form f in n log n, n, n^2 (or
    `forms`): C of T = C f(n) by least squares on log T (log C the mean of log T - log f(n) over lengths), with a
    percentile interval from a bootstrap over chains within each length (verdicts.group_bootstrap), the residual sum
    of squares, AIC and the leave-one-length-out error in log T. Chains that never hit count as infinite; a length
    whose median is infinite is left out (all NaN with fewer than 3 lengths). attrs: "medians" (n, median_time,
    used) and "exponent", the judged growth_exponent of the same times (its own EXPONENT_RESAMPLES draws)."""
    n, times = np.asarray(n, dtype=float), np.asarray(times, dtype=float)
    if n.shape != times.shape or n.ndim != 1 or (n < 2).any():
        raise ValueError("n and times must be equal-length 1-d arrays with every n >= 2")
    forms = SCALING_FORMS if forms is None else forms
    times = np.where(times >= 0, times, np.inf)
    lengths = np.unique(n)
    groups = [times[n == m] for m in lengths]
    med = _medians(groups)
    keep = np.isfinite(med) & (med > 0)
    x = lengths[keep]
    table = pd.DataFrame(
        {"form": list(forms), "C": math.nan, "C_low": math.nan, "C_high": math.nan, "rss_log": math.nan}
        | {"aic": math.nan, "loo_mse_log": math.nan, "lengths": int(keep.sum()), "best_aic": False}
    )
    table.attrs["medians"] = pd.DataFrame({"n": lengths, "median_time": med, "used": keep})
    table.attrs["exponent"] = growth_exponent(n, np.where(np.isfinite(times), times, -1), seed=seed, level=level)
    if keep.sum() < 3:  # too few lengths hit within the budget to fit a form: an all-NaN table
        return table
    boot = vd.group_bootstrap([g for g, k in zip(groups, keep) if k], _medians, n_boot, seed)
    with np.errstate(all="ignore"):
        log_boot = np.where(np.isfinite(boot) & (boot > 0), np.log(boot), np.nan)
    logt, m = np.log(med[keep]), len(x)
    for k, f in enumerate(forms.values()):
        resid = logt - np.log(f(x))
        log_c = resid.mean()
        rss = ((resid - log_c) ** 2).sum()
        with warnings.catch_warnings():  # a resample without a finite median at any kept length has no C
            warnings.simplefilter("ignore", RuntimeWarning)
            c_draws = np.exp(np.nanmean(log_boot - np.log(f(x)), 1))
        c_low, c_high, _ = vd.percentile_interval(c_draws, level, 1.0)
        table.loc[k, ["C", "C_low", "C_high", "rss_log"]] = [math.exp(log_c), c_low, c_high, rss]
        table.loc[k, "aic"] = m * math.log(max(rss, 1e-300) / m) + 2
        table.loc[k, "loo_mse_log"] = np.mean([(resid[j] - np.delete(resid, j).mean()) ** 2 for j in range(m)])
    table["best_aic"] = table.aic == table.aic.min()
    return table


def saturation_trend(n, distances, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> dict:
    """Fig. 3a, shown beside the judged ceiling_ratios: the median distance d(x_T, x_0) per length and two slopes
    across lengths, each with a percentile bootstrap interval (chains resampled within each length,
    verdicts.group_bootstrap): `slope`, of the median d against log n, and `exponent`, of log median d against
    log n. The exponent is NaN when a median is 0; both are NaN with fewer than 3 lengths. The medians are in
    ["medians"] (columns n, median_distance)."""
    n, d = np.asarray(n, dtype=float), np.asarray(distances, dtype=float)
    if n.shape != d.shape or n.ndim != 1 or (n < 2).any() or not np.isfinite(d).all():
        raise ValueError("n and distances must be equal-length 1-d arrays (finite distances, every n >= 2)")
    lengths = np.unique(n)
    groups = [d[n == m] for m in lengths]
    medians = np.array([np.median(g) for g in groups])
    out = {"medians": pd.DataFrame({"n": lengths, "median_distance": medians}), "lengths": len(lengths)}
    nan = {k: math.nan for k in ("slope", "slope_low", "slope_high", "exponent", "exponent_low", "exponent_high")}
    if len(lengths) < 3:
        return out | nan
    centred = np.log(lengths) - np.log(lengths).mean()

    def slopes(meds):  # [..., lengths] -> (slope of meds, slope of log meds) against log n
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.where((meds > 0).all(-1, keepdims=True), np.log(np.clip(meds, 1e-300, None)), np.nan)
        return (meds @ centred, logs @ centred) / (centred**2).sum()

    boot = vd.group_bootstrap(
        groups, lambda g: np.stack(slopes(np.stack([np.median(r, 1) for r in g], 1))), n_boot, seed
    )
    for k, (name, value) in enumerate(zip(("slope", "exponent"), slopes(medians))):
        low, high, _ = vd.percentile_interval(boot[k], level) if bt.finite(value) else (math.nan, math.nan, 1.0)
        out |= {name: float(value), f"{name}_low": low, f"{name}_high": high}
    return out


def distance_at_ends(distances, steps, cutoff: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(d at T, d at 2T/3) per chain for Fig. 3a: the distance at the last record at or before `cutoff` (T) and at
    the last record at or before two thirds of it (where the run's last third starts). distances [B, R], steps [R]."""
    distances, steps = torch.as_tensor(distances), torch.as_tensor(steps)
    if distances.dim() != 2 or steps.shape != (distances.shape[1],) or not (steps <= cutoff).any():
        raise ValueError(f"need distances [B, R], steps [R] and a record at or before {cutoff}")
    last = int((steps <= cutoff).nonzero().max())
    third = int((steps <= 2 * steps[last] / 3).nonzero().max())
    return distances[:, last], distances[:, third]


def ceiling_ratios(n, final, late, ref_n, ref_distances, n_boot: int = 200, seed: int = 0, level: float = 0.95):
    """Fig. 3a against the embedder's ceiling: per length, the mean distance d(x_T, x_0) over chains divided by
    d_ref(n), the mean distance between unrelated starts of that length (what a chain that forgot its start shows),
    with a percentile interval from a bootstrap of both (verdicts.group_bootstrap), and the rise of the distance
    over the run's last third, the mean over chains of d(x_T, x_0) - d(x_2T/3, x_0) with Student's t interval
    (verdicts.mean_interval), both at `level`; the ratio's interval also from the same draws at
    vd.every_part_level(K, level), K the lengths (corrected_low, corrected_high: vd.rule_reaches_ceiling's differs
    side). final, late: per chain d at T and at 2T/3, with their lengths n; ref_distances with their lengths ref_n.
    One row per length: n, mean_distance, ceiling, ratio, ratio_low, ratio_high, corrected_low, corrected_high,
    rise, rise_low, rise_high."""
    n, final, late = (np.asarray(v, dtype=float) for v in (n, final, late))
    ref_n, ref = np.asarray(ref_n, dtype=float), np.asarray(ref_distances, dtype=float)
    if not (n.shape == final.shape == late.shape) or n.ndim != 1 or ref_n.shape != ref.shape:
        raise ValueError("n, final and late must be equal-length 1-d arrays, ref_n and ref_distances too")
    rows, corrected = [], vd.every_part_level(len(np.unique(n)), level)
    for k, m in enumerate(np.unique(n)):
        d, r = final[n == m], ref[ref_n == m]
        if not len(r):
            raise ValueError(f"no reference distance at n = {m:g}")
        draws = vd.group_bootstrap([d, r], lambda g: g[0].mean(1) / g[1].mean(1), n_boot, seed + k)
        low, high, _ = vd.percentile_interval(draws, level)
        corrected_low, corrected_high, _ = vd.percentile_interval(draws, corrected)
        rise, rise_low, rise_high = vd.mean_interval(d - late[n == m], level)
        rows.append(
            dict(n=m, mean_distance=d.mean(), ceiling=r.mean(), ratio=d.mean() / r.mean(), ratio_low=low)
            | dict(ratio_high=high, corrected_low=corrected_low, corrected_high=corrected_high)
            | dict(rise=rise, rise_low=rise_low, rise_high=rise_high)
        )
    return pd.DataFrame(rows)


def threshold_shares(distances, rows: pd.DataFrame, radii=(0.4, 0.7, 1.0), level: float = 0.95) -> pd.DataFrame:
    """Fig. 7: per temperature (and any other column of `rows`), the share of chains whose d(x_t, x_0)
    reached each radius within the run, with Wilson intervals. distances [B, R], rows one per chain."""
    distances = torch.as_tensor(distances)
    if distances.dim() != 2 or len(rows) != len(distances):
        raise ValueError(f"need distances [B, R] and one row per chain, got {tuple(distances.shape)} and {len(rows)}")
    peak = distances.max(1).values.numpy()
    keys = [c for c in rows.columns if c not in ("row", "start", "chain")]
    frames = []
    for radius in radii:
        frame = rows.assign(reached=peak >= radius).groupby(keys).reached.agg(["sum", "count"]).reset_index()
        frames.append(frame.assign(radius=radius))
    table = pd.concat(frames, ignore_index=True).rename(columns={"sum": "reached", "count": "chains"})
    table["share"] = table.reached / table.chains
    table["share_low"], table["share_high"] = share_intervals(table.reached, table.chains, level)
    return table


# rise_with_temperature's posterior draws: the corrected interval of 12 parts has 0.21% tails, 42 draws of 20,000
SLOPE_DRAWS = 20_000


def rise_with_temperature(
    distances, steps, rows: pd.DataFrame, radii, draws: int = SLOPE_DRAWS, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """Fig. 7 per (n, radius): does the share of chains that reached the radius rise with tau? The share is read at
    the part's `cutoff`, the earliest recorded step by which half of its chains, every temperature pooled, had
    reached the radius (hitting_times; the last record when fewer than half ever did). A share read later heads for
    1 at every temperature, a ceiling that no slope separates, while the order of the hitting times stays; the
    cutoff ignores which chain ran at which temperature, so it favours no direction. One row per length (column n of
    `rows`, if any) and radius: the cutoff, the chains and hits per temperature, the least-squares slope of the share
    against tau, and its interval from Jeffreys posterior draws of each temperature's share (Beta(k + 1/2,
    m - k + 1/2), honest at 0 of m and m of m: a cell at the ceiling or the floor at every temperature gets an
    interval around 0) at `level`, and from the same draws at vd.every_part_level(K, level), K the table's parts
    (lengths times radii): corrected_low, corrected_high, the interval on vd.rule_every_part's differs side.
    distances [B, R]: d(x_t, x_0) of each chain at the recorded steps [R]."""
    distances, steps = torch.as_tensor(distances), torch.as_tensor(steps)
    if distances.dim() != 2 or len(distances) != len(rows) or "temperature" not in rows:
        raise ValueError(
            f"need distances [B, R] with one row per chain of a table with a temperature column, got "
            f"{tuple(distances.shape)} and {len(rows)} rows"
        )
    lengths = rows.n.to_numpy() if "n" in rows else np.zeros(len(rows))
    temperatures = rows.temperature.to_numpy()
    rng, out = np.random.default_rng(seed), []
    corrected = vd.every_part_level(len(np.unique(lengths)) * len(radii), level)
    for n in np.unique(lengths):
        in_n = lengths == n
        taus = np.unique(temperatures[in_n])
        chains = np.array([(temperatures[in_n] == t).sum() for t in taus])
        for radius in radii:
            times = hitting_times(distances[torch.as_tensor(in_n)], steps, radius).double().numpy()
            times[times < 0] = math.inf
            cutoff = min(float(np.quantile(times, 0.5, method="inverted_cdf")), float(steps.max()))
            hits = np.array([(times[temperatures[in_n] == t] <= cutoff).sum() for t in taus])
            if len(taus) < 2:
                slope, low, high, corrected_low, corrected_high = (math.nan,) * 5
            else:
                shares = rng.beta(hits + 0.5, chains - hits + 0.5, (check_count(draws, "draws", 1), len(taus)))
                centred = taus - taus.mean()
                fit = (shares - shares.mean(1, keepdims=True)) @ centred / (centred**2).sum()
                slope = float((hits / chains - (hits / chains).mean()) @ centred / (centred**2).sum())
                low, high, _ = vd.percentile_interval(fit, level, max_undefined=1.0)
                corrected_low, corrected_high, _ = vd.percentile_interval(fit, corrected, max_undefined=1.0)
            out.append(
                {
                    "n": n,
                    "radius": radius,
                    "cutoff": int(cutoff),
                    "temperatures": " ".join(f"{t:g}" for t in taus),
                    "reached": " ".join(f"{k}/{m}" for k, m in zip(hits, chains)),
                    "slope": slope,
                    "slope_low": low,
                    "slope_high": high,
                    "corrected_low": corrected_low,
                    "corrected_high": corrected_high,
                }
            )
    return pd.DataFrame(out)


def _import_arviz():
    """ArviZ, without the FutureWarning about its coming refactor that ArviZ 0.23 prints on the first import
    of each calendar day (it keeps the day in ~/.cache/arviz): only that notice is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
        import arviz
    return arviz


def convergence_diagnostics(distances, burn_in: float = 0.5) -> dict:
    """ArviZ split R-hat, bulk and tail ESS of distance traces [chains, R] after dropping the first
    `burn_in` share of records (Vehtari et al. 2021). R-hat near 1 says the chains forgot their starts."""
    arviz = _import_arviz()
    draws = np.asarray(torch.as_tensor(distances).double())
    if draws.ndim != 2 or draws.shape[0] < 2 or not 0 <= burn_in < 1:
        raise ValueError(f"need traces [chains >= 2, R] and 0 <= burn_in < 1, got {draws.shape} and {burn_in}")
    kept = draws[:, int(burn_in * draws.shape[1]) :]
    if kept.shape[1] < 4:
        raise ValueError(f"only {kept.shape[1]} records left after burn-in; need at least 4")
    if np.ptp(kept) == 0:  # constant traces (every chain stuck, or the distance never moves): undefined
        return {
            "chains": kept.shape[0],
            "draws": kept.shape[1],
            "rhat": math.nan,
            "ess_bulk": math.nan,
            "ess_tail": math.nan,
        }
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            "chains": kept.shape[0],
            "draws": kept.shape[1],
            "rhat": float(arviz.rhat(kept)),
            "ess_bulk": float(arviz.ess(kept, method="bulk")),
            "ess_tail": float(arviz.ess(kept, method="tail")),
        }


def context_alpha(
    cond: Conditionals, seeds, visited: dict, top_k: int, frozen=None, seed_temperatures=()
) -> pd.DataFrame:
    """The influence sum alpha per context (chapter 2's estimator, a lower bound from the top-k candidates)
    on the seed passages at every temperature of `visited` and on the states visited at each temperature:
    visited[tau] LongTensor[C, n], its row c started from seed passage c. Columns temperature, states, passage, alpha.
    With `frozen` (a protein MLM's window_mask), alpha is that of the window chain: c_ij over its free sites
    only, each context's frozen sites held (WindowConditionals, one context at a time). The seed passages are also
    scored at `seed_temperatures` (criterion_threshold's grid: every temperature comes from the same scores)."""
    temperatures, rows = sorted({*visited, *seed_temperatures}), []
    for kind, states, temps in [("seed passages", seeds, temperatures)] + [
        ("visited", states, [tau]) for tau, states in visited.items()
    ]:
        if frozen is None:
            influence = influence_coefficients(cond, states, influence_candidates(cond, states, top_k), temps)
        else:
            sites = free_sites(frozen, states.shape[1])
            influence = torch.cat(
                [
                    _window_influence(WindowConditionals(cond, state, sites), state[sites][None], top_k, temps)
                    for state in states
                ],
                1,
            )
        for tau, per_tau in zip(temps, influence):
            rows += [
                dict(temperature=tau, states=kind, passage=c, alpha=a)
                for c, a in enumerate(alpha_from_influence(per_tau).tolist())
            ]
    return pd.DataFrame(rows)


def criterion_threshold(alpha: pd.DataFrame) -> float:
    """A lower bound on Theorem 5's threshold tau_alpha (section 5.2 "On tightness", A.1): the highest temperature
    at which alpha-hat on some seed passage (context_alpha; a lower bound on alpha(tau), which is a supremum over
    contexts) still reaches 1. Theorem 5 does not certify fast mixing there, so tau_alpha lies at or above it.
    NaN when alpha-hat stays below 1 at every temperature scored."""
    seeds = alpha[alpha.states == "seed passages"]
    reached = seeds.groupby("temperature").alpha.max() >= 1
    return float(reached[reached].index.max()) if reached.any() else math.nan


def _window_influence(window, state, top_k: int, temps) -> torch.Tensor:
    return influence_coefficients(window, state, influence_candidates(window, state, top_k), temps)


def alpha_pairs(alpha: pd.DataFrame, tau: float) -> pd.DataFrame:
    """The per-context alpha on the seed passages and on the visited states at temperature tau, paired by
    context (visited chain c started from seed passage c), same candidates and contexts on both sides."""
    at = alpha[alpha.temperature == tau].pivot(index="passage", columns="states", values="alpha")
    return at.dropna() if {"seed passages", "visited"} <= set(at.columns) else at.iloc[:0]
