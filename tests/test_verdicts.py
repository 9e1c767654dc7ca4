"""The judging module: every rule driven to every outcome, and each interval against a case known exactly."""

import math

import numpy as np
import pytest

import verdicts as vd

R, D, I, O = vd.REPRODUCED, vd.DIFFERS, vd.INCONCLUSIVE, vd.OTHER_SETUP


@pytest.mark.parametrize(
    "low, high, direction, expected",
    [
        (0.2, 0.5, "above", R),
        (-0.5, -0.1, "above", D),
        (-0.1, 0.3, "above", I),
        (-0.3, 0.0, "above", D),
        (-0.5, -0.2, "below", R),
        (0.1, 0.4, "below", D),
        (-0.1, 0.1, "below", I),
        (0.0, 0.3, "below", D),
    ],
)
def test_one_sided_rule_reaches_every_outcome(low, high, direction, expected):
    assert vd.rule_one_sided(low, high, 0.0, direction)[0] == expected


def test_one_sided_rule_takes_an_interval_with_an_infinite_end():
    assert vd.rule_one_sided(0.5, math.inf, 0.0)[0] == R
    assert vd.rule_one_sided(-math.inf, -0.5, 0.0)[0] == D
    assert vd.rule_one_sided(-0.5, math.inf, 0.0)[0] == I


def test_zero_events_are_inconclusive_unless_zero_is_the_answer():
    assert vd.rule_one_sided(0.2, 0.5, 0.0, events=0)[0] == I
    assert vd.rule_one_sided(0.0, 0.01, 0.0, events=0, zero_verdict=D)[0] == D
    assert vd.rule_one_sided(math.nan, math.nan, 0.0)[0] == I
    with pytest.raises(ValueError, match="direction"):
        vd.rule_one_sided(0, 1, 0, "sideways")
    with pytest.raises(ValueError, match="zero_verdict"):
        vd.rule_one_sided(0, 1, 0, zero_verdict=R)


def test_an_inconclusive_interval_says_what_run_would_decide_it():
    # half-width 0.2, distance 0.1 from the null: 80% power needs (2.80 / 1.96)^2 (0.2 / 0.1)^2 = 8.17 times the run
    verdict, reason = vd.rule_one_sided(-0.1, 0.3, 0.0, estimate=0.1)
    assert verdict == I and "about 8.17x" in reason and "80% power" in reason and "find it reproduced" in reason
    # the estimate on the other side: the larger run would find it differs
    verdict, reason = vd.rule_one_sided(-0.3, 0.1, 0.0, estimate=-0.1)
    assert verdict == I and "find it differs" in reason
    assert "find it" not in vd.decide_text(0.1, -0.1, 0.3, 0.0)  # no side given: no verdict named
    assert "sits at the null" in vd.decide_text(0.0, -0.1, 0.1, 0.0)


def test_trend_rule_reaches_every_outcome():
    assert vd.rule_trend(0.3, 0.1, 0.5)[0] == R
    assert vd.rule_trend(-0.3, -0.5, -0.1)[0] == D
    assert vd.rule_trend(0.1, -0.1, 0.3)[0] == I
    assert vd.rule_trend(-0.3, -0.5, -0.1, "below")[0] == R


def test_share_above_a_known_chance_reaches_every_outcome():
    assert vd.rule_share_above_chance(40, 50, 0.5)[0] == R
    assert vd.rule_share_above_chance(10, 50, 0.5)[0] == D
    assert vd.rule_share_above_chance(27, 50, 0.5)[0] == I
    assert vd.rule_share_above_chance(0, 0, 0.5)[0] == I
    with pytest.raises(ValueError):
        vd.rule_share_above_chance(5, 4, 0.5)


def test_equivalence_rule_reaches_every_outcome_and_never_rewards_a_wide_interval():
    assert vd.rule_equivalence(0.66, 0.75, 0.64, 0.80)[0] == R
    assert vd.rule_equivalence(0.2, 0.4, 0.64, 0.80)[0] == D
    assert vd.rule_equivalence(0.9, 1.0, 0.64, 0.80)[0] == D
    assert vd.rule_equivalence(0.1, 2.0, 0.64, 0.80)[0] == I
    assert vd.rule_equivalence(math.nan, math.nan, 0.64, 0.80)[0] == I
    with pytest.raises(ValueError):
        vd.rule_equivalence(0, 1, 0.8, 0.6)


