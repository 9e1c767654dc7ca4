"""Chapter 3 (section 6.1): batched coupling grids, transition fits, hitting times and scaling fits."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

import glauber_core as gc
import book_tools as bt
from chapters import phase as ch


def potts(n=5, q=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    coupling = torch.randn(n, n, generator=generator, dtype=torch.float64)  # asymmetric: no joint
    return gc.PottsConditionals(coupling, 0.3 * torch.randn(n, q, generator=generator, dtype=torch.float64), q=q)


# ---------------------------------------------------------------------------------------------
# Per-pair temperatures: one batch equals separate runs
# ---------------------------------------------------------------------------------------------


def test_per_pair_temperatures_equal_separate_calls():
    model = potts()
    x0 = torch.zeros(6, 5, dtype=torch.long)
    y0 = torch.full((6, 5), 2, dtype=torch.long)
    temperatures = [0.3, 1.0, 4.0]
    grid = ch.coupling_grid(model, x0, y0, temperatures, 60, seed=3, progress=False)
    seeds = gc.chain_seeds(3, 18)
    for t, tau in enumerate(temperatures):
        alone = gc.coupling_times(model, x0, y0, 60, tau, seed=seeds[6 * t: 6 * t + 6], progress=False)
        assert np.array_equal(grid[grid.temperature == tau].time.to_numpy(), alone.numpy())
    assert grid.coupled.any() and (grid.time != grid.time.iloc[0]).any()
    # a tensor of per-pair temperatures is the same as a list
    per_pair = torch.tensor(temperatures, dtype=torch.float64).repeat_interleave(6)
    again = gc.coupling_times(model, x0.repeat(3, 1), y0.repeat(3, 1), 60, per_pair, seed=3, progress=False)
    assert np.array_equal(again.numpy(), grid.time.to_numpy())


def test_multi_temperature_glauber_equals_separate_runs():
    model = potts(seed=1)
    x0 = torch.tensor([[0, 1, 2, 0, 1], [2, 2, 2, 2, 2]])
    trajectory, rows = ch.multi_temperature_glauber(model, x0, [0.5, 2.0], 30, seed=5, progress=False)
    seeds = gc.chain_seeds(5, 4)
    for t, tau in enumerate([0.5, 2.0]):
        alone = gc.glauber(model, x0, 30, tau, seed=seeds[2 * t: 2 * t + 2], progress=False)
        assert torch.equal(trajectory.tokens[2 * t: 2 * t + 2], alone.tokens)
    assert rows.temperature.tolist() == [0.5, 0.5, 2.0, 2.0] and rows.start.tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("temperature", [[1.0, 2.0], [1.0, 0.0, 2.0], [1.0, float("nan"), 2.0], ["1", "2", "3"],
                                         [True, False, True], "1", None])
def test_bad_per_pair_temperatures(temperature):
    model = potts()
    x0 = torch.zeros(3, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="temperature"):
        gc.coupling_times(model, x0, x0, 3, temperature, progress=False)


@pytest.mark.parametrize("temperatures", [[], 1.0, [1.0, -2.0]])
def test_grid_and_multi_temperature_runs_reject_bad_temperature_lists(temperatures):
    model = potts()
    x0 = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="temperatures"):
        ch.coupling_grid(model, x0, x0, temperatures, 3, progress=False)
    with pytest.raises(ValueError, match="temperatures"):
        ch.multi_temperature_glauber(model, x0, temperatures, 3, progress=False)


def test_tempered_conditionals_check_the_batch():
    with pytest.raises(ValueError, match="temperatures"):
        ch.TemperedConditionals(potts(), [1.0, 2.0]).log_scores(torch.zeros(3, 5, dtype=torch.long),
                                                                 torch.zeros(3, dtype=torch.long))


# ---------------------------------------------------------------------------------------------
# Shares, intervals and the logistic transition fit
# ---------------------------------------------------------------------------------------------


def test_share_intervals_known_values():
    low, high = bt.share_intervals([5, 0], [10, 10])
    assert np.allclose([low[0], high[0]], [0.2366, 0.7634], atol=1e-4)
    z2 = 1.959964**2
    assert low[1] == 0 and math.isclose(high[1], z2 / (10 + z2), rel_tol=1e-5)
    with pytest.raises(ValueError, match="trials"):
        bt.share_intervals([3], [2])


def test_coupling_summary_counts_uncoupled_as_infinite():
    grid = pd.DataFrame({"n": 8, "temperature": [1.0] * 4 + [2.0] * 4, "pair": list(range(4)) * 2,
                         "time": [3, 5, -1, -1, -1, -1, -1, 7]})
    table = ch.coupling_summary(grid).set_index("temperature")
    assert table.loc[1.0, "median_time"] == 5 and table.loc[1.0, "share"] == 0.5
    assert math.isnan(table.loc[2.0, "median_time"]) and table.loc[2.0, "coupled"] == 1
    with pytest.raises(ValueError, match="grid"):
        ch.coupling_summary(pd.DataFrame({"n": []}))


def logistic_outcomes(midpoint, scale, taus, trials, rng):
    p = 1 / (1 + np.exp(-(np.asarray(taus) - midpoint) / scale))
    return rng.random((trials, len(taus))) < p


def test_logistic_fit_recovers_a_known_curve():
    rng = np.random.default_rng(0)
    taus = np.arange(0.5, 3.01, 0.1)
    y = logistic_outcomes(1.6, 0.15, taus, 1500, rng)
    midpoint, scale = ch.logistic_fit(np.tile(taus, 1500), y.reshape(-1).astype(float))
    assert abs(midpoint - 1.6) < 0.015 and abs(scale - 0.15) < 0.015


def test_logistic_fit_separated_and_degenerate_data():
    midpoint, scale = ch.logistic_fit([1.0, 1.0, 1.5, 1.5, 2.0, 2.0], [0, 0, 0, 0, 1, 1])
    assert 1.5 < midpoint < 2.0 and 0 < scale < 0.5  # finite under perfect separation (Firth)
    assert all(math.isnan(v) for v in ch.logistic_fit([1.0, 2.0, 3.0], [1, 1, 1]))
    with pytest.raises(ValueError, match="0/1"):
        ch.logistic_fit([1.0, 2.0], [0, 2])


def test_transition_fits_per_length_with_intervals():
    rng = np.random.default_rng(1)
    taus = np.arange(1.0, 3.01, 0.25)
    frames = []
    for n, midpoint in ((8, 1.5), (16, 2.0)):
        y = logistic_outcomes(midpoint, 0.2, taus, 80, rng)
        frames.append(pd.DataFrame({"n": n, "temperature": np.tile(taus, 80), "pair": np.repeat(np.arange(80),
                                    len(taus)), "coupled": y.reshape(-1)}))
    table = ch.transition_fits(pd.concat(frames), n_boot=40, seed=0).set_index("n")
    for n, midpoint in ((8, 1.5), (16, 2.0)):
        assert table.loc[n, "midpoint_low"] < midpoint < table.loc[n, "midpoint_high"]
        assert abs(table.loc[n, "midpoint"] - midpoint) < 0.1
    assert np.isclose(table.width, 2 * math.log(9) * table.scale).all()
    assert len(table.attrs["boot"]) == 80


# ---------------------------------------------------------------------------------------------
# Hitting times, threshold shares, scaling fits, diagnostics
# ---------------------------------------------------------------------------------------------


def test_hitting_times_of_a_known_trace():
    distances = torch.tensor([[0.0, 0.1, 0.5, 0.3, 0.8], [0.0, 0.1, 0.2, 0.1, 0.0]])
    steps = torch.tensor([0, 5, 10, 15, 20])
    assert ch.hitting_times(distances, steps, 0.4).tolist() == [10, -1]
    assert ch.hitting_times(distances, steps, 0.8).tolist() == [20, -1]
    assert ch.hitting_times(distances, steps, 0.0).tolist() == [0, 0]
    with pytest.raises(ValueError, match="steps"):
        ch.hitting_times(distances, steps[:3], 0.4)


def test_threshold_shares_of_known_peaks():
    distances = torch.tensor([[0.0, 0.5], [0.0, 0.8], [0.0, 0.2], [0.0, 1.1]])
    rows = pd.DataFrame({"row": range(4), "temperature": [1.0, 1.0, 2.0, 2.0], "start": [0, 1, 0, 1]})
    table = ch.threshold_shares(distances, rows, radii=(0.4, 1.0)).set_index(["radius", "temperature"])
    assert table.share.to_dict() == {(0.4, 1.0): 1.0, (0.4, 2.0): 0.5, (1.0, 1.0): 0.0, (1.0, 2.0): 0.5}


@pytest.mark.parametrize("form, law", [("n log n", lambda n: 2.5 * n * np.log(n)), ("n^2", lambda n: 0.7 * n**2)])
def test_scaling_fits_pick_the_true_form(form, law):
    lengths = np.repeat([8, 16, 32, 64], 9)
    rng = np.random.default_rng(0)
    times = law(lengths) * np.exp(rng.normal(0, 0.02, len(lengths)))
    times[::9] = -1  # one chain per length never hits: counted as infinite, the median stays finite
    table = ch.scaling_fits(lengths, times, n_boot=50).set_index("form")
    assert table.best_aic[form]
    truth = {"n log n": 2.5, "n^2": 0.7}[form]
    assert abs(table.C[form] / truth - 1) < 0.05 and table.C_low[form] < table.C[form] < table.C_high[form]
    assert abs(table.attrs["power_law"]["beta"] - {"n log n": 1.3, "n^2": 2.0}[form]) < 0.15


def test_scaling_fits_need_three_finite_medians():
    table = ch.scaling_fits([8, 8, 16, 16, 32, 32], [5, -1, 9, 9, -1, -1])
    assert table.C.isna().all() and not table.best_aic.any() and (table.lengths == 2).all()
    assert table.attrs["medians"].used.tolist() == [True, True, False]  # half hit by 5 at n = 8
    with pytest.raises(ValueError, match="n >= 2"):
        ch.scaling_fits([1, 8, 16], [5, 9, 9])


def test_convergence_diagnostics_tell_mixed_from_stuck_chains():
    rng = np.random.default_rng(0)
    mixed = ch.convergence_diagnostics(rng.normal(size=(4, 400)), burn_in=0.0)
    stuck = ch.convergence_diagnostics(rng.normal(size=(4, 400)) + np.arange(4)[:, None], burn_in=0.0)
    assert abs(mixed["rhat"] - 1) < 0.02 and mixed["ess_bulk"] > 800
    assert stuck["rhat"] > 1.5
    with pytest.raises(ValueError, match="chains"):
        ch.convergence_diagnostics(np.zeros((1, 10)))


# ---------------------------------------------------------------------------------------------
# Seed passages: no tokenizer warning about long paragraphs
# ---------------------------------------------------------------------------------------------


def test_seed_passages_do_not_warn_about_long_paragraphs(tiny_bert, capfd):
    limit = tiny_bert.tokenizer.model_max_length
    tiny_bert.tokenizer.model_max_length = 24
    try:
        capfd.readouterr()
        passages = gc.seed_passages(tiny_bert, 12, 4, seed=0)
        assert "longer than the specified maximum" not in "".join(capfd.readouterr())
    finally:
        tiny_bert.tokenizer.model_max_length = limit
    assert passages.tokens.shape == (4, 12)
    trajectory = gc.glauber(tiny_bert, passages.tokens[:2], 4, progress=False)
    table = ch.chain_excerpts(tiny_bert, trajectory, ["a", "b"], count=3)
    assert list(table.columns) == ["a", "b"] and table.index[-1] == "step 4"
