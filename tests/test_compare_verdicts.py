"""tools/compare_verdicts.py: the flips between two runs' claims and checks tables (issue 23's seed rerun)."""

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
    pd.DataFrame({"claim": list(verdicts), "table": "paper", "kind": "general", "verdict": list(verdicts.values()),
                  "ours_text": [f"{v} text" for v in verdicts.values()]}).to_csv(chapter / "claims.csv", index=False)
    pd.DataFrame({"check": ["identity"], "proves": ["x"], "result": [check], "detail": ["NA"]}).to_csv(
        chapter / "checks.csv", index=False)
    return folder


def test_flips_absent_rows_and_checks_are_reported(tmp_path, capsys):
    base = write_run(tmp_path / "a", {"trap_split": "inconclusive", "cold_chains_stay": "reproduced"}, "pass")
    write_run(base, {"incompatibility_detected": "reproduced"}, "pass", chapter="01_incompatibility")
    other = write_run(tmp_path / "b", {"trap_split": "differs", "escape_weakest_site": "inconclusive"}, "fail")
    table = compare_verdicts.compare(base, other).set_index(["chapter", "claim"])
    traps = table.loc["05_traps"]
    assert traps.loc["trap_split", ["verdict_base", "verdict_other", "flipped"]].tolist() == [
        "inconclusive", "differs", True]
    assert traps.loc["cold_chains_stay", "verdict_other"] == "absent" and traps.loc["cold_chains_stay", "flipped"]
    assert traps.loc["escape_weakest_site", "verdict_base"] == "absent"
    assert traps.loc["identity", ["kind", "verdict_base", "verdict_other", "flipped"]].tolist() == [
        "check", "pass", "fail", True]
    assert traps.loc["identity", "ours_text_base"] == "NA"  # text read as text, not as a missing value
    # a chapter that ran only in the base run: its claims and its checks are absent from the other
    first = table.loc["01_incompatibility"]
    assert set(first.verdict_other) == {"absent"} and set(first.index) == {"incompatibility_detected", "identity"}
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
