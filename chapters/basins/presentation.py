"""Chapter 4's presentation: the display tables (`*_view`), the figures (`*_figure`) and the glue values its
prose quotes (`*_text`). Nothing here changes a number the chapter saves or a verdict."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from verdicts import every_part_level, finite

from .judging import _ends_text, _loss_text, _peak_text, _rises_text
from .science import leading_label_shares
from .scorer import (
    BBC_TOPIC_LABELS,
    TOPIC_LABELS,
    _cut_name,
    confusion_frame,
    topic_descriptions,
)

# --------------------------------------------------------------------------------------------
# The tables a reader sees
# --------------------------------------------------------------------------------------------


def labels_view(labels=tuple(TOPIC_LABELS)):
    """The topic labels, their descriptions (what the embedding scorer compares a text with) and the BBC
    topic each stands for."""
    bbc = {label: topic for topic, label in BBC_TOPIC_LABELS.items()}
    descriptions = topic_descriptions(labels)
    return bt.reading_table(
        pd.DataFrame(
            {
                "label": list(descriptions),
                "description": descriptions.values(),
                "BBC topic": [bbc.get(k, "—") for k in descriptions],
            }
        )
    )


def accuracy_view(accuracy: pd.DataFrame):
    """accuracy_frame's table for the page: shares as percentages."""
    shares = {c: "{:.0%}" for c in accuracy.columns if c not in ("paragraphs", "cuts")}
    return bt.reading_table(accuracy.reset_index(), formats=shares)


def table3_view(table3: pd.DataFrame, target: str = "politics"):
    """Table 3 (recurrence_frame, with the seed label's score on basin-free text) for the page: per seed
    topic, the target's and the seed label's mean score from start to end, the chains crossing the
    baseline, the target's peak and the seed label's mean score on basin-free text."""

    def arrow(start, end):
        return [f"{a:.3f} → {b:.3f}" for a, b in zip(table3[start], table3[end])]

    view = pd.DataFrame(
        {
            "seed topic (label)": [f"{t} ({k})" for t, k in zip(table3.index, table3["seed label"])],
            f"{target}, start → end": arrow(f"{target} at start", f"{target} at end"),
            "seed label, start → end": arrow("seed score at start", "seed score at end"),
            "chains crossing": [f"{c} of {n}" for c, n in zip(table3["chains crossing"], table3.chains)],
            f"peak {target}": table3[f"peak {target}"].to_numpy(),
            "seed label, basin-free text": table3["seed score, basin-free text"].to_numpy(),
        }
    )
    return bt.reading_table(view, formats={"seed label, basin-free text": "{:.3f}", f"peak {target}": "{:.3f}"})


def recurrence_view(
    crossings: pd.DataFrame, recurrence: dict, chance_texts: int, labels: int, target: str = "politics"
):
    """The politics looks against chance: per row (the target on our chains, the other labels on the same looks,
    averaged over them, the target on basin-free text) how many chains or texts, the mean share of looks above
    1/L and the share ever above it (no such share for single texts)."""
    above = f"1/{labels}"
    view = pd.DataFrame(
        {
            "": [f"{target}, our chains", "other labels (mean), same chains and looks", f"{target}, basin-free text"],
            "chains or texts": [len(crossings)] * 2 + [chance_texts],
            f"share of looks above {above}": [
                crossings.target_share.mean(),
                crossings.control_share.mean(),
                recurrence["chance_share"],
            ],
            f"ever above {above}": [crossings.target_crossed.mean(), crossings.control_crossed.mean(), math.nan],
        }
    )
    return bt.reading_table(view, formats={c: "{:.2f}" for c in view.columns[2:]})


def _interval_column(
    frame: pd.DataFrame, estimate: str, low: str, high: str, digits: int, signed: bool = True
) -> list[str]:
    return [
        bt.interval_text(r[estimate], r[low], r[high], digits=digits, signed=signed, missing="fewer than two chains")
        for _, r in frame.iterrows()
    ]


