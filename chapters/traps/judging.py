"""Chapter 5's judging: one estimator + rule per general claim (appendix A.1, Table 4, C.2, C.3), each judged at
the paper's temperature only with `verdicts.py`'s rules, and the claims rows with their text.
(tests/test_calibration_traps.py runs each on ground-truth chains through these very functions.)"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from book_tools import claim_row, interval_text, model_specific_row, paper_claim, parse_pairs, share_text
from verdicts import (
    DIFFERS,
    INCONCLUSIVE,
    NOT_RUN,
    REPRODUCED,
    finite,
    mean_interval,
    rule_both_kinds,
    rule_every_part,
    rule_one_sided,
    rule_share_above_chance,
    share_intervals,
)

from .protocol import PAPER_TAU, paper_counts
from .science import trap_summary

# "Near the start" for cold_chains_stay, fixed before any run: the paper's own drift threshold for a chain
# that does not move (appendix A.1), read from paper_claims.csv. A cold temperature reproduces the claim when the
# upper 95% bound of its chains' mean distance from the start lies below it, and differs when the lower bound
# lies above it.
NEAR_START = float(parse_pairs(paper_claim("trap_split")["protocol"])["threshold"])


# A metastable trap outlasts what the detector gives a chain without collective persistence by at least this
# factor (fixed before any run). The null chain's ratio is 1 in expectation, so "differs" (the interval at or
# below the factor) is reachable on a chain whose traps the detector alone explains.
DURATION_FACTOR = 2.0


TRAP_CLAIMS = ("trap_split", "approximate_trap_duration", "mean_gap_correlation", "escape_weakest_site")


def _count_text(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def judge_split(traps: pd.DataFrame) -> tuple[str, str, str]:
    """trap_split on one temperature's traps: rule_both_kinds. (verdict, reason, ours_text)."""
    count, perfect = len(traps), int((traps.kind == "perfect").sum())
    verdict, reason = rule_both_kinds(perfect, count)
    text = (
        f"{perfect} perfect, {count - perfect} approximate of {_count_text(count, 'trap')}"
        if count
        else "no trap was detected"
    )
    return verdict, reason, text


def judge_approximate_duration(
    traps: pd.DataFrame, null, *, seed: int = 0, resamples: int = 4000
) -> tuple[str, str, float, float, float]:
    """approximate_trap_duration on one temperature's traps: the mean duration of the approximate traps that
    ended inside the run (censored ones excluded: their duration is a lower bound, and a trap that never
    escapes is stable, not metastable) over the mean duration of the ended traps the detector finds on the
    run's persistence_surrogate (`null`: null_durations), with a 95% percentile bootstrap interval (both sets
    resampled), against DURATION_FACTOR by rule_one_sided. (verdict, reason, ratio, low, high)."""
    ended = (
        traps[(traps.kind == "approximate") & ~traps.censored].duration.to_numpy(float) if len(traps) else np.empty(0)
    )
    null = np.asarray(null, float)
    nan3 = (math.nan,) * 3
    if len(ended) == 0:
        kept = int((traps.kind == "approximate").sum()) if len(traps) else 0
        why = (
            f"{_count_text(kept, 'approximate trap')}, none ended inside the run" if kept else "zero approximate traps"
        )
        return INCONCLUSIVE, f"{why}: a run with approximate traps that escape would decide it", *nan3
    if len(null) == 0:
        return (
            INCONCLUSIVE,
            "the detector found no ended trap on the surrogate without collective persistence: "
            "no null duration to compare with; a longer run would give one",
            *nan3,
        )
    ratio = float(ended.mean() / null.mean())
    if len(ended) < 2 or len(null) < 2:
        return (
            INCONCLUSIVE,
            f"{len(ended)} ended approximate trap(s) and {len(null)} null trap(s): at least 2 of each give an interval",
            ratio,
            math.nan,
            math.nan,
        )
    rng = np.random.default_rng(seed)
    boot = ended[rng.integers(0, len(ended), (resamples, len(ended)))].mean(1) / null[
        rng.integers(0, len(null), (resamples, len(null)))
    ].mean(1)
    low, high = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
    verdict, reason = rule_one_sided(low, high, DURATION_FACTOR, "above", events=len(ended), estimate=ratio)
    return (
        verdict,
        (f"{len(ended)} ended approximate traps against {len(null)} null traps, ratio {ratio:.2f}: " + reason),
        ratio,
        low,
        high,
    )


