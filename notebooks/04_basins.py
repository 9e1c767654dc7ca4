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
# # Semantic basins: where long chains go
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (paper, section 6.2): long chains at $\tau = 1$ forget the topic
#   they started from and keep re-entering recognisable semantic regions;
#   for BERT, politics is one such recurrent basin (46 of 50 chains pass the
#   politics baseline at least once, with peaks up to 0.979).
# - **Look at**: the Table 3 counterpart, the leading-label shares per seed
#   topic, the PCA trajectories (Figs. 1 and 4) and the prefix table (C.4).
# - **Rerun**: [open this notebook in Colab](https://colab.research.google.com/github/glauber-mlm/glauber-mlm-companion/blob/main/notebooks/04_basins.ipynb), or `papermill notebooks/04_basins.ipynb out.ipynb -p profile paper -p model bert-base-uncased`
# ```
#
# The paper {cite}`sana2026mixing` runs 50 chains of 10,000 Glauber steps on
# BERT {cite}`devlin2019bert`, five seed topics with ten seeds each, and
# scores every 200th state with a zero-shot topic classifier. Here we do the
# same with the bundled BBC-trained model, a topic scorer that works offline,
# and BBC News {cite}`greene2006bbc` paragraphs as seeds. We first check that
# the scorer reads topics correctly, then ask which basin *our* model returns
# to, whichever it is.

# %% tags=["remove-cell"]
# Colab only: fetch the companion (core and bundled model) and install it.
import sys

if "google.colab" in sys.modules:
    import subprocess

    REPOSITORY = "https://github.com/glauber-mlm/glauber-mlm-companion"
    subprocess.run(["git", "clone", "-q", "--depth", "1", REPOSITORY,
                    "companion"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e",
                    "companion"], check=True)
    sys.path.insert(0, "companion")

# %% tags=["parameters"]
profile: str = "quick"  # smoke (CI) | quick (book, 2 CPUs) | paper (GPU)
model: str = ""  # a Hugging Face masked LM name or folder; "" is bundled
scorer: str = ""  # "": MiniLM embedding scorer; or an NLI model name
temperature: float = 1.0
seq_len: int = 0  # tokens per chain; 0: the profile's value
n_seeds: int = 0  # chains per seed topic; 0: the profile's value
steps: int = 0  # Glauber steps per chain; 0: the profile's value
record_every: int = 0  # topic scores every m steps; 0: the profile's
prefixes: list = ["tony blair said that", "wayne rooney said that",
                  "elvis presley said that", "the little kid said that"]
seed: int = 0

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

import glauber_core as gc
import book_tools as bt
from chapters import basins as ch

PROFILES = {
    "smoke": dict(seq_len=20, n_seeds=1, steps=30, record_every=10,
                  pca_every=5, n_check=5, prefix_chains=1,
                  prefix_steps=10),
    "quick": dict(seq_len=20, n_seeds=4, steps=1500, record_every=50,
                  pca_every=10, n_check=60, prefix_chains=4,
                  prefix_steps=500),
    "paper": dict(seq_len=20, n_seeds=10, steps=10_000, record_every=200,
                  pca_every=10, n_check=200, prefix_chains=10,
                  prefix_steps=3_500),
}
cfg = bt.profile_settings(profile, PROFILES, seq_len=seq_len,
                          n_seeds=n_seeds, steps=steps,
                          record_every=record_every)
bt.set_book_style()
cond = gc.load_mlm(model or None)
embedder = gc.load_embedder()
model_name = Path(cond.name_or_path).name if not model else model
out = bt.results_dir("04_basins")
cfg

