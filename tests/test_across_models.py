"""The across-models page: the family table, the sweep collection, the verdict grid and the depth rule, each on a
constructed case with a known answer; then the committed results it reads and the README's family table."""

import json
import math
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

import book_tools as bt
import glauber_core as glauber

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import across_models  # noqa: E402

# ---------------------------------------------------------------------------------------------------------
# depth_trend: every outcome
# ---------------------------------------------------------------------------------------------------------


def test_depth_trend_reaches_every_outcome():
    assert bt.depth_trend([(1.0, 0.9, 1.1), (2.0, 1.8, 2.2), (3.0, 2.9, 3.1)]) == "rises"
    assert bt.depth_trend([(3.0, 2.9, 3.1), (2.0, 1.8, 2.2), (1.0, 0.9, 1.1)]) == "falls"
    # monotone, but the ends' intervals overlap
    assert bt.depth_trend([(1.0, 0.5, 1.5), (1.1, 0.6, 1.6), (1.2, 0.7, 1.7)]) == "does not change clearly"
    # the ends are apart, but the middle model breaks the order
    assert bt.depth_trend([(1.0, 0.9, 1.1), (5.0, 4.9, 5.1), (3.0, 2.9, 3.1)]) == "does not change clearly"
    assert bt.depth_trend([(1.0, math.nan, math.nan), (3.0, 2.9, 3.1)]) == "does not change clearly"
    assert bt.depth_trend([(1.0, 0.9, 1.1)]) == "does not change clearly"


# ---------------------------------------------------------------------------------------------------------
# verdict_grid
# ---------------------------------------------------------------------------------------------------------


def _claims(rows):
    return pd.DataFrame(rows, columns=["claim", "kind", "model", "verdict"])


def test_verdict_grid_keeps_general_claims_in_the_papers_order_and_marks_missing_runs():
    claims = _claims(
        [
            ("seed_topic_loss", "general", "b", bt.DIFFERS),
            ("incompatibility_detected", "general", "a", bt.REPRODUCED),
            ("incompatibility_detected", "general", "b", bt.INCONCLUSIVE),
            ("politics_peak", "model-specific", "a", bt.OTHER_SETUP),
        ]
    )
    grid = bt.verdict_grid(claims, ["a", "b", "c"], chapters=["01_incompatibility", "04_basins"])
    paper = bt.read_paper_claims()
    general = paper[(paper.kind == "general") & paper.chapter.isin(["01_incompatibility", "04_basins"])]
    assert grid.index.tolist() == general.claim.tolist()  # every general claim of the chapters, in order
    assert grid.loc["influence_amplifies_delta"].tolist() == [bt.NOT_RUN] * 3
    assert grid.columns.tolist() == ["a", "b", "c"]
    assert grid.loc["incompatibility_detected"].tolist() == [bt.REPRODUCED, bt.INCONCLUSIVE, bt.NOT_RUN]
    assert grid.loc["seed_topic_loss"].tolist() == [bt.NOT_RUN, bt.DIFFERS, bt.NOT_RUN]


# ---------------------------------------------------------------------------------------------------------
# family_table
# ---------------------------------------------------------------------------------------------------------


def _model_folder(root, name, layers, size):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
    (folder / "model.safetensors").write_bytes(b"\0" * size)


def test_family_table_joins_each_model_with_its_metrics_baseline_and_log(tmp_path):
    models, metrics = tmp_path / "models", tmp_path / "metrics"
    metrics.mkdir()
    _model_folder(models, glauber.DEFAULT_MODEL_DIR.name, 4, 3_000_000)
    _model_folder(models, "other-l2", 2, 1_000_000)
    rows = [
        (glauber.DEFAULT_MODEL_DIR.name, "heldout_masked_top1", 0.4),
        ("baseline-frozen-l4", "heldout_masked_top1", 0.2),
        (glauber.DEFAULT_MODEL_DIR.name, "heldout_pseudo_perplexity", 40.0),
        ("baseline-frozen-l4", "heldout_pseudo_perplexity", 700.0),
    ]
    pd.DataFrame(rows, columns=["model", "metric", "value"]).assign(n_tokens=100).to_csv(
        metrics / "metrics.csv", index=False
    )
    pd.DataFrame(
        [("other-l2", "heldout_masked_top1", 0.3, 50)], columns=["model", "metric", "value", "n_tokens"]
    ).to_csv(metrics / "metrics_l2.csv", index=False)
    pd.DataFrame({"step": [50, 3600, 3600], "split": ["train", "train", "heldout"]}).to_csv(
        metrics / "train_log.csv", index=False
    )
    pd.DataFrame({"step": [50, 1500]}).to_csv(metrics / "train_log_l2.csv", index=False)
    table = bt.family_table(models, metrics).set_index("model")
    assert table.index.tolist() == ["other-l2", glauber.DEFAULT_MODEL_DIR.name]  # shallowest first
    default = table.loc[glauber.DEFAULT_MODEL_DIR.name]
    assert (default.layers, default.size_mb, default.steps) == (4, 3.0, 3600)
    assert (default.top1, default.baseline_top1, default.pppl, default.baseline_pppl) == (0.4, 0.2, 40.0, 700.0)
    other = table.loc["other-l2"]
    assert (other.layers, other.size_mb, other.steps, other.top1, other.tokens) == (2, 1.0, 1500, 0.3, 50)
    assert pd.isna(other.baseline_top1) and pd.isna(other.pppl)


