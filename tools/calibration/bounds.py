"""Chapter 2's general claims on known-answer chains at the quick profile's sizes (make calibrate)."""

from __future__ import annotations

import torch

import glauber_core as glauber
from chapters import bounds as ch2
from chapters.bounds import judging as judging2

from . import cases


class Float32Scores:
    """A Potts model whose scores come out in fp32, as a masked LM's logits do: the rounding the book's windows
    carry, which the rule's floor must absorb on a compatible chain."""

    def __init__(self, potts: glauber.PottsConditionals):
        self.potts, self.vocab_size, self.allowed = potts, potts.vocab_size, potts.allowed
        self.max_sites, self.device, self.protein = potts.max_sites, potts.device, False

    def log_scores(self, tokens, positions):
        return self.potts.log_scores(tokens, positions).float()


def _pseudo_likelihood_verdict(seed: int, symmetric: bool) -> str:
    """Chapter 2's windows at the quick profile's size (`windows` windows of 3 free sites with K = `window_tokens`
    values each, one random Potts model a window, scores in fp32) through its rule: a symmetric coupling is
    compatible (the claim fails: every PL gap is 0 up to rounding), an asymmetric one is not (it holds)."""
    cfg = ch2.settings("quick")
    gaps, floors = [], []
    for window in range(cfg.windows):
        generator = torch.Generator().manual_seed(seed * 1000 + window)
        raw = 1.5 * torch.randn(3, 3, generator=generator, dtype=torch.float64)
        field = 0.5 * torch.randn(3, cfg.window_tokens, generator=generator, dtype=torch.float64)
        potts = glauber.PottsConditionals((raw + raw.T) / 2 if symmetric else raw, field, cfg.window_tokens)
        laws = ch2.stationary_vs_pseudo_likelihood(Float32Scores(potts), 3, 1.0)
        gaps.append(laws["pl_gap"])
        floors.append(laws["pl_floor"])
    return judging2._pseudo_likelihood_row(gaps, floors)["verdict"]


CASES = cases(
    __file__,
    [
        ("mu_vs_pseudolikelihood_tv", "asymmetric Potts windows, fp32 scores", "holds", "02_mixing_bounds",
         lambda seed: _pseudo_likelihood_verdict(seed, symmetric=False)),
        ("mu_vs_pseudolikelihood_tv", "symmetric Potts windows, fp32 scores", "fails", "02_mixing_bounds",
         lambda seed: _pseudo_likelihood_verdict(seed, symmetric=True)),
    ],
)  # fmt: skip
