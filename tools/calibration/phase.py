"""Chapter 3's general claims on known-answer chains at the quick profile's sizes (make calibrate)."""

from __future__ import annotations

import numpy as np
import torch

import glauber_core as glauber
from chapters import phase as ch3
from chapters.phase import judging as judging3

from . import cases


def leaving_sites(n: int, field: float = 40.0) -> glauber.PottsConditionals:
    """Independent sites (J = 0) whose conditional puts all but e^-field of its mass on colour 1: from all-0
    starts the share of sites changed is the coupon collector's (section 6.1's known answer)."""
    return glauber.PottsConditionals(torch.zeros(n, n), torch.tensor([[0.0, field]] * n), q=2)


def _hitting_verdict(seed: int, radius: float) -> str:
    """Chapter 3's hitting-time protocol on independent sites that always leave their colour: the quick
    profile's lengths, chains per length, recording interval, cutoff and bootstrap, then its nlogn rule.
    Radius 1 (every site changed) is the coupon collector, n H_n: n log n holds; radius 1/2 takes about
    n ln 2 steps, linear in n: it fails."""
    cfg = ch3.settings("quick")
    lengths, times = [], []
    for n in cfg.drift_lengths:
        x0 = torch.zeros(cfg.hit_chains, n, dtype=torch.long)
        run = glauber.glauber(
            leaving_sites(n), x0, cfg.hit_steps, seed=seed * 1000 + n, record_every=cfg.record_every, progress=False
        )
        share = (run.tokens != run.tokens[:, :1]).double().mean(-1)
        hit = ch3.hitting_times(share, run.steps, radius)
        lengths += [n] * len(hit)
        times += hit.tolist()
    scaling = ch3.scaling_fits(np.array(lengths), np.array(times), n_boot=cfg.n_boot, seed=seed)
    events = int((np.array(times) >= 0).sum())
    return judging3._nlogn_row(scaling, events, cfg.hit_tau, radius)["verdict"]


CASES = cases(
    __file__,
    [
        ("nlogn_fit", "coupon collector: every site changed (n H_n)", "holds", "03_phase_diagram",
         lambda seed: _hitting_verdict(seed, 1.0)),
        ("nlogn_fit", "half the sites changed (about n ln 2)", "fails", "03_phase_diagram",
         lambda seed: _hitting_verdict(seed, 0.5)),
    ],
)  # fmt: skip
