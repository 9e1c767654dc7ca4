"""Chapter 3 (section 6.1): batched coupling grids, transition fits, hitting times and scaling fits."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from pandas.testing import assert_frame_equal

import book_tools as bt
import glauber_core as glauber
import verdicts as vd
from chapters import phase as ch
from chapters.phase import judging, protocol


def potts(n=5, q=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    coupling = torch.randn(n, n, generator=generator, dtype=torch.float64)  # asymmetric: no joint
    return glauber.PottsConditionals(coupling, 0.3 * torch.randn(n, q, generator=generator, dtype=torch.float64), q=q)


# ---------------------------------------------------------------------------------------------
# Per-pair temperatures: one batch equals separate runs
# ---------------------------------------------------------------------------------------------


def test_per_pair_temperatures_equal_separate_calls():
    model = potts()
    x0 = torch.zeros(6, 5, dtype=torch.long)
    y0 = torch.full((6, 5), 2, dtype=torch.long)
    temperatures = [0.3, 1.0, 4.0]
    grid = ch.coupling_grid(model, x0, y0, temperatures, 60, seed=3, progress=False)
    seeds = ch.temperature_seeds(3, temperatures, 6)
    for t, tau in enumerate(temperatures):
        alone = glauber.coupling_times(model, x0, y0, 60, tau, seed=seeds[6 * t : 6 * t + 6], progress=False)
        assert np.array_equal(grid[grid.temperature == tau].time.to_numpy(), alone.numpy())
    assert grid.coupled.any() and (grid.time != grid.time.iloc[0]).any()
    # a tensor of per-pair temperatures is the same as a list
    per_pair = torch.tensor(temperatures, dtype=torch.float64).repeat_interleave(6)
    again = glauber.coupling_times(model, x0.repeat(3, 1), y0.repeat(3, 1), 60, per_pair, seed=seeds, progress=False)
    assert np.array_equal(again.numpy(), grid.time.to_numpy())


def test_multi_temperature_glauber_equals_separate_runs():
    model = potts(seed=1)
    x0 = torch.tensor([[0, 1, 2, 0, 1], [2, 2, 2, 2, 2]])
    trajectory, rows = ch.multi_temperature_glauber(model, x0, [0.5, 2.0], 30, seed=5, progress=False)
    seeds = ch.temperature_seeds(5, [0.5, 2.0], 2)
    for t, tau in enumerate([0.5, 2.0]):
        alone = glauber.glauber(model, x0, 30, tau, seed=seeds[2 * t : 2 * t + 2], progress=False)
        assert torch.equal(trajectory.tokens[2 * t : 2 * t + 2], alone.tokens)
    assert rows.temperature.tolist() == [0.5, 0.5, 2.0, 2.0] and rows.start.tolist() == [0, 1, 0, 1]


def test_a_temperature_cell_does_not_depend_on_the_other_temperatures():
    """Dropping or reordering a grid's temperatures leaves every remaining cell's chains as they were."""
    model = potts(seed=2)
    x0 = torch.zeros(4, 5, dtype=torch.long)
    y0 = torch.full((4, 5), 2, dtype=torch.long)
    full = ch.coupling_grid(model, x0, y0, [0.5, 1.0, 3.0], 60, seed=7, progress=False)
    part = ch.coupling_grid(model, x0, y0, [3.0, 1.0], 60, seed=7, progress=False)
    assert full.coupled.any() and full.time.nunique() > 1
    for tau in [1.0, 3.0]:
        assert np.array_equal(
            full[full.temperature == tau].time.to_numpy(), part[part.temperature == tau].time.to_numpy()
        )
    chains, _ = ch.multi_temperature_glauber(model, x0[:2], [0.5, 1.0, 3.0], 20, seed=7, progress=False)
    alone, _ = ch.multi_temperature_glauber(model, x0[:2], [1.0], 20, seed=7, progress=False)
    assert torch.equal(chains.tokens[2:4], alone.tokens)
    # distinct temperatures, seeds and chains get distinct seeds
    seeds = ch.temperature_seeds(7, [0.5, 1.0, 3.0], 4) + ch.temperature_seeds(8, [0.5, 1.0, 3.0], 4)
    assert len(set(seeds)) == 24 and all(0 <= s < 2**63 for s in seeds)
    # numpy seeds and tensors of temperatures are the same as ints and lists
    assert ch.temperature_seeds(np.int64(7), torch.tensor([0.5, 1.0, 3.0]), 4) == seeds[:12]
    with pytest.raises(ValueError, match="differ by at least"):
        ch.coupling_grid(model, x0, y0, [1.0, 2.0, 1.0], 5, progress=False)
    with pytest.raises(ValueError, match="seed must be an integer"):
        ch.temperature_seeds(1.5, [1.0], 2)


@pytest.mark.parametrize(
    "temperature",
    [[1.0, 2.0], [1.0, 0.0, 2.0], [1.0, float("nan"), 2.0], ["1", "2", "3"], [True, False, True], "1", None],
)
def test_bad_per_pair_temperatures(temperature):
    model = potts()
    x0 = torch.zeros(3, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="temperature"):
        glauber.coupling_times(model, x0, x0, 3, temperature, progress=False)


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
        glauber.TemperedConditionals(potts(), [1.0, 2.0]).log_scores(
            torch.zeros(3, 5, dtype=torch.long), torch.zeros(3, dtype=torch.long)
        )


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
    grid = pd.DataFrame(
        {
            "n": 8,
            "temperature": [1.0] * 4 + [2.0] * 4,
            "pair": list(range(4)) * 2,
            "time": [3, 5, -1, -1, -1, -1, -1, 7],
        }
    )
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


def nelder_mead_fit(x, y):
    """The chapter's former solver (scipy's Nelder-Mead on Firth's penalised likelihood), the reference for
    the vectorised Newton solver."""
    from scipy.optimize import minimize

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if y.min() == y.max() or x.min() == x.max():
        return math.nan, math.nan
    centre, spread = x.mean(), x.std()
    design = np.stack([np.ones_like(x), (x - centre) / spread], 1)

    def penalised(beta):
        eta = design @ beta
        w = np.clip(1 / (1 + np.exp(-eta)) * (1 - 1 / (1 + np.exp(-eta))), 1e-300, None)
        loglik = (y * eta - np.logaddexp(0, eta)).sum()
        return -(loglik + 0.5 * np.linalg.slogdet(design.T @ (design * w[:, None]))[1])

    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        beta = minimize(
            penalised, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000}
        ).x
        return float(centre - spread * beta[0] / beta[1]), float(spread / beta[1])


AGREEMENT_CASES = [
    ([1.0, 1.0, 1.5, 1.5, 2.0, 2.0], [0, 0, 0, 0, 1, 1]),  # perfectly separated
    ([1.0, 2.0, 3.0, 4.0], [1, 1, 0, 0]),  # separated, falling
    ([1.0, 2.0, 3.0], [0, 1, 1]),  # separated, three points
    ([1.0, 1.0, 2.0, 2.0], [0, 1, 0, 1]),  # flat: slope 0, no midpoint (nan, inf)
    ([1.0, 2.0, 3.0], [1, 1, 1]),  # no transition: NaN
]


def random_cases(count=40, seed=3):
    rng, taus, cases = np.random.default_rng(seed), np.array([1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0]), []
    for _ in range(count):
        x = np.tile(taus, rng.integers(1, 9))
        y = rng.random(len(x)) < 1 / (1 + np.exp(-(x - rng.uniform(1.0, 3.0)) / rng.choice([0.05, 0.2, 0.5, -0.3])))
        cases.append((x, y.astype(float)))
    return cases


@pytest.mark.parametrize("case", range(len(AGREEMENT_CASES) + 1))
def test_newton_fit_agrees_with_nelder_mead(case):
    cases = AGREEMENT_CASES[case : case + 1] if case < len(AGREEMENT_CASES) else random_cases()
    for x, y in cases:
        old, new = nelder_mead_fit(x, y), ch.logistic_fit(x, y)
        assert np.allclose(new, old, atol=1e-6, rtol=1e-6, equal_nan=True)  # (nan, inf) on flat data too


def test_firth_logistic_frequency_weights_count_rows():
    """A weight of 2 is the row twice, a weight of 0 the row left out: every weight row fitted at once equals the
    unweighted fit of the data it stands for."""
    x, y = random_cases(1, seed=5)[0]
    design = np.stack([np.ones_like(x), x - x.mean()], 1)
    weights = np.random.default_rng(0).integers(0, 3, (4, len(x))).astype(float)
    batch = ch.firth_logistic(design, y, weights)
    for row, w in zip(batch, weights):
        repeat = np.repeat(np.arange(len(x)), w.astype(int))
        alone = ch.firth_logistic(design[repeat], y[repeat], np.ones((1, len(repeat))))[0]
        assert np.allclose(row, alone, atol=1e-7)
    with pytest.raises(ValueError, match="firth_logistic"):
        ch.firth_logistic(design, y * 2, weights)


def test_transition_fits_match_a_fit_per_resample():
    """Each bootstrap draw is the Nelder-Mead fit of the pairs its resample drew (multinomial counts from a
    stream seeded by (seed, n)), a pair keeping all its cells; pairs with different cells (two stages) too."""
    rng = np.random.default_rng(2)
    taus, pairs = np.array([1.0, 1.5, 2.0, 3.0]), 6
    frames = [
        pd.DataFrame(
            {
                "n": n,
                "temperature": np.tile(taus, pairs),
                "pair": np.repeat(np.arange(pairs), 4),
                "coupled": logistic_outcomes(mid, 0.3, taus, pairs, rng).reshape(-1),
            }
        )
        for n, mid in ((8, 1.4), (16, 2.2))
    ]
    second = frames[1].iloc[:8].assign(pair=lambda f: f.pair + pairs, temperature=lambda f: f.temperature + 0.1)
    grid = pd.concat([*frames, second], ignore_index=True)
    boot = ch.transition_fits(grid, n_boot=25, seed=0).attrs["boot"]
    draws = []
    for n, sub in grid.groupby("n"):
        rng = np.random.default_rng([0, n])
        ids = np.sort(sub.pair.unique())
        counts = rng.multinomial(len(ids), np.full(len(ids), 1 / len(ids)), 25)
        by_pair = dict(list(sub.groupby("pair")))
        for count in counts:
            resampled = pd.concat([by_pair[p] for p, k in zip(ids, count) for _ in range(k)])
            fit = nelder_mead_fit(resampled.temperature, resampled.coupled.astype(float))
            fit = fit if not fit[1] < 0 else (math.nan, math.nan)
            if resampled.coupled.nunique() == 1:
                fit = (-math.inf if resampled.coupled.all() else math.inf, math.nan)
            draws.append(fit)
    expected = np.array(draws)
    assert np.allclose(boot[["midpoint", "scale"]].to_numpy(), expected, atol=1e-5, rtol=1e-5, equal_nan=True)


def logistic_grid(truth: dict, pairs: int, taus, seed: int = 0) -> pd.DataFrame:
    """Independent pairs whose share met is logistic in tau: truth {n: (tau_1/2, scale)}."""
    rng, frames = np.random.default_rng(seed), []
    for n, (midpoint, scale) in truth.items():
        p = 1 / (1 + np.exp(-(taus - midpoint) / scale))
        frames.append(
            pd.DataFrame(
                {
                    "n": n,
                    "temperature": np.tile(taus, pairs),
                    "pair": np.repeat(np.arange(pairs), len(taus)),
                    "coupled": (rng.random((pairs, len(taus))) < p).reshape(-1),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def test_pooled_fit_recovers_a_known_shift_and_sharpening():
    """Boundaries 1.2 and 2.0, scales 0.24 and 0.2 at n = 6 and 24 (a shift of 0.8, a relative width ratio
    (0.2 / 2.0) / (0.24 / 1.2) = 0.5): the pooled fit's intervals cover both and exclude no shift and no
    sharpening; with a middle length on the pooled trend (l = 1/2: slope and intercept halfway), the same."""
    taus = np.linspace(0.6, 3.0, 9)
    truth = {6: (1.2, 0.24), 24: (2.0, 0.2)}
    slope = (1 / 0.24 + 1 / 0.2) / 2
    intercept = -(1.2 / 0.24 + 2.0 / 0.2) / 2
    for grid_truth in (truth, {**truth, 12: (-intercept / slope, 1 / slope)}):
        fit = ch.pooled_transition_fit(logistic_grid(grid_truth, 150, taus), 6, 24, n_boot=100)
        assert fit["shift_low"] < 0.8 < fit["shift_high"] and fit["shift_low"] > 0
        assert fit["relative_low"] < 0.5 < fit["relative_high"] < 1
        assert fit["curves"][6] == pytest.approx((1.2, 0.2), rel=0.15)
    flat = logistic_grid({6: (0.1, 0.01), 24: (2.0, 0.2)}, 20, taus)  # every pair of n = 6 met: below the grid
    fit = ch.pooled_transition_fit(flat, 6, 24, n_boot=50)
    assert math.isnan(fit["shift"]) and fit["shift_low"] == math.inf  # no point estimate; every draw one-sided


def test_the_second_stage_is_centred_on_the_first_stages_boundary():
    """stage_centre reads the first stage on the budget scaled by n log n; two_stage_grid runs stage 2 at
    centre x exp(width x offsets) with its pairs numbered after stage 1's."""
    taus = [0.75, 1.0, 1.5, 2.0, 3.0]
    first = logistic_grid({24: (1.6, 0.25)}, 200, np.array(taus)).assign(time=lambda f: np.where(f.coupled, 10, -1))
    centre, width = ch.stage_centre(first, budget=400, large=24)
    assert centre == pytest.approx(1.6, rel=0.1) and 0.05 <= width <= 0.5
    none = first.assign(time=-1)
    assert ch.stage_centre(none, 400, 24) == (3.0, protocol.FALLBACK_STAGE_WIDTH)  # none met: the hottest
    ran = []

    def run_stage(temperatures, stage):
        ran.append(list(temperatures))
        return first if stage == 1 else first[first.temperature == 1.0].assign(temperature=1.6)

    cfg = ch.settings("quick")
    grid = ch.two_stage_grid(run_stage, 24, cfg)
    assert ran[0] == cfg.grid_temperatures and len(ran[1]) == len(cfg.stage_offsets)
    assert ran[1] == sorted(ran[1]) and ran[1][0] < centre < ran[1][-1]
    assert set(grid.stage) == {1, 2} and grid[grid.stage == 2].pair.min() == first.pair.max() + 1