def judge_gap_correlation(traps: pd.DataFrame, *, seed: int = 0) -> tuple[str, str, dict]:
    """mean_gap_correlation on one temperature's traps, gaps unscaled: trap_summary's Spearman difference
    rho(duration, mean gap) - rho(duration, min gap) with its bootstrap interval, against 0 by rule_one_sided.
    (verdict, reason, summary)."""
    s = trap_summary(traps, 1, 1, seed=seed)
    if not finite(s["rho_difference"], s["difference_low"], s["difference_high"]):
        return (
            INCONCLUSIVE,
            f"{_count_text(len(traps), 'trap')}: a rank correlation needs at least 3 traps with "
            "varying durations and gaps; a run with more traps would decide it",
            s,
        )
    verdict, reason = rule_one_sided(
        s["difference_low"], s["difference_high"], 0.0, "above", events=len(traps), estimate=s["rho_difference"]
    )
    return verdict, reason, s


def judge_weakest_site(traps: pd.DataFrame) -> tuple[str, str, int, int, float, float, float]:
    """escape_weakest_site on one temperature's traps: the FINAL escapes (escape_events: the departure that
    ended the trap's last visit to its held state, selected by what followed it) at a weakest-gap site,
    against the kernel's share at those held states (the mean kernel_share over the escaped traps: what a
    departure drawn by the one-step law alone would give) by rule_share_above_chance; censored traps (still
    held at the run's end) have no final escape. Every departure follows
    the kernel's law, so the share of all departures is the kernel's by construction; a final escape is the
    departure the chain did not undo, and can come at the weakest site more (or less) often.
    (verdict, reason, hits, tries, chance, low, high)."""
    escaped = traps[traps.escaped & ~traps.censored] if len(traps) else traps  # the trap ended in the run
    hits, tries = (int(escaped.at_weakest.sum()), len(escaped)) if len(escaped) else (0, 0)
    chance = (
        float(np.nanmean(escaped.kernel_share.to_numpy(float)))
        if tries and np.isfinite(escaped.kernel_share.to_numpy(float)).any()
        else math.nan
    )
    if not tries or not finite(chance):
        return (
            INCONCLUSIVE,
            "zero escapes: no trap ended inside the run; a run with escapes would decide it",
            hits,
            tries,
            chance,
            math.nan,
            math.nan,
        )
    verdict, reason, low, high = rule_share_above_chance(hits, tries, chance)
    return verdict, reason, hits, tries, chance, low, high


def judge_cold(cold: pd.DataFrame, near: float = NEAR_START) -> tuple[str, str, list[dict]]:
    """cold_chains_stay: per cold temperature, the chains' mean distance from their start with its 95% t
    interval; reproduced when the upper bound lies below `near`, differs when the lower bound lies above it
    (rule_one_sided, direction below), every temperature combined by rule_every_part. The distance may be an
    embedding's cosine distance or site_embeddings' Hamming share. (verdict, reason, one dict per tau)."""
    parts = []
    for tau, group in cold.groupby("temperature", sort=False):
        mean, low, high = mean_interval(group.distance.to_numpy(float))
        if not finite(low, high):
            verdict, reason = INCONCLUSIVE, f"{len(group)} chain(s): too few for an interval; 2 or more decide it"
        else:
            verdict, reason = rule_one_sided(low, high, near, "below", estimate=mean)
        parts.append(
            dict(tau=float(tau), chains=len(group), mean=mean, low=low, high=high, verdict=verdict, reason=reason)
        )
    if not parts:
        return INCONCLUSIVE, "no cold run", parts
    verdict, reason = rule_every_part([p["verdict"] for p in parts], [f"τ={p['tau']:g}" for p in parts])
    return verdict, f"near the start = below {near:g}; {reason}", parts


def worst_cold_part(parts: list[dict]) -> dict | None:
    """The cold temperature that decides cold_chains_stay: a differing one first, then an undecided one, then
    the one with the largest upper bound (None with no part)."""
    order = {DIFFERS: 0, INCONCLUSIVE: 1}
    return min(
        parts, key=lambda p: (order.get(p["verdict"], 2), -(p["high"] if finite(p["high"]) else math.inf)), default=None
    )