# %% [markdown]
# | profile | chains | steps | scores every | scorer check | prefix runs |
# |---|---|---|---|---|---|
# | smoke | 5 topics x 1 | 30 | 10 | 5 per topic | 5 x 1 chain, 10 steps |
# | quick | 5 topics x 4 | 1,500 | 50 | 60 per topic | 5 x 4 chains, 500 steps |
# | paper | 5 topics x 10 | 10,000 | 200 | 200 per topic | 5 x 10, 3,500 steps |
#
# All profiles use $n = 20$ tokens (the paper's seed length, B.2) and
# $\tau = 1$. The paper does not give its prefix runs' length; we use 3,500
# steps there, the length of its Fig. 4.
#
# ## The topic scorer
#
# The paper scores states with the `facebook/bart-large-mnli` zero-shot
# pipeline. Its appendix B.1 lists eleven candidate labels, while its
# baseline of $1/9 \approx 0.111$ implies nine. We keep nine: the eleven less
# *science* and *art*, the two that overlap most with another label
# (*technology* and *pop culture*). The baseline is $1/L$ for $L$ labels.
#
# No NLI model is available offline, so the default scorer is zero-shot by
# sentence embeddings: embed the text and a one-line description of each
# label with all-MiniLM-L6-v2 {cite}`reimers2019sbert,wang2020minilm`, and
# take a softmax of the cosine similarities times a scale $s$,
# $p(\ell \mid x) \propto \exp(s \cos(\phi(x), \phi(d_\ell)))$.
# The scale was fitted once, by maximum likelihood on BBC *training*
# paragraphs cut to 20 tokens (each BBC topic mapped to its label), never
# on held-out text. Passing `scorer="facebook/bart-large-mnli"` runs the
# paper's classifier instead through the same call (online only).

# %%
labels = list(ch.TOPIC_LABELS)
baseline = 1 / len(labels)
score_with = dict(model=scorer or None)
bbc_topic = {label: topic for topic, label in ch.BBC_TOPIC_LABELS.items()}
pd.DataFrame({"description": ch.TOPIC_LABELS.values(),
              "BBC topic": [bbc_topic.get(k, "") for k in labels]},
             index=pd.Index(labels, name="label"))

# %% [markdown]
# Refitting the scale on a fresh sample of training paragraphs shows how
# stable the stored value is (here `n_check` paragraphs per topic; the
# stored fit used 200):

# %%
refit = ch.calibrate_topic_scale(cond, cfg.n_check, cfg.seq_len, seed=seed + 1,
                                 embedder=embedder)
print(f"stored scale {ch.TOPIC_SCALE:.2f}; refitted on "
      f"{5 * cfg.n_check} training snippets: {refit:.2f}")

# %% [markdown]
# ## Does the scorer read BBC topics?
#
# Before trusting it on chains, we score held-out BBC paragraphs whose topic
# we know: once cut to the chains' 20 tokens (what the chains look like) and
# once whole.

# %%
rng = np.random.default_rng(seed)
rows = []
for topic, label in ch.BBC_TOPIC_LABELS.items():
    cut = gc.seed_passages(cond, cfg.seq_len, cfg.n_check, seed=seed,
                           topic=topic)
    pool = [p for _, p in gc.bbc_paragraphs("heldout", topic)]
    whole = rng.choice(pool, cfg.n_check, replace=False).tolist()
    rows += [dict(length=f"first {cfg.seq_len} tokens", topic=topic,
                  label=label, text=t) for t in cut.texts]
    rows += [dict(length="whole paragraph", topic=topic, label=label,
                  text=t) for t in whole]
check = pd.DataFrame(rows)
check_scores = ch.topic_scores(check.text.tolist(), labels, **score_with)
check = check.join(pd.DataFrame(check_scores.numpy(), columns=labels))
check["predicted"] = check[labels].idxmax(axis=1)
check.drop(columns="text").to_csv(out / "validation.csv", index=False)
accuracy = (check.assign(correct=check.predicted == check.label)
            .groupby("length").correct.agg(["count", "mean"])
            .rename(columns={"count": "paragraphs", "mean": "accuracy"}))
cut_name = f"first {cfg.seq_len} tokens"
bt.glue("ch4_acc_cut", f"{accuracy.accuracy[cut_name]:.0%}")
bt.glue("ch4_acc_whole", f"{accuracy.accuracy['whole paragraph']:.0%}")
accuracy.round(3)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
for ax, (length, part) in zip(axes, check.groupby("length")):
    table = ch.confusion_table(part.label, torch.tensor(
        part[labels].to_numpy()), labels)
    table = table.loc[list(ch.BBC_TOPIC_LABELS.values())]
    sns.heatmap(table, annot=True, fmt="d", cmap="Blues", cbar=False, ax=ax)
    ax.set(title=f"held-out BBC, {length}", xlabel="predicted label",
           ylabel="true label (BBC topic)")
plt.tight_layout()
plt.show()

snips = check[check.length == cut_name]
wrong = snips[snips.predicted != snips.label]
others_wrong = wrong[wrong.label != "politics"]
to_politics = (others_wrong.predicted == "politics").mean()
politics_misses = wrong[wrong.label == "politics"].predicted.value_counts()
bt.glue("ch4_errors_to_politics", "none (it made none)"
        if others_wrong.empty else f"{to_politics:.0%}")
