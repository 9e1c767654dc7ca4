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
# # How far each verdict can be trusted
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim**: a verdict is worth what its rule's error rate is at the size the book runs.
# - **Look at**: the figure (each rule's wrong-decision share on chains whose answer is known) and the table.
# - **Rerun**: `make calibrate power-curves` (about an hour on 2 cores), then the launch button at the top of this page (Colab) or `papermill book/trust.ipynb out.ipynb`.
# ```
#
# One draw that comes out right says little about how often a rule errs. For every general claim,
# `make calibrate` (`tools/calibrate.py`, its cases in `tools/calibration/`) runs the chapter's own
# estimator and rule at the `quick` profile's sizes (its chains, steps, recording interval and grid)
# on chains whose answer is known by mathematics, once per seed over 50 independent seeds: a case
# where the claim holds and one where it fails. A **wrong decision** is *differs* where the claim
# holds or *reproduced* where it fails; *inconclusive* is never wrong, only weak. Each rule is built
# to err at most 5% of the time at this size; the check is an observed wrong share of at most 10%.
# The **power** is the share of seeds decided correctly. Each rule's labels, shown here and on the
# reproduction page, follow from this table by the rules stated under *Power, rule by rule* below.
#
# This page refuses a stale table: each case's row names the code version it was made at (the
# chapter's code version and the case's own module), and the page fails if any differs from today's.

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %% tags=["remove-input"]
import sys

from IPython.display import HTML, Markdown, display

import book_tools as bt

sys.path.insert(0, str(bt.REPO_ROOT / "tools"))
import calibrate  # noqa: E402

table = bt.read_operating_characteristics()
stale = calibrate.stale_cases(table)
if stale:
    raise ValueError(
        "results/calibration/operating_characteristics.csv is stale for "
        f"{len(stale)} case(s), e.g. {stale[0]}: run `make calibrate`"
    )
general = bt.read_paper_claims().query("kind == 'general'").claim
uncovered = sorted(set(general) - set(table.claim))
Markdown(
    f"**{table.claim.nunique()} rules, {len(table)} known-answer cases, "
    f"{int(table.seeds.sum())} runs.** "
    + (
        "Every general claim has its cases."
        if not uncovered
        else "General claims without a case yet: "
        + ", ".join(f"`{c}`" for c in uncovered)
        + "."
    )
)

# %% [markdown]
# ## Wrong decisions, case by case
#
# Each dot is one known-answer case: the share of its seeds on which the rule decided wrongly, with
# its 95% Wilson interval; the dashed line is the 10% check, the dotted one the 5% design.

# %% tags=["remove-input"]
bt.set_book_style()
bt.operating_characteristics_figure(table)

# %% [markdown]
# ## The table
#
# Counts of each verdict over the seeds, the wrong share with its interval, and the power.

# %% tags=["remove-input"]
HTML(bt.operating_characteristics_html(table))

# %% [markdown]
# ## Power, rule by rule
#
# Each rule's lowest power over its cases where the claim holds and where it fails, and the labels
# these earn. The labels are computed from the table above (`book_tools.power_labels`), so they
# follow it when `make calibrate` reruns:

# %% tags=["remove-input"]
rates = bt.rule_rates(table)
display(Markdown(bt.power_labels_text(rates)))
lowest = {
    "power_holds": "lowest power, claim holds",
    "power_fails": "lowest power, claim fails",
}
bt.reading_table(
    rates[["claim", *lowest, "labels"]].rename(columns=lowest),
    dict.fromkeys(lowest.values(), "{:.0%}"),
    missing="no case",
)

# %% [markdown]
# ## Power as the run grows
#
# A rule that cannot decide at the quick size may decide at a larger one, or may never: its
# statistic may be capped by a ceiling, a budget or a grid's spacing rather than by noise.
# `make power-curves` runs every case again at 4 and 16 times the sizes its claim names (the
# column *sizes*: coupled pairs per temperature, chains, rectangles, windows or steps, never the
# rule, its null or its grid), 50 seeds each. Each panel is one rule: each case's power (solid)
# and wrong-decision share (dotted) against the size of the run. A wrong share that grows with
# the size is a rule whose null is only approximately right, which a larger run exposes.

# %% tags=["remove-input"]
curves = bt.read_power_curves()
versions = {
    (c.claim, c.name): calibrate.case_version(c) for c in calibrate.CASES
}
old = [
    f"{r.claim}: {r.case} (x{r.scale})"
    for r in curves.itertuples()
    if versions.get((r.claim, r.case)) != r.code
]
missing = [
    f"x{scale}: {len(versions) - len(part)} case(s)"
    for scale, part in curves.groupby("scale")
    if len(part) < len(versions)
]
missing += [f"x{k}: no rows" for k in (1, 4, 16) if k not in set(curves.scale)]
if old or missing:
    raise ValueError(
        "results/calibration/power_curves.csv is stale or incomplete "
        f"({old[:1] + missing}): run `make calibrate power-curves`"
    )
bt.power_curves_figure(curves)

# %% [markdown]
# Per rule, the lowest power over its cases where the claim holds and the worst wrong share
# over all its cases, at each size, and the smallest size at which every case where the claim
# holds reaches 80% power (— where none of the sizes run reaches it):

# %% tags=["remove-input"]
scaled = bt.power_at_scales(curves)
shares = [c for c in scaled.columns if c.startswith(("holds x", "wrong x"))]
display(Markdown(bt.power_reach_text(scaled)))
bt.reading_table(scaled, dict.fromkeys(shares, "{:.0%}"))
