"""book_tools: the paper's side, claims rows, model-specific judging through paper_claims.csv, texts and checks.
The rules themselves are tested in tests/test_verdicts.py."""

import math

import pandas as pd
import pytest

import book_tools as bt

R, D, I, O = bt.REPRODUCED, bt.DIFFERS, bt.INCONCLUSIVE, bt.OTHER_SETUP


def test_model_specific_claim_on_another_model_is_other_setup_with_each_difference_named():
    verdict, reason, setup = bt.judge_on_paper_setup(
        "politics_peak", "minilm-l4-bbc-mlm", {"chains": 16, "steps": 10000}, 0.5, 0.9
    )
    assert verdict == O
    assert "minilm-l4-bbc-mlm" in setup and "chains 16 (paper: 50)" in setup and "steps" not in setup


def test_model_specific_claim_on_the_papers_setup_is_judged_against_its_band():
    setup = {"rectangles": 300, "top_k": 50, "passages": "MS MARCO", "temperature": 1}
    for model in ("bert-base-uncased", "roberta-base", "answerdotai/ModernBERT-base"):
        assert bt.judge_on_paper_setup("incompatibility_mean_abs_delta", model, setup, 0.66, 0.75)[0] == R
    assert bt.judge_on_paper_setup("incompatibility_mean_abs_delta", "bert-base-uncased", setup, 0.3, 0.4)[0] == D
    # a wide interval that contains the band is not a reproduction
    assert bt.judge_on_paper_setup("incompatibility_mean_abs_delta", "bert-base-uncased", setup, 0.1, 1.5)[0] == I
    nothing = bt.judge_on_paper_setup("incompatibility_mean_abs_delta", "bert-base-uncased", setup, math.nan, math.nan)
    assert nothing[0] == I
    # "BERT" is the paper's prose, not a model name a run can have
    assert bt.judge_on_paper_setup("incompatibility_mean_abs_delta", "BERT", setup, 0.66, 0.75)[0] == O


def test_unstated_protocol_items_do_not_block_and_are_listed():
    setup = {"tau": 10, "seed_tokens": 14, "contexts": 8, "candidates": 6}
    verdict, _, text = bt.judge_on_paper_setup("alpha_tau10", "bert-base-uncased", setup, 1.0, 1.1)
    assert verdict == R and "not stated by the paper" in text and "contexts 8" in text
    verdict, _, text = bt.judge_on_paper_setup("alpha_tau10", "bert-base-uncased", dict(setup, tau=9), 1.0, 1.1)
    assert verdict == O and "tau 9 (paper: 10)" in text


def test_a_number_given_per_model_is_judged_against_that_models_band():
    setup = bt.paper_protocol("endpoint_topics_crossing")
    assert bt.judge_on_paper_setup("endpoint_topics_crossing", "roberta-base", setup, 2, 2)[0] == R
    assert bt.judge_on_paper_setup("endpoint_topics_crossing", "answerdotai/ModernBERT-base", setup, 2, 2)[0] == D


def test_every_model_specific_claim_has_a_band_and_paper_models():
    paper = bt.read_paper_claims()
    for row in paper[paper.kind == "model-specific"].itertuples():
        assert row.paper_models and row.band_why, row.claim
        for model in row.paper_models.split(";"):
            assert bt.paper_band(row.claim, model.strip()) is not None, row.claim


def test_every_general_claim_names_its_calibration():
    paper = bt.read_paper_claims()
    missing = paper.claim[(paper.kind == "general") & (paper.calibration.str.len() == 0)].tolist()
    assert not missing, f"general claims without a calibration line: {missing}"


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
    assert bt.interval_text(0.0, 0.0, 0.0, significant=2, missing="x") == "0.00"
    assert bt.interval_text(420, 420, 420, digits=0, missing="x") == "420"
    assert bt.interval_text(1.2, 1.1, math.inf, missing="x") == "1.20 [1.10, inf]"


def test_range_text():
    assert bt.range_text([math.nan]) == "undefined (no finite value)"
    assert bt.range_text([math.nan], missing="none") == "none"
    assert bt.range_text([2.5, math.nan, 1]) == "1.00 to 2.50"
    assert bt.range_text([1234.0, 1.0], 3, "g") == "1 to 1.23e+03"