bt.glue("ch4_politics_misread_as", ", ".join(
    f"{k} ({v})" for k, v in politics_misses.head(3).items()) or "none")

# %% [markdown]
# The scorer names the right label for {glue:text}`ch4_acc_cut` of the
# 20-token snippets and {glue:text}`ch4_acc_whole` of whole paragraphs;
# chance is $1/9$ over nine labels (or $1/5$ if one knew the answer was a BBC
# topic). Does it lean towards politics? Of its mistakes on non-politics
# snippets, {glue:text}`ch4_errors_to_politics` go to politics; errors
# spread evenly over the eight wrong labels would send $1/8 \approx 13\%$
# there, and a share well above that would make a rising politics score
# along a chain partly the scorer's doing. Its misses on BBC politics
# snippets went to {glue:text}`ch4_politics_misread_as`: the section covers
# policy on hospitals, schools and the environment, so some such readings
# are fair.
#
# ## Long chains from each topic
#
# Every seed topic gets `n_seeds` held-out passages; all chains of all
# topics run as one batch. We record states every `pca_every` steps for
# the trajectory plots and score every `record_every` steps.

# %%
seeds = [gc.seed_passages(cond, cfg.seq_len, cfg.n_seeds, seed=seed,
                          topic=t) for t in ch.BBC_TOPIC_LABELS]
x0 = torch.cat([p.tokens for p in seeds])
seed_topic = [t for p in seeds for t in p.topics]
run = gc.glauber(cond, x0, cfg.steps, temperature, seed=seed,
                 record_every=cfg.pca_every)
every = max(1, round(cfg.record_every / cfg.pca_every))
scores, score_steps = ch.trajectory_topic_scores(cond, run, labels, every,
                                                 **score_with)
frame = ch.topic_frame(scores, score_steps, labels, seed_topic=seed_topic)
frame.to_csv(out / "scores.csv", index=False)
frame.head()

# %% [markdown]
# ## Table 3: politics recurrence and loss of the seed topic
#
# Per seed topic: the mean politics score at the first and last step, the
# mean score of the seed topic's own label at both ends, how many chains
# rise above the baseline $1/9$ at some recorded step after the start, and
# the highest politics score seen after the start.

# %%
table3 = ch.recurrence_table(frame, "politics", baseline)
table3.to_csv(out / "table3.csv")
rest = table3.drop(index="politics")
falls = rest.index[rest["seed score at end"] < rest["seed score at start"]]
bt.glue("ch4_run", f"{len(seed_topic)} chains of {cfg.steps:,} steps, "
        f"profile {cfg.profile}")
bt.glue("ch4_seed_falls", f"{len(falls)} of the {len(rest)} non-politics "
        f"seed topics ({', '.join(falls) or 'none'})")
bt.glue("ch4_politics_seed_start",
        f"{table3.loc['politics', 'seed score at start']:.2f}")
bt.glue("ch4_other_seed_start", f"{rest['seed score at start'].mean():.2f}")
low_start = (table3.loc["politics", "seed score at start"]
             < rest["seed score at start"].mean())
bt.glue("ch4_politics_seed_note", "lower, as its seed passages are often "
        "about policy areas (health, schools, the environment) that the "
        "scorer files elsewhere" if low_start else "not lower")
table3.round(3)

# %% [markdown]
# The paper's figures for BERT beside ours. The paper's five seed topics
# (from MS MARCO, one of them food) are not BBC's, and politics is not among
# them; so we count crossings over our chains seeded from the four
# non-politics topics, whose politics score has to rise to cross.

# %%
others = frame[frame.seed_topic != "politics"]
after = others[others.step > 0]
crossed = after.groupby("chain").politics.max() > baseline
share = crossed.mean()
low, high = (float(v[0]) for v in bt.share_intervals(
    [int(crossed.sum())], [len(crossed)]))
peak = after.politics.max()
strong = after.groupby("chain").politics.max() > 0.5
bt.glue("ch4_crossed", f"{crossed.sum()} of {len(crossed)}")
bt.glue("ch4_peak", f"{peak:.3f}")
bt.glue("ch4_strong", f"{strong.sum()} of {len(strong)}")
pd.DataFrame({
    "paper (BERT, BART-MNLI)": ["46 of 50 (0.92)", "0.979", "not given"],
    "ours": [f"{crossed.sum()} of {len(crossed)} ({share:.2f}, 95% "
             f"[{low:.2f}, {high:.2f}])", f"{peak:.3f}",
             f"{strong.sum()} of {len(strong)}"],
}, index=["chains ever above the politics baseline",
          "peak politics score", "chains ever above 0.5 politics"])

