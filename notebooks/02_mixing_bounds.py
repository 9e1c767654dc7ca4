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
# # Mixing bounds: influence, margins and drift
#
# ```{admonition} This chapter at a glance
# :class: tip
# - **Claim** (paper, section 5 and appendix A.1): the chain provably mixes in $O(n \log n)$ steps once the influence sum $\alpha(\tau)$ drops below 1, which for BERT needs $\tau > 10$ ($\alpha(10) \approx 1.04$, $\alpha(11) \approx 0.94$); at low temperature, score margins and a positive drift into the '!'-basin certify slow mixing.
# - **Look at**: the $\alpha(\tau)$ figure, the Lemma 6 table, the exact Potts tables (how loose Theorems 5 and 8 are), the drift table, and the stationary law against the pseudo-likelihood law.
# - **Rerun**: [open this notebook in Colab](https://colab.research.google.com/github/glauber-mlm/glauber-mlm-companion/blob/main/notebooks/02_mixing_bounds.ipynb), or `papermill notebooks/02_mixing_bounds.ipynb out.ipynb -p profile paper -p model bert-base-uncased`
# ```
#
# Section 5 of the paper {cite}`sana2026mixing` gives two structural
# theorems. Theorem 5 (fast mixing): if every site is influenced little by
# the others, $\alpha(\tau) = \max_i \sum_{j \ne i} c_{ij}(\tau) < 1$, then
# path coupling {cite}`bubley1997path` gives
# $t_{\mathrm{mix}}(\varepsilon) \le \frac{n}{1-\alpha}
# (\log n + \log \frac1\varepsilon)$. Theorem 8 (slow mixing): if a basin
# $B$ is guarded by a score margin $\Delta_\star$, the chain leaves it with
# probability at most $|V| e^{-\Delta_\star/\tau}$ per step. Appendix A.1
# measures both on BERT {cite}`devlin2019bert`. We measure them on the
# bundled model, and, beyond the paper, check both theorems *exactly* on
# Potts chains small enough to enumerate, where the true mixing time is a
# matrix computation {cite}`levin2017markov`.

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
seq_len: int = 0  # tokens per base context; 0: the profile's value (14)
n_contexts: int = 0  # base contexts for c_ij; 0: the profile's value
top_k: int = 0  # model's top-k candidates per site; 0: the profile's
drift_states: int = 0  # boundary states of the '!'-basin; 0: profile's
window_tokens: int = 0  # K, tokens per free site of the window chain
seed: int = 0

# %%
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from scipy.stats import spearmanr

import glauber_core as gc
import book_tools as bt
from chapters import bounds as ch

PROFILES = {
    "smoke": dict(seq_len=14, n_contexts=1, top_k=2, drift_states=2,
                  drift_n=100, window_tokens=5, chains=2, chain_steps=20),
    "quick": dict(seq_len=14, n_contexts=8, top_k=4, drift_states=16,
                  drift_n=100, window_tokens=12, chains=4, chain_steps=300),
    "paper": dict(seq_len=14, n_contexts=20, top_k=15, drift_states=200,
                  drift_n=100, window_tokens=16, chains=30,
                  chain_steps=10_000),
}
cfg = bt.profile_settings(profile, PROFILES, seq_len=seq_len,
                          n_contexts=n_contexts, top_k=top_k,
                          drift_states=drift_states,
                          window_tokens=window_tokens)
bt.set_book_style()
cond = gc.load_mlm(model or None)
model_name = Path(cond.name_or_path).name if not model else model
out = bt.results_dir("02_mixing_bounds")
# one log grid from 0.5 to 30, with the paper's 10 and 11 on it
taus = np.unique(np.r_[np.geomspace(0.5, 30, 13), 1, 2, 10, 11]).round(3)
cfg