def test_chapter_run_saves_stamps_and_glues_with_one_prefix(tmp_path, monkeypatch):
    glued = {}
    monkeypatch.setattr(bt, "glue", lambda name, value: glued.__setitem__(name, value))
    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    run = bt.ChapterRun("05_traps", "smoke", "")
    assert (run.model, run.profile, run.prefix) == (bt.model_label(), "smoke", "ch5")
    assert run.model == bt.DEFAULT_MODEL_DIR.name and bt.model_label("bert-base-uncased") == "bert-base-uncased"
    assert "paper_trap_count" in glued  # the paper's side of the chapter's claims
    run.save(pd.DataFrame({"a": [1]}), "t")
    run.save(pd.DataFrame({"a": [1], "model": ["Ising"]}), "u")
    assert pd.read_csv(tmp_path / "05_traps" / "t.csv").to_dict("records") == [
        {"a": 1, "model": run.model, "profile": "smoke"}
    ]
    assert pd.read_csv(tmp_path / "05_traps" / "u.csv").model.tolist() == ["Ising"]
    run.glue({"steps": "12"})
    row = bt.claim_row("trap_split", "q", 0.5, "0.50", bt.INCONCLUSIVE, "too few")
    view = run.claims([row])
    assert glued["ch5_steps"] == "12" and glued["ch5_trap_split_verdict"] == bt.INCONCLUSIVE
    written = pd.read_csv(tmp_path / "05_traps" / "claims.csv")
    assert written.model.tolist() == [run.model] and written.profile.tolist() == ["smoke"]
    assert 'class="claims-table"' in view.data and "Traps split into perfect and approximate" in view.data
    assert "too few" in view.data and bt.verdict_label(bt.INCONCLUSIVE) in view.data
    with pytest.raises(ValueError, match="profile must be one of smoke, quick, paper"):
        bt.ChapterRun("05_traps", "huge")


def test_glue_writes_what_myst_nb_glue_writes(monkeypatch):
    """bt.glue displays the same raw bundle and metadata as myst_nb.glue(..., display=False), without importing
    myst-nb in the kernel; the book's prose reads it back by name."""
    import IPython.display
    from myst_nb.ext import glue as myst

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *args, **kwargs: shown.append((args, kwargs)))
    monkeypatch.setattr(myst, "ipy_display", lambda *args, **kwargs: shown.append((args, kwargs)))
    for value in ("1.23 [0.9, 1.5]", 0.25, pd.DataFrame({"a": [1]})):
        bt.glue("ch9_x", value)
        myst.glue("ch9_x", value, display=False)
        ours, theirs = shown[-2:]
        assert ours == theirs and all(k.startswith(bt.GLUE_PREFIX) for k in ours[0][0])
    assert bt.GLUE_PREFIX == myst.GLUE_PREFIX


def test_glue_prefix_and_reading_table():
    assert [bt.glue_prefix(n) for n in ("01_incompatibility", "05_traps", "quick_tour")] == ["ch1", "ch5", "quick_tour"]
    html = bt.reading_table(pd.DataFrame({"x": [1.23456, math.nan], "n": [3, 4]}), {"x": "{:.1f}"}).to_html()
    assert ">1.2<" in html and ">—<" in html and "nan" not in html.lower() and "row_heading" not in html


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


def test_share_text_prints_counts_not_degenerate_intervals():
    assert bt.share_text(0, 1) == "0 of 1"
    assert bt.share_text(3, 4) == "3 of 4"
    assert bt.share_text(30, 30) == "30 of 30"
    assert bt.share_text(12, 30) == "0.40 [0.25, 0.58] (12 of 30)"


def test_checks_are_written_and_read_outside_the_claims(tmp_path, monkeypatch):
    import verdicts as vd

    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    rows = [vd.check_row("joint delta is 0", "the rectangle path telescopes for a joint", True, "max 1e-15")]
    bt.write_checks(rows, "01_incompatibility", "tiny", "smoke")
    checks = bt.read_checks(tmp_path)
    assert checks.result.tolist() == ["pass"] and checks.source.tolist() == ["01_incompatibility"]
    assert "pass" in bt.checks_html(checks) and bt.read_claims(tmp_path).empty