def test_both_kinds_rule_reaches_every_outcome():
    assert vd.rule_both_kinds(3, 10)[0] == R
    assert vd.rule_both_kinds(0, 60)[0] == D  # 0 of 60: upper bound 0.06 < 0.1
    assert vd.rule_both_kinds(0, 5)[0] == I
    assert vd.rule_both_kinds(0, 0)[0] == I
    # the number of cases the inconclusive reason asks for is enough to decide
    needed = int(vd.rule_both_kinds(0, 5)[1].split("about ")[1].split(" ")[0])
    assert vd.rule_both_kinds(0, needed)[0] == D


@pytest.mark.parametrize(
    "scores, expected",
    [
        ({"n log n": 10.0, "n": 15.0, "n^2": 30.0}, R),
        ({"n log n": 20.0, "n": 10.0, "n^2": 30.0}, D),
        ({"n log n": 10.0, "n": 11.0, "n^2": 30.0}, I),
        ({"n log n": math.nan, "n": 1.0}, I),
    ],
)
def test_preferred_form_rule_reaches_every_outcome(scores, expected):
    assert vd.rule_preferred_form(scores, "n log n")[0] == expected


def test_every_part_rule_reaches_every_outcome():
    assert vd.rule_every_part([R, R], ["n=8", "n=16"], corrected=[R, R])[0] == R
    assert vd.rule_every_part([R, D], corrected=[R, D])[0] == D
    assert vd.rule_every_part([R, I], corrected=[R, I])[0] == I
    assert vd.rule_every_part([], corrected=[])[0] == I
    with pytest.raises(ValueError):
        vd.rule_every_part([R], ["a", "b"], corrected=[R])
    with pytest.raises(ValueError):
        vd.rule_every_part([R, R], corrected=[R])


def test_every_part_rule_differs_only_on_the_corrected_level():
    # a part that differs at 95% but not at 1 - 0.05 / K leaves the claim undecided
    verdict, reason = vd.rule_every_part([R, D, R], ["a", "b", "c"], corrected=[R, I, R])
    assert verdict == I and "98.33%" in reason
    assert vd.rule_every_part([R, D, R], ["a", "b", "c"], corrected=[R, D, R])[0] == D
    assert vd.every_part_level(12) == pytest.approx(1 - 0.05 / 12)
    with pytest.raises(ValueError):
        vd.every_part_level(0)


def test_every_part_rule_keeps_false_differs_under_five_percent_at_twelve_true_parts():
    # 12 parts, each a mean of 20 normal draws exactly at the boundary of the paper's side (true effect 0.3 above
    # the null, the least favourable true case is the null itself): without the correction, some part differs
    # 1 - 0.975^12 = 26% of the time; with it at most 2.5%
    rng = np.random.default_rng(0)
    wrong = 0
    for _ in range(400):
        parts, corrected = [], []
        for values in rng.normal(0.0, 1.0, (12, 20)):
            for level, out in ((0.95, parts), (vd.every_part_level(12), corrected)):
                mean, low, high = vd.mean_interval(values, level)
                out.append(vd.rule_one_sided(low, high, 0.0, "above")[0])
        wrong += vd.rule_every_part(parts, corrected=corrected)[0] == D
    assert wrong / 400 <= 0.05