# %% [markdown]
# How demanding is "ever above the baseline"? The held-out snippets of the
# four non-politics topics give the scorer's false-alarm rate: the share of
# ordinary, non-political 20-token texts whose politics score already
# exceeds $1/9$. If records were independent, a chain with $R$ scored states
# would cross at least once with probability $1 - (1 - q)^R$.

# %%
snippets = check[(check.length != "whole paragraph")
                 & (check.label != "politics")]
q = (snippets.politics > baseline).mean()
records = frame.step.nunique() - 1
by_chance = 1 - (1 - q) ** records
bt.glue("ch4_false_alarm", f"{q:.0%}")
bt.glue("ch4_records", f"{records}")
bt.glue("ch4_by_chance", f"{by_chance:.2f}")
print(f"non-politics held-out snippets above 1/9: {q:.2f}; "
      f"1 - (1 - q)^{records} = {by_chance:.2f}")

# %% [markdown]
# ## Which basin does our model return to?
#
# Whatever the paper found for BERT, the question for any model is which
# region its chains keep returning to. For each seed topic, the share of
# recorded states after the start in which each label has the highest score:

# %%
shares = ch.leading_label_shares(frame[frame.step > 0], labels)
shares.to_csv(out / "leading_shares.csv")
fig, ax = plt.subplots(figsize=(9, 3.6))
sns.heatmap(shares, annot=True, fmt=".2f", cmap="rocket_r", vmin=0,
            vmax=1, ax=ax, cbar_kws={"label": "share of recorded states"})
ax.set(xlabel="leading label", ylabel="seed topic",
       title=f"Leading topic label along the chains (steps 1 to "
             f"{cfg.steps:,}, tau = {temperature:g})")
plt.show()

# %%
mean_path = frame.melt(id_vars=["chain", "step", "seed_topic"],
                       value_vars=labels, var_name="label",
                       value_name="score")
fig, ax = plt.subplots(figsize=(9, 4))
sns.lineplot(data=mean_path, x="step", y="score", hue="label",
             palette="tab10", errorbar=None, ax=ax)
ax.axhline(baseline, color="grey", ls="--", lw=1, label="baseline 1/9")
ax.set(xlabel="Glauber step $t$", ylabel="mean topic score",
       title="Mean topic scores over all chains")
ax.legend(ncol=2, fontsize=8)
plt.show()

# %%
leader = shares.idxmax(axis=1)
for topic in shares.index:
    print(f"seeded from {topic:>13}: leading label most often "
          f"'{leader[topic]}' ({shares.loc[topic, leader[topic]]:.2f})")
overall = ch.leading_label_shares(
    frame[frame.step > 0].assign(chains="all chains"), labels, by="chains")
ranked = overall.loc["all chains"].sort_values(ascending=False)
bt.glue("ch4_top_labels", ", ".join(
    f"{k} ({v:.0%})" for k, v in ranked.head(3).items()))
rank = list(ranked.index).index("politics") + 1
bt.glue("ch4_politics_lead", f"{ranked['politics']:.0%}")
bt.glue("ch4_politics_rank", "the label that leads most often"
        if rank == 1 else f"number {rank} of {len(labels)} labels")
overall.round(2)

# %% [markdown]
# ## Figs. 1 and 4: the trajectory in embedding space
#
# For two chains we embed every recorded state, project the embeddings on
# their first two principal components and join consecutive states,
# coloured from warm (early) to cool (late) as in the paper's figures.
# A state the chain keeps for several records is drawn once per record, so
# a trap shows as a dark, tight cluster.