def rises_view(rises: pd.DataFrame, target: str = "politics"):
    """Table 3a (rise_frame) for the page: per seed topic, the mean rise of the target and of the other labels
    (from the start, over every look after it), the target's rise beyond theirs (paired per chain) with its 95%
    interval, and
    the topic's verdict at 95% and at every_part_level(K) (the level at which a topic can make the claim differ)."""
    view = pd.DataFrame(
        {
            "seed topic": rises.index,
            "chains": rises.chains.to_numpy(),
            f"{target} rise": [f"{v:+.3f}" for v in rises.rise],
            "other labels' rise": [f"{v:+.3f}" for v in rises.control_rise],
            "beyond the others": _interval_column(rises, "excess", "excess_low", "excess_high", 3),
            **_verdicts_column(rises),
        }
    )
    return bt.reading_table(view)


def loss_view(loss: pd.DataFrame):
    """seed_loss_frame for the page: per seed topic, the seed label's fall from the start (the topic's verdict is
    judged on it, null 0) and, beside it, the word-salad level it is read against: the share of its chains ending
    below the median of basin-free text (shown, not judged), each with its 95% interval; the topic's verdict at 95%
    and at every_part_level(K), the level at which a topic can make the claim differ."""
    view = pd.DataFrame(
        {
            "seed topic": loss.index,
            "chains": loss.chains.to_numpy(),
            "fall from the start": _interval_column(loss, "fall", "fall_low", "fall_high", 3),
            **_verdicts_column(loss),
            "beside word salad: chains ending below its median": _interval_column(
                loss, "beyond", "beyond_low", "beyond_high", 2, signed=False
            ),
        }
    )
    return bt.reading_table(view)


def _verdicts_column(frame: pd.DataFrame) -> dict:
    """A per-topic table's verdicts at 95% and at every_part_level(K) (rule_every_part's differs side), one column."""
    heading = f"verdict at 95% / at {every_part_level(max(len(frame), 1)):.2%}"
    return {heading: [f"{a} / {b}" for a, b in zip(frame.verdict, frame.corrected)]}


def overall_view(overall: pd.DataFrame, target: str = "politics", top: int = 5):
    """leading_label_shares over all chains (one row) for the page: the `top` labels that lead most often
    and the target, with their shares of the recorded states."""
    shares = overall.iloc[0].sort_values(ascending=False)
    keep = list(shares.index[:top]) + ([target] if target not in shares.index[:top] else [])
    view = pd.DataFrame({"leading label": keep, "share of recorded states": shares[keep].to_numpy()})
    return bt.reading_table(view, formats={"share of recorded states": "{:.0%}"})


def endpoints_view(endpoints: pd.DataFrame):
    """One example endpoint per prefix run (the prefix is part of the text)."""
    return bt.reading_table(endpoints.groupby("prefix", sort=False).endpoint.first().reset_index())


# --------------------------------------------------------------------------------------------
# The chapter's figures
# --------------------------------------------------------------------------------------------


def confusion_figure(check: pd.DataFrame, labels):
    """The scorer check as confusion heatmaps, one per text length (true BBC topic's label against the
    predicted label). Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    names = list(topic_descriptions(labels))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (length, part) in zip(axes, check.groupby("length")):
        table = confusion_frame(part.label, torch.tensor(part[names].to_numpy()), names)
        table = table.loc[list(BBC_TOPIC_LABELS.values())]
        sns.heatmap(table, annot=True, fmt="d", cmap="Blues", cbar=False, ax=ax)
        ax.set(title=f"held-out BBC, {length}", xlabel="predicted label", ylabel="true label (BBC topic)")
    fig.tight_layout()
    return fig


def leading_figure(shares: pd.DataFrame, cfg: SimpleNamespace):
    """leading_label_shares per seed topic as a heatmap. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(9, 3.6))
    sns.heatmap(
        shares,
        annot=True,
        fmt=".2f",
        cmap="rocket_r",
        vmin=0,
        vmax=1,
        ax=ax,
        cbar_kws={"label": "share of recorded states"},
    )
    ax.set(
        xlabel="leading label",
        ylabel="seed topic",
        title=f"Leading topic label along the chains (steps 1 to {cfg.steps:,}, tau = {cfg.temperature:g})",
    )
    return fig


