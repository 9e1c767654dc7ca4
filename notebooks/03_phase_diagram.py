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
# # The temperature-length phase diagram
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (paper, section 6.1, Figs. 2, 3 and 7): coupled chains go from
#   "never meet within the budget" to "meet fast" around
#   {glue:text}`paper_coupling_boundary_tau` (RoBERTa), the boundary moves
#   to higher $\tau$ as $n$ grows, the crossover does not sharpen, and at
#   high temperature hitting times grow like $C(\tau)\, n \log n$.
# - **Look at**: the coupling heatmap and the logistic fits per $n$, the
#   hitting-time fit table, the threshold shares, and the claims table at
#   the end.
# - **Rerun**: the launch button at the top of this page opens it in Colab, or `papermill notebooks/03_phase_diagram.ipynb out.ipynb -p profile paper -p model bert-base-uncased`
# ```
#
# Section 6.1 of the paper {cite}`sana2026mixing` maps where Glauber
# dynamics on a masked LM mixes fast and where it does not, over the
# temperature $\tau$ and the sequence length $n$. It uses two instruments.
# The first is a coupling: two chains started from unrelated passages
# update the same site each step and draw their tokens by a maximal
# coupling, so they meet and then stay together; the time until they meet
# bounds how long the chain needs to forget its start
# {cite}`levin2017markov`. The second is semantic drift: the distance
# $d(x_t, x_0) = 1 - \cos(\phi(x_t), \phi(x_0))$ between sentence
# embeddings {cite}`reimers2019sbert` of the current and initial text. We
# rerun both on the bundled model, fit what the paper reads off by eye,
# and test two remarks of its section 7: that the crossover does not
# sharpen with $n$, and that the chain mixes faster than the worst-case
# bound because the states it visits are only weakly coupled.

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %% tags=["parameters"]
import os

profile: str = os.environ.get("GLAUBER_PROFILE", "quick")  # or smoke, paper
model: str = ""  # a Hugging Face masked LM name or folder; "" is bundled
pairs: int = 0  # coupled pairs per (tau, n) cell; 0: the profile's value
budget: int = 0  # coupling budget in steps; 0: the profile's value
drift_chains: int = 0  # drift chains per (tau, n); 0: the profile's value
drift_steps: int = 0  # drift steps, the shortest length's; 0: the profile's
temperatures: list = []  # coupling-grid temperatures; []: the profile's
passages: str = ""  # bbc | ms_marco; "" is the profile's (protein: germline)
seed: int = 0

# %%
import numpy as np
import pandas as pd
import torch

import book_tools as bt
import glauber_core as glauber
from chapters import phase as ch

run = bt.ChapterRun("03_phase_diagram", profile, model)
cond = run.cond  # a protein MLM (cfg.protein) runs free sites in a germline
cfg = ch.settings(
    profile,
    cond,
    pairs=pairs,
    budget=budget,
    drift_chains=drift_chains,
    drift_steps=drift_steps,
    grid_temperatures=temperatures,
    passages=passages,
)
embedder = None if cfg.protein else glauber.load_embedder()
if cfg.protein:  # a protein table's state: the gene, alpha-hat's free sites
    run.state(cfg.context_length, cfg.alpha_length)
bt.settings_view(cfg)

# %% tags=["remove-input"]
run.glue(
    {
        f"protocol_{claim}": ch.protocol_text(claim)
        for claim in (
            "coupling_boundary_tau",
            "distance_saturates",
            "nlogn_fit",
            "crossover_fractions",
        )
    }
    | {"model_note": ch.model_note_text(cond, cfg)}
)

