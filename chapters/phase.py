"""Chapter 3: the temperature-length phase diagram (section 6.1, Figs. 2, 3, 7).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

import book_tools as bt
import verdicts as vd
from book_tools import share_intervals
from glauber_core import (
    Conditionals,
    MaskedLMConditionals,
    TemperedConditionals,
    Trajectory,
    WindowConditionals,
    alpha_from_influence,
    check_count,
    check_temperature,
    check_tokens,
    coupling_times,
    free_sites,
    glauber,
    influence_candidates,
    influence_coefficients,
    is_protein,
    seed_passages,
    trajectory_distances,
)

# Each profile fixes every size of the chapter. `paper` follows the paper item by item: Fig. 2's 10^4-step
# coupling budget; Fig. 3a's T = 10^4 steps at tau = 1 with 100 trials per length; Fig. 3b's tau = 1.4, 50 trials
# per length, a 1,000-step cutoff and R = 1; Fig. 7's 100 chains, a 5,000-step cutoff and embeddings every 5
# steps. One batched drift run per length serves all three drift protocols: each protocol reads its own chains
# (the first `*_chains` starts) and its own cutoff (the records up to `*_steps`) from it.
SETTINGS = {
    "smoke": dict(
        grid_lengths=[6, 10],
        grid_temperatures=[1.0, 2.0, 4.0],
        pairs=3,
        budget=40,
        drift_lengths=[6, 8, 10],
        drift_temperatures=[0.3, 1.0, 1.4, 4.0],
        drift_chains=3,
        drift_steps=40,
        record_every=4,
        saturation_tau=1.0,
        saturation_steps=40,
        saturation_chains=3,
        hit_tau=1.4,
        hit_steps=40,
        hit_chains=3,
        hit_radius=0.7,
        crossover_steps=40,
        crossover_chains=3,
        alpha_length=6,
        alpha_contexts=2,
        top_k=2,
        regime_steps=20,
        n_boot=20,
        passages="bbc",
    ),
    "quick": dict(
        grid_lengths=[8, 24],
        grid_temperatures=[1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0],
        pairs=6,
        budget=400,
        drift_lengths=[8, 12, 16, 24],
        drift_temperatures=[0.3, 1.0, 1.4, 2.5],
        drift_chains=6,
        drift_steps=300,
        record_every=4,
        saturation_tau=1.0,
        saturation_steps=300,
        saturation_chains=6,
        hit_tau=1.4,
        hit_steps=300,
        hit_chains=6,
        hit_radius=0.7,
        crossover_steps=300,
        crossover_chains=6,
        alpha_length=12,
        alpha_contexts=6,
        top_k=3,
        regime_steps=200,
        n_boot=200,
        passages="bbc",
    ),
    "paper": dict(
        grid_lengths=[8, 16, 20, 32, 48, 64],
        grid_temperatures=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0],
        pairs=100,
        budget=10_000,
        drift_lengths=[8, 12, 16, 20, 24, 32, 48, 64],
        drift_temperatures=[0.5, 1.0, 1.4, 2.0, 3.0],
        drift_chains=100,
        drift_steps=10_000,
        record_every=5,
        saturation_tau=1.0,
        saturation_steps=10_000,
        saturation_chains=100,
        hit_tau=1.4,
        hit_steps=1_000,
        hit_chains=50,
        hit_radius=1.0,
        crossover_steps=5_000,
        crossover_chains=100,
        alpha_length=20,
        alpha_contexts=16,
        top_k=8,
        regime_steps=10_000,
        n_boot=1000,
        passages="ms_marco",
    ),
}


# A protein MLM (AntiBERTy, `glauber_core.is_protein`): full-length coupled chains to coalescence do not fit on two
# cores (about 20 chain-steps/s at n = 24), so every coupling and drift run uses `n` free sites inside a frozen
# human germline context of `context_length` residues; the number of free sites plays the role of n, and the
# distance to the start is the Hamming share of free sites that differ from it (no sentence embedder).
PROTEIN_SETTINGS = {
    "smoke": dict(
        context_length=16,
        window_contexts=2,
        grid_lengths=[2, 3],
        grid_temperatures=[1.0, 4.0],
        pairs=2,
        budget=20,
        drift_lengths=[2, 3, 4],
        drift_temperatures=[1.0, 2.5],
        drift_chains=2,
        drift_steps=12,
        record_every=2,
        saturation_tau=1.0,
        saturation_steps=12,
        saturation_chains=2,
        hit_tau=2.5,
        hit_steps=12,
        hit_chains=2,
        hit_radius=1.0,
        crossover_steps=12,
        crossover_chains=2,
        alpha_length=2,
        alpha_contexts=2,
        top_k=2,
        regime_steps=4,
        n_boot=20,
        passages="germline",
    ),
    "quick": dict(
        context_length=24,
        window_contexts=2,
        grid_lengths=[2, 4, 6],
        grid_temperatures=[0.5, 1.0, 2.0, 4.0],
        pairs=4,
        budget=100,
        drift_lengths=[2, 3, 4, 6],
        drift_temperatures=[0.5, 1.0, 2.5],
        drift_chains=4,
        drift_steps=60,
        record_every=2,
        saturation_tau=1.0,
        saturation_steps=60,
        saturation_chains=4,
        hit_tau=2.5,
        hit_steps=60,
        hit_chains=4,
        hit_radius=1.0,
        crossover_steps=60,
        crossover_chains=4,
        alpha_length=4,
        alpha_contexts=4,
        top_k=3,
        regime_steps=20,
        n_boot=200,
        passages="germline",
    ),
    "paper": dict(
        context_length=24,
        window_contexts=4,
        grid_lengths=[2, 4, 6, 8, 12],
        grid_temperatures=[0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0],
        pairs=100,
        budget=10_000,
        drift_lengths=[2, 3, 4, 6, 8, 12],
        drift_temperatures=[0.5, 1.0, 1.5, 2.5],
        drift_chains=100,
        drift_steps=5_000,
        record_every=5,
        saturation_tau=1.0,
        saturation_steps=5_000,
        saturation_chains=100,
        hit_tau=2.5,
        hit_steps=1_000,
        hit_chains=50,
        hit_radius=1.0,
        crossover_steps=5_000,
        crossover_chains=100,
        alpha_length=6,
        alpha_contexts=16,
        top_k=4,
        regime_steps=1_000,
        n_boot=1000,
        passages="germline",
    ),
}


def settings(profile: str, cond=None, **overrides) -> SimpleNamespace:
    """The chapter's settings at `profile`: SETTINGS, or PROTEIN_SETTINGS for a protein MLM (`glauber_core.is_protein`),
    each override that is not None, 0, "" or [] in place of the profile's value (bt.profile_settings), and what
    follows from them: `protein`; `lengths`, the sorted coupling-grid lengths, with `small` and `large` their
    ends and `near` the one nearest the paper's seed length (where Fig. 2's boundary is read, section 6.1);
    `drift_taus`, every temperature of the shared drift run (the drift temperatures and those of Figs. 3a, 3b)."""
    protein = is_protein(cond)
    cfg = bt.profile_settings(profile, PROTEIN_SETTINGS if protein else SETTINGS, **overrides)
    lengths = sorted(cfg.grid_lengths)
    return SimpleNamespace(
        **vars(cfg),
        protein=protein,
        lengths=lengths,
        small=lengths[0],
        large=lengths[-1],
        near=min(lengths, key=lambda n: abs(n - PAPER_SEED_LENGTH)),
        drift_taus=sorted({*cfg.drift_temperatures, cfg.saturation_tau, cfg.hit_tau}),
    )


def window_sites(context_length: int, free: int) -> torch.Tensor:
    """`free` sites spread evenly over a context of `context_length` residues, never its two ends:
    LongTensor[free], the free sites of a frozen-context window."""
    context_length, free = check_count(context_length, "context_length", 3), check_count(free, "free", 1)
    if free > context_length - 2:
        raise ValueError(f"{free} free sites do not fit inside a context of {context_length} (ends kept)")
    return torch.linspace(0, context_length - 1, free + 2)[1:-1].round().long()


def window_mask(context_length: int, free: int) -> torch.Tensor:
    """`frozen` for glauber.glauber: BoolTensor[context_length], True at every site except the window_sites."""
    mask = torch.ones(context_length, dtype=torch.bool)
    mask[window_sites(context_length, free)] = False
    return mask


def window_coupling_grid(
    cond: Conditionals,
    contexts,
    free: int,
    temperatures,
    pairs: int,
    max_steps: int,
    *,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Fig. 2 on a protein MLM: coupling times with `free` free sites (window_sites) inside each frozen context
    (contexts [C, n], germline V genes). Per context, `pairs` pairs: one chain starts from the germline's own
    residues at the free sites, the other from uniformly drawn residues (seeded); all temperatures share one
    batch (coupling_grid on WindowConditionals, seed + c). Columns as coupling_grid, with n = `free` (the number
    of free sites plays the role of n), `pair` numbered across contexts, `context` and `context_length`."""
    contexts = check_tokens(cond, contexts, "contexts")
    pairs = check_count(pairs, "pairs", 1)
    sites = window_sites(contexts.shape[1], free)
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    generator, frames = torch.Generator().manual_seed(seed), []
    for c, context in enumerate(contexts):
        window = WindowConditionals(cond, context, sites)
        x0 = context[sites].repeat(pairs, 1)
        y0 = allowed[torch.randint(len(allowed), (pairs, len(sites)), generator=generator)]
        frame = coupling_grid(window, x0, y0, temperatures, max_steps, seed=seed + c, progress=progress)
        frames.append(frame.assign(pair=frame.pair + c * pairs, context=c, context_length=contexts.shape[1]))
    return pd.concat(frames, ignore_index=True)


