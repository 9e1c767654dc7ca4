"""sweep.py: the grid, cell ids, the index, merged tables, bad input, and real sweeps on a 2-worker Dask
LocalCluster at the smoke profile, run through the command line as a user would: the sweep's own mechanics (index,
merged tables, a failed cell, a rerun) on a probe notebook without torch, so that each cell costs seconds, and
chapter 1 itself swept over temperature."""

import ast
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import sweep

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "quick_tour.ipynb"
TINY = ["-p", "seq_len", "8", "--profile", "smoke", "--workers", "2"]

# A notebook with the chapters' conventions and none of their cost: a tagged parameters cell (profile from
# GLAUBER_PROFILE, seed, steps, seq_len), the chapters' error for a bad `steps`, and two tables written where
# bt.results_dir puts them ($GLAUBER_RESULTS/<notebook>/). `chains` follows the profile as a chapter's would.
PROBE_CELLS = [
    (
        "parameters",
        "import os\n"
        'profile: str = os.environ.get("GLAUBER_PROFILE", "quick")\n'
        "seed: int = 0\nsteps: int = 40\nseq_len: int = 20",
    ),
    (
        "",
        "import csv, random\n"
        "from pathlib import Path\n"
        "if not isinstance(steps, int) or steps < 0:\n"
        '    raise ValueError(f"steps must be an integer >= 0, got {steps}")\n'
        'chains = {"smoke": 2, "quick": 4, "paper": 8}[profile]\n'
        'out = Path(os.environ.get("GLAUBER_RESULTS", "results")) / "sweep_probe"\n'
        "out.mkdir(parents=True, exist_ok=True)\n"
        "rng = random.Random(seed)\n"
        'with (out / "distance.csv").open("w", newline="") as file:\n'
        "    writer = csv.writer(file)\n"
        '    writer.writerow(["chain", "step", "distance"])\n'
        "    for chain in range(chains):\n"
        "        for step in range(steps + 1):\n"
        "            writer.writerow([chain, step, round(rng.random() * step / seq_len, 6)])\n"
        '(out / "ising_check.csv").write_text("tau,tv\\n1.0,0.01\\n")\n'
        'names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")\n'
        '(out / "threads.csv").write_text(",".join(names) + "\\n" + ",".join(os.environ.get(k, "") for k in names))',
    ),
]


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    """The probe notebook (PROBE_CELLS), written as nbformat 4 JSON: papermill reads its parameters cell."""
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"cell-{k}",
            "outputs": [],
            "source": source,
            "metadata": {"tags": [tag]} if tag else {},
        }
        for k, (tag, source) in enumerate(PROBE_CELLS)
    ]
    notebook = {
        "cells": cells,
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    }
    path = tmp_path_factory.mktemp("probe") / "sweep_probe.ipynb"
    path.write_text(json.dumps(notebook))
    return path


def start_sweep(*args: str, notebook: Path, threads: str = "1") -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": threads, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "sweep.py"), str(notebook), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate(timeout=900)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def read_index(folder: Path) -> dict[str, dict[str, str]]:
    with (folder / "index.csv").open(newline="") as file:
        return {row["cell"]: row for row in csv.DictReader(file)}


# ---------------------------------------------------------------- pieces (no cluster)


def test_values_are_parsed_as_papermills_command_line_reads_them():
    """papermill_value against papermill's own command line (`papermill -p NAME VALUE`), its execution stubbed."""
    from unittest import mock

    from click.testing import CliRunner
    from papermill.cli import papermill

    values = ["4", "-5", "0.5", "1e3", "True", "False", "None", "bert", "", "[1, 2]", "1_000", "nan"]
    arguments = ["in.ipynb", "out.ipynb"] + [a for i, v in enumerate(values) for a in ("-p", f"p{i}", v)]
    with mock.patch("papermill.cli.execute_notebook") as execute:
        assert CliRunner().invoke(papermill, arguments).exit_code == 0
    parameters = execute.call_args.kwargs["parameters"]
    read = [sweep.papermill_value(v) for v in values]
    assert [repr(p) for p in read] == [repr(parameters[f"p{i}"]) for i in range(len(values))]
    assert read[:9] == [4, -5, 0.5, 1000.0, True, False, None, "bert", ""]