def mean_scores_figure(frame: pd.DataFrame, cfg: SimpleNamespace):
    """Mean topic score over all chains along the run, per label, with the baseline 1/L. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    path = frame.melt(
        id_vars=["chain", "step", "seed_topic"], value_vars=cfg.labels, var_name="label", value_name="score"
    )
    fig, ax = plt.subplots(figsize=(9, 4))
    sns.lineplot(data=path, x="step", y="score", hue="label", palette="tab10", errorbar=None, ax=ax)
    ax.axhline(cfg.baseline, color="grey", ls="--", lw=1, label=f"baseline 1/{len(cfg.labels)}")
    ax.set(xlabel="Glauber step $t$", ylabel="mean topic score", title="Mean topic scores over all chains")
    ax.legend(ncol=2, fontsize=8)
    return fig


def pca_figure(paths: dict, steps, seed_topic):
    """pca_paths drawn side by side: consecutive states joined, coloured from warm (early) to cool
    (late) by Glauber step, first and last state marked. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(paths), figsize=(6 * len(paths), 5), squeeze=False)
    for ax, (chain, path) in zip(axes[0], paths.items()):
        xy = path.xy
        ax.plot(xy[:, 0], xy[:, 1], color="grey", lw=0.4, alpha=0.5)
        dots = ax.scatter(xy[:, 0], xy[:, 1], c=np.asarray(steps), cmap="coolwarm_r", s=14, alpha=0.6)
        ax.set(
            xlabel=f"PC 1 ({path.explained[0]:.0%} of variance)",
            ylabel=f"PC 2 ({path.explained[1]:.0%})",
            title=f"chain {chain} ({seed_topic[chain]}): {len(set(path.texts))} distinct of {len(path.texts)} states",
        )
        ax.scatter(*xy[0], marker="o", s=90, facecolor="none", color="k", label="first state")
        ax.scatter(*xy[-1], marker="X", s=90, color="k", label="last state")
        ax.legend(loc="best", fontsize=8)
        fig.colorbar(dots, ax=ax, label="Glauber step")
    fig.tight_layout()
    return fig


def prefix_figure(mix: pd.DataFrame):
    """The topic mix of the free part per frozen prefix (C.4) and its change against no prefix, as two
    heatmaps. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    sns.heatmap(mix, annot=True, fmt=".2f", cmap="rocket_r", vmin=0, ax=axes[0], cbar=False)
    sns.heatmap(mix - mix.loc["(none)"], annot=True, fmt="+.2f", cmap="vlag", center=0, ax=axes[1], cbar=False)
    axes[0].set(title="mean topic score of the free part, second half", xlabel="", ylabel="frozen prefix")
    axes[1].set(title="change against no prefix", xlabel="label", ylabel="frozen prefix")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# The values its prose quotes (glue)
# --------------------------------------------------------------------------------------------


def scorer_check_text(check: pd.DataFrame, accuracy: pd.DataFrame, n: int, target: str = "politics") -> dict:
    """Glue values for the scorer check (bbc_check_frame with n-token snippets): accuracy on snippets and whole
    paragraphs, the share of the scorer's mistakes on non-`target` snippets that go to `target`, and
    where its misses on `target` snippets went."""
    cut_name = _cut_name(n)
    snips = check[check.length == cut_name]
    wrong = snips[snips.predicted != snips.label]
    others_wrong = wrong[wrong.label != target]
    misses = wrong[wrong.label == target].predicted.value_counts()
    return {
        "acc_cut": f"{accuracy.accuracy[cut_name]:.0%}",
        "acc_whole": f"{accuracy.accuracy['whole paragraph']:.0%}",
        "errors_to_politics": (
            "none (it made none)" if others_wrong.empty else f"{(others_wrong.predicted == target).mean():.0%}"
        ),
        "politics_misread_as": ", ".join(f"{k} ({v})" for k, v in misses.head(3).items()) or "none",
    }


def trajectory_text(paths: dict, every: int) -> dict:
    """Glue values for the PCA section (pca_paths): records drawn, distinct states among them, and what
    repeats mean."""
    records = sum(len(p.texts) for p in paths.values())
    distinct = sum(len(set(p.texts)) for p in paths.values())
    repeats = records - distinct
    return {
        "pca_records": f"{records:,}",
        "pca_distinct": f"{distinct:,}",
        "pca_every": f"{every}",
        "pca_repeats": (
            "no recorded state repeats: at this temperature the chains do not sit in exact traps between records"
        )
        if not repeats
        else (f"{repeats} records repeat an earlier state of their chain: exact traps, drawn as dark, tight clusters"),
    }


def verdict_text(
    crossings: pd.DataFrame,
    recurrence: dict,
    rises: pd.DataFrame,
    ranks: pd.Series,
    ends_judged: dict,
    loss: pd.DataFrame,
    target: str = "politics",
) -> dict:
    """Glue values for the prose around the verdicts (the verdicts themselves are glued by the claims):
    chains crossing the baseline, the look shares, the peak, chains ever above 0.5, the per-topic
    rise and loss texts and the chains' politics against basin-free text over their looks."""
    chains = len(crossings)
    crossed = int(crossings.target_crossed.sum()) if chains else 0
    label_crossed = crossings.control_crossed.mean() if chains else math.nan
    strong = int((crossings.target_peak > 0.5).sum()) if chains else 0
    politics, control = (
        (crossings.target_share.mean(), crossings.control_share.mean()) if chains else (math.nan, math.nan)
    )
    return {
        "crossed": f"{crossed} of {chains}",
        "label_crossed": f"{label_crossed:.0%}" if chains else "none",
        "share_politics": f"{politics:.2f}",
        "share_control": f"{control:.2f}",
        "share_chance": f"{recurrence['chance_share']:.2f}",
        "peak": _peak_text(crossings, target),
        "strong": f"{strong} of {chains}",
        "rises": _rises_text(rises, target),
        "ends": _ends_text(ranks, ends_judged, target),
        "seed_loss": _loss_text(loss),
    }


