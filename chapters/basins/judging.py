"""Chapter 4's judging (section 6.2): the per-topic and per-claim verdicts, built from `verdicts.py`'s rules
(rule_one_sided per comparison, rule_every_part over comparisons or topics, each part also judged at
every_part_level(K) for its differs side; rule_reversion on a protein model),
and the claims rows with their text."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

import book_tools as bt
from verdicts import (
    every_part_level,
    excess_rise_interval,
    finite,
    rule_every_part,
    rule_median_sign,
    rule_one_sided,
    rule_recurrence,
    rule_reversion,
)

from .reversion import reversion_ends
from .science import seed_loss_intervals

_TIES = "every chain ties the median"

# --------------------------------------------------------------------------------------------
# The verdicts of section 6.2's general claims (rules: verdicts.py)
# --------------------------------------------------------------------------------------------


def recurrence_verdict(crossings: pd.DataFrame, chance_target, baseline: float) -> dict:
    """The politics-recurrence verdict by verdicts.rule_recurrence: per chain seeded outside politics
    (crossing_frame), the share of its looks with politics above `baseline` against the other labels' mean
    share on the same looks (paired) and against the share of basin-free texts above it (`chance_target`:
    their politics scores). Returns rule_recurrence's dict."""
    chance_above = np.asarray(chance_target, dtype=float) > baseline
    return rule_recurrence(crossings.target_share, crossings.control_share, chance_above)


def rise_frame(means: pd.DataFrame) -> pd.DataFrame:
    """Table 3a per seed topic of chain_means (chains outside the target's): the target's mean rise from the start
    over every look after it, the other labels' (their mean), and the target's rise beyond theirs paired per chain
    (verdicts.excess_rise_interval on the start and the mean over the looks, t interval over the topic's chains).
    A topic is reproduced when that interval lies above 0 (rule_one_sided): the target gains more than the other
    labels do on the same chains and looks; differs when it lies at or below 0. `corrected`: the same rule on the interval at
    every_part_level(K), K the number of topics (rule_every_part's differs side). Columns chains, rise,
    control_rise, excess, excess_low, excess_high, verdict, corrected, reason."""
    level = every_part_level(max(means.seed_topic.nunique(), 1))
    rows = []
    for topic, group in means.groupby("seed_topic", sort=False):
        scores = (group.target_start, group.target_mean, group.control_start, group.control_mean)
        excess, wide = excess_rise_interval(*scores), excess_rise_interval(*scores, level=level)
        verdict, reason = rule_one_sided(excess[1], excess[2], 0.0, "above", estimate=excess[0])
        rows.append(
            {
                "seed topic": topic,
                "chains": len(group),
                "rise": float((group.target_mean - group.target_start).mean()),
                "control_rise": float((group.control_mean - group.control_start).mean()),
                "excess": excess[0],
                "excess_low": excess[1],
                "excess_high": excess[2],
                "verdict": verdict,
                "corrected": rule_one_sided(wide[1], wide[2], 0.0, "above")[0],
                "reason": reason,
            }
        )
    columns = [
        "chains",
        "rise",
        "control_rise",
        "excess",
        "excess_low",
        "excess_high",
        "verdict",
        "corrected",
        "reason",
    ]
    return pd.DataFrame(rows, columns=["seed topic", *columns]).set_index("seed topic")


def rises_verdict(rises: pd.DataFrame) -> tuple[str, str]:
    """politics_rises_every_topic: rule_every_part over the seed topics of rise_frame (each topic at 95%, and at
    every_part_level(K) for differs)."""
    return rule_every_part(rises.verdict.tolist(), rises.index.tolist(), corrected=rises.corrected.tolist())


def ends_verdict(ranks: pd.Series) -> dict:
    """politics_ends_above_basin_free (beyond the paper): do chains seeded outside politics hold more politics
    than basin-free text along their run? Per chain (look_ranks), the mean over its looks after the start of the
    share of basin-free texts scoring politics higher (a rank comparison the skew of the scores cannot tip), then
    verdicts.rule_median_sign over all those chains: reproduced when the share of chains above the median of
    basin-free text (a mean rank share below 1/2) has its Wilson interval above 1/2 (null: they read like it),
    differs at or below 1/2. Returns {"verdict", "reason", "share": (share, low, high)}."""
    verdict, reason, *share = rule_median_sign(np.asarray(ranks, dtype=float), "above")
    return {"verdict": verdict, "reason": reason, "share": tuple(share)}


