"""Chapter 1's general claims on known-answer chains at the quick profile's sizes (make calibrate)."""

from __future__ import annotations

import numpy as np
import torch

import glauber_core as glauber
from chapters import incompatibility as ch1
from chapters.incompatibility import judging as judging1

from . import cases


def detected(cond, rectangles, top_k: int, resamples: int):
    """Chapter 1's pipeline for incompatibility_detected: the rectangles' frame, the rounding floor, the summary
    and the verdict; returns ((verdict, reason), summary, floor)."""
    frame = ch1.rectangle_frame(cond, rectangles, top_k=top_k)
    floor = ch1.rounding_floor(cond, rectangles, frame)
    summary = ch1.incompatibility_summary(frame, floor["floor"], resamples=resamples)
    return judging1._detected_verdict(summary), summary, floor


def _detected_verdict(seed: int, name: str) -> str:
    """Chapter 1's rectangle test on `cfg.rectangles` random rectangles of a Potts model on the quick profile's n
    sites: the symmetric coupling is compatible (fails), the asymmetric one is not (holds)."""
    cfg = ch1.settings("quick")
    cond = ch1.potts_references(cfg.seq_len, q=3, seed=seed)[name]
    rectangles = ch1.random_rectangles(cond, cfg.seq_len, cfg.rectangles, seed=seed)
    return detected(cond, rectangles, 3, cfg.resamples)[0][0]


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


def _influence_verdict(seed: int, kind: str) -> str:
    """Chapter 1's influence protocol (the quick profile's rectangle count and bootstrap) on a Potts chain whose
    asymmetry grows with the coupling (the claim holds), falls as it grows, or is constant (it fails: rho = 0)."""
    cfg = ch1.settings("quick")
    frame = influence_frame(influence_chain(kind, seed=seed), cfg.rectangles, seed)
    estimate = ch1.rank_correlation_ci(frame.influence, frame.abs_delta, resamples=cfg.resamples // 5, seed=seed)
    return judging1._influence_verdict(estimate)[0]


CASES = cases(
    __file__,
    [
        ("incompatibility_detected", "asymmetric Potts, 20 sites, 3 colours", "holds", "01_incompatibility",
         lambda seed: _detected_verdict(seed, "Potts, asymmetric J")),
        ("incompatibility_detected", "symmetric Potts, 20 sites, 3 colours", "fails", "01_incompatibility",
         lambda seed: _detected_verdict(seed, "Potts, symmetric J")),
        ("influence_amplifies_delta", "Potts, asymmetry grows with the coupling", "holds", "01_incompatibility",
         lambda seed: _influence_verdict(seed, "scales")),
        ("influence_amplifies_delta", "Potts, asymmetry falls as the coupling grows", "fails", "01_incompatibility",
         lambda seed: _influence_verdict(seed, "falls")),
        ("influence_amplifies_delta", "Potts, constant asymmetry (rho = 0)", "fails", "01_incompatibility",
         lambda seed: _influence_verdict(seed, "constant")),
    ],
)  # fmt: skip