def hamming_distances(trajectory: Trajectory, frozen=0) -> torch.Tensor:
    """d(x_t, x_0) for a protein MLM: the share of free sites whose residue differs from the start, for every
    recorded state of every chain, FloatTensor[B, R] in [0, 1] (0 at record 0). `frozen` as for glauber.glauber."""
    tokens = torch.as_tensor(trajectory.tokens)
    if tokens.dim() != 3:
        raise ValueError(f"trajectory.tokens must be [B, R, n], got {tuple(tokens.shape)}")
    sites = free_sites(frozen, tokens.shape[2])
    moved = tokens[:, :, sites] != tokens[:, :1, sites]
    return moved.float().mean(-1)


def drift_starts(cond, n: int, cfg, seed: int = 0):
    """(Passages, frozen) of one drift length: a text model's `drift_chains` passages of n tokens, nothing
    frozen; a protein MLM's germline contexts of `context_length` residues with n free sites (window_mask)."""
    if is_protein(cond):
        starts = seed_passages(cond, cfg.context_length, cfg.drift_chains, seed=seed, passages=cfg.passages)
        return starts, window_mask(cfg.context_length, n)
    return seed_passages(cond, n, cfg.drift_chains, seed=seed, passages=cfg.passages), 0


def drift_distances(cond, embedder, trajectory: Trajectory, frozen=0) -> torch.Tensor:
    """d(x_t, x_0): the embedding distance of glauber.trajectory_distances for a text model, the Hamming share of
    free sites (hamming_distances) for a protein MLM (embedder None)."""
    if is_protein(cond):
        return hamming_distances(trajectory, frozen)
    return trajectory_distances(cond, embedder, trajectory)


