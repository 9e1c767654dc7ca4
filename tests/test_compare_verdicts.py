"""tools/compare_verdicts.py: the flips between two runs' claims and checks tables (issue 23's seed rerun)."""

import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import compare_verdicts  # noqa: E402


def write_run(folder: Path, verdicts: dict[str, str], check: str) -> Path:
    chapter = folder / "05_traps"
    chapter.mkdir(parents=True)
    pd.DataFrame({"claim": list(verdicts), "table": "paper", "kind": "general", "verdict": list(verdicts.values()),
                  "ours_text": [f"{v} text" for v in verdicts.values()]}).to_csv(chapter / "claims.csv", index=False)
    pd.DataFrame({"check": ["identity"], "proves": ["x"], "result": [check], "detail": ["d"]}).to_csv(
        chapter / "checks.csv", index=False)
    return folder


def test_flips_absent_rows_and_checks_are_reported(tmp_path, capsys):
    base = write_run(tmp_path / "a", {"trap_split": "inconclusive", "cold_chains_stay": "reproduced"}, "pass")
    other = write_run(tmp_path / "b", {"trap_split": "differs", "escape_weakest_site": "inconclusive"}, "pass")
    table = compare_verdicts.compare(base, other).set_index("claim")
    assert table.loc["trap_split", ["verdict_base", "verdict_other", "flipped"]].tolist() == [
        "inconclusive", "differs", True]
    assert table.loc["cold_chains_stay", "verdict_other"] == "absent" and table.loc["cold_chains_stay", "flipped"]
    assert table.loc["escape_weakest_site", "verdict_base"] == "absent"
    assert table.loc["identity", "kind"] == "check" and not table.loc["identity", "flipped"]
    assert compare_verdicts.main([str(base), str(other), "--out", str(tmp_path / "flips.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "flips.csv")) == 4
    assert "trap_split" in capsys.readouterr().out


def test_a_folder_without_claims_is_one_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        compare_verdicts.main([str(tmp_path), str(tmp_path)])
    assert exit_.value.code == 2 and "holds no <chapter>/claims.csv" in capsys.readouterr().err
