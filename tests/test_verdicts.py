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
    # half-width 0.2, distance 0.1 from the null: a run (0.2 / 0.1)^2 = 4 times larger
    verdict, reason = vd.rule_one_sided(-0.1, 0.3, 0.0, estimate=0.1)
    assert verdict == I and "about 4x" in reason
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


def test_every_case_above_rule_reaches_every_outcome():
    assert vd.rule_every_case_above([0.1, 0.02], 1e-9)[0] == R
    assert vd.rule_every_case_above([1e-12, 0.0], 1e-9)[0] == D
    assert vd.rule_every_case_above([1e-12, 0.3], 1e-9)[0] == I
    assert vd.rule_every_case_above([], 1e-9)[0] == I


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
    assert vd.rule_every_part([R, R], ["n=8", "n=16"])[0] == R
    assert vd.rule_every_part([R, D])[0] == D
    assert vd.rule_every_part([R, I])[0] == I
    assert vd.rule_every_part([])[0] == I
    with pytest.raises(ValueError):
        vd.rule_every_part([R], ["a", "b"])


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
