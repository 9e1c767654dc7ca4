"""Chapter 2: mixing bounds on real and enumerable chains (section 5, appendix A.1, Table 2).

Imports the core (and the book's intervals and verdict rules); never another chapter module.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from verdicts import rule_every_case_above, finite, grid_threshold, mean_interval, rule_every_part, rule_one_sided, rule_threshold_ratio, share_intervals
from glauber_core import (
    Conditionals,
    MaskedLMConditionals,
    PottsConditionals,
    alpha_from_influence,
    all_states,
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
    mixing_time_bound,
    seed_passages,
    total_variation,
)

NOTEBOOK = "02_mixing_bounds"
# theorem5_bound_loose, fixed before the run: a chain "mixes fast" at tau when its exact t_mix(1/4) is within
# FAST_FACTOR times the independent-sites time at the same n; the claim needs tau_alpha > CONDITION_FACTOR *
# tau_fast (the paper: tau > 10 against about 1.5 on BERT).
FAST_FACTOR = 2.0
CONDITION_FACTOR = 2.0
PL_FLOOR = 1e-9  # mu_vs_pseudolikelihood_tv: the rounding floor of an exactly computed TV
# Exact window chains over the model's FULL vocabulary run when it has at most this many allowed tokens
# (a protein MLM's 20 residues: 20^k states for k free sites).
FULL_VOCABULARY_LIMIT = 32
# The germline families of the full-vocabulary windows, in order (distinct families, heavy, kappa, lambda).
WINDOW_FAMILIES = ("IGHV3", "IGKV1", "IGHV1", "IGLV2", "IGHV4", "IGKV3", "IGLV1", "IGHV5")


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


class RestrictedConditionals:
    """A real model's chain on a window small enough to enumerate (beyond the paper, section 7).

    `free_sites` (m of them) of a frozen `context` each take a value in `token_set` (K ids); the
    conditional at a free site is the model's, renormalised over that set. Tokens are 0..K-1 (indices into
    `token_set`), so `glauber_kernel`, `exact_stationary` and friends apply unchanged to the K^m states.
    The model's scores are cached per (site, rest of the window): each is computed once.
    """

    def __init__(self, cond: Conditionals, context, free_sites, token_set, max_rows: int = 256):
        self.base = cond
        self.context = check_tokens(cond, context, "context")
        if self.context.shape[0] != 1:
            raise ValueError(f"context must be one state [n], got {tuple(self.context.shape)}")
        n = self.context.shape[1]
        self.token_set = check_tokens(cond, token_set, "token_set")[0]
        if len(set(self.token_set.tolist())) != len(self.token_set) or len(self.token_set) < 2:
            raise ValueError("token_set must hold at least two distinct token ids")
        sites = torch.as_tensor(free_sites)
        if sites.dim() != 1 or len(sites) == 0 or sites.is_floating_point() or len(set(sites.tolist())) != len(sites):
            raise ValueError(f"free_sites must be distinct site indices, got {free_sites!r}")
        if ((sites < 0) | (sites >= n)).any():
            raise ValueError(f"free_sites must lie in [0, {n}), got {sites.tolist()}")
        self.free_sites = sites.long()
        self.vocab_size = len(self.token_set)
        self.max_sites = len(sites)
        self.allowed = torch.ones(self.vocab_size, dtype=torch.bool)
        self.device = torch.device("cpu")
        self.max_rows = check_count(max_rows, "max_rows", 1)
        self.name_or_path = f"restricted({getattr(cond, 'name_or_path', type(cond).__name__)}, sites={sites.tolist()})"
        self._cache = torch.zeros(self.max_sites, self.vocab_size**self.max_sites, self.vocab_size,
                                  dtype=torch.float64)
        self._known = torch.zeros(self.max_sites, self.vocab_size**self.max_sites, dtype=torch.bool)
        self.forwards = 0

    def full_states(self, tokens: torch.Tensor) -> torch.Tensor:
        """The model's token ids [B, n] for window states [B, m] (values 0..K-1)."""
        states = self.context.cpu().repeat(len(tokens), 1)
        states[:, self.free_sites] = self.token_set.cpu()[tokens.cpu()]
        return states

    def log_scores(self, tokens, positions):
        tokens, positions = tokens.cpu(), positions.cpu()
        place = self.vocab_size ** torch.arange(self.max_sites - 1, -1, -1)
        rows = torch.arange(len(tokens))
        keys = (tokens * place).sum(1) - tokens[rows, positions] * place[positions]  # the masked site's value is moot
        missing = torch.unique(torch.stack([positions, keys], 1)[~self._known[positions, keys]], dim=0)
        for start in range(0, len(missing), self.max_rows):
            site, key = missing[start : start + self.max_rows].unbind(1)
            window = (key.unsqueeze(1) // place) % self.vocab_size
            scores = self.base.log_scores(self.full_states(window).to(self.context.device),
                                          self.free_sites[site].to(self.context.device))
            self._cache[site, key] = scores.cpu().double()[:, self.token_set.cpu()]
            self._known[site, key] = True
            self.forwards += len(site)
        return self._cache[positions, keys]


def window_token_set(cond: Conditionals, context, free_sites, k: int) -> torch.Tensor:
    """K = k shared tokens for a `RestrictedConditionals` window: the context's own tokens at the free sites,
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


def drift_boundary_states(cond: MaskedLMConditionals, token_id: int, n: int, count: int, inside: float = 0.9,
                          seed: int = 0) -> torch.Tensor:
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

def alpha_table(influence: torch.Tensor, temperatures, resamples: int = 1000, seed: int = 0,
                level: float = 0.95) -> pd.DataFrame:
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
    table = pd.DataFrame({
        "tau": taus,
        "alpha_mean": influence.mean(1).sum(-1).amax(-1).numpy(),
        "alpha_max": influence.amax(1).sum(-1).amax(-1).numpy(),
        "low": math.nan, "high": math.nan, "contexts": contexts})
    if contexts >= 2:
        generator = torch.Generator().manual_seed(seed)
        draws = torch.randint(0, contexts, (check_count(resamples, "resamples", 1), contexts),
                              generator=generator)
        weights = torch.zeros(len(draws), contexts, dtype=torch.float64)
        weights.scatter_add_(1, draws, torch.ones_like(draws, dtype=torch.float64))
        boot = torch.einsum("bc,tcij->tbij", weights / contexts, influence).sum(-1).amax(-1).numpy()
        table["low"], table["high"] = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=1)
    return table


def crossing_temperature(alpha: pd.DataFrame, column: str = "alpha_mean") -> float:
    """The smallest grid temperature above which alpha stays below 1 (math.inf when it never drops below 1
    on the grid; the smallest grid temperature when it is below 1 everywhere)."""
    ordered = alpha.sort_values("tau")
    above = ordered[ordered[column] >= 1]
    if above.empty:
        return float(ordered.tau.iloc[0])
    later = ordered[ordered.tau > above.tau.max()]
    return float(later.tau.iloc[0]) if len(later) else math.inf


def crossing_text(tau_star: float, grid) -> str:
    """Where the context-averaged alpha drops below 1, in words."""
    if math.isinf(tau_star):
        return f"stays at or above 1 up to the grid's top, τ = {max(grid):g}"
    if tau_star <= min(grid):
        return f"is already below 1 at the grid's lowest temperature, τ = {tau_star:g}"
    return f"drops below 1 from τ = {tau_star:g} on"


def alpha_rows(alpha: pd.DataFrame, model: str, setup: dict) -> list[dict]:
    """alpha_tau10 and alpha_tau11: our lower-bound estimate at tau = 10 and 11 beside the paper's, each a
    model-specific row (judged only on the paper's model and protocol, else "other setup")."""
    rows = []
    for tau in (10, 11):
        match = alpha[np.isclose(alpha.tau, tau)]
        if match.empty:
            raise ValueError(f"the temperature grid must contain tau = {tau}")
        row = match.iloc[0]
        missing = ("one context: no interval" if math.isfinite(row.alpha_mean)
                   else "no estimate: the influence could not be computed")
        digits = 2 if not abs(row.alpha_mean) < 0.05 else 4  # tiny alphas (near-uniform models) keep digits
        text = bt.interval_text(row.alpha_mean, row.low, row.high, digits=digits, missing=missing)
        if math.isfinite(row.alpha_mean):
            text += f", max over contexts {row.alpha_max:.{digits}f}"
        rows.append(bt.model_specific_row(
            f"alpha_tau{tau}", f"alpha({tau}), mean over contexts (lower bound), bootstrap over contexts",
            row.alpha_mean, text, model=model, setup=dict(setup, tau=tau), low=row.low, high=row.high))
    return rows


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
    table = pd.DataFrame({"tau": taus, "alpha": alphas, "t_mix": t_mix,
                          "bound": [mixing_time_bound(a, n, eps) for a in alphas],
                          "t_independent": coupon_collector_time(n, eps)})
    return table.assign(ratio=table.bound / table.t_mix)


def mixing_profiles(chains: dict, n: int, temperatures, eps: float = 0.25) -> pd.DataFrame:
    """`mixing_profile` of each named chain, stacked with a `chain` column."""
    return pd.concat([mixing_profile(cond, n, temperatures, eps).assign(chain=name)
                      for name, cond in chains.items()], ignore_index=True)


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
    return {"independent sites": PottsConditionals(torch.zeros(n, n), q=2),
            "Curie-Weiss": PottsConditionals(4 * coupling / n * torch.ones(n, n), q=2),
            "ferromagnet in a balancing field": PottsConditionals(coupling * torch.ones(n, n), field, q=2)}


def threshold_table(profiles: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR):
    """Per chain: the grid's bracket on tau_fast and tau_alpha, the ratio's bounds and the chain's verdict."""
    rows = []
    for name, profile in profiles.groupby("chain", sort=False):
        ordered = profile.sort_values("tau")
        fast_before, fast_first = grid_threshold(ordered.tau, ordered.t_mix <= fast * ordered.t_independent)
        alpha_before, alpha_first = grid_threshold(ordered.tau, ordered.alpha < 1)
        verdict, reason, low, high = condition_thresholds(profile, fast, factor)
        rows.append(dict(chain=name, tau_fast=fast_first, tau_alpha=alpha_first,
                         tau_alpha_above=alpha_before, ratio_low=low, ratio_high=high, verdict=verdict))
    return pd.DataFrame(rows)


def condition_thresholds(profile: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR):
    """One chain's profile judged by verdicts.rule_threshold_ratio: the reference condition is fast mixing
    (exact t_mix within `fast` times the independent-sites time), the claimed one alpha < 1."""
    ordered = profile.sort_values("tau")
    quick = (ordered.t_mix <= fast * ordered.t_independent).to_numpy()
    return rule_threshold_ratio(ordered.tau.to_numpy(), quick, (ordered.alpha < 1).to_numpy(), factor,
                                names=("fast mixing", "alpha < 1"))


def theorem5_row(profiles: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR) -> dict:
    """theorem5_bound_loose, a general claim (the paper's point in 5.2 and A.1: alpha < 1 needs tau > 10 on
    BERT, while the chain already mixes fast near tau = 1.5). On each enumerable chain (`profiles`: one
    `mixing_profile` per value of its `chain` column), tau_fast, the temperature from which the exact
    t_mix(1/4) stays within `fast` times the independent-sites time, against tau_alpha, the one from which the
    exact alpha stays below 1. Null: tau_alpha / tau_fast at most `factor`. Each chain by
    verdicts.rule_threshold_ratio (reproduced when the grid's lower bound on the ratio exceeds `factor`;
    differs when its upper bound does not, or alpha < 1 already wherever the chain mixes fast), the claim by
    verdicts.rule_every_part over the chains."""
    quantity = (f"tau_alpha / tau_fast on exact chains (fast: t_mix(1/4) within {fast:g}x the independent "
                f"sites' time)")
    table = threshold_table(profiles, fast, factor)
    texts = [f"{row.chain}: " + ("no fast temperature on the grid" if not finite(row.ratio_low) else
                                 "alpha < 1 on the whole grid" if row.tau_alpha_above == 0 else
                                 f"at least {row.ratio_low:.2g}" if math.isinf(row.ratio_high) else
                                 f"{row.ratio_low:.2g} to {row.ratio_high:.2g}")
             for row in table.itertuples()]
    verdict, reason = rule_every_part(table.verdict.tolist(), table.chain.tolist())
    estimate = float(table.ratio_low.min()) if len(table) and table.ratio_low.notna().all() else math.nan
    return bt.claim_row("theorem5_bound_loose", quantity, estimate, "; ".join(texts) or "no chain",
                        verdict, f"{reason}; null: ratio at most {factor:g}", null=factor)


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
    return dict(tau=float(temperature), states=len(mu),
                tv_model_pl=float(total_variation(mu.log(), model_pl.log())),
                tv_compatible_pl=float(total_variation(mu.log(), own_pl.log())),
                pl_gap=float(0.5 * (model_pl - own_pl).abs().sum()),
                conditional_gap=conditional_gap(cond, mu, n, temperature),
                spearman=float(rank), top_state_same=bool(mu.argmax() == model_pl.argmax()))


def pseudo_likelihood_row(gaps, floor: float = PL_FLOOR) -> dict:
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
        return bt.claim_row("mu_vs_pseudolikelihood_tv", quantity, math.nan, "no window could be solved",
                            bt.INCONCLUSIVE, "no window: nothing to compare", null=floor)
    estimate, low, high = mean_interval(values)
    verdict, reason = rule_every_case_above(values, floor, "a PL gap")
    text = bt.interval_text(estimate, low, high, significant=2, missing="one window")
    text += f" (mean over {len(values)} windows; {int((values > floor).sum())} above the floor {floor:g})"
    return bt.claim_row("mu_vs_pseudolikelihood_tv", quantity, estimate, text, verdict,
                        reason + " (null: 0, every compatible chain)", low=low, high=high, null=floor)


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
    if getattr(cond, "residues", False):
        if count > len(WINDOW_FAMILIES):
            raise ValueError(f"at most {len(WINDOW_FAMILIES)} germline families, got count = {count}")
        picks = [seed_passages(cond, n, 1, seed=seed, topic=family) for family in WINDOW_FAMILIES[:count]]
        return pd.DataFrame([dict(label=p.genes[0], family=p.families[0], chain=p.chains[0], text=p.texts[0],
                                  tokens=p.tokens[0]) for p in picks])
    seeds = seed_passages(cond, n, count, seed=seed)
    return pd.DataFrame([dict(label=f"passage {k}", family=topic, chain="", text=text, tokens=tokens)
                         for k, (topic, text, tokens) in enumerate(zip(seeds.topics, seeds.texts, seeds.tokens))])


def site_conditionals(cond: Conditionals, k: int, temperature: float = 1.0) -> torch.Tensor:
    """[k, q^k]: p_tau(x_i | x_-i) of each state x (lexicographic) at each site i, fp64."""
    states = all_states(cond.vocab_size, k)
    out = []
    for site in range(k):
        logp = conditional_log_probs(cond, states, torch.full((len(states),), site), temperature).double().cpu()
        out.append(logp.gather(1, states[:, site : site + 1]).squeeze(1).exp())
    return torch.stack(out)


def window_mixing_time(cond: Conditionals, k: int, temperature: float, mu: torch.Tensor, eps: float = 0.25,
                       max_steps: int = 20_000, chunk: int = 1000) -> float:
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


def window_chain(window: Conditionals, k: int, temperature: float = 1.0, eps: float = 0.25
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
    return dict(laws, k=k, temperature=temperature, row_error=row_error, stationarity=stationarity,
                mu_min=float(mu.min()), t_mix=t_mix, alpha=alpha, bound=mixing_time_bound(alpha, k, eps),
                t_independent=coupon_collector_time(k, eps)), mu


def full_window_table(cond: MaskedLMConditionals, contexts: pd.DataFrame, k: int, temperatures, first_site: int,
                      model: str, eps: float = 0.25) -> tuple[pd.DataFrame, list]:
    """Exact chains on k consecutive free sites from `first_site` of each context (`window_contexts`), over the
    model's full allowed vocabulary, at each temperature: one tidy row per (context, temperature), with the
    forwards the window took (cumulative) and the seconds per row; and per context and temperature
    (label, k, tau, token ids of the window's free sites per state, mu_tau, the model's PL law) for figures."""
    import time

    every = cond.allowed.cpu().nonzero().squeeze(1)
    sites = list(range(first_site, first_site + check_count(k, "k", 1)))
    rows, laws = [], []
    for context in contexts.itertuples():
        window = RestrictedConditionals(cond, context.tokens, sites, every)
        for tau in temperatures:
            start = time.perf_counter()
            result, mu = window_chain(window, k, float(tau), eps)
            laws.append((context.label, k, float(tau), every[all_states(len(every), k)], mu,
                         pseudo_likelihood_law(window, k, float(tau))))
            rows.append(dict(model=model, germline=context.label, family=context.family, chain=context.chain,
                             context=context.text, sites=f"{sites[0]}-{sites[-1]}", **result,
                             forwards=window.forwards, seconds=time.perf_counter() - start))
    table = pd.DataFrame(rows)
    table["bound_ratio"] = table.bound / table.t_mix
    first = ["model", "germline", "family", "k", "temperature", "states", "t_mix", "alpha", "bound",
             "pl_gap"]
    return table[first + [c for c in table.columns if c not in first]], laws


def window_checks(table: pd.DataFrame | None) -> list[dict]:
    """Checks of the full-vocabulary windows (none when they were not run): every kernel stochastic and every
    mu_tau stationary to 1e-12, and Theorem 5's bound at or above the exact t_mix wherever alpha < 1."""
    from verdicts import check_row

    if table is None or table.empty:
        return []
    exact = float(max(table.row_error.max(), table.stationarity.max()))
    bounded = table[np.isfinite(table.bound)]
    return [check_row("window_kernels", "full-vocabulary window kernels are stochastic and mu_tau stationary "
                      "(to 1e-12)", exact <= 1e-12, f"largest error {exact:.1e} over {len(table)} windows"),
            check_row("theorem5_windows", "Theorem 5's bound is at least the exact t_mix on every full-vocabulary "
                      "window with alpha < 1", bool((bounded.bound >= bounded.t_mix).all()),
                      f"{len(bounded)} of {len(table)} windows have alpha < 1")]


# --------------------------------------------------------------------------------------------
# The '!'-basin drift (section 5.4, Table 2)
# --------------------------------------------------------------------------------------------

def drift_summary(drift: torch.Tensor, temperatures) -> pd.DataFrame:
    """Per temperature: boundary states, min and median drift, how many are positive."""
    return pd.DataFrame([dict(tau=float(tau), states=len(d), min=d.min().item(), median=d.median().item(),
                              positive=int((d > 0).sum())) for tau, d in zip(temperatures, drift)])


def drift_row(drift: torch.Tensor | None, model: str, setup: dict, missing: str = "") -> dict:
    """basin_drift_positive, model-specific: the SHARE of sampled boundary states with delta_tau > 0 at every
    temperature run, with its Wilson interval, judged against the paper's band (a share) only on the paper's
    model and protocol (bt.model_specific_row), else "other setup"."""
    quantity = "share of boundary states with drift > 0 at every temperature run (Wilson interval)"
    if drift is None or drift.numel() == 0:
        return bt.model_specific_row("basin_drift_positive", quantity, math.nan,
                                     missing or "not measured on this model", model=model, setup=setup)
    positive = int((drift > 0).all(0).sum())
    states = drift.shape[1]
    low, high = (float(v[0]) for v in share_intervals([positive], [states]))
    text = f"{bt.share_text(positive, states)} positive at every temperature (min drift {drift.min().item():.3f})"
    return bt.model_specific_row("basin_drift_positive", quantity, positive / states, text, model=model,
                                 setup=setup, low=low, high=high)


# --------------------------------------------------------------------------------------------
# The chapter's tables and sentences
# --------------------------------------------------------------------------------------------

def lemma6_table(influence: torch.Tensor, oscillation: torch.Tensor, temperatures) -> pd.DataFrame:
    """Lemma 6, c_ij(tau) <= Delta_ij / (4 tau), on every estimate: violations, least slack and the median
    share of the bound used (pairs with Delta_ij = 0 have c_ij = 0 and are left out of the median)."""
    taus = torch.as_tensor(np.asarray(temperatures, dtype=float))
    bound = oscillation / (4 * taus).view(-1, 1, 1, 1)
    n = influence.shape[-1]
    off = ~torch.eye(n, dtype=torch.bool)
    c, b = influence[:, :, off].flatten(1), bound[:, :, off].flatten(1)
    ratio = torch.where(b > 0, c / b.clamp_min(1e-300), torch.nan)
    return pd.DataFrame({"tau": taus.numpy(), "pairs": c.shape[1], "violations": (c > b + 1e-9).sum(1).numpy(),
                         "min_slack": (b - c).amin(1).numpy(), "median_ratio": ratio.nanmedian(1).values.numpy()})


def theorem_phrase(holds: bool, what: str = "holds in every case, as it must") -> str:
    """A theorem check in words: it must hold; a failure is a bug."""
    return what if holds else "FAILS in some case (a bug in this code)"


def corollary7_texts(tau7: float, tau_star: float) -> dict:
    """Corollary 7's temperature and how far above the crossing of the estimated alpha it lies."""
    factor = (f"{tau7 / tau_star:.1f} times" if math.isfinite(tau_star) and tau_star > 0
              else "not comparable with (no crossing on the grid)")
    return {"ch2_tau7": f"{tau7:.1f}", "ch2_tau7_factor": factor}


def drift_texts(summary: pd.DataFrame | None, reason: str = "") -> dict:
    """Sentences for the drift section, per temperature, and whether the certificate holds."""
    if summary is None or summary.empty:
        return {"ch2_drift_result": f"could not be computed: {reason}", "ch2_drift_phrase": "is not available"}
    parts = [f"at τ = {r.tau:g}, {r.positive} of {r.states} positive (median {r.median:.2f}, "
             f"min {r.min:.2f})" for r in summary.itertuples()]
    holds = bool((summary.positive == summary.states).all())
    return {"ch2_drift_result": "; ".join(parts), "ch2_drift_phrase": "holds" if holds else "fails"}


def window_texts(windows: pd.DataFrame) -> dict:
    """Sentences for the window comparison (TV of each pseudo-likelihood law from mu_tau, over windows)."""
    return {"ch2_window_count": f"{len(windows)}",
            "ch2_window_tv_model": bt.range_text(windows.tv_model_pl),
            "ch2_window_tv_own": bt.range_text(windows.tv_compatible_pl),
            "ch2_window_pl_gap": bt.range_text(windows.pl_gap, 2, "e"),
            "ch2_window_conditional_gap": bt.range_text(windows.conditional_gap, 3),
            "ch2_window_spearman": bt.range_text(windows.spearman)}


def verdict_texts(claims: pd.DataFrame) -> dict:
    """{glue name: verdict} for every claims row, to quote verdicts in the closing prose."""
    return {f"ch2_verdict_{row.claim}": row.verdict for row in claims.itertuples()}


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