def claim_rows(
    traps: pd.DataFrame,
    summaries: dict,
    cold: pd.DataFrame,
    *,
    model: str,
    setup: dict,
    log_vocab: float,
    window: int,
    null=(),
    paper_tau: float = PAPER_TAU,
    seed: int = 0,
) -> list[dict]:
    """Every claims row of the chapter (appendix A.1, Table 4, C.2, C.3), each judged on the traps of the
    paper's temperature only (other temperatures are the chapter's own labelled table rows, not verdicts); with
    no run at that temperature the trap rows are "not run here". `null`: null_durations of the run at
    `paper_tau` (approximate_trap_duration's null). The model-specific rows go through model_specific_row."""
    at = f"τ = {paper_tau:g}"
    here = traps[np.isclose(traps.temperature, paper_tau)] if len(traps) else traps
    ran = paper_tau in summaries
    general = (
        [
            _split_row(here, at),
            _duration_row(here, np.asarray(null, float), window, at, seed),
            _correlation_row(here, at, seed),
            _weakest_row(here, at),
        ]
        if ran
        else _not_run_rows(at)
    )
    summary = summaries.get(paper_tau) or trap_summary(here, 1, 1)
    missing = f"no trap at {at}" if ran else f"no chain at {at}"
    measured = dict(model=model, setup=setup)
    return [
        *general,
        _cold_row(cold),
        _count_row(summary, at, **measured),
        _perfect_share_row(summary, at, missing, **measured),
        _mean_duration_row(summary, at, missing, **measured),
        _below_lnv_row(here, log_vocab, paper_tau, at, missing, **measured),
    ]


def _not_run_rows(at: str) -> list[dict]:
    """The trap claims of a run with no chain at the paper's temperature: not run here."""
    return [
        claim_row(
            claim,
            "—",
            math.nan,
            f"no chain at the paper's {at}",
            NOT_RUN,
            f"the run has no chain at the paper's {at}",
            at,
        )
        for claim in TRAP_CLAIMS
    ]


def _split_row(here: pd.DataFrame, at: str) -> dict:
    """trap_split (judge_split), saying when the run is too small for an absent kind to differ."""
    verdict, reason, text = judge_split(here)
    count, perfect = len(here), int((here.kind == "perfect").sum())
    needed = math.ceil(3.84 / 0.1)  # rule_both_kinds' default rare share
    if verdict != REPRODUCED and 0 < count < needed:
        reason += (
            f"; with {count} < {needed} traps an absent kind cannot reach differs (the paper's own "
            f"{int(paper_counts()['count'])} could not either)"
        )
    return claim_row(
        "trap_split",
        "perfect / all traps",
        perfect / count if count else math.nan,
        text,
        verdict,
        f"at {at}: {reason}",
        at,
    )


def _duration_row(here: pd.DataFrame, null: np.ndarray, window: int, at: str, seed: int) -> dict:
    """approximate_trap_duration (judge_approximate_duration): the ended approximate traps over the null's."""
    verdict, reason, ratio, low, high = judge_approximate_duration(here, null, seed=seed)
    kept = int(((here.kind == "approximate") & ~here.censored).sum()) if len(here) else 0
    counts = f"{_count_text(kept, 'ended approximate trap')}, {len(null)} null traps"
    estimate = interval_text(ratio, low, high, missing="") if finite(low, high) else f"{ratio:.2f}"
    text = f"{estimate} ({counts})" if finite(ratio) else f"not estimated: {counts}"
    return claim_row(
        "approximate_trap_duration",
        "mean ended approximate-trap duration / the detector's on a "
        f"surrogate without collective persistence (window {window} steps)",
        ratio,
        text,
        verdict,
        f"at {at}, null a ratio of {DURATION_FACTOR:g}: {reason}",
        at,
        low=low,
        high=high,
        null=DURATION_FACTOR,
    )


def _correlation_row(here: pd.DataFrame, at: str, seed: int) -> dict:
    """mean_gap_correlation (judge_gap_correlation): rho(duration, mean gap) - rho(duration, min gap)."""
    verdict, reason, s = judge_gap_correlation(here, seed=seed)
    value = s["rho_difference"]
    if finite(value):
        minus = f"({s['rho_min']:.2f})" if s["rho_min"] < 0 else f"{s['rho_min']:.2f}"
        text = f"{s['rho_mean']:.2f} - {minus} = " + interval_text(
            value, s["difference_low"], s["difference_high"], missing="the bootstrap gave no interval"
        )
    else:
        text = f"not estimated: {_count_text(len(here), 'trap')} at {at}"
    return claim_row(
        "mean_gap_correlation",
        "ρ(duration, mean gap) - ρ(duration, min gap)",
        value,
        text,
        verdict,
        f"at {at}, gaps unscaled, null 0: {reason}",
        at,
        low=s["difference_low"],
        high=s["difference_high"],
        null=0.0,
    )


