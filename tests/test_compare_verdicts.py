"""tools/compare_verdicts.py: the flips between runs' claims and checks tables (the seed record, issue 41)."""

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import compare_verdicts  # noqa: E402


def write_run(folder: Path, verdicts: dict[str, str], check: str, chapter: str = "05_traps") -> Path:
    chapter = folder / chapter
    chapter.mkdir(parents=True)
    pd.DataFrame(
        {
            "claim": list(verdicts),
            "table": "paper",
            "kind": "general",
            "verdict": list(verdicts.values()),
            "ours_text": [f"{v} text" for v in verdicts.values()],
        }
    ).to_csv(chapter / "claims.csv", index=False)
    pd.DataFrame({"check": ["identity"], "proves": ["x"], "result": [check], "detail": ["NA"]}).to_csv(
        chapter / "checks.csv", index=False
    )
    return folder


def test_flips_absent_rows_and_checks_are_reported(tmp_path, capsys):
    base = write_run(tmp_path / "a", {"trap_split": "inconclusive", "cold_chains_stay": "reproduced"}, "pass")
    write_run(base, {"incompatibility_detected": "reproduced"}, "pass", chapter="01_incompatibility")
    other = write_run(tmp_path / "b", {"trap_split": "differs", "escape_weakest_site": "inconclusive"}, "fail")
    table = compare_verdicts.compare(base, other).set_index(["chapter", "claim"])
    traps = table.loc["05_traps"]
    assert traps.loc["trap_split", ["verdict_seed0", "verdict_seed1", "flipped"]].tolist() == [
        "inconclusive",
        "differs",
        True,
    ]
    assert traps.loc["cold_chains_stay", "verdict_seed1"] == "absent" and traps.loc["cold_chains_stay", "flipped"]
    assert traps.loc["escape_weakest_site", "verdict_seed0"] == "absent"
    assert traps.loc["identity", ["kind", "verdict_seed0", "verdict_seed1", "flipped"]].tolist() == [
        "check",
        "pass",
        "fail",
        True,
    ]
    assert traps.loc["identity", "ours_text_seed0"] == "NA"  # text read as text, not as a missing value
    # a chapter that ran only in the base run: its claims and its checks are absent from the other
    first = table.loc["01_incompatibility"]
    assert set(first.verdict_seed1) == {"absent"} and set(first.index) == {"incompatibility_detected", "identity"}
    assert compare_verdicts.main([str(base), str(other), "--out", str(tmp_path / "comparison.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "comparison.csv")) == 6
    assert "trap_split" in capsys.readouterr().out


def test_a_claim_twice_in_one_run_is_one_error(tmp_path, capsys):
    base = write_run(tmp_path / "a", {"trap_split": "differs"}, "pass")
    claims = base / "05_traps" / "claims.csv"
    pd.concat([pd.read_csv(claims)] * 2).to_csv(claims, index=False)
    with pytest.raises(SystemExit) as exit_:
        compare_verdicts.main([str(base), str(base)])
    assert exit_.value.code == 2 and "appears twice in one run" in capsys.readouterr().err


def test_a_folder_without_claims_is_one_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        compare_verdicts.main([str(tmp_path), str(tmp_path)])
    assert exit_.value.code == 2 and "holds no <chapter>/claims.csv" in capsys.readouterr().err


def test_replace_swaps_only_the_chapters_compared(tmp_path, capsys):
    """One chapter rerun: its rows are replaced in the committed table, every other chapter's stay as they were."""
    base = write_run(tmp_path / "a", {"trap_split": "inconclusive"}, "pass")
    write_run(base, {"incompatibility_detected": "reproduced"}, "pass", chapter="01_incompatibility")
    other = write_run(tmp_path / "b", {"trap_split": "inconclusive"}, "pass")
    write_run(other, {"incompatibility_detected": "reproduced"}, "pass", chapter="01_incompatibility")
    out = tmp_path / "comparison.csv"
    assert compare_verdicts.main([str(base), str(other), "--out", str(out)]) == 0
    before = pd.read_csv(out, dtype=str, keep_default_na=False)
    again_base = write_run(tmp_path / "c", {"trap_split": "inconclusive"}, "pass")
    again_other = write_run(tmp_path / "d", {"trap_split": "differs"}, "pass")
    assert compare_verdicts.main([str(again_base), str(again_other), "--out", str(out), "--replace"]) == 0
    after = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(after.columns) == list(before.columns) and len(after) == len(before)
    traps = after.chapter == "05_traps"
    assert after[traps & (after.claim == "trap_split")].verdict_seed1.tolist() == ["differs"]
    pd.testing.assert_frame_equal(
        after[~traps].reset_index(drop=True), before[before.chapter != "05_traps"].reset_index(drop=True)
    )
    first = tmp_path / "first.csv"
    compare_verdicts.main([str(base), str(other), "--out", str(first)])
    text = first.read_text()
    compare_verdicts.main([str(base), str(other), "--out", str(first), "--replace"])
    assert first.read_text() == text  # the same comparison replaced in place: the file byte for byte
    with pytest.raises(SystemExit) as exit_:
        compare_verdicts.main([str(base), str(other), "--out", str(tmp_path / "none.csv"), "--replace"])
    assert exit_.value.code == 2 and "--replace needs an existing --out table" in capsys.readouterr().err


def test_three_seeds_count_flips_and_opposed_verdicts(tmp_path):
    """Three runs: a row is flipped when its verdicts are not all equal, opposed when one seed reproduces and
    another differs (what a rule built for 5% errors should not show)."""
    runs = [
        write_run(tmp_path / f"seed{k}", {"trap_split": split, "cold_chains_stay": cold}, "pass")
        for k, (split, cold) in enumerate(
            [("reproduced", "inconclusive"), ("reproduced", "reproduced"), ("differs", "reproduced")]
        )
    ]
    table = compare_verdicts.compare(*runs).set_index("claim")
    assert table.loc["trap_split", ["verdict_seed0", "verdict_seed2", "flipped", "opposed"]].tolist() == [
        "reproduced",
        "differs",
        True,
        True,
    ]
    assert table.loc["cold_chains_stay", ["flipped", "opposed"]].tolist() == [True, False]
    assert table.loc["identity", ["flipped", "opposed"]].tolist() == [False, False]
    assert "ours_text_seed2" in table.columns and "code_seed2" in table.columns
    with pytest.raises(ValueError, match="at least two"):
        compare_verdicts.compare(runs[0])


def test_rows_shown_beside_a_judged_row_are_left_out(tmp_path):
    """Chapter 5's rows at the paper's tau, shown beside the claims judged at the matched tau (`judged` False), carry
    no verdict of their own: the comparison keys on the judged row alone, so a claim is not "twice in one run"."""
    runs = []
    for name, shown in (("a", "inconclusive"), ("b", "differs")):
        folder = write_run(tmp_path / name, {"trap_split": "reproduced"}, "pass")
        claims = pd.read_csv(folder / "05_traps" / "claims.csv").assign(judged=True)
        beside = claims.assign(verdict=shown, judged=False)
        pd.concat([claims, beside]).to_csv(folder / "05_traps" / "claims.csv", index=False)
        runs.append(folder)
    table = compare_verdicts.compare(*runs).set_index(["chapter", "claim"])
    row = table.loc[("05_traps", "trap_split")]
    assert row.verdict_seed0 == row.verdict_seed1 == "reproduced" and not row.flipped