# %%
picks = [0, len(seed_topic) - 1]
distinct = []
fig, axes = plt.subplots(1, 2, figsize=(12, 5))
for ax, chain in zip(axes, picks):
    texts = cond.decode_batch(run.tokens[chain])
    distinct.append(len(set(texts)))
    xy, explained = ch.pca_2d(gc.embed(embedder, texts))
    ax.plot(xy[:, 0], xy[:, 1], color="grey", lw=0.4, alpha=0.5)
    dots = ax.scatter(xy[:, 0], xy[:, 1], c=run.steps, cmap="coolwarm_r",
                      s=14, alpha=0.6)
    ax.set(xlabel=f"PC 1 ({explained[0]:.0%} of variance)",
           ylabel=f"PC 2 ({explained[1]:.0%})",
           title=f"chain {chain} ({seed_topic[chain]}): "
                 f"{len(set(texts))} distinct of {len(texts)} states")
    ax.scatter(*xy[0], marker="o", s=90, facecolor="none", color="k",
               label="first state")
    ax.scatter(*xy[-1], marker="X", s=90, color="k", label="last state")
    ax.legend(loc="best", fontsize=8)
    fig.colorbar(dots, ax=ax, label="Glauber step")
    print(f"chain {chain}\n  first: {texts[0]}\n  last:  {texts[-1]}")
plt.tight_layout()
plt.show()
repeats = len(picks) * len(run.steps) - sum(distinct)
bt.glue("ch4_pca_records", f"{len(picks) * len(run.steps):,}")
bt.glue("ch4_pca_distinct", f"{sum(distinct):,}")
bt.glue("ch4_pca_every", f"{cfg.pca_every}")
bt.glue("ch4_pca_repeats", "no recorded state repeats: at this temperature"
        " the chains do not sit in exact traps between records" if not
        repeats else f"{repeats} records repeat an earlier state of their"
        " chain: exact traps, drawn as dark, tight clusters")

# %% [markdown]
# The two chains show {glue:text}`ch4_pca_distinct` distinct states in
# {glue:text}`ch4_pca_records` records taken every
# {glue:text}`ch4_pca_every` steps, so {glue:text}`ch4_pca_repeats`
# (traps are the subject of chapter 5). Clumps of one colour are stretches
# in which a chain stays in one region of embedding space for many steps:
# basins that need not be fixed points.
#
# ## Prefix-conditioned attractors (appendix C.4)
#
# Freeze a prefix "X said that" and let the chain resample only the rest.
# The paper's examples suggest the speaker steers the chain into a basin
# (and that even "the little kid said that" pulls towards news speech).
# We run the same seed passages with each prefix and with none, and score
# only the free part of the text.

# %%
base = gc.seed_passages(cond, cfg.seq_len, cfg.prefix_chains,
                        seed=seed + 7)
