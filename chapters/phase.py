"""Chapter 3: the temperature-length phase diagram (section 6.1, Figs. 2, 3, 7).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from glauber_core import (
    Conditionals,
    MaskedLMConditionals,
    Trajectory,
    check_count,
    check_temperature,
    check_tokens,
    coupling_times,
    glauber,
    pair_temperatures,
)
from book_tools import share_intervals


def coupling_grid(cond: Conditionals, x0, y0, temperatures, max_steps: int, *, seed: int = 0,
                  progress: bool = True) -> pd.DataFrame:
    """Coupling times of every pair (x0[p], y0[p]) at every temperature, all in one batch (Fig. 2).

    Pair p at temperatures[t] is batch row t * P + p with seed chain_seeds(seed, T * P)[t * P + p].
    Returns one row per (temperature, pair): n, temperature, pair, time (-1: not within max_steps), coupled.
    """
    temperatures = torch.tensor(check_temperature(temperatures, many=True), dtype=torch.float64)
    x, y = check_tokens(cond, x0, "x0"), check_tokens(cond, y0, "y0")
    pairs, n = x.shape
    times = coupling_times(cond, x.repeat(len(temperatures), 1), y.repeat(len(temperatures), 1), max_steps,
                           temperatures.repeat_interleave(pairs), seed=seed, progress=progress)
    return pd.DataFrame({"n": n, "temperature": temperatures.repeat_interleave(pairs).numpy(),
                         "pair": np.tile(np.arange(pairs), len(temperatures)), "time": times.numpy(),
                         "coupled": times.numpy() >= 0})


def coupling_summary(grid: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (n, temperature) cell of a coupling grid: pairs, share coupled with its Wilson interval, and the
    median and quartiles of the coupling time counting uncoupled pairs as infinite (NaN when undefined)."""
    if not {"n", "temperature", "time"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, time)")
    rows = []
    for (n, tau), cell in grid.groupby(["n", "temperature"]):
        times = np.where(cell.time >= 0, cell.time, np.inf)
        q1, median, q3 = np.quantile(times, [0.25, 0.5, 0.75], method="inverted_cdf")
        rows.append({"n": n, "temperature": tau, "pairs": len(cell), "coupled": int((cell.time >= 0).sum()),
                     "median_time": median, "q1_time": q1, "q3_time": q3})
    table = pd.DataFrame(rows)
    table["share"] = table.coupled / table.pairs
    table["share_low"], table["share_high"] = share_intervals(table.coupled, table.pairs, level)
    return table.replace(np.inf, np.nan)


def logistic_fit(x, y) -> tuple[float, float]:
    """(midpoint, scale) of P(y = 1) = 1 / (1 + exp(-(x - midpoint) / scale)) from 0/1 outcomes.

    Firth's penalised likelihood (Jeffreys prior) keeps the fit finite when the outcomes are perfectly
    separated; (nan, nan) when every outcome is the same, as no transition lies inside the data.
    """
    from scipy.optimize import minimize

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2 or not np.isin(y, (0, 1)).all() or not np.isfinite(x).all():
        raise ValueError("logistic_fit needs equal-length 1-d x (finite) and y (0/1 outcomes), at least 2")
    if y.min() == y.max() or x.min() == x.max():
        return math.nan, math.nan
    centre, spread = x.mean(), x.std()
    u = (x - centre) / spread
    design = np.stack([np.ones_like(u), u], 1)

    def penalised(beta):
        eta = design @ beta
        p = 1 / (1 + np.exp(-eta))
        w = np.clip(p * (1 - p), 1e-300, None)
        loglik = (y * eta - np.logaddexp(0, eta)).sum()
        return -(loglik + 0.5 * np.linalg.slogdet(design.T @ (design * w[:, None]))[1])

    beta = minimize(penalised, np.zeros(2), method="Nelder-Mead",
                    options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000}).x
    return float(centre - spread * beta[0] / beta[1]), float(spread / beta[1])


