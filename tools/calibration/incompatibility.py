"""Chapter 1's general claims on known-answer chains at the quick profile's sizes (make calibrate): Potts chains
only. incompatibility_detected: asymmetric against symmetric coupling, and a Potts chain scored in fp32 (as a masked
LM is) whose largest true |delta| lies just above or just below the fp32 rounding floor the chapter computes for
it; influence_amplifies_delta: asymmetry that grows with the coupling, falls as it grows, or is constant with the
influence read on colours drawn uniformly on their own stream, independent of the rectangle's (rho = 0 exactly)."""

from __future__ import annotations

import numpy as np
import torch

import glauber_core as glauber
from chapters import incompatibility as ch1
from chapters.incompatibility import judging as judging1

from . import cases, quick_sizes

# The size each claim's power curve scales: the random rectangles its statistic is read on.
SIZES = {"incompatibility_detected": ("rectangles",), "influence_amplifies_delta": ("rectangles",)}
GRID = 2.0**-10  # influence_chain's couplings and fields lie on this grid


def detected(cond, rectangles, top_k: int, resamples: int):
    """Chapter 1's pipeline for incompatibility_detected: the rectangles' frame, the rounding floor, the summary
    and the verdict; returns ((verdict, reason), summary, floor)."""
    frame = ch1.rectangle_frame(cond, rectangles, top_k=top_k)
    floor = ch1.rounding_floor(cond, rectangles, frame)
    summary = ch1.incompatibility_summary(frame, floor["floor"], resamples=resamples)
    return judging1._detected_verdict(summary), summary, floor


def _detected_verdict(seed: int, name: str, scale: int = 1) -> str:
    """Chapter 1's rectangle test on `cfg.rectangles` random rectangles of a Potts model on the quick profile's n
    sites: the symmetric coupling is compatible (fails), the asymmetric one is not (holds)."""
    cfg = quick_sizes(ch1, SIZES["incompatibility_detected"], scale)
    cond = ch1.potts_references(cfg.seq_len, q=3, seed=seed)[name]
    rectangles = ch1.random_rectangles(cond, cfg.seq_len, cfg.rectangles, seed=seed)
    return detected(cond, rectangles, 3, cfg.resamples)[0][0]


class Float32Potts(glauber.PottsConditionals):
    """A Potts chain whose scores are summed in fp32, as a masked LM's come: the chapter's rounding floor for it is
    the fp32 one (8 (n + 1) u S with u = 2^-23), and its true delta that of the fp64 Potts chain with the same
    (fp32-stored) coupling and field."""

    def __init__(self, coupling, field, q: int):
        super().__init__(torch.as_tensor(coupling).float().double(), torch.as_tensor(field).float().double(), q=q)

    def log_scores(self, tokens, positions):
        colours = torch.nn.functional.one_hot(tokens, self.vocab_size).float()
        return torch.einsum("bn,bnq->bq", self.coupling[positions].float(), colours) + self.field[positions].float()


def floor_chain(seed: int, factor: float, scale: int = 1):
    """A Float32Potts chain on the quick profile's n sites and 3 colours (potts_references' symmetric coupling
    and field, plus a times a random antisymmetric sign pattern) with its quick rectangles: a is set so that the
    largest true |delta| over the rectangles (a times that of the sign pattern alone, delta being linear in the
    coupling) is `factor` times the fp32 floor of the untilted chain. Returns (chain, rectangles, a)."""
    cfg = quick_sizes(ch1, SIZES["incompatibility_detected"], scale)
    base = ch1.potts_references(cfg.seq_len, q=3, seed=seed)[ch1.SYMMETRIC]
    g = torch.Generator().manual_seed(seed)
    sigma = torch.triu(torch.where(torch.rand(cfg.seq_len, cfg.seq_len, generator=g) < 0.5, -1.0, 1.0).double(), 1)
    sigma = sigma - sigma.T
    rectangles = ch1.random_rectangles(base, cfg.seq_len, cfg.rectangles, seed=seed)
    untilted = Float32Potts(base.coupling, base.field, q=3)
    floor = ch1.rounding_floor(untilted, rectangles, ch1.rectangle_frame(untilted, rectangles, top_k=3))["floor"]
    unit = glauber.rectangle_delta(glauber.PottsConditionals(sigma, q=3), *rectangles.args()).abs().max()
    a = factor * floor / float(unit)
    return Float32Potts(base.coupling + a * sigma, base.field, q=3), rectangles, a


def _floor_verdict(seed: int, factor: float, scale: int = 1) -> str:
    """Chapter 1's rectangle test on floor_chain(seed, factor): detected above the floor (holds) when factor > 1,
    nothing to detect above it (fails) when factor < 1."""
    cond, rectangles, _ = floor_chain(seed, factor, scale)
    return detected(cond, rectangles, 3, ch1.settings("quick").resamples)[0][0]


def _on_grid(values: torch.Tensor) -> torch.Tensor:
    """`values` rounded to multiples of GRID: sums of a few of them are exact in fp64."""
    return torch.round(values / GRID) * GRID