def test_grid_is_the_product_of_the_value_lists():
    cells = sweep.grid({"seed": ["0", "1", "2"], "model": ["a", "b"]})
    assert len(cells) == 6
    assert {(c["seed"], c["model"]) for c in cells} == {(s, m) for s in "012" for m in "ab"}


def test_cell_ids_are_readable_deterministic_and_distinct():
    assert sweep.cell_id({"steps": "4", "seq_len": "8"}) == "seq_len=8__steps=4"
    assert sweep.cell_id({"seq_len": "8", "steps": "4"}) == "seq_len=8__steps=4"  # order of -p does not matter
    assert sweep.cell_id({"model": ""}) == "model="
    # int 1 and float 1.0 are different papermill values, hence different cells
    assert sweep.cell_id({"t": "1"}) != sweep.cell_id({"t": "1.0"})
    # unsafe characters are replaced, and a hash keeps values that clean up alike apart
    ids = {sweep.cell_id({"model": m}) for m in ["a/b", "a b", "a-b", "a:b"]}
    assert len(ids) == 4 and all(set(i) <= set("abcdefghijklmnopqrstuvwxyz0123456789=-~") for i in ids)
    assert sweep.cell_id({"model": "a/b"}).startswith("model=a-b~")
    assert len(sweep.cell_id({"model": "x" * 500})) <= 120


def test_index_round_trip(tmp_path):
    rows = {
        "a=1": {"cell": "a=1", "a": "1", "status": "done", "seconds": "2.5", "error": ""},
        "a=2": {"cell": "a=2", "a": "2", "status": "failed", "seconds": "1.0", "error": 'ValueError: bad, "x"'},
        "a=3": None,
    }  # not finished: no row
    sweep.write_index(tmp_path / "index.csv", ["a"], rows)
    names, back = sweep.read_index(tmp_path / "index.csv")
    assert names == ["a"] and back == {k: v for k, v in rows.items() if v}
    (tmp_path / "other.csv").write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match="not a sweep index"):
        sweep.read_index(tmp_path / "other.csv")


def test_merged_tables_carry_cell_and_parameters_and_skip_failed_cells(tmp_path):
    for cell, values in {"seed=0": [1.0, 2.0], "seed=1": [3.0], "seed=2": [9.0]}.items():
        folder = tmp_path / cell / "nb"
        folder.mkdir(parents=True)
        pd.DataFrame({"x": values, "seed": 7}).to_csv(folder / "table.csv", index=False)
        (tmp_path / cell / "extra.csv").write_text("y\n5\n")
    rows = {
        f"seed={s}": {"cell": f"seed={s}", "seed": str(s), "status": status, "seconds": "1", "error": ""}
        for s, status in enumerate(["done", "done", "failed"])
    }
    paths = sweep.merge_tables(tmp_path, "nb", ["seed"], rows)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in paths) == ["merged/extra.csv", "merged/table.csv"]
    table = pd.read_csv(tmp_path / "merged" / "table.csv")
    # the table's own `seed` column stays; the parameter of the same name becomes seed_param
    assert list(table.columns) == ["cell", "seed_param", "x", "seed"]
    assert table.values.tolist() == [["seed=0", 0, 1.0, 7], ["seed=0", 0, 2.0, 7], ["seed=1", 1, 3.0, 7]]
    assert pd.read_csv(tmp_path / "merged" / "extra.csv").values.tolist() == [["seed=0", 0, 5], ["seed=1", 1, 5]]


def test_merged_tables_keep_each_field_as_written(tmp_path):
    # a commit of digits around one "e" (30e5489) read as a number became inf in merged claims
    folder = tmp_path / "seed=0"
    folder.mkdir()
    (folder / "claims.csv").write_text("commit,ours,note\n30e5489,0.10,\n1e3,2,NaN\n")
    rows = {"seed=0": {"cell": "seed=0", "seed": "0", "status": "done", "seconds": "1", "error": ""}}
    sweep.merge_tables(tmp_path, "nb", ["seed"], rows)
    text = (tmp_path / "merged" / "claims.csv").read_text().splitlines()
    assert text == ["cell,seed,commit,ours,note", "seed=0,0,30e5489,0.10,", "seed=0,0,1e3,2,NaN"]