# %% [markdown]
# | profile | contexts $\times$ candidates | '!' boundary states | window chain | low-$\tau$ chains |
# |---|---|---|---|---|
# | smoke | 1 $\times$ 3 | 2 | $K = 5$ ($5^3$ states) | 2 $\times$ 20 steps |
# | quick | 8 $\times$ 5 | 16 | $K = 12$ ($12^3$ states) | 4 $\times$ 300 steps |
# | paper | 20 $\times$ 16 | 200 | $K = 16$ ($16^3$ states) | 30 $\times$ 10,000 steps |
#
# Every profile uses 14-token contexts (the paper's seed length in A.1),
# the same 17 temperatures from 0.5 to 30, $N = 100$ for the '!'-basin and
# the same exactly solvable Potts chains. A context's candidates at site
# $j$ are its own token plus the model's top-$k$ tokens there (the paper
# does not say how many it tried). The paper's profile is sized for a GPU.
#
# ## 1. Influence coefficients and $\alpha(\tau)$
#
# Definition 2 takes $c_{ij}(\tau)$ as the largest total-variation change
# of the site-$i$ conditional when only site $j$ changes, over *all*
# contexts. Like appendix A.1, we try a few contexts (held-out BBC
# paragraphs {cite}`greene2006bbc` cut to 14 tokens) and a few tokens at
# $j$, so each estimate is a lower bound on the true $c_{ij}$. One batched
# set of forward passes serves every temperature.

# %%
contexts = gc.seed_passages(cond, cfg.seq_len, cfg.n_contexts, seed=seed)
candidates = gc.influence_candidates(cond, contexts.tokens, cfg.top_k)
influence, oscillation = gc.influence_and_oscillation(
    cond, contexts.tokens, candidates, taus)
pd.DataFrame({"context": contexts.texts}).head(4)

# %% [markdown]
# Appendix A.1 averages the influence over base contexts before taking
# $\alpha = \max_i \sum_j c_{ij}$; we also take the maximum over contexts.
# The maximum is the larger of the two, and both are lower bounds on the
# true $\alpha(\tau)$, a supremum over every context.

# %%
alpha = pd.DataFrame({
    "tau": taus,
    "alpha_mean": gc.alpha_from_influence(influence.mean(1)).numpy(),
    "alpha_max": gc.alpha_from_influence(influence.amax(1)).numpy(),
})
alpha.to_csv(out / "alpha.csv", index=False)
below = alpha[alpha.alpha_mean < 1]
tau_star = float(below.tau.min()) if len(below) else math.inf
at_10, at_11 = (alpha[np.isclose(alpha.tau, t)].iloc[0] for t in (10, 11))
bt.glue("ch2_tau_star", f"{tau_star:g}")
for key, row in (("ch2_alpha10", at_10), ("ch2_alpha11", at_11)):
    bt.glue(key, f"{row.alpha_mean:.2f} (max {row.alpha_max:.2f})")
alpha.round(3).set_index("tau").T

# %%
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(alpha.tau, alpha.alpha_mean, "o-", label="mean over contexts")
ax.plot(alpha.tau, alpha.alpha_max, "s--", label="max over contexts")
ax.plot([10, 11], [1.04, 0.94], "k*", ms=12, label="paper, BERT")
ax.axhline(1, color="grey", lw=1)
ax.axvline(tau_star, color="C2", ls=":",
           label=rf"ours: $\alpha < 1$ from $\tau$ = {tau_star:g}")
ax.set(xscale="log", yscale="log", xlabel=r"temperature $\tau$",
       ylabel=r"$\hat\alpha(\tau)$ (lower bound)",
       title=rf"Influence sum, {model_name}, n = {cfg.seq_len}")
ax.legend()
plt.show()

# %% [markdown]
# Averaged over contexts, our $\hat\alpha$ first drops below 1 at
# $\tau$ = {glue:text}`ch2_tau_star` on this grid (the dotted line). At
# $\tau = 10$ and $11$ it is {glue:text}`ch2_alpha10` and
# {glue:text}`ch2_alpha11` (the maximum over contexts in brackets), against
# the paper's 1.04 and 0.94 on BERT (the stars).
#
# The heatmap shows the context-averaged $c_{ij}$ at $\tau = 10$: row $i$
# is the site whose conditional moves, column $j$ the site that changes.

# %%
tau_map = 10.0
at = int(np.argmin(np.abs(taus - tau_map)))
fig, ax = plt.subplots(figsize=(6.5, 5.5))
sns.heatmap(influence[at].mean(0).numpy(), cmap="mako_r", square=True,
            cbar_kws={"label": r"$\hat c_{ij}$"}, ax=ax)
ax.set(xlabel="changed site j", ylabel="updated site i",
       title=rf"$\hat c_{{ij}}$ at $\tau$ = {taus[at]:g}, "
             f"mean of {cfg.n_contexts} contexts")
