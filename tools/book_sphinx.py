"""Sphinx extension for the book (loaded through `_config.yml`'s `sphinx.local_extensions`).

1. Offline math: `jupyter-server-mathjax` (a pinned requirement) ships MathJax 2.7's files (one combined
   configuration with TeX input and HTML-CSS output, and the STIX-Web fonts); they are copied into the
   build's `_static/mathjax/` before any page is written, and `_config.yml` points `mathjax_path` there.
   Nothing in `_build/html` loads from another host.
2. Summary pages (the reproduction table, the performance appendix and the across-models page) read CSVs that
   the chapters, the benchmark, `make across-models` and `make antiberty` write (the build's results folder, `results/benchmarks/`,
   `results/across_models/`). Their code never changes when those numbers do, so the execution cache
   would keep stale tables: they are re-read and re-executed on every build, and read after every other page,
   so that they see the CSVs the chapters wrote in this same build. They take seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jupyter_server_mathjax

MATHJAX_SOURCE = Path(jupyter_server_mathjax.__file__).resolve().parent / "static"
MATHJAX_TARGET = Path("_static") / "mathjax"
SUMMARY_DOCS = ("book/reproduction", "book/trust", "book/performance", "book/across_models", "book/antiberty")


def copy_mathjax(app) -> None:
    """Copy MathJax into <outdir>/_static/mathjax/ (skipped when that copy is already complete)."""
    if app.builder.format != "html":
        return
    target = Path(app.outdir) / MATHJAX_TARGET
    stamp = target / ".copied-from"
    if stamp.exists() and stamp.read_text() == str(MATHJAX_SOURCE):
        return
    shutil.copytree(MATHJAX_SOURCE, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    stamp.write_text(str(MATHJAX_SOURCE))


def summaries_always_outdated(app, env, added, changed, removed) -> list[str]:
    return [doc for doc in SUMMARY_DOCS if doc in env.found_docs]


def summaries_read_last(app, env, docnames: list[str]) -> None:
    summaries = [doc for doc in docnames if doc in SUMMARY_DOCS]
    docnames[:] = [doc for doc in docnames if doc not in SUMMARY_DOCS] + summaries


def summaries_always_execute(app, docname: str, source: list[str]) -> None:
    """Bypass the execution cache for the summary notebooks (myst-nb's file-level execution_mode)."""
    if docname not in SUMMARY_DOCS or not source[0].lstrip().startswith("{"):
        return
    notebook = json.loads(source[0])
    notebook.setdefault("metadata", {}).setdefault("mystnb", {})["execution_mode"] = "force"
    source[0] = json.dumps(notebook)


def setup(app):
    if not (MATHJAX_SOURCE / "MathJax.js").exists():
        raise RuntimeError(f"jupyter-server-mathjax has no MathJax.js under {MATHJAX_SOURCE}")
    app.connect("builder-inited", copy_mathjax)
    app.connect("env-get-outdated", summaries_always_outdated)
    app.connect("env-before-read-docs", summaries_read_last)
    app.connect("source-read", summaries_always_execute)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
