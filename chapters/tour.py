"""The quick tour (notebooks/quick_tour): Glauber chains on the bundled model at three temperatures, their drift
from the start (appendix C.3's picture), and a Potts/Ising chain whose stationary law is known exactly.

Imports the core and the book's tools; never another chapter module.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import torch

from book_tools import profile_settings
from glauber_core import PottsConditionals, all_states, glauber

SETTINGS = {
    "smoke": dict(seq_len=12, n_chains=2, steps=20, record_every=5, ising_chains=2_000, temperatures=[0.5, 1.0, 2.0]),
    "quick": dict(
        seq_len=20, n_chains=8, steps=400, record_every=20, ising_chains=20_000, temperatures=[0.5, 1.0, 2.0]
    ),
    "paper": dict(
        seq_len=20, n_chains=100, steps=10_000, record_every=100, ising_chains=200_000, temperatures=[0.5, 1.0, 2.0]
    ),
}
ISING_SITES, ISING_STEPS = 6, 120


def settings(profile: str, cond=None, **overrides) -> SimpleNamespace:
    """The tour's settings at `profile`, each override that is not 0/""/None/[] replacing the profile's
    (`cond`, unused here, keeps the signature every chapter's settings has)."""
    return profile_settings(profile, SETTINGS, **overrides)


def final_distance_frame(distance: pd.DataFrame) -> pd.DataFrame:
    """Distance from the start at the last recorded step, per temperature: chains, mean, min and max."""
    last = distance[distance.step == distance.step.max()]
    table = last.groupby("temperature").distance.agg(["count", "mean", "min", "max"]).reset_index()
    return table.rename(columns={"count": "chains"})


def state_frequencies(states: torch.Tensor, q: int) -> pd.DataFrame:
    """Empirical law of a batch of small states [B, n] over all q^n states (lexicographic order)."""
    n = states.shape[1]
    codes = (states.cpu() * q ** torch.arange(n - 1, -1, -1)).sum(1)
    counts = torch.bincount(codes, minlength=q**n).double() / len(states)
    labels = ["".join(map(str, s)) for s in all_states(q, n).tolist()]
    return pd.DataFrame({"state": labels, "empirical": counts.numpy()})


def ising_check(chains: int, seed: int = 0) -> pd.DataFrame:
    """Glauber dynamics on a 6-site Ising chain with a random symmetric J (compatible conditionals): the
    empirical law of `chains` chains after 120 steps beside the exact Gibbs law pi_1 (section 3)."""
    generator = torch.Generator().manual_seed(seed)
    coupling = torch.randn(ISING_SITES, ISING_SITES, generator=generator, dtype=torch.float64)
    field = 0.5 * torch.randn(ISING_SITES, 2, generator=generator, dtype=torch.float64)
    ising = PottsConditionals((coupling + coupling.T) / 2, field)
    _, log_joint = ising.joint_log_probs(temperature=1.0)
    start = torch.zeros(chains, ISING_SITES, dtype=torch.long)
    final = glauber(ising, start, ISING_STEPS, record_every=ISING_STEPS, progress=False).final
    return state_frequencies(final, 2).assign(exact=log_joint.exp().numpy(), model="Ising, 6 sites")


def drift_figure(distance: pd.DataFrame, cfg):
    """Mean distance from the start per temperature with a 95% band over chains. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(
        data=distance, x="step", y="distance", hue="temperature", palette="viridis", errorbar=("ci", 95), ax=ax
    )
    ax.set(
        xlabel="Glauber step $t$",
        ylabel=r"$d(x_t, x_0) = 1 - \cos(\phi(x_t), \phi(x_0))$",
        title=f"Embedding drift, n = {cfg.seq_len}, {cfg.n_chains} chains per temperature",
    )
    ax.legend(title=r"temperature $\tau$")
    return fig


def ising_figure(check: pd.DataFrame):
    """The 16 likeliest of the 64 states: exact pi_1 beside the chains' empirical law. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    top = check.nlargest(16, "exact").melt(
        id_vars="state", value_vars=["exact", "empirical"], var_name="law", value_name="probability"
    )
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.barplot(data=top, x="state", y="probability", hue="law", ax=ax)
    ax.set(
        xlabel="state (the 16 most likely of 64)",
        ylabel="probability",
        title=r"Ising chain: Glauber empirical law vs exact $\pi_\tau$",
    )
    ax.tick_params(axis="x", rotation=60)
    return fig
