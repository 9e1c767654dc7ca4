"""Chapter 2's judging: the claims rows (alpha_tau10, alpha_tau11, basin_drift_positive,
mu_vs_pseudolikelihood_tv; theorem5_bound_loose's Potts illustration) and the checks rows, each verdict from a
rule of `verdicts.py`, with the words that go into a row's text. Nothing here draws or formats for the page.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from verdicts import (
    check_row,
    control_check,
    finite,
    grid_threshold,
    mean_interval,
    rule_every_part,
    rule_share_above_chance,
    rule_threshold_ratio,
    share_intervals,
)

from .science import (
    CONDITION_FACTOR,
    DRIFT_FILLER,
    DRIFT_INSIDE,
    DRIFT_TEMPERATURES,
    FAST_FACTOR,
    PAPER_TEMPERATURES,
    PL_HIT_CHANCE,
    PL_HIT_FACTOR,
)

# --------------------------------------------------------------------------------------------
# alpha_tau10 and alpha_tau11 (5.2, A.1): model-specific rows
# --------------------------------------------------------------------------------------------


def _alpha_at(alpha: pd.DataFrame, tau: float) -> pd.Series:
    """The row of the alpha table at temperature `tau` (the grid must hold it)."""
    match = alpha[np.isclose(alpha.temperature, tau)]
    if match.empty:
        raise ValueError(f"the temperature grid must contain tau = {tau}")
    return match.iloc[0]


def _alpha_row_text(row: pd.Series) -> str:
    """One alpha estimate in words: the mean over contexts, its bootstrap interval, the maximum over contexts."""
    missing = (
        "one context: no interval"
        if math.isfinite(row.alpha_mean)
        else "no estimate: the influence could not be computed"
    )
    digits = 2 if not abs(row.alpha_mean) < 0.05 else 4  # tiny alphas (near-uniform models) keep digits
    text = bt.interval_text(row.alpha_mean, row.low, row.high, digits=digits, missing=missing)
    if math.isfinite(row.alpha_mean):
        text += f", max over contexts {row.alpha_max:.{digits}f}"
    return text


def _alpha_rows(alpha: pd.DataFrame, model: str, setup: dict) -> list[dict]:
    """alpha_tau10 and alpha_tau11 (5.2, A.1): our lower-bound estimate at tau = 10 and 11 beside the paper's,
    each a model-specific row (judged only on the paper's model and protocol, else "other setup")."""
    rows = []
    for tau in PAPER_TEMPERATURES:
        row = _alpha_at(alpha, tau)
        rows.append(
            bt.model_specific_row(
                f"alpha_tau{tau}",
                f"alpha({tau}), mean over contexts (lower bound), bootstrap over contexts",
                row.alpha_mean,
                _alpha_row_text(row),
                model=model,
                setup=dict(setup, tau=tau),
                low=row.low,
                high=row.high,
            )
        )
    return rows


# --------------------------------------------------------------------------------------------
# theorem5_bound_loose: tau_alpha against tau_fast per chain, by verdicts.rule_threshold_ratio
# --------------------------------------------------------------------------------------------


def threshold_frame(profiles: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR):
    """Per chain: the grid's bracket on tau_fast and tau_alpha, the ratio's bounds and the chain's verdict."""
    rows = []
    for name, profile in profiles.groupby("chain", sort=False):
        ordered = profile.sort_values("temperature")
        _, fast_first = grid_threshold(ordered.temperature, ordered.t_mix <= fast * ordered.t_independent)
        alpha_before, alpha_first = grid_threshold(ordered.temperature, ordered.alpha < 1)
        verdict, reason, low, high = condition_thresholds(profile, fast, factor)
        rows.append(
            dict(
                chain=name,
                tau_fast=fast_first,
                tau_alpha=alpha_first,
                tau_alpha_above=alpha_before,
                ratio_low=low,
                ratio_high=high,
                verdict=verdict,
            )
        )
    return pd.DataFrame(rows)


def condition_thresholds(profile: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR):
    """One chain's profile judged by verdicts.rule_threshold_ratio: the reference condition is fast mixing
    (exact t_mix within `fast` times the independent-sites time), the claimed one alpha < 1."""
    ordered = profile.sort_values("temperature")
    quick = (ordered.t_mix <= fast * ordered.t_independent).to_numpy()
    return rule_threshold_ratio(
        ordered.temperature.to_numpy(),
        quick,
        (ordered.alpha < 1).to_numpy(),
        factor,
        names=("fast mixing", "alpha < 1"),
    )


def _ratio_text(row) -> str:
    """One chain's tau_alpha / tau_fast as the grid brackets it, in words (a `threshold_frame` row)."""
    return (
        "no fast temperature on the grid"
        if not finite(row.ratio_low)
        else "alpha < 1 on the whole grid"
        if row.tau_alpha_above == 0
        else f"at least {row.ratio_low:.2g}"
        if math.isinf(row.ratio_high)
        else f"{row.ratio_low:.2g} to {row.ratio_high:.2g}"
    )


def _theorem5_row(profiles: pd.DataFrame, fast: float = FAST_FACTOR, factor: float = CONDITION_FACTOR) -> dict:
    """theorem5_bound_loose on exact Potts chains, chapter 2's illustration (the paper's point in 5.2 and A.1:
    alpha < 1 needs tau > 10 on BERT, while the chain already mixes fast near tau = 1.5); the claim itself is
    judged on the model, in chapter 3, so this row is shown in the text, not written to claims.csv. On each enumerable chain (`profiles`: one
    `mixing_profile` per value of its `chain` column), tau_fast, the temperature from which the exact
    t_mix(1/4) stays within `fast` times the independent-sites time, against tau_alpha, the one from which the
    exact alpha stays below 1. Null: tau_alpha / tau_fast at most `factor`. Each chain by
    verdicts.rule_threshold_ratio (reproduced when the grid's lower bound on the ratio exceeds `factor`;
    differs when its upper bound does not, or alpha < 1 already wherever the chain mixes fast), the claim by
    verdicts.rule_every_part over the chains."""
    quantity = f"tau_alpha / tau_fast on exact chains (fast: t_mix(1/4) within {fast:g}x the independent sites' time)"
    table = threshold_frame(profiles, fast, factor)
    texts = [f"{row.chain}: {_ratio_text(row)}" for row in table.itertuples()]
    # each chain's ratio is read off exact t_mix and alpha (computed, not sampled): no part has a sampling
    # interval to correct for multiplicity, so the corrected verdicts are the verdicts themselves
    verdicts = table.verdict.tolist()
    verdict, reason = rule_every_part(verdicts, table.chain.tolist(), corrected=verdicts)
    estimate = float(table.ratio_low.min()) if len(table) and table.ratio_low.notna().all() else math.nan
    return bt.claim_row(
        "theorem5_bound_loose",
        quantity,
        estimate,
        "; ".join(texts) or "no chain",
        verdict,
        f"{reason}; null: ratio at most {factor:g}",
        null=factor,
    )


# --------------------------------------------------------------------------------------------
# mu_vs_pseudolikelihood_tv and basin_drift_positive
# --------------------------------------------------------------------------------------------


def _pseudo_likelihood_row(gaps, floors, dtypes) -> dict:
    """mu_vs_pseudolikelihood_tv, a general claim (beyond the paper): the model's incompatibility moves its
    pseudo-likelihood law away from the one of the law its chain samples. Per window an exact pl_gap =
    TV(PL law of the model, PL law of mu_tau's own conditionals), 0 up to the window's rounding floor
    (`floors`, pl_gap_floor with the epsilon of `dtypes`, the dtype each window's scores were computed in: a
    network's fp32 logits give a far higher floor than fp64 ones) for every compatible chain and never negative.
    A window is a hit when its gap exceeds PL_HIT_FACTOR times its floor; the claim is judged by
    verdicts.rule_share_above_chance on the share of hits against PL_HIT_CHANCE = 1/2 (reproduced when its Wilson
    interval lies above 1/2, differs when at or below, inconclusive when it contains 1/2). The mean gap with its
    t interval over windows is shown beside it, and the row names the floors and their dtypes."""
    values, floors = np.asarray(gaps, dtype=float), np.asarray(floors, dtype=float)
    keep = np.isfinite(values)
    values, floors, dtypes = values[keep], floors[keep], np.asarray(dtypes, dtype=str)[keep]
    quantity = (
        f"share of windows whose TV(PL law of model, PL law of mu's own conditionals) (exact) exceeds "
        f"{PL_HIT_FACTOR:g}x its rounding floor (Wilson interval), tau 1"
    )
    hits = int((values > PL_HIT_FACTOR * floors).sum())
    verdict, reason, low, high = rule_share_above_chance(hits, len(values), PL_HIT_CHANCE)
    if len(values) == 0:
        return bt.claim_row(
            "mu_vs_pseudolikelihood_tv", quantity, math.nan, "no window could be solved", verdict, reason
        )
    mean, mean_low, mean_high = mean_interval(values)
    share = bt.interval_text(hits / len(values), low, high, missing="no window")
    gap = f"{mean:.2g} [{mean_low:.2g}, {mean_high:.2g}]" if finite(mean_low) else f"{mean:.2g} (one window)"
    text = (
        f"{hits} of {len(values)} windows above {PL_HIT_FACTOR:g}x their rounding floors, share {share} "
        f"(floors {floors.min():.2g}-{floors.max():.2g} from {' and '.join(sorted(set(dtypes)))}'s epsilon); "
        f"mean gap {gap}"
    )
    return bt.claim_row(
        "mu_vs_pseudolikelihood_tv",
        quantity,
        hits / len(values),
        text,
        verdict,
        reason + " (a compatible chain's gap is 0 up to rounding, so none of its windows is a hit; an incompatible "
        "chain whose mu has full support has a gap above 0 unless its product of conditionals is proportional to "
        "mu's, so the claim restates incompatibility on the windows)",
        low=low,
        high=high,
        null=PL_HIT_CHANCE,
    )


def _drift_row(drift: torch.Tensor | None, model: str, setup: dict, missing: str = "") -> dict:
    """basin_drift_positive (5.4, Table 2), model-specific: the SHARE of sampled boundary states with
    delta_tau > 0 at every temperature run, with its Wilson interval, judged against the paper's band (a share)
    only on the paper's model and protocol (bt.model_specific_row), else "other setup"."""
    quantity = "share of boundary states with drift > 0 at every temperature run (Wilson interval)"
    if drift is None or drift.numel() == 0:
        return bt.model_specific_row(
            "basin_drift_positive",
            quantity,
            math.nan,
            missing or "not measured on this model",
            model=model,
            setup=setup,
        )
    positive = int((drift > 0).all(0).sum())
    states = drift.shape[1]
    low, high = (float(v[0]) for v in share_intervals([positive], [states]))
    text = f"{bt.share_text(positive, states)} positive at every temperature (min drift {drift.min().item():.3f})"
    return bt.model_specific_row(
        "basin_drift_positive", quantity, positive / states, text, model=model, setup=setup, low=low, high=high
    )


# --------------------------------------------------------------------------------------------
# The chapter's claims and checks rows
# --------------------------------------------------------------------------------------------


def _window_checks(table: pd.DataFrame | None) -> list[dict]:
    """Checks of the full-vocabulary windows (none when they were not run): every kernel stochastic and every
    mu_tau stationary to 1e-12, and Theorem 5's bound at or above the exact t_mix wherever alpha < 1."""
    if table is None or table.empty:
        return []
    exact = float(max(table.row_error.max(), table.stationarity.max()))
    bounded = table[np.isfinite(table.bound)]
    return [
        check_row(
            "window_kernels",
            "full-vocabulary window kernels are stochastic and mu_tau stationary (to 1e-12)",
            exact <= 1e-12,
            f"largest error {exact:.1e} over {len(table)} windows",
        ),
        check_row(
            "theorem5_windows",
            "Theorem 5's bound is at least the exact t_mix on every full-vocabulary window with alpha < 1",
            bool((bounded.bound >= bounded.t_mix).all()),
            f"{len(bounded)} of {len(table)} windows have alpha < 1",
        ),
    ]


def _theorem8_holds(theorem8: pd.DataFrame) -> bool:
    """Both bounds of Theorem 8 hold at every temperature of `theorem8_frame`."""
    return bool((theorem8.escape <= theorem8.escape_bound).all() and (theorem8.t_mix >= theorem8.t_mix_lower).all())


def claim_rows(
    cfg: SimpleNamespace,
    model: str,
    alpha: pd.DataFrame,
    drift: torch.Tensor | None,
    windows: pd.DataFrame,
    no_drift: str = "",
) -> list[dict]:
    """The chapter's claims rows, in the order of paper_claims.csv: alpha_tau10 and alpha_tau11 from the alpha
    table, basin_drift_positive from the drifts (None: not run, `no_drift` says why), mu_vs_pseudolikelihood_tv
    from the `windows`' PL gaps and floors; the setups from the settings `cfg`."""
    alpha_setup = dict(
        seed_tokens=cfg.seq_len, contexts=cfg.n_contexts, candidates=cfg.top_k + 1, passages=cfg.passages
    )
    drift_setup = dict(
        N=cfg.drift_n,
        inside=DRIFT_INSIDE,
        states=cfg.drift_states,
        tau=" and ".join(f"{t:g}" for t in DRIFT_TEMPERATURES),
        filler=DRIFT_FILLER,
        passages=cfg.passages,
    )
    return [
        *_alpha_rows(alpha, model, alpha_setup),
        _drift_row(drift, model, drift_setup, missing=no_drift),
        _pseudo_likelihood_row(windows.pl_gap, windows.pl_floor, windows.score_dtype),
    ]


def check_rows(
    lemma6: pd.DataFrame,
    profiles: pd.DataFrame,
    theorem8: pd.DataFrame,
    asymmetry: pd.DataFrame,
    windows: pd.DataFrame | None = None,
) -> list[dict]:
    """The chapter's checks of its code path (theorems that must hold, and a control): Lemma 6 on every
    estimate, Theorem 5's bound on the exact Potts profiles, Theorem 8 on the Ising basin, the PL gap at the
    floor on the compatible Potts chain (a = 0) and above it on every other, and the full-vocabulary windows
    (`windows`, when run)."""
    violations = int(lemma6.violations.sum())
    tight = profiles[profiles.alpha < 1]
    control = control_check(
        asymmetry.pl_gap.iloc[0],
        {f"a = {a:g}": g for a, g in zip(asymmetry.asymmetry.iloc[1:], asymmetry.pl_gap.iloc[1:])},
        float(asymmetry.pl_floor.max()),
    )
    return [
        check_row(
            "lemma6", "c_ij <= Delta_ij / (4 tau) on every estimate", violations == 0, f"{violations} violations"
        ),
        check_row(
            "theorem5_bound",
            "the bound exceeds the exact t_mix wherever alpha < 1",
            bool((tight.bound >= tight.t_mix).all()),
            f"{len(tight)} cases",
        ),
        check_row(
            "theorem8_bounds",
            "escape and t_mix bounds of Theorem 8 hold on the Ising basin",
            _theorem8_holds(theorem8),
            f"{len(theorem8)} tau",
        ),
        check_row(
            "pl_gap_control", "the PL gap is 0 on a compatible chain and above the floor on incompatible ones", *control
        ),
        *_window_checks(windows),
    ]