def test_model_specific_judging_is_structured():
    protocol = {"n": "20", "chains": "50", "scorer": "bart-large-mnli", "window": "not stated"}
    setup = {"n": 20, "chains": 50, "scorer": "bart-large-mnli", "window": 300}
    kwargs = dict(paper_models=["bert-base-uncased"], protocol=protocol, band=(0.8, 1.0))
    verdict, _, text = vd.judge_model_specific("BERT-base-uncased", setup, 0.85, 0.95, **kwargs)
    assert verdict == R and "window 300 (paper: not stated)" in text
    assert vd.judge_model_specific("bert-base-uncased", setup, 0.3, 0.5, **kwargs)[0] == D
    verdict, _, text = vd.judge_model_specific("bert-base-uncased", dict(setup, chains=30), 0.85, 0.95, **kwargs)
    assert verdict == O and "chains 30 (paper: 50)" in text
    verdict, _, text = vd.judge_model_specific("roberta-base", setup, 0.85, 0.95, **kwargs)
    assert verdict == O and "model roberta-base" in text
    verdict, _, text = vd.judge_model_specific("bert-base-uncased", {}, 0.85, 0.95, **kwargs)
    assert verdict == O and "n not recorded by this run (paper: 20)" in text
    assert (
        vd.judge_model_specific(
            "bert-base-uncased", setup, 0.85, 0.95, paper_models=["bert-base-uncased"], protocol=protocol, band=None
        )[0]
        == I
    )


def test_checks_pass_and_fail():
    assert vd.control_check(1e-15, {"asymmetric Potts": 0.3}, 1e-9)[0]
    assert not vd.control_check(1e-3, {"asymmetric Potts": 0.3}, 1e-9)[0]
    assert not vd.control_check(1e-15, {"asymmetric Potts": 1e-12}, 1e-9)[0]
    assert vd.check_row("c", "p", True, "d")["result"] == vd.PASS
    assert vd.check_row("c", "p", False, "d")["result"] == vd.FAIL
    with pytest.raises(ValueError):
        vd.check_row("c", "", True, "d")


def test_wilson_interval_matches_its_closed_form():
    low, high = vd.share_intervals([0], [10])
    z = 1.959963984540054
    assert low[0] == 0 and high[0] == pytest.approx(z**2 / (10 + z**2))


def test_t_interval_matches_its_closed_form():
    mean, low, high = vd.mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and high - mean == pytest.approx(4.302652729911275 * 1 / math.sqrt(3))
    assert math.isnan(vd.mean_interval([1.0])[1])


def test_rank_correlation_is_exact_on_monotone_data_and_bootstrap_brackets_the_mean():
    x = np.arange(10.0)
    assert vd.rank_correlation(x, x**3) == pytest.approx(1.0)
    assert vd.rank_correlation(x, -x) == pytest.approx(-1.0)
    low, high = vd.bootstrap_ci(np.arange(20.0))
    assert low < 9.5 < high


def test_a_zero_width_interval_never_decides():
    """A statistic with no spread (every chain at the same value) has measured nothing: inconclusive on either
    side of the null, for the one-sided, trend and share rules alike (issue 41: AntiBERTy's +0.00 [-0.00, +0.00])."""
    for value, null in ((0.0, 0.0), (0.5, 0.0), (-0.5, 0.0)):
        for direction in ("above", "below"):
            verdict, reason = vd.rule_one_sided(value, value, null, direction)
            assert verdict == vd.INCONCLUSIVE and "zero width" in reason
    assert vd.rule_trend(0.0, 0.0, 0.0)[0] == vd.INCONCLUSIVE
    assert vd.rule_one_sided(0.1, 0.2, 0.0)[0] == vd.REPRODUCED  # a positive width still decides


# ---- chapter 4 rules (issue 41) ----


def test_welch_interval_covers_the_difference_and_degenerates_on_constants():
    rng = np.random.default_rng(0)
    estimate, low, high = vd.welch_interval(rng.normal(1.0, 1, 200), rng.normal(0.0, 2, 300))
    assert low < 1.0 < high and low < estimate < high and high - low < 0.8
    assert vd.welch_interval([1, 1], [0, 0]) == (1.0, 1.0, 1.0)  # zero width: rule_one_sided decides nothing
    assert all(math.isnan(v) for v in vd.welch_interval([1], [0, 1]))