# %% [markdown]
# Each profile (`SETTINGS` in `chapters/phase/protocol.py`, `PROTEIN_SETTINGS`
# for a protein MLM) fixes every size; a parameter left at 0 or `[]` keeps the
# profile's value, and `temperatures` replaces the coupling grid's temperatures.
# `smoke` only exercises the code (CI). `quick` (the book, 2 CPU cores) couples
# pairs at $n \in \{6, 24\}$ within a 400-step budget, 8 per cell at
# five temperatures from 0.75 to 3 and then 16 more per cell at four
# temperatures around each length's boundary, and runs 6 drift chains per
# $(\tau, n)$, $\tau \in \{0.3, 1, 1.4, 2.5\}$, $n \in \{6, 10, 16, 24\}$,
# each length for $T(n)$ steps growing like $n \ln n$ (300 at $n = 6$ to 1,000
# at $n = 24$, `ch.nlogn_steps`): a site is then offered about as many
# updates at every length, where a fixed $T$ would leave the longest
# sequences short of saturation by design. The drift lengths span a
# factor 4, as the coupling grid's do, so that growth like $n \log n$ can
# be told from $n$ and $n^2$ across them. The hitting times of Fig. 3b come from 32
# further chains per length at $\tau = 1.4$, recorded at every step (the
# shortest times are a few steps), and the influence sums of section 6
# from 16 chains of length 6, the grid's shortest.
#
# `paper` follows the paper's protocol item by item, as
# `book/paper_claims.csv` records it: Fig. 2
# ({glue:text}`ch3_protocol_coupling_boundary_tau`), Fig. 3a
# ({glue:text}`ch3_protocol_distance_saturates`), Fig. 3b
# ({glue:text}`ch3_protocol_nlogn_fit`) and Fig. 7
# ({glue:text}`ch3_protocol_crossover_fractions`). One batched drift run
# per length serves the three drift protocols; each reads its own number
# of chains and its own cutoff from it. Where `paper` still differs from
# the paper: the model (the bundled MiniLM-based model unless `model` names
# RoBERTa-base for Fig. 2 or BERT-base-uncased for Figs. 3 and 7), the
# passages (MS MARCO at `paper`, which needs the hub; held-out BBC News
# paragraphs with `passages="bbc"` offline and at the smaller profiles), the
# embedder (all-MiniLM-L6-v2 throughout, where Fig. 3 used Jina Embeddings
# v4), and the items the paper does not state: pairs per cell (we take
# 100) and the grid of lengths and temperatures.
#
# **`quick` stops at $n = 24$.** The question whether the boundary keeps
# moving at $n = 32$ and beyond is left to `paper` (lengths 32 to 64): on
# the bundled model, at $n = 32$ most pairs below $\tau = 2.5$ do not meet
# within 400 steps, so each costs the whole budget, and a row of $n = 32$
# alone took about half of this chapter's time on two CPU cores, more
# than the book's 30-minute budget leaves it. For the same reason the
# `quick` coupling grid runs two lengths, as far apart as the budget
# allows, and spends its pairs near each one's boundary rather than on a
# third length; the drift runs keep four
# lengths, because the $n \log n$ fit needs three that reach the radius.
#
# **The model of this run.** {glue:text}`ch3_model_note`
#
# ## How each claim is judged (fixed before the run)
#
# Every rule names its null and can return *reproduced* (the 95% interval
# excludes the null), *differs* (the interval excludes what the paper
# says) or *inconclusive* (neither, zero events, or no estimate).
#
# - `coupling_boundary_tau` is a number measured on RoBERTa: $\tau_{1/2}$
#   (where half the pairs meet) at the grid length nearest the paper's
#   seed length of 20 tokens is shown beside it as **other setup**, with
#   every difference of model, budget, pairs, length and passages listed;
#   it is never judged off the paper's setup.
# - `boundary_shift_with_n`: $\tau_{1/2}(n_{\max}) - \tau_{1/2}(n_{\min})$
#   **with the budget effect removed**: a pair counts as met only within a
#   budget proportional to $n \log n$ (section 2), from one logistic fit
#   across lengths and both stages. Null: no shift. Reproduced when the
#   interval lies above 0, differs when at or below 0.
# - `transition_width`: the ratio, $n_{\max}$ over $n_{\min}$, of the
#   **relative** width $s / \tau_{1/2}$ (the width in $\log\tau$) from
#   the same pooled fit, **on the same budget scaled by $n \log n$**. An
#   absolute width in $\tau$ grows or shrinks with the boundary's
#   location alone, and a fixed budget widens the transition at larger
#   $n$ by itself: both are shown, not judged. A mean-field (Curie-Weiss)
#   transition's relative width shrinks like $n^{-1/2}$ wherever its
#   boundary moves. Null: shrinking like $n^{-1/4}$, halfway between that
#   and none, a ratio $(n_{\min}/n_{\max})^{1/4}$. Reproduced (does not
#   sharpen) when the interval lies above it, differs (sharpens) when at
#   or below.
# - `nlogn_fit`: the exponent $\beta$ of a power law $c\, n^\beta$
#   fitted to the mean hitting time per length, with a bootstrap interval
#   over chains (2,000 resamples: the interval's ends are 2.5% tails, which
#   200 resamples pin down to single draws), against the exponents that $n(\log n + c)$, $c \in [0, 1]$,
#   shows over the same lengths (about 1.3-1.4 for $n = 6$-$24$; the
#   coupon collector's $n H_n$ lies inside). Null: linear ($\beta = 1$) or
#   quadratic ($\beta = 2$) growth. Reproduced when the interval excludes
#   both and meets the $n \log n$ range, differs when it misses that range.
#   The mean, not the median: times of a few steps are integers, and their
#   median sits on the smallest possible value at short lengths.
# - `distance_saturates` (Fig. 3a): after $T$ steps at $\tau = 1$ (the
#   paper's $10^4$ at every length; here $T(n)$, growing like $n \ln n$) the
#   distance has saturated, i.e. at every length the mean $d(x_T, x_0)$
#   reaches the embedder's ceiling $d_{\rm ref}(n)$, the mean distance
#   between unrelated passages of the same length. Null: below 0.9 of the
#   ceiling at some length. Reproduced when every length's 95% ratio
#   interval lies above 0.9; differs when one length's interval at the
#   corrected level $1 - 0.05/K$ ($K$ lengths, Bonferroni) lies at or below
#   it and that length's distance no longer rises over the run's last
#   third; inconclusive otherwise, as while it still rises (a longer run
#   decides). The correction keeps a ceiling reached at every length from
#   being called "differs" by some length more than 5% of the time. At the
#   ceiling, how $d$ grows with $n$ is the embedder's property, so the
#   slope is shown, not judged.
# - `crossover_fractions` (Fig. 7): for every length and every threshold
#   $R$, the slope against $\tau$ of the share of chains that reached
#   $d \ge R$ by the part's cutoff, the step by which half its chains
#   (all temperatures pooled) had (interval from Jeffreys draws of each
#   share; section 3 says why not at the run's end). Reproduced when
#   every part's 95% interval lies above 0; differs only when some part's
#   interval at the corrected level $1 - 0.05/K$ ($K$ parts, Bonferroni:
#   99.6% for the quick run's 12) lies at or below 0, since with 95% per
#   part a claim true everywhere would be called "differs" by one of 12
#   parts up to 26% of the time; inconclusive otherwise.
# - `context_averaged_alpha` (beyond the paper): at the first drift
#   temperature past the coupling boundary, the mean of
#   $\hat\alpha(\text{seed passage}) - \hat\alpha(\text{visited state})$
#   over `alpha_contexts` paired contexts, both sides with the same
#   candidates (Student's t interval over contexts). Null: no difference.
# - `theorem5_bound_loose` (beyond the paper, section 5.2 "On tightness"):
#   the highest temperature of `alpha_grid` at which $\hat\alpha$ on a
#   seed passage still reaches 1 (a lower bound on Theorem 5's threshold
#   $\tau_\alpha$) over the upper end of the interval of $\tau_{1/2}$.
#   Null: $\tau_\alpha / \tau_{1/2} \le 1$. Reproduced when this lower
#   bound exceeds 1, otherwise inconclusive: a lower bound can show that
#   the criterion is loose, never that it is tight.
#
# Each general rule is also run at this profile's sizes on chains whose
# answer is known (`tools/calibration/phase.py`, `make calibrate`), and
# its error rates are on the page "How far each verdict can be trusted".
#
# ## 1. Coupling times over temperature and length (Fig. 2)
#
# For each length $n$ we cut held-out BBC paragraphs to $n$ tokens and
# pair them up. Every pair runs at every temperature of its stage, and all
# pairs of one length share each forward pass; pairs that have met leave
# the batch. A pair that never meets costs the whole budget, so the budget
# and the lowest temperature set the run time. Each (pair, temperature)
# cell draws its own random numbers: common random numbers across
# temperatures would make a pair's outcomes at neighbouring temperatures
# near-copies, and the fit would learn from each pair once rather than
# from each cell.
#
# **The design, and why.** The grid runs in two stages. `pairs` pairs at
# the coarse `grid_temperatures` find where each length's boundary lies;
# then `stage_pairs` new pairs run at temperatures spread around that
# boundary (`stage_offsets`, in units of the first stage's width in
# $\log\tau$), where a pair's outcome is
# least certain and so says most about the boundary and its width. The
# shortest and longest lengths are {glue:text}`ch3_length_factor` times
# apart, so that a shift or a sharpening between them is large enough to
# see. The heatmap shows the first stage, the paper's grid.