@pytest.mark.parametrize(
    "args, problem",
    [
        (["missing.ipynb", "-p", "steps", "4"], "no such notebook"),
        ([str(NOTEBOOK), "-p", "steps"], "-p steps has no values"),
        ([str(NOTEBOOK), "-p", "steps", "4", "--profile", "huge"], "--profile must be one of"),
        ([str(NOTEBOOK), "-p", "stepz", "4"], "no parameter 'stepz'"),
        ([str(NOTEBOOK), "-p", "stepz", "4", "-p", "steps"], "-p steps has no values"),  # the syntax is checked first
        ([str(NOTEBOOK), "-p", "steps", "4", "-p", "steps", "5"], "given twice"),
        ([str(NOTEBOOK), "-p", "profile", "paper"], "--profile"),
        ([str(NOTEBOOK), "-p", "steps", "4", "--workers", "0"], "--workers must be at least 1"),
        ([str(NOTEBOOK)], "at least one -p"),
    ],
)
def test_bad_command_line_is_one_error_line_and_exit_2(args, problem, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        sweep.main([*args, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sweep.py: error: ") and problem in err
    assert not (tmp_path / "out").exists()


def test_a_dask_worker_importing_sweep_imports_only_the_standard_library():
    """Each Dask worker imports sweep.py for run_cell: its top-level imports must be light (torch, pandas and
    papermill are imported inside the functions that need them)."""
    tree = ast.parse((ROOT / "sweep.py").read_text())
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert top and top <= set(sys.stdlib_module_names) | {"__future__"}, top - set(sys.stdlib_module_names)


def test_the_profile_names_are_defined_once():
    import book_tools
    import profiles

    assert sweep.profile_names() == profiles.PROFILES == book_tools.PROFILES == ("smoke", "quick", "paper")


def test_bad_command_line_from_the_shell_exits_2_before_importing_torch_or_papermill():
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(ROOT / "sweep.py"),
            str(NOTEBOOK),
            "-p",
            "steps",
            "--profile",
            "smoke",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and [line for line in lines if not line.startswith("import time:")] == [
        "sweep.py: error: -p steps has no values (give -p NAME VALUE [VALUE ...])"
    ]
    modules = {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}
    assert "argparse" in modules and not modules & {"torch", "papermill", "book_tools"}, sorted(modules)


# ---------------------------------------------------------------- real sweeps (2-worker LocalCluster, smoke)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory, probe):
    """Both real sweeps of the probe, started together (they overlap their start-up): a 2-cell grid (seed 0, 1)
    that completes, and a 2-cell grid whose first cell has a bad parameter (steps = -5)."""
    good, bad = tmp_path_factory.mktemp("good"), tmp_path_factory.mktemp("bad")
    started = {
        good: start_sweep(
            "-p", "seed", "0", "1", "-p", "steps", "4", *TINY, "--out", str(good), notebook=probe, threads="3"
        ),
        bad: start_sweep("-p", "steps", "-5", "4", *TINY, "--out", str(bad), notebook=probe),
    }
    yield started
    for process in started.values():
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.fixture(scope="module")
def finished(sweeps):
    out, process = list(sweeps.items())[0]
    return out, finish(process)


@pytest.fixture(scope="module")
def failing(sweeps):
    out, process = list(sweeps.items())[1]
    return out, finish(process)


@pytest.mark.notebook
def test_two_cell_grid_completes_and_is_indexed(finished):
    out, done = finished
    assert done.returncode == 0, done.stdout + done.stderr
    index = read_index(out)
    assert list(index) == ["seed=0__seq_len=8__steps=4", "seed=1__seq_len=8__steps=4"]
    for cell, row in index.items():
        assert (row["seed"], row["steps"], row["seq_len"]) == (cell[5], "4", "8")
        assert row["status"] == "done" and row["error"] == "" and float(row["seconds"]) > 0
        assert (out / cell / "sweep_probe.ipynb").is_file()
        distance = pd.read_csv(out / cell / "sweep_probe" / "distance.csv")
        assert distance.step.max() == 4 and distance.chain.nunique() == 2  # steps=4, the smoke profile's 2 chains
        # the caller's OMP_NUM_THREADS reaches every BLAS of the kernel (a Dask worker sets MKL's and OpenBLAS's to 1)
        threads = pd.read_csv(out / cell / "sweep_probe" / "threads.csv", dtype=str).iloc[0].tolist()
        assert threads == ["3", "3", "3"], threads
    assert "2 done" in done.stdout and "0 failed" in done.stdout


@pytest.mark.notebook
def test_merged_csv_carries_the_parameter_columns(finished):
    out, _ = finished
    merged = pd.read_csv(out / "merged" / "distance.csv")
    assert list(merged.columns[:4]) == ["cell", "seed", "steps", "seq_len"]
    for seed in (0, 1):
        cell = f"seed={seed}__seq_len=8__steps=4"
        own = pd.read_csv(out / cell / "sweep_probe" / "distance.csv")
        part = merged[merged.seed == seed]
        assert (part.cell == cell).all() and (part.steps == 4).all() and (part.seq_len == 8).all()
        pd.testing.assert_frame_equal(part[own.columns].reset_index(drop=True), own)
    assert (out / "merged" / "ising_check.csv").is_file()


@pytest.mark.notebook
def test_rerun_skips_cells_already_done(finished, probe):
    out, _ = finished
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/sweep_probe.ipynb")}
    index = (out / "index.csv").read_text()
    again = finish(start_sweep("-p", "seed", "0", "1", "-p", "steps", "4", *TINY, "--out", str(out), notebook=probe))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 done (2 skipped" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/sweep_probe.ipynb")} == before and len(before) == 2
    assert (out / "index.csv").read_text() == index


@pytest.mark.notebook
def test_failed_cell_is_recorded_and_the_other_still_runs(failing):
    tmp_path, done = failing
    assert done.returncode == 1
    index = read_index(tmp_path)
    bad, good = index["seq_len=8__steps=-5"], index["seq_len=8__steps=4"]
    assert bad["status"] == "failed" and bad["error"] == "ValueError: steps must be an integer >= 0, got -5"
    assert good["status"] == "done" and good["error"] == ""
    assert "failed seq_len=8__steps=-5: ValueError" in done.stdout
    merged = pd.read_csv(tmp_path / "merged" / "distance.csv")
    assert set(merged.cell) == {"seq_len=8__steps=4"} and set(merged.steps) == {4}


@pytest.mark.notebook
def test_chapter_one_swept_over_temperature_gives_one_table_with_a_row_per_temperature(
    tmp_path, tiny_model_dirs, tiny_gpt2_dir
):
    """Issue 26: `sweep.py notebooks/01_incompatibility.ipynb -p temperature 0.5 1 2` merges chapter 1's
    Table 1 into one table, each (role, temperature) once, the run's own temperature column equal to the
    cell's (two temperatures, one cell per worker; tiny random models and a few rectangles)."""
    done = finish(
        start_sweep(
            "-p",
            "temperature",
            "0.5",
            "2",
            "-p",
            "model",
            str(tiny_model_dirs["bert"]),
            "-p",
            "causal_model",
            str(tiny_gpt2_dir),
            "-p",
            "rectangles",
            "4",
            "-p",
            "control_rectangles",
            "2",
            "--profile",
            "smoke",
            "--workers",
            "2",
            "--out",
            str(tmp_path),
            notebook=ROOT / "notebooks" / "01_incompatibility.ipynb",
        )
    )
    assert done.returncode == 0, done.stdout + done.stderr
    table = pd.read_csv(tmp_path / "merged" / "table1.csv")
    assert sorted(table.temperature.unique()) == [0.5, 2.0]
    assert (table.temperature == table.temperature_param).all()
    assert not table.duplicated(["role", "temperature"]).any()
    assert table.groupby("temperature").role.nunique().nunique() == 1  # the same roles at every temperature