def test_excess_rise_interval_pairs_each_chain_with_its_control():
    """A shared rise cancels chain by chain: the interval is narrow though the chains' rises differ widely."""
    rng = np.random.default_rng(1)
    shared = rng.uniform(0, 0.8, 12)  # what every label gains on a chain, very different across chains
    start = rng.uniform(0, 0.1, (2, 12))
    excess, low, high = vd.excess_rise_interval(
        start[0], start[0] + shared + 0.1 + rng.normal(0, 0.01, 12), start[1], start[1] + shared
    )
    assert low < 0.1 < high and high - low < 0.03 and low > 0
    assert all(math.isnan(v) for v in vd.excess_rise_interval([0.1], [0.2], [0.1], [0.1])[1:])
    with pytest.raises(ValueError, match="one length"):
        vd.excess_rise_interval([0.1, 0.2], [0.2], [0.1], [0.1])


def test_rank_shares_count_the_reference_above_with_ties_half():
    reference = np.array([0.0, 0.1, 0.2, 0.3])
    assert vd.rank_shares([0.1, 0.3], reference).tolist() == pytest.approx([0.625, 0.125])  # 2 above, 1 tie of 4
    columns = np.stack([np.zeros(50), np.ones(50)], axis=1)  # one column per value
    assert vd.rank_shares([0.5, 0.5], columns).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="reference"):
        vd.rank_shares([0.5, 0.5, 0.5], columns)


def test_rule_median_sign_reaches_every_outcome_and_keeps_its_width_at_the_extremes():
    rng = np.random.default_rng(2)
    reference = rng.beta(0.3, 2, 300)  # skewed scores, like topic scores on word salad
    below = vd.rule_median_sign(vd.rank_shares(np.zeros(12), reference), "below")
    assert below[0] == vd.REPRODUCED and below[2] == 1.0 and below[3] < 1.0  # every chain beyond every draw
    assert vd.rule_median_sign(vd.rank_shares(np.ones(12), reference), "below")[0] == vd.DIFFERS
    assert vd.rule_median_sign(vd.rank_shares(np.ones(12), reference), "above")[0] == vd.REPRODUCED
    alike = [vd.rule_median_sign(vd.rank_shares(rng.beta(0.3, 2, 24), reference), "below")[0] for _ in range(200)]
    assert alike.count(vd.REPRODUCED) <= 10 and alike.count(vd.DIFFERS) <= 10  # the null: about 3% each way
    assert vd.rule_median_sign([0.5, 0.5], "below")[0] == vd.INCONCLUSIVE  # ties only: no chain to count
    assert vd.rule_median_sign([], "above")[0] == vd.INCONCLUSIVE
    with pytest.raises(ValueError, match="side"):
        vd.rule_median_sign([0.2], "beside")


@pytest.mark.parametrize(
    "target, control, chance, verdict",
    [
        (0.6, 0.2, 0.2, vd.REPRODUCED),  # above its control label and above basin-free text
        (0.6, 0.2, 0.9, vd.DIFFERS),  # basin-free text crosses more often
        (0.2, 0.6, 0.1, vd.DIFFERS),  # another label crosses more often
        (0.4, 0.4, 0.4, vd.INCONCLUSIVE),  # neither
    ],
)
def test_rule_recurrence_reaches_every_outcome(target, control, chance, verdict):
    rng = np.random.default_rng(3)
    result = vd.rule_recurrence(
        np.clip(target + rng.normal(0, 0.05, 12), 0, 1),
        np.clip(control + rng.normal(0, 0.05, 12), 0, 1),
        rng.random(300) < chance,
    )
    assert result["verdict"] == verdict, result["reason"]
    assert vd.rule_recurrence([0.5], [0.1], [0, 1])["verdict"] == vd.INCONCLUSIVE  # one chain: no interval


# ---- chapter 3 rules (issue 41) ----


def test_percentile_interval_is_nan_safe_and_keeps_infinite_draws(recwarn):
    low, high, undefined = vd.percentile_interval([np.nan] * 10)
    assert math.isnan(low) and math.isnan(high) and undefined == 1
    low, high, undefined = vd.percentile_interval(np.r_[np.arange(100.0), [np.inf] * 5])
    assert low == 2 and high == np.inf and undefined == 0
    low, high, undefined = vd.percentile_interval(np.r_[np.arange(90.0), [np.nan] * 10])
    assert math.isnan(low) and undefined == pytest.approx(0.1)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_group_bootstrap_resamples_within_each_group():
    groups = [np.zeros(5), np.ones(7)]
    draws = vd.group_bootstrap(groups, lambda g: g[1].mean(1) - g[0].mean(1), resamples=50, seed=0)
    assert draws.shape == (50,) and (draws == 1).all()  # a resample never mixes the groups
    spread = vd.group_bootstrap([np.arange(10.0)], lambda g: g[0].mean(1), resamples=2000, seed=1)
    assert abs(spread.std() - np.arange(10.0).std() / math.sqrt(10)) < 0.1  # the bootstrap standard error
    with pytest.raises(ValueError):
        vd.group_bootstrap([[]], lambda g: g[0].mean(1))