def summary_text(
    table3: pd.DataFrame,
    frame: pd.DataFrame,
    labels,
    mix: pd.DataFrame,
    *,
    q: float,
    looks: int,
    by_chance: float,
    run: str,
    target: str = "politics",
) -> dict:
    """Glue values for the chapter's closing section: seed-topic falls, politics at the start, the
    chance of a crossing, the leading labels over all chains and the prefix shifts (mix: the prefix runs' topic
    mix, "(none)" the run without a prefix)."""
    names = list(topic_descriptions(labels))
    rest = table3.drop(index=target, errors="ignore")
    falls = rest.index[rest["seed score at end"] < rest["seed score at start"]]
    own_start = table3.loc[target, "seed score at start"] if target in table3.index else math.nan
    other_start = rest["seed score at start"].mean()
    overall = (
        leading_label_shares(frame[frame.step > frame.step.min()].assign(chains="all"), names, by="chains")
        .loc["all"]
        .sort_values(ascending=False)
    )
    rank = list(overall.index).index(target) + 1
    shift = (mix - mix.loc["(none)"]).drop(index="(none)")
    kid = [p for p in shift.index if "little kid" in p.lower()]
    return {
        "run": run,
        "seed_falls": f"{len(falls)} of the {len(rest)} non-{target} seed topics ({', '.join(falls) or 'none'})",
        "politics_seed": (
            f"no chain is seeded from {target} in this run"
            if not finite(own_start)
            else f"the {target} row starts from a mean seed-label score of {own_start:.2f}, against "
            f"{other_start:.2f} for the other topics' own labels "
            f"({'lower' if own_start < other_start else 'not lower'})"
        ),
        "false_alarm": f"{q:.0%}",
        "records": f"{looks}",
        "by_chance": f"{by_chance:.2f}",
        "top_labels": ", ".join(f"{k} ({v:.0%})" for k, v in overall.head(3).items()),
        "politics_lead": f"{overall[target]:.0%}",
        "politics_rank": "the label that leads most often" if rank == 1 else f"number {rank} of {len(names)} labels",
        "prefix_gains": "; ".join(f'"{p}": {shift.loc[p].idxmax()} ({shift.loc[p].max():+.2f})' for p in shift.index)
        or "no prefix run",
        "kid_politics": f"{shift.loc[kid[0], target]:+.2f}" if kid else "not measured (no such prefix in this run)",
    }