def _weakest_row(here: pd.DataFrame, at: str) -> dict:
    """escape_weakest_site (judge_weakest_site): final escapes at a weakest site against the kernel's share."""
    verdict, reason, hits, tries, chance, low, high = judge_weakest_site(here)
    text = (
        share_text(hits, tries) + f" final escapes at a weakest site; kernel's share {chance:.2f}"
        if tries
        else "no trap ended inside the run"
    )
    return claim_row(
        "escape_weakest_site",
        "share of final escapes from the held state at a weakest site",
        hits / tries if tries else math.nan,
        text,
        verdict,
        f"at {at}, null the kernel's one-step share at the held states: {reason}",
        at,
        low=low,
        high=high,
        null=chance,
    )


def _cold_row(cold: pd.DataFrame) -> dict:
    """cold_chains_stay (judge_cold), shown at its worst cold temperature with that temperature's interval."""
    verdict, reason, parts = judge_cold(cold)
    text = "; ".join(
        f"τ={p['tau']:g}: " + interval_text(p["mean"], p["low"], p["high"], digits=3, missing=f"{p['chains']} chain(s)")
        for p in parts
    )
    worst = worst_cold_part(parts) or dict(mean=math.nan, low=math.nan, high=math.nan)
    return claim_row(
        "cold_chains_stay",
        "mean distance from the start after the cold run, at the worst "
        "cold temperature" + (f" (τ = {worst['tau']:g})" if parts else ""),
        worst["mean"],
        text or "no cold run",
        verdict,
        reason,
        ", ".join(f"τ = {p['tau']:g}" for p in parts) or "—",
        low=worst["low"],
        high=worst["high"],
        null=NEAR_START,
    )


def _count_row(s: dict, at: str, *, model: str, setup: dict) -> dict:
    """trap_count (Table 4): the traps found, with an exact Poisson interval over the run's exposure."""
    found, exposure = s["count"], setup["chains"] * setup["steps"] / 10_000
    low, high = s["rate_low"] * exposure, s["rate_high"] * exposure
    text = f"{found} (95% Poisson {low:.1f} to {high:.1f}; rate {s['rate_per_10k']:.2f} per chain per 10k steps)"
    return model_specific_row(
        "trap_count", f"traps detected at {at}", found, text, model=model, setup=setup, low=low, high=high
    )


def _perfect_share_row(s: dict, at: str, missing: str, *, model: str, setup: dict) -> dict:
    """perfect_trap_share (Table 4): perfect traps among all, with a Wilson interval."""
    text = share_text(s["perfect"], s["count"]) if s["count"] else missing
    return model_specific_row(
        "perfect_trap_share",
        f"perfect / all traps at {at}",
        s["perfect_share"],
        text,
        model=model,
        setup=setup,
        low=s["perfect_low"],
        high=s["perfect_high"],
    )


def _mean_duration_row(s: dict, at: str, missing: str, *, model: str, setup: dict) -> dict:
    """trap_mean_duration (Table 4): the mean duration in steps, with a bootstrap interval."""
    text = interval_text(s["mean_duration"], s["duration_low"], s["duration_high"], digits=0, missing=missing)
    return model_specific_row(
        "trap_mean_duration",
        f"mean trap duration at {at} (steps)",
        s["mean_duration"],
        text,
        model=model,
        setup=setup,
        low=s["duration_low"],
        high=s["duration_high"],
    )


def _below_lnv_row(
    here: pd.DataFrame, log_vocab: float, tau: float, at: str, missing: str, *, model: str, setup: dict
) -> dict:
    """delta_star_below_lnv (A.1): the share of traps whose Delta*/tau is below ln|V|, with a Wilson interval."""
    count = len(here)
    if not count:
        return model_specific_row(
            "delta_star_below_lnv",
            f"share of traps at {at} with Δ*/τ < ln|V|",
            math.nan,
            missing,
            model=model,
            setup=setup,
        )
    below = int(((here.min_gap / tau) < log_vocab).sum())
    low, high = (float(v[0]) for v in share_intervals([below], [count]))
    text = share_text(below, count) + f" (ln|V| = {log_vocab:.2f}, largest Δ*/τ {here.min_gap.max() / tau:.2f})"
    return model_specific_row(
        "delta_star_below_lnv",
        f"share of traps at {at} with Δ*/τ < ln|V|",
        below / count,
        text,
        model=model,
        setup=setup,
        low=low,
        high=high,
    )
