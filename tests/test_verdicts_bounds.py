"""verdicts.rule_threshold_ratio and grid_threshold (appended for chapter 2): every outcome on hand-made
grids."""

import math

import pytest

import verdicts as vd

GRID = [0.5, 1.0, 2.0, 4.0, 8.0]


@pytest.mark.parametrize(
    "holds, expected",
    [
        ([True] * 5, (0.0, 0.5)),  # holds on the whole grid
        ([False, False, True, True, True], (1.0, 2.0)),
        ([False, True, False, True, True], (2.0, 4.0)),  # a dip: the threshold is where it holds for good
        ([False] * 5, (8.0, math.inf)),  # above the grid's top: a lower bound
    ],
)
def test_grid_threshold(holds, expected):
    assert vd.grid_threshold(GRID, holds) == expected


def test_grid_threshold_checks_its_grid():
    with pytest.raises(ValueError, match="increasing"):
        vd.grid_threshold([1.0, 0.5], [True, True])
    with pytest.raises(ValueError, match="increasing"):
        vd.grid_threshold(GRID, [True])


@pytest.mark.parametrize(
    "reference, claimed, verdict, low, high",
    [
        ([True] * 5, [False, False, False, True, True], vd.REPRODUCED, 4.0, math.inf),  # 2 / 0.5 > 2
        ([True] * 5, [False] * 5, vd.REPRODUCED, 16.0, math.inf),  # never: a lower bound
        ([True] * 5, [True] * 5, vd.DIFFERS, 0.0, math.inf),  # claimed wherever ref
        ([False, True, True, True, True], [False, False, True, True, True], vd.INCONCLUSIVE, 1.0, 4.0),
        ([False, True, True, True, True], [False, False, False, True, True], vd.INCONCLUSIVE, 2.0, 8.0),
        ([False] * 5, [True] * 5, vd.INCONCLUSIVE, math.nan, math.nan),  # reference never holds
    ],
)
def test_rule_threshold_ratio_reaches_every_outcome(reference, claimed, verdict, low, high):
    got, reason, got_low, got_high = vd.rule_threshold_ratio(GRID, reference, claimed, 2.0)
    assert got == verdict and reason
    assert (math.isnan(low) and math.isnan(got_low)) or got_low == low
    assert (math.isnan(high) and math.isnan(got_high)) or got_high == high


def test_rule_threshold_ratio_differs_when_a_fine_grid_bounds_the_ratio_below_the_factor():
    fine = [1.0, 1.1, 1.2, 1.3, 1.4]  # alpha-like condition one step after the reference: ratio <= 1.2
    verdict, reason, low, high = vd.rule_threshold_ratio(
        fine, [False, True, True, True, True], [False, False, True, True, True], 2.0
    )
    assert verdict == vd.DIFFERS and low == 1.0 and high == pytest.approx(1.2) and "at most" in reason


def test_rule_threshold_ratio_checks_its_factor():
    with pytest.raises(ValueError, match="factor"):
        vd.rule_threshold_ratio(GRID, [True] * 5, [True] * 5, 0.5)