def test_transition_fits_per_length_with_intervals():
    rng = np.random.default_rng(1)
    taus = np.arange(1.0, 3.01, 0.25)
    frames = []
    for n, midpoint in ((8, 1.5), (16, 2.0)):
        y = logistic_outcomes(midpoint, 0.2, taus, 80, rng)
        frames.append(
            pd.DataFrame(
                {
                    "n": n,
                    "temperature": np.tile(taus, 80),
                    "pair": np.repeat(np.arange(80), len(taus)),
                    "coupled": y.reshape(-1),
                }
            )
        )
    table = ch.transition_fits(pd.concat(frames), n_boot=40, seed=0).set_index("n")
    for n, midpoint in ((8, 1.5), (16, 2.0)):
        assert table.loc[n, "midpoint_low"] < midpoint < table.loc[n, "midpoint_high"]
        assert abs(table.loc[n, "midpoint"] - midpoint) < 0.1
    assert np.isclose(table.width, 2 * math.log(9) * table.scale).all()
    assert len(table.attrs["boot"]) == 80
    alone = ch.transition_fits(frames[1], n_boot=40, seed=0).set_index("n")  # without n = 8: the same n = 16
    assert_frame_equal(alone, table.loc[[16]])


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
    assert table.attrs["exponent"]["lengths"] == 0  # a length where a chain never hit has no mean time
    hit = times > 0
    exponent = ch.growth_exponent(lengths[hit], times[hit], n_boot=50)
    assert abs(exponent["beta"] - {"n log n": 1.3, "n^2": 2.0}[form]) < 0.15 and exponent["low"] < exponent["beta"]
    assert exponent["claimed_low"] < exponent["claimed_high"] < 1.4  # n (log n + c), c in [0, 1], over n = 8..64


