"""Chapter 2's science, part two (beyond the paper, sections 7 and 8): the stationary law mu_tau against
pseudo-likelihood laws on enumerable chains: windows of a real model (a few shared tokens per free site,
or the full vocabulary of a model with few tokens, where the window chain is the model's own) and Potts
chains of growing asymmetry. Each window chain is solved exactly: kernel, mu_tau, t_mix, alpha, Theorem 5.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from glauber_core import (
    GERMLINE_CONTEXT,
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
    exact_stationary,
    germline_regions,
    glauber_kernel,
    is_protein,
    mixing_time_bound,
    scaled_scores,
    seed_passages,
    total_variation,
)

from .science import (
    FIRST_FREE_SITE,
    PL_FLOOR_FACTOR,
    WINDOW_FAMILIES,
    WINDOW_LENGTH,
    WINDOW_REGION,
    coupon_collector_time,
    exact_influence_coefficients,
)

# --------------------------------------------------------------------------------------------
# Pseudo-likelihood laws and the stationary law (sections 4 and 7)
# --------------------------------------------------------------------------------------------


def pseudo_likelihood_law(cond: Conditionals, n: int, temperature: float = 1.0, limit: int = 200_000):
    """The law proportional to exp(sum_i log p_tau(x_i | x_-i)) over all |V|^n states (lexicographic)."""
    return torch.softmax(_pseudo_likelihood_terms(cond, n, temperature, limit)[0], 0)


def score_precision(cond: Conditionals, dtype: torch.dtype) -> torch.dtype:
    """The coarser of `dtype` (what the log-probabilities came in) and the dtype `cond` computed its scores in
    (`score_dtype`, set by a WindowConditionals, whose cache holds a network's fp32 scores as float64)."""
    own = getattr(cond, "score_dtype", None) or dtype
    return own if torch.finfo(own).eps > torch.finfo(dtype).eps else dtype


def _pseudo_likelihood_terms(cond: Conditionals, n: int, temperature: float, limit: int = 200_000):
    """sum_i log p_tau(x_i | x_-i) for every state, the rounding floor of a PL gap built on it (pl_gap_floor of
    the machine epsilon of `score_precision` and the largest |s / tau| or |log p|), and that dtype."""
    check_enumerable(cond, n, limit)
    states = all_states(cond.vocab_size, n)
    total = torch.zeros(len(states), dtype=torch.float64)
    largest = 1.0
    for site in range(n):
        scaled = scaled_scores(cond, states, torch.full((len(states),), site), temperature)
        logp = torch.log_softmax(scaled, dim=-1)  # conditional_log_probs, with the scores it came from
        terms = logp.double().gather(1, states[:, site : site + 1].to(logp.device)).squeeze(1).cpu()
        magnitude = scaled.double().nan_to_num(0.0, 0.0, 0.0).abs().max()  # off-allowed -inf left out
        largest = max(largest, float(terms.abs().max()), float(magnitude))
        total += terms
    dtype = score_precision(cond, logp.dtype)
    return total, pl_gap_floor(torch.finfo(dtype).eps, n, largest), dtype


def pl_gap_floor(eps: float, n: int, largest: float) -> float:
    """The rounding floor of an exact PL gap (section 7) on n free sites whose scores were computed with machine
    epsilon `eps` (float32's 1.2e-7 for a masked LM's logits) and whose scaled scores s / tau and log-probabilities
    reach `largest` in magnitude: PL_FLOOR_FACTOR * n * eps * max(1, largest). Rounding a score row moves each
    log p by at most about eps * max |s / tau| (and its own rounding by eps * |log p|), their sum over n sites at
    most n times that, and a TV between two laws whose log-masses differ by at most e is at most about e."""
    return PL_FLOOR_FACTOR * n * float(eps) * max(1.0, float(largest))


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
    pl_floor: the gap's rounding floor (pl_gap_floor); score_dtype: the dtype whose epsilon it used;
    conditional_gap: the mu-averaged TV between the model's and mu's conditionals (see `conditional_gap`).
    `mu`: mu_tau when already solved (else solved here)."""
    mu = (exact_stationary(cond, n, temperature) if mu is None else torch.as_tensor(mu).double()).clamp_min(0)
    mu = mu / mu.sum()
    total, floor, dtype = _pseudo_likelihood_terms(cond, n, temperature)
    model_pl = torch.softmax(total, 0)
    own_pl = pseudo_likelihood_from_joint(mu, cond.vocab_size, n)
    rank = bt.rank_correlation(mu.numpy(), model_pl.numpy())
    return dict(
        temperature=float(temperature),
        states=len(mu),
        tv_model_pl=float(total_variation(mu.log(), model_pl.log())),
        tv_compatible_pl=float(total_variation(mu.log(), own_pl.log())),
        pl_gap=float(0.5 * (model_pl - own_pl).abs().sum()),
        pl_floor=floor,
        score_dtype=str(dtype).removeprefix("torch."),
        conditional_gap=conditional_gap(cond, mu, n, temperature),
        spearman=float(rank),
        top_state_same=bool(mu.argmax() == model_pl.argmax()),
    )


# --------------------------------------------------------------------------------------------
# Exact chains on windows of the FULL vocabulary (a model with few tokens, e.g. a protein MLM)
# --------------------------------------------------------------------------------------------


def window_contexts(cond: MaskedLMConditionals, n: int, count: int, seed: int = 0) -> pd.DataFrame:
    """`count` contexts [n] for full-vocabulary windows, one row each (label, family, chain, text, tokens,
    first: the window's first free site): for a protein model one human germline V gene from each of the first
    `count` WINDOW_FAMILIES (distinct families), free sites from its own WINDOW_REGION (germline_regions), else
    `count` seed passages (family: their topic), free sites from FIRST_FREE_SITE."""
    count = check_count(count, "count", 1)
    if is_protein(cond):
        if count > len(WINDOW_FAMILIES):
            raise ValueError(f"at most {len(WINDOW_FAMILIES)} germline families, got count = {count}")
        picks = [seed_passages(cond, n, 1, seed=seed, topic=family) for family in WINDOW_FAMILIES[:count]]
        return pd.DataFrame(
            [
                dict(
                    label=p.genes[0],
                    family=p.families[0],
                    chain=p.chains[0],
                    text=p.texts[0],
                    tokens=p.tokens[0],
                    first=germline_regions(p.genes[0])[WINDOW_REGION][0],
                )
                for p in picks
            ]
        )
    seeds = seed_passages(cond, n, count, seed=seed)
    return pd.DataFrame(
        [
            dict(label=f"passage {k}", family=topic, chain="", text=text, tokens=tokens, first=FIRST_FREE_SITE)
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


def full_window_frame(
    cond: MaskedLMConditionals,
    contexts: pd.DataFrame,
    k: int,
    temperatures,
    model: str,
    eps: float = 0.25,
) -> tuple[pd.DataFrame, list]:
    """Exact chains on k consecutive free sites from each context's `first` site (`window_contexts`), over the
    model's full allowed vocabulary, at each temperature: one tidy row per (context, temperature), with the
    state's length `context`, its `free` sites, the forwards the window took (cumulative) and the seconds per
    row; and per context and temperature (label, k, tau, token ids of the window's free sites per state, mu_tau,
    the model's PL law) for figures."""
    every = cond.allowed.cpu().nonzero().squeeze(1)
    k = check_count(k, "k", 1)
    rows, laws = [], []
    for context in contexts.itertuples():
        sites = list(range(context.first, context.first + k))
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
                    sequence=context.text,
                    context=len(context.tokens),
                    free=k,
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
    """`full_window_frame` for each (k, windows, temperatures) of `plan` (settings' full_plan): a protein MLM's
    whole germline genes (GERMLINE_CONTEXT residues, free sites from each gene's WINDOW_REGION), else passages of
    WINDOW_LENGTH tokens (free sites from FIRST_FREE_SITE); the rows stacked, the laws concatenated."""
    parts, laws = [], []
    length = GERMLINE_CONTEXT if is_protein(cond) else WINDOW_LENGTH
    for k, count, temperatures in plan:
        contexts = window_contexts(cond, length, count, seed=seed)
        part, laws_k = full_window_frame(cond, contexts, k, temperatures, model)
        parts.append(part)
        laws += laws_k
    return pd.concat(parts, ignore_index=True), laws


def windows_at(table: pd.DataFrame, laws: list, temperature: float = 1.0) -> tuple[pd.DataFrame, list]:
    """The full-vocabulary windows at one temperature as section 7's windows: their rows (`germline` named
    `window`) and (token ids per state, mu_tau, PL law) per window."""
    rows = table[table.temperature == temperature].rename(columns={"germline": "window"})
    return rows, [(ids, mu, pl) for _, _, t, ids, mu, pl in laws if t == temperature]


# --------------------------------------------------------------------------------------------
# Windows of a large-vocabulary model (K shared tokens per free site) and asymmetric Potts chains
# --------------------------------------------------------------------------------------------


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


def slowest_window(table: pd.DataFrame, laws: list, temperature: float = 1.0) -> tuple[pd.Series, tuple]:
    """The exact window that mixes slowest at `temperature` (largest t_mix(1/4) of full_window_frame's rows) and
    its (token ids per state, mu_tau, PL law): what top_states reads to name the states that compete under mu."""
    rows = table[table.temperature == temperature]
    if rows.empty:
        raise ValueError(f"no exact window at tau = {temperature:g}")
    row = rows.loc[rows.t_mix.idxmax()]
    law = next(law for law in laws if law[0] == row.germline and law[1] == row.k and law[2] == temperature)
    return row, law[3:]


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


def asymmetry_frame(
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
                pl_floor=laws["pl_floor"],
                tv_gibbs_of_symmetric_part=float(total_variation(mu.log(), gibbs.log())),
            )
        )
    return pd.DataFrame(rows)
