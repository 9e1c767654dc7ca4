"""Chapter 2: mixing bounds on real and enumerable chains (section 5, appendix A.1, Table 2).

Imports the core (and the book's intervals and verdict rules); never another chapter module. Sections: the
settings per profile; the estimators; the claims and checks rows; the sentences, tables and figures the
notebook shows.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from glauber_core import (
    Conditionals,
    MaskedLMConditionals,
    PottsConditionals,
    WindowConditionals,
    all_states,
    alpha_from_influence,
    check_count,
    check_enumerable,
    check_temperature,
    check_tokens,
    conditional_log_probs,
    conditional_probs,
    exact_mixing_time,
    exact_stationary,
    glauber_kernel,
    influence_coefficients,
    is_protein,
    mixing_time_bound,
    score_gaps,
    seed_passages,
    theorem8_check,
    total_variation,
)
from verdicts import (
    check_row,
    control_check,
    finite,
    grid_threshold,
    mean_interval,
    rule_every_case_above,
    rule_every_part,
    rule_threshold_ratio,
    share_intervals,
)

NOTEBOOK = "02_mixing_bounds"
# theorem5_bound_loose, fixed before the run: a chain "mixes fast" at tau when its exact t_mix(1/4) is within
# FAST_FACTOR times the independent-sites time at the same n; the claim needs tau_alpha > CONDITION_FACTOR *
# tau_fast (the paper: tau > 10 against about 1.5 on BERT). POTTS_TEMPERATURES: its grid.
FAST_FACTOR = 2.0
CONDITION_FACTOR = 2.0
POTTS_TEMPERATURES = np.geomspace(0.1, 30, 25).round(3)
PL_FLOOR = 1e-9  # mu_vs_pseudolikelihood_tv: the rounding floor of an exactly computed TV
# Exact window chains over the model's FULL vocabulary run when it has at most this many allowed tokens
# (a protein MLM's 20 residues: 20^k states for k free sites).
FULL_VOCABULARY_LIMIT = 32
# The germline families of the full-vocabulary windows, in order (distinct families, heavy, kappa, lambda).
WINDOW_FAMILIES = ("IGHV3", "IGKV1", "IGHV1", "IGLV2", "IGHV4", "IGKV3", "IGLV1", "IGHV5")
# Full-vocabulary windows: contexts of WINDOW_LENGTH residues, free sites from FIRST_FREE_SITE (0-based; CDR1
# of the germline V genes).
WINDOW_LENGTH, FIRST_FREE_SITE = 32, 27
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
    MLM, else BBC News: the paper's MS MARCO is online only); `full`, whether the model is small enough for
    full-vocabulary windows, and `full_plan`, their (k, windows, temperatures), `full_windows` windows per k
    (0: the profile's) for k up to `full_k` (0: every k)."""
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
        temperatures=grid,
        protein=protein,
        passages=bt.PASSAGE_NAMES["germline" if protein else "bbc"],
        full=cond is not None and full_vocabulary(cond),
        full_plan=plan,
    )


# --------------------------------------------------------------------------------------------
# Exact influence, pseudo-likelihood laws and enumerable windows of a real model
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


def pseudo_likelihood_law(cond: Conditionals, n: int, temperature: float = 1.0, limit: int = 200_000):
    """The law proportional to exp(sum_i log p_tau(x_i | x_-i)) over all |V|^n states (lexicographic)."""
    check_enumerable(cond, n, limit)
    states = all_states(cond.vocab_size, n)
    total = torch.zeros(len(states), dtype=torch.float64)
    for site in range(n):
        logp = conditional_log_probs(cond, states, torch.full((len(states),), site), temperature).double()
        total += logp.gather(1, states[:, site : site + 1].to(logp.device)).squeeze(1).cpu()
    return torch.softmax(total, 0)


def window_token_set(cond: Conditionals, context, free_sites, k: int) -> torch.Tensor:
    """K = k shared tokens for a `WindowConditionals` window: the context's own tokens at the free sites,
    then the allowed tokens of highest summed probability p_1(a | x_-i) over the free sites."""
    x = check_tokens(cond, context, "context")[:1]
    sites = torch.as_tensor(free_sites).long()
    k = check_count(k, "k", len(set(x[0, sites].tolist())) + 1)
    probs = conditional_probs(cond, x.expand(len(sites), -1), sites.to(x.device)).double().sum(0).cpu()
    chosen = list(dict.fromkeys(x[0, sites].tolist()))
    for token in probs.argsort(descending=True).tolist():
        if len(chosen) == k:
            break
        if token not in chosen:
            chosen.append(token)
    return torch.tensor(chosen, dtype=torch.long)


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


def alpha_table(
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
        table["low"], table["high"] = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=1)
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


def crossing_text(tau_star: float, grid) -> str:
    """Where the context-averaged alpha drops below 1, in words."""
    if math.isinf(tau_star):
        return f"stays at or above 1 up to the grid's top, τ = {max(grid):g}"
    if tau_star <= min(grid):
        return f"is already below 1 at the grid's lowest temperature, τ = {tau_star:g}"
    return f"drops below 1 from τ = {tau_star:g} on"


def _alpha_at(alpha: pd.DataFrame, tau: float) -> pd.Series:
    """The row of the alpha table at temperature `tau` (the grid must hold it)."""
    match = alpha[np.isclose(alpha.temperature, tau)]
    if match.empty:
        raise ValueError(f"the temperature grid must contain tau = {tau}")
    return match.iloc[0]


def _alpha_text(row: pd.Series) -> str:
    """One alpha estimate in words: the mean over contexts, its bootstrap interval, the maximum over contexts."""
    missing = (
        "one context: no interval"
        if math.isfinite(row.alpha_mean)
        else "no estimate: the influence could not be computed"
    )
    digits = 2 if not abs(row.alpha_mean) < 0.05 else 4  # tiny alphas (near-uniform models) keep digits
    text = bt.interval_text(row.alpha_mean, row.low, row.high, digits=digits, missing=missing)
    if math.isfinite(row.alpha_mean):
        text += f", max over contexts {row.alpha_max:.{digits}f}"
    return text


def _alpha_rows(alpha: pd.DataFrame, model: str, setup: dict) -> list[dict]:
    """alpha_tau10 and alpha_tau11 (5.2, A.1): our lower-bound estimate at tau = 10 and 11 beside the paper's,
    each a model-specific row (judged only on the paper's model and protocol, else "other setup")."""
    rows = []
    for tau in PAPER_TEMPERATURES:
        row = _alpha_at(alpha, tau)
        rows.append(
            bt.model_specific_row(
                f"alpha_tau{tau}",
                f"alpha({tau}), mean over contexts (lower bound), bootstrap over contexts",
                row.alpha_mean,
                _alpha_text(row),
                model=model,
                setup=dict(setup, tau=tau),
                low=row.low,
                high=row.high,
            )
        )
    return rows


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