def seed_loss_verdict(loss: dict) -> tuple[str, str]:
    """The seed-topic-loss verdict on seed_loss_intervals' fall (section 6.2.1: seed-topic scores "fall sharply"):
    verdicts.rule_one_sided on the t interval of the mean fall of the seed label's score from the start to the
    last state (null: no fall). Reproduced when it lies above 0, differs at or below 0 (the chains keep or gain
    their topic), inconclusive otherwise. Word salad is the level the fall is read against, shown, not judged:
    the share of chains ending below basin-free text's median (seed_loss_intervals' "beyond"). Returns
    (verdict, reason)."""
    fall, beyond = loss["fall"], loss["beyond"]
    verdict, reason = rule_one_sided(fall[1], fall[2], 0.0, "above", estimate=fall[0])
    salad = bt.interval_text(*beyond, missing=_TIES)
    return verdict, f"fall from the start: {reason}; beside word salad: chains ending below its median {salad}"


def seed_loss_frame(seed_topic, start, end, chance_end) -> pd.DataFrame:
    """seed_loss_intervals and seed_loss_verdict per seed topic (the paper: seed-topic scores fall "in
    every case"): seed_topic [C] names each chain's topic; start, end [C] and chance_end [M, C] as in
    seed_loss_intervals. `corrected`: the fall's verdict at every_part_level(K), K the number of topics
    (rule_every_part's differs side). Columns chains, fall, fall_low, fall_high, beyond, beyond_low, beyond_high,
    verdict, corrected, reason; one row per seed topic, in order of first appearance."""
    seed_topic = np.asarray(list(seed_topic), dtype=object)
    start, end, chance_end = (np.asarray(v, dtype=float) for v in (start, end, chance_end))
    if seed_topic.shape != start.shape or chance_end.ndim != 2 or chance_end.shape[1] != len(seed_topic):
        raise ValueError(
            f"need seed_topic, start and end [C] and chance_end [M, C] of one length C, got "
            f"{seed_topic.shape}, {start.shape}, {chance_end.shape}"
        )
    topics = list(dict.fromkeys(seed_topic))
    level = every_part_level(max(len(topics), 1))
    rows = []
    for topic in topics:
        at = seed_topic == topic
        loss = seed_loss_intervals(start[at], end[at], chance_end[:, at])
        wide = seed_loss_intervals(start[at], end[at], chance_end[:, at], level)["fall"]
        verdict, reason = seed_loss_verdict(loss)
        rows.append(
            {
                "seed topic": topic,
                "chains": int(at.sum()),
                **dict(zip(("fall", "fall_low", "fall_high"), loss["fall"])),
                **dict(zip(("beyond", "beyond_low", "beyond_high"), loss["beyond"])),
                "verdict": verdict,
                "corrected": rule_one_sided(wide[1], wide[2], 0.0, "above")[0],
                "reason": reason,
            }
        )
    columns = [
        "chains",
        "fall",
        "fall_low",
        "fall_high",
        "beyond",
        "beyond_low",
        "beyond_high",
        "verdict",
        "corrected",
        "reason",
    ]
    return pd.DataFrame(rows, columns=["seed topic", *columns]).set_index("seed topic")


def seed_loss_topics_verdict(losses: pd.DataFrame) -> tuple[str, str]:
    """seed_topic_loss: rule_every_part over the seed topics of seed_loss_frame (rule_one_sided on each topic's
    fall at 95%, and at every_part_level(K) for differs)."""
    return rule_every_part(losses.verdict.tolist(), losses.index.tolist(), corrected=losses.corrected.tolist())


# --------------------------------------------------------------------------------------------
# The chapter's claims rows and the text they carry
# --------------------------------------------------------------------------------------------


_MISSING = "fewer than two chains: no estimate"