def test_claim_rows_carry_the_interval_and_null_for_the_forest_plot(tmp_path, monkeypatch):
    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    rows = [
        bt.claim_row("nlogn_fit", "q", 1.0, "1.0 [0.5, 1.5]", R, "why", low=0.5, high=1.5, null=0.0),
        bt.claim_row("distance_saturates", "q", math.nan, "no estimate", I, "why"),
    ]
    bt.write_claims(rows, "03_phase_diagram", "tiny", "smoke")
    ours = bt.read_claims(tmp_path)
    assert ours.low.tolist()[0] == 0.5 and math.isnan(ours.low.tolist()[1])
    tables = {name: bt.reproduction_table(bt.read_paper_claims(), ours, name) for name in bt.TABLES}
    forest = bt.forest_rows(tables)
    assert forest.claim.tolist() == ["nlogn_fit", "distance_saturates"]  # every general claim that ran
    assert math.isnan(forest.z[1])  # no interval: drawn in the figure's strip
    bt.forest_figure(forest)
    summary = bt.run_summary_text(dict(model="tiny", profile="smoke", commit="abc", dates="today"), tables)
    assert "general claims: 1 reproduced, 1 inconclusive" in summary and "model `tiny`" in summary


def test_a_run_that_finds_what_the_paper_found_reproduces_on_the_papers_setup():
    """Each band admits the paper's own result with its own sampling error: a run on the paper's setup that
    finds the paper's counts is reproduced, one that finds far less differs."""
    from scipy.stats import chi2

    import verdicts as vd

    def judged(claim, low, high):
        model = bt.paper_claim(claim)["paper_models"].split(";")[0].strip()
        return bt.judge_on_paper_setup(claim, model, bt.paper_protocol(claim), low, high)[0]

    poisson = chi2.ppf(0.025, 34) / 2, chi2.ppf(0.975, 36) / 2  # 17 traps
    assert judged("trap_count", *poisson) == R
    assert judged("trap_count", 0.0, 3.7) == D  # 1 trap
    for claim, (k, m) in {
        "perfect_trap_share": (4, 17),
        "delta_star_below_lnv": (17, 17),
        "politics_recurrence_count": (46, 50),
        "basin_drift_positive": (200, 200),
    }.items():
        low, high = (float(v[0]) for v in vd.share_intervals([k], [m]))
        assert judged(claim, low, high) == R, claim
        low, high = (float(v[0]) for v in vd.share_intervals([0], [100]))
        assert judged(claim, low, high) == D, claim


