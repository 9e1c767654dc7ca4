"""Chapter 1's judging: the claims rows and the checks rows of the rectangle test.

Each verdict comes from a rule of `verdicts` (one rule per statistical shape) applied to the estimates of
`science`; each check is a `verdicts.check_row`. The prose that goes into a row's text is built here too.
"""

from __future__ import annotations

import math

import book_tools as bt
import verdicts as vd

from .science import ASYMMETRIC, SYMMETRIC

# ---------------------------------------------------------------------------------------------
# Verdicts from the science's estimates, the checks, and the claims rows
# ---------------------------------------------------------------------------------------------


def _detected_verdict(summary: dict) -> tuple[str, str]:
    """incompatibility_detected by verdicts.rule_one_sided on the share of rectangles above the floor,
    against the null 0 (compatible conditionals: every rectangle at the floor, Proposition 4). With a
    sound floor one rectangle above it certifies incompatibility: reproduced when some rectangle exceeds
    it (the Wilson interval then lies above 0); differs when none does (zero is the answer here, not an
    underpowered run); inconclusive with no finite delta."""
    k, total = int(summary["above_floor"]), int(summary["finite"])
    if total == 0:  # no finite delta: no interval, which the rule reads as inconclusive
        return vd.rule_one_sided(math.nan, math.nan, 0.0, "above")[0], "no rectangle gave a finite delta"
    verdict, reason = vd.rule_one_sided(
        summary["share_low"], summary["share_high"], 0.0, "above", events=k, zero_verdict=vd.DIFFERS, estimate=k / total
    )
    p = summary["sign_test_p"]
    return verdict, (
        f"{k} of {total} above the floor {summary['floor']:.1e} (sign test on the median: p = {p:.1e}); {reason}"
    )


# influence_amplifies_delta's smallest effect of interest, fixed before looking at any model's rho (the paper shows
# the trend and gives no coefficient): 0.1, the usual bound of a weak correlation (rho^2 = 1% of the rank variance).
# Against a null of 0 a large enough run calls any faint dependence "reproduced"; a rho below 0.1 is not the
# amplification Fig. 6 shows.
RHO_SESOI = 0.1


def _influence_verdict(influence: tuple[float, float, float, str]) -> tuple[str, str]:
    """influence_amplifies_delta by verdicts.rule_one_sided: Spearman's rho of |delta| with pair_influence
    (which shares no summand with delta), bootstrap 95% interval, against the smallest effect of interest
    RHO_SESOI (a weak rank correlation). Reproduced when the interval lies above RHO_SESOI, differs when it
    lies at or below it (at most a weak relation), inconclusive when it contains RHO_SESOI or cannot be
    estimated."""
    rho, low, high, why = influence
    verdict, reason = vd.rule_one_sided(low, high, RHO_SESOI, "above", estimate=rho if vd.finite(rho) else None)
    return verdict, f"{why}: {reason}" if why else reason


def check_rows(
    summaries: dict[str, dict],
    floors: dict[str, dict],
    *,
    causal: str,
    symmetric: str = SYMMETRIC,
    asymmetric: str = ASYMMETRIC,
    temperature_gap: float | None = None,
) -> list[dict]:
    """The chapter's checks of its code path (verdicts.check_row; not verdicts): the causal LM's delta at
    its floor (Proposition 4's identity through the same path), the symmetric Potts model at its floor
    and the asymmetric one above it (verdicts.control_check), batched = one at a time within the floor
    for every model, and, given `temperature_gap` (max |tau delta(tau) - delta(1)| of temperature_check_frame
    over the masked LM's rectangles, the first of `summaries`), delta(tau) = delta(1) / tau."""
    rows = [
        _causal_check(summaries[causal]),
        _potts_check(summaries[symmetric], summaries[asymmetric], asymmetric),
        _batching_check(floors),
    ]
    if temperature_gap is not None:
        rows.append(_temperature_check(temperature_gap, summaries[next(iter(summaries))]["max_abs_delta"]))
    return rows


def _causal_check(c: dict) -> dict:
    return vd.check_row(
        "causal LM delta is 0 up to rounding",
        "Proposition 4's identity through the same code path: a joint's edges telescope",
        vd.finite(c["max_abs_delta"]) and c["max_abs_delta"] <= c["floor"],
        f"largest |delta| {c['max_abs_delta']:.1e} against its floor {c['floor']:.1e} ({c['rectangles']} rectangles)",
    )