def threshold_table(profiles: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR):
    """Per chain: the grid's bracket on tau_fast and tau_alpha, the ratio's bounds and the chain's verdict."""
    rows = []
    for name, profile in profiles.groupby("chain", sort=False):
        ordered = profile.sort_values("temperature")
        _, fast_first = grid_threshold(ordered.temperature, ordered.t_mix <= fast * ordered.t_independent)
        alpha_before, alpha_first = grid_threshold(ordered.temperature, ordered.alpha < 1)
        verdict, reason, low, high = condition_thresholds(profile, fast, factor)
        rows.append(
            dict(
                chain=name,
                tau_fast=fast_first,
                tau_alpha=alpha_first,
                tau_alpha_above=alpha_before,
                ratio_low=low,
                ratio_high=high,
                verdict=verdict,
            )
        )
    return pd.DataFrame(rows)


def condition_thresholds(profile: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR):
    """One chain's profile judged by verdicts.rule_threshold_ratio: the reference condition is fast mixing
    (exact t_mix within `fast` times the independent-sites time), the claimed one alpha < 1."""
    ordered = profile.sort_values("temperature")
    quick = (ordered.t_mix <= fast * ordered.t_independent).to_numpy()
    return rule_threshold_ratio(
        ordered.temperature.to_numpy(),
        quick,
        (ordered.alpha < 1).to_numpy(),
        factor,
        names=("fast mixing", "alpha < 1"),
    )


def _ratio_text(row) -> str:
    """One chain's tau_alpha / tau_fast as the grid brackets it, in words (a `threshold_table` row)."""
    return (
        "no fast temperature on the grid"
        if not finite(row.ratio_low)
        else "alpha < 1 on the whole grid"
        if row.tau_alpha_above == 0
        else f"at least {row.ratio_low:.2g}"
        if math.isinf(row.ratio_high)
        else f"{row.ratio_low:.2g} to {row.ratio_high:.2g}"
    )


def _theorem5_row(profiles: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR) -> dict:
    """theorem5_bound_loose, a general claim (the paper's point in 5.2 and A.1: alpha < 1 needs tau > 10 on
    BERT, while the chain already mixes fast near tau = 1.5). On each enumerable chain (`profiles`: one
    `mixing_profile` per value of its `chain` column), tau_fast, the temperature from which the exact
    t_mix(1/4) stays within `fast` times the independent-sites time, against tau_alpha, the one from which the
    exact alpha stays below 1. Null: tau_alpha / tau_fast at most `factor`. Each chain by
    verdicts.rule_threshold_ratio (reproduced when the grid's lower bound on the ratio exceeds `factor`;
    differs when its upper bound does not, or alpha < 1 already wherever the chain mixes fast), the claim by
    verdicts.rule_every_part over the chains."""
    quantity = f"tau_alpha / tau_fast on exact chains (fast: t_mix(1/4) within {fast:g}x the independent sites' time)"
    table = threshold_table(profiles, fast, factor)
    texts = [f"{row.chain}: {_ratio_text(row)}" for row in table.itertuples()]
    verdict, reason = rule_every_part(table.verdict.tolist(), table.chain.tolist())
    estimate = float(table.ratio_low.min()) if len(table) and table.ratio_low.notna().all() else math.nan
    return bt.claim_row(
        "theorem5_bound_loose",
        quantity,
        estimate,
        "; ".join(texts) or "no chain",
        verdict,
        f"{reason}; null: ratio at most {factor:g}",
        null=factor,
    )


# --------------------------------------------------------------------------------------------
# The stationary law against the pseudo-likelihood law (beyond the paper, sections 4 and 7)
# --------------------------------------------------------------------------------------------


def pseudo_likelihood_from_joint(joint: torch.Tensor, q: int, n: int) -> torch.Tensor:
    """The pseudo-likelihood law of a joint law's own conditionals: proportional to prod_i pi(x_i | x_-i),
    over the q^n states in lexicographic order. For a compatible chain (its conditionals are pi's) this is
    `pseudo_likelihood_law` of the model."""
    law = torch.as_tensor(joint, dtype=torch.float64).clamp_min(0)
    if law.shape != (q**n,) or not law.sum() > 0:
        raise ValueError(f"joint must be a nonnegative law over {q}^{n} states, got shape {tuple(law.shape)}")
    cube = (law / law.sum()).reshape((q,) * n)
    total = torch.zeros_like(cube)
    for site in range(n):
        marginal = cube.sum(site, keepdim=True)
        total += torch.log(cube.clamp_min(1e-300)) - torch.log(marginal.clamp_min(1e-300))
    return torch.softmax(total.reshape(-1), 0)


def conditional_gap(cond: Conditionals, mu: torch.Tensor, n: int, temperature: float = 1.0) -> float:
    """E_{x ~ mu} (1/n) sum_i TV(p_tau(. | x_-i), mu(. | x_-i)): how far the model's conditionals are from
    those of the law `mu` (over the |V|^n states, lexicographic). 0 exactly when mu is the model's compatible
    joint; positive for an incompatible model whose mu has full support (equal conditionals would make mu
    compatible with them)."""
    q = cond.vocab_size
    states = all_states(q, n)
    cube = (mu / mu.sum()).reshape((q,) * n)
    total = 0.0
    for site in range(n):
        own = (cube / cube.sum(site, keepdim=True).clamp_min(1e-300)).movedim(site, -1).reshape(-1, q)
        first = (states[:, site] == 0).nonzero().squeeze(1)  # one state per x_-i, in the order of `own`
        model = conditional_probs(cond, states[first], torch.full((len(first),), site), temperature).double().cpu()
        gap = 0.5 * (model - own).abs().sum(1)  # [q^(n-1)], one per x_-i
        weight = cube.sum(site).reshape(-1)  # mu(x_-i)
        total += float((weight * gap).sum())
    return total / n