def _recurrence_text(crossings: pd.DataFrame, recurrence: dict, target: str) -> str:
    if crossings.empty:
        return f"no chain seeded outside {target} in this run"
    return (
        f"share of a chain's looks above 1/L: {target} {crossings.target_share.mean():.2f}, the other labels "
        f"{crossings.control_share.mean():.2f}, basin-free text {recurrence['chance_share']:.2f}; {target} "
        f"minus the others {bt.interval_text(*recurrence['label'], signed=True, missing=_MISSING)}, minus "
        f"basin-free text {bt.interval_text(*recurrence['chance'], signed=True, missing=_MISSING)}"
    )


def _rises_text(rises: pd.DataFrame, target: str) -> str:
    return (
        "; ".join(
            f"{topic}: {target} {r.rise:+.3f}, the others {r.control_rise:+.3f}, beyond the others "
            f"{bt.interval_text(r.excess, r.excess_low, r.excess_high, digits=3, signed=True, missing=_MISSING)}"
            for topic, r in rises.iterrows()
        )
        or f"no seed topic outside {target} in this run"
    )


def _ends_text(ranks: pd.Series, verdict: dict, target: str) -> str:
    if ranks.empty:
        return f"no chain seeded outside {target} in this run"
    share = bt.interval_text(*verdict["share"], digits=2, missing=_TIES)
    return (
        f"share of chains whose {target} lies above the median of basin-free text over their looks {share} "
        f"({len(ranks)} chains)"
    )


def _loss_text(loss: pd.DataFrame) -> str:
    return (
        "; ".join(
            f"{topic}: fall from the start "
            f"{bt.interval_text(r.fall, r.fall_low, r.fall_high, digits=3, signed=True, missing=_MISSING)} (chains "
            f"ending below word salad's median {bt.interval_text(r.beyond, r.beyond_low, r.beyond_high, missing=_TIES)})"
            for topic, r in loss.iterrows()
        )
        or "no seed topic in this run"
    )


def _peak_text(crossings: pd.DataFrame, target: str) -> str:
    if crossings.empty:
        return f"no chain seeded outside {target} was scored after its start"
    return f"{float(crossings.target_peak.max()):.3f}"


def _recurrence_row(crossings: pd.DataFrame, recurrence: dict, target: str, quantity: str) -> dict:
    """politics_recurrence: the weaker of the two differences (recurrence_verdict) as the estimate."""
    weaker = min((recurrence["label"], recurrence["chance"]), key=lambda v: v[1] if finite(v[1]) else -math.inf)
    return bt.claim_row(
        "politics_recurrence",
        quantity,
        weaker[0],
        _recurrence_text(crossings, recurrence, target),
        recurrence["verdict"],
        recurrence["reason"],
        low=weaker[1],
        high=weaker[2],
        null=0.0,
    )


def _rises_row(rises: pd.DataFrame, target: str, quantity: str) -> dict:
    """politics_rises_every_topic: the number of seed topics reproduced, judged by rises_verdict."""
    return bt.claim_row(
        "politics_rises_every_topic",
        quantity,
        int((rises.verdict == bt.REPRODUCED).sum()),
        _rises_text(rises, target),
        *rises_verdict(rises),
    )


def _ends_row(ranks: pd.Series, verdict: dict, target: str, quantity: str) -> dict:
    """politics_ends_above_basin_free: the share of chains above basin-free text's median over their looks
    (ends_verdict)."""
    estimate, low, high = verdict["share"]
    return bt.claim_row(
        "politics_ends_above_basin_free",
        quantity,
        estimate,
        _ends_text(ranks, verdict, target),
        verdict["verdict"],
        verdict["reason"],
        low=low,
        high=high,
        null=0.5,
    )


def _loss_row(loss: pd.DataFrame, quantity: str) -> dict:
    """seed_topic_loss: the number of seed topics reproduced, judged by seed_loss_topics_verdict."""
    return bt.claim_row(
        "seed_topic_loss",
        quantity,
        int((loss.verdict == bt.REPRODUCED).sum()),
        _loss_text(loss),
        *seed_loss_topics_verdict(loss),
    )