@pytest.mark.parametrize(
    "low, high, small, large, events, expected",
    [
        (0.2, 0.8, 8, 24, 10, vd.REPRODUCED),
        (-0.8, -0.2, 8, 24, 10, vd.DIFFERS),
        (-0.2, 0.8, 8, 24, 10, vd.INCONCLUSIVE),
        (0.2, 0.8, 8, 8, 10, vd.INCONCLUSIVE),  # one grid length: nothing to compare
        (0.2, 0.8, 8, 24, 0, vd.INCONCLUSIVE),
    ],
)
def test_two_lengths_rule_reaches_every_outcome(low, high, small, large, events, expected):
    verdict, reason = vd.rule_two_lengths(low, high, 0.0, small=small, large=large, events=events)
    assert verdict == expected
    assert small != large or "one grid length" in reason


def test_two_lengths_rule_says_why_there_is_no_interval_but_keeps_a_one_sided_one():
    assert vd.rule_two_lengths(math.nan, math.nan, 0.0, small=8, large=24, missing="why")[1] == "no interval: why"
    verdict, reason = vd.rule_two_lengths(0.5, math.inf, 0.0, small=8, large=24, missing="why")
    assert verdict == vd.REPRODUCED and "why" not in reason


@pytest.mark.parametrize(
    "low, high, lengths, events, expected",
    [
        (1.15, 1.5, 4, 40, vd.REPRODUCED),  # excludes 1 and 2, meets the n log n range
        (0.9, 1.2, 4, 40, vd.DIFFERS),  # misses the n log n range: linear
        (1.8, 2.2, 4, 40, vd.DIFFERS),  # quadratic
        (0.9, 1.5, 4, 40, vd.INCONCLUSIVE),  # contains 1 and the range
        (1.15, 1.5, 2, 40, vd.INCONCLUSIVE),  # two lengths are no trend
        (1.15, 1.5, 4, 0, vd.INCONCLUSIVE),  # zero hits
        (1.3, 1.3, 4, 40, vd.INCONCLUSIVE),  # zero width
        (math.nan, math.nan, 4, 40, vd.INCONCLUSIVE),
    ],
)
def test_growth_exponent_rule_reaches_every_outcome(low, high, lengths, events, expected):
    verdict, _ = vd.rule_growth_exponent(low, high, (1.3, 1.39), {"n": 1.0, "n^2": 2.0}, lengths=lengths, events=events)
    assert verdict == expected


@pytest.mark.parametrize(
    "parts, expected",
    [
        ([(0.95, 1.05, -0.01, 0.01)] * 3, vd.REPRODUCED),
        ([(0.95, 1.05, -0.01, 0.01), (0.4, 0.6, -0.01, 0.02)], vd.DIFFERS),  # below the floor, flat
        ([(0.95, 1.05, -0.01, 0.01), (0.4, 0.6, 0.05, 0.1)], vd.INCONCLUSIVE),  # below the floor, still rising
        ([(0.4, 0.6, -0.05, 0.2)], vd.INCONCLUSIVE),  # a rise not shown to be 0: it may still be rising
        ([(0.85, 1.05, -0.01, 0.01)], vd.INCONCLUSIVE),  # contains the floor
        ([(0.95, 0.95, 0.0, 0.0)], vd.INCONCLUSIVE),  # zero width
    ],
)
def test_reaches_ceiling_rule_reaches_every_outcome(parts, expected):
    assert vd.rule_reaches_ceiling(parts, 0.9, corrected=[p[:2] for p in parts])[0] == expected


