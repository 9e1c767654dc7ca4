"""Chapter 1's general claims on known-answer chains at the quick profile's sizes (make calibrate): Potts chains
only. incompatibility_detected: asymmetric against symmetric coupling, and a Potts chain scored in fp32 (as a masked
LM is) whose largest true |delta| lies just above or just below the fp32 rounding floor the chapter computes for
it; influence_amplifies_delta: asymmetry that grows with the coupling, falls as it grows, or is constant."""

from __future__ import annotations

import numpy as np
import torch

import glauber_core as glauber
from chapters import incompatibility as ch1
from chapters.incompatibility import judging as judging1

from . import cases, quick_sizes

# The size each claim's power curve scales: the random rectangles its statistic is read on.
SIZES = {"incompatibility_detected": ("rectangles",), "influence_amplifies_delta": ("rectangles",)}


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


def influence_chain(kind, n=8, q=4, seed=0):
    """Potts J = S + A with S symmetric (log-uniform magnitudes 0.05..2.5, random signs) and A antisymmetric
    (random signs sigma): asymmetry |J_ji - J_ij| = 2|A_ij| is 0.6 |S_ij| ("scales": grows with the
    coupling), 0.6 ("constant": |delta| independent of the pair, hence of any influence), or
    0.6 (2.6 - |S_ij|) / 2.6 ("falls": shrinks as the coupling grows)."""
    g = torch.Generator().manual_seed(seed)
    size = torch.exp(torch.empty(n, n, dtype=torch.float64).uniform_(np.log(0.05), np.log(2.5), generator=g))
    sign = torch.where(torch.rand(n, n, generator=g) < 0.5, -1.0, 1.0).double()
    symmetric = torch.triu(size * sign, 1)
    symmetric = symmetric + symmetric.T
    sigma = torch.triu(torch.where(torch.rand(n, n, generator=g) < 0.5, -1.0, 1.0).double(), 1)
    sigma = sigma - sigma.T
    asymmetry = {
        "scales": 0.3 * symmetric.abs(),
        "constant": 0.3 * torch.ones(n, n, dtype=torch.float64),
        "falls": 0.3 * (2.6 - symmetric.abs()) / 2.6,
    }[kind]
    field = 0.5 * torch.randn(n, q, generator=g, dtype=torch.float64)
    return glauber.PottsConditionals(symmetric + asymmetry * sigma, field, q=q)


def influence_frame(cond, count: int, seed: int):
    """Chapter 1's rectangle frame (with each rectangle's influence) on `count` random rectangles of a Potts
    chain, every colour a candidate and three alternatives a site."""
    rectangles = ch1.random_rectangles(cond, cond.n_sites, count, seed=seed)
    return ch1.rectangle_frame(cond, rectangles, top_k=cond.vocab_size, alternatives=3)


def _influence_verdict(seed: int, kind: str, scale: int = 1) -> str:
    """Chapter 1's influence protocol (the quick profile's rectangle count and bootstrap) on a Potts chain whose
    asymmetry grows with the coupling (the claim holds), falls as it grows, or is constant (it fails: rho = 0)."""
    cfg = quick_sizes(ch1, SIZES["influence_amplifies_delta"], scale)
    frame = influence_frame(influence_chain(kind, seed=seed), cfg.rectangles, seed)
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
        ("influence_amplifies_delta", "Potts, constant asymmetry (rho = 0)", "fails", "01_incompatibility",
         lambda seed, scale=1: _influence_verdict(seed, "constant", scale)),
    ],
    SIZES,
)  # fmt: skip