def _potts_check(symmetric: dict, asymmetric: dict, name: str) -> dict:
    floor = max(symmetric["floor"], asymmetric["floor"])
    passed, detail = vd.control_check(symmetric["max_abs_delta"], {name: asymmetric["max_abs_delta"]}, floor)
    return vd.check_row(
        "symmetric Potts at the floor, asymmetric Potts above it",
        "the path separates compatible from incompatible conditionals",
        passed,
        detail,
    )


def _batching_check(floors: dict[str, dict]) -> dict:
    worst = {name: (f["jitter"], f["floor"]) for name, f in floors.items()}
    return vd.check_row(
        "batched = one-at-a-time within the floor",
        "the floor covers the rounding that batching changes",
        all(vd.finite(j, fl) and j <= fl for j, fl in worst.values()),
        "; ".join(f"{name} {j:.1e} (floor {fl:.1e})" for name, (j, fl) in worst.items()),
    )


def _temperature_check(gap: float, max_abs_delta: float) -> dict:
    return vd.check_row(
        "delta(tau) = delta(1) / tau",
        "edge normalisers cancel: temperature only rescales delta",
        vd.finite(gap) and gap <= 1e-9 * max(1.0, max_abs_delta),
        f"largest |tau delta(tau) - delta(1)| {gap:.1e} nats",
    )


def _at_temperature(quantity: str, temperature: float) -> str:
    """A row's quantity, saying when it was measured away from the paper's temperature 1."""
    return quantity if temperature == 1 else f"{quantity} at temperature {temperature:g} (the paper's: 1)"


def claim_rows(summary: dict, influence: tuple[float, float, float, str], *, model: str, setup: dict) -> list[dict]:
    """The chapter's three claims rows: incompatibility_detected and influence_amplifies_delta (general,
    judged by their rules) and incompatibility_mean_abs_delta (model-specific: judged only on the paper's
    model and protocol). `summary`: the masked LM's incompatibility_summary; `influence`: (rho, low, high,
    why) of |delta| with pair_influence; `setup`: the run as the paper's protocol names it (settings'
    `setup`, its temperature among the items)."""
    temperature = setup.get("temperature", 1.0)
    return [
        _detected_row(summary, temperature),
        _influence_row(influence, temperature),
        _mean_row(summary, model, setup, temperature),
    ]


def _detected_row(m: dict, temperature: float) -> dict:
    verdict, reason = _detected_verdict(m)
    ours_text = (
        f"{m['above_floor']} of {m['finite']} above the floor {m['floor']:.1e} (sign test p = {m['sign_test_p']:.1e})"
        if m["finite"]
        else "no rectangle gave a finite delta"
    )
    quantity = _at_temperature("rectangles with |delta| above the rounding floor (null: none)", temperature)
    return bt.claim_row("incompatibility_detected", quantity, m["above_floor"], ours_text, verdict, reason)


def rho_text(influence: tuple) -> str:
    rho, low, high, why = influence
    return bt.interval_text(rho, low, high, missing=why or "no interval could be estimated")


def _influence_row(influence: tuple, temperature: float) -> dict:
    verdict, reason = _influence_verdict(influence)
    quantity = _at_temperature(
        f"Spearman rho(|delta|, pair influence) (smallest effect of interest {RHO_SESOI:g})", temperature
    )
    rho, low, high, _ = influence
    return bt.claim_row(
        "influence_amplifies_delta",
        quantity,
        rho,
        rho_text(influence),
        verdict,
        reason,
        low=low,
        high=high,
        null=RHO_SESOI,
    )


def mean_text(m: dict) -> str:
    return bt.interval_text(
        m["mean_abs_delta"], m["ci_low"], m["ci_high"], significant=2, missing="no rectangle gave a finite delta"
    )


def _mean_row(m: dict, model: str, setup: dict, temperature: float) -> dict:
    quantity = _at_temperature("mean |delta| over random rectangles (nats)", temperature)
    return bt.model_specific_row(
        "incompatibility_mean_abs_delta",
        quantity,
        m["mean_abs_delta"],
        mean_text(m),
        model=model,
        setup=setup,
        low=m["ci_low"],
        high=m["ci_high"],
    )
