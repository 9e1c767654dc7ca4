"""tools/calibrate.py's mechanics on cases whose verdicts are fixed: resume, version, summary and its interval."""

import sys
from pathlib import Path

import pytest

import verdicts as vd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
calibrate = pytest.importorskip("calibrate")

CALLS = []


def fixed(verdicts):
    """A case function that returns verdicts[seed] and records each call."""

    def run(seed):
        CALLS.append(seed)
        return verdicts[seed]

    return run


def cases(version="v1"):
    holds = calibrate.Case("c", "holds case", "holds", "x", fixed([vd.REPRODUCED] * 8 + [vd.DIFFERS, vd.INCONCLUSIVE]))
    fails = calibrate.Case("c", "fails case", "fails", "x", fixed([vd.DIFFERS] * 9 + [vd.REPRODUCED]))
    return [holds, fails], (lambda case: version)


def test_counts_wrong_share_wilson_interval_and_power(tmp_path):
    CALLS.clear()
    chosen, version = cases()
    runs = calibrate.run_cases(chosen, 10, tmp_path, version=version, progress=False)
    summary = calibrate.summarise(runs).set_index("case")
    held, failed = summary.loc["holds case"], summary.loc["fails case"]
    assert (held.seeds, held.reproduced, held.differs, held.inconclusive, held.wrong) == (10, 8, 1, 1, 1)
    assert held.wrong_share == 0.1 and held.power == 0.8
    assert (failed.wrong, failed.power) == (1, 0.9)  # reproduced where the claim fails is the wrong decision
    low, high = (float(v[0]) for v in vd.share_intervals([1], [10]))
    assert (held.wrong_low, held.wrong_high) == (low, high) and low < 0.1 < high


def test_a_rerun_resumes_and_a_new_version_remakes(tmp_path):
    CALLS.clear()
    chosen, version = cases()
    calibrate.run_cases(chosen, 4, tmp_path, version=version, progress=False)
    assert len(CALLS) == 8
    runs = calibrate.run_cases(chosen, 6, tmp_path, version=version, progress=False)  # two more seeds per case
    assert len(CALLS) == 12 and len(runs) == 12 and sorted(set(runs.seed)) == list(range(6))
    chosen, version = cases("v2")  # the chapter's code changed: every row is made again
    runs = calibrate.run_cases(chosen, 6, tmp_path, version=version, progress=False)
    assert len(CALLS) == 24 and set(runs.code) == {"v2"} and len(runs) == 12


def test_a_run_of_some_claims_keeps_the_others_in_the_table(tmp_path, monkeypatch):
    chosen, version = cases()
    other = calibrate.Case("d", "other case", "holds", "x", fixed([vd.REPRODUCED] * 10))
    monkeypatch.setattr(calibrate, "CASES", (*chosen, other))
    monkeypatch.setattr(calibrate, "case_version", version)
    assert calibrate.main(["--seeds", "3", "--out", str(tmp_path)]) == 0
    assert calibrate.main(["--seeds", "5", "--claims", "d", "--out", str(tmp_path)]) == 0
    table = calibrate.pd.read_csv(tmp_path / "operating_characteristics.csv").set_index("case")
    assert table.seeds.to_dict() == {"holds case": 3, "fails case": 3, "other case": 5}


def test_stale_cases_name_a_case_made_at_another_version_and_one_that_no_longer_exists(tmp_path, monkeypatch):
    chosen, version = cases()
    monkeypatch.setattr(calibrate, "case_version", version)
    summary = calibrate.summarise(calibrate.run_cases(chosen, 2, tmp_path, version=version, progress=False))
    assert calibrate.stale_cases(summary, chosen) == []
    monkeypatch.setattr(calibrate, "case_version", lambda case: "v2" if case.name == "fails case" else "v1")
    assert calibrate.stale_cases(summary, chosen) == ["c: fails case"]
    assert calibrate.stale_cases(summary, chosen[:1]) == ["c: fails case (no such case)"]
    assert calibrate.stale_cases(summary.iloc[:0], chosen[:1]) == ["c: holds case"]