def _count_row(crossings: pd.DataFrame, recurrence: dict, *, setup: dict, model: str) -> dict:
    """politics_recurrence_count (BERT's 46 of 50): the share of non-politics chains ever above 1/9."""
    chains, crossed = len(crossings), int(crossings.target_crossed.sum()) if len(crossings) else 0
    low, high = (float(v[0]) for v in bt.share_intervals([crossed], [chains])) if chains else (math.nan, math.nan)
    text = (
        f"{crossed} of {chains} non-politics chains" if chains else _recurrence_text(crossings, recurrence, "politics")
    )
    return bt.model_specific_row(
        "politics_recurrence_count",
        "share of non-politics chains ever above 1/9 politics",
        crossed / chains if chains else math.nan,
        text,
        model=model,
        setup=setup,
        low=low,
        high=high,
    )


def _peak_row(crossings: pd.DataFrame, *, setup: dict, model: str) -> dict:
    """politics_peak (BERT's 0.979): the highest politics score after the start."""
    peak = float(crossings.target_peak.max()) if len(crossings) else math.nan
    return bt.model_specific_row(
        "politics_peak",
        "highest politics score after step 0, non-politics chains",
        peak,
        _peak_text(crossings, "politics"),
        model=model,
        setup=setup,
        low=peak,
        high=peak,
    )


def _endpoint_row(table3: pd.DataFrame, baseline: float, *, setup: dict, model: str, target: str = "politics") -> dict:
    """Table 5's endpoint comparison (B.5) as a model-specific claims row: how many seed topics other
    than the target end, on average over their chains, above the baseline. table3: endpoint_frame;
    setup: our protocol items (chains per topic are read from table3)."""
    ends = table3.drop(index=target, errors="ignore")[f"{target} at end"]
    chains = sorted(set(table3.chains.astype(int)))
    per_topic = str(chains[0]) if len(chains) == 1 else f"{chains[0]}-{chains[-1]}"
    # Table 5 counts chains per topic and reports endpoints only: no total, no recording interval
    setup = {**{k: v for k, v in setup.items() if k not in ("chains", "record_every")}, "chains_per_topic": per_topic}
    quantity = (
        f"seed topics other than {target} whose chains' mean {target} score at the last step is above "
        f"{baseline:.3f} (Table 5)"
    )
    if ends.empty:
        return bt.model_specific_row(
            "endpoint_topics_crossing",
            quantity,
            math.nan,
            f"no seed topic outside {target} in this run",
            model=model,
            setup=setup,
        )
    marks = ", ".join(f"{topic} {value:.2f}{' ✓' if value > baseline else ''}" for topic, value in ends.items())
    above = int((ends > baseline).sum())
    return bt.model_specific_row(
        "endpoint_topics_crossing",
        quantity,
        above,
        f"{above} of {len(ends)} topics ({marks})",
        model=model,
        setup=setup,
        low=above,
        high=above,
    )


def claim_rows(
    crossings: pd.DataFrame,
    recurrence: dict,
    rises: pd.DataFrame,
    ranks: pd.Series,
    ends_judged: dict,
    loss: pd.DataFrame,
    table5: pd.DataFrame | None = None,
    *,
    setup: dict,
    model: str,
    baseline: float | None = None,
) -> list[dict]:
    """The chapter's claims rows (section 6.2): the three general claims of the paper and ours beyond it
    (politics holds above basin-free text), then BERT's politics count and peak and (given table5,
    endpoint_frame, and the baseline 1/L) Table 5's endpoint row.

    crossings: crossing_frame; recurrence: recurrence_verdict's dict; rises: rise_frame; ranks: look_ranks;
    ends_judged: ends_verdict's dict; loss: seed_loss_frame (per seed topic); setup: run_setup's protocol items.
    A protein model's rows are reversion_rows'."""
    target = "politics"
    rows = [
        _recurrence_row(
            crossings,
            recurrence,
            target,
            "politics minus the other labels' mean, and minus basin-free text, in the share of a "
            "chain's looks above 1/L (chains seeded outside politics; the weaker difference)",
        ),
        _rises_row(
            rises,
            target,
            "per seed topic outside politics: mean over its chains of politics' rise from the start, over "
            "every look after it, minus the other labels' mean rise",
        ),
        _ends_row(
            ranks,
            ends_judged,
            target,
            "share of chains seeded outside politics whose politics, over their looks after the start, lies "
            "above the median of basin-free text (mean rank share below 1/2; sign test, null 1/2)",
        ),
        _loss_row(
            loss,
            "per seed topic: mean fall of the seed label's score from the start to the last state (t interval "
            "over the topic's chains, null 0), read beside word salad (the share of chains ending below the "
            "median of basin-free text)",
        ),
        _count_row(crossings, recurrence, setup=setup, model=model),
        _peak_row(crossings, setup=setup, model=model),
    ]
    if table5 is not None:
        rows.append(_endpoint_row(table5, baseline, setup=setup, model=model))
    return rows


