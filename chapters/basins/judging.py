"""Chapter 4's judging (section 6.2): the per-topic and per-claim verdicts, built from `verdicts.py`'s rules
(rule_one_sided per comparison, rule_every_part over comparisons or topics), and the claims rows with their text."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

import book_tools as bt
from verdicts import INCONCLUSIVE, finite, mean_interval, rule_every_part, rule_one_sided

from .science import seed_loss_intervals, welch_interval
from .scorer import BBC_TOPIC_LABELS, FAMILY_TARGET

# --------------------------------------------------------------------------------------------
# The verdicts of section 6.2's general claims (rules: verdicts.py)
# --------------------------------------------------------------------------------------------


def recurrence_verdict(crossings: pd.DataFrame, chance_target, baseline: float) -> dict:
    """The politics-recurrence verdict, per chain and below ceiling. Two comparisons, each judged by
    verdicts.rule_one_sided against 0 and combined by rule_every_part (reproduced when both are,
    differs when either differs):
    (a) politics against another label: the mean over chains of target_share - control_share (the
        share of a chain's records above the baseline for the target minus that for its control label,
        paired on the same chain and records), Student's t interval;
    (b) politics against basin-free text: mean target_share minus the share of chance texts
        (chance_tokens, scored the same way: `chance_target` holds their target scores) above the
        baseline, Welch's interval.
    Returns {"verdict", "reason", "label": (est, low, high), "chance": (est, low, high), "chance_share"}."""
    chance = np.asarray(chance_target, dtype=float) > baseline
    nothing = (math.nan,) * 3
    if len(crossings) < 2:
        return {
            "verdict": INCONCLUSIVE,
            "reason": "fewer than two chains seeded outside politics: no interval",
            "label": nothing,
            "chance": nothing,
            "chance_share": float(chance.mean()) if len(chance) else math.nan,
        }
    share = crossings.target_share.to_numpy(dtype=float)
    label = mean_interval(share - crossings.control_share.to_numpy(dtype=float))
    against = welch_interval(share, chance.astype(float))
    parts, reasons = [], []
    for name, (estimate, low, high) in (("vs a control label", label), ("vs basin-free text", against)):
        verdict, reason = rule_one_sided(low, high, 0.0, "above", estimate=estimate)
        parts.append(verdict)
        reasons.append(f"{name}: {estimate:+.2f}, {reason}" if math.isfinite(estimate) else f"{name}: {reason}")
    verdict, tally = rule_every_part(parts, ["vs a control label", "vs basin-free text"])
    return {
        "verdict": verdict,
        "reason": f"{tally}; " + "; ".join(reasons),
        "label": label,
        "chance": against,
        "chance_share": float(chance.mean()),
    }


def rise_frame(
    frame: pd.DataFrame, chance_target, target: str = "politics", seed_labels: dict | None = None
) -> pd.DataFrame:
    """Table 3a per seed topic outside `target`'s: the target score's mean rise from the first to the
    last step over the topic's chains (t interval) and its mean at the last step minus its mean on
    basin-free text (`chance_target`: the chance texts' target scores; Welch's interval). A part is
    reproduced when both lie above 0 (rule_every_part over the two rule_one_sided verdicts): a rise
    that dissolving into word salad explains does not count. Columns chains, rise, rise_low,
    rise_high, end_vs_chance, end_low, end_high, verdict, reason."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    missing = [c for c in ("chain", "step", "seed_topic", target) if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"frame must be non-empty with columns chain, step, seed_topic, {target}; missing {missing}")
    first, last = frame.step.min(), frame.step.max()
    rows = []
    for topic, group in frame[frame.seed_topic.map(seed_labels) != target].groupby("seed_topic", sort=False):
        start = group[group.step == first].set_index("chain")[target]
        end = group[group.step == last].set_index("chain")[target].reindex(start.index)
        rise, versus = mean_interval(end - start), welch_interval(end, chance_target)
        verdicts = [rule_one_sided(v[1], v[2], 0.0, "above", estimate=v[0]) for v in (rise, versus)]
        verdict, reason = rule_every_part([v for v, _ in verdicts], ["rise from the start", "end vs chance"])
        rows.append(
            {
                "seed topic": topic,
                "chains": len(start),
                "rise": rise[0],
                "rise_low": rise[1],
                "rise_high": rise[2],
                "end_vs_chance": versus[0],
                "end_low": versus[1],
                "end_high": versus[2],
                "verdict": verdict,
                "reason": reason,
            }
        )
    columns = ["chains", "rise", "rise_low", "rise_high", "end_vs_chance", "end_low", "end_high", "verdict", "reason"]
    return pd.DataFrame(rows, columns=["seed topic", *columns]).set_index("seed topic")