# ---------------------------------------------------------------------------------------------------------
# tools/across_models.py: collecting a sweep, and across_run reading it back
# ---------------------------------------------------------------------------------------------------------


def _fake_sweeps(root, models, status="done"):
    for chapter, tables in across_models.KEPT.items():
        folder = across_models.sweep_folder(root, chapter)
        (folder / "merged").mkdir(parents=True)
        pd.DataFrame(
            {"cell": [f"model={m}" for m in models], "model": models, "status": status, "seconds": 60.0, "error": ""}
        ).to_csv(folder / "index.csv", index=False)
        for table in tables:
            frame = pd.DataFrame(
                {
                    "cell": [f"model={m}" for m in models],
                    "model_param": models,
                    "model": models,
                    "value": range(len(models)),
                }
            )
            if table == "claims":
                frame = frame.assign(
                    code=bt.code_version(chapter),
                    commit="abc1234",
                    run_date=[f"2026-11-30 1{i}:00 UTC" for i in range(len(models))],
                )
            frame.to_csv(folder / "merged" / f"{table}.csv", index=False)
        (folder / "merged" / "unused.csv").write_text("a\n1\n")


def test_collect_copies_the_kept_tables_of_the_models_asked_and_across_run_reads_them_back(tmp_path):
    sweeps, results = tmp_path / "sweeps", tmp_path / "results"
    _fake_sweeps(sweeps, ["m2", "m4", "old"])
    run = across_models.collect(sweeps, results, ["m2", "m4"], "smoke", "python tools/across_models.py -x")
    assert len(run) == 2 * len(across_models.KEPT) and set(run.status) == {"done"}
    for chapter, tables in across_models.KEPT.items():
        assert sorted(p.stem for p in (results / chapter).glob("*.csv")) == sorted(tables)
        assert bt.read_across(chapter, "claims", results).model.tolist() == ["m2", "m4"]
    stamp = bt.across_run(results)
    assert stamp["models"] == ["m2", "m4"] and stamp["profile"] == "smoke" and stamp["stale"] == []
    assert stamp["minutes"] == pytest.approx(2 * len(across_models.KEPT))
    assert stamp["command"] == "python tools/across_models.py -x"
    assert stamp["commit"] == "abc1234" and stamp["finished"] == "2026-11-30 11:00 UTC"
    claims = results / "04_basins" / "claims.csv"
    pd.read_csv(claims).assign(code="000000000000").to_csv(claims, index=False)
    assert bt.across_run(results)["stale"] == ["04_basins"]


def test_collect_replaces_nothing_when_a_table_is_missing(tmp_path):
    sweeps, results = tmp_path / "sweeps", tmp_path / "results"
    _fake_sweeps(sweeps, ["m2"])
    across_models.collect(sweeps, results, ["m2"], "smoke", "cmd")
    (across_models.sweep_folder(sweeps, "04_basins") / "merged" / "table3.csv").unlink()
    with pytest.raises(FileNotFoundError, match="table3.csv"):
        across_models.collect(sweeps, results, ["m2"], "smoke", "cmd")
    assert (results / "04_basins" / "table3.csv").exists()


