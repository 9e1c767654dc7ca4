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
# - **Look at**: the two tables below; each row links to the chapter that measures it, and says which run it comes from.
# - **Rerun**: the launch button at the top of this page opens it in Colab, or `papermill book/reproduction.ipynb out.ipynb` after running the chapters
# ```
#
# Each chapter of this book re-runs one section of {cite}`sana2026mixing` and ends by writing its
# verdicts to `claims.csv` in the build's results folder: our number, a short text with its
# uncertainty, the run that made it (model, profile, code version, commit, date) and a verdict decided in
# code by a rule that the chapter states before the run. This page only collects those files, from the
# one run of the chapters that this book shows (the build refuses rows of another profile, model or code
# version): it types no number of its own. The paper's values come from one file,
# `book/paper_claims.csv`, each with the section it is quoted from, the model it was measured on and
# its protocol.
#
# There are five verdicts. A **general** claim (one the paper states of masked LMs as such) is judged by
# a rule fixed before the run, from the book's one judging module (`verdicts.py`), against a named
# null: *reproduced* when our interval lies on the paper's side of the null, *differs* when it lies on
# the other side, *inconclusive* otherwise, with the run size that would decide it. Zero events are
# inconclusive only where zero is what a too-small run shows (no trap ended); where zero is the answer
# (no rectangle above the rounding floor) they are a decisive *differs*. Every general rule is
# **calibrated**: its chapter's own estimator and rule, run on chains whose answer is known by
# mathematics (compatible and incompatible Potts models, independent sites, Curie-Weiss chains, a
# ground state at low temperature, a random-weight MLM), must say reproduced where the claim holds and
# differs where it fails (`tests/test_calibration_*.py`), or, for a claim where only one side can occur
# on any chain, that side, which its row then says; each row names its calibration.
#
# A **model-specific** claim (a number the paper measured on BERT or RoBERTa) is judged only on the
# paper's own model, by its exact name, and protocol, item by item, against an equivalence band stated
# in `book/paper_claims.csv` (the paper's range, or its value with a stated tolerance): reproduced when
# our interval lies inside the band, differs when outside it. Measured on another model or protocol it
# is *other setup*: our number stands beside the paper's, with each difference listed, and no
# judgement. *Not run here* marks a claim whose chapter did not run in this build. Identities and
# controls of the code path (a causal LM's δ telescoping to 0) are **checks**: they pass or fail in
# their own table and are not counted as reproductions.
#
# The book is built offline with a small masked LM trained for this purpose (see the appendix on the
# bundled model), not with the paper's BERT, RoBERTa or ModernBERT, so every model-specific row is
# *other setup* here; rerunning a chapter with `-p model bert-base-uncased -p profile paper` (on a GPU)
# puts it on the paper's footing. The [across-models page](across_models) gives the general claims of
# chapters 1, 2 and 4 one verdict per bundled model (2, 4 and 6 layers).

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %% tags=["remove-input"]
import os

from IPython.display import HTML, Markdown, display

import book_tools as bt

paper = bt.read_paper_claims()
ours = bt.read_claims(bt.results_root())
built = os.environ.get(
    "GLAUBER_PROFILE"
)  # set by make book: one profile and model
run = bt.check_one_run(ours, built, bt.model_label() if built else None)
unknown = bt.unknown_claims(paper, ours)
if unknown:
    raise ValueError(f"results have claims paper_claims.csv lacks: {unknown}")
tables = {name: bt.reproduction_table(paper, ours, name) for name in bt.TABLES}
Markdown(
    f"**This run:** model `{run['model']}`, profile `{run['profile']}`, "
    f"commit `{run['commit']}`, {run['dates']}."
)

# %% [markdown]
# ## At a glance
#
# Each general claim on one line: our estimate (dot) and its 95% interval where the rule has one,
# against the null the rule judges it by (dashed), coloured by the verdict. Every line has its own
# scale: the claims measure different things (a share, a correlation, a ratio, a slope).

# %% tags=["remove-input"]
bt.set_book_style()
forest = bt.forest_rows(tables)
if len(forest):
    bt.forest_figure(forest)
else:
    display(Markdown("No general claim has an estimate in this run."))

# %% tags=["remove-input"]
HTML(bt.counts_frame(tables).to_html(index=False))

# %% [markdown]
# ## The paper's claims
#
# One row per claim of the paper's tables and figures, in the order of the paper.

# %% tags=["remove-input", "full-width"]
HTML(bt.claims_html(tables["paper"]))

# %% [markdown]
# ## Beyond the paper
#
# What the book adds: checks the paper could not make on BERT (exact mixing times and exact
# stationary laws on chains small enough to enumerate) and a question its section 7 leaves open
# (how large the influence is on the states the chains actually visit).

# %% tags=["remove-input", "full-width"]
HTML(bt.claims_html(tables["beyond"]))

# %% [markdown]
# ## Checks of the code path
#
# Not reproductions: identities that must hold whatever the model (a causal LM's rectangle δ
# telescopes to 0, Proposition 4) and controls that show a test can tell a compatible model from an
# incompatible one. A failed check means the code, not the model, is wrong.

# %% tags=["remove-input", "full-width"]
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
# was run a second time with `seed` = 1 (other passages, chain draws, rectangles and bootstrap
# draws) on the same code, and every row compared with the seed-0 run by
# `tools/compare_verdicts.py` (the record and how it was made: `results/seeds/`). A flip between a decided verdict and *inconclusive* marks a claim
# near its rule's edge at this size; a flip between *reproduced* and *differs* would mark a rule
# that a seed can overturn.
#
# The two runs' chains draw independently: `chain_seeds` mixes the seed before adding the chain's
# index, so no chain of the seed-1 run reuses a stream of the seed-0 run. Chapter 3's batches that
# run many temperatures at once key each chain by (seed, temperature), so a cell's chains do not
# depend on the grid's other temperatures.

# %% tags=["remove-input"]
import pandas as pd

seeds = pd.read_csv(
    bt.REPO_ROOT / "results" / "seeds" / "quick_seed0_vs_seed1.csv",
    dtype=str,
    keep_default_na=False,
)
seeds["flipped"] = seeds.flipped == "True"
same_code = (seeds.code_base == seeds.code_other).all()
moved = sorted(
    c
    for c, code in seeds.groupby("chapter").code_base.first().items()
    if code != bt.code_version(c)
)
unjudged = (seeds.verdict_base == bt.OTHER_SETUP) & (
    seeds.verdict_other == bt.OTHER_SETUP
)
counts = seeds[~unjudged].groupby("kind").flipped.agg(["sum", "size"])
flips = seeds[seeds.flipped].rename(
    columns={"verdict_base": "seed 0", "verdict_other": "seed 1"}
)
display(
    Markdown(
        "At the quick profile on the bundled model: "
        + "; ".join(
            f"{int(n)} of {total} {kind} rows changed"
            for kind, (n, total) in counts.iterrows()
        )
        + f" (the {unjudged.sum()} rows that are *other setup* on both seeds are not judged on "
        "this model)."
        + (
            ""
            if same_code
            else "\n\n> **Warning:** the two runs did not run the same code."
        )
        + (
            f"\n\n> **Warning:** the code of {', '.join(moved)} has changed since this comparison "
            "was made."
            if moved
            else ""
        )
    )
)
(
    bt.reading_table(flips[["chapter", "claim", "kind", "seed 0", "seed 1"]])
    if len(flips)
    else Markdown("No verdict changed.")
)
