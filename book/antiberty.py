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
# # A pretrained MLM: AntiBERTy
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (paper, all sections): the paper's general claims are about masked LMs as such; here every chapter runs on a masked LM that others pretrained at scale, a protein model, beside the book's own English model.
# - **Look at**: what cutting a gene does to the model's predictions, the verdicts side by side, Table 1's row, the exact windows and the slowest one's competing states, the germlines as traps, and germline reversion.
# - **Rerun**: the launch button at the top of this page opens it in Colab, or `make antiberty` then `papermill book/antiberty.ipynb out.ipynb`
# ```
#
# Every other page of this book runs models trained here, with one recipe, on BBC News. A
# property of those models may be a property of the recipe. AntiBERTy {cite}`ruffolo2021antiberty`
# is a masked LM pretrained by others: a BERT encoder (8 layers, hidden size 512, about 26M
# parameters) with its MLM head, trained on 558M natural antibody sequences. Its vocabulary is the
# 20 amino acids (plus 5 special tokens, never proposed), one residue per token. The PyPI wheel
# `antiberty==0.1.3` (MIT licence, 97 MB) ships its weights, so `glauber.load_mlm("antiberty")` works
# offline (in fp32 on every device), and every chapter takes `-p model antiberty`.
#
# **The state is a whole gene.** AntiBERTy was trained on whole variable domains, so every chapter
# reads its sites inside a whole human germline V gene from the IMGT tables that the `anarci`
# package ships {cite}`dunbar2016anarci`: the gene from the start of FR1, cut to its first 90
# residues so that every gene has the same length (all 417 human V genes have at least 91; the cut
# drops at most the last 10 residues of FR3). A chapter's $n$ is its number of **free sites**, a
# window in a named IMGT region (FR1 by default: the sites the book used to cut out alone; CDR1 for
# the exact windows), every other residue frozen. An FR1 window ends where the shortest human FR1
# does (25 residues): a chapter asked for more free sites refuses, rather than let them run into
# CDR1 under an FR1 label. CDR1 and CDR2 are compared with the framework in chapter 4's rates of
# change; no chapter runs an exact window in CDR2. Every table of protein states carries
# `context` (residues in the state) and `free` (free sites). Where a chapter needs English (the
# sentence embedder, the topic scorer, the '!' basin), its page says what replaces it (the Hamming
# distance to the start, germline reversion) or skips that step.
#
# With 20 letters, a window of k free residues is a chain of $20^k$ states: 400 for k = 2, 8,000
# for k = 3. Its exact kernel, stationary law $\mu_\tau$ and mixing time can be computed over the
# model's full vocabulary, which no English MLM allows.
#
# The runs take longer than the quick book can afford, so this page reads the committed results
# of `make antiberty` (69 minutes on 2 idle cores, 37 of them chapter 5's) and names the runs below
# (after a change to one chapter's code, `python tools/across_models.py --set antiberty --chapters <chapter>` reruns
# that chapter alone; each chapter's row names the command that made it).

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %% tags=["remove-input"]
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import HTML, Markdown, display

import book_tools as bt
from chapters import basins, bounds, incompatibility, traps

bt.set_book_style()
root = bt.ANTIBERTY_RESULTS
ran = (root / "run.csv").exists()  # a checkout without the committed results
run = bt.across_run(root) if ran else {}
changed = ", ".join(run.get("stale", []))
stale = (
    f"\n\n> **Warning:** the code of {changed} has changed since "
    "this run: rerun `make antiberty` and commit `results/antiberty/`."
    if changed
    else ""
)
Markdown(
    f"**This run:** `{run['command']}` (profile `{run['profile']}`, "
    f"commit `{run['commit']}`, finished {run['finished']}, "
    f"{run['minutes']:.0f} minutes of notebook time).{stale}"
    if ran
    else "> **Warning:** this checkout has no `results/antiberty/`: run "
    "`make antiberty` to fill this page."
)

# %% [markdown]
# ## A cut gene is another input
#
# Until this version the book ran AntiBERTy on the first $n$ residues of each gene, cut out alone.
# At those same sites, chapter 1 compares the model's conditional given the cut with its
# conditional given the whole gene: their total variation per site, and how often the germline
# residue is the top prediction in each. A protein-MLM user who scores fragments should expect
# differences of this size.

# %%
if ran:
    cut = bt.read_across("01_incompatibility", "cut_versus_gene", root)
    incompatibility.cut_versus_gene_figure(cut)
    plt.show()
    print(incompatibility.cut_versus_gene_text(cut))

# %% [markdown]
# ## The general claims on both models
#
# Each general claim judged by its chapter's calibrated rule, on the book's default English model
# (this build's run of the chapters) and on AntiBERTy (the run above). A claim reproduced on one
# and not on the other is a claim about that model, not about masked LMs. Each row's dropdown says
# what was measured on each model, where the chapter had to replace an English step. Claims that
# need English text (section 6.2's topic basins) are not run on a protein model and are left out.

# %% tags=["remove-input"]
label = bt.model_label()
runs = {f"{label} (this build)": bt.read_claims(bt.results_root())}
if ran:
    chapters = pd.read_csv(root / "run.csv").chapter.drop_duplicates()
    runs["antiberty"] = pd.concat(
        [bt.read_across(c, "claims", root) for c in chapters]
    )