def length_label(protein: bool) -> str:
    """The axis label of the chapter's n: tokens of a text model, free sites of a protein MLM's window."""
    return "free sites $n$ (frozen germline)" if protein else "sequence length $n$ (tokens)"


def length_grid(cond, n: int, cfg, seed: int = 0) -> pd.DataFrame:
    """The coupling grid of one length n: a text model's `pairs` pairs of held-out passages of n tokens
    (coupling_grid); a protein MLM's n free sites in `window_contexts` frozen germline contexts of
    `context_length` residues (window_coupling_grid, `pairs` pairs per cell in all)."""
    if is_protein(cond):
        per_context, rest = divmod(cfg.pairs, cfg.window_contexts)
        if rest or not per_context:
            raise ValueError(
                f"pairs ({cfg.pairs}) must be a positive multiple of window_contexts ({cfg.window_contexts})"
            )
        contexts = seed_passages(cond, cfg.context_length, cfg.window_contexts, seed=seed, passages=cfg.passages)
        return window_coupling_grid(
            cond, contexts.tokens, n, cfg.grid_temperatures, per_context, cfg.budget, seed=seed, progress=False
        )
    starts = seed_passages(cond, n, 2 * cfg.pairs, seed=seed, passages=cfg.passages)
    return coupling_grid(
        cond,
        starts.tokens[: cfg.pairs],
        starts.tokens[cfg.pairs :],
        cfg.grid_temperatures,
        cfg.budget,
        seed=seed,
        progress=False,
    )


def model_note(cond, cfg) -> str:
    """One paragraph for the page: what this run's model measures its chains with, and on a protein MLM what
    replaces each English step."""
    if not is_protein(cond):
        return (
            "an English masked LM: seeds are held-out BBC News paragraphs and d(x_t, x_0) is the "
            "sentence-embedding distance of all-MiniLM-L6-v2, as described below."
        )
    return (
        f"a protein masked LM ({getattr(cond, 'name_or_path', 'protein MLM')}), whose 20 amino acids are all "
        "proposable. Full-length coupled chains to coalescence do not fit on two CPU cores (about 20 "
        "chain-steps per second at 24 residues), so every coupling and drift chain here updates only n free "
        f"sites spread evenly inside a frozen human IMGT germline V gene of {cfg.context_length} residues "
        f"(the first {cfg.context_length} residues of FR1 onwards), and the number of free sites plays the "
        "role of the length n. Read 'passage' as 'germline context'. In the coupling grid one chain starts "
        "from the germline's own residues at the free sites and the other from uniformly drawn residues. "
        "No sentence embedder applies to a protein: d(x_t, x_0) is the Hamming distance to the start, the "
        "share of free sites whose residue differs from the germline's (0 at the start, at most 1), so "
        "R = 1 means every free site has changed (the coupon-collector case of n log n). Fig. 3a's "
        "saturation claim is left out of the claims (not run here): at a fixed T the Hamming share falls "
        "with n by construction, so it has no protein meaning; its table is still shown. The influence sums "
        "of section 6 are those of the window chain (c_ij over the free sites only). Each claim row says "
        "in its quantity that it was measured this way."
    )


PAPER_SEED_LENGTH = 20  # the paper's seed text length in tokens (appendix B.2): where Fig. 2's boundary is read


def crossover_radii() -> list[float]:
    """Fig. 7's thresholds, read from the protocol column of paper_claims.csv."""
    return [float(r) for r in bt.paper_protocol("crossover_fractions")["radius"].split()]


def protocol_slice(rows: pd.DataFrame, steps: torch.Tensor, chains: int, cutoff: int):
    """(row mask [B], record mask [R]) of one protocol within a shared drift run: the first `chains` starts
    at each temperature, and the records at or before step `cutoff`."""
    return (torch.as_tensor(rows.start.to_numpy() < chains), torch.as_tensor(steps) <= cutoff)


def protocol_text(claim: str) -> str:
    """The paper's protocol of a claim in words, read from paper_claims.csv (never typed in the chapter)."""
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in bt.paper_protocol(claim).items())


