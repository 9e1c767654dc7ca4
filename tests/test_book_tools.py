"""The verdict rules of book_tools: each driven to every outcome with constructed inputs."""

import math

import pandas as pd
import pytest

import book_tools as bt

R, D, I, O = bt.REPRODUCED, bt.DIFFERS, bt.INCONCLUSIVE, bt.OTHER_SETUP


@pytest.mark.parametrize("low, high, direction, expected", [
    (0.2, 0.5, "above", R), (-0.5, -0.1, "above", D), (-0.1, 0.3, "above", I), (-0.3, 0.0, "above", D),
    (-0.5, -0.2, "below", R), (0.1, 0.4, "below", D), (-0.1, 0.1, "below", I)])
def test_one_sided_rule_reaches_every_outcome(low, high, direction, expected):
    assert bt.rule_one_sided(low, high, 0.0, direction)[0] == expected


def test_one_sided_rule_zero_events_and_missing_interval_are_inconclusive():
    assert bt.rule_one_sided(0.2, 0.5, 0.0, events=0)[0] == I
    assert bt.rule_one_sided(math.nan, math.nan, 0.0)[0] == I
    with pytest.raises(ValueError, match="direction"):
        bt.rule_one_sided(0, 1, 0, "sideways")


@pytest.mark.parametrize("counts, expected", [
    ((45, 50, 10, 50), R), ((5, 50, 40, 50), D), ((12, 50, 10, 50), I), ((0, 50, 0, 50), I), ((3, 0, 1, 5), None)])
def test_chance_rule_reaches_every_outcome(counts, expected):
    if expected is None:
        with pytest.raises(ValueError):
            bt.rule_against_chance(*counts)
        return
    verdict, reason, (low, high) = bt.rule_against_chance(*counts)
    assert verdict == expected, reason
    if verdict != I or counts[0] + counts[2]:
        assert low <= counts[0] / counts[1] - counts[2] / counts[3] <= high


def test_chance_rule_with_equal_shares_cannot_reproduce():
    # the same share on both sides: the difference interval straddles 0 at any size
    assert bt.rule_against_chance(500, 1000, 500, 1000)[0] == I


@pytest.mark.parametrize("scores, expected", [
    ({"n log n": 10.0, "n": 15.0, "n^2": 30.0}, R), ({"n log n": 20.0, "n": 10.0, "n^2": 30.0}, D),
    ({"n log n": 10.0, "n": 11.0, "n^2": 30.0}, I), ({"n log n": math.nan, "n": 1.0}, I)])
def test_preferred_form_rule_reaches_every_outcome(scores, expected):
    assert bt.rule_preferred_form(scores, "n log n")[0] == expected


def test_control_rule_reaches_every_outcome():
    assert bt.rule_control(1e-12, {"potts": 0.3, "mlm": 0.5}, 1e-9)[0] == R
    assert bt.rule_control(1e-3, {"potts": 0.3}, 1e-9)[0] == D
    assert bt.rule_control(1e-12, {"potts": 1e-13, "mlm": 0.5}, 1e-9)[0] == I
    with pytest.raises(ValueError, match="reference"):
        bt.rule_control(0.0, {}, 1e-9)


def test_model_specific_claim_on_another_model_is_other_setup_with_each_difference_named():
    verdict, reason, setup = bt.judge_on_paper_setup("politics_peak", "minilm-l4-bbc-mlm",
                                                      {"chains": 16, "steps": 10000}, 0.5, 0.9)
    assert verdict == O
    assert "minilm-l4-bbc-mlm" in setup and "chains 16 (paper: 50)" in setup and "steps" not in setup


def test_model_specific_claim_on_the_papers_setup_is_judged():
    setup = bt.paper_protocol("incompatibility_mean_abs_delta")
    model = "BERT"  # named in the paper's model column
    assert bt.judge_on_paper_setup("incompatibility_mean_abs_delta", model, setup, 0.6, 0.7)[0] == R
    assert bt.judge_on_paper_setup("incompatibility_mean_abs_delta", model, setup, 0.3, 0.4)[0] == D
    assert bt.judge_on_paper_setup("incompatibility_mean_abs_delta", model, setup, math.nan, math.nan)[0] == I


def test_claim_rows_take_table_and_kind_from_the_paper_file():
    row = bt.claim_row("nlogn_fit", "q", 1.0, "1.00 [0.5, 1.5]", R, "why")
    assert (row["table"], row["kind"]) == ("paper", "general")
    with pytest.raises(ValueError, match="general claim"):
        bt.claim_row("nlogn_fit", "q", 1.0, "1.0", O, "why")
    with pytest.raises(ValueError, match="not in"):
        bt.claim_row("no_such_claim", "q", 1.0, "1.0", R, "why")
    with pytest.raises(ValueError, match="in words"):
        bt.claim_row("nlogn_fit", "q", math.nan, "nan [nan, nan]", I, "why")


def test_interval_text_says_why_when_there_is_no_estimate():
    assert bt.interval_text(0.5, 0.25, 0.75, missing="x") == "0.50 [0.25, 0.75]"
    assert bt.interval_text(math.nan, math.nan, math.nan, missing="no trap found") == "no trap found"
    assert bt.interval_text(0.5, math.nan, 0.75, missing="one run") == "0.50 (no interval: one run)"


def test_interval_text_signs_keeps_significant_digits_and_one_sided_ends():
    assert bt.interval_text(0.25, -0.5, 1.0, signed=True, missing="x") == "+0.25 [-0.50, +1.00]"
    assert bt.interval_text(1.8e-4, 1.1e-4, 2.7e-4, significant=2, missing="x") == "0.00018 [0.00011, 0.00027]"
    assert bt.interval_text(12.3, 10.0, 15.0, significant=2, missing="x") == "12.30 [10.00, 15.00]"
    assert bt.interval_text(0.0, 0.0, 0.0, significant=2, missing="x") == "0.00 [0.00, 0.00]"
    assert bt.interval_text(1.2, 1.1, math.inf, missing="x") == "1.20 [1.10, inf]"


def test_range_text_and_save_table(tmp_path, monkeypatch):
    assert bt.range_text([math.nan]) == "undefined (no finite value)"
    assert bt.range_text([math.nan], missing="none") == "none"
    assert bt.range_text([2.5, math.nan, 1]) == "1.00 to 2.50"
    assert bt.range_text([1234.0, 1.0], 3, "g") == "1 to 1.23e+03"
    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    bt.save_table(pd.DataFrame({"a": [1]}), "nb", "t", "tiny")
    bt.save_table(pd.DataFrame({"a": [1], "model": ["Ising"]}), "nb", "u", "tiny")
    assert pd.read_csv(tmp_path / "nb" / "t.csv").model.tolist() == ["tiny"]
    assert pd.read_csv(tmp_path / "nb" / "u.csv").model.tolist() == ["Ising"]


def test_every_paper_claim_has_a_kind_and_readable_values():
    paper = bt.read_paper_claims()
    assert set(paper.kind) <= set(bt.KINDS)
    for claim in paper.claim:
        for key in bt.parse_pairs(bt.paper_claim(claim)["values"]):
            assert math.isfinite(bt.paper_number(claim, key))


def test_write_claims_names_model_and_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    rows = [bt.claim_row("nlogn_fit", "q", 1.0, "1.0", I, "why")]
    frame = bt.write_claims(rows, "03_phase_diagram", "tiny", "smoke")
    stored = pd.read_csv(tmp_path / "03_phase_diagram" / "claims.csv")
    assert list(stored.model) == ["tiny"] and list(stored.profile) == ["smoke"] and len(frame) == 1