def stationary_vs_pseudo_likelihood(cond: Conditionals, n: int, temperature: float = 1.0, mu=None) -> dict:
    """The chain's stationary law mu_tau against pseudo-likelihood laws, on an enumerable chain.

    tv_model_pl: TV(mu_tau, PL law of the model's conditionals); tv_compatible_pl: TV(mu_tau, PL law of
    mu_tau's own conditionals), what a compatible chain with the same stationary law shows; pl_gap: TV between
    the two PL laws, 0 exactly for every compatible model (its conditionals are mu's) and the claim's effect;
    conditional_gap: the mu-averaged TV between the model's and mu's conditionals (see `conditional_gap`).
    `mu`: mu_tau when already solved (else solved here)."""
    mu = (exact_stationary(cond, n, temperature) if mu is None else torch.as_tensor(mu).double()).clamp_min(0)
    mu = mu / mu.sum()
    model_pl = pseudo_likelihood_law(cond, n, temperature)
    own_pl = pseudo_likelihood_from_joint(mu, cond.vocab_size, n)
    rank = bt.rank_correlation(mu.numpy(), model_pl.numpy())
    return dict(
        temperature=float(temperature),
        states=len(mu),
        tv_model_pl=float(total_variation(mu.log(), model_pl.log())),
        tv_compatible_pl=float(total_variation(mu.log(), own_pl.log())),
        pl_gap=float(0.5 * (model_pl - own_pl).abs().sum()),
        conditional_gap=conditional_gap(cond, mu, n, temperature),
        spearman=float(rank),
        top_state_same=bool(mu.argmax() == model_pl.argmax()),
    )


def _pseudo_likelihood_row(gaps, floor: float = PL_FLOOR) -> dict:
    """mu_vs_pseudolikelihood_tv, a general claim (beyond the paper): the model's incompatibility moves its
    pseudo-likelihood law away from the one of the law its chain samples. Per window an exact pl_gap =
    TV(PL law of the model, PL law of mu_tau's own conditionals), 0 (up to the rounding `floor`) for every
    compatible chain and never negative. The gaps are exact, not sampled, so the verdict is
    verdicts.rule_every_case_above: reproduced when every window lies above the floor, differs when none does,
    inconclusive when they disagree. The mean with its t interval over windows is shown beside it."""
    values = np.asarray(gaps, dtype=float)
    values = values[np.isfinite(values)]
    quantity = "TV(PL law of model, PL law of mu's own conditionals) per window (exact), tau 1"
    if len(values) == 0:
        return bt.claim_row(
            "mu_vs_pseudolikelihood_tv",
            quantity,
            math.nan,
            "no window could be solved",
            bt.INCONCLUSIVE,
            "no window: nothing to compare",
            null=floor,
        )
    estimate, low, high = mean_interval(values)
    verdict, reason = rule_every_case_above(values, floor, "a PL gap")
    text = bt.interval_text(estimate, low, high, significant=2, missing="one window")
    text += f" (mean over {len(values)} windows; {int((values > floor).sum())} above the floor {floor:g})"
    return bt.claim_row(
        "mu_vs_pseudolikelihood_tv",
        quantity,
        estimate,
        text,
        verdict,
        reason + " (null: 0, every compatible chain)",
        low=low,
        high=high,
        null=floor,
    )


# --------------------------------------------------------------------------------------------
# Exact chains on windows of the FULL vocabulary (a model with few tokens, e.g. a protein MLM)
# --------------------------------------------------------------------------------------------


def full_vocabulary(cond: Conditionals, limit: int = FULL_VOCABULARY_LIMIT) -> bool:
    """True when the model has at most `limit` allowed tokens: windows need no restricted token set."""
    return int(cond.allowed.sum()) <= limit


def window_contexts(cond: MaskedLMConditionals, n: int, count: int, seed: int = 0) -> pd.DataFrame:
    """`count` contexts [n] for full-vocabulary windows, one row each (label, family, chain, tokens): for a
    protein model one human germline V gene from each of the first `count` WINDOW_FAMILIES (distinct families),
    else `count` seed passages (family: their topic)."""
    count = check_count(count, "count", 1)
    if is_protein(cond):
        if count > len(WINDOW_FAMILIES):
            raise ValueError(f"at most {len(WINDOW_FAMILIES)} germline families, got count = {count}")
        picks = [seed_passages(cond, n, 1, seed=seed, topic=family) for family in WINDOW_FAMILIES[:count]]
        return pd.DataFrame(
            [
                dict(label=p.genes[0], family=p.families[0], chain=p.chains[0], text=p.texts[0], tokens=p.tokens[0])
                for p in picks
            ]
        )
    seeds = seed_passages(cond, n, count, seed=seed)
    return pd.DataFrame(
        [
            dict(label=f"passage {k}", family=topic, chain="", text=text, tokens=tokens)
            for k, (topic, text, tokens) in enumerate(zip(seeds.topics, seeds.texts, seeds.tokens))
        ]
    )


def site_conditionals(cond: Conditionals, k: int, temperature: float = 1.0) -> torch.Tensor:
    """[k, q^k]: p_tau(x_i | x_-i) of each state x (lexicographic) at each site i, fp64."""
    states = all_states(cond.vocab_size, k)
    out = []
    for site in range(k):
        logp = conditional_log_probs(cond, states, torch.full((len(states),), site), temperature).double().cpu()
        out.append(logp.gather(1, states[:, site : site + 1]).squeeze(1).exp())
    return torch.stack(out)


def window_mixing_time(
    cond: Conditionals,
    k: int,
    temperature: float,
    mu: torch.Tensor,
    eps: float = 0.25,
    max_steps: int = 20_000,
    chunk: int = 1000,
) -> float:
    """Exact t_mix(eps) = min{t : max_x TV(P^t(x, .), mu) <= eps} of the random-scan chain on q^k states,
    without matrix powers: P = (1/k) sum_i P_i and a row law m times P_i is m summed over x_i times
    p_tau(x_i | x_-i), so one step of every start costs O(k q^(2k)), not q^(3k). Each start's TV to mu never
    increases (mu P = mu, P contracts TV), so the starts run in chunks and t_mix is the chunks' maximum.
    math.inf beyond `max_steps`. Equals exact_mixing_time (tests)."""
    q = cond.vocab_size
    shape = (q,) * k
    probs = site_conditionals(cond, k, temperature).view(k, *shape).numpy()
    mu = torch.as_tensor(mu, dtype=torch.float64).numpy()
    states, worst = q**k, 0
    for start in range(0, states, chunk):
        rows = np.arange(start, min(start + chunk, states))
        m = np.zeros((len(rows), states))
        m[np.arange(len(rows)), rows] = 1.0
        t = 0
        while True:
            m = m[0.5 * np.abs(m - mu).sum(1) > eps]  # a start within eps stays within it: drop it
            if not len(m):
                break
            if t >= max_steps:
                return math.inf
            cube = m.reshape(len(m), *shape)
            m = sum(cube.sum(axis=1 + i, keepdims=True) * probs[i] for i in range(k)).reshape(len(m), -1) / k
            t += 1
        worst = max(worst, t)
    return float(worst)