plt.show()
influence_table = pd.DataFrame(
    [(t, c, i, j, influence[k, c, i, j].item())
     for k, t in enumerate(taus) for c in range(cfg.n_contexts)
     for i in range(cfg.seq_len) for j in range(cfg.seq_len) if i != j],
    columns=["tau", "context", "i", "j", "c_ij"])
influence_table.to_csv(out / "influence.csv", index=False)

# %% [markdown]
# ## 2. Score oscillation and Lemma 6
#
# Lemma 6 bounds each influence by the cross-site score oscillation,
# $c_{ij}(\tau) \le \Delta_{ij} / (4\tau)$, where $\Delta_{ij}$ is the
# spread (max minus min over tokens) of the score change at site $i$ when
# site $j$ changes. The inequality holds pair by pair, so it must hold on
# every estimate: a violation would be a bug. We count them at every
# temperature and report the slack.

# %%
bound6 = oscillation / (4 * torch.tensor(taus)).view(-1, 1, 1, 1)
off = ~torch.eye(cfg.seq_len, dtype=torch.bool)
lemma6 = pd.DataFrame({
    "tau": taus,
    "pairs": int(off.sum()) * cfg.n_contexts,
    "violations": (influence > bound6 + 1e-9)[:, :, off].sum((1, 2)),
    "min_slack": (bound6 - influence)[:, :, off].amin((1, 2)),
    "median_ratio": (influence / bound6)[:, :, off].flatten(1)
    .median(1).values,
})
lemma6.to_csv(out / "lemma6.csv", index=False)
bt.glue("ch2_lemma6_violations", f"{int(lemma6.violations.sum())}")
bt.glue("ch2_lemma6_checks", f"{int(lemma6.pairs.sum()):,}")
bt.glue("ch2_lemma6_ratio", f"{lemma6.median_ratio.min():.2f} to "
        f"{lemma6.median_ratio.max():.2f}")
lemma6.round(4)

# %% [markdown]
# Corollary 7 turns Lemma 6 into a temperature: $\alpha(\tau) < 1$ as soon
# as $\tau > \max_i \sum_{j \ne i} \Delta_{ij} / 4$.

# %%
tau7 = {name: gc.alpha_from_influence(reduce(oscillation)).item() / 4
        for name, reduce in [("mean over contexts", lambda d: d.mean(0)),
                             ("max over contexts", lambda d: d.amax(0))]}
bt.glue("ch2_tau7", f"{tau7['mean over contexts']:.1f}")
bt.glue("ch2_tau7_factor", f"{tau7['mean over contexts'] / tau_star:.1f}")
pd.Series(tau7, name="Corollary 7 temperature").round(1)

# %% [markdown]
# Lemma 6 finds {glue:text}`ch2_lemma6_violations` violations in
# {glue:text}`ch2_lemma6_checks` checks (pair, context, temperature). It is
# a worst case over all tokens: one token whose score jumps when site $j$
# changes sets $\Delta_{ij}$, even if that token carries no probability.
# The median ratio $\hat c_{ij} / (\Delta_{ij}/4\tau)$, from
# {glue:text}`ch2_lemma6_ratio` across temperatures, measures how much of
# the bound the influence actually uses. Corollary 7 (from the
# context-averaged $\Delta_{ij}$) asks for $\tau >$ {glue:text}`ch2_tau7`,
# {glue:text}`ch2_tau7_factor` times the temperature where the same
# contexts give $\hat\alpha < 1$.
#
# ## 3. Theorem 5's bound where $\hat\alpha < 1$
#
# Where $\hat\alpha(\tau) < 1$ Theorem 5 gives
# $t_{\mathrm{mix}}(1/4) \le \frac{n}{1-\alpha}(\log n + \log 4)$. With the
# lower-bound estimates of $\alpha$ this is only what the bound *would* be
# if the estimate were the supremum.

# %%
alpha["bound_mean"] = [gc.mixing_time_bound(a, cfg.seq_len)
                       for a in alpha.alpha_mean]
alpha["bound_max"] = [gc.mixing_time_bound(a, cfg.seq_len)
                      for a in alpha.alpha_max]
alpha.to_csv(out / "alpha.csv", index=False)
finite = alpha[np.isfinite(alpha.bound_mean)]
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(finite.tau, finite.bound_mean, "o-", label="mean over contexts")
ax.plot(finite.tau, finite.bound_max, "s--", label="max over contexts")
ax.set(xscale="log", yscale="log", xlabel=r"temperature $\tau$",
       ylabel=r"bound on $t_{\mathrm{mix}}(1/4)$ (steps)",
       title=f"Theorem 5 with the estimated alpha, n = {cfg.seq_len}")
