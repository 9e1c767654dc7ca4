"""Chapter 2's general claims, calibrated on ground truth: the chapter's own estimators and rules (the ones
its notebook calls) on chains whose answer is known by mathematics must say "reproduced" where the claim
holds and "differs" where it fails."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import book_tools as bt
import glauber_core as glauber
from chapters import bounds as ch
from chapters.bounds import judging

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from calibration.bounds import Float32Scores, potts_window  # noqa: E402 (the fp32 Potts of make calibrate)

GRID = np.geomspace(0.1, 30, 25)  # the notebook's exact-chain grid, at a small n
N = 6


@pytest.fixture(scope="module")
def references():
    return ch.reference_chains(N)


def one_chain(name, cond, n=N):
    return judging._theorem5_row(ch.mixing_profile(cond, n, GRID).assign(chain=name))


def test_coupon_collector_time_is_the_independent_sites_mixing_time_with_concentrated_marginals():
    for n in (3, 5):
        field = torch.zeros(n, 2)
        field[:, 0] = 60.0  # p(0) = 1 - e^-60: each site exact once picked, the start all-1 far from mu
        independent = glauber.PottsConditionals(torch.zeros(n, n), field, q=2)
        assert glauber.exact_mixing_time(independent, n, 1.0) == ch.coupon_collector_time(n)
        # uniform marginals mix faster, never slower
        assert glauber.exact_mixing_time(
            glauber.PottsConditionals(torch.zeros(n, n), q=2), n, 1.0
        ) <= ch.coupon_collector_time(n)


def test_theorem5_condition_differs_on_independent_sites(references):
    profile = ch.mixing_profile(references["independent sites"], N, GRID)
    assert (profile.alpha == 0).all()  # J = 0: no influence at any temperature
    assert (profile.t_mix <= ch.FAST_FACTOR * profile.t_independent).all()
    assert one_chain("independent", references["independent sites"])["verdict"] == bt.DIFFERS


def test_theorem5_condition_differs_on_curie_weiss_where_dobrushin_is_sharp(references):
    row = one_chain("Curie-Weiss", references["Curie-Weiss"])
    assert row["verdict"] == bt.DIFFERS
    # slow at low temperature (a two-well chain), so fast mixing has a threshold inside the grid
    profile = ch.mixing_profile(references["Curie-Weiss"], N, GRID)
    assert profile.t_mix.iloc[0] > 100 * profile.t_independent.iloc[0]


def test_theorem5_condition_reproduced_on_a_ferromagnet_in_a_balancing_field(references):
    cond = references["ferromagnet in a balancing field"]
    profile = ch.mixing_profile(cond, N, GRID)
    table = ch.threshold_frame(profile.assign(chain="field"))
    exact_threshold = 1.0 / math.atanh(2 / (N - 1))  # alpha = (n - 1) tanh(J / tau) / 2 = 1, J = 1
    assert table.tau_alpha_above[0] < exact_threshold <= table.tau_alpha[0]
    assert np.allclose(profile.alpha, (N - 1) * np.tanh(1 / GRID) / 2)
    assert one_chain("field", cond)["verdict"] == bt.REPRODUCED


def test_theorem5_row_over_several_chains_differs_when_one_does(references):
    profiles = ch.mixing_profiles(references, N, GRID)
    row = judging._theorem5_row(profiles)
    assert row["verdict"] == bt.DIFFERS and "balancing field: at least" in row["ours_text"]


def potts_windows(symmetric: bool, count: int = 6, n: int = 4, q: int = 3):
    gaps = []
    for seed in range(count):
        generator = torch.Generator().manual_seed(seed)
        raw = 1.5 * torch.randn(n, n, generator=generator, dtype=torch.float64)
        field = 0.5 * torch.randn(n, q, generator=generator, dtype=torch.float64)
        cond = glauber.PottsConditionals((raw + raw.T) / 2 if symmetric else raw, field, q)
        gaps.append(ch.stationary_vs_pseudo_likelihood(cond, n, 1.0))
    return gaps


def test_mu_vs_pseudolikelihood_differs_on_symmetric_potts():
    laws = potts_windows(symmetric=True)
    assert all(law["pl_gap"] < law["pl_floor"] and law["conditional_gap"] < law["pl_floor"] for law in laws)
    assert all(law["pl_floor"] < 1e-11 for law in laws)  # fp64 scores: a floor near 16 n eps |log p|
    assert all(law["tv_model_pl"] > 0.01 for law in laws)  # the PL law is not mu even here
    row = judging._pseudo_likelihood_row(*([law[c] for law in laws] for c in ("pl_gap", "pl_floor", "score_dtype")))
    assert row["verdict"] == bt.DIFFERS


def test_mu_vs_pseudolikelihood_reproduced_on_asymmetric_potts():
    laws = potts_windows(symmetric=False)
    assert all(law["pl_gap"] > 1e-3 and law["conditional_gap"] > 1e-3 for law in laws)
    row = judging._pseudo_likelihood_row(*([law[c] for law in laws] for c in ("pl_gap", "pl_floor", "score_dtype")))
    assert row["verdict"] == bt.REPRODUCED


def test_the_pl_floor_follows_the_scores_precision():
    """pl_gap_floor is PL_FLOOR_FACTOR n eps max(1, L); the epsilon is that of the dtype the model computed its
    scores in: float64 for a Potts chain, float32 for fp32 scores even through a WindowConditionals, whose cache
    holds them as float64 (its score_dtype), and L the largest |s / tau| or |log p|."""
    assert ch.pl_gap_floor(1e-7, 3, 0.5) == pytest.approx(ch.PL_FLOOR_FACTOR * 3e-7)
    assert ch.pl_gap_floor(1e-7, 3, 10.0) == pytest.approx(ch.PL_FLOOR_FACTOR * 3e-6)
    generator = torch.Generator().manual_seed(3)
    raw = 1.5 * torch.randn(3, 3, generator=generator, dtype=torch.float64)
    potts = glauber.PottsConditionals((raw + raw.T) / 2, 0.5 * torch.randn(3, 8, generator=generator).double(), 8)
    states = glauber.all_states(8, 3)
    largest = max(
        max(float(potts.log_scores(states, torch.full((512,), i)).abs().max()) for i in range(3)),
        float(ch.site_conditionals(potts, 3).log().abs().max()),
    )
    fp64 = ch.stationary_vs_pseudo_likelihood(potts, 3, 1.0)
    assert fp64["score_dtype"] == "float64"
    assert fp64["pl_floor"] == pytest.approx(ch.pl_gap_floor(torch.finfo(torch.float64).eps, 3, largest))
    window = glauber.WindowConditionals(Float32Scores(potts), torch.zeros(3, dtype=torch.long), [0, 1, 2], range(8))
    assert window.score_dtype is None  # known once it has scored
    fp32 = ch.stationary_vs_pseudo_likelihood(window, 3, 1.0)
    assert window.score_dtype == torch.float32 and fp32["score_dtype"] == "float32"
    assert fp32["pl_floor"] == pytest.approx(ch.pl_gap_floor(torch.finfo(torch.float32).eps, 3, largest), rel=1e-6)
    assert fp32["pl_gap"] < fp64["pl_floor"]  # float64 kernel and PL laws of fp32 scores: a second-order gap
    half = ch.stationary_vs_pseudo_likelihood(window, 3, 0.5)  # L doubles with |s / tau|
    assert half["pl_floor"] > 1.5 * fp32["pl_floor"]


@pytest.mark.parametrize("k, q", [(3, 8), (2, 20)])
def test_the_calibration_windows_are_fp32_scores_through_window_conditionals(k, q):
    """The cases of make calibrate: a symmetric J's window (k free sites of k + 1, one frozen) is compatible, its
    gap under its float32 floor; an asymmetric one's gap is a hit, far above twice its floor."""
    compatible = potts_window(torch.Generator().manual_seed(0), True, k, q)
    laws = ch.stationary_vs_pseudo_likelihood(compatible, k, 1.0)
    assert compatible.token_set.tolist() == list(range(q)) and compatible.score_dtype == torch.float32
    assert laws["pl_gap"] < 1e-12 < laws["pl_floor"] and laws["score_dtype"] == "float32"
    laws = ch.stationary_vs_pseudo_likelihood(potts_window(torch.Generator().manual_seed(0), False, k, q), k, 1.0)
    assert laws["pl_gap"] > ch.PL_HIT_FACTOR * laws["pl_floor"]