def window_chain(
    window: Conditionals, k: int, temperature: float = 1.0, eps: float = 0.25
) -> tuple[dict, torch.Tensor]:
    """Everything exact about one window chain at one temperature, from one kernel: its size, how far the
    kernel's rows are from summing to 1 and mu_tau from stationary (both to 1e-12 or a bug), t_mix(eps), the
    exact alpha (c_ij over every window context), Theorem 5's bound, and mu_tau against the PL laws; and
    mu_tau itself."""
    temperature = check_temperature(temperature)
    kernel = glauber_kernel(window, k, temperature)
    system = kernel.numpy().T - np.eye(len(kernel))
    system[-1] = 1.0  # mu (P - I) = 0 with one equation replaced by the normalisation (LU, as the core does)
    mu = torch.from_numpy(np.linalg.solve(system, np.r_[np.zeros(len(kernel) - 1), 1.0]))
    row_error = float((kernel.sum(1) - 1).abs().max())
    stationarity = float((mu @ kernel - mu).abs().max())
    del kernel, system
    alpha = float(alpha_from_influence(exact_influence_coefficients(window, k, [temperature]))[0])
    t_mix = window_mixing_time(window, k, temperature, mu, eps)
    laws = stationary_vs_pseudo_likelihood(window, k, temperature, mu=mu)
    return dict(
        laws,
        k=k,
        temperature=temperature,
        row_error=row_error,
        stationarity=stationarity,
        mu_min=float(mu.min()),
        t_mix=t_mix,
        alpha=alpha,
        bound=mixing_time_bound(alpha, k, eps),
        t_independent=coupon_collector_time(k, eps),
    ), mu


def full_window_table(
    cond: MaskedLMConditionals,
    contexts: pd.DataFrame,
    k: int,
    temperatures,
    first_site: int,
    model: str,
    eps: float = 0.25,
) -> tuple[pd.DataFrame, list]:
    """Exact chains on k consecutive free sites from `first_site` of each context (`window_contexts`), over the
    model's full allowed vocabulary, at each temperature: one tidy row per (context, temperature), with the
    forwards the window took (cumulative) and the seconds per row; and per context and temperature
    (label, k, tau, token ids of the window's free sites per state, mu_tau, the model's PL law) for figures."""
    every = cond.allowed.cpu().nonzero().squeeze(1)
    sites = list(range(first_site, first_site + check_count(k, "k", 1)))
    rows, laws = [], []
    for context in contexts.itertuples():
        window = WindowConditionals(cond, context.tokens, sites, every)
        for tau in temperatures:
            start = time.perf_counter()
            result, mu = window_chain(window, k, float(tau), eps)
            laws.append(
                (
                    context.label,
                    k,
                    float(tau),
                    every[all_states(len(every), k)],
                    mu,
                    pseudo_likelihood_law(window, k, float(tau)),
                )
            )
            rows.append(
                dict(
                    model=model,
                    germline=context.label,
                    family=context.family,
                    chain=context.chain,
                    context=context.text,
                    sites=f"{sites[0]}-{sites[-1]}",
                    **result,
                    forwards=window.forwards,
                    seconds=time.perf_counter() - start,
                )
            )
    table = pd.DataFrame(rows)
    table["bound_ratio"] = table.bound / table.t_mix
    first = ["model", "germline", "family", "k", "temperature", "states", "t_mix", "alpha", "bound", "pl_gap"]
    return table[first + [c for c in table.columns if c not in first]], laws


def full_windows(cond: MaskedLMConditionals, plan, model: str, seed: int = 0) -> tuple[pd.DataFrame, list]:
    """`full_window_table` for each (k, windows, temperatures) of `plan` (settings' full_plan): contexts of
    WINDOW_LENGTH tokens, free sites from FIRST_FREE_SITE; the rows stacked, the laws concatenated."""
    parts, laws = [], []
    for k, count, temperatures in plan:
        contexts = window_contexts(cond, WINDOW_LENGTH, count, seed=seed)
        part, laws_k = full_window_table(cond, contexts, k, temperatures, FIRST_FREE_SITE, model)
        parts.append(part)
        laws += laws_k
    return pd.concat(parts, ignore_index=True), laws


def windows_at(table: pd.DataFrame, laws: list, temperature: float = 1.0) -> tuple[pd.DataFrame, list]:
    """The full-vocabulary windows at one temperature as section 7's windows: their rows (`germline` named
    `window`) and (token ids per state, mu_tau, PL law) per window."""
    rows = table[table.temperature == temperature].rename(columns={"germline": "window"})
    return rows, [(ids, mu, pl) for _, _, t, ids, mu, pl in laws if t == temperature]


def restricted_windows(
    cond: MaskedLMConditionals, n: int, count: int, free_sites, k: int, seed: int = 0, temperature: float = 1.0
) -> tuple[pd.DataFrame, list]:
    """Section 7's windows of a large-vocabulary model: in each of `count` seed passages of n tokens, the
    `free_sites` take the K = k tokens of `window_token_set`; per window a row of
    `stationary_vs_pseudo_likelihood` (with its index and text) and (token ids per state, mu_tau, PL law)."""
    passages = seed_passages(cond, n, count, seed=seed)
    m = len(free_sites)
    rows, laws = [], []
    for w, context in enumerate(passages.tokens):
        token_set = window_token_set(cond, context, free_sites, k)
        window = WindowConditionals(cond, context, free_sites, token_set)
        rows.append(
            dict(window=w, context=passages.texts[w], **stationary_vs_pseudo_likelihood(window, m, temperature))
        )
        laws.append(
            (
                token_set[all_states(len(token_set), m)],
                exact_stationary(window, m, temperature),
                pseudo_likelihood_law(window, m, temperature),
            )
        )
    return pd.DataFrame(rows), laws


def top_states(
    cond: MaskedLMConditionals, ids: torch.Tensor, mu: torch.Tensor, pl: torch.Tensor, count: int = 5
) -> pd.DataFrame:
    """A window's most likely fillings (the union of each law's top `count`), decoded, with mu_tau and the
    pseudo-likelihood law, most likely under mu_tau first."""
    top = torch.cat([mu.topk(count).indices, pl.topk(count).indices]).unique()
    return pd.DataFrame(
        {
            "filling": [cond.decode(ids[s]) for s in top],
            "mu_tau": mu[top].numpy(),
            "pseudo_likelihood": pl[top].numpy(),
        }
    ).sort_values("mu_tau", ascending=False)


def asymmetry_table(
    raw: torch.Tensor, field: torch.Tensor, asymmetries, q: int = 3, temperature: float = 1.0
) -> pd.DataFrame:
    """Potts chains J = S + a A (S, A the symmetric and antisymmetric parts of `raw`) for each a: TV of
    mu_tau from the pseudo-likelihood law and from the Gibbs law of S, and the PL gap (section 7)."""
    sym, anti = (raw + raw.T) / 2, (raw - raw.T) / 2
    n = len(raw)
    gibbs = PottsConditionals(sym, field, q).joint_log_probs(temperature)[1].exp()
    rows = []
    for a in asymmetries:
        potts = PottsConditionals(sym + a * anti, field, q)
        laws = stationary_vs_pseudo_likelihood(potts, n, temperature)
        mu = exact_stationary(potts, n, temperature)
        rows.append(
            dict(
                asymmetry=a,
                tv_pseudo_likelihood=laws["tv_model_pl"],
                pl_gap=laws["pl_gap"],
                tv_gibbs_of_symmetric_part=float(total_variation(mu.log(), gibbs.log())),
            )
        )
    return pd.DataFrame(rows)