prefix_rows, endpoints = [], []
for prefix in ["(none)"] + list(prefixes):
    if prefix == "(none)":
        start, k = base.tokens, 0
    else:
        start, k = ch.with_prefix(cond, prefix, base.tokens)
    chains = gc.glauber(cond, start, cfg.prefix_steps, temperature,
                        frozen=k, seed=seed, progress=False,
                        record_every=max(1, cfg.prefix_steps // 10))
    pscores, psteps = ch.trajectory_topic_scores(cond, chains, labels,
                                                 skip=k, **score_with)
    prefix_rows.append(ch.topic_frame(pscores, psteps, labels,
                                      prefix=prefix))
    endpoints += [dict(prefix=prefix, chain=c, endpoint=text)
                  for c, text in enumerate(cond.decode_batch(chains.final))]
prefix_frame = pd.concat(prefix_rows, ignore_index=True)
prefix_frame.to_csv(out / "prefix_scores.csv", index=False)
pd.DataFrame(endpoints).to_csv(out / "prefix_endpoints.csv", index=False)

# %% [markdown]
# The topic mix of the free part over the second half of each run, and how
# it differs from the run without a prefix:

# %%
late = prefix_frame[prefix_frame.step >= cfg.prefix_steps / 2]
mix = late.groupby("prefix", sort=False)[labels].mean()
fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
sns.heatmap(mix, annot=True, fmt=".2f", cmap="rocket_r", vmin=0,
            ax=axes[0], cbar=False)
sns.heatmap(mix - mix.loc["(none)"], annot=True, fmt="+.2f",
            cmap="vlag", center=0, ax=axes[1], cbar=False)
axes[0].set(title="mean topic score of the free part, second half",
            xlabel="", ylabel="frozen prefix")
axes[1].set(title="change against no prefix", xlabel="label",
            ylabel="frozen prefix")
plt.tight_layout()
plt.show()
shift = (mix - mix.loc["(none)"]).drop(index="(none)")
bt.glue("ch4_prefix_gains", "; ".join(
    f"\"{p}\": {shift.loc[p].idxmax()} ({shift.loc[p].max():+.2f})"
    for p in shift.index))
kid = [p for p in shift.index if "kid" in p]
bt.glue("ch4_kid_politics", f"{shift.loc[kid[0], 'politics']:+.2f}"
        if kid else "not measured (no such prefix in this run)")

# %% [markdown]
# Example endpoints, one per prefix (the prefix is part of the text):

# %%
pd.set_option("display.max_colwidth", 120)
pd.DataFrame(endpoints).groupby("prefix", sort=False).first().endpoint

# %% [markdown]
# ## Verdicts
#
# Rules, fixed before looking at the numbers:
#
# - `politics_recurrence`: *reproduced* if the paper's share (46/50 = 0.92)
#   lies inside our 95% Wilson interval for the share of non-politics chains
#   that ever pass the politics baseline, or ours is higher; else *differs*.
# - `politics_peak`: *reproduced* if our peak politics score after the start
#   is at least 0.9 (the paper's 0.979 is a near-certain political state);
#   else *differs*.
#
# The scorers differ (embedding similarity against BART-MNLI), so the two
# claims test whether our model's chains enter confidently political text,
# not whether the scores match to the digit.

# %%
recurrence_ok = high >= 0.92  # 0.92 inside the interval, or below it
claims = pd.DataFrame([
    dict(claim="politics_recurrence", table="paper",
         quantity="share of non-politics chains ever above 1/9 politics",
         ours=share, ours_text=f"{share:.2f} [{low:.2f}, {high:.2f}] "
                               f"({crossed.sum()} of {len(crossed)})",
         verdict="reproduced" if recurrence_ok else "differs",
         reason=f"paper 46/50 = 0.92; rule: 0.92 inside our 95% Wilson "
                f"interval or below our share; caveat: {q:.0%} of plain "
                f"held-out snippets already pass 1/9"),
    dict(claim="politics_peak", table="paper",
         quantity="peak politics score after step 0, non-politics chains",
         ours=peak, ours_text=f"{peak:.3f}",
         verdict="reproduced" if peak >= 0.9 else "differs",
         reason="paper 0.979; reproduced if our peak is at least 0.9"),
]).assign(model=model_name, profile=cfg.profile)
claims.to_csv(out / "claims.csv", index=False)
for row in claims.itertuples():
    bt.glue(f"ch4_verdict_{row.claim}", row.verdict)
claims[["claim", "ours_text", "verdict"]]

# %% [markdown]
# ## What this shows
#
# In this run ({glue:text}`ch4_run`), the seed label's mean score falls
# from start to end for {glue:text}`ch4_seed_falls`; the paper reports that
# BERT's chains forget their seed topic. The politics row starts from a mean
# politics score of {glue:text}`ch4_politics_seed_start`, against
# {glue:text}`ch4_other_seed_start` for the other topics' own labels:
# {glue:text}`ch4_politics_seed_note`.
#
# Of the non-politics chains, {glue:text}`ch4_crossed` pass the politics
# baseline at some recorded step (the paper: 46 of 50), and the highest
# politics score is {glue:text}`ch4_peak` (the paper: 0.979); under our rules
# the two claims come out *{glue:text}`ch4_verdict_politics_recurrence`* and
# *{glue:text}`ch4_verdict_politics_peak`*. Crossing once is a weak test,
# though: {glue:text}`ch4_false_alarm` of plain, non-political held-out
# snippets already pass $1/9$, so with {glue:text}`ch4_records` scored
# states per chain a chain that never settles in politics would still cross
# with probability about {glue:text}`ch4_by_chance` if its records were
# independent. A stricter count: {glue:text}`ch4_strong` chains ever score
# politics above 0.5.
#
# The leading-label shares are the better read of where the chains go. Over
# all chains the labels that lead most often are
# {glue:text}`ch4_top_labels`; politics leads in
# {glue:text}`ch4_politics_lead` of the recorded states, which makes it
# {glue:text}`ch4_politics_rank`. A model trained only on BBC News, whose
# largest sections are business and sport, need not share the basins of the
# paper's BERT, which was trained on books and Wikipedia.
#
# With a frozen prefix, the label whose mean score rises most against no
# prefix is, per prefix: {glue:text}`ch4_prefix_gains`. For "the little kid
# said that", which pulled the paper's BERT towards news speech, the change
# in our politics score is {glue:text}`ch4_kid_politics`. With a handful of
# chains per prefix this is an illustration, not a measurement.
#
# The scorer is an embedding stand-in for the paper's NLI classifier; rerun
# with `scorer="facebook/bart-large-mnli"` and `model="bert-base-uncased"`
# online to put both sides on the paper's footing.
