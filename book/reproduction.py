# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Reproduction at a glance
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (paper, all sections): every measured claim of the paper, with our number beside it and a verdict.
# - **Look at**: the two tables below; each row links to the chapter that measures it.
# - **Rerun**: [open this notebook in Colab](https://colab.research.google.com/github/glauber-mlm/glauber-mlm-companion/blob/main/book/reproduction.ipynb), or `papermill book/reproduction.ipynb out.ipynb` after running the chapters
# ```
#
# Each chapter of this book re-runs one section of {cite}`sana2026mixing` and ends by writing its
# verdicts to `results/<chapter>/claims.csv`: our number, a short text with its uncertainty, the
# model and profile it came from, and a verdict (*reproduced*, *differs* or *not run here*) decided
# in code by a rule that the chapter states. This page only collects those files, in the build that
# produced them: it types no number of its own. The paper's values come from one file,
# `book/paper_claims.csv`, each with the section it is quoted from.
#
# Read the verdicts with the model in mind. The book is built offline with a small masked LM
# trained for this purpose (see the appendix on the bundled model), not with the BERT, RoBERTa and
# ModernBERT models of the paper, and at the `quick` profile, which is smaller than the paper's runs.
# A *differs* is therefore a statement about this model at these sizes; rerunning a chapter with
# `-p model bert-base-uncased -p profile paper` (on a GPU) tests the paper's own setting.

# %% tags=["remove-cell"]
# Colab only: fetch the companion (core, book tools, results) and install it.
import sys

if "google.colab" in sys.modules:
    import subprocess

    REPOSITORY = "https://github.com/glauber-mlm/glauber-mlm-companion"
    subprocess.run(["git", "clone", "-q", "--depth", "1", REPOSITORY,
                    "companion"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e",
                    "companion"], check=True)
    sys.path.insert(0, "companion")

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import HTML

import book_tools as bt

paper = bt.read_paper_claims(bt.REPO_ROOT / "book" / "paper_claims.csv")
ours = bt.read_claims(bt.results_root())
tables = {name: bt.reproduction_table(paper, ours, name)
          for name in bt.TABLES}
for unknown in bt.unknown_claims(paper, ours):
    print(f"results/ has a claim that paper_claims.csv lacks: {unknown}")
counts = {name: bt.verdict_counts(table) for name, table in tables.items()}
pd.DataFrame(counts).T.rename_axis("table")

# %% [markdown]
# ## The paper's claims
#
# One row per claim of the paper's tables and figures, in the order of the paper.

# %% tags=["hide-input"]
HTML(bt.claims_html(tables["paper"]))

# %% [markdown]
# ## Beyond the paper
#
# What the book adds: checks the paper could not make on BERT (exact mixing times and exact
# stationary laws on chains small enough to enumerate) and the two questions its section 7 leaves
# open (how sharp the transition is, and how large the influence is on the states the chains
# actually visit).

# %% tags=["hide-input"]
HTML(bt.claims_html(tables["beyond"]))
