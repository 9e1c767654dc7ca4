"""Chapter 5: metastable traps (appendix A.1, Table 4, C.1-C.3).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from glauber_core import (
    Conditionals,
    Trajectory,
    check_count,
    score_gaps,
)
from book_tools import rank_correlation, share_intervals


TRAP_COLUMNS = ("chain", "start", "end", "duration", "start_record", "end_record", "from_start", "censored")


def _record_spacing(steps, records: int) -> torch.Tensor:
    """The recorded steps as LongTensor[R], checked to be increasing and evenly spaced."""
    steps = torch.as_tensor(steps)
    if steps.dim() != 1 or len(steps) != records or records < 2 or steps.is_floating_point():
        raise ValueError(f"steps must be a LongTensor of the {records} recorded steps (at least 2), "
                         f"got shape {tuple(steps.shape)} and dtype {steps.dtype}")
    spacing = steps.diff()
    if (spacing <= 0).any() or (spacing != spacing[0]).any():
        raise ValueError("steps must be increasing and evenly spaced: run glauber with `steps` a multiple of "
                         "`record_every`")
    return steps.long()


def window_distances(embeddings, steps, window: int) -> torch.Tensor:
    """d(x_t, x_s) = 1 - cos(phi(x_t), phi(x_s)) from each anchor record t to s = t, t + r, ..., t + w.

    embeddings [B, R, d] at the recorded `steps` (spacing r); `window` w in Glauber steps, a multiple
    of r. Anchors are the K = R - w / r records with a whole window: FloatTensor[B, K, w / r + 1].
    """
    embeddings = torch.as_tensor(embeddings)
    if embeddings.dim() != 3 or not embeddings.is_floating_point() or embeddings.shape[2] < 1:
        raise ValueError(f"embeddings must be a float tensor [B, R, d], got {tuple(embeddings.shape)} "
                         f"of dtype {embeddings.dtype}")
    norms = embeddings.norm(dim=-1, keepdim=True)
    if not torch.isfinite(embeddings).all() or (norms == 0).any():
        raise ValueError("embeddings must be finite and non-zero (cosine distance needs a direction)")
    steps = _record_spacing(steps, embeddings.shape[1])
    spacing = int(steps[1] - steps[0])
    window = check_count(window, "window", 1)
    if window % spacing or window > int(steps[-1] - steps[0]):
        raise ValueError(f"window must be a multiple of the record spacing {spacing} and at most the recorded "
                         f"span {int(steps[-1] - steps[0])}, got {window}")
    width = window // spacing
    unit = (embeddings / norms).double()
    anchors = embeddings.shape[1] - width
    cosines = [(unit[:, :anchors] * unit[:, j : anchors + j]).sum(-1) for j in range(width + 1)]
    return (1.0 - torch.stack(cosines, -1)).clamp_min(0.0).float()


def window_drift(embeddings, steps, window: int) -> torch.Tensor:
    """The rolling drift of appendix A.1: D_t = mean over recorded s in (t, t + w] of d(x_t, x_s), FloatTensor[B, K].

    Our reading of the paper's "300-step mean cosine drift": how far, on average, the chain's text moves from
    where it stood at the start of each w-step window.
    """
    return window_distances(embeddings, steps, window)[..., 1:].mean(-1)


def detect_traps(embeddings, steps, window: int = 300, threshold: float = 0.12) -> pd.DataFrame:
    """Trap intervals of appendix A.1: stretches where the rolling drift D_t stays below `threshold`.

    An anchor record t is flagged when D_t < threshold. Each run of consecutive flagged anchors gives
    an interval from its first anchor to the last record, within those anchors' windows, that lies
    within `threshold` of its anchor; overlapping intervals merge. One row per trap: chain, start and
    end step, duration = end - start, their record indices, from_start (the run's first record) and
    censored (reaches the run's last record, so the duration is a lower bound).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 2:
        raise ValueError(f"threshold must be a cosine distance in (0, 2], got {threshold!r}")
    distances = window_distances(embeddings, steps, window)
    steps = torch.as_tensor(steps).long()
    batch, anchors, width = distances.shape
    records = anchors + width - 1
    flagged = distances[..., 1:].mean(-1) < threshold
    offsets = torch.arange(width)
    last_close = torch.where(distances < threshold, offsets, 0).amax(-1) + torch.arange(anchors)
    rows = []
    for chain in range(batch):
        intervals: list[list[int]] = []
        marks = flagged[chain].tolist() + [False]
        begin = None
        for anchor, mark in enumerate(marks):
            if mark and begin is None:
                begin = anchor
            elif not mark and begin is not None:
                end = int(last_close[chain, begin:anchor].max())
                if intervals and begin <= intervals[-1][1]:
                    intervals[-1][1] = max(intervals[-1][1], end)
                else:
                    intervals.append([begin, end])
                begin = None
        for first, last in intervals:
            start, end = int(steps[first]), int(steps[last])
            rows.append((chain, start, end, end - start, first, last, first == 0, last == records - 1))
    frame = pd.DataFrame(rows, columns=list(TRAP_COLUMNS))
    return frame.astype({c: int for c in TRAP_COLUMNS[:6]} | {c: bool for c in TRAP_COLUMNS[6:]})


def _check_traps(trajectory: Trajectory, traps: pd.DataFrame) -> None:
    """Trap rows must name chains and record indices of this trajectory."""
    if not isinstance(traps, pd.DataFrame) or not {"chain", "start_record", "end_record"} <= set(traps.columns):
        raise ValueError("traps must be the DataFrame of detect_traps (columns chain, start_record, end_record)")
    batch, records, _ = trajectory.tokens.shape
    chain, first, last = (traps[c].to_numpy() for c in ("chain", "start_record", "end_record"))
    if len(traps) and ((chain < 0) | (chain >= batch) | (first < 0) | (first > last) | (last >= records)).any():
        raise ValueError(f"traps name chains or records outside this trajectory ({batch} chains, {records} records)")


def held_states(trajectory: Trajectory, traps: pd.DataFrame) -> torch.Tensor:
    """The state that held in each trap: the most frequent recorded state of its interval (ties: the first
    to appear), LongTensor[T, n]."""
    _check_traps(trajectory, traps)
    held = []
    for chain, first, last in zip(traps.chain, traps.start_record, traps.end_record):
        states = trajectory.tokens[chain, first : last + 1]
        unique, inverse, counts = torch.unique(states, dim=0, return_inverse=True, return_counts=True)
        seen = torch.full((len(unique),), len(states)).scatter_reduce(0, inverse, torch.arange(len(states)), "amin")
        held.append(unique[max(range(len(unique)), key=lambda u: (int(counts[u]), -int(seen[u])))])
    return torch.stack(held) if held else torch.empty(0, trajectory.tokens.shape[2], dtype=torch.long)


def trap_catalogue(cond: Conditionals, trajectory: Trajectory, traps: pd.DataFrame, *,
                   max_rows: int = 256) -> pd.DataFrame:
    """Table 4 of appendix A.1: each trap with its held state, score gaps Delta_i(x) and class.

    Adds: state (token ids), text, gaps (per site), mean_gap, min_gap (Delta*), weakest_site, kind
    ("perfect": every token the argmax, Delta* > 0; else "approximate"), temperature, and for perfect
    traps Theorem 8's bound e^(Delta*/tau) / (4 |V|) on t_mix(1/4), |V| = the number of allowed tokens.
    Gaps of all sites of all held states come from one batched score_gaps call.
    """
    states = held_states(trajectory, traps)
    n = trajectory.tokens.shape[2]
    gaps = score_gaps(cond, states, max_rows=max_rows) if len(states) else torch.empty(0, n, dtype=torch.float64)
    tau = trajectory.temperature
    min_gap = gaps.amin(1) if len(states) else torch.empty(0, dtype=torch.float64)
    perfect = min_gap > 0
    bound = torch.where(perfect, torch.exp(min_gap / tau) / (4 * int(cond.allowed.sum())), math.nan)
    decode = getattr(cond, "decode_batch", None)
    texts = decode(states) if decode is not None and len(states) else [" ".join(map(str, s)) for s in states.tolist()]
    return traps.reset_index(drop=True).assign(
        state=states.tolist(), text=texts, gaps=gaps.tolist(), mean_gap=gaps.mean(1).numpy(),
        min_gap=min_gap.numpy(), weakest_site=gaps.argmin(1).numpy() if len(states) else np.empty(0, int),
        kind=np.where(perfect.numpy(), "perfect", "approximate"), temperature=tau, theorem8_bound=bound.numpy())


def escape_events(trajectory: Trajectory, traps: pd.DataFrame, states, gaps) -> pd.DataFrame:
    """How each trap ended (appendix C.2): the move that left its held state x* for the last time.

    From the per-step move log, the Hamming distance to x* is followed from the trap's first record
    on; last_visit is the last step in the trap interval (or, if the chain is still at x* then,
    after it) at which the chain sits at x*, and the escape is the next step. Per trap: escaped,
    last_visit, escape_step, escape_site, old/new token, escape_prob = p_tau(new | x_-i), escape_gap =
    Delta_i(x*) at the escape site, site_rank = how many sites have a strictly smaller gap, and at_weakest
    (site_rank == 0: the escape came at a weakest-gap site). -1 / NaN where the chain never left x*.
    """
    _check_traps(trajectory, traps)
    n = trajectory.tokens.shape[2]
    states, gaps = (torch.as_tensor(v).reshape(-1, n) if len(traps) == 0 else torch.as_tensor(v)
                    for v in (states, gaps))
    states, gaps = states.long(), gaps.double()
    if states.shape != (len(traps), n) or gaps.shape != (len(traps), n):
        raise ValueError(f"states and gaps must both be [{len(traps)}, {n}] (one row per trap), got "
                         f"{tuple(states.shape)} and {tuple(gaps.shape)}")
    if trajectory.sites.shape[1] != int(trajectory.steps[-1]):
        raise ValueError("the trajectory's move log does not cover every step; pass the Trajectory from glauber")
    rows = []
    for k, (chain, first, last) in enumerate(zip(traps.chain, traps.start_record, traps.end_record)):
        target, begin, end = states[k], int(trajectory.steps[first]), int(trajectory.steps[last])
        sites = trajectory.sites[chain, begin:]
        changes = (trajectory.new_tokens[chain, begin:] != target[sites]).long() - (
            trajectory.old_tokens[chain, begin:] != target[sites]).long()
        start = (trajectory.tokens[chain, first] != target).sum()
        at_state = torch.cat([start.view(1), start + changes.cumsum(0)]) == 0  # index k: step begin + k
        visits = at_state[: end - begin + 1].nonzero()
        if len(visits) == 0:
            raise ValueError(f"trap {k}: its state never occurs in its interval; pass held_states(trajectory, traps)")
        leaves = (~at_state[int(visits[-1]) :]).nonzero()
        if len(leaves) == 0:
            last_visit = begin + len(at_state) - 1
            rows.append((False, last_visit, -1, -1, -1, -1, math.nan, math.nan, -1, False))
            continue
        step = begin + int(visits[-1]) + int(leaves[0])
        move = step - 1
        site = int(trajectory.sites[chain, move])
        rank = int((gaps[k] < gaps[k, site]).sum())
        rows.append((True, step - 1, step, site, int(trajectory.old_tokens[chain, move]),
                     int(trajectory.new_tokens[chain, move]), float(trajectory.log_probs[chain, move].exp()),
                     float(gaps[k, site]), rank, rank == 0))
    columns = ["escaped", "last_visit", "escape_step", "escape_site", "old_token", "new_token", "escape_prob",
               "escape_gap", "site_rank", "at_weakest"]
    return pd.DataFrame(rows, columns=columns).astype({"escaped": bool, "at_weakest": bool})


def trap_summary(catalogue: pd.DataFrame, chains: int, steps: int, *, draws: int = 2000, seed: int = 0) -> dict:
    """The numbers appendix A.1 reports, from a trap catalogue of `chains` chains run for `steps` steps.

    count and rate (traps per chain per 10,000 steps) with its exact 95% Poisson interval; perfect count,
    share and its 95% Wilson interval; mean duration with a 95% percentile-bootstrap interval (traps
    resampled), min and max; Spearman correlations of duration with the mean gap and with the min gap,
    their difference and its bootstrap interval (NaN with fewer than 3 traps).
    """
    from scipy.stats import chi2

    chains, steps = check_count(chains, "chains", 1), check_count(steps, "steps", 1)
    draws = check_count(draws, "draws", 1)
    if not isinstance(catalogue, pd.DataFrame) or not {"duration", "kind", "mean_gap", "min_gap"} <= set(catalogue):
        raise ValueError("catalogue must be the DataFrame of trap_catalogue (duration, kind, mean_gap, min_gap)")
    count = len(catalogue)
    duration = catalogue.duration.to_numpy(float)
    perfect = int((catalogue.kind == "perfect").sum())
    share = perfect / count if count else math.nan
    perfect_low, perfect_high = ((float(v[0]) for v in share_intervals([perfect], [count])) if count
                                 else (math.nan, math.nan))
    resample = np.random.default_rng(seed).integers(0, max(count, 1), size=(draws, count))
    exposure = chains * steps / 10_000
    summary = dict(count=count, rate_per_10k=count / exposure,
                   rate_low=chi2.ppf(0.025, 2 * count) / 2 / exposure if count else 0.0,
                   rate_high=chi2.ppf(0.975, 2 * count + 2) / 2 / exposure, perfect=perfect, perfect_share=share,
                   perfect_low=perfect_low, perfect_high=perfect_high,
                   mean_duration=duration.mean() if count else math.nan,
                   min_duration=duration.min() if count else math.nan,
                   max_duration=duration.max() if count else math.nan)
    means = duration[resample].mean(1) if count else np.full(draws, np.nan)
    summary["duration_low"], summary["duration_high"] = np.percentile(means, [2.5, 97.5]) if count else (math.nan,) * 2
    if count < 3:
        return summary | dict(rho_mean=math.nan, rho_min=math.nan, rho_difference=math.nan,
                              difference_low=math.nan, difference_high=math.nan)
    mean_gap, min_gap = catalogue.mean_gap.to_numpy(float), catalogue.min_gap.to_numpy(float)
    rho_mean, rho_min = float(rank_correlation(duration, mean_gap)), float(rank_correlation(duration, min_gap))
    boot = (rank_correlation(duration[resample], mean_gap[resample])
            - rank_correlation(duration[resample], min_gap[resample]))
    low, high = np.nanpercentile(boot, [2.5, 97.5]) if np.isfinite(boot).any() else (math.nan, math.nan)
    return summary | dict(rho_mean=rho_mean, rho_min=rho_min, rho_difference=rho_mean - rho_min,
                          difference_low=float(low), difference_high=float(high))