def temperature_seeds(seed: int, temperatures, count: int) -> list[int]:
    """Per-chain seeds of a batch that runs `count` chains at each temperature (row t * count + c): chain c at
    temperature tau gets the c-th seed of a stream keyed by (seed, tau in millionths), whatever else is in the grid."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    keyed = [round(tau * 1e6) for tau in check_temperature(temperatures, many=True)]
    if len(set(keyed)) < len(keyed):
        raise ValueError(
            f"temperatures must differ by at least 1e-6 (equal ones would run identical chains), "
            f"got {list(temperatures)}"
        )
    keys = [np.random.SeedSequence([int(seed) % 2**64, key]).generate_state(count, np.uint64) for key in keyed]
    return [int(key) & ((1 << 63) - 1) for block in keys for key in block]


def coupling_grid(
    cond: Conditionals, x0, y0, temperatures, max_steps: int, *, seed: int = 0, progress: bool = True
) -> pd.DataFrame:
    """Coupling times of every pair (x0[p], y0[p]) at every temperature, all in one batch (Fig. 2).

    Pair p at temperatures[t] is batch row t * P + p with seed temperature_seeds(seed, temperatures, P)[t * P + p],
    so a cell's times do not depend on the grid's other temperatures.
    Returns one row per (temperature, pair): n, temperature, pair, time (-1: not within max_steps), coupled.
    """
    temperatures = torch.tensor(check_temperature(temperatures, many=True), dtype=torch.float64)
    x, y = check_tokens(cond, x0, "x0"), check_tokens(cond, y0, "y0")
    pairs, n = x.shape
    times = coupling_times(
        cond,
        x.repeat(len(temperatures), 1),
        y.repeat(len(temperatures), 1),
        max_steps,
        temperatures.repeat_interleave(pairs),
        seed=temperature_seeds(seed, temperatures.tolist(), pairs),
        progress=progress,
    )
    return pd.DataFrame(
        {
            "n": n,
            "temperature": temperatures.repeat_interleave(pairs).numpy(),
            "pair": np.tile(np.arange(pairs), len(temperatures)),
            "time": times.numpy(),
            "coupled": times.numpy() >= 0,
        }
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


def logistic_fits(x, y, max_iter: int = 100, tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """logistic_fit of many data sets at once: x, y [R, m] (row r one data set of m 0/1 outcomes), returning
    (midpoint [R], scale [R]), NaN where a row's outcomes (or x) are all the same.

    Firth's penalised likelihood (Jeffreys prior) by Newton's method on the modified score
    X'(y - p + h (1/2 - p)), h the hat values (Firth 1993; Heinze and Schemper 2002), with steps capped at 5
    and halved until the penalised log-likelihood does not fall; all rows are solved together (vectorised)."""
    x, y = np.atleast_2d(np.asarray(x, dtype=float)), np.atleast_2d(np.asarray(y, dtype=float))
    if x.shape != y.shape or x.ndim != 2 or x.shape[1] < 2 or not np.isin(y, (0, 1)).all() or not np.isfinite(x).all():
        raise ValueError("logistic_fit needs equal-length 1-d x (finite) and y (0/1 outcomes), at least 2")
    rows = len(x)
    midpoint, scale = np.full(rows, math.nan), np.full(rows, math.nan)
    ok = (y.min(1) != y.max(1)) & (x.min(1) != x.max(1))
    if not ok.any():
        return midpoint, scale
    x, y = x[ok], y[ok]
    centre, spread = x.mean(1, keepdims=True), x.std(1, keepdims=True)
    u = (x - centre) / spread

    def parts(beta):
        eta = beta[:, :1] + beta[:, 1:] * u
        p = 1 / (1 + np.exp(-eta))
        w = np.clip(p * (1 - p), 1e-300, None)
        info = np.stack([w.sum(1), (w * u).sum(1), (w * u * u).sum(1)], 1)  # I = [[a, b], [b, c]]
        det = info[:, 0] * info[:, 2] - info[:, 1] ** 2
        loglik = (y * eta - np.logaddexp(0, eta)).sum(1) + 0.5 * np.log(np.clip(det, 1e-300, None))
        return eta, p, w, info, det, loglik

    beta = np.zeros((len(x), 2))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        _, p, w, info, det, loglik = parts(beta)
        active = np.ones(len(x), dtype=bool)
        for _ in range(max_iter):
            a, b, c = info[:, 0:1], info[:, 1:2], info[:, 2:3]
            hat = w * (c - 2 * b * u + a * u * u) / det[:, None]  # w_i x_i' I^-1 x_i
            resid = y - p + hat * (0.5 - p)
            score = np.stack([resid.sum(1), (resid * u).sum(1)], 1)
            step = (
                np.stack(
                    [c[:, 0] * score[:, 0] - b[:, 0] * score[:, 1], a[:, 0] * score[:, 1] - b[:, 0] * score[:, 0]], 1
                )
                / det[:, None]
            )
            step *= np.minimum(1.0, 5.0 / np.clip(np.abs(step).max(1, keepdims=True), 1e-300, None))
            step[~active] = 0
            for _ in range(30):  # halve a step until the penalised log-likelihood does not fall
                trial = parts(beta + step)
                worse = active & ~(trial[5] >= loglik - 1e-12)
                if not worse.any():
                    break
                step[worse] /= 2
            beta = beta + step
            _, p, w, info, det, loglik = parts(beta)
            active &= np.abs(step).max(1) > tol
            if not active.any():
                break
    with np.errstate(divide="ignore", invalid="ignore"):
        midpoint[ok] = centre[:, 0] - spread[:, 0] * beta[:, 0] / beta[:, 1]
        scale[ok] = spread[:, 0] / beta[:, 1]
    return midpoint, scale


def logistic_fit(x, y) -> tuple[float, float]:
    """(midpoint, scale) of P(y = 1) = 1 / (1 + exp(-(x - midpoint) / scale)) from 0/1 outcomes.

    Firth's penalised likelihood (Jeffreys prior) keeps the fit finite when the outcomes are perfectly
    separated; (nan, nan) when every outcome is the same, as no transition lies inside the data. Solved by
    Newton's method (logistic_fits)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2 or not np.isin(y, (0, 1)).all() or not np.isfinite(x).all():
        raise ValueError("logistic_fit needs equal-length 1-d x (finite) and y (0/1 outcomes), at least 2")
    midpoint, scale = logistic_fits(x[None], y[None])
    return float(midpoint[0]), float(scale[0])


def _rising(midpoint, scale):
    """(midpoint, scale) with NaN where the fitted share falls with temperature (scale < 0): a slow-to-fast
    transition needs coupling to rise with tau, so a falling fit has no boundary."""
    falling = scale < 0
    return np.where(falling, math.nan, midpoint), np.where(falling, math.nan, scale)


def _rising_fit(cells: pd.DataFrame) -> tuple[float, float]:
    """logistic_fit of coupled against temperature, (nan, nan) when the fitted share falls with temperature."""
    midpoint, scale = _rising(
        *logistic_fits(cells.temperature.to_numpy()[None], cells.coupled.to_numpy(dtype=float)[None])
    )
    return float(midpoint[0]), float(scale[0])