ax.legend()
plt.show()

# %% [markdown]
# ## 4. Beyond the paper: both theorems checked exactly
#
# On BERT the paper can only say that the bounds are loose. On a Potts
# chain, $s_i(a; x_{-i}) = h_i(a) + \sum_{j \ne i} J_{ij}
# \mathbf 1\{x_j = a\}$, with 5 sites and 3 colours ($3^5 = 243$ states),
# everything is exact: $c_{ij}(\tau)$ as a true supremum over all
# contexts, the kernel $P_\tau$, its stationary law and
# $t_{\mathrm{mix}}(1/4)$ from matrix powers. A symmetric $J$ gives
# compatible conditionals; the asymmetric one does not.

# %%
rng = torch.Generator().manual_seed(seed)
raw = torch.randn(5, 5, generator=rng, dtype=torch.float64)
field = 0.5 * torch.randn(5, 3, generator=rng, dtype=torch.float64)
chains = {"symmetric J": gc.PottsConditionals((raw + raw.T) / 2, field, 3),
          "asymmetric J": gc.PottsConditionals(raw, field, 3)}
potts_taus = np.geomspace(0.5, 8, 9).round(3)
rows = []
for name, potts in chains.items():
    exact_c = ch.exact_influence_coefficients(potts, 5, potts_taus)
    for tau, c in zip(potts_taus, exact_c):
        a = gc.alpha_from_influence(c).item()
        rows.append(dict(chain=name, tau=tau, alpha=a,
                         t_mix=gc.exact_mixing_time(potts, 5, tau),
                         bound=gc.mixing_time_bound(a, 5)))
potts_mixing = pd.DataFrame(rows).assign(ratio=lambda d: d.bound / d.t_mix)
potts_mixing.to_csv(out / "potts_mixing.csv", index=False)
potts_mixing.round(3)

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for k, (name, part) in enumerate(potts_mixing.groupby("chain")):
    ax.plot(part.tau, part.t_mix, "o-", color=f"C{k}",
            label=f"{name}: exact")
    ax.plot(part.tau, part.bound, "s--", color=f"C{k}",
            label=f"{name}: Theorem 5")
ax.set(xscale="log", yscale="log", xlabel=r"temperature $\tau$",
       ylabel=r"$t_{\mathrm{mix}}(1/4)$ (steps)",
       title="Potts chain, 5 sites, 3 colours: exact vs bound")
ax.legend(fontsize=8)
plt.show()
tight = potts_mixing[potts_mixing.alpha < 1]
bound_holds = bool((tight.bound >= tight.t_mix).all())
bt.glue("ch2_t5_cases", f"{len(tight)} of {len(potts_mixing)}")
bt.glue("ch2_t5_holds", "holds in every case, as it must" if bound_holds
        else "FAILS in some case (a bug)")
bt.glue("ch2_t5_ratio", f"{tight.ratio.median():.1f} (range "
        f"{tight.ratio.min():.1f}-{tight.ratio.max():.1f})")
bt.glue("ch2_t5_unbounded_tmix",
        f"{int(potts_mixing[potts_mixing.alpha >= 1].t_mix.max())}")

# %% [markdown]
# $\alpha < 1$ in {glue:text}`ch2_t5_cases` (chain, temperature) cases.
# There the bound {glue:text}`ch2_t5_holds`, and it overshoots the exact
# mixing time by a median factor {glue:text}`ch2_t5_ratio`. Below the
# temperature where $\alpha$ reaches 1 the theorem says nothing, yet there
# these chains mix within {glue:text}`ch2_t5_unbounded_tmix` steps: the
# condition is sufficient, far from necessary.
#
# Theorem 8 on a low-temperature basin. Take the ferromagnetic Ising chain
# on 6 sites ($J_{ij} = 1$, 2 colours) and the basin $B$ of states with at
# least four 0s. On its boundary (exactly four 0s) a 0 sees three other 0s
# and two 1s, so its margin is $\Delta_\star = 1$, and $\mu_\tau(B) < 1/2$
# by symmetry. We compare the exact one-step escape probability with
# $|V| e^{-\Delta_\star/\tau}$ and the exact mixing time with
# $e^{\Delta_\star/\tau} / (4|V|)$.