def test_reaches_ceiling_rule_differs_only_on_the_corrected_intervals():
    parts = [(0.95, 1.05, -0.01, 0.01), (0.4, 0.6, -0.01, 0.02)]
    assert vd.rule_reaches_ceiling(parts, 0.9, corrected=[(0.9, 1.1), (0.3, 0.95)])[0] == vd.INCONCLUSIVE


def test_paired_mean_rule_reaches_every_outcome():
    assert vd.rule_paired_mean([0.5, 0.6, 0.7, 0.55], missing="none")[0] == vd.REPRODUCED
    assert vd.rule_paired_mean([-0.5, -0.6, -0.7, -0.55], missing="none")[0] == vd.DIFFERS
    assert vd.rule_paired_mean([0.5, -0.6, 0.7, -0.55], missing="none")[0] == vd.INCONCLUSIVE
    assert vd.rule_paired_mean([0.0] * 5, missing="none")[0] == vd.INCONCLUSIVE  # zero width
    verdict, reason, mean, low, high = vd.rule_paired_mean([], missing="no contexts")
    assert verdict == vd.INCONCLUSIVE and reason == "no interval: no contexts" and math.isnan(mean)
    _, _, mean, low, high = vd.rule_paired_mean([1.0, 2.0, 3.0], missing="none")
    assert (mean, low, high) == pytest.approx(vd.mean_interval([1.0, 2.0, 3.0]))


# ---- chapter 5 rules (issue 41) ----


def test_poisson_interval_is_garwoods():
    from scipy.stats import chi2

    assert vd.poisson_interval(0) == pytest.approx((0.0, chi2.ppf(0.975, 2) / 2))  # 3.69
    low, high = vd.poisson_interval(17)
    assert (low, high) == pytest.approx((9.90, 27.22), abs=0.01)  # the paper's 17 traps


def test_ratio_of_means_interval_covers_a_known_ratio():
    rng = np.random.default_rng(0)
    ratio, low, high = vd.ratio_of_means_ci(rng.exponential(300, 200), rng.exponential(100, 200))
    assert low < 3 < high and low < ratio < high
    with pytest.raises(ValueError, match="at least 2"):
        vd.ratio_of_means_ci([1.0], [1.0, 2.0])


def test_spearman_difference_is_the_two_rank_correlations_apart():
    x = np.arange(10.0)
    rho_xy, rho_xz, low, high = vd.spearman_difference_ci(x, x**2, -x)
    assert (rho_xy, rho_xz) == pytest.approx((1.0, -1.0)) and low == high == pytest.approx(2.0)
    assert all(math.isnan(v) for v in vd.spearman_difference_ci(x[:2], x[:2], x[:2]))


@pytest.mark.parametrize(
    "min_gaps, expected",
    [
        ([1.0, -1.0], vd.REPRODUCED),
        ([1.0] * 40, vd.DIFFERS),  # enough held states for an absent kind's share to fall under 10%
        ([1.0] * 16, vd.INCONCLUSIVE),  # too few: says how many would decide
        ([], vd.INCONCLUSIVE),
    ],
)
def test_trap_split_rule_reaches_every_outcome(min_gaps, expected):
    verdict, reason = vd.rule_trap_split(min_gaps)
    assert verdict == expected
    assert ("cannot reach differs" in reason) == (expected == vd.INCONCLUSIVE and len(min_gaps) > 0)


def test_trap_split_rule_calls_a_gap_negative_only_beyond_the_tie_tolerance():
    """A Delta* within TIE_TOLERANCE of 0 is a tie: neither kind, left out of the split and named in the reason."""
    tol = vd.TIE_TOLERANCE
    assert tol == 1e-3
    verdict, reason = vd.rule_trap_split([1.0, -tol / 2])  # one perfect, one tie: no approximate state
    assert verdict == vd.INCONCLUSIVE and "1 tied" in reason and "no approximate case among 1" in reason
    assert vd.rule_trap_split([1.0, -2 * tol])[0] == vd.REPRODUCED  # negative beyond the tolerance
    assert vd.rule_trap_split([tol / 2, -1.0])[0] == vd.INCONCLUSIVE  # a tie is not perfect either
    assert vd.rule_trap_split([1.0] * 40 + [0.0] * 5)[0] == vd.DIFFERS  # ties do not count as approximate
    assert vd.rule_trap_split([1.0, -0.0005], tolerance=1e-4)[0] == vd.REPRODUCED  # the tolerance is the rule's
    with pytest.raises(ValueError, match="finite minimum gaps"):
        vd.rule_trap_split([1.0, math.nan])


