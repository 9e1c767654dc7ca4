"""Notebook hygiene: paired with jupytext, no stored outputs, a typed parameters cell, one repository URL.

The notebooks themselves run under nbmake (pytest --nbmake) at the `smoke` profile.
"""

import ast
import re
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for folder in ("notebooks", "book") for p in (ROOT / folder).glob("*.ipynb"))
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_paired_script_matches_notebook(path):
    script = path.with_suffix(".py")
    assert script.exists(), f"{path.name} has no paired py:percent script"
    from_script = jupytext.read(script)
    notebook = jupytext.read(path)
    def cells(nb):
        return [(c.cell_type, c.source, sorted(c.metadata.get("tags", []))) for c in nb.cells]

    assert cells(from_script) == cells(notebook), (
        f"{path.name} and {script.name} differ: run `jupytext --sync {script.relative_to(ROOT)}`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), (
        f"{path.name} carries outputs; the book executes notebooks itself")


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "notebooks"], ids=lambda p: p.name)
def test_parameters_cell_is_typed_and_has_profile(path):
    notebook = nbformat.read(path, as_version=4)
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged `parameters`"
    assignments = [node for node in ast.parse(cells[0].source).body]
    assert all(isinstance(node, ast.AnnAssign) for node in assignments), "parameters are annotated literals"
    names = {node.target.id: ast.literal_eval(node.value) for node in assignments}
    assert names.get("profile") == "quick"
    assert "model" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_cell_uses_the_configured_repository(path):
    urls = set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", path.read_text()))
    assert urls <= {REPOSITORY}, f"{path.name} names {urls - {REPOSITORY}}, _config.yml says {REPOSITORY}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_cell_installs_through_the_one_set_up_script(path):
    """The Colab path installs what `make check-colab` checks: tools/colab_setup.sh (the companion and the
    no-deps causal-LM weights), never a pip line of its own."""
    notebook = nbformat.read(path, as_version=4)
    hidden = [c.source for c in notebook.cells if c.cell_type == "code" and "google.colab" in c.source]
    assert len(hidden) == 1, f"{path.name}: one Colab set-up cell"
    assert "tools/colab_setup.sh" in hidden[0] and "pip" not in hidden[0], hidden[0]


def test_every_notebook_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    for path in NOTEBOOKS:
        assert f"{path.parent.name}/{path.stem}" in toc, f"{path.name} is missing from _toc.yml"


@pytest.mark.notebook
def test_papermill_parameters_reach_the_run(tiny_model_dirs, tmp_path, monkeypatch):
    """A sweep is one papermill call: injected parameters override the profile's values."""
    import pandas as pd
    import papermill

    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    monkeypatch.setenv("GLAUBER_PROFILE", "smoke")
    papermill.execute_notebook(
        str(ROOT / "notebooks" / "quick_tour.ipynb"), str(tmp_path / "out.ipynb"), cwd=str(ROOT / "notebooks"),
        parameters={"model": str(tiny_model_dirs["bert"]), "temperatures": [3.0], "steps": 12, "seq_len": 10},
        progress_bar=False)
    distance = pd.read_csv(tmp_path / "quick_tour" / "distance.csv")
    assert set(distance.temperature) == {3.0}
    assert distance.step.max() == 12
