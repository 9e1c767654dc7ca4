"""Chapter 2: mixing bounds on real and enumerable chains (section 5, appendix A.1, Table 2).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import torch

from glauber_core import (
    Conditionals,
    MaskedLMConditionals,
    all_states,
    check_count,
    check_enumerable,
    check_tokens,
    conditional_log_probs,
    conditional_probs,
    influence_coefficients,
    seed_passages,
)


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