# %%
ising = gc.PottsConditionals(torch.ones(6, 6), q=2)
basin = (gc.all_states(2, 6) == 0).sum(1) >= 4
theorem8 = pd.DataFrame([gc.theorem8_check(ising, 6, tau, basin)
                         for tau in (0.5, 0.6, 0.75, 1.0, 1.5, 2.0)])
theorem8["escape_looseness"] = theorem8.escape_bound / theorem8.escape
theorem8["t_mix_looseness"] = theorem8.t_mix / theorem8.t_mix_lower
theorem8.to_csv(out / "theorem8.csv", index=False)
t8_holds = bool((theorem8.escape <= theorem8.escape_bound).all()
                and (theorem8.t_mix >= theorem8.t_mix_lower).all())
bt.glue("ch2_t8_holds", "Both bounds hold" if t8_holds
        else "A bound FAILS (a bug)")
for key, col in (("ch2_t8_escape", "escape_looseness"),
                 ("ch2_t8_tmix", "t_mix_looseness")):
    bt.glue(key, f"{theorem8[col].min():.3g} to {theorem8[col].max():.3g}")
theorem8[["temperature", "delta_star", "mu_basin", "escape",
          "escape_bound", "t_mix", "t_mix_lower", "escape_looseness",
          "t_mix_looseness"]].round(4)

# %% [markdown]
# {glue:text}`ch2_t8_holds`. The escape bound is loose by a factor from
# {glue:text}`ch2_t8_escape` across these temperatures (the $|V|$
# prefactor against the real $\frac{4}{6}$ chance of picking a guarding
# site), and the mixing-time bound by a factor from {glue:text}`ch2_t8_tmix`,
# largest at the lowest $\tau$ (see the last column): the true escape
# needs a whole run of unlikely moves, not one, so $t_{\mathrm{mix}}$
# grows much faster than $e^{\Delta_\star/\tau}$.
#
# ## 5. Score margins of real states
#
# Appendix A.1 measures the margin $\Delta_i(x) = s_i(x_i; x_{-i}) -
# \max_{a \ne x_i} s_i(a; x_{-i})$ at every site of trap states. A state
# with all margins positive is a *perfect trap*, and Theorem 8 applies to
# the one-state basin $\{x\}$ with $\Delta_\star = \min_i \Delta_i(x)$
# (its stationary mass is presumably far below the 1/2 the theorem
# requires). We
# look at seed passages and at the endpoints of short chains at
# $\tau = 0.25$, which climb towards high-margin states.

# %%
tau_cold = 0.25
seeds = gc.seed_passages(cond, cfg.seq_len, cfg.chains, seed=seed).tokens
cold = gc.glauber(cond, seeds, cfg.chain_steps, tau_cold, seed=seed,
                  progress=False).final
states = torch.cat([seeds, cold])
gaps = gc.score_gaps(cond, states)
size_v = int(cond.allowed.sum())
delta_min = gaps.amin(1)
margins = pd.DataFrame({
    "state": [f"seed {k}" for k in range(cfg.chains)]
    + [f"end {k} (tau {tau_cold:g})" for k in range(cfg.chains)],
    "text": cond.decode_batch(states),
    "delta_star": delta_min.numpy(), "mean_gap": gaps.mean(1).numpy(),
    "positive_sites": (gaps > 0).sum(1).numpy(),
})
margins["perfect_trap"] = margins.positive_sites == cfg.seq_len
for tau in (1.0, tau_cold):
    margins[f"bound_tau_{tau:g}"] = np.where(
        margins.perfect_trap, np.exp(delta_min.numpy() / tau) / (4 * size_v),
        np.nan)
margins.to_csv(out / "margins.csv", index=False)
bt.glue("ch2_perfect_traps", f"{int(margins.perfect_trap.sum())} of "
        f"{len(margins)}")
bt.glue("ch2_size_v", f"{size_v:,}")
margins.round(3)