def test_collect_of_some_chapters_keeps_the_other_chapters_rows_and_tables(tmp_path):
    """`--chapters`: only the chapters run are collected; run.csv keeps the others' rows, in chapter order."""
    sweeps, results = tmp_path / "sweeps", tmp_path / "results"
    _fake_sweeps(sweeps, ["m2"])
    across_models.collect(sweeps, results, ["m2"], "smoke", "the whole set")
    before = pd.read_csv(results / "run.csv", dtype=str)
    kept_table = (results / "01_incompatibility" / "table1.csv").read_text()
    index = across_models.sweep_folder(sweeps, "02_mixing_bounds") / "index.csv"
    pd.read_csv(index).assign(seconds=90.0).to_csv(index, index=False)
    (across_models.sweep_folder(sweeps, "01_incompatibility") / "merged" / "table1.csv").unlink()
    some = {"02_mixing_bounds": across_models.KEPT["02_mixing_bounds"]}
    across_models.collect(sweeps, results, ["m2"], "smoke", "one chapter", some, others_stay=True)
    after = pd.read_csv(results / "run.csv", dtype=str)
    assert after.chapter.tolist() == before.chapter.tolist() == sorted(across_models.KEPT)
    changed = after.chapter == "02_mixing_bounds"
    assert after[changed].seconds.astype(float).tolist() == [90.0] and set(after[changed].command) == {"one chapter"}
    pd.testing.assert_frame_equal(after[~changed], before[~changed])
    assert (results / "01_incompatibility" / "table1.csv").read_text() == kept_table
    assert bt.across_run(results)["command"] == "the whole set"


def test_the_command_line_rejects_a_chapter_outside_the_set(capsys):
    with pytest.raises(SystemExit) as exit_:
        across_models.main(["--chapters", "03_phase_diagram"])
    assert exit_.value.code == 2 and "03_phase_diagram not in the family set" in capsys.readouterr().err


def test_across_run_names_a_cell_that_did_not_finish_and_a_missing_run(tmp_path):
    sweeps, results = tmp_path / "sweeps", tmp_path / "results"
    _fake_sweeps(sweeps, ["m2"], status="failed")
    across_models.collect(sweeps, results, ["m2"], "smoke", "cmd")
    with pytest.raises(ValueError, match="01_incompatibility on m2 is 'failed'"):
        bt.across_run(results)
    with pytest.raises(FileNotFoundError, match="make across-models"):
        bt.across_run(tmp_path / "nothing")


def test_the_sweep_command_runs_every_model_at_the_profile():
    command = across_models.sweep_command("04_basins", ["a", "b"], "quick", Path("/tmp/x"))
    assert command[1].endswith("sweep.py") and command[2].endswith("notebooks/04_basins.ipynb")
    assert command[3:] == ["-p", "model", "a", "b", "--profile", "quick", "--out", "/tmp/x"]


# ---------------------------------------------------------------------------------------------------------
# What is committed: every bundled model in every chapter, and the README's family table
# ---------------------------------------------------------------------------------------------------------


def test_committed_results_cover_every_bundled_model_in_every_chapter():
    run = pd.read_csv(bt.ACROSS_MODELS / "run.csv", dtype=str)
    assert set(run.status) == {"done"} and set(run.profile) == {"quick"}
    for chapter in bt.ACROSS_CHAPTERS:
        assert sorted(run[run.chapter == chapter].model) == glauber.bundled_models(), chapter
        claims = bt.read_across(chapter, "claims")
        assert sorted(set(claims.model)) == glauber.bundled_models() and set(claims.profile) == {"quick"}


def test_readme_family_table_states_each_models_evaluation():
    readme = (ROOT / "README.md").read_text()
    for row in bt.family_table().itertuples(index=False):
        line = next((line for line in readme.splitlines() if line.startswith(f"| `{row.model}` |")), None)
        assert line, f"README: no family-table row for {row.model}"
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[1] == str(row.layers) and cells[2] == f"{row.size_mb:.1f} MB", line
        assert cells[3] == f"{row.steps:,}", line
        assert cells[4] == f"{row.top1:.3f} ({row.baseline_top1:.3f})", line
        assert cells[5] == f"{row.pppl:.1f} ({row.baseline_pppl:.0f})", line
    assert re.search(r"`make across-models`", readme)


def test_the_page_is_in_the_book_and_always_reexecuted():
    sys.path.insert(0, str(ROOT / "tools"))
    import book_sphinx

    assert "book/across_models" in (ROOT / "_toc.yml").read_text()
    assert "book/across_models" in book_sphinx.SUMMARY_DOCS