def test_outlasts_null_rule_reaches_every_outcome_and_needs_room_to_differ():
    rng = np.random.default_rng(1)
    long, short = rng.normal(900, 50, 30), rng.normal(200, 20, 30)
    assert vd.rule_outlasts_null(long, short, 10_000)[0] == vd.REPRODUCED
    assert vd.rule_outlasts_null(short, short, 10_000)[0] == vd.DIFFERS  # ratio 1, room for 50
    assert vd.rule_outlasts_null(short, short, 1_000)[0] == vd.DIFFERS  # 1000 / 200 = 5 >= 2 * 2: room enough
    verdict, reason, *_ = vd.rule_outlasts_null(short * 2, short * 2, 1_000)  # 1000 / 400 = 2.5 < 4
    assert verdict == vd.INCONCLUSIVE and "caps the ratio" in reason
    assert vd.rule_outlasts_null([250.0, 650.0, 300.0, 500.0], short, 10_000)[0] == vd.INCONCLUSIVE  # about 2
    assert vd.rule_outlasts_null([], short, 1_000, held=3)[0] == vd.INCONCLUSIVE
    assert vd.rule_outlasts_null(short, [], 1_000)[0] == vd.INCONCLUSIVE
    assert vd.rule_outlasts_null(short[:1], short, 1_000)[0] == vd.INCONCLUSIVE


def test_mean_gap_rule_reaches_every_outcome():
    duration = np.arange(12.0)
    shuffled = np.random.default_rng(0).permutation(12).astype(float)
    assert vd.rule_mean_gap_tracks_duration(duration, duration, shuffled)[0] == vd.REPRODUCED
    assert vd.rule_mean_gap_tracks_duration(duration, shuffled, duration)[0] == vd.DIFFERS
    assert vd.rule_mean_gap_tracks_duration(duration, duration, duration)[0] == vd.INCONCLUSIVE  # zero width
    verdict, _, stats = vd.rule_mean_gap_tracks_duration(duration[:2], duration[:2], duration[:2])
    assert verdict == vd.INCONCLUSIVE and math.isnan(stats["rho_difference"])


def test_escapes_at_weakest_rule_reaches_every_outcome():
    assert vd.rule_escapes_at_weakest(40, 50, 0.3)[0] == vd.REPRODUCED
    assert vd.rule_escapes_at_weakest(2, 50, 0.6)[0] == vd.DIFFERS
    assert vd.rule_escapes_at_weakest(2, 5, 0.3)[0] == vd.INCONCLUSIVE
    assert vd.rule_escapes_at_weakest(0, 0, math.nan)[0] == vd.INCONCLUSIVE


def test_cold_stays_near_rule_reaches_every_outcome():
    warm = np.array([0.6, 0.7, 0.5, 0.65, 0.55])
    assert vd.rule_cold_stays_near(np.zeros(5), warm)[0] == vd.REPRODUCED  # at its start: excess -warm / 2
    assert vd.rule_cold_stays_near(warm, warm)[0] == vd.DIFFERS  # as far from its start as warm (fell, or moves)
    assert vd.rule_cold_stays_near(warm / 2 + [0.1, -0.1, 0.1, -0.1, 0.0], warm)[0] == vd.INCONCLUSIVE
    assert vd.rule_cold_stays_near(np.full(5, 0.5), np.ones(5))[0] == vd.INCONCLUSIVE  # zero width
    assert vd.rule_cold_stays_near([0.1], [0.5])[0] == vd.INCONCLUSIVE
    with pytest.raises(ValueError, match="pair chain for chain"):
        vd.rule_cold_stays_near([0.1, 0.2], [0.5])