# %% [markdown]
# {glue:text}`ch2_perfect_traps` states are perfect traps. The last two
# columns are Theorem 8's lower bound $e^{\Delta_\star/\tau}/(4|V|)$ on the
# mixing time, for perfect traps only. With $|V|$ =
# {glue:text}`ch2_size_v` it stays below one step unless
# $\Delta_\star/\tau > \ln(4|V|)$; the paper meets the same wall (its best
# trap predicts 0.014 steps and lasted 4,950).
#
# ## 6. The '!'-basin drift certificate
#
# Section 5.4 takes $N = 100$ sites and the basin of states with at least
# 90 '!' tokens. On its boundary (exactly 90 '!') the expected one-step
# change of the '!'-count is $\delta_\tau(x)$; if it is positive at every
# boundary state the count is pulled back into the basin, which certifies
# slow escape. The paper does not say what fills the other 10 sites; we put
# the first 10 tokens of a held-out BBC paragraph there, in order, at
# random positions. Our copy of the paper lacks Table 2's values and
# temperatures, so we use $\tau = 1$ and $\tau = 2$. All $N$ site
# conditionals of a state come from one batched set of forwards.

# %%
bang = cond.encode("!")
assert len(bang) == 1, "the model has no single '!' token"
boundary = ch.drift_boundary_states(cond, int(bang[0]), cfg.drift_n,
                                    cfg.drift_states, seed=seed)
drift_taus = [1.0, 2.0]
drift = gc.basin_drifts(cond, boundary, int(bang[0]), drift_taus)
drift_table = pd.DataFrame([
    dict(tau=tau, states=cfg.drift_states, min=d.min().item(),
         median=d.median().item(), share_positive=(d > 0).double()
         .mean().item()) for tau, d in zip(drift_taus, drift)])
pd.DataFrame({"tau": np.repeat(drift_taus, cfg.drift_states),
              "delta": drift.flatten().numpy()}).to_csv(
    out / "drift.csv", index=False)
drift_table.to_csv(out / "drift_summary.csv", index=False)
all_positive = bool((drift > 0).all())
bt.glue("ch2_drift_states", f"{cfg.drift_states}")
for tau, d in zip(drift_taus, drift):
    bt.glue(f"ch2_drift_tau{tau:g}", f"{int((d > 0).sum())} of {len(d)} "
            f"positive, median {d.median().item():.2f}")
bt.glue("ch2_drift_phrase", "holds" if all_positive else "fails")
print(cond.decode(boundary[0]))
drift_table.round(4)

# %% [markdown]
# The paper finds all 200 boundary states pulled inwards at both of its
# temperatures. Over our {glue:text}`ch2_drift_states` boundary states:
# at $\tau = 1$, {glue:text}`ch2_drift_tau1`; at $\tau = 2$,
# {glue:text}`ch2_drift_tau2`. The certificate (every sampled state with
# $\delta_\tau > 0$) therefore {glue:text}`ch2_drift_phrase` for this
# model. A drift near $-0.9$ would mean that almost every '!' site gets
# resampled to something else; a model trained on news text, where '!' is
# rare, has little reason to keep runs of it. The certificate is a
# property of the model, not of Glauber dynamics.
#
# ## 7. Beyond the paper: the stationary law against the pseudo-likelihood
#
# The paper's section 7 leaves open what the stationary law $\mu_\tau$
# looks like. A natural guess from the conditionals alone is the
# pseudo-likelihood law $\propto \exp(\sum_i \log p_\tau(x_i \mid
# x_{-i}))$ (the quantity behind MLM scoring {cite}`salazar2020mlmscoring`).
# On a window of the real model we can compute both exactly: freeze a
# context, free three adjacent sites, let each take one of the same $K$
# tokens (the context's own and the model's most likely ones there), and
# renormalise the model's conditionals over those $K$. The chain then has
# $K^3$ states and its kernel is exact.

# %%
free = [5, 6, 7]
token_set = ch.window_token_set(cond, contexts.tokens[0], free,
                                cfg.window_tokens)
window = ch.RestrictedConditionals(cond, contexts.tokens[0], free,
                                   token_set)
laws = {}
for tau in (1.0, 2.0):
    laws[tau] = (gc.exact_stationary(window, 3, tau),
                 ch.pseudo_likelihood_law(window, 3, tau))
compare = pd.DataFrame([
    dict(tau=tau, states=len(mu),
         tv=float(gc.total_variation(mu.log(), pl.log())),
         spearman=spearmanr(mu, pl).statistic,
         top_state_same=bool(mu.argmax() == pl.argmax()))
    for tau, (mu, pl) in laws.items()])
compare.to_csv(out / "stationary_vs_pl.csv", index=False)
for row in compare.itertuples():
    bt.glue(f"ch2_window_tau{row.tau:g}",
            f"TV {row.tv:.2f}, Spearman {row.spearman:.2f}, "
            f"{'same' if row.top_state_same else 'different'} top state")
