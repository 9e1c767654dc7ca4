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
# # Appendix: the bundled masked language model
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (this book, not the paper): the bundled model is a weak but working masked LM, far better than its un-fine-tuned baseline on held-out BBC text and far weaker than BERT-base.
# - **Look at**: the held-out metrics table, the fill-mask table and the trajectory excerpt at temperature 1.
# - **Rerun**: the launch button at the top of this page opens it in Colab, or `papermill book/bundled_model.ipynb out.ipynb -p profile paper -p model bert-base-uncased`
# ```
#
# The paper runs its chains on `bert-base-uncased`, `roberta-base` and `ModernBERT-base`. None of
# them can be downloaded where this book is built (no package on PyPI ships an English masked LM
# with its MLM head), so the repository carries its own small one, `models/minilm-l4-bbc-mlm`:
# the first four layers of the all-MiniLM-L6-v2 sentence encoder (Apache-2.0) with an MLM head tied
# to the word embeddings, fine-tuned with the standard masked-LM objective (15% of tokens; 80% masked,
# 10% random, 10% kept) on the training split of BBC News. Its model card
# (`models/minilm-l4-bbc-mlm/README.md`) gives the full recipe; `models/train.py` rebuilds it.
#
# It is much weaker than BERT-base, and this page says how much. It exists to study Glauber
# dynamics, not to write text for people.
#
# Two more depths of the same recipe, `minilm-l2-bbc-mlm` (2 layers) and `minilm-l6-bbc-mlm` (all
# 6), trained with a shortened schedule, serve the [across-models page](across_models), which
# tables all three; their model cards give their own evaluations.

# %% tags=["remove-cell"]
# Colab (the launch button) only: clone the companion, install it (tools/colab_setup.sh).
import sys, subprocess; _ = "google.colab" in sys.modules and not subprocess.call("git clone -q --depth 1 https://github.com/glauber-mlm/glauber-mlm-companion companion && sh companion/tools/colab_setup.sh " + sys.executable, shell=True) and sys.path.insert(0, "companion")  # noqa: E401, E702, I001  # fmt: skip

# %% tags=["parameters"]
import os

profile: str = os.environ.get("GLAUBER_PROFILE", "quick")  # or smoke, paper
model: str = ""  # "" is the bundled model
temperature: float = 1.0
seq_len: int = 0  # 0: the profile's value
steps: int = 0  # 0: the profile's value
seed: int = 0

# %%
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

import book_tools as bt
import glauber_core as glauber

run = bt.ChapterRun("bundled_model", profile, model)
cfg = bt.profile_settings(
    profile,
    {
        "smoke": dict(seq_len=16, steps=30, record_every=10),
        "quick": dict(seq_len=32, steps=800, record_every=100),
        "paper": dict(seq_len=32, steps=10_000, record_every=1_000),
    },
    seq_len=seq_len,
    steps=steps,
)
MODEL_RESULTS = glauber.REPO_ROOT / "results" / "model"

# %% [markdown]
# ## Held-out quality
#
# Both figures are measured on BBC articles the model never saw (the fixed held-out split, about 10%
# of articles): top-1 accuracy at masked positions under the training masking scheme, and
# pseudo-perplexity, $\exp(-\frac1N \sum_i \log p(x_i \mid x_{-i}))$ with every token masked in turn
# (the pseudo-log-likelihood scoring the paper's introduction discusses). The baseline is the same
# four-layer encoder left as it was, with only a freshly trained MLM head.

# %%
metrics = pd.read_csv(MODEL_RESULTS / "metrics.csv")
bt.reading_table(
    metrics.pivot_table(
        index="model", columns="metric", values="value"
    ).reset_index()
)

# %%
log = pd.read_csv(MODEL_RESULTS / "train_log.csv")
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
sns.lineplot(data=log, x="step", y="loss", hue="split", ax=axes[0])
sns.lineplot(data=log, x="step", y="top1", hue="split", ax=axes[1])
axes[0].set(title="MLM loss during fine-tuning", ylabel="cross-entropy (nats)")
axes[1].set(title="masked-token top-1 accuracy", ylabel="top-1")
plt.show()

# %% [markdown]
# ## Fill-mask sanity table
#
# Ten held-out sentences (two per topic), one content word masked, and the fine-tuned model's five
# most likely fillers with their probabilities.

# %%
fills = pd.read_csv(MODEL_RESULTS / "fill_mask.csv")
bt.fill_mask_table(fills[fills.model == run.model])

# %% [markdown]
# ## A Glauber trajectory at temperature 1
#
# One chain from a held-out passage. On BERT the paper finds drifting, news-like text at
# $\tau = 1$ (Appendix C); a model this small should at least keep producing English word pieces
# for hundreds of steps rather than collapse into fragments. The last column is the share of the
# decoded words that occur in the BBC training text.

# %%
cond = run.cond
passage = glauber.seed_passages(cond, cfg.seq_len, 1, seed=seed)
chain = glauber.glauber(
    cond,
    passage.tokens,
    cfg.steps,
    temperature,
    seed=seed,
    record_every=cfg.record_every,
)
excerpt = pd.DataFrame(
    {"step": chain.steps.numpy(), "text": cond.decode_batch(chain.tokens[0])}
)
excerpt = excerpt.assign(known_words=bt.known_word_share(excerpt.text))
bt.reading_table(excerpt, {"known_words": "{:.0%}"})