# --------------------------------------------------------------------------------------------
# A protein model's basin: germline reversion (reversion.py; ours, beyond the paper)
# --------------------------------------------------------------------------------------------


# germline_reversion's temperatures, fixed before any run (PROTEIN_SETTINGS' grid at quick and paper), each its own
# claim of paper_claims.csv; a temperature outside them is shown, not judged
REVERSION_CLAIMS = {0.5: "germline_reversion_tau05", 1.0: "germline_reversion_tau10", 2.0: "germline_reversion_tau20"}


def reversion_verdict(frame: pd.DataFrame) -> dict:
    """germline_reversion by verdicts.rule_reversion at each temperature of REVERSION_CLAIMS that was run: the
    `difference` (reverted share of the visited mutated sites minus left share of the visited unmutated framework
    sites) at the last step of reversion_frame, of every chain with k >= 1 substitutions and a mutated site
    visited, against its no-pull value 2/|V| - 1 (|V|: the frame's `alphabet`). Returns rule_reversion's dict."""
    ends = reversion_ends(frame)
    ends = ends[ends.substitutions > 0]
    ran = set(frame.temperature)
    differences = {t: ends.difference[ends.temperature == t].to_numpy() for t in REVERSION_CLAIMS if t in ran}
    return rule_reversion(differences, int(frame.alphabet.iloc[0]))


def _reversion_text(ends: pd.DataFrame, part: dict, alphabet: int) -> str:
    """A temperature's shares and difference in words, each beside its no-pull value."""
    tau = part["temperature"]
    if ends.empty:
        return "no chain with a substitution in this run"
    chains = ends[(ends.temperature == tau) & (ends.mutated_visited > 0)]
    if chains.empty:
        return f"τ = {tau:g}: no chain drew a mutated site"
    interval = bt.interval_text(part["estimate"], part["low"], part["high"], signed=True, missing=_MISSING)
    return (
        f"τ = {tau:g}: reverted {chains.reverted_share.mean():.2f} (no pull {1 / alphabet:.2f}), left "
        f"{chains.left_share.mean():.2f} (no pull {1 - 1 / alphabet:.2f}), difference {interval} against "
        f"{2 / alphabet - 1:+.2f} ({len(chains)} chains with a drawn mutated site, {int(ends.context.iloc[0])} residues)"
    )


def reversion_rows(frame: pd.DataFrame, judged: dict, steps: int) -> list[dict]:
    """The chapter's claims on a protein model (the politics rows have no residue counterpart): one
    germline_reversion row a judged temperature (REVERSION_CLAIMS; reversion_verdict's parts), its estimate the
    mean difference with its t interval, its null the no-pull value."""
    context, alphabet = int(frame.context.iloc[0]), int(frame.alphabet.iloc[0])
    counts = ", ".join(str(k) for k in sorted(frame.substitutions[frame.substitutions > 0].unique())) or "no"
    ends = reversion_ends(frame)
    ends = ends[ends.substitutions > 0]
    rows = []
    for part in judged["parts"]:
        quantity = (
            f"at τ = {part['temperature']:g}: mean over chains (human germline V genes of {context} residues from FR1, "
            f"k = {counts} IMGT framework substitutions, every site free) of the share of its mutated sites back at "
            f"the germline residue after {steps:,} steps minus the share of its unmutated framework sites off it, "
            f"both over the sites it updated (t interval; null {judged['null']:+.2f}, no pull: each of the "
            f"{alphabet} residues drawn alike)"
        )
        rows.append(
            bt.claim_row(
                REVERSION_CLAIMS[part["temperature"]],
                quantity,
                part["estimate"],
                _reversion_text(ends, part, alphabet),
                part["verdict"],
                part["reason"],
                low=part["low"],
                high=part["high"],
                null=judged["null"],
            )
        )
    return rows
