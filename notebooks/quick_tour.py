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
# # Quick tour: one chain, three temperatures
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (paper, section 3.2 and appendix C.3): Glauber chains on a masked LM drift further from their start the hotter they run, and on a compatible (Ising) model the same sampler reaches the known joint law.
# - **Look at**: the drift figure and the table of final distances; the Ising bar chart for the exact check.
# - **Rerun**: the launch button at the top of this page opens it in Colab, or `papermill notebooks/quick_tour.ipynb out.ipynb -p profile paper -p model bert-base-uncased`
# ```
#
# This chapter runs the paper's chain (section 3.2) end to end: take held-out BBC News paragraphs,
# cut them to $n$ tokens, and let Glauber dynamics resample one token at a time at three
# temperatures. We watch how far each chain drifts from its start in sentence-embedding space,
# $d(x_t, x_0) = 1 - \cos(\phi(x_t), \phi(x_0))$ (the paper's eq. B.1), and read the text.
# At the end, the same sampler runs on a six-site Ising chain whose stationary law we know exactly.

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %% tags=["parameters"]
import os

profile: str = os.environ.get("GLAUBER_PROFILE", "quick")  # or smoke, paper
model: str = ""  # a Hugging Face masked LM name or folder; "": bundled
temperatures: list = []  # []: the profile's (0.5, 1, 2)
seq_len: int = 0  # 0: the profile's value
n_chains: int = 0  # chains per temperature; 0: the profile's value
steps: int = 0  # 0: the profile's value
seed: int = 0

# %%
import pandas as pd

import book_tools as bt
import glauber_core as glauber
from chapters import tour as ch

run = bt.ChapterRun("quick_tour", profile, model)
cfg = ch.settings(
    profile,
    seq_len=seq_len,
    n_chains=n_chains,
    steps=steps,
    temperatures=temperatures,
)
cond, embedder = run.cond, glauber.load_embedder()
bt.settings_view(cfg)

# %% [markdown]
# ## Seed passages
#
# The paper starts its chains from MS MARCO passages; we start from BBC News paragraphs taken from
# articles the bundled model never saw in training (`split="heldout"`), each cut to its first $n$ tokens.

# %%
passages = glauber.seed_passages(cond, cfg.seq_len, cfg.n_chains, seed=seed)
bt.reading_table(
    pd.DataFrame({"topic": passages.topics, "x_0": passages.texts}).head(4)
)

# %% [markdown]
# ## Running the chains
#
# All chains of one temperature share a batched forward pass: each chain picks its own site, the
# model sees the sequence with that site masked, and the LM head runs only at the masked position.

# %%
trajectories = {
    tau: glauber.glauber(
        cond,
        passages.tokens,
        cfg.steps,
        tau,
        seed=seed,
        record_every=cfg.record_every,
    )
    for tau in cfg.temperatures
}
distance = pd.concat(
    bt.trajectory_frame(
        glauber.trajectory_distances(cond, embedder, t),
        t.steps,
        temperature=tau,
    )
    for tau, t in trajectories.items()
)

# %% tags=["remove-input"]
distance = run.save(distance, "distance")

# %% [markdown]
# ## Drift from the start
#
# The paper reports that at low temperature ($\tau \le 0.5$) chains stay close to where they began
# for thousands of steps, and that above $\tau \approx 2$ the text dissolves into word salad
# (Appendix C.3). The curves below show the mean distance per temperature, with a 95% band over chains.

# %%
ch.drift_figure(distance, cfg);

# %% [markdown]
# The distance each temperature has reached by the last step (mean and spread over chains). The
# ordering by temperature is the paper's; how close the coldest chains stay to their start depends on
# the model. On the small bundled model even $\tau = 0.5$ moves far within a few hundred steps,
# much less sticky than the paper's BERT chains at that temperature (Appendix C.3): we show that as it is.

# %%
bt.reading_table(ch.final_distance_frame(distance))

# %% [markdown]
# What the text looks like along the first chain at each temperature:

# %%
bt.text_snapshots(
    cond, {f"tau = {tau:g}": t for tau, t in trajectories.items()}
)

# %% [markdown]
# ## A check with a known answer
#
# For a Potts/Ising model with a symmetric coupling matrix $J$, the conditionals
# $s_i(a; x_{-i}) = h_i(a) + \sum_{j \ne i} J_{ij} \mathbf 1\{x_j = a\}$ are compatible with the Gibbs
# joint $\pi_\tau(x) \propto \exp(E(x)/\tau)$, so Glauber dynamics must converge to it. On six
# sites we can enumerate all 64 states and compare the empirical law of many chains with $\pi_\tau$.

# %%
check = ch.ising_check(cfg.ising_chains, seed=seed)
tv = 0.5 * (check.empirical - check.exact).abs().sum()
noise = bt.sampling_noise_tv(check.exact, cfg.ising_chains)
print(
    f"TV(empirical, exact) = {tv:.4f}; from sampling noise alone expect "
    f"about {noise:.4f} ({cfg.ising_chains} chains)"
)

# %% [markdown]
# :::{admonition} The code: how `ising_check` builds the chain and its exact law
# :class: dropdown
# ```{literalinclude} ../chapters/tour.py
# :pyobject: ising_check
# ```
# :::

# %% tags=["remove-input"]
check = run.save(check, "ising_check")

# %%
ch.ising_figure(check);