def rises_verdict(rises: pd.DataFrame) -> tuple[str, str]:
    """politics_rises_every_topic: rule_every_part over the seed topics of rise_frame."""
    return rule_every_part(rises.verdict.tolist(), rises.index.tolist())


def seed_loss_verdict(loss: dict) -> tuple[str, str]:
    """The seed-topic-loss verdict: verdicts.rule_one_sided on the interval of the share of basin-free
    texts scoring the seed label higher than the chain's last state, against 0.5 (the chain ends no
    further from its topic than word salad). Reproduced above 0.5 (the chains end further from their
    topic than salad: they moved on to other readable text); differs at or below 0.5 (they keep their
    topic than salad has); inconclusive when it contains 0.5 (a chain that dissolves into salad)."""
    estimate, low, high = loss["beyond_chance"]
    verdict, reason = rule_one_sided(low, high, 0.5, "above", estimate=estimate)
    fall = loss["fall"]
    words = f"fall from the start {fall[0]:+.3f} [{fall[1]:+.3f}, {fall[2]:+.3f}]; " if finite(*fall) else ""
    return verdict, words + f"chance texts scoring higher: {reason}"


def seed_loss_frame(seed_topic, start, end, chance_end) -> pd.DataFrame:
    """seed_loss_intervals and seed_loss_verdict per seed topic (the paper: seed-topic scores fall "in
    every case"): seed_topic [C] names each chain's topic; start, end [C] and chance_end [M, C] as in
    seed_loss_intervals. Columns chains, fall, fall_low, fall_high, beyond, beyond_low, beyond_high,
    verdict, reason; one row per seed topic, in order of first appearance."""
    seed_topic = np.asarray(list(seed_topic), dtype=object)
    start, end, chance_end = (np.asarray(v, dtype=float) for v in (start, end, chance_end))
    if seed_topic.shape != start.shape or chance_end.ndim != 2 or chance_end.shape[1] != len(seed_topic):
        raise ValueError(
            f"need seed_topic, start and end [C] and chance_end [M, C] of one length C, got "
            f"{seed_topic.shape}, {start.shape}, {chance_end.shape}"
        )
    rows = []
    for topic in dict.fromkeys(seed_topic):
        at = seed_topic == topic
        loss = seed_loss_intervals(start[at], end[at], chance_end[:, at])
        verdict, reason = seed_loss_verdict(loss)
        rows.append(
            {
                "seed topic": topic,
                "chains": int(at.sum()),
                **dict(zip(("fall", "fall_low", "fall_high"), loss["fall"])),
                **dict(zip(("beyond", "beyond_low", "beyond_high"), loss["beyond_chance"])),
                "verdict": verdict,
                "reason": reason,
            }
        )
    columns = ["chains", "fall", "fall_low", "fall_high", "beyond", "beyond_low", "beyond_high", "verdict", "reason"]
    return pd.DataFrame(rows, columns=["seed topic", *columns]).set_index("seed topic")


def seed_loss_topics_verdict(losses: pd.DataFrame) -> tuple[str, str]:
    """seed_topic_loss: rule_every_part over the seed topics of seed_loss_frame (a new rule shape made of
    verdicts' rules: rule_one_sided per topic, combined by rule_every_part)."""
    return rule_every_part(losses.verdict.tolist(), losses.index.tolist())


# --------------------------------------------------------------------------------------------
# The chapter's claims rows and the text they carry
# --------------------------------------------------------------------------------------------


_MISSING = "fewer than two chains: no estimate"


