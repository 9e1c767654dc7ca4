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
# # Appendix: performance
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (this book, not the paper): a batched Glauber step of the core costs about one bare forward pass of the batch, and many chains per forward run several times faster than the one-chain loop of common Gibbs-from-BERT scripts.
# - **Look at**: the table (chain-steps per second and the two ratios) and the plot of rate against batch size.
# - **Rerun**: the launch button at the top of this page opens it in Colab, or `python benchmarks/glauber_speed.py` then `papermill book/performance.ipynb out.ipynb`
# ```
#
# Every chapter runs many chains at once: one step of $B$ chains is one forward pass of the
# encoder over $B$ sequences, each with its own masked site, the LM head applied only at the
# masked rows, then one exact draw per chain. `benchmarks/glauber_speed.py` measures that step in
# chain-steps per second against two baselines, timed in the same process so that the ratios are
# comparable even when the machine's speed drifts:
#
# - the **naive loop**: one chain, full logits at every position, one forward per step, as
#   common Gibbs-from-BERT scripts do {cite}`wang2019bertmouth`;
# - the **bare forward**: the encoder plus the LM head at the masked rows for the same batch, with
#   no sampling or bookkeeping. A Glauber step cannot be cheaper than this, so
#   `step_over_forward` near 1 means the sampler itself costs almost nothing;
# - the **unblocked** run: the same chains with the whole batch in one model call; `block cost`
#   (unblocked rate over blocked rate) is what the fixed-shape calls below cost.
#
# The benchmark writes `results/benchmarks/glauber_speed.csv` (committed with the repository);
# this page reads it as it is. Absolute rates depend on the machine and on what else it was
# running; the `note` column says under which conditions the table was measured.
#
# ## A chain does not depend on its batch
#
# A chain's seed fixes its whole trajectory token for token, whatever else is in the batch (on
# one machine and thread count). The kernels a library picks by batch shape move a row's scores
# in their last bits with the batch around it, and over hundreds of steps some draw near a
# boundary then flips; so the core only ever calls the model on fixed shapes. A masked LM scores
# rows in blocks of `cond.block_size` rows (16 on CPU and 256 on CUDA by default; the last block
# padded by repeating its last row), and large batches in larger calls of
# `cond.larger_blocks` rows (64 on CPU; 1,024 and 4,096 on CUDA), each used at a sequence length
# only once `cond.checked_blocks` has scored random rows of that length in it and found them bit
# for bit equal to the same rows in blocks (once per length, size, thread count and autocast);
# where the kernels differ, the batch stays in blocks. So a row's scores do not move with the
# batch around it, and a chain is the same alone or inside any batch
# (`tests/test_batch_invariance.py`).
#
# `block cost` in the table below is what that costs: about 1.0 from 16 chains up on 2 CPU cores
# (0.995 at 64; below 1 at 256, where calls of 64 beat one call of 256), and 4.6 and 3.3 at 1
# and 4 chains, which are padded to a whole block of 16 (the table's first rows). At bert-base
# shape and 64 chains it is 0.99 (benchmarks/README.md).

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %%
import matplotlib.pyplot as plt

import book_tools as bt

bt.set_book_style()
bench = bt.read_benchmark(
    bt.REPO_ROOT / "results" / "benchmarks" / "glauber_speed.csv"
)
first = bench.iloc[0]
print(
    f"model {first.model} on {first['device']}, n = {first.seq_len}, "
    f"{first.torch_threads} torch thread(s), torch {first.torch}"
)
print(f"measured {first.measured}; note: {first.note or '(none)'}")

# %%
bt.benchmark_table(bench)

# %% [markdown]
# Below, the rate against the batch size: the gap between the two upper curves is what sampling and
# bookkeeping cost on top of the model, and their height above the dotted line is what batching
# buys over the one-chain loop. The rate stops growing once one forward pass keeps the hardware
# busy.

# %%
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(bench.batch, bench.glauber_rate, "o-", label="Glauber step")
ax.plot(bench.batch, bench.bare_rate, "s--", label="bare forward + head")
ax.axhline(
    first.naive_rate, color="grey", linestyle=":", label="naive loop (1 chain)"
)
ax.set_xscale("log", base=2)
ax.set_xticks(bench.batch, labels=[str(b) for b in bench.batch])
ax.set_ylim(bottom=0)
ax.set(
    xlabel="chains per batch $B$",
    ylabel="chain-steps per second",
    title=f"Glauber throughput, n = {first.seq_len}, {first['device']}",
)
ax.legend()
plt.show()

# %% [markdown]
# ## bert-base's shape on this CPU
#
# The paper's models are bert-base-sized: 12 layers of hidden size 768, about ten times the
# bundled model's compute per token. `python benchmarks/glauber_speed.py --model bert-base-shape
# --batches 64 --csv results/benchmarks/glauber_speed_bert_base_shape.csv` builds a masked LM of
# that shape with random weights (the bundled word-piece vocabulary of 30,522 ids, no download)
# and times it at $n = 24$. The speed of a forward pass does not depend on the weights, so this
# is what a step of bert-base costs here; the paper's sizes are GPU work
# (`make gpu-check`, benchmarks/README.md).

# %%
base = bt.read_benchmark(
    bt.REPO_ROOT
    / "results"
    / "benchmarks"
    / "glauber_speed_bert_base_shape.csv"
)
row = base.iloc[0]
print(
    f"{row.model} on {row['device']}, n = {row.seq_len}, "
    f"{row.torch_threads} torch thread(s); measured {row.measured}"
)
bt.benchmark_table(base)

# %% [markdown]
# ## A pretrained protein MLM: AntiBERTy
#
# The same benchmark on AntiBERTy (8 layers, hidden size 512, 26M parameters; the book's page
# "A pretrained MLM: AntiBERTy"), on germline V genes cut to $n = 24$ residues:
# `python benchmarks/glauber_speed.py --model antiberty --batches 1 4 16 64 --steps 5 --csv
# results/benchmarks/glauber_speed_antiberty.csv`. Its 20-letter vocabulary makes the head cheap,
# so nearly all of a step is the encoder forward; the column "step / bare forward" says how close
# the Glauber step comes to that floor. A cheap forward makes the fixed-shape blocks dear for a lone
# chain: it is scored inside a block of 16 rows, which costs about ten times one row's call here.

# %%
protein = bt.read_benchmark(
    bt.REPO_ROOT / "results" / "benchmarks" / "glauber_speed_antiberty.csv"
)
row = protein.iloc[0]
print(
    f"model {row.model} on {row['device']}, n = {row.seq_len}, "
    f"{row.torch_threads} torch thread(s); measured {row.measured}; "
    f"note: {row.note or '(none)'}"
)
bt.benchmark_table(protein)

# %% [markdown]
# ## Time per notebook in this build
#
# How long each page took to execute in the build that made this page, read from the build's
# own execution records (myst-nb). A page served from the execution cache shows the time of the
# run that filled the cache. The `quick` book has a budget of 30 minutes on 2 CPU cores.

# %% tags=["remove-input"]
import os

from IPython.display import Markdown

Markdown(
    f"This build: profile **{os.environ.get('GLAUBER_PROFILE') or 'quick'}**, "
    f"{os.cpu_count()} CPU core(s)."
)

# %% [markdown]
# ```{nb-exec-table}
# ```