def test_growth_exponent_interval_ends_do_not_hang_on_a_few_draws():
    n = np.repeat([8, 12, 16, 24], 16)
    times = n * (np.log(n) + 0.58) * np.random.default_rng(1).gamma(8, 1 / 8, len(n))
    highs = [ch.growth_exponent(n, times, seed=s)["high"] for s in range(20)]
    few = [ch.growth_exponent(n, times, n_boot=200, seed=s)["high"] for s in range(20)]
    assert np.std(highs) < 0.7 * np.std(few)  # 2,000 draws: the 2.5% tail is not the 5th draw of 200
    assert ch.scaling_fits(n, times, n_boot=20).attrs["exponent"] == ch.growth_exponent(n, times)  # its own draws


def test_scaling_fits_need_three_finite_medians():
    table = ch.scaling_fits([8, 8, 16, 16, 32, 32], [5, -1, 9, 9, -1, -1])
    assert table.C.isna().all() and not table.best_aic.any() and (table.lengths == 2).all()
    assert math.isnan(table.attrs["exponent"]["beta"]) and table.attrs["exponent"]["lengths"] == 1  # n = 16
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
        passages = glauber.seed_passages(tiny_bert, 12, 4, seed=0)
        assert "longer than the specified maximum" not in "".join(capfd.readouterr())
    finally:
        tiny_bert.tokenizer.model_max_length = limit
    assert passages.tokens.shape == (4, 12)
    trajectory = glauber.glauber(tiny_bert, passages.tokens[:2], 4, progress=False)
    table = ch.chain_excerpts(tiny_bert, trajectory, ["a", "b"], count=3)
    assert list(table.columns) == ["a", "b"] and table.index[-1] == "step 4"


# ---------------------------------------------------------------------------------------------
# Every case a model can produce, and each claim's rule driven to each of its outcomes
# ---------------------------------------------------------------------------------------------


def constructed_grid(shares_by_n, taus=(1.0, 1.5, 2.0, 2.5, 3.0), pairs=10, budget=100):
    """A coupling grid where, at length n and temperature taus[k], the first shares_by_n[n][k] pairs met
    (at step 10)."""
    frames = []
    for n, met in shares_by_n.items():
        for tau, k in zip(taus, met):
            time = np.where(np.arange(pairs) < k, 10, -1)
            frames.append(
                pd.DataFrame({"n": n, "temperature": tau, "pair": np.arange(pairs), "time": time, "coupled": time >= 0})
            )
    return pd.concat(frames, ignore_index=True)


def test_no_coupling_everything_coupled_and_a_transition_each_get_a_sentence():
    none = ch.coupling_summary(constructed_grid({8: [0] * 5, 16: [0] * 5}))
    every = ch.coupling_summary(constructed_grid({8: [10] * 5, 16: [10] * 5}))
    some = ch.coupling_summary(constructed_grid({8: [0, 2, 6, 9, 10], 16: [0, 0, 3, 6, 10]}))
    assert "No pair met" in ch.coupling_overview_text(none, 100)
    assert "Every pair met" in ch.coupling_overview_text(every, 100)
    assert "pairs met" in ch.coupling_overview_text(some, 100)
    assert ch.boundary_text(none, 8).startswith("beyond the grid: no pair")
    assert ch.boundary_text(every, 8).startswith("at or below the coldest")
    assert ch.boundary_text(some, 8) == "tau = 2" and ch.boundary_text(some, 16) == "tau = 2.5"


def test_transition_fits_mark_resamples_beyond_the_grid():
    grid = constructed_grid({8: [9, 10, 10, 10, 10], 16: [0, 0, 0, 1, 2]})
    fits = ch.transition_fits(grid, n_boot=60, seed=0).set_index("n")
    boot = fits.attrs["boot"]
    assert (boot[boot.n == 8].midpoint == -np.inf).any()  # resamples where every pair met at every tau
    assert (boot[boot.n == 16].midpoint == np.inf).any()  # resamples where no pair met
    assert fits.midpoint_low[8] == -np.inf and fits.midpoint_high[16] == np.inf


def comparison(shift, low, high, ratio=1.0, ratio_low=0.8, ratio_high=1.2, undefined=0.0):
    return {
        "shift": shift,
        "shift_low": low,
        "shift_high": high,
        "shift_undefined": undefined,
        "ratio": 2.0,
        "ratio_low": 1.5,
        "ratio_high": 2.5,
        "ratio_undefined": undefined,
        "relative": ratio,
        "relative_low": ratio_low,
        "relative_high": ratio_high,
        "relative_undefined": undefined,
    }