def _protein_quantities(target: str = FAMILY_TARGET, labels: int | None = None) -> dict:
    """The general claims' quantity texts on a protein model: germline families as topics, `target` for
    politics, uniform random residues as basin-free text."""
    scorer = (
        f"topic = nearest human germline family by identity, softmax over {labels or 'the'} families of "
        "the identical-residue count"
    )
    return {
        "politics_recurrence": f"{target} minus a control family, and minus uniform random residues, in the share "
        f"of a chain's looks with {target}'s score above 1/L (chains seeded outside "
        f"{target}; {scorer}; the weaker difference)",
        "politics_rises_every_topic": f"per seed family outside {target}: mean {target} score rise from start "
        f"to end, and end minus uniform random residues ({scorer})",
        "seed_topic_loss": "per seed family: share of uniform random residue strings scoring the seed family "
        f"higher than the chain's last state (mean over its chains; null 0.5; {scorer})",
    }


def _recurrence_text(crossings: pd.DataFrame, recurrence: dict, target: str) -> str:
    if crossings.empty:
        return f"no chain seeded outside {target} in this run"
    return (
        f"share of a chain's looks above 1/L: {target} {crossings.target_share.mean():.2f}, control label "
        f"{crossings.control_share.mean():.2f}, basin-free text {recurrence['chance_share']:.2f}; {target} "
        f"minus control {bt.interval_text(*recurrence['label'], signed=True, missing=_MISSING)}, minus "
        f"basin-free text {bt.interval_text(*recurrence['chance'], signed=True, missing=_MISSING)}"
    )


def _rises_text(rises: pd.DataFrame, target: str) -> str:
    return (
        "; ".join(
            f"{topic}: rise {bt.interval_text(r.rise, r.rise_low, r.rise_high, signed=True, missing=_MISSING)}, "
            f"end minus chance {bt.interval_text(r.end_vs_chance, r.end_low, r.end_high, signed=True, missing=_MISSING)}"
            for topic, r in rises.iterrows()
        )
        or f"no seed topic outside {target} in this run"
    )


def _loss_text(loss: pd.DataFrame) -> str:
    return (
        "; ".join(
            f"{topic}: {bt.interval_text(r.beyond, r.beyond_low, r.beyond_high, digits=2, missing=_MISSING)} (fall "
            f"from the start {bt.interval_text(r.fall, r.fall_low, r.fall_high, digits=3, missing=_MISSING)})"
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
    loss: pd.DataFrame,
    table5: pd.DataFrame | None = None,
    *,
    setup: dict,
    model: str,
    target: str = "politics",
    baseline: float | None = None,
) -> list[dict]:
    """The chapter's claims rows (section 6.2): the three general claims, then, with politics as the
    target, BERT's politics count and peak and (given table5, endpoint_frame, and the baseline 1/L)
    Table 5's endpoint row.

    crossings: crossing_frame; recurrence: recurrence_verdict's dict; rises: rise_frame; loss:
    seed_loss_frame (per seed topic); setup: run_setup's protocol items. Another target (a protein
    model's germline family) keeps the general rows only, worded for families: the model-specific ones
    are BERT's politics numbers, with no counterpart there."""
    quantities = {} if target == "politics" else _protein_quantities(target, setup.get("labels"))
    rows = [
        _recurrence_row(
            crossings,
            recurrence,
            target,
            quantities.get(
                "politics_recurrence",
                "politics minus control label, and minus basin-free text, in the share of a "
                "chain's looks above 1/L (chains seeded outside politics; the weaker difference)",
            ),
        ),
        _rises_row(
            rises,
            target,
            quantities.get(
                "politics_rises_every_topic",
                "per seed topic outside politics: mean politics rise from start to end, and end minus basin-free text",
            ),
        ),
        _loss_row(
            loss,
            quantities.get(
                "seed_topic_loss",
                "per seed topic: share of basin-free texts scoring the seed label higher than the "
                "chain's last state (mean over its chains; null 0.5)",
            ),
        ),
    ]
    if target != "politics":  # BERT's politics count, peak and Table 5: no protein counterpart
        return rows
    rows += [
        _count_row(crossings, recurrence, setup=setup, model=model),
        _peak_row(crossings, setup=setup, model=model),
    ]
    if table5 is not None:
        rows.append(_endpoint_row(table5, baseline, setup=setup, model=model))
    return rows
