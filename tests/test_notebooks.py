"""Notebook hygiene: paired with jupytext, no stored outputs, a typed parameters cell, one repository URL.

The notebooks themselves run under nbmake (pytest --nbmake) at the `smoke` profile.
"""

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for folder in ("notebooks", "book") for p in (ROOT / folder).glob("*.ipynb"))
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def _read(path: Path):
    import nbformat  # imported where used: its import (jsonschema's format checkers) costs seconds

    return nbformat.read(path, as_version=4)


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_paired_script_matches_notebook(path):
    script = path.with_suffix(".py")
    assert script.exists(), f"{path.name} has no paired py:percent script"
    import jupytext  # imported where used: nbformat's import costs every worker's collection seconds

    from_script = jupytext.read(script)
    notebook = jupytext.read(path)

    def cells(nb):
        return [(c.cell_type, c.source, sorted(c.metadata.get("tags", []))) for c in nb.cells]

    assert cells(from_script) == cells(notebook), (
        f"{path.name} and {script.name} differ: run `jupytext --sync {script.relative_to(ROOT)}`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_outputs(path):
    notebook = _read(path)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), (
        f"{path.name} carries outputs; the book executes notebooks itself"
    )


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "notebooks"], ids=lambda p: p.name)
def test_parameters_cell_is_typed_and_has_profile(path):
    """Typed literals, except `profile`, whose default reads $GLAUBER_PROFILE visibly in this cell (make book
    and make test set it); papermill's injected cell still overrides it."""
    notebook = _read(path)
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged `parameters`"
    body = ast.parse(cells[0].source).body
    assert isinstance(body[0], ast.Import) and [a.name for a in body[0].names] == ["os"], "it starts `import os`"
    assignments = body[1:]
    assert all(isinstance(node, ast.AnnAssign) for node in assignments), "parameters are annotated"
    names = {node.target.id: node.value for node in assignments}
    assert ast.unparse(names.pop("profile")) == "os.environ.get('GLAUBER_PROFILE', 'quick')"
    literals = {name: ast.literal_eval(value) for name, value in names.items()}
    assert "model" in literals


def test_chapters_take_model_and_their_temperature():
    """Issue 26: every chapter takes `model`; one that runs at one temperature takes `temperature`, one that
    runs a grid `temperatures` (same names, same meaning in every notebook)."""
    one, grid = {"01_incompatibility", "04_basins"}, {"02_mixing_bounds", "03_phase_diagram", "05_traps"}
    for path in NOTEBOOKS:
        if path.stem not in one | grid:
            continue
        cell = next(c for c in _read(path).cells if "parameters" in c.metadata.get("tags", []))
        names = {node.target.id for node in ast.parse(cell.source).body if isinstance(node, ast.AnnAssign)}
        assert "model" in names and ("temperature" if path.stem in one else "temperatures") in names, path.name


COLAB_CELL = (
    "# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).\n"
    'import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q '
    f'--depth 1 {REPOSITORY} companion && sh companion/tools/colab_setup.sh " + sys.executable, '
    'shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip'
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_set_up_is_the_one_shared_line(path):
    """One Colab mechanism: the book's launch button opens the notebook, and its one hidden set-up line (the
    same everywhere, the repository from _config.yml) clones and installs the companion through
    tools/colab_setup.sh, what `make check-colab` checks; no hand-typed Colab link."""
    notebook = _read(path)
    hidden = [c for c in notebook.cells if c.cell_type == "code" and "google.colab" in c.source]
    assert [c.source for c in hidden] == [COLAB_CELL], f"{path.name}: the Colab cell is the shared line"
    assert "remove-cell" in hidden[0].metadata.get("tags", [])
    assert "colab.research.google.com" not in path.read_text(), f"{path.name}: a hand-typed Colab link"


def test_colab_set_up_line_runs_the_way_colab_does(tmp_path):
    """The Colab path as Colab runs it: a fresh folder, `google.colab` importable, the repository URL of
    _config.yml (served by this checkout through git's insteadOf), the set-up script's pip calls recorded
    instead of run; afterwards the companion's modules resolve to the clone (found, not imported: the pip
    calls are not run, so an import would only test this environment, and cost seconds of torch)."""
    import subprocess
    import sys

    fake = tmp_path / "fake" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake.parent / "__init__.py").write_text("")
    work = tmp_path / "content"
    work.mkdir()
    recorder = tmp_path / "python"
    recorder.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "pip.log"}\n')
    recorder.chmod(0o755)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "{ROOT}"]\n\tinsteadOf = {REPOSITORY}\n[safe]\n\tdirectory = *\n')
    program = (
        f"import sys; sys.path.insert(0, {str(tmp_path / 'fake')!r}); import google.colab\n"
        f"sys.executable = {str(recorder)!r}\n{COLAB_CELL}\n"
        "from importlib.util import find_spec\n"
        "print(find_spec('glauber_core').origin); print(find_spec('book_tools').origin)"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_GLOBAL": str(gitconfig)}
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    core, tools = done.stdout.split()[-2:]
    assert Path(core) == work / "companion" / "glauber_core.py" and Path(tools) == work / "companion" / "book_tools.py"
    calls = (tmp_path / "pip.log").read_text()
    assert f"-m pip install -q -e {work / 'companion'}" in calls and "requirements-nodeps.txt" in calls


# Lines of a visible code cell that only save, glue, label or style (issue 26 counts them; at most 3 a chapter).
PLUMBING = re.compile(
    r"\.to_csv\(|run\.save\(|save_table|\bglue|results_dir|set_book_style|\.set_(x|y)?(label|title)"
    r"|\.set\(|\.legend\(|tight_layout|savefig|model_name\s*=|\bout\s*=|\.style\b"
    r"|\.rename\(columns|write_claims|write_checks|reading_table"
)


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "notebooks"], ids=lambda p: p.name)
def test_visible_cells_are_science(path):
    """At most 3 visible plumbing lines a chapter (saving, glue, labels, styling sit in remove-input cells or
    in the chapter module), and the settings object is never edited after it is built."""
    notebook = _read(path)
    visible = [
        line
        for c in notebook.cells
        if c.cell_type == "code" and not {"remove-cell", "remove-input"} & set(c.metadata.get("tags", []))
        for line in c.source.splitlines()
    ]
    plumbing = [line for line in visible if PLUMBING.search(line)]
    assert len(plumbing) <= 3, f"{path.name}: {len(plumbing)} visible plumbing lines: {plumbing}"
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    assert not re.search(r"^\s*cfg\.\w+\s*=", code, re.M), f"{path.name} edits its settings after building them"


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
        str(ROOT / "notebooks" / "quick_tour.ipynb"),
        str(tmp_path / "out.ipynb"),
        cwd=str(ROOT / "notebooks"),
        parameters={"model": str(tiny_model_dirs["bert"]), "temperatures": [3.0], "steps": 12, "seq_len": 10},
        progress_bar=False,
    )
    distance = pd.read_csv(tmp_path / "quick_tour" / "distance.csv")
    assert set(distance.temperature) == {3.0}
    assert distance.step.max() == 12