@pytest.mark.parametrize(
    "summary, events, verdict",
    [
        (comparison(0.5, 0.2, 0.8), 30, bt.REPRODUCED),
        (comparison(0.5, 0.2, np.inf), 30, bt.REPRODUCED),  # the boundary leaves the grid upward in some resamples
        (comparison(-0.5, -0.8, -0.2), 30, bt.DIFFERS),
        (comparison(0.1, -0.3, 0.5), 30, bt.INCONCLUSIVE),
        (comparison(0.5, math.nan, math.nan, undefined=0.2), 30, bt.INCONCLUSIVE),
        (comparison(math.nan, math.nan, math.nan), 30, bt.INCONCLUSIVE),
        (comparison(math.nan, math.nan, math.nan), 0, bt.INCONCLUSIVE),
    ],
)
def test_boundary_shift_rule_reaches_each_outcome(summary, events, verdict):
    row = judging._boundary_shift_row(summary, events, 8, 32)
    assert row["verdict"] == verdict and "null: no shift" in row["reason"]
    assert "nan" not in row["ours_text"].lower()


@pytest.mark.parametrize(
    "low, high, verdict",
    [
        (0.75, 1.6, bt.REPRODUCED),
        (0.1, 0.6, bt.DIFFERS),
        (0.3, 1.2, bt.INCONCLUSIVE),
        (math.nan, math.nan, bt.INCONCLUSIVE),
    ],
)
def test_transition_width_rule_reaches_each_outcome(low, high, verdict):
    # the relative width's null for n = 8 -> 32: (8 / 32)^(1/4) = 0.71; the absolute ratio (2.0) is not judged
    row = judging._transition_width_row(comparison(0, -1, 1, (low + high) / 2, low, high), 8, 32)
    assert row["verdict"] == verdict and "0.71" in row["reason"]


def scaling_table(law, lengths=(8, 12, 16, 24, 32), chains=9, noise=0.02):
    n = np.repeat(lengths, chains)
    times = law(n) * np.exp(np.random.default_rng(0).normal(0, noise, len(n)))
    return ch.scaling_fits(n, times, n_boot=20)


@pytest.mark.parametrize(
    "law, events, verdict",
    [
        (lambda n: 2.0 * n * np.log(n), 45, bt.REPRODUCED),
        (lambda n: 0.5 * n**2, 45, bt.DIFFERS),
        (lambda n: 3.0 * n, 45, bt.DIFFERS),
        (lambda n: 2.0 * n * np.log(n), 0, bt.INCONCLUSIVE),
    ],
)
def test_nlogn_rule_reaches_each_outcome(law, events, verdict):
    row = judging._nlogn_row(scaling_table(law), events, 1.4, 0.7)
    assert row["verdict"] == verdict and "null: linear (1) or quadratic (2)" in row["reason"]


def test_nlogn_rule_is_inconclusive_between_close_forms_and_without_a_fit():
    noisy = scaling_table(lambda n: 2.0 * n * np.log(n), lengths=(8, 9, 10), noise=0.3)
    assert judging._nlogn_row(noisy, 27, 1.4, 0.7)["verdict"] == bt.INCONCLUSIVE
    empty = ch.scaling_fits([8, 8, 16, 16, 32, 32], [-1] * 6)
    row = judging._nlogn_row(empty, 0, 1.4, 0.7)
    assert row["verdict"] == bt.INCONCLUSIVE and "zero events" in row["reason"] and "nan" not in row["ours_text"]


def ceiling_table(ratio, rise=0.0, lengths=(8, 12, 16, 24), chains=6, pairs=24, seed=1):
    """ceiling_ratios of chains whose d at T is `ratio` times a ceiling of 0.9 (spread 0.02), having risen by
    `rise` over the last third, against unrelated pairs at 0.9 (spread 0.05)."""
    rng = np.random.default_rng(seed)
    n, ref_n = np.repeat(lengths, chains), np.repeat(lengths, pairs)
    final = 0.9 * ratio + rng.normal(0, 0.02, len(n))
    late = final - rise + rng.normal(0, 0.01, len(n))
    return ch.ceiling_ratios(n, final, late, ref_n, 0.9 + rng.normal(0, 0.05, len(ref_n)), n_boot=200)


@pytest.mark.parametrize(
    "ratio, rise, verdict",
    [
        (1.0, 0.0, bt.REPRODUCED),  # at the ceiling at every length
        (0.5, 0.0, bt.DIFFERS),  # half the ceiling, no longer rising
        (0.5, 0.1, bt.INCONCLUSIVE),  # half the ceiling, still rising over the last third: a longer run decides
        (0.9, 0.0, bt.INCONCLUSIVE),  # at the floor
    ],
)
def test_saturation_rule_reaches_each_outcome(ratio, rise, verdict):
    n = np.repeat([8, 12, 16, 24], 6)
    trend = ch.saturation_trend(n, np.full(len(n), 0.9), n_boot=20)
    row = judging._saturation_row(ceiling_table(ratio, rise), trend, 1.0, 300)
    assert row["verdict"] == verdict and "null: below 0.9 of the ceiling" in row["reason"]
    assert "nan" not in row["ours_text"].lower()


def test_ceiling_ratios_carry_the_corrected_interval_of_every_length():
    table = ceiling_table(1.0)
    assert (table.corrected_low <= table.ratio_low).all() and (table.corrected_high >= table.ratio_high).all()
    assert (table.corrected_high - table.corrected_low > table.ratio_high - table.ratio_low).any()
    one = ceiling_table(1.0, lengths=(8,))  # one length: every_part_level(1) is 95%
    assert (
        one.corrected_low.tolist() == one.ratio_low.tolist() and one.corrected_high.tolist() == one.ratio_high.tolist()
    )


def test_saturation_differs_only_where_a_length_misses_the_floor_at_the_corrected_level():
    # n = 24 sits at half the ceiling and has stopped rising, its 95% interval below the floor, but its interval at
    # every_part_level(4) reaches above the floor: no length differs after the Bonferroni correction
    table = ceiling_table(1.0)
    columns = ["ratio", "ratio_low", "ratio_high", "corrected_low", "corrected_high", "rise", "rise_low", "rise_high"]
    table.loc[table.n == 24, columns] = [0.5, 0.45, 0.55, 0.4, 0.95, 0.0, -0.01, 0.01]
    trend = ch.saturation_trend(np.repeat([8, 12, 16, 24], 6), np.full(24, 0.9), n_boot=20)
    row = judging._saturation_row(table, trend, 1.0, 300)
    assert row["verdict"] == bt.INCONCLUSIVE and "no part differs at 98.75% per part" in row["reason"], row["reason"]
    table.loc[table.n == 24, "corrected_high"] = 0.6
    row = judging._saturation_row(table, trend, 1.0, 300)
    assert row["verdict"] == bt.DIFFERS and "differs at 98.75% per part (n=24;" in row["reason"], row["reason"]