# %%
grids = [ch.length_grid(cond, n, cfg, seed=seed) for n in cfg.lengths]
grid = pd.concat(grids, ignore_index=True)
cells = ch.coupling_summary(grid)
first = ch.coupling_summary(grid[grid.stage == 1])

# %% tags=["remove-input"]
run.save(grid, "coupling_times")
run.save(cells, "coupling_cells")
run.glue({"length_factor": f"{cfg.large / cfg.small:g}"})

# %% [markdown]
# The heatmap shows the median steps to coupling per cell, counting a pair
# that never met as infinitely slow; black cells are those where fewer than
# half the pairs met within the budget (the paper's black cells are those
# with no coupling at all). Each cell is annotated with the number of pairs
# that met.

# %%
ch.coupling_figure(first, cfg);

# %% tags=["remove-input"]
half_low, half_high = bt.share_intervals(cfg.pairs // 2, cfg.pairs)
paper_budget = float(bt.paper_protocol("coupling_boundary_tau")["budget"])
run.glue(
    {
        "overview": ch.coupling_overview_text(first, cfg.budget),
        "half_small": ch.boundary_text(first, cfg.small),
        "half_large": ch.boundary_text(first, cfg.large),
        "n_small": f"{cfg.small}",
        "n_large": f"{cfg.large}",
        "budget_factor": f"{paper_budget / cfg.budget:g}",
        "half_cell": f"{cfg.pairs // 2} of {cfg.pairs} has the interval "
        f"{half_low.item():.2f}-{half_high.item():.2f}",
    }
)

# %% [markdown]
# {glue:text}`ch3_overview` In this run the coldest temperature at which
# at least half the pairs met is {glue:text}`ch3_half_small` at $n =$
# {glue:text}`ch3_n_small` and {glue:text}`ch3_half_large` at $n =$
# {glue:text}`ch3_n_large`. The paper puts RoBERTa's boundary at
# {glue:text}`paper_coupling_boundary_tau`, with a budget
# {glue:text}`ch3_budget_factor` times ours. A single cell says little
# ({glue:text}`ch3_half_cell`), which is why the next section fits all
# temperatures of one length at once.

# %% [markdown]
# ## 2. Where is the boundary, and is it sharp?
#
# The share of pairs that met, with a 95% Wilson interval per cell, shows
# the spread behind the heatmap. Through it we fit, per $n$, a logistic
# curve $P(\text{met}) = 1/(1 + e^{-(\tau - \tau_{1/2})/s})$ to the 0/1
# outcomes of all pairs (Firth's penalised likelihood, finite even when the
# outcomes separate perfectly). $\tau_{1/2}$ is the boundary and
# $2 \ln 9\, s$ the width over which the share climbs from 10% to 90%.
# Intervals come from a bootstrap over pairs {cite}`efron1993bootstrap`. A
# length whose pairs all met, or none did, has no transition inside the
# grid and no fit.

# %%
fits = ch.transition_fits(grid, n_boot=cfg.n_boot, seed=seed)
ch.fits_view(fits)

# %% [markdown]
# :::{admonition} The code: how `transition_fits` finds the boundary
# :class: dropdown
# ```{literalinclude} ../chapters/phase/estimators.py
# :pyobject: transition_fits
# ```
# :::

# %% tags=["remove-input"]
run.save(fits, "transition_fits")
run.save(fits.attrs["boot"], "transition_bootstrap");

# %%
ch.transition_figure(cells, fits, cfg);

# %% [markdown]
# Two numbers answer the paper's two remarks. The boundary shift is
# $\tau_{1/2}$ at the largest $n$ minus $\tau_{1/2}$ at the smallest; the
# sharpening is the ratio of their widths in $\log\tau$ (the relative
# width $s / \tau_{1/2}$), to be compared with the $n^{-1/4}$ null
# $(n_{\min}/n_{\max})^{1/4}$ and the mean-field
# $\sqrt{n_{\min}/n_{\max}}$. Both come from **one fit across lengths**:
# $\operatorname{logit} P(\text{met}) = b_0 + b_1 \tau + b_2 \ell + b_3
# \tau \ell$ with $\ell = \log(n/n_{\min}) / \log(n_{\max}/n_{\min})$, so
# every pair of every length and both stages informs both ends, and the
# intervals come from resampling pairs within each length (no interval
# rests on a handful of pairs).
#
# A fixed budget favours short sequences: if coupling takes about
# $C\, n \log n$ steps, a pair of length 24 needs roughly five times the
# steps of a pair of length 6 at the same $\tau$, so part of any shift at
# a fixed budget comes from the budget alone. To remove it, the claims are
# judged on a second fit in which a pair counts as coupled only if it met
# within the budget scaled by $n \log n$ (the largest $n$ keeps the whole
# budget, shorter ones get proportionally less; a pair that never met is
# censored at the budget, beyond every allowance); a shift that remains
# means that near the boundary coupling slows down faster than
# $n \log n$ as sequences grow.

# %%
scaled = ch.scaled_budget_grid(grid, cfg.budget)
fixed, budget_free = (
    ch.pooled_transition_fit(g, cfg.small, cfg.large, cfg.n_boot, seed)
    for g in (grid, scaled)
)
ch.comparison_view(fixed, budget_free)

# %% [markdown]
# :::{admonition} The code: how `scaled_budget_grid` removes the budget effect
# :class: dropdown
# ```{literalinclude} ../chapters/phase/estimators.py
# :pyobject: scaled_budget_grid
# ```
# :::

# %% tags=["remove-input"]
small, large = cfg.small, cfg.large
run.save(ch.pooled_frame(fixed=fixed, scaled=budget_free), "pooled_fits")
run.glue(
    {
        "midpoints": ", ".join(
            f"{fit.midpoint:.2f} at n = {n}"
            if np.isfinite(fit.midpoint)
            else f"outside the grid at n = {n}"
            for n, fit in fits.set_index("n").iterrows()
        ),
        "shift_fixed": bt.interval_text(
            fixed["shift"],
            fixed["shift_low"],
            fixed["shift_high"],
            signed=True,
            missing="not estimable (no transition at one end)",
        ),
        "shift_scaled": bt.interval_text(
            budget_free["shift"],
            budget_free["shift_low"],
            budget_free["shift_high"],
            signed=True,
            missing="not estimable (no transition at one end)",
        ),
        "shift_text": ch.direction_text(
            budget_free["shift_low"],
            budget_free["shift_high"],
            0,
            "upward, the direction the paper reports",
            "downward, against the paper",
            "not distinguishable from zero",
        ),
        "ratio": bt.interval_text(
            budget_free["relative"],
            budget_free["relative_low"],
            budget_free["relative_high"],
            missing="not estimable (no transition at one end)",
        ),
        "ratio_abs": bt.interval_text(
            budget_free["ratio"],
            budget_free["ratio_low"],
            budget_free["ratio_high"],
            missing="not estimable (no transition at one end)",
        ),
        "ratio_fixed": bt.interval_text(
            fixed["relative"],
            fixed["relative_low"],
            fixed["relative_high"],
            missing="not estimable (no transition at one end)",
        ),
        "ising_ratio": f"{np.sqrt(small / large):.2f}",
        "width_null": f"{ch.width_null(small, large):.2f}",
        "width_text": ch.direction_text(
            budget_free["relative_low"],
            budget_free["relative_high"],
            ch.width_null(small, large),
            "does not sharpen (or sharpens more slowly than n^-1/4)",
            "sharpens at least like n^-1/4",
            "cannot be told apart from n^-1/4 sharpening at this size",
        ),
    }
)

# %% [markdown]
# In this run the boundary $\tau_{1/2}$ lies at {glue:text}`ch3_midpoints`.
# From the shortest to the longest length it moves by
# {glue:text}`ch3_shift_fixed` at the fixed budget and by
# {glue:text}`ch3_shift_scaled` with the budget scaled by $n \log n$ (95%
# intervals): with the budget effect removed the shift is
# {glue:text}`ch3_shift_text`. The relative width ratio is
# {glue:text}`ch3_ratio_fixed` at the fixed budget, but a fixed budget
# widens the transition at larger $n$ by itself; with the budget scaled
# by $n \log n$ it is {glue:text}`ch3_ratio` (the absolute width ratio in
# $\tau$, which also follows the boundary's move, is
# {glue:text}`ch3_ratio_abs`), beside {glue:text}`ch3_width_null` for
# $n^{-1/4}$ and {glue:text}`ch3_ising_ratio` for mean-field sharpening:
# with the budget effect removed the crossover
# {glue:text}`ch3_width_text`.

# %% [markdown]
# ## 3. Semantic drift at several temperatures (Figs. 3 and 7)
#
# The drift protocols run plain Glauber chains (no coupling). For each
# length we start `drift_chains` held-out passages at every temperature in
# one batched run (one temperature per row of the batch), record the state
# every `record_every` steps and embed all recorded states in batches with
# all-MiniLM-L6-v2 {cite}`wang2020minilm`, the embedder of the paper's
# Fig. 7.

# %%
frames, runs, frozen_at = [], {}, {}
for n in cfg.drift_lengths:
    starts, frozen_at[n] = ch.drift_starts(cond, n, cfg, seed=seed + 1)
    chains, chain_frame = ch.multi_temperature_glauber(
        cond,
        starts.tokens,
        cfg.drift_taus,
        cfg.drift_steps_at[n],
        seed=seed,
        record_every=cfg.record_every,
        progress=False,
        frozen=frozen_at[n],
    )
    distance = ch.drift_distances(cond, embedder, chains, frozen_at[n])
    runs[n] = (chains, chain_frame.assign(n=n), distance)
    frame = bt.trajectory_frame(distance, chains.steps, n=n)
    frames.append(frame.merge(chain_frame, left_on="chain", right_on="row"))
drift = pd.concat(frames, ignore_index=True).drop(columns="row")

# %% tags=["remove-input"]
run.save(drift, "drift");

# %% [markdown]
# **Protocol 1 (Fig. 3a).** The distance reached after a fixed number of
# steps $T$, against $n$ (the first `saturation_chains` chains of each
# cell, at step $T(n)$: `saturation_steps` at the shortest length, growing
# like $n \ln n$ at the quick profile). The paper runs
# $\tau = 1$ and sees the distance level off, growing only like $\log n$.
# The figure shows the mean distance with a 95% band per length and
# temperature. A distance read near the embedder's ceiling says nothing
# about growth, so the table below sets the mean at $\tau = 1$ against
# the ceiling $d_{\rm ref}(n)$: the mean distance between `ceiling_pairs`
# pairs of unrelated held-out passages of the same length, with the ratio
# (bootstrap interval over chains and pairs) and the rise of the distance
# over the run's last third (Student's t interval over chains).

# %%
read_at = ch.read_out_steps(drift.step, drift.n, cfg.saturation_steps_at)
last = drift[read_at & (drift.start < cfg.saturation_chains)]
ch.saturation_figure(last, cfg);

# %%
at_unit = last[last.temperature == cfg.saturation_tau]
trend = ch.saturation_trend(
    at_unit.n, at_unit.distance, n_boot=cfg.n_boot, seed=seed
)
ends, reference = [], []
for n, (chains, chain_frame, distance) in runs.items():
    steps_n = cfg.saturation_steps_at[n]
    keep, _ = ch.protocol_slice(
        chain_frame, chains.steps, cfg.saturation_chains, steps_n
    )
    keep &= torch.as_tensor(chain_frame.temperature == cfg.saturation_tau)
    at_end, late = ch.distance_at_ends(distance[keep], chains.steps, steps_n)
    ends.append(pd.DataFrame({"n": n, "final": at_end, "late": late}))
    if not cfg.protein:  # a protein MLM's Hamming share has no ceiling row
        d_ref = ch.ceiling_distances(
            cond, embedder, n, cfg.ceiling_pairs, seed=seed + 2
        )
        reference.append(pd.DataFrame({"n": n, "distance": d_ref}))
ends = pd.concat(ends, ignore_index=True)
reference = (
    pd.concat(reference, ignore_index=True)
    if reference
    else pd.DataFrame({"n": ends.n, "distance": 1.0})
)
ceiling = ch.ceiling_ratios(
    ends.n,
    ends.final,
    ends.late,
    reference.n,
    reference.distance,
    n_boot=cfg.n_boot,
    seed=seed,
)
ch.saturation_view(ceiling)

# %% tags=["remove-input"]
final = last.groupby(["temperature", "n"]).distance.mean()
cold = min(cfg.drift_taus)
run.glue(
    {
        "drift_unit": bt.range_text(final[cfg.saturation_tau]),
        "drift_cold": ", ".join(
            f"{d:.2f} at n = {n}" for n, d in final[cold].items()
        ),
        "cold_tau": f"{cold:g}",
        "sat_steps": ch.run_lengths_text(cfg.saturation_steps_at),
        "ceiling": bt.range_text(ceiling.ceiling),
        "sat_slope": bt.interval_text(
            trend["slope"],
            trend["slope_low"],
            trend["slope_high"],
            signed=True,
            missing="not estimable (fewer than three lengths)",
        ),
        "sat_exponent": bt.interval_text(
            trend["exponent"],
            trend["exponent_low"],
            trend["exponent_high"],
            missing="not estimable (a median distance of 0)",
        ),
    }
)

# %% [markdown]
# The mean distance after {glue:text}`ch3_sat_steps` steps at $\tau = 1$
# ranges from {glue:text}`ch3_drift_unit` across lengths, against a
# ceiling of {glue:text}`ch3_ceiling` for unrelated passages of the same
# lengths: a value there means the chain has forgotten its start as far as
# the embedder can tell, and no growth with $n$ can show beyond the
# ceiling's own. The coldest chains ($\tau =$ {glue:text}`ch3_cold_tau`)
# end at {glue:text}`ch3_drift_cold`. For reading only, at $\tau = 1$ the
# median distance changes by {glue:text}`ch3_sat_slope` per unit of
# $\log n$, and its exponent in $n$ is {glue:text}`ch3_sat_exponent`
# (95% bootstrap intervals over chains).

# %% [markdown]
# **Protocol 2 (Fig. 3b).** The hitting time
# $T_R = \min\{t : d(x_t, x_0) \ge R\}$ at $\tau$ = `hit_tau` against
# $n$, from its own run: `hit_chains` chains per length, recorded every
# `hit_record_every` step(s) up to `hit_steps`, since the shortest times
# are a few steps. The table fits the median per length by
# $C\, n \log n$, $c\, n$ and $c\, n^2$ in log space, as the paper's
# figure does (AIC and the leave-one-length-out error beside each; shown,
# not judged); chains that never reach $R$ count as infinitely slow. The
# claim is judged on the exponent of the mean time per length (above). The paper uses
# $R = 1$ with Jina Embeddings v4. With MiniLM, unrelated
# passages sit at $d \approx 0.9$-$1$, so $d \ge 1$ is reached only by a
# fluctuation around saturation, and `quick` takes $R = 0.7$, inside the
# range [0.4, 1] over which the paper found its results robust (`paper`
# keeps $R = 1$).

# %%
hits = []
for n in cfg.drift_lengths:
    starts, frozen = ch.drift_starts(
        cond, n, cfg, seed=seed + 1, count=cfg.hit_chains
    )
    chains, chain_frame = ch.multi_temperature_glauber(
        cond,
        starts.tokens,
        [cfg.hit_tau],
        cfg.hit_steps,
        seed=seed,
        record_every=cfg.hit_record_every,
        progress=False,
        frozen=frozen,
    )
    distance = ch.drift_distances(cond, embedder, chains, frozen)
    times = ch.hitting_times(distance, chains.steps, cfg.hit_radius)
    hits.append(chain_frame.assign(n=n, hitting_time=times.numpy()))
hits = pd.concat(hits, ignore_index=True)
at_tau = hits[hits.temperature == cfg.hit_tau]
scaling = ch.scaling_fits(
    at_tau.n, at_tau.hitting_time, n_boot=cfg.n_boot, seed=seed
)
ch.scaling_view(scaling)

# %% [markdown]
# :::{admonition} The code: how `scaling_fits` compares the growth laws
# :class: dropdown
# ```{literalinclude} ../chapters/phase/estimators.py
# :pyobject: scaling_fits
# ```
# :::

# %% tags=["remove-input"]
run.save(hits, "hitting_times")
fitted = scaling.assign(n=" ".join(map(str, cfg.drift_lengths)))
run.save(fitted if cfg.protein else scaling, "scaling_fits");

# %%
ch.hitting_figure(hits, scaling, cfg);

# %% tags=["remove-input"]
medians = scaling.attrs["medians"]
fitted = scaling.dropna(subset=["aic"])
exponent = scaling.attrs["exponent"]
run.glue(
    {
        "hit_medians": ", ".join(
            f"{t:.0f} at n = {n:.0f}"
            if np.isfinite(t)
            else f"not reached by half the chains at n = {n:.0f}"
            for n, t in zip(medians.n, medians.median_time)
        ),
        "best_aic": fitted.form[fitted.aic.idxmin()]
        if len(fitted)
        else "none (fewer than three lengths reached R)",
        "best_loo": fitted.form[fitted.loo_mse_log.idxmin()]
        if len(fitted)
        else "none",
        "beta": bt.interval_text(
            exponent["beta"],
            exponent["low"],
            exponent["high"],
            missing="not estimable (fewer than three lengths where "
            "every chain reached R)",
        ),
        "radius": f"{cfg.hit_radius:g}",
        "nlogn_range": f"{exponent['claimed_low']:.2f}-"
        f"{exponent['claimed_high']:.2f}"
        if np.isfinite(exponent["claimed_low"])
        else "not computed (fewer than three lengths)",
    }
)

# %% [markdown]
# In this run the median hitting time is {glue:text}`ch3_hit_medians`
# steps. The best form by AIC is *{glue:text}`ch3_best_aic`*, by
# leave-one-length-out error *{glue:text}`ch3_best_loo`*. The judged
# exponent of the mean time per length is {glue:text}`ch3_beta` (95%
# bootstrap interval over chains), against 1 for linear growth and
# {glue:text}`ch3_nlogn_range` for $n(\log n + c)$, $c \in [0, 1]$, over
# these lengths. The paper fits $C(\tau)\, n \log n$ to the time to reach
# $d = 1$ on BERT. A lower radius such as 0.7 with MiniLM may need only a
# share of the tokens replaced, which takes about $n$ steps; the $\log n$
# of a coupon collector appears only when nearly every site must be
# touched.

# %% [markdown]
# **Fig. 7.** The share of chains (the first `crossover_chains` of each
# cell) whose distance from the start reached each of the paper's
# thresholds at some recorded step up to `crossover_steps`, per
# temperature and length (95% Wilson intervals in `threshold_shares.csv`).
#
# **Where the judged share is read.** A share read after many sweeps
# heads for 1 at every temperature as soon as even cold chains leave
# their start, and a share at 1 everywhere has slope 0 whatever the
# temperature does. Colder temperatures would not help: the bundled model
# predicts 40% of held-out tokens (top-1), so even a chain at
# $\tau \to 0$ replaces most tokens of its passage within a few sweeps.
# What still depends on $\tau$ is how *soon* a chain gets there. So the
# judged share of each $(n, R)$ part is read at that part's cutoff: the
# earliest recorded step by which half its chains, all temperatures
# pooled, had reached $d \ge R$ (the whole run when fewer than half ever
# do, as at the paper's cutoff). The cutoff ignores which chain ran at
# which temperature, so it favours no direction; it is in the `cutoff`
# column of `threshold_trends.csv`. Per length and threshold, the slope
# of that share against $\tau$ says whether it rises with temperature.

# %%
traces, started = [], []
for chains, chain_frame, distance in runs.values():
    keep, records = ch.protocol_slice(
        chain_frame, chains.steps, cfg.crossover_chains, cfg.crossover_steps
    )
    traces.append(distance[keep][:, records])
    started.append(chain_frame[keep.numpy()])
    recorded = chains.steps[records]  # the same records at every length
traces, started = torch.cat(traces), pd.concat(started, ignore_index=True)
shares = ch.threshold_shares(traces, started, radii=ch.crossover_radii())
rise = ch.rise_with_temperature(
    traces, recorded, started, ch.crossover_radii(), seed=seed
)
ch.threshold_figure(shares, records=traces.shape[1]);

# %% tags=["remove-input"]
run.save(shares, "threshold_shares")
run.save(rise, "threshold_trends")
radii = ch.crossover_radii()
run.glue(
    {"rise_parts": ch.rise_text(rise)}
    | {
        f"shares_r{k}": ", ".join(
            f"{s:.2f} at tau = {t:g}"
            for t, s in shares[shares.radius == r]
            .groupby("temperature")
            .share.mean()
            .items()
        )
        for k, r in enumerate(radii)
    }
    | {f"radius_{k}": f"{r:g}" for k, r in enumerate(radii)}
)

# %% [markdown]
# Averaged over lengths, the share of chains reaching
# $d \ge$ {glue:text}`ch3_radius_0` is {glue:text}`ch3_shares_r0`; for
# $d \ge$ {glue:text}`ch3_radius_1` it is {glue:text}`ch3_shares_r1`, and
# for $d \ge$ {glue:text}`ch3_radius_2` {glue:text}`ch3_shares_r2`. Per
# length and threshold: {glue:text}`ch3_rise_parts`. The paper's Fig. 7,
# on BERT, shows the share rising with $\tau$ at every length and
# threshold; the claims table judges that part by part.

# %% [markdown]
# ## 4. Convergence diagnostics
#
# A sampling user would ask whether the chains of one $(\tau, n)$ have
# forgotten where they started. Split $\hat R$ compares the traces of
# $d(x_t, x_0)$ across chains (each started from a different passage)
# after dropping the first half; values near 1 (below about 1.01) say the
# chains agree, and the effective sample size (ESS) says how many
# independent draws the kept records are worth {cite}`vehtari2021rhat`.
# Constant traces (every chain stuck, or a distance that never moves) have
# no $\hat R$.

# %%
diagnostics = []
for n, (_chains, chain_frame, distance) in runs.items():
    for tau in cfg.drift_taus:
        traces = distance[
            torch.as_tensor(chain_frame.temperature.values == tau)
        ]
        diagnostics.append(
            dict(n=n, temperature=tau, **ch.convergence_diagnostics(traces))
        )
diagnostics = pd.DataFrame(diagnostics)
ch.diagnostics_view(diagnostics, "rhat")

# %%
ch.diagnostics_view(diagnostics, "ess_bulk")

# %% tags=["remove-input"]
run.save(diagnostics, "diagnostics")
defined = diagnostics.rhat.notna()
run.glue(
    {
        "rhat": bt.range_text(
            diagnostics.rhat, missing="undefined in every cell"
        ),
        "ess": bt.range_text(
            diagnostics.ess_bulk, digits=0, missing="undefined"
        ),
        "ess_of": f"{diagnostics.chains.iloc[0]} chains of "
        f"{diagnostics.draws.iloc[0]}",
        "converged": f"{(diagnostics.rhat[defined] < 1.01).mean():.0%} of "
        f"the {defined.sum()} cells with a defined value"
        if defined.any()
        else "none of the cells (no defined value)",
    }
)

# %% [markdown]
# In this run split $\hat R$ ranges from {glue:text}`ch3_rhat` and the bulk
# ESS from {glue:text}`ch3_ess` draws per cell ({glue:text}`ch3_ess_of`
# kept records); {glue:text}`ch3_converged` pass the usual rule
# $\hat R < 1.01$. A cell that fails it has not run long enough for its
# chains to agree on the distribution of the distance, even where the
# distance itself has saturated: a sampling user should budget more steps
# there, of the order of the paper's runs or beyond.

# %% [markdown]
# ## 5. Temperature regimes (appendix C.3)
#
# One start, five temperatures from $\tau = 0.01$ to $\tau = 100$, and a
# few recorded states of each chain. On a protein model the start is a
# whole germline gene whose free sites are the grid's largest $n$, spread
# over its FR1 window, and the table shows the gene up to one residue
# after the last free site.

# %%
regime_taus = [0.01, 0.1, 1.0, 10.0, 100.0]
start, frozen = ch.regime_start(cond, cfg, seed=seed)
regimes, _ = ch.multi_temperature_glauber(
    cond,
    start,
    regime_taus,
    cfg.regime_steps,
    seed=seed,
    record_every=max(1, cfg.regime_steps // 4),
    progress=False,
    frozen=frozen,
)
labels = [f"tau = {t:g}" for t in regime_taus]
excerpts = ch.chain_excerpts(cond, regimes, labels, count=3, frozen=frozen)
ch.regimes_view(excerpts)

# %% tags=["remove-input"]
shown = excerpts.assign(n=cfg.large) if cfg.protein else excerpts
run.save(shown, "regimes", index=True);

# %% [markdown]
# The paper's examples show three regimes: at $\tau = 0.01$ and 0.1 the
# chain rewrites a few words into the model's favourite phrasing and then
# barely moves, at $\tau = 1$ the text drifts into loosely fluent
# fragments, and at $\tau = 10$ and 100 it is word salad drawn from the
# whole vocabulary. The table shows which of these the model here
# produces.

# %% [markdown]
# ## 6. Beyond the paper: influence on the states the chain visits
#
# Section 7 of the paper conjectures that the chain mixes faster than
# Theorem 5 predicts because it soon leaves coherent text for incoherent
# states, where one token sways the others far less than the worst case
# $\alpha(\tau)$. We test this with chapter 2's estimator: at each drift
# temperature, the influence sum $\alpha = \max_i \sum_j c_{ij}(\tau)$ on
# the final states of `alpha_contexts` chains of length `alpha_length`,
# run for `drift_steps` steps at every drift temperature (states the
# chain visits at that $\tau$), against the same estimate on the
# coherent passages they started from: the same number of contexts, the
# same number of candidate tokens per site, and context $c$ on one side
# paired with the chain that started from it on the other. Both are lower
# bounds on the true supremum (only the top-`top_k` alternative tokens are
# tried per site).

# %%
starts, frozen = ch.drift_starts(
    cond, cfg.alpha_length, cfg, seed=seed + 1, count=cfg.alpha_contexts
)
taus = cfg.drift_taus
chains, chain_frame = ch.multi_temperature_glauber(
    cond,
    starts.tokens,
    taus,
    cfg.drift_steps,
    seed=seed,
    record_every=cfg.drift_steps,
    progress=False,
    frozen=frozen,
)
at = {t: torch.as_tensor(chain_frame.temperature.values == t) for t in taus}
seeds = starts.tokens
visited = {t: chains.final[at[t]] for t in taus}
frozen = frozen if cfg.protein else None
alpha = ch.context_alpha(
    cond,
    seeds,
    visited,
    cfg.top_k,
    frozen=frozen,
    seed_temperatures=cfg.alpha_grid,
)
ch.alpha_figure(alpha, cfg);

# %% tags=["remove-input"]
run.save(alpha, "context_alpha")
run.glue(
    {
        "alpha_means": ch.alpha_means_text(alpha),
        "criterion_tau": f"tau = {ch.criterion_threshold(alpha):g}"
        if np.isfinite(ch.criterion_threshold(alpha))
        else "nowhere on the grid",
        "alpha_sizes": f"top-{cfg.top_k} alternatives per site on "
        f"{cfg.alpha_contexts} contexts of length "
        f"{cfg.alpha_length}",
    }
)

# %% [markdown]
# The mean $\hat\alpha$ per temperature in this run:
# {glue:text}`ch3_alpha_means`. The conjecture needs the visited states to
# be less coupled than coherent text by the time coupling becomes fast;
# the claims table below tests exactly that at the first drift temperature
# past the coupling boundary, on the paired difference. Whether
# $\hat\alpha$ also falls below Theorem 5's threshold of 1 there is shown
# in the figure but not judged: the lower bound shrinks with fewer
# candidates, so "below 1" would be easier to reach with a smaller search.
# (These are lower bounds from the {glue:text}`ch3_alpha_sizes`.)
#
# The seed passages are also scored at every temperature of `alpha_grid`.
# This gives the paper's point on tightness (section 5.2, appendix A.1) on
# this model: where $\hat\alpha$, a lower bound on $\alpha(\tau)$, still
# reaches 1, Theorem 5 certifies nothing, so the temperature up to which
# it does ({glue:text}`ch3_criterion_tau`) is a lower bound on the
# criterion's threshold $\tau_\alpha$. Its ratio to the coupling boundary
# $\tau_{1/2}$ (taken at the upper end of its interval) is a lower bound on
# how loose the criterion is: `theorem5_bound_loose` is reproduced when
# that lower bound exceeds 1, and otherwise inconclusive, never differs,
# since a lower bound cannot show that the criterion is tight.

# %% [markdown]
# ## 7. Claims: the paper's numbers beside ours
#
# The rules are the ones stated before the run, at the top of the chapter.
# A claim whose number cannot be estimated from this run (no transition
# inside the grid, too few lengths that reach $R$, zero events) is
# **inconclusive**, with the reason in words.

# %%
claims = ch.claim_rows(
    cfg,
    run.model,
    fits=fits,
    scaled=scaled,
    fixed=fixed,
    budget_free=budget_free,
    hits=hits,
    scaling=scaling,
    trend=trend,
    ceiling=ceiling,
    saturation_steps=cfg.saturation_steps_at,
    rise=rise,
    alpha=alpha,
)
run.claims(claims)

# %% tags=["remove-input"]
sizes = (
    f"{cfg.pairs} + {cfg.stage_pairs} pairs per length (two stages), "
    f"a {cfg.budget}-step budget, "
    f"{cfg.drift_chains} chains per drift cell and lengths up to "
    f"{max(cfg.large, *cfg.drift_lengths)} (profile `{cfg.profile}`)"
)
setups = {claim["claim"]: claim["setup"] for claim in claims}
run.glue(
    {
        "n_near": f"{cfg.near}",
        "sizes": sizes,
        "boundary_setup": setups.get("coupling_boundary_tau") or "not recorded",
    }
    | {claim["claim"]: claim["ours_text"] for claim in claims}
)

# %% [markdown]
# ## What this shows
#
# Every number here is this run's; the verdicts follow the rules stated at
# the top.
#
# - The boundary: at the length nearest the paper's seed length (here
#   {glue:text}`ch3_n_near`), half the pairs meet within the budget at
#   $\tau_{1/2} =$ {glue:text}`ch3_coupling_boundary_tau`, beside the
#   paper's {glue:text}`paper_coupling_boundary_tau` for RoBERTa
#   (*{glue:text}`ch3_coupling_boundary_tau_verdict`*; setup against the
#   paper's: {glue:text}`ch3_boundary_setup`).
# - Its shift from $n =$ {glue:text}`ch3_n_small` to
#   {glue:text}`ch3_n_large`, with the budget scaled by $n \log n$, is
#   {glue:text}`ch3_boundary_shift_with_n`; the paper says it moves to
#   higher $\tau$ (verdict:
#   *{glue:text}`ch3_boundary_shift_with_n_verdict`*). At the fixed budget
#   the shift is {glue:text}`ch3_shift_fixed`.
# - The relative width ratio of the crossover is
#   {glue:text}`ch3_transition_width` against the $n^{-1/4}$ null
#   {glue:text}`ch3_width_null` (verdict on "does not sharpen", judged
#   with the budget scaled by $n \log n$:
#   *{glue:text}`ch3_transition_width_verdict`*).
# - Fig. 3a: {glue:text}`ch3_distance_saturates` (verdict on saturation:
#   *{glue:text}`ch3_distance_saturates_verdict`*).
# - Fig. 3b: $C$ of $C\, n \log n$ is {glue:text}`ch3_nlogn_fit`
#   (verdict: *{glue:text}`ch3_nlogn_fit_verdict`*), with MiniLM distances
#   and $R =$ {glue:text}`ch3_radius`. Split $\hat R$ spans
#   {glue:text}`ch3_rhat`.
# - Fig. 7: {glue:text}`ch3_crossover_fractions` (verdict on "rises with
#   $\tau$": *{glue:text}`ch3_crossover_fractions_verdict`*).
# - Beyond the paper: $\hat\alpha$ on seed passages minus visited states
#   is {glue:text}`ch3_context_averaged_alpha` (verdict on the section 7
#   conjecture: *{glue:text}`ch3_context_averaged_alpha_verdict`*).
# - Theorem 5's looseness on this model: $\tau_\alpha / \tau_{1/2}$ is
#   {glue:text}`ch3_theorem5_bound_loose` (verdict:
#   *{glue:text}`ch3_theorem5_bound_loose_verdict`*).
#
# This run rests on {glue:text}`ch3_sizes`; the `paper` profile reruns
# everything at the paper's sizes, lengths up to 64, on a GPU.