def influence_chain(kind, n=8, q=4, seed=0):
    """Potts J = S + A with S symmetric (log-uniform magnitudes 0.05..2.5, random signs) and A antisymmetric
    (random signs sigma): asymmetry |J_ji - J_ij| = 2|A_ij| is 0.6 |S_ij| ("scales": grows with the
    coupling), 0.6 (2.6 - |S_ij|) / 2.6 ("falls": shrinks as the coupling grows), or 0.6 ("constant", with no
    field: the null case of `null_frame`). S, A and the field lie on the grid GRID, so every score and every
    delta is exact in fp64: rectangles whose |delta| is equal tie exactly. (Rounding would break such ties by the
    state's other sites, on which the influence depends too: on the constant chains it moved rho by up to 0.07.)"""
    g = torch.Generator().manual_seed(seed)
    size = torch.exp(torch.empty(n, n, dtype=torch.float64).uniform_(np.log(0.05), np.log(2.5), generator=g))
    sign = torch.where(torch.rand(n, n, generator=g) < 0.5, -1.0, 1.0).double()
    symmetric = _on_grid(torch.triu(size * sign, 1))
    symmetric = symmetric + symmetric.T
    sigma = torch.triu(torch.where(torch.rand(n, n, generator=g) < 0.5, -1.0, 1.0).double(), 1)
    sigma = sigma - sigma.T
    asymmetry = {
        "scales": 0.3 * symmetric.abs(),
        "constant": 0.3 * torch.ones(n, n, dtype=torch.float64),
        "falls": 0.3 * (2.6 - symmetric.abs()) / 2.6,
    }[kind]
    field = torch.zeros(n, q, dtype=torch.float64)
    if kind != "constant":
        field = _on_grid(0.5 * torch.randn(n, q, generator=g, dtype=torch.float64))
    return glauber.PottsConditionals(symmetric + _on_grid(asymmetry) * sigma, field, q=q)


def influence_frame(cond, count: int, seed: int):
    """Chapter 1's rectangle frame (with each rectangle's influence) on `count` random rectangles of a Potts
    chain, every colour a candidate and three alternatives a site."""
    rectangles = ch1.random_rectangles(cond, cond.n_sites, count, seed=seed)
    return ch1.rectangle_frame(cond, rectangles, top_k=cond.vocab_size, alternatives=3)


def null_frame(cond, count: int, seed: int, k: int = 3):
    """influence_frame with the influence from `k` colours a site drawn uniformly from all q on their own stream
    (ch1.pair_influence), not from ch1.alternative_tokens, which never tries a rectangle's own colours (on 4
    colours: exactly the other two at each site, a function of the four colours A, A', B, B').

    On influence_chain("constant") Spearman's rho of |delta| with this influence is exactly 0 on every chain:
    |delta| = |J_ji - J_ij| |[A = B] + [A' = B'] - [A = B'] - [A' = B]| (fields and the other sites cancel)
    with |J_ji - J_ij| = 0.6 on every pair, a function of the four colours alone; the influence is a function
    of the sites i, j, the state off i and j and the colours tried, all independent of the four colours
    (states uniform, A' and B' uniform over the other colours, the tried ones on their own stream). The two
    are independent, so their population rank correlation is 0."""
    rectangles = ch1.random_rectangles(cond, cond.n_sites, count, seed=seed)
    generator = torch.Generator().manual_seed(int(seed) + 104729)
    tried = torch.rand(count, 2, cond.vocab_size, generator=generator).argsort(2)[:, :, :k]
    ij, ji = ch1.pair_influence(cond, rectangles, tried).numpy().T
    frame = ch1.rectangle_frame(cond, rectangles, top_k=cond.vocab_size, alternatives=3)
    return frame.assign(influence_ij=ij, influence_ji=ji, influence=np.fmax(ij, ji))


def _influence_verdict(seed: int, kind: str, scale: int = 1) -> str:
    """Chapter 1's influence protocol (the quick profile's rectangle count and bootstrap) on a Potts chain whose
    asymmetry grows with the coupling (the claim holds: rho about 0.6), falls as it grows (it fails: rho about
    -0.4), or is constant with its influence read by null_frame (it fails: rho = 0, below the rule's RHO_SESOI)."""
    cfg = quick_sizes(ch1, SIZES["influence_amplifies_delta"], scale)
    cond = influence_chain(kind, seed=seed)
    frame = (null_frame if kind == "constant" else influence_frame)(cond, cfg.rectangles, seed)
    estimate = ch1.rank_correlation_ci(frame.influence, frame.abs_delta, resamples=cfg.resamples // 5, seed=seed)
    return judging1._influence_verdict(estimate)[0]


CASES = cases(
    __file__,
    [
        ("incompatibility_detected", "asymmetric Potts, 20 sites, 3 colours", "holds", "01_incompatibility",
         lambda seed, scale=1: _detected_verdict(seed, "Potts, asymmetric J", scale)),
        ("incompatibility_detected", "symmetric Potts, 20 sites, 3 colours", "fails", "01_incompatibility",
         lambda seed, scale=1: _detected_verdict(seed, "Potts, symmetric J", scale)),
        ("incompatibility_detected", "fp32 Potts, largest true |delta| 1.1 x its fp32 floor", "holds",
         "01_incompatibility", lambda seed, scale=1: _floor_verdict(seed, 1.1, scale)),
        ("incompatibility_detected", "fp32 Potts, largest true |delta| 0.9 x its fp32 floor", "fails",
         "01_incompatibility", lambda seed, scale=1: _floor_verdict(seed, 0.9, scale)),
        ("influence_amplifies_delta", "Potts, asymmetry grows with the coupling", "holds", "01_incompatibility",
         lambda seed, scale=1: _influence_verdict(seed, "scales", scale)),
        ("influence_amplifies_delta", "Potts, asymmetry falls as the coupling grows", "fails", "01_incompatibility",
         lambda seed, scale=1: _influence_verdict(seed, "falls", scale)),
        ("influence_amplifies_delta", "Potts, constant asymmetry, no field, colours tried on their own stream (rho = 0)", "fails",
         "01_incompatibility",
         lambda seed, scale=1: _influence_verdict(seed, "constant", scale)),
    ],
    SIZES,
)  # fmt: skip