print(f"{window.forwards} model rows for {len(token_set)}^3 states; "
      f"context: {cond.decode(contexts.tokens[0])!r}")
compare.round(4)

# %% [markdown]
# How the two laws compare on the window: at $\tau = 1$,
# {glue:text}`ch2_window_tau1`; at $\tau = 2$, {glue:text}`ch2_window_tau2`.
# Below, the most likely window fillings under each law at $\tau = 1$ (the
# union of each law's top five). The two laws need not agree even on the
# most likely state: the pseudo-likelihood rewards fillings whose every
# token is well predicted by the others, while $\mu_\tau$ also weighs how
# the chain flows between fillings.

# %%
mu, pl = laws[1.0]
window_states = gc.all_states(len(token_set), 3)
top = torch.cat([mu.topk(5).indices, pl.topk(5).indices]).unique()
top_states = pd.DataFrame({
    "filling": [cond.decode(token_set[window_states[s]]) for s in top],
    "mu_tau": mu[top].numpy(), "pseudo_likelihood": pl[top].numpy(),
}).sort_values("mu_tau", ascending=False)
top_states.to_csv(out / "window_top_states.csv", index=False)
top_states.round(4)

# %% [markdown]
# The same comparison on Potts chains, where we can dial the
# incompatibility: $J = S + a A$ with $S$ symmetric and $A$ antisymmetric.
# At $a = 0$ the chain samples the Gibbs law of $S$ exactly, and even then
# that law is not the pseudo-likelihood law; the figure follows both
# distances as $a$ grows.

# %%
sym, anti = (raw + raw.T) / 2, (raw - raw.T) / 2
gibbs = gc.PottsConditionals(sym, field, 3).joint_log_probs(1.0)[1].exp()
rows = []
for a in np.linspace(0, 2, 9):
    potts = gc.PottsConditionals(sym + a * anti, field, 3)
    mu_a = gc.exact_stationary(potts, 5, 1.0)
    rows.append(dict(
        asymmetry=a,
        tv_pseudo_likelihood=float(gc.total_variation(
            mu_a.log(), ch.pseudo_likelihood_law(potts, 5, 1.0).log())),
        tv_gibbs_of_symmetric_part=float(
            gc.total_variation(mu_a.log(), gibbs.log()))))
asymmetry = pd.DataFrame(rows)
asymmetry.to_csv(out / "potts_asymmetry.csv", index=False)
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(asymmetry.asymmetry, asymmetry.tv_pseudo_likelihood, "o-",
        label=r"TV($\mu_\tau$, pseudo-likelihood law)")
ax.plot(asymmetry.asymmetry, asymmetry.tv_gibbs_of_symmetric_part, "s--",
        label=r"TV($\mu_\tau$, Gibbs law of $S$)")
ax.set(xlabel=r"asymmetry $a$ in $J = S + aA$",
       ylabel="total variation", ylim=(0, None),
       title=r"Potts chain, 5 sites, 3 colours, $\tau = 1$")
ax.legend()
plt.show()
for a in (0, 2):
    row = asymmetry[np.isclose(asymmetry.asymmetry, a)].iloc[0]
    bt.glue(f"ch2_potts_a{a}",
            f"{row.tv_gibbs_of_symmetric_part:.2g} from the Gibbs law of S "
            f"and {row.tv_pseudo_likelihood:.2f} from the pseudo-likelihood")

# %% [markdown]
# In total variation $\mu_\tau$ lies {glue:text}`ch2_potts_a0` law at
# $a = 0$, and {glue:text}`ch2_potts_a2` law at $a = 2$.
#
# ## Claims checked in this chapter
#
# Verdict rules, applied in the code below:
# - $\alpha(10)$ and $\alpha(11)$: *reproduced* if the smallest temperature
#   on our grid with context-averaged $\hat\alpha < 1$ lies within a factor
#   2 of the paper's threshold (10.5, so between 5.25 and 21), else
#   *differs*.
# - '!'-basin drift: *reproduced* if every sampled boundary state has
#   $\delta_\tau > 0$ (the paper: all 200), else *differs*.
# - Tightness of Theorem 5 (beyond the paper): *reproduced* if the bound is
#   at least the exact $t_{\mathrm{mix}}$ on every Potts chain and
#   temperature with $\alpha < 1$; the number is the median ratio.
# - $\mu_\tau$ against the pseudo-likelihood law (beyond the paper):
#   *reproduced* if the total variation at $\tau = 1$ exceeds 0.05, that
#   is, if the law the chain samples is measurably not the law its
#   conditionals suggest.