def transition_fits(grid: pd.DataFrame, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per n, the logistic fit of coupled share against temperature: midpoint (where half the pairs couple),
    scale and the 10-90% width 2 ln(9) scale, with percentile bootstrap intervals from resampling pairs
    (a pair keeps its outcomes at every temperature; Efron and Tibshirani 1993).
    The bootstrap draws are kept in .attrs["boot"] (columns n, replicate, midpoint, scale)."""
    n_boot = check_count(n_boot, "n_boot", 1)
    if not {"n", "temperature", "pair", "coupled"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, pair, coupled)")
    rng, rows, boots = np.random.default_rng(seed), [], []
    alpha = (1 - level) / 2
    for n, sub in grid.groupby("n"):
        pairs = np.sort(sub.pair.unique())
        by_pair = {p: cell for p, cell in sub.groupby("pair")}
        midpoint, scale = logistic_fit(sub.temperature, sub.coupled.astype(float))
        draws = []
        for replicate in range(n_boot):
            resampled = pd.concat([by_pair[p] for p in rng.choice(pairs, len(pairs))])
            draws.append((n, replicate, *logistic_fit(resampled.temperature, resampled.coupled.astype(float))))
        draws = pd.DataFrame(draws, columns=["n", "replicate", "midpoint", "scale"])
        boots.append(draws)
        row = {"n": n, "pairs": len(pairs), "midpoint": midpoint, "scale": scale, "width": 2 * math.log(9) * scale}
        for name in ("midpoint", "scale"):
            low, high = np.nanquantile(draws[name], [alpha, 1 - alpha]) if draws[name].notna().any() else (
                math.nan, math.nan)
            row[f"{name}_low"], row[f"{name}_high"] = low, high
        row["width_low"], row["width_high"] = 2 * math.log(9) * row["scale_low"], 2 * math.log(9) * row["scale_high"]
        row["boot_undefined"] = int(draws.midpoint.isna().sum())
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["boot"] = pd.concat(boots, ignore_index=True)
    return table


def hitting_times(distances, steps, radius: float) -> torch.Tensor:
    """T_R = first recorded step with d(x_t, x_0) >= radius per chain (protocol 2, Appendix B.1); -1 if never.

    distances [B, R] as from trajectory_distances, steps [R] the recorded step numbers."""
    distances, steps = torch.as_tensor(distances), torch.as_tensor(steps)
    if distances.dim() != 2 or steps.shape != (distances.shape[1],):
        raise ValueError(f"distances must be [B, R] and steps [R], got {tuple(distances.shape)} and "
                         f"{tuple(steps.shape)}")
    if not isinstance(radius, (int, float)) or not math.isfinite(radius):
        raise ValueError(f"radius must be a finite number, got {radius!r}")
    reached = distances >= radius
    first = reached.int().argmax(1)
    return torch.where(reached.any(1), steps.long()[first], -1)


SCALING_FORMS = {"n log n": lambda n: n * np.log(n), "n": lambda n: n * 1.0, "n^2": lambda n: n**2.0}


def scaling_fits(n, times, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Fit median hitting time T(n) = C f(n) for f in n log n, n, n^2 (Fig. 3b), by least squares on
    log T, so log C is the mean of log T - log f(n) over lengths. Ranked by AIC (one parameter each, so by
    the residual sum of squares), with the leave-one-length-out error in log T beside it. Chains that never
    hit count as infinite; a length whose median is infinite is left out. C's interval: percentile bootstrap
    over chains within each length. Also a free power law c n^beta (two parameters) for reference."""
    n, times = np.asarray(n, dtype=float), np.asarray(times, dtype=float)
    if n.shape != times.shape or n.ndim != 1 or (n < 2).any():
        raise ValueError("n and times must be equal-length 1-d arrays with every n >= 2")
    times = np.where(times >= 0, times, np.inf)
    lengths = np.unique(n)

    def medians(t_by_n):
        return np.array([np.quantile(t, 0.5, method="inverted_cdf") for t in t_by_n])

    groups = [times[n == m] for m in lengths]
    med = medians(groups)
    keep = np.isfinite(med) & (med > 0)
    if keep.sum() < 3:  # too few lengths hit within the budget to tell the forms apart: an all-NaN table
        table = pd.DataFrame({"form": list(SCALING_FORMS), "C": math.nan, "C_low": math.nan, "C_high": math.nan,
                              "rss_log": math.nan, "aic": math.nan, "loo_mse_log": math.nan,
                              "lengths": int(keep.sum()), "best_aic": False})
        table.attrs["power_law"] = {"beta": math.nan, "c": math.nan}
        table.attrs["medians"] = pd.DataFrame({"n": lengths, "median_time": med, "used": keep})
        return table
    x, logt = lengths[keep], np.log(med[keep])
    rng, rows = np.random.default_rng(seed), []
    boot_groups = [[rng.choice(g, len(g)) for g in groups] for _ in range(check_count(n_boot, "n_boot", 1))]
    boot_meds = np.array([medians(b)[keep] for b in boot_groups])
    alpha = (1 - level) / 2
    m = len(x)
    for form, f in SCALING_FORMS.items():
        resid = logt - np.log(f(x))
        log_c = resid.mean()
        rss = ((resid - log_c) ** 2).sum()
        loo = np.mean([(resid[k] - np.delete(resid, k).mean()) ** 2 for k in range(m)])
        boot_c = np.exp(np.nanmean(np.log(boot_meds) - np.log(f(x)), 1))
        boot_c = boot_c[np.isfinite(boot_c)]
        low, high = np.quantile(boot_c, [alpha, 1 - alpha]) if len(boot_c) else (math.nan, math.nan)
        rows.append({"form": form, "C": math.exp(log_c), "C_low": low, "C_high": high, "rss_log": rss,
                     "aic": m * math.log(max(rss, 1e-300) / m) + 2, "loo_mse_log": loo, "lengths": m})
    table = pd.DataFrame(rows)
    table["best_aic"] = table.aic == table.aic.min()
    beta, log_c = np.polyfit(np.log(x), logt, 1)
    table.attrs["power_law"] = {"beta": float(beta), "c": float(math.exp(log_c))}
    table.attrs["medians"] = pd.DataFrame({"n": lengths, "median_time": med, "used": keep})
    return table


class TemperedConditionals:
    """`cond` with one temperature per batch row: log_scores returns s / temperatures[b], so that one
    `glauber` call at temperature 1 runs chains at many temperatures in one forward (rows keep their order)."""

    def __init__(self, cond: Conditionals, temperatures):
        self.temperatures = pair_temperatures(temperatures, len(temperatures))
        self.cond = cond
        self.vocab_size, self.allowed = cond.vocab_size, cond.allowed
        self.device = getattr(cond, "device", cond.allowed.device)
        self.max_sites = getattr(cond, "max_sites", None)
        self.name_or_path = f"{getattr(cond, 'name_or_path', type(cond).__name__)} (tempered)"

    def log_scores(self, tokens, positions):
        if len(tokens) != len(self.temperatures):
            raise ValueError(f"TemperedConditionals has {len(self.temperatures)} temperatures, got a batch of "
                             f"{len(tokens)}")
        scores = self.cond.log_scores(tokens, positions)
        scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
        return scores / self.temperatures.to(scores.device, scores.dtype).unsqueeze(1)


def multi_temperature_glauber(cond: Conditionals, x0, temperatures, steps: int, *, seed: int = 0,
                              record_every: int = 1, progress: bool = True) -> tuple[Trajectory, pd.DataFrame]:
    """Chains from every start x0[c] at every temperature in one batched `glauber` run: row t * C + c
    runs from x0[c] at temperatures[t]. Returns the trajectory and a table of (row, temperature, start)."""
    x = check_tokens(cond, x0, "x0")
    taus = torch.tensor(check_temperature(temperatures, many=True), dtype=torch.float64)
    starts = len(x)
    tempered = TemperedConditionals(cond, taus.repeat_interleave(starts))
    trajectory = glauber(tempered, x.repeat(len(taus), 1), steps, 1.0, seed=seed, record_every=record_every,
                         progress=progress)
    rows = pd.DataFrame({"row": np.arange(len(taus) * starts), "temperature": taus.repeat_interleave(starts).numpy(),
                         "start": np.tile(np.arange(starts), len(taus))})
    return trajectory, rows


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


def convergence_diagnostics(distances, burn_in: float = 0.5) -> dict:
    """ArviZ split R-hat, bulk and tail ESS of distance traces [chains, R] after dropping the first
    `burn_in` share of records (Vehtari et al. 2021). R-hat near 1 says the chains forgot their starts."""
    import arviz

    draws = np.asarray(torch.as_tensor(distances).double())
    if draws.ndim != 2 or draws.shape[0] < 2 or not 0 <= burn_in < 1:
        raise ValueError(f"need traces [chains >= 2, R] and 0 <= burn_in < 1, got {draws.shape} and {burn_in}")
    kept = draws[:, int(burn_in * draws.shape[1]):]
    if kept.shape[1] < 4:
        raise ValueError(f"only {kept.shape[1]} records left after burn-in; need at least 4")
    return {"chains": kept.shape[0], "draws": kept.shape[1], "rhat": float(arviz.rhat(kept)),
            "ess_bulk": float(arviz.ess(kept, method="bulk")), "ess_tail": float(arviz.ess(kept, method="tail"))}


def chain_excerpts(cond: MaskedLMConditionals, trajectory: Trajectory, labels, count: int = 4) -> pd.DataFrame:
    """Text of each chain of a trajectory at `count` evenly spaced records: one column per chain (labels)."""
    if len(labels) != trajectory.tokens.shape[0]:
        raise ValueError(f"need one label per chain ({trajectory.tokens.shape[0]}), got {len(labels)}")
    picks = np.unique(np.linspace(0, len(trajectory.steps) - 1, check_count(count, "count", 1)).round().astype(int))
    return pd.DataFrame({label: cond.decode_batch(trajectory.tokens[b, picks]) for b, label in enumerate(labels)},
                        index=[f"step {int(trajectory.steps[k])}" for k in picks])