def _window_checks(table: pd.DataFrame | None) -> list[dict]:
    """Checks of the full-vocabulary windows (none when they were not run): every kernel stochastic and every
    mu_tau stationary to 1e-12, and Theorem 5's bound at or above the exact t_mix wherever alpha < 1."""
    if table is None or table.empty:
        return []
    exact = float(max(table.row_error.max(), table.stationarity.max()))
    bounded = table[np.isfinite(table.bound)]
    return [
        check_row(
            "window_kernels",
            "full-vocabulary window kernels are stochastic and mu_tau stationary (to 1e-12)",
            exact <= 1e-12,
            f"largest error {exact:.1e} over {len(table)} windows",
        ),
        check_row(
            "theorem5_windows",
            "Theorem 5's bound is at least the exact t_mix on every full-vocabulary window with alpha < 1",
            bool((bounded.bound >= bounded.t_mix).all()),
            f"{len(bounded)} of {len(table)} windows have alpha < 1",
        ),
    ]


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


def drift_summary(drift: torch.Tensor, temperatures) -> pd.DataFrame:
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


def _drift_row(drift: torch.Tensor | None, model: str, setup: dict, missing: str = "") -> dict:
    """basin_drift_positive (5.4, Table 2), model-specific: the SHARE of sampled boundary states with
    delta_tau > 0 at every temperature run, with its Wilson interval, judged against the paper's band (a share)
    only on the paper's model and protocol (bt.model_specific_row), else "other setup"."""
    quantity = "share of boundary states with drift > 0 at every temperature run (Wilson interval)"
    if drift is None or drift.numel() == 0:
        return bt.model_specific_row(
            "basin_drift_positive",
            quantity,
            math.nan,
            missing or "not measured on this model",
            model=model,
            setup=setup,
        )
    positive = int((drift > 0).all(0).sum())
    states = drift.shape[1]
    low, high = (float(v[0]) for v in share_intervals([positive], [states]))
    text = f"{bt.share_text(positive, states)} positive at every temperature (min drift {drift.min().item():.3f})"
    return bt.model_specific_row(
        "basin_drift_positive", quantity, positive / states, text, model=model, setup=setup, low=low, high=high
    )


# --------------------------------------------------------------------------------------------
# Tables of estimates: influence, Lemma 6, Corollary 7, Theorem 8, score margins
# --------------------------------------------------------------------------------------------


def influence_frame(influence: torch.Tensor, temperatures) -> pd.DataFrame:
    """Every off-diagonal estimate of influence [T, C, n, n] as a tidy table: temperature, context, i, j, c_ij."""
    count, contexts, n, _ = influence.shape
    t, c, i, j = np.meshgrid(np.arange(count), np.arange(contexts), np.arange(n), np.arange(n), indexing="ij")
    off = (i != j).reshape(-1)
    return pd.DataFrame(
        {
            "temperature": np.asarray(temperatures, dtype=float)[t.reshape(-1)[off]],
            "context": c.reshape(-1)[off],
            "i": i.reshape(-1)[off],
            "j": j.reshape(-1)[off],
            "c_ij": influence.double().reshape(-1).numpy()[off],
        }
    )


def lemma6_table(influence: torch.Tensor, oscillation: torch.Tensor, temperatures) -> pd.DataFrame:
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


def corollary7_table(oscillation: torch.Tensor) -> pd.DataFrame:
    """Corollary 7's temperature max_i sum_j Delta_ij / 4, above which alpha < 1, from the oscillation
    [C, n, n] averaged over contexts and maximised over them."""
    reductions = {"mean over contexts": oscillation.mean(0), "max over contexts": oscillation.amax(0)}
    return pd.DataFrame(
        {
            "contexts": list(reductions),
            "corollary7_temperature": [alpha_from_influence(d).item() / 4 for d in reductions.values()],
        }
    )


def theorem8_table(cond: Conditionals, n: int, basin: torch.Tensor, temperatures) -> pd.DataFrame:
    """Theorem 8 on an enumerable basin at each temperature (glauber_core.theorem8_check), with how loose its
    escape bound (bound / exact) and its mixing-time bound (exact / bound) are."""
    table = pd.DataFrame([theorem8_check(cond, n, tau, basin) for tau in temperatures])
    return table.assign(
        escape_looseness=table.escape_bound / table.escape, t_mix_looseness=table.t_mix / table.t_mix_lower
    )


def _theorem8_holds(theorem8: pd.DataFrame) -> bool:
    """Both bounds of Theorem 8 hold at every temperature of `theorem8_table`."""
    return bool((theorem8.escape <= theorem8.escape_bound).all() and (theorem8.t_mix >= theorem8.t_mix_lower).all())


def margin_table(
    cond: MaskedLMConditionals, seeds: torch.Tensor, ends: torch.Tensor, cold: float, temperatures=(1.0,)
) -> pd.DataFrame:
    """Score margins Delta_i(x) (appendix A.1) of seed states and of chain endpoints at temperature `cold`: per
    state Delta_star = min_i Delta_i, the mean margin, the sites with a positive one, whether it is a perfect
    trap (all positive) and, for perfect traps, Theorem 8's bound e^(Delta_star/tau) / (4|V|) on t_mix at each
    of `temperatures` and `cold` (bound_tau_<tau>)."""
    states = torch.cat([seeds, ends])
    gaps = score_gaps(cond, states)
    size_v = int(cond.allowed.sum())
    delta_min = gaps.amin(1)
    margins = pd.DataFrame(
        {
            "state": [f"seed {k}" for k in range(len(seeds))] + [f"end {k} (tau {cold:g})" for k in range(len(ends))],
            "text": cond.decode_batch(states),
            "delta_star": delta_min.numpy(),
            "mean_gap": gaps.mean(1).numpy(),
            "positive_sites": (gaps > 0).sum(1).numpy(),
        }
    )
    margins["perfect_trap"] = margins.positive_sites == states.shape[1]
    for tau in (*temperatures, cold):
        margins[f"bound_tau_{tau:g}"] = np.where(
            margins.perfect_trap, np.exp(delta_min.numpy() / tau) / (4 * size_v), np.nan
        )
    return margins