# %%
PAPER_THRESHOLD = 10.5
alpha_ok = PAPER_THRESHOLD / 2 <= tau_star <= 2 * PAPER_THRESHOLD


def verdict(ok):
    return "reproduced" if ok else "differs"


claims = []
for tau, paper in [(10.0, 1.04), (11.0, 0.94)]:
    row = alpha[np.isclose(alpha.tau, tau)].iloc[0]
    claims.append(dict(
        claim=f"alpha_tau{tau:g}", table="paper",
        quantity=f"alpha({tau:g}), context-averaged (paper {paper})",
        ours=row.alpha_mean,
        ours_text=f"{row.alpha_mean:.2f} (max over contexts "
                  f"{row.alpha_max:.2f})",
        verdict=verdict(alpha_ok),
        reason=f"ours crosses 1 at tau {tau_star:g}, paper at 10-11"))
for tau, d in zip(drift_taus, drift):
    share = (d > 0).double().mean().item()
    claims.append(dict(
        claim=f"basin_drift_tau{tau:g}", table="paper",
        quantity=f"share of '!' boundary states with drift > 0, tau {tau:g}",
        ours=share,
        ours_text=f"{int((d > 0).sum())}/{len(d)} positive, median "
                  f"{d.median().item():.3f}",
        verdict=verdict(share == 1.0),
        reason="paper: 200/200 positive"))
claims.append(dict(
    claim="exact_bound_tightness", table="beyond",
    quantity="median Theorem 5 bound / exact t_mix(1/4), Potts, alpha < 1",
    ours=tight.ratio.median(),
    ours_text=f"{tight.ratio.median():.1f} ({tight.ratio.min():.1f}-"
              f"{tight.ratio.max():.1f}, {len(tight)} cases)",
    verdict=verdict(bound_holds),
    reason=f"bound >= exact t_mix in every case: {bound_holds}"))
tv1 = compare.set_index("tau").tv[1.0]
claims.append(dict(
    claim="mu_vs_pseudolikelihood_tv", table="beyond",
    quantity="TV(mu_tau, pseudo-likelihood law), window chain, tau 1",
    ours=tv1, ours_text=f"{tv1:.3f} over {len(mu)} states",
    verdict=verdict(tv1 > 0.05),
    reason=f"Spearman {compare.spearman.iloc[0]:.2f} between the laws"))
claims = bt.claims_frame(claims, model_name, cfg.profile)
claims.to_csv(out / "claims.csv", index=False)
for row in claims.itertuples():
    bt.glue(f"ch2_verdict_{row.claim}", row.verdict)
bt.glue("ch2_window_phrase", "is measurably not" if tv1 > 0.05
        else "is within 0.05 in total variation of")
claims[["claim", "ours_text", "verdict", "reason"]]

# %% [markdown]
# ## What this shows
#
# The paper's influence estimate on BERT crosses 1 between $\tau = 10$ and
# 11; ours crosses at $\tau$ = {glue:text}`ch2_tau_star`, so by the
# factor-2 rule the verdict is *{glue:text}`ch2_verdict_alpha_tau10`*. The
# bundled model is a small encoder trained on news, not BERT; rerun with
# `model="bert-base-uncased"` to test the paper's own numbers. Lemma 6 has
# {glue:text}`ch2_lemma6_violations` violations (any would be a bug). The
# exact Potts checks put numbers on what the paper could only call loose:
# Theorem 5 overshoots the true mixing time by a median factor
# {glue:text}`ch2_t5_ratio` where it applies at all, and Theorem 8's
# mixing-time bound falls short by a factor from {glue:text}`ch2_t8_tmix`.
# The '!'-basin drift certificate {glue:text}`ch2_drift_phrase` for our
# model (verdict *{glue:text}`ch2_verdict_basin_drift_tau1`*; the paper:
# 200 of 200 positive). Finally, the law the chain samples
# {glue:text}`ch2_window_phrase` the pseudo-likelihood law of its
# conditionals: on the real model's window at $\tau = 1$,
# {glue:text}`ch2_window_tau1`; for the Potts chains, see the figure above.