def _bootstrap_fits(temps: list, coupled: list, picks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rising fits of every resample: picks [R, P] indexes the pairs (each with its temperatures and 0/1
    outcomes); a resample without a transition gets midpoint -inf (all met) or +inf (none met), no scale."""
    if len({len(t) for t in temps}) == 1:  # every pair ran the same cells: one rectangular batch
        x, y = np.stack(temps)[picks].reshape(len(picks), -1), np.stack(coupled)[picks].reshape(len(picks), -1)
        midpoint, scale = _rising(*logistic_fits(x, y))
        flat = (y.min(1) == y.max(1)) & (x.min(1) != x.max(1))
        midpoint[flat] = np.where(y[flat, 0] == 1, -math.inf, math.inf)
        scale[flat] = math.nan
        return midpoint, scale
    fits = [
        _bootstrap_fits([temps[p] for p in pick], [coupled[p] for p in pick], np.arange(len(pick))[None])
        for pick in picks
    ]
    return np.concatenate([f[0] for f in fits]), np.concatenate([f[1] for f in fits])


def transition_fits(grid: pd.DataFrame, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per n, the logistic fit of coupled share against temperature: midpoint (where half the pairs couple),
    scale and the 10-90% width 2 ln(9) scale, with percentile bootstrap intervals from resampling pairs
    (a pair keeps its outcomes at every temperature; Efron and Tibshirani 1993). A resample without a
    transition has midpoint -inf (every pair met: the boundary lies below the grid) or +inf (none met) and
    no scale; the midpoint's interval may then have an infinite end. A fit whose share falls with temperature
    has no boundary (NaN). All resamples of one length are fitted in one vectorised solve (logistic_fits), drawn
    from a stream seeded by (seed, n), so a length's interval does not depend on which other lengths ran.
    The bootstrap draws are kept in .attrs["boot"] (columns n, replicate, midpoint, scale)."""
    n_boot = check_count(n_boot, "n_boot", 1)
    if not {"n", "temperature", "pair", "coupled"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, pair, coupled)")
    rows, boots = [], []
    for n, sub in grid.groupby("n"):
        rng = np.random.default_rng([seed, int(n)])  # a length's resamples do not depend on the other lengths
        pairs = np.sort(sub.pair.unique())
        cells = dict(list(sub.groupby("pair")))
        temps = [cells[p].temperature.to_numpy(dtype=float) for p in pairs]
        coupled = [cells[p].coupled.to_numpy(dtype=float) for p in pairs]
        midpoint, scale = _rising_fit(sub)
        picks = np.stack([rng.choice(len(pairs), len(pairs)) for _ in range(n_boot)])  # the draws of rng.choice(pairs)
        boot_mid, boot_scale = _bootstrap_fits(temps, coupled, picks)
        draws = pd.DataFrame({"n": n, "replicate": np.arange(n_boot), "midpoint": boot_mid, "scale": boot_scale})
        boots.append(draws)
        row = {"n": n, "pairs": len(pairs), "midpoint": midpoint, "scale": scale, "width": 2 * math.log(9) * scale}
        for name in ("midpoint", "scale"):
            row[f"{name}_low"], row[f"{name}_high"], _ = draws_interval(draws[name], level, max_undefined=1.0)
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
        raise ValueError(
            f"distances must be [B, R] and steps [R], got {tuple(distances.shape)} and {tuple(steps.shape)}"
        )
    if not isinstance(radius, (int, float)) or not math.isfinite(radius):
        raise ValueError(f"radius must be a finite number, got {radius!r}")
    reached = distances >= radius
    first = reached.int().argmax(1)
    return torch.where(reached.any(1), steps.long()[first], -1)


SCALING_FORMS = {"n log n": lambda n: n * np.log(n), "n": lambda n: n * 1.0, "n^2": lambda n: n**2.0}


def scaling_fits(
    n, times, n_boot: int = 200, seed: int = 0, level: float = 0.95, forms: dict | None = None
) -> pd.DataFrame:
    """Fit median hitting time T(n) = C f(n) for f in n log n, n, n^2 (Fig. 3b; or the given `forms`), by least
    squares on log T, so log C is the mean of log T - log f(n) over lengths. Ranked by AIC (one parameter each, so by
    the residual sum of squares), with the leave-one-length-out error in log T beside it. Chains that never
    hit count as infinite; a length whose median is infinite is left out. C's interval: percentile bootstrap
    over chains within each length. Also a free power law c n^beta (two parameters) for reference."""
    n, times = np.asarray(n, dtype=float), np.asarray(times, dtype=float)
    if n.shape != times.shape or n.ndim != 1 or (n < 2).any():
        raise ValueError("n and times must be equal-length 1-d arrays with every n >= 2")
    forms = SCALING_FORMS if forms is None else forms
    times = np.where(times >= 0, times, np.inf)
    lengths = np.unique(n)

    def medians(t_by_n):
        return np.array([np.quantile(t, 0.5, method="inverted_cdf") for t in t_by_n])

    groups = [times[n == m] for m in lengths]
    med = medians(groups)
    keep = np.isfinite(med) & (med > 0)
    if keep.sum() < 3:  # too few lengths hit within the budget to tell the forms apart: an all-NaN table
        table = pd.DataFrame(
            {
                "form": list(forms),
                "C": math.nan,
                "C_low": math.nan,
                "C_high": math.nan,
                "rss_log": math.nan,
                "aic": math.nan,
                "loo_mse_log": math.nan,
                "lengths": int(keep.sum()),
                "best_aic": False,
            }
        )
        table.attrs["power_law"] = {"beta": math.nan, "c": math.nan}
        table.attrs["medians"] = pd.DataFrame({"n": lengths, "median_time": med, "used": keep})
        return table
    x, logt = lengths[keep], np.log(med[keep])
    rng, rows = np.random.default_rng(seed), []
    boot_groups = [[rng.choice(g, len(g)) for g in groups] for _ in range(check_count(n_boot, "n_boot", 1))]
    boot_meds = np.array([medians(b)[keep] for b in boot_groups])
    alpha = (1 - level) / 2
    m = len(x)
    for form, f in forms.items():
        resid = logt - np.log(f(x))
        log_c = resid.mean()
        rss = ((resid - log_c) ** 2).sum()
        loo = np.mean([(resid[k] - np.delete(resid, k).mean()) ** 2 for k in range(m)])
        with np.errstate(all="ignore"), warnings.catch_warnings():  # a resample may have no finite median
            warnings.simplefilter("ignore", RuntimeWarning)
            boot_c = np.exp(np.nanmean(np.log(boot_meds) - np.log(f(x)), 1))
        boot_c = boot_c[np.isfinite(boot_c)]
        low, high = np.quantile(boot_c, [alpha, 1 - alpha]) if len(boot_c) else (math.nan, math.nan)
        rows.append(
            {
                "form": form,
                "C": math.exp(log_c),
                "C_low": low,
                "C_high": high,
                "rss_log": rss,
                "aic": m * math.log(max(rss, 1e-300) / m) + 2,
                "loo_mse_log": loo,
                "lengths": m,
            }
        )
    table = pd.DataFrame(rows)
    table["best_aic"] = table.aic == table.aic.min()
    beta, log_c = np.polyfit(np.log(x), logt, 1)
    table.attrs["power_law"] = {"beta": float(beta), "c": float(math.exp(log_c))}
    table.attrs["medians"] = pd.DataFrame({"n": lengths, "median_time": med, "used": keep})
    return table


def multi_temperature_glauber(
    cond: Conditionals,
    x0,
    temperatures,
    steps: int,
    *,
    seed: int = 0,
    record_every: int = 1,
    progress: bool = True,
    frozen=0,
) -> tuple[Trajectory, pd.DataFrame]:
    """Chains from every start x0[c] at every temperature in one batched `glauber` run: row t * C + c
    runs from x0[c] at temperatures[t] with seed temperature_seeds(seed, temperatures, C)[t * C + c] (a chain
    does not depend on the other temperatures); `frozen` as for glauber.glauber (the same fixed sites in every
    chain). Returns the trajectory and a table of (row, temperature, start)."""
    x = check_tokens(cond, x0, "x0")
    taus = torch.tensor(check_temperature(temperatures, many=True), dtype=torch.float64)
    starts = len(x)
    tempered = TemperedConditionals(cond, taus.repeat_interleave(starts))
    trajectory = glauber(
        tempered,
        x.repeat(len(taus), 1),
        steps,
        1.0,
        frozen=frozen,
        seed=temperature_seeds(seed, taus.tolist(), starts),
        record_every=record_every,
        progress=progress,
    )
    rows = pd.DataFrame(
        {
            "row": np.arange(len(taus) * starts),
            "temperature": taus.repeat_interleave(starts).numpy(),
            "start": np.tile(np.arange(starts), len(taus)),
        }
    )
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


def chain_excerpts(cond: MaskedLMConditionals, trajectory: Trajectory, labels, count: int = 4) -> pd.DataFrame:
    """Text of each chain of a trajectory at `count` evenly spaced records: one column per chain (labels)."""
    if len(labels) != trajectory.tokens.shape[0]:
        raise ValueError(f"need one label per chain ({trajectory.tokens.shape[0]}), got {len(labels)}")
    picks = np.unique(np.linspace(0, len(trajectory.steps) - 1, check_count(count, "count", 1)).round().astype(int))
    return pd.DataFrame(
        {label: cond.decode_batch(trajectory.tokens[b, picks]) for b, label in enumerate(labels)},
        index=[f"step {int(trajectory.steps[k])}" for k in picks],
    )


# --------------------------------------------------------------------------------------------
# The chapter's bookkeeping: tables naming their model, NaN-safe intervals, sentences for every case
# --------------------------------------------------------------------------------------------


def draws_interval(draws, level: float = 0.95, max_undefined: float = 0.025) -> tuple[float, float, float]:
    """(low, high, undefined share) of a percentile bootstrap interval from `draws`, NaN-safe: a draw is
    undefined (NaN) when its resample had no transition inside the grid and no side can be told (an infinite
    draw is kept: it orders). When more than
    `max_undefined` of the draws are undefined, one tail of the interval is unknown and (nan, nan) is
    returned; never a numpy warning."""
    draws = np.asarray(draws, dtype=float).reshape(-1)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    defined = draws[~np.isnan(draws)]
    undefined = 1 - len(defined) / len(draws) if len(draws) else 1.0
    if not len(defined) or undefined > max_undefined:
        return math.nan, math.nan, undefined
    low, high = np.quantile(defined, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(low), float(high), undefined


def relative_width(midpoint, scale):
    """scale / midpoint: the transition's width relative to its location, i.e. its width in log tau (the
    slope of the fitted share against log tau at the midpoint is 1 / (4 scale / midpoint)). NaN where the
    midpoint is not positive (no location to be relative to) or the scale is undefined."""
    midpoint, scale = np.asarray(midpoint, dtype=float), np.asarray(scale, dtype=float)
    with np.errstate(all="ignore"):
        return np.where(np.isfinite(midpoint) & (midpoint > 0), scale / midpoint, math.nan)


def compare_lengths(fits: pd.DataFrame, small: int, large: int, level: float = 0.95) -> dict:
    """The boundary shift midpoint(large) - midpoint(small), the width ratio scale(large) / scale(small) and
    the relative width ratio ("relative": of scale / midpoint, the width in log tau; relative_width), each
    with a percentile interval that pairs the bootstrap draws of the two lengths (independent pairs); NaN with
    the share of undefined draws where a length has no transition inside the grid."""
    boot = (
        fits.attrs["boot"]
        .assign(relative=lambda b: relative_width(b.midpoint, b.scale))
        .pivot(index="replicate", columns="n")
    )
    by_n = fits.set_index("n").assign(relative=lambda f: relative_width(f.midpoint, f.scale))
    out = {}
    for name, column, combine in (
        ("shift", "midpoint", np.subtract),
        ("ratio", "scale", np.divide),
        ("relative", "relative", np.divide),
    ):
        with np.errstate(all="ignore"):
            draws = combine(boot[column][large].to_numpy(), boot[column][small].to_numpy())
            estimate = float(combine(by_n[column][large], by_n[column][small]))
        low, high, undefined = draws_interval(draws, level)
        out[name] = estimate if math.isfinite(estimate) else math.nan
        out[f"{name}_low"], out[f"{name}_high"], out[f"{name}_undefined"] = low, high, undefined
    return out


def scaled_budget_grid(grid: pd.DataFrame, budget: int) -> pd.DataFrame:
    """The coupling grid with the budget removed as a cause of the boundary's shift: a pair counts as
    coupled only if it met within budget * n log n / (n_max log n_max) steps, the same allowance per unit of
    the fast-mixing time C n log n at every length (the largest n keeps the whole budget)."""
    large = grid.n.max()
    allowance = budget * grid.n * np.log(grid.n) / (large * math.log(large))
    return grid.assign(coupled=(grid.time >= 0) & (grid.time <= allowance), allowance=allowance.round().astype(int))


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


def coupling_overview(cells: pd.DataFrame, budget: int) -> str:
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


def direction_text(low: float, high: float, null: float, above: str, below: str, between: str) -> str:
    """Which side of `null` an interval lies on, in the words given (or that it has none)."""
    if not bt.finite(low, high):
        return "not estimable in this run"
    return above if low > null else below if high < null else between


# --------------------------------------------------------------------------------------------
# Fig. 3a and Fig. 7: the saturation and crossover rules, and the section 7 comparison
# --------------------------------------------------------------------------------------------


def saturation_trend(n, distances, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> dict:
    """Fig. 3a: the median distance d(x_T, x_0) per length and two slopes across lengths, each with a
    percentile bootstrap interval (chains resampled within each length; Efron and Tibshirani 1993):
    `slope`, of the median d against log n (does d grow with n?), and `exponent`, of log median d against
    log n (is the growth slower than linear, exponent < 1?). The exponent is NaN when a median is 0. NaN
    slopes with fewer than 3 lengths. The medians are in ["medians"] (columns n, median_distance)."""
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
    x = np.log(lengths)

    def slopes(meds):
        with np.errstate(divide="ignore", invalid="ignore"):
            exponent = np.polyfit(x, np.log(meds), 1)[0] if (meds > 0).all() else math.nan
        return np.polyfit(x, meds, 1)[0], exponent

    rng = np.random.default_rng(seed)
    boot = np.array(
        [
            slopes(np.array([np.median(rng.choice(g, len(g))) for g in groups]))
            for _ in range(check_count(n_boot, "n_boot", 1))
        ]
    )
    (slope, exponent), alpha = slopes(medians), (1 - level) / 2
    out |= {"slope": float(slope), "exponent": float(exponent)}
    for k, name in enumerate(("slope", "exponent")):
        draws = boot[:, k]
        low, high = (
            np.quantile(draws, [alpha, 1 - alpha])
            if bt.finite(out[name]) and np.isfinite(draws).all()
            else (math.nan, math.nan)
        )
        out[f"{name}_low"], out[f"{name}_high"] = float(low), float(high)
    return out


def rise_with_temperature(
    peaks, rows: pd.DataFrame, radii, draws: int = 2000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """Fig. 7 per (n, radius): does the share of chains whose distance reached the radius rise with tau?
    One row per length (column n of `rows`, if any) and radius: the chains and hits per temperature, the
    least-squares slope of the share against tau, and its interval from Jeffreys posterior draws of each
    temperature's share (Beta(k + 1/2, m - k + 1/2), honest at 0 of m and m of m: a cell at the ceiling or
    the floor at every temperature gets an interval around 0). peaks [B] (or traces [B, R], maxed over R)."""
    peaks = torch.as_tensor(peaks)
    peaks = np.asarray(peaks.max(1).values if peaks.dim() == 2 else peaks, dtype=float)
    if len(peaks) != len(rows) or "temperature" not in rows:
        raise ValueError(
            f"need one peak per row of a table with a temperature column, got {len(peaks)} and {len(rows)}"
        )
    lengths = rows.n.to_numpy() if "n" in rows else np.zeros(len(rows))
    rng, alpha, out = np.random.default_rng(seed), (1 - level) / 2, []
    for n in np.unique(lengths):
        in_n = lengths == n
        taus = np.unique(rows.temperature[in_n])
        chains = np.array([(in_n & (rows.temperature == t).to_numpy()).sum() for t in taus])
        for radius in radii:
            hits = np.array([(peaks[in_n & (rows.temperature == t).to_numpy()] >= radius).sum() for t in taus])
            if len(taus) < 2:
                slope, low, high = math.nan, math.nan, math.nan
            else:
                shares = rng.beta(hits + 0.5, chains - hits + 0.5, (check_count(draws, "draws", 1), len(taus)))
                centred = taus - taus.mean()
                fit = (shares - shares.mean(1, keepdims=True)) @ centred / (centred**2).sum()
                slope = float((hits / chains - (hits / chains).mean()) @ centred / (centred**2).sum())
                low, high = (float(q) for q in np.quantile(fit, [alpha, 1 - alpha]))
            out.append(
                {
                    "n": n,
                    "radius": radius,
                    "temperatures": " ".join(f"{t:g}" for t in taus),
                    "reached": " ".join(f"{k}/{m}" for k, m in zip(hits, chains)),
                    "slope": slope,
                    "slope_low": low,
                    "slope_high": high,
                }
            )
    return pd.DataFrame(out)


def rise_text(rise: pd.DataFrame) -> str:
    """How many (n, R) parts of rise_with_temperature rise, fall or stay undecided, in words."""
    if rise.empty or rise.slope_low.isna().all():
        return "no part has two temperatures to compare"
    up, down = rise[rise.slope_low > 0], rise[rise.slope_high <= 0]
    text = f"{len(up)} of {len(rise)} parts rise with tau (slope interval above 0), {len(down)} fall or stay flat"
    if len(down):
        text += " (" + ", ".join(f"n = {r.n:g}, R = {r.radius:g}" for r in down.itertuples()) + ")"
    return text + f" and {len(rise) - len(up) - len(down)} are undecided"


def context_alpha(cond: Conditionals, seeds, visited: dict, top_k: int, frozen=None) -> pd.DataFrame:
    """The influence sum alpha per context (chapter 2's estimator, a lower bound from the top-k candidates)
    on the seed passages at every temperature of `visited` and on the states visited at each temperature:
    visited[tau] LongTensor[C, n], context c paired with seed c. Columns temperature, states, context, alpha.
    With `frozen` (a protein MLM's window_mask), alpha is that of the window chain: c_ij over its free sites
    only, each context's frozen sites held (WindowConditionals, one context at a time)."""
    temperatures, rows = list(visited), []
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
                dict(temperature=tau, states=kind, context=c, alpha=a)
                for c, a in enumerate(alpha_from_influence(per_tau).tolist())
            ]
    return pd.DataFrame(rows)


def _window_influence(window, state, top_k: int, temps) -> torch.Tensor:
    return influence_coefficients(window, state, influence_candidates(window, state, top_k), temps)


def paired_difference(before, after, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of before - after over paired contexts with Student's t interval (honest with a handful of
    contexts, where a bootstrap is too narrow); NaN interval with fewer than 2 finite pairs."""
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if before.shape != after.shape or before.ndim != 1:
        raise ValueError(f"need paired 1-d arrays, got {before.shape} and {after.shape}")
    diff = (before - after)[np.isfinite(before - after)]
    if not len(diff):
        return math.nan, math.nan, math.nan
    if len(diff) < 2:
        return float(diff.mean()), math.nan, math.nan
    from scipy.stats import t as student

    half = student.ppf((1 + level) / 2, len(diff) - 1) * diff.std(ddof=1) / math.sqrt(len(diff))
    return float(diff.mean()), float(diff.mean() - half), float(diff.mean() + half)


# --------------------------------------------------------------------------------------------
# Claims rows: claim_rows, and one private helper per claim with the rule stated before the run
# --------------------------------------------------------------------------------------------


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


def alpha_pairs(alpha: pd.DataFrame, tau: float) -> pd.DataFrame:
    """The per-context alpha on the seed passages and on the visited states at temperature tau, paired by
    context (visited chain c started from seed passage c), same candidates and contexts on both sides."""
    at = alpha[alpha.temperature == tau].pivot(index="context", columns="states", values="alpha")
    return at.dropna() if {"seed passages", "visited"} <= set(at.columns) else at.iloc[:0]


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


# --------------------------------------------------------------------------------------------
# What the page shows: the figures (each returns its Figure) and the tables made for reading
# --------------------------------------------------------------------------------------------


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
    """Protocol 1 (Fig. 3a): d(x_T, x_0) at the last record T per n and temperature, mean with a 95% band.
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
        title=f"Protocol 1: distance after T = {last.step.max()} steps",
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


def fits_table(fits: pd.DataFrame):
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


def comparison_table(fixed: dict, budget_free: dict):
    """compare_lengths at the fixed budget and on the n log n budget, for reading: the boundary shift and the
    relative and absolute width ratios, each with its paired-bootstrap 95% interval."""

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


def saturation_table(trend: dict):
    """Fig. 3a's medians for reading: the median d(x_T, x_0) per length (saturation_trend)."""
    medians, column = trend["medians"], "median d(x_T, x_0)"
    return bt.reading_table(
        pd.DataFrame({"n": medians.n.astype(int), column: medians.median_distance}), formats={column: "{:.3f}"}
    )


def scaling_table(scaling: pd.DataFrame):
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


def diagnostics_table(diagnostics: pd.DataFrame, value: str):
    """One convergence diagnostic (`rhat` or `ess_bulk`) per length and temperature, for reading."""
    table = diagnostics.pivot(index="n", columns="temperature", values=value)
    table.columns = [f"tau = {t:g}" for t in table.columns]
    digits = "{:.2f}" if value == "rhat" else "{:.0f}"
    return bt.reading_table(table.reset_index(), formats={c: digits for c in table.columns})


def regimes_table(excerpts: pd.DataFrame):
    """chain_excerpts for reading: one row per temperature, one column per recorded step."""
    return bt.reading_table(excerpts.T.rename_axis("chain").reset_index())


def alpha_means_text(alpha: pd.DataFrame) -> str:
    """The mean alpha per drift temperature, visited states against seed passages, in words."""
    means = alpha.groupby(["temperature", "states"]).alpha.mean().unstack("states")
    return "; ".join(
        f"tau = {t:g}: {row['visited']:.2f} visited vs {row['seed passages']:.2f} seeds" for t, row in means.iterrows()
    )