def test_deciding_part_prefers_differs_then_undecided_then_the_largest_upper_end():
    parts = [dict(verdict=vd.REPRODUCED, high=-0.1), dict(verdict=vd.REPRODUCED, high=-0.05)]
    assert vd.deciding_part(parts)["high"] == -0.05
    assert vd.deciding_part([*parts, dict(verdict=vd.INCONCLUSIVE, high=0.1)])["verdict"] == vd.INCONCLUSIVE
    assert vd.deciding_part([*parts, dict(verdict=vd.DIFFERS, high=0.3)])["verdict"] == vd.DIFFERS
    assert vd.deciding_part([]) is None
    assert vd.rule_not_run("no chain at τ = 1") == (vd.NOT_RUN, "no chain at τ = 1")


def test_zero_width_is_judged_up_to_rounding_and_the_rare_share_count_is_wilsons():
    """An interval whose width is at the level of rounding decides nothing (reproduced on [1e-17, 2e-17] would be
    noise); rule_both_kinds and rule_trap_split agree on how many cases rule a kind out (35 at 10%)."""
    assert vd.rule_one_sided(1e-17, 2e-17, 0.0)[0] == vd.INCONCLUSIVE
    assert vd.rule_one_sided(0.5, 0.5 + 1e-14, 0.0)[0] == vd.INCONCLUSIVE
    assert vd.cases_to_rule_out(0.1) == 35
    assert vd.share_intervals([0], [35])[1][0] < 0.1 < vd.share_intervals([0], [34])[1][0]
    assert vd.rule_both_kinds(35, 35)[0] == vd.DIFFERS and vd.rule_both_kinds(34, 34)[0] == vd.INCONCLUSIVE
    verdict, reason = vd.rule_trap_split([1.0] * 36)
    assert verdict == vd.DIFFERS and "cannot reach differs" not in reason


def test_lower_bound_ratio_needs_a_finite_upper_end():
    verdict, reason, ratio = vd.rule_lower_bound_ratio(1.4, 3.6, float("inf"))
    assert verdict == vd.INCONCLUSIVE and "no upper end" in reason and ratio != ratio
    assert vd.rule_lower_bound_ratio(4.0, 1.7, 2.3)[0] == vd.REPRODUCED


# ---- chapter 4 protein rule (issue 42) ----


def test_reversion_rule_reaches_every_outcome_against_the_no_pull_value():
    """Null 2/|V| - 1 (a uniform model: back with 1/|V|, off with (|V| - 1)/|V|): -0.9 with 20 residues, 0 with
    two; each temperature judged alone."""
    assert vd.rule_reversion({}, 20) == {"null": pytest.approx(-0.9), "parts": []}
    assert vd.rule_reversion({1.0: [0.1]}, 2)["null"] == 0.0
    up, at, down = [-0.5, -0.6, -0.7, -0.55], [-0.8, -1.0, -0.85, -0.95], [-0.95, -0.97, -0.93, -0.96]
    judged = vd.rule_reversion({2.0: up, 0.5: at, 1.0: down}, 20)
    assert [p["temperature"] for p in judged["parts"]] == [2.0, 0.5, 1.0]  # in the order given
    assert [p["verdict"] for p in judged["parts"]] == [R, I, D]  # a difference of -0.6 is still a pull with 20
    assert judged["parts"][0]["reason"].endswith("lies above the null -0.9")
    assert vd.rule_reversion({1.0: up}, 2)["parts"][0]["verdict"] == D  # with two residues it is drift away
    part = judged["parts"][0]
    assert (part["estimate"], part["low"], part["high"]) == pytest.approx(vd.mean_interval(up))
    (flat,) = vd.rule_reversion({0.5: [1.0] * 6}, 20)["parts"]  # every chain reverted fully: no spread measured
    assert flat["verdict"] == I and "zero width" in flat["reason"]
    (few,) = vd.rule_reversion({1.0: [0.9, float("nan")]}, 20)["parts"]  # one finite chain: no interval
    assert few["verdict"] == I and "fewer than two mutated chains" in few["reason"] and few["chains"] == 1
    with pytest.raises(ValueError, match="at least two"):
        vd.rule_reversion({1.0: up}, 1)
