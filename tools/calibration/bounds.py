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


def potts_window(generator: torch.Generator, symmetric: bool, k: int, q: int) -> glauber.WindowConditionals:
    """k free sites of a random fp32 Potts chain on k + 1 sites (J = 1.5 N(0, 1), symmetrised for a compatible
    chain; fields 0.5 N(0, 1)), the last site frozen at a random colour, put through WindowConditionals with all
    q colours as its token set, as the book's windows put a network's fp32 scores: a symmetric J's window samples
    the Gibbs law given the frozen site (compatible), an asymmetric one's is incompatible."""
    raw = 1.5 * torch.randn(k + 1, k + 1, generator=generator, dtype=torch.float64)
    field = 0.5 * torch.randn(k + 1, q, generator=generator, dtype=torch.float64)
    potts = glauber.PottsConditionals((raw + raw.T) / 2 if symmetric else raw, field, q)
    context = torch.randint(q, (k + 1,), generator=generator)
    return glauber.WindowConditionals(Float32Scores(potts), context, list(range(k)), torch.arange(q))


def _pseudo_likelihood_verdict(seed: int, symmetric: bool, plan) -> str:
    """Chapter 2's windows at one of the quick profile's sizes, `plan` (k free sites, windows, q values), through
    its rule (the share of windows whose PL gap exceeds twice its floor, against 1/2): one random fp32 Potts window
    (`potts_window`) a window, the claim failing on symmetric couplings (every PL gap is 0 up to rounding, so no
    window is a hit) and holding on asymmetric ones (most gaps far above the floor, a few near 0)."""
    gaps, floors, dtypes = [], [], []
    for k, count, q in plan:
        for window in range(count):
            generator = torch.Generator().manual_seed(seed * 1000 + 100 * k + window)
            potts = potts_window(generator, symmetric, k, q)
            laws = ch2.stationary_vs_pseudo_likelihood(potts, k, 1.0)
            gaps.append(laws["pl_gap"])
            floors.append(laws["pl_floor"])
            dtypes.append(laws["score_dtype"])
    return judging2._pseudo_likelihood_row(gaps, floors, dtypes)["verdict"]


# The size the power curve scales: the random windows the PL gaps are read on (the text plan's `windows`, and the
# protein plan's count of k = 2 windows).
SIZES = {"mu_vs_pseudolikelihood_tv": ("windows",)}
_QUICK = ch2.settings("quick")


def text_plan(scale: int = 1):
    """A text model's windows: 3 free sites, K tokens each, `scale` times the quick profile's count."""
    return [(3, _QUICK.windows * scale, _QUICK.window_tokens)]


def protein_plan(scale: int = 1):
    """A protein MLM's windows at tau 1, 20 values a site, the k = 2 ones only (an 8,000-state window takes 25-50 s
    to solve here, too long for 50 seeds on 2 cores), `scale` times the quick profile's count."""
    return [(k, count * scale, 20) for k, count, taus in _QUICK.full_plan if 1.0 in taus and k == 2]


CASES = cases(
    __file__,
    [
        ("mu_vs_pseudolikelihood_tv", "asymmetric Potts, text-model windows, fp32 scores", "holds", "02_mixing_bounds",
         lambda seed, scale=1: _pseudo_likelihood_verdict(seed, False, text_plan(scale))),
        ("mu_vs_pseudolikelihood_tv", "symmetric Potts, text-model windows, fp32 scores", "fails", "02_mixing_bounds",
         lambda seed, scale=1: _pseudo_likelihood_verdict(seed, True, text_plan(scale))),
        ("mu_vs_pseudolikelihood_tv", "asymmetric Potts, protein k = 2 windows, fp32 scores", "holds", "02_mixing_bounds",
         lambda seed, scale=1: _pseudo_likelihood_verdict(seed, False, protein_plan(scale))),
        ("mu_vs_pseudolikelihood_tv", "symmetric Potts, protein k = 2 windows, fp32 scores", "fails", "02_mixing_bounds",
         lambda seed, scale=1: _pseudo_likelihood_verdict(seed, True, protein_plan(scale))),
    ],
    SIZES,
)  # fmt: skip