def test_ceiling_ratios_and_distance_at_ends_of_known_traces():
    table = ch.ceiling_ratios([8, 8, 16, 16], [0.4, 0.6, 0.9, 0.9], [0.4, 0.4, 0.9, 0.9], [8, 8, 16], [1.0, 1.0, 0.9])
    assert table.ratio.tolist() == pytest.approx([0.5, 1.0]) and table.rise.tolist() == pytest.approx([0.1, 0.0])
    with pytest.raises(ValueError, match="no reference distance"):
        ch.ceiling_ratios([8, 32], [0.4, 0.6], [0.4, 0.4], [8], [1.0])
    distances = torch.tensor([[0.0, 0.3, 0.6, 0.9, 1.2]])
    final, late = ch.distance_at_ends(distances, torch.tensor([0, 100, 200, 300, 400]), 300)
    assert final.tolist() == pytest.approx([0.9]) and late.tolist() == pytest.approx([0.6])


def test_saturation_trend_needs_three_lengths_and_a_positive_median_for_the_exponent():
    trend = ch.saturation_trend([8, 8, 16, 16], [0.1, 0.2, 0.3, 0.4], n_boot=10)
    assert math.isnan(trend["slope"])
    zero = ch.saturation_trend(np.repeat([8, 16, 32], 3), [0.0] * 3 + [0.1] * 3 + [0.2] * 3, n_boot=10)
    assert math.isnan(zero["exponent"]) and zero["slope"] > 0


STEPS = torch.arange(0, 44, 4)  # records every 4 steps up to 40


def crossover_table(hits_by_tau, chains=10, n=8, when=None):
    """Distance traces [B, len(STEPS)] that step from 0.1 to 0.9 at step `when[tau]` (40: the last record) for
    the first `hits` chains at each tau and stay at 0.1 for the rest, with their rows."""
    traces, temps = [], []
    for tau, hits in hits_by_tau.items():
        at = (when or {}).get(tau, 40)
        traces += [torch.where(at <= STEPS, 0.9, 0.1)] * hits + [torch.full((len(STEPS),), 0.1)] * (chains - hits)
        temps += [tau] * chains
    return torch.stack(traces).double(), pd.DataFrame({"temperature": temps, "n": n})


@pytest.mark.parametrize(
    "hits, verdict",
    [
        ({0.3: 0, 1.0: 4, 2.5: 10}, bt.REPRODUCED),
        ({0.3: 10, 1.0: 5, 2.5: 1}, bt.DIFFERS),
        ({0.3: 10, 1.0: 10, 2.5: 10}, bt.INCONCLUSIVE),  # at the ceiling
        ({0.3: 4, 1.0: 5, 2.5: 5}, bt.INCONCLUSIVE),
    ],
)
def test_crossover_rule_reaches_each_outcome(hits, verdict):
    traces, rows = crossover_table(hits)
    rise = ch.rise_with_temperature(traces, STEPS, rows, [0.7])
    assert rise.reached.iloc[0] == " ".join(f"{k}/10" for k in hits.values())
    row = judging._crossover_row(rise)
    assert row["verdict"] == verdict and "n=8 R=0.7" in row["reason"]


def test_crossover_needs_every_length_and_radius():
    rising, _ = crossover_table({0.3: 0, 1.0: 4, 2.5: 10})
    falling, _ = crossover_table({0.3: 10, 1.0: 5, 2.5: 1})
    traces = torch.cat([rising, falling])
    rows = pd.DataFrame({"temperature": [0.3] * 10 + [1.0] * 10 + [2.5] * 10, "n": 8})
    rows = pd.concat([rows, rows.assign(n=16)], ignore_index=True)
    rise = ch.rise_with_temperature(traces, STEPS, rows, [0.7])
    assert judging._crossover_row(rise)["verdict"] == bt.DIFFERS  # rises at n = 8, falls at n = 16
    assert judging._crossover_row(rise[rise.n == 8])["verdict"] == bt.REPRODUCED
    assert "1 of 2 parts rise" in ch.rise_text(rise) and "n = 16, R = 0.7" in ch.rise_text(rise)
    assert "1 fall or stay flat at the corrected 97.50% per part" in ch.rise_text(rise)


def test_crossover_corrected_interval_is_the_same_draws_at_the_bonferroni_level():
    traces, rows = crossover_table({0.3: 2, 1.0: 5, 2.5: 8})
    one = ch.rise_with_temperature(traces, STEPS, rows, [0.7])  # one part: every_part_level(1) is 95%
    assert (
        one[["corrected_low", "corrected_high"]].to_numpy().tolist()
        == one[["slope_low", "slope_high"]].to_numpy().tolist()
    )
    radii = [0.2, 0.5, 0.7]
    both = pd.concat([rows, rows.assign(n=16)], ignore_index=True)
    six = ch.rise_with_temperature(torch.cat([traces, traces]), STEPS, both, radii)  # 2 lengths x 3 radii
    assert len(six) == 6 and (six.corrected_low < six.slope_low).all() and (six.corrected_high > six.slope_high).all()
    wider = ch.rise_with_temperature(torch.cat([traces, traces]), STEPS, both, radii, level=vd.every_part_level(6))
    assert wider.slope_low.tolist() == six.corrected_low.tolist()  # the same draws, read at the corrected level