# --------------------------------------------------------------------------------------------
# The chapter's claims and checks rows
# --------------------------------------------------------------------------------------------


def claim_rows(
    cfg: SimpleNamespace,
    model: str,
    alpha: pd.DataFrame,
    profiles: pd.DataFrame,
    drift: torch.Tensor | None,
    pl_gaps,
    no_drift: str = "",
) -> list[dict]:
    """The chapter's claims rows, in the order of paper_claims.csv: alpha_tau10 and alpha_tau11 from the alpha
    table, basin_drift_positive from the drifts (None: not run, `no_drift` says why), theorem5_bound_loose
    from the exact Potts profiles, mu_vs_pseudolikelihood_tv from the windows' PL gaps; the setups from the
    settings `cfg`."""
    alpha_setup = dict(
        seed_tokens=cfg.seq_len, contexts=cfg.n_contexts, candidates=cfg.top_k + 1, passages=cfg.passages
    )
    drift_setup = dict(
        N=cfg.drift_n,
        inside=DRIFT_INSIDE,
        states=cfg.drift_states,
        tau=" and ".join(f"{t:g}" for t in DRIFT_TEMPERATURES),
        filler=DRIFT_FILLER,
        passages=cfg.passages,
    )
    return [
        *_alpha_rows(alpha, model, alpha_setup),
        _drift_row(drift, model, drift_setup, missing=no_drift),
        _theorem5_row(profiles),
        _pseudo_likelihood_row(pl_gaps),
    ]


def check_rows(
    lemma6: pd.DataFrame,
    profiles: pd.DataFrame,
    theorem8: pd.DataFrame,
    asymmetry: pd.DataFrame,
    windows: pd.DataFrame | None = None,
) -> list[dict]:
    """The chapter's checks of its code path (theorems that must hold, and a control): Lemma 6 on every
    estimate, Theorem 5's bound on the exact Potts profiles, Theorem 8 on the Ising basin, the PL gap at the
    floor on the compatible Potts chain (a = 0) and above it on every other, and the full-vocabulary windows
    (`windows`, when run)."""
    violations = int(lemma6.violations.sum())
    tight = profiles[profiles.alpha < 1]
    control = control_check(
        asymmetry.pl_gap.iloc[0],
        {f"a = {a:g}": g for a, g in zip(asymmetry.asymmetry.iloc[1:], asymmetry.pl_gap.iloc[1:])},
        PL_FLOOR,
    )
    return [
        check_row(
            "lemma6", "c_ij <= Delta_ij / (4 tau) on every estimate", violations == 0, f"{violations} violations"
        ),
        check_row(
            "theorem5_bound",
            "the bound exceeds the exact t_mix wherever alpha < 1",
            bool((tight.bound >= tight.t_mix).all()),
            f"{len(tight)} cases",
        ),
        check_row(
            "theorem8_bounds",
            "escape and t_mix bounds of Theorem 8 hold on the Ising basin",
            _theorem8_holds(theorem8),
            f"{len(theorem8)} tau",
        ),
        check_row(
            "pl_gap_control", "the PL gap is 0 on a compatible chain and above the floor on incompatible ones", *control
        ),
        *_window_checks(windows),
    ]


# --------------------------------------------------------------------------------------------
# Sentences the prose quotes (glued by the notebook as ch2_<name>)
# --------------------------------------------------------------------------------------------


def theorem_phrase(holds: bool, what: str = "holds in every case, as it must") -> str:
    """A theorem check in words: it must hold; a failure is a bug."""
    return what if holds else "FAILS in some case (a bug in this code)"


def alpha_texts(alpha: pd.DataFrame, tau_star: float) -> dict:
    """Where the context-averaged alpha crosses 1, and alpha at the paper's tau = 10 and 11 in words."""
    return {
        "crossing": crossing_text(tau_star, alpha.temperature),
        **{f"alpha{tau}": _alpha_text(_alpha_at(alpha, tau)) for tau in PAPER_TEMPERATURES},
    }


def lemma6_texts(lemma6: pd.DataFrame) -> dict:
    """Lemma 6's violations, how many checks, and the range of the median share of the bound used."""
    return {
        "lemma6_violations": f"{int(lemma6.violations.sum())}",
        "lemma6_checks": f"{int(lemma6.pairs.sum()):,}",
        "lemma6_ratio": bt.range_text(lemma6.median_ratio),
    }


def corollary7_texts(table: pd.DataFrame, tau_star: float) -> dict:
    """Corollary 7's temperature (context-averaged Delta) and how far above the crossing of alpha it lies."""
    tau7 = float(table.corollary7_temperature[table.contexts == "mean over contexts"].iloc[0])
    factor = (
        f"{tau7 / tau_star:.1f} times"
        if math.isfinite(tau_star) and tau_star > 0
        else "not comparable with (no crossing on the grid)"
    )
    return {"tau7": f"{tau7:.1f}", "tau7_factor": factor}


def theorem5_texts(profiles: pd.DataFrame) -> dict:
    """Theorem 5 on the exact Potts profiles: where alpha < 1, whether the bound holds there and by how much it
    overshoots, the slowest chain where alpha >= 1, and the claim's ratios and verdict."""
    tight, unbounded = profiles[profiles.alpha < 1], profiles[profiles.alpha >= 1]
    row = _theorem5_row(profiles)
    return {
        "t5_cases": f"{len(tight)} of {len(profiles)}",
        "t5_holds": theorem_phrase(bool((tight.bound >= tight.t_mix).all())),
        "t5_ratio": bt.range_text(tight.ratio, 1),
        "t5_thresholds": row["ours_text"],
        "t5_unbounded_tmix": f"{unbounded.t_mix.max():.0f}",
        "t5_verdict": f"{row['verdict']} ({row['reason']})",
    }


def theorem8_texts(theorem8: pd.DataFrame) -> dict:
    """Whether Theorem 8's bounds hold, and the range of how loose each is."""
    return {
        "t8_holds": theorem_phrase(_theorem8_holds(theorem8), "Both bounds hold"),
        "t8_escape": bt.range_text(theorem8.escape_looseness, 3, "g"),
        "t8_tmix": bt.range_text(theorem8.t_mix_looseness, 3, "g"),
    }


def margin_texts(margins: pd.DataFrame, cond: Conditionals, n: int) -> dict:
    """How many states are perfect traps, their n sites, and the model's |V|."""
    return {
        "perfect_traps": f"{int(margins.perfect_trap.sum())} of {len(margins)}",
        "sites": f"{n}",
        "size_v": f"{int(cond.allowed.sum()):,}",
    }