def test_an_empty_run_summarises_to_an_empty_table():
    """Every row stale (the code changed during the run): an empty summary with its columns, no KeyError."""
    assert list(calibrate.summarise(calibrate.pd.DataFrame()).columns) == list(calibrate.SUMMARY_COLUMNS)


def test_two_processes_make_the_rows_one_makes(tmp_path):
    chosen, version = cases()
    one = calibrate.run_cases(chosen, 10, tmp_path / "one", version=version, progress=False)
    two = calibrate.run_cases(chosen, 10, tmp_path / "two", version=version, progress=False, jobs=2)
    key = ["claim", "case", "seed"]
    calibrate.pd.testing.assert_frame_equal(
        one.sort_values(key).reset_index(drop=True), two.sort_values(key).reset_index(drop=True)
    )


def scaled_case(claim="s", name="scaled case"):
    """A case whose verdict says which scale ran it: reproduced at scale 4 and above, inconclusive below."""

    def run(seed, scale=1):
        CALLS.append((seed, scale))
        return vd.REPRODUCED if scale >= 4 else vd.INCONCLUSIVE

    return calibrate.Case(claim, name, "holds", "x", run, sizes=("pairs", "chains"))


def test_a_scaled_run_goes_to_its_own_folder_and_the_power_curves_gather_every_scale(tmp_path, monkeypatch):
    """Power 0 at the quick size, 1 at x4: each scale's rows in its folder, one power-curve row per (case, scale)."""
    CALLS.clear()
    case = scaled_case()
    monkeypatch.setattr(calibrate, "CASES", (case,))
    monkeypatch.setattr(calibrate, "case_version", lambda c: "v1")
    assert calibrate.main(["--seeds", "3", "--out", str(tmp_path)]) == 0
    assert calibrate.main(["--seeds", "2", "--scale", "4", "--out", str(tmp_path)]) == 0
    assert sorted(CALLS) == [(0, 1), (0, 4), (1, 1), (1, 4), (2, 1)]
    assert (tmp_path / "power" / "x4" / "runs.csv").exists()
    curves = calibrate.pd.read_csv(tmp_path / "power_curves.csv").set_index("scale")
    assert curves.power.to_dict() == {1: 0.0, 4: 1.0} and curves.seeds.to_dict() == {1: 3, 4: 2}
    assert set(curves.sizes) == {"pairs and chains"}


def test_scale_must_be_positive(tmp_path):
    with pytest.raises(SystemExit):
        calibrate.main(["--scale", "0", "--out", str(tmp_path)])


def test_quick_sizes_multiply_only_the_named_settings():
    """quick_sizes on chapter 3: pairs x 4 (the grid's derived lengths as before), every other setting unchanged."""
    from calibration import quick_sizes
    from chapters import phase as ch3

    base, scaled = ch3.settings("quick"), quick_sizes(ch3, ("pairs",), 4)
    assert scaled.pairs == 4 * base.pairs and quick_sizes(ch3, ("pairs",), 1) == base
    assert {k: v for k, v in vars(scaled).items() if k != "pairs"} == {
        k: v for k, v in vars(base).items() if k != "pairs"
    }


def test_every_claim_scales_settings_its_chapter_has():
    """Each calibration module's SIZES names, for exactly the claims of its cases, settings of its chapter's quick
    profile row (a typo, or a derived setting that an override cannot move, would show only at a scaled run)."""
    import importlib

    from calibration import MODULES

    for name in MODULES:
        module = importlib.import_module(f"calibration.{name}")
        chapter = importlib.import_module(f"chapters.{name}")  # each module is named after its chapter's package
        assert set(module.SIZES) == {case.claim for case in module.CASES}, name
        # a profile's own settings, not the derived ones (an override of a derived one would be overwritten)
        settings = {**chapter.SETTINGS["quick"], **getattr(chapter, "PROTEIN_SETTINGS", {}).get("quick", {})}
        assert all(size in settings for sizes in module.SIZES.values() for size in sizes), name