def test_code_version_follows_what_the_numbers_depend_on(tmp_path, monkeypatch):
    """The core, verdicts, the paper's side, the profiles' settings reader, the imported chapter package's science
    and judging modules and the notebook's code cells move the version; another chapter, the presentation module, book_tools, the prose
    and a module's docstrings, comments and layout do not."""
    import json

    for name in ("glauber_core.py", "book_tools.py", "verdicts.py", "profiles.py", "book/paper_claims.csv"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x")
    for name in ("phase", "traps"):
        (tmp_path / "chapters" / name).mkdir(parents=True)
        for module in ("__init__", "science", "judging", "presentation"):
            (tmp_path / "chapters" / name / f"{module}.py").write_text(module)
    (tmp_path / "notebooks").mkdir()
    notebook = tmp_path / "notebooks" / "03_x.ipynb"

    def write(code: str, prose: str) -> None:
        cells = [{"cell_type": "markdown", "source": [prose]}, {"cell_type": "code", "source": [code]}]
        notebook.write_text(json.dumps({"cells": cells}))

    write("from chapters import phase as ch\nx = 1", "A claim.")
    monkeypatch.setattr(bt, "REPO_ROOT", tmp_path)
    before = bt.code_version("03_x")
    for unchanged in ("chapters/traps/science.py", "chapters/phase/presentation.py", "book_tools.py"):
        (tmp_path / unchanged).write_text("changed")
        assert bt.code_version("03_x") == before, unchanged
    write("from chapters import phase as ch\nx = 1", "The claim, reworded.")
    assert bt.code_version("03_x") == before
    science = tmp_path / "chapters" / "phase" / "science.py"
    science.write_text("def f(x):\n    return x + 1\n")
    before = bt.code_version("03_x")
    science.write_text('"""Section 5."""\n\n\ndef f(x):  # the shift\n    """One more."""\n    return (x + 1)\n')
    assert bt.code_version("03_x") == before, "a docstring, a comment or layout moved the version"
    science.write_text("def f(x):\n    return x + 2\n")
    assert bt.code_version("03_x") != before, "a change to the code left the version"
    before = bt.code_version("03_x")
    numbers = ("glauber_core.py", "verdicts.py", "profiles.py", "book/paper_claims.csv")
    for changed in (*numbers, "chapters/phase/science.py", "chapters/phase/judging.py"):
        (tmp_path / changed).write_text("changed")
        assert bt.code_version("03_x") != before, changed
        before = bt.code_version("03_x")
    write("from chapters import phase as ch\nx = 2", "The claim, reworded.")
    assert bt.code_version("03_x") != before


def characteristics():
    """make calibrate's summary for three claims: one rule that errs in 2 of 50 seeds and decides 90% of true
    cases, one that never errs and decides 10% of them, and one that decides 50% where its claim holds and never
    where it fails."""
    rows = [
        ("nlogn_fit", "holds case", "holds", 50, 45, 2, 3, 2, 0.90),
        ("nlogn_fit", "fails case", "fails", 50, 0, 48, 2, 0, 0.96),
        ("trap_split", "holds case", "holds", 50, 5, 0, 45, 0, 0.10),
        ("distance_saturates", "holds case", "holds", 50, 25, 0, 25, 0, 0.50),
        ("distance_saturates", "fails case", "fails", 50, 0, 0, 50, 0, 0.0),
    ]
    frame = pd.DataFrame(
        rows, columns=["claim", "case", "truth", "seeds", "reproduced", "differs", "inconclusive", "wrong", "power"]
    )
    low, high = bt.share_intervals(frame.wrong, frame.seeds)
    return frame.assign(wrong_share=frame.wrong / frame.seeds, wrong_low=low, wrong_high=high, code="x")


def test_rule_rates_name_the_worst_case_and_label_each_rule_from_its_powers(tmp_path, monkeypatch):
    rates = bt.rule_rates(characteristics()).set_index("claim")
    text = rates.loc["nlogn_fit", "rates"]
    assert "wrong in 2 of 50 seeds" in text and "decides 90%" in text and "decides 96%" in text
    assert rates.labels.to_dict() == {
        "nlogn_fit": "",
        "trap_split": bt.CANNOT_DECIDE,
        "distance_saturates": f"{bt.LOW_POWER}; {bt.CANNOT_FAIL}",
    }
    assert math.isnan(rates.loc["trap_split", "power_fails"]) and rates.loc["distance_saturates", "power_holds"] == 0.5
    note = bt.power_labels_text(rates.reset_index())
    assert all(label in note for label in bt.POWER_LABELS) and "`distance_saturates`" in note
    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    bt.write_claims([bt.claim_row("trap_split", "q", 0.5, "0.5", R, "why")], "05_traps", "tiny", "smoke")
    table = bt.reproduction_table(
        bt.read_paper_claims(), bt.read_claims(tmp_path), "paper", bt.rule_rates(characteristics())
    )
    row = table.set_index("claim").loc["trap_split"]
    assert row.labels == bt.CANNOT_DECIDE and "decides 10%" in row.rates
    page = bt.claims_html(table)
    assert page.count(bt.CANNOT_DECIDE) == 1 and "wrong in 2 of 50 seeds" in page
    assert "<td>trap_split</td>" in bt.operating_characteristics_html(characteristics())
    bt.operating_characteristics_figure(characteristics())


def test_seed_record_text_counts_flips_and_opposed_verdicts():
    seeds = pd.DataFrame(
        {
            "chapter": ["05_traps"] * 3,
            "claim": ["a", "b", "c"],
            "kind": ["general"] * 3,
            "verdict_seed0": [R, R, O],
            "verdict_seed1": [R, I, O],
            "verdict_seed2": [D, R, O],
            "flipped": ["True", "True", "False"],
            "opposed": ["True", "False", "False"],
            "code_seed0": [bt.code_version("05_traps")] * 3,
            "code_seed1": [bt.code_version("05_traps")] * 3,
            "code_seed2": ["other"] * 3,
        }
    )
    text = bt.seed_record_text(seeds)
    assert "Across 3 seeds" in text and "2 of 2 general rows changed, 1 of them between reproduced and differs" in text
    assert "the 1 rows that are *other setup*" in text and "did not run the same code" in text


def test_a_text_run_stamps_nothing(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    run = bt.ChapterRun("01_incompatibility", "smoke")
    run._cond = tiny_bert
    run.state(20, 0)
    assert list(run.save(pd.DataFrame({"x": [1]}), "plain").columns) == ["x", "model", "profile"]


def test_power_at_scales_reads_the_lowest_true_power_the_worst_wrong_share_and_where_80_percent_is_reached():
    """Two scales of the characteristics above (x1 as they are, x4 with every power raised): nlogn_fit reaches 80%
    at x1, distance_saturates only at x4, trap_split (10% at x1, 70% at x4) at neither."""
    quick = characteristics().assign(scale=1, sizes="chains")
    larger = quick.assign(scale=4, power=[0.95, 1.0, 0.70, 0.85, 0.2], wrong_share=[0.0, 0.02, 0.0, 0.0, 0.12])
    table = bt.power_at_scales(pd.concat([quick, larger])).set_index("claim")
    assert table.loc["nlogn_fit", "80% at"] == "x1" and table.loc["distance_saturates", "80% at"] == "x4"
    assert isinstance(table.loc["trap_split", "80% at"], float) and math.isnan(table.loc["trap_split", "80% at"])
    assert table.loc["trap_split", "holds x4"] == 0.70 and table.loc["nlogn_fit", "wrong x1"] == 0.04
    assert table.loc["distance_saturates", "wrong x4"] == 0.12 and table.loc["nlogn_fit", "sizes"] == "chains"
    assert bt.power_curves_figure(pd.concat([quick, larger])) is not None


def test_power_reach_text_counts_rules_at_each_scale_and_names_the_ones_that_never_reach_or_err():
    quick = characteristics().assign(scale=1, sizes="chains")
    larger = quick.assign(scale=4, power=[0.95, 1.0, 0.70, 0.85, 0.2], wrong_share=[0.0, 0.02, 0.0, 0.0, 0.12])
    text = bt.power_reach_text(bt.power_at_scales(pd.concat([quick, larger])))
    assert "Of 3 rules" in text and "1 at x1, 2 at x4" in text
    assert "Not by x4: `trap_split`." in text and "`distance_saturates` (x4: 12%)" in text
    assert "run `make power-curves`" in bt.power_reach_text(bt.power_at_scales(quick.iloc[:0]))
    falling = larger.assign(power=[0.5, 1.0, 0.05, 0.85, 0.2])  # nlogn_fit's true case: 90% at x1, 50% at x4
    table = bt.power_at_scales(pd.concat([quick, falling])).set_index("claim")
    assert math.isnan(table.loc["nlogn_fit", "80% at"])  # reached at x1, not kept at x4
    assert "`nlogn_fit` (90% at x1, 50% at x4)" in bt.power_reach_text(table.reset_index())


def test_decide_at_reads_the_binding_part_of_a_claim_of_several_parts():
    """Two parts' clauses: the larger run binds; parts pointing to different verdicts name none."""
    a = "about 2x this run's size would decide it with 80% power if the estimate holds, and would find it reproduced"
    b = "about 9.5x this run's size would decide it with 80% power if the estimate holds, and would find it reproduced"
    c = "about 3x this run's size would decide it with 80% power if the estimate holds, and would find it differs"
    assert bt.decide_at(bt.INCONCLUSIVE, f"x: {a}; y: {b}", 0.1, -0.1, 0.3, 0.0) == b
    mixed = bt.decide_at(bt.INCONCLUSIVE, f"x: {b}; y: {c}", 0.1, -0.1, 0.3, 0.0)
    assert mixed.startswith("about 9.5x") and "find it" not in mixed and "different verdicts" in mixed


def test_decide_at_states_the_run_that_clears_the_null_only_for_an_inconclusive_interval_around_it():
    """ours 0.2 in [-0.3, 0.7] against 0: half-width 0.5 over the effect 0.2, squared, times (2.80 / 1.96)^2 for 80%
    power, 12.8 times this run, which finds the paper's side ("above") reproduced and the other side differs; nothing
    for a decided row, an interval that excludes the null or a missing bound; a reason's own clause where it has one."""
    text = bt.decide_at(bt.INCONCLUSIVE, "", 0.2, -0.3, 0.7, 0.0, side="above")
    assert "about 12.8x this run's size" in text and "find it reproduced" in text
    assert "find it differs" in bt.decide_at(bt.INCONCLUSIVE, "", 0.2, -0.3, 0.7, 0.0, side="below")
    assert "no run size decides it" in bt.decide_at(bt.INCONCLUSIVE, "", 0.0, -1.0, 1.0, 0.0)
    assert bt.decide_at(bt.REPRODUCED, "", 0.2, -0.3, 0.7, 0.0) == ""
    assert bt.decide_at(bt.INCONCLUSIVE, "", 0.2, 0.1, 0.7, 0.0) == ""
    assert bt.decide_at(bt.INCONCLUSIVE, "", 0.2, math.nan, 0.7, 0.0) == ""
    said = "null: 0; interval [-0.3, 0.7] contains it; about 2x this run's size would decide it"
    assert bt.decide_at(bt.INCONCLUSIVE, said, 0.2, -0.3, 0.7, 0.0) == "about 2x this run's size would decide it"
