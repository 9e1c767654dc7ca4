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
# - **Look at**: the figure (every general claim on one scale), then the tables, one row per claim.
# - **Rerun**: the launch button at the top of this page opens it in Colab, or `papermill book/reproduction.ipynb out.ipynb` after running the chapters.
# ```

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %% tags=["remove-input"]
import os

from IPython.display import HTML, Markdown, display

import book_tools as bt

paper = bt.read_paper_claims()
ours = bt.read_claims(bt.results_root())
built = os.environ.get("GLAUBER_PROFILE")  # make book: one profile, one model
run = bt.check_one_run(ours, built, bt.model_label() if built else None)
unknown = bt.unknown_claims(paper, ours)
if unknown:
    raise ValueError(f"results have claims paper_claims.csv lacks: {unknown}")
rates = bt.rule_rates(bt.read_operating_characteristics())
tables = {
    name: bt.reproduction_table(paper, ours, name, rates) for name in bt.TABLES
}
Markdown(bt.run_summary_text(run, tables))

# %% tags=["remove-input"]
bt.set_book_style()
forest = bt.forest_rows(tables)
if len(forest):
    bt.forest_figure(forest)
else:
    display(Markdown("No general claim ran in this build."))

# %% [markdown]
# Each line is one general claim (one the paper states of masked LMs as such): our estimate and its
# 95% interval, measured in half-widths of that interval from the null its rule tests against, so
# that every claim shares the scale; the paper's side is to the right. A line whose interval clears
# the null (past ±1) is decided; one that straddles it is *inconclusive*. A rule with no interval (a
# count, a claim "in every part") shows its verdict in the grey strip. How each verdict is decided
# is in the appendix {doc}`verdicts`, and how often each rule errs at this size in {doc}`trust`.
# The book runs a small bundled model, not the paper's BERT or RoBERTa, so the model-specific rows
# are *other setup* here; the [across-models page](across_models) and the [AntiBERTy
# page](antiberty) give the general claims one verdict per model.

# %% [markdown]
# Under an *inconclusive* verdict, a line says what run would decide it: the rule's own words where
# it gives them (a run with events, more chains), else, where the interval straddles the null, how
# much larger a run would have to be to decide it with 80% power if the estimate held, and which
# verdict that run would reach (*reproduced* when the estimate lies on the paper's side of the null,
# *differs* when it lies on the other): intervals shrink like one over the square root of the run's
# size, so the factor is (2.80 / 1.96)² (half-width / distance from the null)², where 2.80 standard
# errors is how far an effect must lie from the null for a 5% test to find it 80% of the time.
# It is an approximation, not a promise: the estimate moves with the run,
# and a rule whose statistic is capped by a ceiling or a budget may not decide at any size
# ({doc}`trust` measures each rule's power at 4 and 16 times this size on known answers).
#
# A row marked *shown beside, not judged* follows the judged row of its claim: the trap claims are
# judged at the temperature matched to the model (chapter 5), and their rows at the paper's $\tau = 1$,
# where a model far flatter than BERT (the bundled one) may show no trap at all, are shown for
# comparison, outside the counts and the figure.
#
# Under a verdict, a rule's label says how far its power reaches at this size, measured on
# known-answer chains ({doc}`trust`) and computed from that table by these rules:

# %% tags=["remove-input"]
Markdown(bt.power_labels_text(rates))

# %% [markdown]
# ## The paper's claims
#
# One row per claim of the paper's tables and figures, in the order of the paper.

# %% tags=["remove-input"]
HTML(bt.claims_html(tables["paper"]))

# %% [markdown]
# ## Beyond the paper
#
# What the book adds: checks the paper could not make on BERT (exact mixing times and exact
# stationary laws on chains small enough to enumerate) and a question its section 7 leaves open
# (how large the influence is on the states the chains actually visit).

# %% tags=["remove-input"]
HTML(bt.claims_html(tables["beyond"]))

# %% [markdown]
# ## Checks of the code path
#
# Not reproductions: identities that must hold whatever the model (a causal LM's rectangle δ
# telescopes to 0, Proposition 4) and controls that show a test can tell a compatible model from an
# incompatible one. A failed check means the code, not the model, is wrong.

# %% tags=["remove-input"]
checks = bt.read_checks(bt.results_root())
(
    HTML(bt.checks_html(checks))
    if len(checks)
    else Markdown("No chapter wrote checks in this run.")
)

# %% [markdown]
# ## Seed to seed
#
# A verdict decided by an interval can move when the run's random draws change. Each quick chapter
# is run with `seed` = 0 (this book's build), 1, 2, ... (other passages, chain draws, rectangles
# and bootstrap draws) on the same code, and every row compared by
# `tools/compare_verdicts.py` (`make seed-record`; the record: `results/seeds/`). A flip between a
# decided verdict and *inconclusive* marks a claim near its rule's edge at this size; a claim
# *reproduced* at one seed and *differing* at another would mark a rule that a seed can overturn,
# which rules built to err at most 5% of the time should not show.

# %% tags=["remove-input"]
import pandas as pd

seeds = pd.read_csv(
    bt.REPO_ROOT / "results" / "seeds" / "quick_seeds.csv",
    dtype=str,
    keep_default_na=False,
)
display(Markdown(bt.seed_record_text(seeds)))
verdicts = [c for c in seeds.columns if c.startswith("verdict_seed")]
flips = seeds[seeds.flipped == "True"]
(
    bt.reading_table(flips[["chapter", "claim", "kind", *verdicts]])
    if len(flips)
    else Markdown("No verdict changed.")
)