def drift_texts(summary: pd.DataFrame | None, reason: str = "") -> dict:
    """Sentences for the drift section, per temperature, and whether the certificate holds."""
    if summary is None or summary.empty:
        return {"drift_result": f"could not be computed: {reason}", "drift_phrase": "is not available"}
    parts = [
        f"at τ = {r.temperature:g}, {r.positive} of {r.states} positive (median {r.median:.2f}, min {r.min:.2f})"
        for r in summary.itertuples()
    ]
    holds = bool((summary.positive == summary.states).all())
    return {"drift_result": "; ".join(parts), "drift_phrase": "holds" if holds else "fails"}


def window_texts(windows: pd.DataFrame) -> dict:
    """Sentences for the window comparison (TV of each pseudo-likelihood law from mu_tau, over windows)."""
    return {
        "window_count": f"{len(windows)}",
        "window_tv_model": bt.range_text(windows.tv_model_pl),
        "window_tv_own": bt.range_text(windows.tv_compatible_pl),
        "window_pl_gap": bt.range_text(windows.pl_gap, 2, "e"),
        "window_conditional_gap": bt.range_text(windows.conditional_gap, 3),
        "window_spearman": bt.range_text(windows.spearman),
    }


def asymmetry_texts(asymmetry: pd.DataFrame) -> dict:
    """The Potts chain's distances at the smallest and the largest asymmetry (potts_a<a>)."""
    ends = asymmetry.set_index("asymmetry").iloc[[0, -1]]
    return {
        f"potts_a{int(a)}": (
            f"{row.tv_gibbs_of_symmetric_part:.2g} from the Gibbs law of S and "
            f"{row.tv_pseudo_likelihood:.2f} from the pseudo-likelihood law "
            f"(PL gap {row.pl_gap:.2g})"
        )
        for a, row in ends.iterrows()
    }


def full_window_texts(table: pd.DataFrame | None, plan) -> dict:
    """The full-vocabulary windows in words (section 8): what ran, the exact t_mix, where Theorem 5 gives a
    bound and how far it overshoots, the PL gap at tau = 1; "not computed" when they did not run."""
    names = ("full_rows", "full_plan", "full_tmix", "full_bounded", "full_ratio", "full_pl_gap")
    if table is None:
        return {name: f"not computed (more than {FULL_VOCABULARY_LIMIT} tokens)" for name in names}
    bounded = table[np.isfinite(table.bound)]
    return dict(
        zip(
            names,
            (
                f"{len(table)}",
                "; ".join(
                    f"k = {k}: {count} germlines at tau = " + ", ".join(f"{t:g}" for t in temperatures)
                    for k, count, temperatures in plan
                ),
                bt.range_text(table.t_mix, 0),
                f"{len(bounded)} of {len(table)}",
                bt.range_text(bounded.bound / bounded.t_mix, 1),
                bt.range_text(table[table.temperature == 1.0].pl_gap, 2, "e"),
            ),
        )
    )


# --------------------------------------------------------------------------------------------
# Tables for the page (bt.reading_table: no index, formatted numbers, a dash for missing)
# --------------------------------------------------------------------------------------------


def corollary7_view(corollary7: pd.DataFrame):
    """Corollary 7's temperature, from the oscillation averaged and maximised over contexts."""
    return bt.reading_table(
        corollary7.rename(
            columns={"contexts": "oscillation", "corollary7_temperature": "Corollary 7's τ (α < 1 above)"}
        ),
        formats={"Corollary 7's τ (α < 1 above)": "{:.1f}"},
    )


def drift_view(drift_table: pd.DataFrame):
    """The '!'-basin's drift per temperature: boundary states, least and median drift, how many positive."""
    return bt.reading_table(
        drift_table.rename(columns={"min": "least drift", "median": "median drift", "positive": "positive drifts"}),
        formats={"temperature": "{:g}"},
    )


def lemma6_view(lemma6: pd.DataFrame):
    """Lemma 6 per temperature: pairs checked, violations, the least slack and the median share of the bound."""
    return bt.reading_table(
        lemma6.rename(columns={"min_slack": "least slack", "median_ratio": "median c / bound"}),
        formats={"temperature": "{:g}"},
    )


def thresholds_view(thresholds: pd.DataFrame):
    """Per chain (judged and calibration): tau_fast, tau_alpha, their ratio as the grid brackets it, verdict."""
    ratios = [_ratio_text(row) for row in thresholds.itertuples()]
    view = pd.DataFrame(
        {
            "chain": thresholds.chain,
            "role": thresholds.role,
            "τ_fast": thresholds.tau_fast,
            "τ_α": thresholds.tau_alpha,
            "τ_α / τ_fast": ratios,
            "verdict": thresholds.verdict,
        }
    )
    return bt.reading_table(view, formats={"τ_fast": _grid_value, "τ_α": _grid_value})


def _grid_value(value: float) -> str:
    """A threshold on the grid; inf (it holds nowhere up to the top) in words."""
    return "above the grid" if math.isinf(value) else f"{value:g}"


def theorem8_view(theorem8: pd.DataFrame):
    """Theorem 8 per temperature: exact escape against its bound, exact t_mix against its lower bound."""
    view = theorem8[["temperature", "escape", "escape_bound", "t_mix", "t_mix_lower", "t_mix_looseness"]]
    return bt.reading_table(
        view.rename(
            columns={
                "escape_bound": "escape bound",
                "t_mix_lower": "t_mix lower bound",
                "t_mix_looseness": "t_mix / bound",
            }
        ),
        formats={"temperature": "{:g}", "t_mix": "{:,.0f}"},
    )


def margins_view(margins: pd.DataFrame):
    """Per state: its text, Delta_star, how many sites have a positive margin, and Theorem 8's bound on t_mix
    where it is a perfect trap (a dash elsewhere)."""
    bounds = [c for c in margins.columns if c.startswith("bound_tau_")]
    view = margins[["state", "text", "delta_star", "positive_sites", *bounds]]
    return bt.reading_table(
        view.rename(
            columns={
                "delta_star": "Δ*",
                "positive_sites": "sites with Δ_i > 0",
                **{c: f"bound, τ = {c.removeprefix('bound_tau_')}" for c in bounds},
            }
        )
    )


def windows_view(windows: pd.DataFrame):
    """Per window: mu_tau's TV from the model's and from its own PL law, the PL gap, the conditional gap and
    the rank correlation of mu_tau with the model's PL law."""
    view = windows[["window", "tv_model_pl", "tv_compatible_pl", "pl_gap", "conditional_gap", "spearman"]]
    return bt.reading_table(
        view.rename(
            columns={
                "tv_model_pl": "TV(μ, model's PL)",
                "tv_compatible_pl": "TV(μ, own PL)",
                "pl_gap": "PL gap",
                "conditional_gap": "conditional gap",
                "spearman": "Spearman",
            }
        )
    )