def crossover_parts(corrected_high: float, parts: int = 12) -> pd.DataFrame:
    """A rise table of `parts` (n, R) parts, every slope clearly positive but the first: its 95% interval lies below
    0, and its interval at every_part_level(parts) reaches up to `corrected_high`."""
    rise = pd.DataFrame(
        {
            "n": np.repeat([8, 12, 16, 24], parts // 4),
            "radius": [0.4, 0.7, 1.0] * (parts // 3),
            "cutoff": 40,
            "temperatures": "0.3 1 1.4 2.5",
            "reached": "1/6 2/6 4/6 5/6",
            "slope": 0.3,
            "slope_low": 0.1,
            "slope_high": 0.5,
            "corrected_low": 0.05,
            "corrected_high": 0.55,
        }
    )
    rise.loc[0, ["slope", "slope_low", "slope_high", "corrected_low", "corrected_high"]] = [
        -0.2,
        -0.35,
        -0.01,
        -0.45,
        corrected_high,
    ]
    return rise


def test_crossover_differs_only_where_a_part_falls_at_the_corrected_level():
    # twelve parts: the first falls at 95% but not at 1 - 0.05/12 (about 99.58%): no part differs after Bonferroni
    row = judging._crossover_row(crossover_parts(0.05))
    assert row["verdict"] == bt.INCONCLUSIVE and "no part differs at 99.58% per part" in row["reason"], row["reason"]
    row = judging._crossover_row(crossover_parts(-0.001))
    assert row["verdict"] == bt.DIFFERS and "differs at 99.58% per part (n=8 R=0.4;" in row["reason"], row["reason"]


def test_crossover_reads_a_ceiling_share_where_half_the_chains_had_arrived():
    # every chain reaches R by the last record (10/10 at every tau: a ceiling with slope 0), hot chains at step 4,
    # warm at 12, cold at 36; 15 of the 30 had arrived by step 12, where the shares are 0, 10 and 10 of 10
    traces, rows = crossover_table({0.3: 10, 1.0: 10, 2.5: 10}, when={0.3: 36, 1.0: 12, 2.5: 4})
    rise = ch.rise_with_temperature(traces, STEPS, rows, [0.7])
    assert rise.cutoff.tolist() == [12] and rise.reached.tolist() == ["0/10 10/10 10/10"]
    assert judging._crossover_row(rise)["verdict"] == bt.REPRODUCED
    assert "by step 12" in judging._crossover_row(rise)["ours_text"]
    backwards, _ = crossover_table({0.3: 10, 1.0: 10, 2.5: 10}, when={0.3: 4, 1.0: 12, 2.5: 36})
    assert judging._crossover_row(ch.rise_with_temperature(backwards, STEPS, rows, [0.7]))["verdict"] == bt.DIFFERS
    at_end = ch.rise_with_temperature(traces[:, -1:].expand(-1, 2).clone(), STEPS[[0, -1]], rows, [0.7])
    assert at_end.reached.tolist() == ["10/10 10/10 10/10"]  # read at the run's end: the ceiling


def test_crossover_cutoff_is_the_run_end_below_half_and_blind_to_temperature():
    traces, rows = crossover_table({0.3: 0, 1.0: 4, 2.5: 10}, when={1.0: 8, 2.5: 20})  # 14 of 30 ever arrive
    assert ch.rise_with_temperature(traces, STEPS, rows, [0.7]).cutoff.tolist() == [40]
    traces, rows = crossover_table({0.3: 10, 1.0: 10, 2.5: 10}, when={0.3: 36, 1.0: 12, 2.5: 4})
    shuffled = rows.assign(temperature=rows.temperature.sample(frac=1, random_state=0).to_numpy())
    assert ch.rise_with_temperature(traces, STEPS, shuffled, [0.7]).cutoff.tolist() == [12]
    with pytest.raises(ValueError, match="distances"):
        ch.rise_with_temperature(traces[:, 0], STEPS, rows, [0.7])


def alpha_frame(seed_values, visited_values, tau=2.5):
    rows = [dict(temperature=tau, states="seed passages", passage=c, alpha=a) for c, a in enumerate(seed_values)]
    rows += [dict(temperature=tau, states="visited", passage=c, alpha=a) for c, a in enumerate(visited_values)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "seeds, visited, boundary, verdict",
    [
        ([1.2, 1.3, 1.1, 1.25, 1.2, 1.3], [0.5, 0.6, 0.55, 0.5, 0.6, 0.5], 1.7, bt.REPRODUCED),
        ([0.0] * 6, [0.0] * 6, 1.7, bt.INCONCLUSIVE),  # every difference 0: a zero-width interval decides nothing
        ([0.5, 0.6, 0.55, 0.5, 0.6, 0.5], [1.2, 1.3, 1.1, 1.25, 1.2, 1.3], 1.7, bt.DIFFERS),
        ([1.0, 0.5, 1.1, 0.6, 0.9, 0.7], [0.8, 0.9, 0.7, 0.8, 0.9, 0.8], 1.7, bt.INCONCLUSIVE),
        ([1.2, 1.3], [0.5, 0.6], math.nan, bt.INCONCLUSIVE),  # no boundary inside the grid
        ([1.2, 1.3], [0.5, 0.6], 3.0, bt.INCONCLUSIVE),  # no drift temperature past the boundary
    ],
)
def test_context_alpha_rule_reaches_each_outcome(seeds, visited, boundary, verdict):
    row = judging._alpha_row(alpha_frame(seeds, visited), boundary, [0.3, 1.0, 2.5])
    assert row["verdict"] == verdict and "null: no difference" in row["reason"]
    assert "nan" not in row["ours_text"].lower()


def test_criterion_threshold_is_the_hottest_temperature_where_some_seed_reaches_one():
    alpha = pd.concat(
        [alpha_frame([1.2, 0.8], [0.1, 0.1], tau=2.0), alpha_frame([0.9, 1.0], [0.1, 0.1], tau=4.0)]
        + [alpha_frame([0.5, 0.9], [0.1, 0.1], tau=8.0), alpha_frame([3.0, 3.0], [3.0, 3.0], tau=1.0)],
        ignore_index=True,
    )
    assert ch.criterion_threshold(alpha) == 4.0  # passage 1 reaches 1 at tau = 4
    assert math.isnan(ch.criterion_threshold(alpha_frame([0.5], [2.0])))  # visited states do not count


@pytest.mark.parametrize(
    "seeds, midpoint, low, high, verdict",
    [
        ([1.2, 0.9], 1.5, 1.3, 1.8, bt.REPRODUCED),  # alpha-hat >= 1 up to 2.5, boundary at most 1.8
        ([1.2, 0.9], 2.0, 1.8, 2.6, bt.INCONCLUSIVE),  # the boundary may lie above 2.5
        ([0.5, 0.9], 1.5, 1.3, 1.8, bt.INCONCLUSIVE),  # alpha-hat below 1: no lower bound
        ([1.2, 0.9], math.nan, math.nan, math.nan, bt.INCONCLUSIVE),  # no boundary
    ],
)
def test_theorem5_rule_is_reproduced_or_inconclusive_never_differs(seeds, midpoint, low, high, verdict):
    fit = pd.Series({"midpoint": midpoint, "midpoint_low": low, "midpoint_high": high})
    row = judging._theorem5_row(alpha_frame(seeds, [0.1, 0.1], tau=2.5), fit, 20)
    assert row["verdict"] == verdict and "never its absence" in row["reason"]
    assert "nan" not in row["ours_text"].lower().split()


def test_two_contexts_are_not_enough_to_decide():
    # a bootstrap over two contexts would call this decided; Student's t with one degree of freedom does not
    row = judging._alpha_row(alpha_frame([0.37, 0.38], [0.50, 0.64]), 1.7, [2.5])
    assert row["verdict"] == bt.INCONCLUSIVE


def test_boundary_row_is_never_judged_off_the_papers_setup():
    fit = pd.Series({"midpoint": 1.7, "midpoint_low": 1.5, "midpoint_high": 1.9})
    row = judging._boundary_row(fit, 16, model="minilm-l4-bbc-mlm", budget=400, pairs=8, passages="bbc")
    assert row["verdict"] == bt.OTHER_SETUP
    for item in ("budget 400", "passages BBC News", "model minilm"):
        assert item in row["setup"]
    empty = judging._boundary_row(
        pd.Series({"midpoint": math.nan, "midpoint_low": math.nan, "midpoint_high": math.nan}),
        16,
        model="x",
        budget=400,
        pairs=8,
        passages="bbc",
    )
    assert empty["verdict"] == bt.OTHER_SETUP and "no transition" in empty["ours_text"]


@pytest.mark.parametrize(
    "midpoint, low, high, verdict",
    [(1.7, 1.6, 1.8, bt.REPRODUCED), (3.0, 2.8, 3.2, bt.DIFFERS), (1.9, 1.6, 2.3, bt.INCONCLUSIVE)],
)
def test_boundary_row_is_judged_on_the_papers_model_and_profile(midpoint, low, high, verdict):
    paper = ch.SETTINGS["paper"]
    fit = pd.Series({"midpoint": midpoint, "midpoint_low": low, "midpoint_high": high})
    near = min(paper["grid_lengths"], key=lambda n: abs(n - ch.PAPER_SEED_LENGTH))
    setup = dict(budget=paper["budget"], pairs=paper["pairs"], passages=paper["passages"])
    row = judging._boundary_row(fit, near, model="roberta-base", **setup)
    assert row["verdict"] == verdict, (row["reason"], row["setup"])
    assert row["setup"].startswith("the paper's model and protocol")
    for changed in (dict(setup, budget=400), dict(setup, passages="bbc")):
        other = judging._boundary_row(fit, near, model="roberta-base", **changed)
        assert other["verdict"] == bt.OTHER_SETUP
    assert judging._boundary_row(fit, near, model="bert-base-uncased", **setup)["verdict"] == bt.OTHER_SETUP


def test_arviz_daily_notice_does_not_reach_stderr(tmp_path, monkeypatch):
    """ArviZ 0.23 warns on the first import of each day (a stamp in the user cache): with a fresh cache, a
    new process that imports the chapter and runs its diagnostics prints no warning."""
    import subprocess
    import sys

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    code = (
        "import numpy as np; from chapters import phase as ch; "
        "print(ch.convergence_diagnostics(np.random.default_rng(0).normal(size=(3, 20)))['chains'])"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, cwd=bt.REPO_ROOT, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr
    assert "Warning" not in done.stderr, done.stderr
    assert list((tmp_path / "cache").rglob("daily_warning")), "ArviZ was not imported from the fresh cache"


def test_the_paper_profile_follows_the_papers_protocol():
    paper = ch.SETTINGS["paper"]
    fig2 = bt.paper_protocol("coupling_boundary_tau")
    fig3a, fig3b = bt.paper_protocol("distance_saturates"), bt.paper_protocol("nlogn_fit")
    fig7 = bt.paper_protocol("crossover_fractions")
    assert paper["budget"] == int(fig2["budget"])
    assert (paper["saturation_tau"], paper["saturation_steps"], paper["saturation_chains"]) == (
        float(fig3a["tau"]),
        int(fig3a["steps"]),
        int(fig3a["trials"]),
    )
    assert (paper["hit_tau"], paper["hit_steps"], paper["hit_chains"], paper["hit_radius"]) == (
        float(fig3b["tau"]),
        int(fig3b["cutoff"]),
        int(fig3b["trials"]),
        float(fig3b["radius"]),
    )
    assert (paper["crossover_steps"], paper["crossover_chains"], paper["record_every"]) == (
        int(fig7["cutoff"]),
        int(fig7["chains"]),
        int(fig7["record_every"]),
    )
    assert ch.crossover_radii() == [float(r) for r in fig7["radius"].split()]
    assert (
        ch.boundary_setup(budget=paper["budget"], pairs=1, n=1, passages=paper["passages"])["passages"]
        == fig2["passages"]
    )
    for profile in ch.SETTINGS.values():  # Figs. 3a and 7 fit inside the shared drift run (3b and alpha run apart)
        assert max(profile["saturation_steps"], profile["crossover_steps"]) <= profile["drift_steps"]
        assert max(profile["saturation_chains"], profile["crossover_chains"]) <= profile["drift_chains"]
        assert profile["hit_record_every"] == 1 and profile["alpha_length"] in profile["drift_lengths"]


def test_protocol_slice():
    rows = pd.DataFrame({"start": [0, 1, 2, 0, 1, 2]})
    chains, records = ch.protocol_slice(rows, torch.tensor([0, 5, 10, 15]), 2, 10)
    assert chains.tolist() == [True, True, False, True, True, False]
    assert records.tolist() == [True, True, True, False]


def test_constant_traces_have_no_rhat_and_no_warning(recwarn):
    result = ch.convergence_diagnostics(np.ones((3, 20)))
    assert math.isnan(result["rhat"]) and result["chains"] == 3
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_a_share_that_falls_with_temperature_has_no_boundary():
    grid = constructed_grid({8: [10, 10, 8, 6, 5]})
    fits = ch.transition_fits(grid, n_boot=20, seed=0)
    assert math.isnan(fits.midpoint.iloc[0]) and math.isnan(fits.scale.iloc[0])


# ---------------------------------------------------------------------------------------------
# Settings, the claims rows and what the page shows
# ---------------------------------------------------------------------------------------------


def test_settings_take_the_profiles_values_unless_overridden_and_derive_the_grid():
    smoke = ch.SETTINGS["smoke"]
    cfg = ch.settings("smoke", potts(), pairs=0, budget=None, grid_temperatures=[], passages="")
    assert cfg.profile == "smoke" and not cfg.protein and vars(cfg).items() >= smoke.items()
    hot = ch.settings("smoke", grid_temperatures=[3.0, 2.0], grid_lengths=[16, 8, 20], alpha_length=8, pairs=4)
    assert hot.grid_temperatures == [3.0, 2.0] and hot.pairs == 4
    assert (hot.lengths, hot.small, hot.large, hot.near) == ([8, 16, 20], 8, 20, ch.PAPER_SEED_LENGTH)
    assert hot.drift_taus == sorted({*smoke["drift_temperatures"], smoke["saturation_tau"], smoke["hit_tau"]})
    with pytest.raises(ValueError, match="profile"):
        ch.settings("fast")


def claims_inputs(cfg):
    """Every input of claim_rows, built from constructed tables at cfg's two grid lengths (8 and 16)."""
    grid = constructed_grid({8: [0, 2, 5, 8, 10], 16: [0, 1, 3, 6, 9]})
    fits = ch.transition_fits(grid, n_boot=20)
    scaled = ch.scaled_budget_grid(grid, 100)
    n = np.repeat([8, 12, 16], 4)
    times = 2 * n * np.log(n) * np.exp(np.random.default_rng(0).normal(0, 0.02, len(n)))
    hits = pd.DataFrame({"n": n, "temperature": cfg.hit_tau, "hitting_time": times})
    traces, rows = crossover_table({0.3: 0, 1.0: 4, 2.5: 10})
    return dict(
        fits=fits,
        scaled=scaled,
        fixed=ch.pooled_transition_fit(grid, 8, 16, n_boot=20),
        budget_free=ch.pooled_transition_fit(scaled, 8, 16, n_boot=20),
        hits=hits,
        scaling=ch.scaling_fits(hits.n, hits.hitting_time, n_boot=20),
        trend=ch.saturation_trend(n, 0.2 * np.log(n), n_boot=20),
        ceiling=ceiling_table(1.0),
        saturation_steps=40,
        rise=ch.rise_with_temperature(traces, STEPS, rows, [0.7]),
        alpha=alpha_frame([1.2, 1.3, 1.1], [0.5, 0.6, 0.55]),
    )


def test_claim_rows_judge_every_claim_of_the_chapter():
    cfg = ch.settings("smoke", grid_lengths=[8, 16], alpha_length=8, grid_temperatures=[1.0, 1.5, 2.0, 2.5, 3.0])
    rows = ch.claim_rows(cfg, "minilm-l4-bbc-mlm", **claims_inputs(cfg))
    assert [row["claim"] for row in rows] == [
        "coupling_boundary_tau",
        "boundary_shift_with_n",
        "transition_width",
        "nlogn_fit",
        "distance_saturates",
        "crossover_fractions",
        "context_averaged_alpha",
        "theorem5_bound_loose",
    ]
    assert rows[0]["verdict"] == bt.OTHER_SETUP and "n = 16" in rows[0]["quantity"]  # cfg.near
    assert rows[3]["verdict"] == bt.REPRODUCED and rows[5]["verdict"] == bt.REPRODUCED
    assert all("nan" not in row["ours_text"].lower().split() for row in rows)


def test_claim_rows_of_a_protein_model_say_how_they_were_measured():
    cfg = ch.settings("smoke", grid_lengths=[8, 16], alpha_length=8, grid_temperatures=[1.0, 1.5, 2.0, 2.5, 3.0])
    protein = SimpleNamespace(**{**vars(cfg), "protein": True, "context_length": 90})
    rows = ch.claim_rows(protein, "antiberty", **claims_inputs(cfg))
    assert "distance_saturates" not in [row["claim"] for row in rows] and len(rows) == 7
    assert all("FR1 of a whole germline gene of 90 residues" in row["quantity"] for row in rows)


def test_the_pages_figures_and_tables():
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    cfg = ch.settings(
        "smoke", grid_lengths=[8, 16], alpha_length=8, grid_temperatures=[1.0, 1.5, 2.0, 2.5, 3.0], pairs=10
    )
    inputs = claims_inputs(cfg)
    grid = constructed_grid({8: [0, 2, 5, 8, 10], 16: [0, 1, 3, 6, 9]})
    cells = ch.coupling_summary(grid)
    drift = pd.DataFrame(
        {
            "n": np.repeat([8, 16], 6),
            "temperature": np.tile([1.0, 4.0], 6),
            "step": 40,
            "distance": np.linspace(0.1, 0.9, 12),
        }
    )
    shares = ch.threshold_shares(torch.rand(6, 3), pd.DataFrame({"temperature": [1.0, 2.0] * 3, "n": 8}))
    alpha = pd.concat([inputs["alpha"], inputs["alpha"].assign(temperature=1.0)], ignore_index=True)
    figures = [
        ch.coupling_figure(cells, cfg),
        ch.transition_figure(cells, inputs["fits"], cfg),
        ch.saturation_figure(drift, cfg),
        ch.hitting_figure(inputs["hits"], inputs["scaling"], cfg),
        ch.threshold_figure(shares, records=3),
        ch.alpha_figure(alpha, cfg),
    ]
    assert all(isinstance(f, matplotlib.figure.Figure) for f in figures)
    assert "Coupling within 40 steps" in figures[0].axes[0].get_title()  # the smoke budget
    plt.close("all")
    diagnostics = pd.DataFrame(
        {
            "n": [8, 8, 16, 16],
            "temperature": [1.0, 2.0] * 2,
            "rhat": [1.0, np.nan, 1.1, 1.2],
            "ess_bulk": [30.0, np.nan, 12.0, 8.0],
        }
    )
    excerpts = pd.DataFrame({"tau = 1": ["a b", "a c"], "tau = 10": ["a b", "x y"]}, index=["step 0", "step 5"])
    tables = [
        ch.fits_view(inputs["fits"]),
        ch.comparison_view(inputs["fixed"], inputs["budget_free"]),
        ch.saturation_view(inputs["ceiling"]),
        ch.scaling_view(inputs["scaling"]),
        ch.diagnostics_view(diagnostics, "rhat"),
        ch.regimes_view(excerpts),
    ]
    for table in tables:  # made for reading: no index, no NaN, at most 6 columns
        html = table.to_html()
        assert len(table.data.columns) <= 6 and "nan" not in html.lower() and "row_heading" not in html
    assert "—" in tables[4].to_html() and list(tables[4].data.columns) == ["n", "tau = 1", "tau = 2"]
    assert ch.alpha_means_text(alpha) == "tau = 1: 0.55 visited vs 1.20 seeds; tau = 2.5: 0.55 visited vs 1.20 seeds"


def test_alpha_is_scored_at_a_length_the_coupling_grid_has():
    """Theorem 5 compares alpha-hat and the coupling boundary of one chain: alpha_length must be a grid length."""
    with pytest.raises(ValueError, match="alpha_length = 6 must be one of the grid lengths"):
        ch.settings("smoke", grid_lengths=[8, 16])
    for profile in ("smoke", "quick", "paper"):
        cfg = ch.settings(profile)
        assert cfg.alpha_length in cfg.lengths


def test_a_protein_window_spreads_its_free_sites_over_fr1_inside_the_whole_gene():
    sites = ch.window_sites(90, 4, span=24)
    assert torch.equal(sites, ch.window_sites(24, 4)) and bool((sites > 0).all() and (sites < 23).all())
    mask = ch.window_mask(90, 4, span=24)
    assert mask.shape == (90,) and int((~mask).sum()) == 4 and bool(mask[24:].all())
    with pytest.raises(ValueError, match="do not fit inside a span of 5"):
        ch.window_sites(90, 4, span=5)
    for profile in ch.PROTEIN_SETTINGS:
        settings = ch.PROTEIN_SETTINGS[profile]
        assert settings["context_length"] == glauber.GERMLINE_CONTEXT and settings["window_span"] <= 25  # FR1


def test_drift_runs_grow_like_n_log_n_from_the_profiles_floor():
    """Issue 63: each length's drift run is max(steps, anchor n ln n / (24 ln 24)) on the record spacing, so n = 24
    runs the anchor (1,000 at quick) and no run is shorter than the floor the other protocols read; the paper's
    profile keeps its fixed 10^4 (anchor 0)."""
    quick, paper = ch.settings("quick"), ch.settings("paper")
    assert quick.drift_steps_at == {6: 300, 10: 304, 16: 584, 24: 1000}
    assert quick.saturation_steps_at == quick.drift_steps_at
    assert all(t % quick.record_every == 0 and t >= quick.crossover_steps for t in quick.drift_steps_at.values())
    assert set(paper.saturation_steps_at.values()) == {10_000}
    assert ch.nlogn_steps(48, 10, 1000, 4) == 4 * math.ceil(1000 * 48 * math.log(48) / (24 * math.log(24)) / 4)
    assert ch.nlogn_steps(24, 10, 0, 4) == 10
    assert ch.run_lengths_text(quick.saturation_steps_at) == "300 (n = 6) to 1,000 (n = 24)"
    assert ch.run_lengths_text(paper.saturation_steps_at) == "10,000"
    short = ch.settings("quick", drift_steps=200)  # a run cut below saturation_steps is read at its own end
    assert short.saturation_steps_at[6] == short.drift_steps_at[6] == 200
    # the read-out is the last record at or before each length's T(n), as distance_at_ends reads it
    read = ch.read_out_steps([0, 4, 300, 304, 0, 392, 396], [8, 8, 8, 8, 12, 12, 12], {8: 302, 12: 392})
    assert read.tolist() == [False, False, True, False, False, True, False]