def test_table_builders_on_constructed_sweep_tables():
    table1 = pd.DataFrame(
        {
            "role": ["masked LM under test", "compatible (control)", "masked LM under test", "compatible (control)"],
            "rectangles": 300,
            "mean_abs_delta": [0.5, 0.0, 0.25, 0.0],
            "ci_low": [0.4, 0.0, 0.2, 0.0],
            "ci_high": [0.6, 0.0, 0.3, 0.0],
            "share_above": [1.0, 0.0, 0.9, 0.0],
            "max_abs_delta": [4.0, 0.0, 2.0, 0.0],
            "model": ["b", "causal", "a", "causal"],
            "model_param": ["b", "b", "a", "a"],
        }
    )
    claims = _claims([("incompatibility_detected", "general", "a", bt.REPRODUCED)])
    shaped = bt.table1_across(table1, claims, ["a", "b"])
    assert shaped.index.tolist() == ["a", "b", "causal"]
    assert shaped.loc["a", "mean |δ| [95% CI]"] == "0.25 [0.20, 0.30]" and shaped.loc["a", "verdict"] == bt.REPRODUCED
    assert shaped.loc["b", "verdict"] == bt.NOT_RUN and shaped.loc["causal", "role"] == "compatible (control)"

    table3 = pd.DataFrame(
        {
            "seed topic": ["politics", "tech", "politics", "tech"],
            "politics at end": [0.5, 0.1, 0.4, 0.2],
            "model": ["a", "a", "b", "b"],
        }
    )
    claims = _claims(
        [
            ("endpoint_topics_crossing", "model-specific", "b", bt.OTHER_SETUP),
            ("politics_recurrence", "general", "b", bt.INCONCLUSIVE),
        ]
    ).assign(ours=[1.0, 0.5])
    five = bt.table5_across(table3, claims, ["b", "a"], baseline=1 / 9)
    assert five.columns.tolist() == ["b", "a"]
    assert five.index.tolist() == ["politics (seed)", "tech", "topics crossing", "recurrence verdict (chapter 4)"]
    assert five.loc["tech"].tolist() == ["0.200 ✓", "0.100"]
    assert five.loc["topics crossing"].tolist() == ["1 of 1", "—"]
    assert five.loc["recurrence verdict (chapter 4)"].tolist() == [bt.INCONCLUSIVE, bt.NOT_RUN]

    alpha = pd.DataFrame(
        {"temperature": [0.5, 0.989, 2.0, 0.5, 1.2], "alpha_mean": [4, 3, 1, 5, 2], "model": list("aaabb")}
    )
    near = bt.alpha_near(alpha)
    assert near.loc["a", "temperature"] == 0.989 and near.loc["b", "alpha_mean"] == 2


def test_depth_words_apply_the_trend_rule_to_each_quantity_and_name_changing_verdicts():
    family = pd.DataFrame({"layers": [2, 4], "top1": [0.3, 0.4], "tokens": [10_000, 10_000]}, index=["a", "b"])
    table1 = pd.DataFrame(
        {
            "role": "masked LM under test",
            "model": ["a", "b"],
            "mean_abs_delta": [0.5, 0.45],
            "ci_low": [0.4, 0.35],
            "ci_high": [0.6, 0.55],
        }
    )
    alpha = pd.DataFrame(
        {"temperature": [0.989, 0.989], "alpha_mean": [4.0, 2.0], "low": [3.8, 1.9], "high": [4.2, 2.1]},
        index=["a", "b"],
    )
    grid = pd.DataFrame(
        {"a": [bt.REPRODUCED, bt.REPRODUCED], "b": [bt.REPRODUCED, bt.DIFFERS]},
        index=["incompatibility_detected", "seed_topic_loss"],
    )
    words = bt.depth_text(family, table1, alpha, grid)
    assert words.startswith("From 2 to 4 layers: held-out top-1 **rises** (0.3, 0.4)")
    assert "mean |δ| **does not change clearly** (0.5, 0.45)" in words
    assert "α(τ ≈ 0.989) **falls** (4, 2)" in words
    assert words.endswith(
        "1 of 2 general claims get the same verdict at every depth; seed_topic_loss change(s) with the model."
    )
    same = bt.depth_text(family, table1, alpha, grid.assign(b=bt.REPRODUCED))
    assert same.endswith("every general claim gets the same verdict at every depth (2 claims).")