beside = bt.verdicts_beside(runs)
if ran:  # only the claims run on AntiBERTy: the English topic basins are not
    beside = beside[beside["antiberty"] != bt.NOT_RUN]
HTML(bt.verdicts_beside_html(beside))

# %% [markdown]
# ## Table 1's row
#
# Chapter 1's rectangle test on AntiBERTy: rectangles whose two sites lie in the first 20 residues
# (FR1) of a whole germline gene, with replacement residues uniform over the 19 other amino acids
# (a top-$k$ of 50 holds all of them), the share above the rounding floor and the mean $|\delta|$
# with its bootstrap interval, beside the controls of the same run (a causal LM's joint, whose
# $\delta$ telescopes to 0, and two Potts models). On 20-residue cuts the book measured a mean
# $|\delta|$ of 1.13; the paper's English models give 0.64-0.80.

# %%
columns = [
    "role",
    "rectangles",
    "mean_abs_delta",
    "ci_low",
    "ci_high",
    "above_floor",
    "floor",
]
if ran:
    table1 = bt.read_across("01_incompatibility", "table1", root)
    display(bt.reading_table(table1[[c for c in columns if c in table1]]))

# %% [markdown]
# ## Exact chains over the full vocabulary
#
# Chapter 2's windows: the first k residues of each gene's own CDR1, every other residue of the
# whole gene frozen, all 20 amino acids allowed at each free site. For each window, the exact kernel, its stationary law
# $\mu_\tau$, the exact $t_{\mathrm{mix}}(1/4)$ and the exact influence $\alpha$ of the window
# chain; Theorem 5's bound $\frac{n}{1-\alpha}(\log n + \log 4)$ applies where $\alpha < 1$. On the
# right, how far the pseudo-likelihood law of the model's conditionals is from that of
# $\mu_\tau$'s own conditionals: exactly 0 for a compatible chain.

# %%
if ran:
    windows = bt.read_across("02_mixing_bounds", "windows_full", root)
    fig = bounds.windows_figure(windows)
    plt.show()

# %% [markdown]
# The slowest window at $\tau = 1$ and the fillings that compete in it: its most likely states
# under $\mu_\tau$, with the pseudo-likelihood law beside them. A window mixes slowly when
# $\mu_\tau$ splits its mass between fillings that single-residue moves can join only through
# unlikely ones.

# %%
if ran:
    competing = bt.read_across(
        "02_mixing_bounds", "slowest_window_states", root
    )
    display(
        bt.reading_table(
            competing[["window", "k", "filling", "mu_tau", "pseudo_likelihood"]]
        )
    )

# %% [markdown]
# ## Are the germlines themselves traps?
#
# Chapter 5 measures the score gaps $\Delta_i(x)$ (appendix A.1) at the first residues (FR1) of
# every distinct human germline gene, read in the whole gene: a germline is a perfect trap there
# when its residue is the model's first choice at every one of those sites. On 12-residue cuts the
# book found 9 perfect traps among 96 germlines. The chapter's chains run at $\tau = 1$ alone, the
# temperature its trap claims are judged at (a whole gene's step costs about four text steps).

# %%
if ran:
    gaps = bt.read_across("05_traps", "germline_gaps", root)
    display(traps.germline_family_view(gaps))

# %% [markdown]
# ## Germline reversion: chapter 4's basin on a protein
#
# In place of section 6.2's topic basins, chapter 4 asks whether the human germline is a basin:
# chains start at whole germline genes with k = 2, 4 or 8 substitutions at framework sites (every
# site free), and after T steps the share of mutated sites back at the germline residue is set
# against the share of unmutated framework sites that left it, at $\tau$ = 0.5, 1 and 2 (fixed
# before any run). The verdicts are the `germline_reversion_tau05`, `_tau10` and `_tau20` rows
# above, one a temperature, each against what a model with no pull toward the germline would give
# (uniform over the 20 residues: back with probability 1/20, off with 19/20). Beside them, what a
# protein-MLM user reads: the pseudo-log-likelihood per residue (the antiberty package's
# convention) at each chain's start and end, and how much of each IMGT region changed.

# %%
if ran:
    reversion = bt.read_across("04_basins", "reversion", root)
    display(basins.reversion_view(reversion))
    display(basins.pll_view(bt.read_across("04_basins", "pll", root)))
    display(
        basins.region_view(bt.read_across("04_basins", "region_rates", root))
    )

# %% [markdown]
# The end states of one gene's chains as a sequence logo: at each site the model's conditional at
# the chain's temperature, averaged over the gene's chains, stacked by information (bits), with the
# CDRs shaded.

# %%
if ran:
    profile = bt.read_across("04_basins", "endpoint_entropy", root)
    basins.logo_figure(profile, profile.gene.iloc[0])
    plt.show()

# %% [markdown]
# ## What the paper profile would add
#
# The run above is sized for 2 CPU cores (about 32 chain-steps per second at 90 residues). On a
# GPU, `-p profile paper` gives every chapter the paper's sizes: 300 rectangles, chains of $10^4$
# steps, more free sites and more genes; windows of k = 4 free sites (160,000 states) need a
# sparse kernel, which this book does not build.