def full_windows_view(table: pd.DataFrame):
    """Per full-vocabulary window and temperature: the exact t_mix, the exact alpha and Theorem 5's bound."""
    view = table[["germline", "k", "temperature", "t_mix", "alpha", "bound"]]
    return bt.reading_table(view, formats={"temperature": "{:g}", "t_mix": "{:,.0f}"})


# --------------------------------------------------------------------------------------------
# Figures (each returns its Figure)
# --------------------------------------------------------------------------------------------


def alpha_figure(alpha: pd.DataFrame, tau_star: float, model: str, n: int):
    """alpha(tau) averaged and maximised over contexts, with the bootstrap band, the paper's BERT values at
    tau = 10 and 11 and our crossing of 1."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(alpha.temperature, alpha.alpha_mean, "o-", label="mean over contexts")
    ax.plot(alpha.temperature, alpha.alpha_max, "s--", label="max over contexts")
    ax.fill_between(alpha.temperature, alpha.low, alpha.high, alpha=0.2, label="95% bootstrap interval over contexts")
    ax.plot(
        list(PAPER_TEMPERATURES),
        [bt.paper_number(f"alpha_tau{t}", "value") for t in PAPER_TEMPERATURES],
        "k*",
        ms=12,
        label="paper, BERT",
    )
    ax.axhline(1, color="grey", lw=1)
    if math.isfinite(tau_star):
        ax.axvline(tau_star, color="C2", ls=":", label=rf"ours: $\alpha < 1$ from $\tau$ = {tau_star:g}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"temperature $\tau$",
        ylabel=r"$\hat\alpha(\tau)$ (lower bound)",
        title=rf"Influence sum, {model}, n = {n}",
    )
    ax.legend()
    return fig


def influence_figure(influence: torch.Tensor, temperatures, temperature: float = 10.0):
    """The context-averaged c_ij at the grid temperature nearest `temperature`, as a heatmap (row i: the
    site whose conditional moves; column j: the site that changes)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    temperatures = np.asarray(temperatures, dtype=float)
    at = int(np.argmin(np.abs(temperatures - temperature)))
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    sns.heatmap(influence[at].mean(0).numpy(), cmap="mako_r", square=True, cbar_kws={"label": r"$\hat c_{ij}$"}, ax=ax)
    ax.set(
        xlabel="changed site j",
        ylabel="updated site i",
        title=rf"$\hat c_{{ij}}$ at $\tau$ = {temperatures[at]:g}, mean of {influence.shape[1]} contexts",
    )
    return fig


def bound_figure(alpha: pd.DataFrame, n: int):
    """Theorem 5's bound on t_mix(1/4) from the estimated alpha, where it is below 1 (`theorem5_bounds`)."""
    import matplotlib.pyplot as plt

    bounded = alpha[np.isfinite(alpha.bound_mean)]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(bounded.temperature, bounded.bound_mean, "o-", label="mean over contexts")
    ax.plot(bounded.temperature, bounded.bound_max, "s--", label="max over contexts")
    ax.set(
        xscale="log",
        xlabel=r"temperature $\tau$",
        ylabel=r"bound on $t_{\mathrm{mix}}(1/4)$ (steps)",
        title=f"Theorem 5 with the estimated alpha, n = {n}",
    )
    if len(bounded):
        ax.set_yscale("log")
        ax.legend()
    return fig


def potts_mixing_figure(profiles: pd.DataFrame):
    """Exact t_mix(1/4) against Theorem 5's bound per Potts chain, with the fast-mixing line of the rule."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for k, (name, part) in enumerate(profiles.groupby("chain")):
        ax.plot(part.temperature, part.t_mix, "o-", color=f"C{k}", label=f"{name}: exact")
        ax.plot(part.temperature, part.bound, "s--", color=f"C{k}", label=f"{name}: Theorem 5")
    ax.axhline(
        FAST_FACTOR * profiles.t_independent.iloc[0],
        color="grey",
        lw=1,
        ls=":",
        label="fast: twice the independent sites' time",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"temperature $\tau$",
        ylabel=r"$t_{\mathrm{mix}}(1/4)$ (steps)",
        title="Potts chain, 5 sites, 3 colours: exact vs bound",
    )
    ax.legend(fontsize=8)
    return fig


def asymmetry_figure(asymmetry: pd.DataFrame):
    """The Potts chain's distances and PL gap as its asymmetry grows (`asymmetry_table`)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(asymmetry.asymmetry, asymmetry.tv_pseudo_likelihood, "o-", label=r"TV($\mu_\tau$, pseudo-likelihood law)")
    ax.plot(asymmetry.asymmetry, asymmetry.tv_gibbs_of_symmetric_part, "s--", label=r"TV($\mu_\tau$, Gibbs law of $S$)")
    ax.plot(asymmetry.asymmetry, asymmetry.pl_gap, "^:", label="PL gap (model's PL law vs $\\mu_\\tau$'s)")
    ax.set(
        xlabel=r"asymmetry $a$ in $J = S + aA$",
        ylabel="total variation",
        ylim=(0, None),
        title=r"Potts chain, 5 sites, 3 colours, $\tau = 1$",
    )
    ax.legend()
    return fig


def full_windows_figure(table: pd.DataFrame, laws: list):
    """Left: exact t_mix against Theorem 5's bound per full-vocabulary window (a triangle at the bottom where
    alpha >= 1 gives none); right: mu_tau against the model's PL law per state at tau = 1."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    ax = axes[0]
    for k, part in table.groupby("k"):
        ax.scatter(part.t_mix, part.bound.where(np.isfinite(part.bound)), label=f"k = {k}, alpha < 1", s=30)
        cap = part[~np.isfinite(part.bound)]
        ax.scatter(cap.t_mix, np.full(len(cap), 0.9), marker="v", label=f"k = {k}, alpha >= 1 (no bound)", s=30)
    line = [1, max(table.t_mix.max(), 10)]
    ax.plot(line, line, color="grey", lw=1, label="bound = exact")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"exact $t_{\mathrm{mix}}(1/4)$",
        ylabel="Theorem 5's bound (exact alpha)",
        title="Full-vocabulary windows: exact vs bound",
    )
    ax.legend(fontsize=8)
    ax = axes[1]
    for label, k, t, _ids, mu, pl in laws:
        if t == 1.0:
            ax.scatter(pl.numpy(), mu.numpy(), s=4, alpha=0.5, label=f"{label}, k = {k}")
    ax.plot([1e-12, 1], [1e-12, 1], color="grey", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(1e-12, 1),
        ylim=(1e-12, 1),
        xlabel="pseudo-likelihood law",
        ylabel=r"$\mu_\tau$",
        title=r"$\mu_\tau$ against the PL law, $\tau = 1$",
    )
    ax.legend(fontsize=7, markerscale=3)
    return fig
