"""Chapter 2's science, part one: the settings per profile, the influence coefficients and alpha(tau) with
their bootstrap intervals (appendix A.1), Theorem 5's condition against fast mixing on exact chains
(section 5.2), Lemma 6, Corollary 7 and Theorem 8 (section 5.3), score margins and the '!'-basin drift
(section 5.4, Table 2). Every number the chapter saves starts here or in `windows.py`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

import book_tools as bt
import verdicts as vd
from glauber_core import (
    GERMLINE_CONTEXT,
    Conditionals,
    MaskedLMConditionals,
    PottsConditionals,
    WindowConditionals,
    all_states,
    alpha_from_influence,
    basin_margin,
    check_count,
    check_temperature,
    check_tokens,
    exact_mixing_time,
    exact_stationary,
    glauber_kernel,
    influence_and_oscillation,
    influence_candidates,
    influence_coefficients,
    is_protein,
    mixing_time_bound,
    score_gaps,
    seed_passages,
)

NOTEBOOK = "02_mixing_bounds"
# theorem5_bound_loose, fixed before the run: a chain "mixes fast" at tau when its exact t_mix(1/4) is within
# FAST_FACTOR times the independent-sites time at the same n; the claim needs tau_alpha > CONDITION_FACTOR *
# tau_fast (the paper: tau > 10 against about 1.5 on BERT). POTTS_TEMPERATURES: its grid.
FAST_FACTOR = 2.0
CONDITION_FACTOR = 2.0
POTTS_TEMPERATURES = np.geomspace(0.1, 30, 25).round(3)
# mu_vs_pseudolikelihood_tv: a window's PL gap is 0 up to rounding on a compatible chain, at most about n eps L for
# n free sites, the machine epsilon eps of the dtype the model computed its scores in (float32 for a network, even
# in a window's float64 cache) and the largest |s / tau| or |log p| L (pl_gap_floor); the floor is PL_FLOOR_FACTOR
# times that. Measured on fp32 Potts windows through WindowConditionals (tools/calibration/bounds.py, 50 seeds):
# compatible gaps reach 6e-9 n eps L (500 windows of 8^3 states) and 4e-9 n eps L (250 of 20^2), incompatible ones
# start at 470 and 0.19 n eps L. The gap is second order in the scores' rounding (stationarity makes the
# site-average of p_i / mu_i exactly 1 at every state, tests/test_bounds.py), so this floor is conservative by orders of magnitude.
PL_FLOOR_FACTOR = 16.0
# mu_vs_pseudolikelihood_tv, fixed before the run: a window is a hit when its PL gap exceeds PL_HIT_FACTOR times
# its floor. A compatible chain's gap is 0 up to rounding, at most about its floor, so twice the floor is clear of
# rounding; the claim is then judged on the share of hits against 1/2 (PL_HIT_CHANCE), not on every window, so
# that the odd incompatible window whose gap happens to sit near 0 does not take power away as windows are added.
PL_HIT_FACTOR, PL_HIT_CHANCE = 2.0, 0.5
# Exact window chains over the model's FULL vocabulary run when it has at most this many allowed tokens
# (a protein MLM's 20 residues: 20^k states for k free sites).
FULL_VOCABULARY_LIMIT = 32
# The germline families of the full-vocabulary windows, in order (distinct families, heavy, kappa, lambda).
WINDOW_FAMILIES = ("IGHV3", "IGKV1", "IGHV1", "IGLV2", "IGHV4", "IGKV3", "IGLV1", "IGHV5")
# Full-vocabulary windows: on a protein MLM the whole germline gene (GERMLINE_CONTEXT residues) with k free sites
# from the start of its IMGT region WINDOW_REGION (each gene's own CDR1, germline_regions); a text model's
# passages of WINDOW_LENGTH tokens with free sites from FIRST_FREE_SITE.
WINDOW_LENGTH, FIRST_FREE_SITE, WINDOW_REGION = 32, 27, "cdr1"
# The '!'-basin of section 5.4: DRIFT_INSIDE of the N sites hold '!'; Table 2's temperatures are missing from
# our copy of the paper, so DRIFT_TEMPERATURES stand in for them.
DRIFT_TOKEN, DRIFT_INSIDE, DRIFT_TEMPERATURES = "!", 0.9, (1.0, 2.0)
DRIFT_FILLER = "first tokens of held-out BBC paragraphs"
POTTS_LABEL = "Potts, 5 sites, 3 colours"  # the `model` of the exact Potts tables


# --------------------------------------------------------------------------------------------
# Settings per profile (smoke: CI; quick: the book on 2 CPU cores; paper: the paper's sizes, a GPU)
# --------------------------------------------------------------------------------------------

_A1 = bt.paper_protocol("alpha_tau10")  # appendix A.1: the seed length
_TABLE2 = bt.paper_protocol("basin_drift_positive")  # Table 2: N and the number of boundary states
# The influence grid of every profile: 0.5 to 30 on a log scale, with 1 and 2; `settings` adds the paper's 10, 11.
INFLUENCE_TEMPERATURES = np.r_[np.geomspace(0.5, 30, 13), 1, 2]
PAPER_TEMPERATURES = (10, 11)
# full_plan: the full-vocabulary windows (section 8) as (k free sites, windows, temperatures).
SETTINGS = {
    "smoke": dict(
        seq_len=14,
        n_contexts=2,
        top_k=2,
        drift_states=2,
        drift_n=100,
        window_tokens=4,
        windows=3,
        chains=2,
        chain_steps=20,
        temperatures=INFLUENCE_TEMPERATURES,
        full_plan=[(2, 2, [1.0])],
    ),
    "quick": dict(
        seq_len=14,
        n_contexts=8,
        top_k=4,
        drift_states=16,
        drift_n=100,
        window_tokens=8,
        windows=10,
        chains=4,
        chain_steps=300,
        temperatures=INFLUENCE_TEMPERATURES,
        full_plan=[(2, 5, [0.5, 1.0, 2.0, 4.0]), (3, 2, [1.0])],
    ),
    "paper": dict(
        seq_len=int(_A1["seed_tokens"]),
        n_contexts=20,
        top_k=15,
        drift_states=int(_TABLE2["states"]),
        drift_n=int(_TABLE2["N"]),
        window_tokens=12,
        windows=20,
        chains=30,
        chain_steps=10_000,
        temperatures=INFLUENCE_TEMPERATURES,
        full_plan=[(2, 8, [0.5, 1.0, 2.0, 4.0]), (3, 8, [0.5, 1.0, 2.0, 4.0])],
    ),
}


def settings(
    profile: str, cond: Conditionals | None = None, *, full_windows: int = 0, full_k: int = 0, **overrides
) -> SimpleNamespace:
    """The chapter's settings: the profile's row of SETTINGS, each override that is set (not 0, "" or []) in
    its place, and what follows from them and the model `cond`: `temperatures`, the influence grid with the
    paper's 10 and 11 added (sorted, 3 decimals); `protein` and `passages` (germline V genes for a protein
    MLM, else BBC News: the paper's MS MARCO is online only); on a protein MLM the state is the whole gene
    (`context_length`, GERMLINE_CONTEXT residues) and its first `free` = seq_len residues (FR1) the sites whose
    influence and margins are read (a text model: `free` 0, every site); `full`, whether the model is small enough for
    full-vocabulary windows, and `full_plan`, their (k, windows, temperatures), `full_windows` windows per k
    (0: the profile's) for k up to `full_k` (0: every k). Raises ValueError when a protein MLM's seq_len reaches
    past FR1 (bt.fr1_window)."""
    base = vars(bt.profile_settings(profile, SETTINGS, **overrides))
    protein = is_protein(cond)
    grid = np.unique(np.r_[base.pop("temperatures"), PAPER_TEMPERATURES].astype(float)).round(3)
    plan = [
        (k, full_windows or count, temperatures)
        for k, count, temperatures in base.pop("full_plan")
        if k <= (full_k or k)
    ]
    return SimpleNamespace(
        **base,
        context_length=GERMLINE_CONTEXT if protein else base["seq_len"],
        free=bt.fr1_window(base["seq_len"]) if protein else 0,
        temperatures=grid,
        protein=protein,
        passages=bt.PASSAGE_NAMES["germline" if protein else "bbc"],
        full=cond is not None and full_vocabulary(cond),
        full_plan=plan,
    )


def full_vocabulary(cond: Conditionals, limit: int = FULL_VOCABULARY_LIMIT) -> bool:
    """True when the model has at most `limit` allowed tokens: windows need no restricted token set."""
    return int(cond.allowed.sum()) <= limit


# --------------------------------------------------------------------------------------------
# Exact influence of an enumerable model; the '!'-basin's boundary states
# --------------------------------------------------------------------------------------------


def exact_influence_coefficients(cond: Conditionals, n: int, temperatures, limit: int = 20_000) -> torch.Tensor:
    """The exact c_ij(tau) of Definition 2, Tensor[T, n, n], for a model small enough to enumerate:
    every state as base context, every allowed token as candidate at site j, maximum over contexts."""
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    n = check_count(n, "n", 1)
    if len(allowed) ** n > limit:
        raise ValueError(f"{len(allowed)}^{n} states is too many to enumerate for exact influence (limit {limit})")
    states = allowed[all_states(len(allowed), n)]
    candidates = allowed.expand(len(states), n, len(allowed))
    return influence_coefficients(cond, states, candidates, temperatures, max_rows=4096).amax(1)


def drift_boundary_states(
    cond: MaskedLMConditionals, token_id: int, n: int, count: int, inside: float = 0.9, seed: int = 0
) -> torch.Tensor:
    """`count` states on the boundary of the basin {x : #{i : x_i = t} >= inside * n} of section 5.4: exactly
    round(inside * n) copies of t at random positions; the other sites hold, in order, the first tokens of a
    held-out BBC paragraph (a different one per state). Deterministic in `seed`."""
    n, count = check_count(n, "n", 2), check_count(count, "count", 1)
    check_tokens(cond, torch.tensor([int(token_id)]), "token_id")
    copies = round(inside * n)
    if not 0 < copies < n:
        raise ValueError(f"inside * n must round to between 1 and n - 1 copies, got {copies}")
    filler = seed_passages(cond, n - copies, count, seed=seed).tokens
    generator = torch.Generator().manual_seed(seed)
    states = torch.full((count, n), int(token_id), dtype=torch.long)
    for b in range(count):
        others = torch.randperm(n, generator=generator)[: n - copies].sort().values
        states[b, others] = filler[b]
    return states


# --------------------------------------------------------------------------------------------
# alpha(tau): context-averaged estimate, its bootstrap interval over contexts, the crossing of 1
# --------------------------------------------------------------------------------------------


def alpha_frame(
    influence: torch.Tensor, temperatures, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """alpha(tau) = max_i sum_j c_ij from influence [T, C, n, n]: averaged over the C contexts (appendix A.1)
    with a percentile bootstrap interval over contexts (NaN with one context), and the maximum over contexts.
    Both are lower bounds on the true alpha(tau), a supremum over every context."""
    influence = torch.as_tensor(influence, dtype=torch.float64)
    if influence.dim() != 4 or influence.shape[-1] != influence.shape[-2]:
        raise ValueError(f"influence must be [T, C, n, n], got {tuple(influence.shape)}")
    taus = np.asarray(temperatures, dtype=float)
    if len(taus) != influence.shape[0]:
        raise ValueError(f"{len(taus)} temperatures for {influence.shape[0]} influence slices")
    contexts = influence.shape[1]
    table = pd.DataFrame(
        {
            "temperature": taus,
            "alpha_mean": influence.mean(1).sum(-1).amax(-1).numpy(),
            "alpha_max": influence.amax(1).sum(-1).amax(-1).numpy(),
            "low": math.nan,
            "high": math.nan,
            "contexts": contexts,
        }
    )
    if contexts >= 2:
        generator = torch.Generator().manual_seed(seed)
        draws = torch.randint(0, contexts, (check_count(resamples, "resamples", 1), contexts), generator=generator)
        weights = torch.zeros(len(draws), contexts, dtype=torch.float64)
        weights.scatter_add_(1, draws, torch.ones_like(draws, dtype=torch.float64))
        boot = torch.einsum("bc,tcij->tbij", weights / contexts, influence).sum(-1).amax(-1).numpy()
        bounds = [vd.percentile_interval(draws, level, max_undefined=1.0)[:2] for draws in boot]
        table["low"], table["high"] = np.array(bounds).T
    return table


def crossing_temperature(alpha: pd.DataFrame, column: str = "alpha_mean") -> float:
    """The smallest grid temperature above which alpha stays below 1 (math.inf when it never drops below 1
    on the grid; the smallest grid temperature when it is below 1 everywhere)."""
    ordered = alpha.sort_values("temperature")
    above = ordered[ordered[column] >= 1]
    if above.empty:
        return float(ordered.temperature.iloc[0])
    later = ordered[ordered.temperature > above.temperature.max()]
    return float(later.temperature.iloc[0]) if len(later) else math.inf


def theorem5_bounds(alpha: pd.DataFrame, n: int) -> pd.DataFrame:
    """The alpha table with Theorem 5's bound on t_mix(1/4) from each estimate (bound_mean, bound_max; inf
    where the estimate is at least 1): what the bound would be if the lower bound were the supremum."""
    return alpha.assign(
        bound_mean=[mixing_time_bound(a, n) for a in alpha.alpha_mean],
        bound_max=[mixing_time_bound(a, n) for a in alpha.alpha_max],
    )


# --------------------------------------------------------------------------------------------
# Theorem 5's condition against fast mixing, exactly, on enumerable chains
# --------------------------------------------------------------------------------------------


def coupon_collector_time(n: int, eps: float = 0.25) -> int:
    """t_mix(eps) of n independent sites in the worst case (stationary marginals concentrated on one token,
    the start elsewhere): the smallest t with P(some site not yet picked after t random-scan steps) <= eps,
    by inclusion-exclusion. Every independent-sites Glauber chain on n sites mixes within it (a site is exact
    once picked), and the bound is reached as the fields grow."""
    n = check_count(n, "n", 1)
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1), got {eps!r}")
    t = 1
    while sum((-1) ** (k + 1) * math.comb(n, k) * (1 - k / n) ** t for k in range(1, n + 1)) > eps:
        t += 1
    return t


def mixing_profile(cond: Conditionals, n: int, temperatures, eps: float = 0.25) -> pd.DataFrame:
    """Per temperature of an enumerable chain: the exact alpha(tau) (c_ij over every context), the exact
    t_mix(eps) (inf when beyond what fp64 matrix powers resolve: far from fast), Theorem 5's bound, and the
    independent-sites reference `coupon_collector_time(n, eps)`."""
    taus = np.asarray(temperatures, dtype=float)
    alphas = alpha_from_influence(exact_influence_coefficients(cond, n, taus)).tolist()
    t_mix = []
    for tau in taus:
        try:
            t_mix.append(float(exact_mixing_time(cond, n, float(tau), eps)))
        except ValueError as error:
            if "too long" not in str(error) and "not within" not in str(error):
                raise
            t_mix.append(math.inf)
    table = pd.DataFrame(
        {
            "temperature": taus,
            "alpha": alphas,
            "t_mix": t_mix,
            "bound": [mixing_time_bound(a, n, eps) for a in alphas],
            "t_independent": coupon_collector_time(n, eps),
        }
    )
    return table.assign(ratio=table.bound / table.t_mix)


def mixing_profiles(chains: dict, n: int, temperatures, eps: float = 0.25) -> pd.DataFrame:
    """`mixing_profile` of each named chain, stacked with a `chain` column."""
    return pd.concat(
        [mixing_profile(cond, n, temperatures, eps).assign(chain=name) for name, cond in chains.items()],
        ignore_index=True,
    )


def reference_chains(n: int, coupling: float = 1.0) -> dict:
    """Chains whose answer to theorem5_bound_loose is known by mathematics (2 colours, n sites):
    - independent sites (J = 0): alpha = 0 at every tau and fast mixing everywhere: the claim fails;
    - Curie-Weiss (J_ij = 4 coupling / n, no field): alpha = (n - 1) tanh(2 coupling / (n tau)) < 1 from about
      the critical tau = 2 coupling, where fast mixing also starts (Dobrushin's condition is sharp in mean
      field): the claim fails;
    - a ferromagnet in a balancing field (J_ij = coupling, h_i(0) = coupling (n - 1)): in the all-1 state the
      field exactly balances the coupling, so one flip of a neighbour moves p(0) from 1/2 to sigmoid(2J/tau)
      and alpha -> (n - 1) / 2 as tau -> 0, below 1 only for tau > coupling / atanh(2 / (n - 1)); yet the
      field drives every start to all-0 in about the coupon-collector time at every tau: the claim holds."""
    field = torch.zeros(n, 2, dtype=torch.float64)
    field[:, 0] = coupling * (n - 1)
    return {
        "independent sites": PottsConditionals(torch.zeros(n, n), q=2),
        "Curie-Weiss": PottsConditionals(4 * coupling / n * torch.ones(n, n), q=2),
        "ferromagnet in a balancing field": PottsConditionals(coupling * torch.ones(n, n), field, q=2),
    }


# --------------------------------------------------------------------------------------------
# The '!'-basin drift (section 5.4, Table 2)
# --------------------------------------------------------------------------------------------


def single_token(cond: MaskedLMConditionals, text: str, n: int = 1) -> tuple[int | None, str]:
    """The id of `text` when the model spells it as one allowed token and takes n sites, else (None, why
    not)."""
    if n > getattr(cond, "max_sites", n):
        return None, f"the model takes at most {cond.max_sites} sites, fewer than N = {n}"
    ids = cond.encode(text)
    if len(ids) != 1:
        return None, f"the model spells {text!r} with {len(ids)} tokens, not one"
    if not bool(cond.allowed[int(ids[0])]):
        return None, f"{text!r} is not a token the chain may propose in this model"
    return int(ids[0]), ""


def basin_token(cond: MaskedLMConditionals, n: int) -> tuple[int | None, str]:
    """The id of DRIFT_TOKEN ('!') for a basin of n sites, or (None, why not): a protein MLM has no '!', and
    no run of one residue stands for the paper's '!'-basin."""
    if is_protein(cond):
        return None, "no protein meaning: the model's tokens are the 20 amino acids, with no '!' to fill a basin"
    return single_token(cond, DRIFT_TOKEN, n)


def drift_summary_frame(drift: torch.Tensor, temperatures) -> pd.DataFrame:
    """Per temperature: boundary states, min and median drift, how many are positive."""
    return pd.DataFrame(
        [
            dict(
                temperature=float(tau),
                states=len(d),
                min=d.min().item(),
                median=d.median().item(),
                positive=int((d > 0).sum()),
            )
            for tau, d in zip(temperatures, drift)
        ]
    )


def drift_frame(drift: torch.Tensor, temperatures) -> pd.DataFrame:
    """Every boundary state's drift [T, B] as a tidy table: temperature, delta."""
    return pd.DataFrame(
        {"temperature": np.repeat(list(temperatures), drift.shape[1]), "delta": drift.flatten().numpy()}
    )


# --------------------------------------------------------------------------------------------
# Tables of estimates: influence, Lemma 6, Corollary 7, Theorem 8, score margins
# --------------------------------------------------------------------------------------------


def influence_frame(influence: torch.Tensor, temperatures) -> pd.DataFrame:
    """Every off-diagonal estimate of influence [T, C, n, n] as a tidy table: temperature, passage (the index of
    the context the estimate was read in), i, j, c_ij."""
    count, contexts, n, _ = influence.shape
    t, c, i, j = np.meshgrid(np.arange(count), np.arange(contexts), np.arange(n), np.arange(n), indexing="ij")
    off = (i != j).reshape(-1)
    return pd.DataFrame(
        {
            "temperature": np.asarray(temperatures, dtype=float)[t.reshape(-1)[off]],
            "passage": c.reshape(-1)[off],
            "i": i.reshape(-1)[off],
            "j": j.reshape(-1)[off],
            "c_ij": influence.double().reshape(-1).numpy()[off],
        }
    )


def lemma6_frame(influence: torch.Tensor, oscillation: torch.Tensor, temperatures) -> pd.DataFrame:
    """Lemma 6, c_ij(tau) <= Delta_ij / (4 tau), on every estimate: violations, least slack and the median
    share of the bound used (pairs with Delta_ij = 0 have c_ij = 0 and are left out of the median)."""
    taus = torch.as_tensor(np.asarray(temperatures, dtype=float))
    bound = oscillation / (4 * taus).view(-1, 1, 1, 1)
    n = influence.shape[-1]
    off = ~torch.eye(n, dtype=torch.bool)
    c, b = influence[:, :, off].flatten(1), bound[:, :, off].flatten(1)
    ratio = torch.where(b > 0, c / b.clamp_min(1e-300), torch.nan)
    return pd.DataFrame(
        {
            "temperature": taus.numpy(),
            "pairs": c.shape[1],
            "violations": (c > b + 1e-9).sum(1).numpy(),
            "min_slack": (b - c).amin(1).numpy(),
            "median_ratio": ratio.nanmedian(1).values.numpy(),
        }
    )


def corollary7_frame(oscillation: torch.Tensor) -> pd.DataFrame:
    """Corollary 7's temperature max_i sum_j Delta_ij / 4, above which alpha < 1, from the oscillation
    [C, n, n] averaged over contexts and maximised over them."""
    reductions = {"mean over contexts": oscillation.mean(0), "max over contexts": oscillation.amax(0)}
    return pd.DataFrame(
        {
            "contexts": list(reductions),
            "corollary7_temperature": [alpha_from_influence(d).item() / 4 for d in reductions.values()],
        }
    )


def theorem8_check(cond: Conditionals, n: int, temperature: float, basin, eps: float = 0.25, limit: int = 4096) -> dict:
    """Theorem 8's quantities on an enumerable basin B, all exact: Delta_star and Assumption 1, the escape
    probability max_{x in B} P(x, B^c) and its bound ``|V| e^(-Delta_star/tau)``, the conductance, mu(B), and
    t_mix(eps) beside the lower bound ``e^(Delta_star/tau) / (4|V|)`` (valid when mu(B) <= 1/2 and eps = 1/4).

    Args:
        cond: The conditionals.
        n: The number of sites.
        temperature: tau > 0.
        basin: BoolTensor[``|V|^n``] over the states in ``all_states`` order (see ``basin_margin``).
        eps: The total-variation threshold, in (0, 1).
        limit: The most states ``|V|^n`` to enumerate.

    Returns:
        A dict with keys "temperature", "delta_star", "assumption_holds", "escape", "escape_bound",
        "conductance", "mu_basin", "t_mix" and "t_mix_lower".

    Raises:
        ValueError: If tau, eps or ``basin`` is not valid, or the model is too large to enumerate.
    """
    temperature = check_temperature(temperature)
    delta_star, argmax_holds = basin_margin(cond, n, basin, limit)
    kernel, stationary = glauber_kernel(cond, n, temperature), exact_stationary(cond, n, temperature)
    basin = torch.as_tensor(basin)
    leave = kernel[basin][:, ~basin].sum(1)
    size = int(cond.allowed.sum())
    return {
        "temperature": temperature,
        "delta_star": delta_star,
        "assumption_holds": argmax_holds and delta_star > 0,
        "escape": float(leave.max()),
        "escape_bound": size * math.exp(-delta_star / temperature),
        "conductance": float((stationary[basin] * leave).sum() / stationary[basin].sum()),
        "mu_basin": float(stationary[basin].sum()),
        "t_mix": exact_mixing_time(cond, n, temperature, eps, limit),
        "t_mix_lower": math.exp(delta_star / temperature) / (4 * size),
    }


def theorem8_frame(cond: Conditionals, n: int, basin: torch.Tensor, temperatures) -> pd.DataFrame:
    """Theorem 8 on an enumerable basin at each temperature (theorem8_check), with how loose its
    escape bound (bound / exact) and its mixing-time bound (exact / bound) are."""
    table = pd.DataFrame([theorem8_check(cond, n, tau, basin) for tau in temperatures])
    return table.assign(
        escape_looseness=table.escape_bound / table.escape, t_mix_looseness=table.t_mix / table.t_mix_lower
    )


def context_influence(cond: Conditionals, contexts, free: int, top_k: int, temperatures):
    """(influence [T, C, n, n], oscillation) of glauber.influence_and_oscillation on the contexts [C, L]: on all
    their sites when `free` is 0, else on their first `free` sites read inside each whole context (one
    WindowConditionals a context, a protein MLM's gene), n = `free`."""
    contexts = torch.as_tensor(contexts)
    if not free:
        candidates = influence_candidates(cond, contexts, top_k)
        return influence_and_oscillation(cond, contexts, candidates, temperatures)
    parts = []
    for context in contexts:
        window = WindowConditionals(cond, context, torch.arange(free))
        state = context[:free].unsqueeze(0)
        parts.append(influence_and_oscillation(window, state, influence_candidates(window, state, top_k), temperatures))
    return torch.cat([part[0] for part in parts], 1), torch.cat([part[1] for part in parts], 0)


def margin_frame(
    cond: MaskedLMConditionals,
    seeds: torch.Tensor,
    ends: torch.Tensor,
    cold: float,
    temperatures=(1.0,),
    free: int = 0,
) -> pd.DataFrame:
    """Score margins Delta_i(x) (appendix A.1) of seed states and of chain endpoints at temperature `cold`: per
    state Delta_star = min_i Delta_i, the mean margin, the sites with a positive one, whether it is a perfect
    trap (all positive) and, for perfect traps, Theorem 8's bound e^(Delta_star/tau) / (4|V|) on t_mix at each
    of `temperatures` and `cold` (bound_tau_<tau>). With `free` > 0 the margins are those of the first `free`
    sites, read inside the whole states (a protein MLM's gene), with `context` and `free` columns."""
    states = torch.cat([seeds, ends])
    free = free or states.shape[1]
    gaps = score_gaps(cond, states, sites=torch.arange(free))[:, :free]
    size_v = int(cond.allowed.sum())
    delta_min = gaps.amin(1)
    margins = pd.DataFrame(
        {
            "state": [f"seed {k}" for k in range(len(seeds))] + [f"end {k} (tau {cold:g})" for k in range(len(ends))],
            "text": cond.decode_batch(states[:, :free]),
            "context": states.shape[1],
            "free": free,
            "delta_star": delta_min.numpy(),
            "mean_gap": gaps.mean(1).numpy(),
            "positive_sites": (gaps > 0).sum(1).numpy(),
        }
    )
    margins["perfect_trap"] = margins.positive_sites == free
    for tau in (*temperatures, cold):
        margins[f"bound_tau_{tau:g}"] = np.where(
            margins.perfect_trap, np.exp(delta_min.numpy() / tau) / (4 * size_v), np.nan
        )
    return margins
