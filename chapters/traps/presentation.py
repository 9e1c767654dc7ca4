"""Chapter 5's presentation: the figures (`*_figure`), display tables (`*_view`) and glued prose (`*_text`) of the
traps page. They handle every case a model can produce (zero traps, no escape, constant or missing statistics) and
change no saved number or verdict."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from book_tools import interval_text, paper_claim, paper_number, parse_pairs, reading_table, share_text
from glauber_core import is_protein
from verdicts import cases_to_rule_out, every_part_level

from .judging import COLD_FACTOR, COLD_POINTS, DURATION_FACTOR, TIE_TOLERANCE, _count_text, cold_parts, final_escapes
from .protocol import COLD_PROTOCOL, MATCH_LENGTH, PAPER_TAU, PAPER_TRAP_GAP, SETTINGS, TABLE4, paper_counts, settings
from .science import (
    MATCHED_STEP,
    MAX_SWEEPS,
    cold_movement,
    distinct_held_states,
    kernel_chance,
    weakest_site_chance,
    window_drift,
)


def setup_text(cfg, cond) -> dict:
    """Sentences for the chapter's opening: the paper's Table 4 protocol, C.3's cold chains, the vocabulary
    size, ln(4|V|), trap_split's tie tolerance and the level of each cold part's interval on cold_chains_stay's
    differs side (every_part_level over its cold temperatures x 2 steps)."""
    vocab = int(cond.allowed.sum())
    return {
        "table4": f"{int(TABLE4['chains'])} chains of {int(TABLE4['steps']):,} steps at τ = {TABLE4['tau']}, "
        f"a {TABLE4['window']}-step window and a drift threshold of {TABLE4['threshold']}",
        "paper_cold_steps": f"{int(COLD_PROTOCOL['steps']):,}",
        "vocab": f"{vocab:,}",
        "log_4v": f"{math.log(4 * vocab):.1f}",
        "tie_tolerance": f"{TIE_TOLERANCE:g}",
        "cold_steps": f"{cfg.cold_steps:,}",
        "burn_in": f"{cfg.burn_in:,}",
        "cold_taus": " and ".join(f"{t:g}" for t in cfg.cold_temperatures) or "none",
        "cold_level": f"{every_part_level(max(len(cfg.cold_temperatures) * len(COLD_POINTS), 1)):.2%}",
        "paper_n": f"{SETTINGS['paper']['seq_len']}",
    }


def matched_text(matched: dict) -> dict:
    """The matched temperature in words before the run (matched_temperature's result): tau_m, the median gap it
    was read from, the starts that settled and the rule's constants."""
    defined = math.isfinite(matched["tau_m"])
    return {
        "tau_m": f"{matched['tau_m']:g}" if defined else "undefined (no start settled)",
        "tau_m_gap": f"{matched['median_gap']:.2f}" if math.isfinite(matched["median_gap"]) else "undefined",
        "tau_m_unrounded": f"{matched['unrounded']:.3f}" if math.isfinite(matched["unrounded"]) else "undefined",
        "tau_m_settled": f"{matched['settled']} of {matched['starts']}",
        "match_starts": f"{matched['starts']}",
        "matched_runs": "The chains below run at τ = 1 and at τ_m."
        if defined and not math.isclose(matched["tau_m"], PAPER_TAU)
        else "The chains below run at the paper's τ alone.",
        "paper_trap_gap": f"{PAPER_TRAP_GAP:g}",
        "match_length": f"{MATCH_LENGTH}",
        "max_sweeps": f"{MAX_SWEEPS}",
        "matched_step": f"{MATCHED_STEP:g}",
    }


def matched_need_text(matched: dict, traps: pd.DataFrame, chains: int, steps: int) -> dict:
    """`matched_need`, after the run: how many distinct held states the run saw at tau_m and how long a run would
    have to be to see the cases_to_rule_out(10%) = 35 that trap_split needs to say differs, at the rate this run
    shows (or, with none seen, the paper's 17 traps in 30 chains x 10^4 steps)."""
    if not math.isfinite(matched["tau_m"]):
        return {"matched_need": "no start settled, so no run at a matched temperature"}
    return {"matched_need": _matched_need(matched, traps, chains, steps)}


def _matched_need(matched: dict, traps: pd.DataFrame, chains: int, steps: int) -> str:
    """matched_text's `matched_need` for a defined tau_m."""
    here = traps[np.isclose(traps.temperature, matched["tau_m"])] if len(traps) else traps
    seen, needed = len(distinct_held_states(here)) if len(here) else 0, cases_to_rule_out(0.1)
    counts = paper_counts()
    rate = seen / (chains * steps) if seen else counts["count"] / (counts["chains"] * counts["steps"])
    source = "this run's rate" if seen else "the paper's rate (17 traps in 30 chains of 10,000 steps)"
    found = (
        f"{_count_text(seen, 'distinct held state')} at τ = {matched['tau_m']:g} in {chains} chains of {steps:,} steps"
    )
    if seen >= needed:
        return found + f", enough for trap_split to be able to say differs ({needed})"
    return (
        found
        + f"; trap_split needs {needed} to be able to say differs, about {needed / rate:,.0f} chain-steps at {source}"
    )


PROFILE_ROLES = {"smoke": "smoke (CI)", "quick": "quick (this book)", "paper": "paper (GPU)"}


def profiles_view(cond=None):
    """Every profile of `SETTINGS` as `settings` derives it (for `cond`'s seeds), as a reading table: n, chains per
    temperature, steps, temperatures, record spacing, drift window and threshold, the cold chains and the seeds."""
    rows = []
    for profile in SETTINGS:
        cfg = settings(profile, cond)
        rows.append(
            {
                "profile": PROFILE_ROLES.get(profile, profile),
                "n": cfg.seq_len,
                "chains per τ": cfg.n_chains,
                "steps": f"{cfg.steps:,}",
                "τ": ", ".join(f"{t:g}" for t in cfg.temperatures),
                "embedded every": f"{cfg.record_every} steps",
                "window": f"{cfg.window:,} steps",
                "threshold": f"{cfg.threshold:g}",
                "cold chains": f"{cfg.cold_steps:,} steps (burn-in {cfg.burn_in:,}) at τ = "
                + ", ".join(f"{t:g}" for t in cfg.cold_temperatures),
                "seeds": cfg.passages,
            }
        )
    return reading_table(pd.DataFrame(rows))


def distance_text(cond, embedder_name: str = "all-MiniLM-L6-v2") -> dict:
    """The sentences that name the chapter's distance and seeds for this model."""
    if is_protein(cond):
        return {
            "distance": (
                "this model is a protein MLM, and a sentence embedder has no meaning for an amino-acid "
                "sequence, so every distance here is the Hamming distance over n: each state is the "
                "concatenation of its sites' one-hot vectors (`ch.site_embeddings`), whose cosine distance "
                "is exactly the share of sites that differ. The window and threshold logic is the "
                "paper's, unchanged; a drift below the threshold means the chain stays, on average, within "
                "that share of its sites of where the window began"
            ),
            "seeds": "whole human IMGT germline V genes (heavy, kappa and lambda, from `anarci`; their first "
            "90 residues from the start of framework 1), of which the first n (FR1) move",
        }
    return {
        "distance": (f"distances are cosine distances between {embedder_name} sentence embeddings (eq. B.1)"),
        "seeds": "held-out BBC News paragraphs (MS MARCO at the `paper` profile, online) cut to n tokens",
    }


def drift_figure(runs: dict, found: dict, window: int, threshold: float, chains: int = 3):
    """The rolling drift D_t of appendix A.1 for the first `chains` chains of each temperature (one panel per
    temperature), with the threshold dashed and the detected traps shaded; returns the Figure."""
    import matplotlib.pyplot as plt

    shown = min(chains, len(next(iter(runs.values()))[1]))
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 2.6 * len(runs)), sharex=True, squeeze=False)
    for ax, (tau, (trajectory, vectors)) in zip(axes[:, 0], runs.items()):
        drift = window_drift(vectors, trajectory.steps, window)
        for chain in range(shown):
            ax.plot(trajectory.steps[: drift.shape[1]], drift[chain], lw=1, label=f"chain {chain}")
        for row in found[tau][found[tau].chain < shown].itertuples():
            ax.axvspan(row.start, row.end, color=f"C{row.chain}", alpha=0.15)
        ax.axhline(threshold, color="black", ls="--", lw=1)
        ax.set_ylim(bottom=0)
        ax.set(ylabel=f"$D_t$ ({window}-step window)", title=rf"Rolling drift, $\tau$ = {tau:g} (shaded: traps)")
    axes[0, 0].legend(fontsize=8, ncol=shown)
    axes[-1, 0].set(xlabel="window start $t$ (Glauber step)")
    return fig


def catalogue_view(traps: pd.DataFrame, per_temperature: int = 8):
    """Table 4's shape as a reading table: the longest traps of each temperature with their mean and minimum
    gap, class and text (None, with a sentence, when there is none)."""
    if traps.empty:
        print("No trap was detected at any temperature of this run.")
        return None
    table = traps.sort_values(["temperature", "duration"], ascending=False).rename(
        columns={"temperature": "τ", "mean_gap": "mean gap", "min_gap": "min gap (Δ*)", "kind": "type"}
    )
    columns = ["τ", "duration", "mean gap", "min gap (Δ*)", "type", "text"]
    return reading_table(
        table.groupby("τ", sort=False).head(per_temperature)[columns],
        {"τ": "{:g}", "mean gap": "{:.2f}", "min gap (Δ*)": "{:.2f}"},
    )


def counts_view(summaries: dict, paper: dict, chains: int, steps: int, n: int):
    """Table 4's counts beside the paper's, as a reading table: one row for the paper (numbers from
    paper_claims.csv, in `paper`: count, perfect, mean, min, max, chains, steps) and one per temperature of this
    run; the mean duration carries its range in brackets, "in sweeps" divides it by n."""

    def row(label, count, rate, perfect, mean, low, high, sweeps):
        none = count == 0
        return {
            "run": label,
            "traps": int(count),
            "per chain per 10k steps": rate,
            "perfect": "0" if none else f"{perfect:.0f} ({perfect / count:.0%})",
            "mean duration": "—" if none else f"{mean:.0f} ({low:.0f}–{high:,.0f})",
            "in sweeps": "—" if none or not sweeps else f"{mean / sweeps:.1f}",
        }

    exposure = paper["chains"] * paper["steps"] / 10_000
    rows = [
        row(
            f"paper: τ = 1, {paper['chains']:.0f} × {paper['steps']:,.0f} (n not stated)",
            paper["count"],
            paper["count"] / exposure,
            paper["perfect"],
            paper["mean"],
            paper["min"],
            paper["max"],
            None,
        )
    ]
    rows += [
        row(
            f"ours: τ = {tau:g}, {chains} × {steps:,}",
            s["count"],
            s["rate_per_10k"],
            s["perfect"],
            s["mean_duration"],
            s["min_duration"],
            s["max_duration"],
            n,
        )
        for tau, s in summaries.items()
    ]
    return reading_table(pd.DataFrame(rows), {"per chain per 10k steps": "{:.2f}"})


def seeding_view(traps: pd.DataFrame, fixed: pd.DataFrame, chains: tuple[int, int], steps: int, tau: float):
    """The judged chains at tau (passage-seeded; `traps`, the run's catalogue) beside chains seeded at the model's
    fixed points (`fixed`: fixed_point_traps), as a reading table: chains, traps, distinct held states by class
    (signed beyond the tie tolerance, as trap_split counts them), censored traps and the median duration.
    `chains`: (passage-seeded, fixed-point-seeded) chain counts."""
    here = traps[np.isclose(traps.temperature, tau)] if len(traps) else traps
    runs = (("passage seeds (judged)", here, chains[0]), ("fixed-point seeds (beside)", fixed, chains[1]))
    return reading_table(pd.DataFrame([_seeding_row(label, t, k, steps, tau) for label, t, k in runs]))


def _seeding_row(label: str, traps: pd.DataFrame, chains: int, steps: int, tau: float) -> dict:
    """seeding_view's row for one run's catalogue."""
    states = distinct_held_states(traps) if len(traps) else traps
    gaps = states.min_gap.to_numpy(float) if len(states) else np.empty(0)
    return {
        "run": f"{label}: τ = {tau:g}, {chains} × {steps:,}",
        "traps": len(traps),
        "distinct held states": len(gaps),
        "perfect": int((gaps > TIE_TOLERANCE).sum()),
        "approximate": int((gaps < -TIE_TOLERANCE).sum()),
        "censored": int(traps.censored.sum()) if len(traps) else 0,
        "median duration": f"{traps.duration.median():.0f}" if len(traps) else "—",
    }


def fixed_point_text(fixed: pd.DataFrame, chains: int, tau: float) -> dict:
    """`fixed_points`: what the chains seeded at the fixed points held at tau, in words (fixed_point_traps)."""
    if not chains:
        return {"fixed_points": "no start settled, so no chain starts at a fixed point"}
    states = distinct_held_states(fixed) if len(fixed) else fixed
    perfect = int((states.min_gap > TIE_TOLERANCE).sum()) if len(states) else 0
    return {
        "fixed_points": f"{chains} chains started at the fixed points and run at τ = {tau:g} held "
        f"{_count_text(len(states), 'distinct state')}, {perfect} of them perfect"
    }


def germline_figure(gaps: pd.DataFrame | None):
    """Two panels: how many sites of a germline have a negative gap (seeds per count), and the share of
    germlines whose residue at each site is not the model's argmax. None for a text model."""
    import matplotlib.pyplot as plt

    if gaps is None:
        return None
    table = np.asarray(gaps.gaps.tolist(), float)
    counts = np.bincount(gaps.negative_sites.to_numpy(int), minlength=1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3))
    left.bar(np.arange(len(counts)), counts, color="C0")
    left.set(
        xlabel="sites with a negative gap",
        ylabel="germline seeds",
        title=f"{int(gaps.perfect.sum())} of {len(gaps)} germlines are perfect traps",
    )
    right.bar(np.arange(1, table.shape[1] + 1), (table < 0).mean(0), color="C3")
    right.set(
        xlabel="site (residue position)",
        ylabel="share with Δ_i < 0",
        ylim=(0, 1),
        title="where the germline residue is not the argmax",
    )
    fig.tight_layout()
    return fig


def germline_text(gaps: pd.DataFrame | None, run_seeds=()) -> dict:
    """The sentences the germline and cold sections quote: the perfect share, the negative sites, and the share
    of negative-gap sites among the run's own seeds (`run_seeds`: their residue strings)."""
    if gaps is None:
        return {
            "germline": "this model is not a protein model, so there is no germline to measure",
            "cold_germline": "",
        }
    seeds, perfect = len(gaps), int(gaps.perfect.sum())
    sites = int(gaps.negative_sites.sum())
    n = int(gaps.free.iloc[0])
    one = int((gaps.negative_sites == 1).sum())
    phrases = {
        "germline": (
            f"{perfect} of {seeds} germline seeds ({perfect / seeds:.0%}) are perfect traps; "
            f"{sites} of {seeds * n} sites ({sites / (seeds * n):.0%}) have a negative gap, "
            f"and {one} seeds are one residue away from being perfect (exactly one negative "
            "gap)"
        )
    }
    mine = gaps[gaps.residues.isin(list(run_seeds))]
    phrases["cold_germline"] = (
        f" On this protein model the run's {len(mine)} seeds have a negative gap at "
        f"{mine.negative_sites.sum() / (len(mine) * n):.0%} of their sites (germline section). A visit to such a "
        "site keeps the germline residue with probability at most e^(Δ_i/τ) (Δ_i < 0; e^-50 for Δ_i = -5 at "
        "τ = 0.1), so a cold chain leaves its start at those sites by construction, and the judged distance from "
        "the start counts them: a chain that falls from its seed to the model's favourites does not stay near it."
        if len(mine)
        else ""
    )
    return phrases


def germline_family_view(gaps: pd.DataFrame | None):
    """Per germline family (chain order, then family), then every seed: how many seeds, how many are perfect
    traps (k of m, with a 95% Wilson interval from five seeds on), the sites with a negative gap (all, and the
    mean per seed) and the median min gap Delta*, as a reading table (its data also keeps chain, perfect share
    and the number of sites). None for a text model (no germline). Reads germline_gaps' frame or its CSV."""
    if gaps is None:
        return None

    def row(name, chain, group):
        seeds, perfect = len(group), int(group.perfect.sum())
        return {
            "family": name,
            "chain": chain,
            "seeds": seeds,
            "perfect traps": share_text(perfect, seeds),
            "perfect share": perfect / seeds,
            "sites with Δ_i < 0": int(group.negative_sites.sum()),
            "of sites": int(seeds * group.free.iloc[0]),
            "per seed": float(group.negative_sites.mean()),
            "median Δ*": float(group.min_gap.median()),
        }

    order = {"heavy": 0, "kappa": 1, "lambda": 2}
    keyed = gaps.assign(
        _order=gaps.chain.map(order).fillna(3), _number=gaps.family.str.extract(r"(\d+)$")[0].astype(float)
    )
    rows = [
        row(family, group.chain.iloc[0], group)
        for family, group in keyed.sort_values(["_order", "_number"]).groupby("family", sort=False)
    ]
    rows.append(row("all", "all", gaps))
    table = reading_table(pd.DataFrame(rows), {"per seed": "{:.2f}", "median Δ*": "{:.2f}"})
    return table.hide(["chain", "perfect share", "of sites"], axis="columns")


def theorem8_view(traps: pd.DataFrame, rows: int = 10):
    """Theorem 8's bound e^(Delta*/tau) / (4 |V|) beside the observed duration, as a reading table: the paper's
    strongest trap (its numbers from paper_claims.csv), then our perfect traps by Delta* (the first `rows`)."""
    columns = ["temperature", "duration", "min_gap", "theorem8_bound", "text"]
    paper = pd.DataFrame(
        [
            dict(
                temperature=1.0,
                duration=paper_number("delta_star_below_lnv", "trap1_duration"),
                min_gap=paper_number("delta_star_below_lnv", "trap1_gap"),
                theorem8_bound=paper_number("delta_star_below_lnv", "trap1_bound"),
                text="paper's trap 1: a string of periods (BERT)",
            )
        ]
    )
    ours = traps[traps.kind == "perfect"][columns].sort_values("min_gap", ascending=False)
    table = (
        (pd.concat([paper, ours], ignore_index=True) if len(ours) else paper)
        .head(rows)
        .rename(columns={"temperature": "τ", "min_gap": "Δ*", "theorem8_bound": "Theorem 8 bound (steps)"})
    )
    return reading_table(
        table, {"τ": "{:g}", "duration": "{:,.0f}", "Δ*": "{:.2f}", "Theorem 8 bound (steps)": "{:.2e}"}
    )


def gap_figure(traps: pd.DataFrame, summaries: dict):
    """Duration against the mean and the minimum score gap (appendix A.1), one panel each, coloured by
    temperature, with each temperature's Spearman correlation in the title; returns the Figure. With no trap,
    says so and draws nothing (returns None)."""
    import seaborn as sns

    if traps.empty:
        print("No trap was detected, so there is no duration to set against a gap.")
        return None
    long = traps.melt(
        id_vars=["temperature", "duration"], value_vars=["mean_gap", "min_gap"], var_name="gap", value_name="value"
    )
    grid = sns.relplot(
        data=long,
        x="value",
        y="duration",
        hue="temperature",
        col="gap",
        kind="scatter",
        palette="viridis",
        height=3.4,
        facet_kws=dict(sharex=False),
    )
    grid.set_axis_labels("score gap (logit units)", "trap duration (steps)")
    for ax, name, key in zip(grid.axes.flat, ["mean gap", "min gap"], ["rho_mean", "rho_min"]):
        rho = ", ".join(
            f"τ={tau:g}: " + ("n/a" if math.isnan(s[key]) else f"{s[key]:.2f}") for tau, s in summaries.items()
        )
        ax.set_title(f"{name} vs duration\nSpearman {rho}", fontsize=10)
    return grid.figure


def correlation_view(summaries: dict):
    """Spearman correlations of duration with the mean and the minimum gap (appendix A.1), one row per
    temperature (gaps unscaled; never pooled across temperatures), with the difference and its 95% bootstrap
    interval; the paper's temperature is the judged one."""
    rows = [
        {
            "τ": f"{tau:g}" + (" (judged)" if tau == PAPER_TAU else ""),
            "traps": s["count"],
            "ρ(duration, mean gap)": s["rho_mean"],
            "ρ(duration, min gap)": s["rho_min"],
            "difference [95%]": interval_text(
                s["rho_difference"], s["difference_low"], s["difference_high"], missing="—"
            ),
        }
        for tau, s in summaries.items()
    ]
    return reading_table(pd.DataFrame(rows), {"ρ(duration, mean gap)": "{:.2f}", "ρ(duration, min gap)": "{:.2f}"})


def escape_view(traps: pd.DataFrame, tokenizer, rows: int = 8):
    """The longest traps that ended inside the run (appendix C.2), as a reading table: the escape's site, the
    token it replaced and its replacement, the new token's probability and the rank of that site's gap (0 =
    weakest). None, with a sentence, when no trap ended."""
    escaped = traps[traps.escaped].sort_values("duration", ascending=False)
    if escaped.empty:
        print("No trap ended inside the run, so there is no escape to show.")
        return None
    names = tokenizer.convert_ids_to_tokens
    escaped = escaped.assign(
        change=[f"{names(int(a))} → {names(int(b))}" for a, b in zip(escaped.old_token, escaped.new_token)]
    )
    table = escaped[["temperature", "duration", "escape_site", "change", "escape_prob", "site_rank"]].head(rows)
    return reading_table(
        table.rename(
            columns={"temperature": "τ", "escape_site": "site", "escape_prob": "p(new token)", "site_rank": "gap rank"}
        ),
        {"τ": "{:g}", "p(new token)": "{:.3f}"},
    )


def weakest_view(traps: pd.DataFrame):
    """Per temperature (each its own labelled row), as a reading table: the departures from held states at a
    weakest-gap site (k of all), the kernel's share (kernel_weakest_share, weighted by departures) and a uniform
    site's (weakest_site_chance); then the traps' final escapes at a weakest site (k of all) and the median
    probability of the escaping token. None, with a sentence, when no trap left its held state."""
    if traps.empty or traps.departures.sum() == 0:
        print("No departure to count: no trap left its held state inside the run.")
        return None
    rows = []
    for tau, group in traps.groupby("temperature"):
        escaped = group[group.escaped]
        rows.append(
            {
                "τ": tau,
                "departures at a weakest site": f"{int(group.departures_at_weakest.sum())} of {int(group.departures.sum())}",
                "kernel's share": kernel_chance(group),
                "uniform site's share": weakest_site_chance(group.gaps),
                "final escapes at a weakest site": f"{int(escaped.at_weakest.sum())} of {len(escaped)}",
                "median p(new token)": float(escaped.escape_prob.median()) if len(escaped) else math.nan,
            }
        )
    return reading_table(
        pd.DataFrame(rows),
        {"τ": "{:g}", "kernel's share": "{:.2f}", "uniform site's share": "{:.2f}", "median p(new token)": "{:.3f}"},
    )


def cold_view(cold: pd.DataFrame, warm_tau: float):
    """Appendix C.3 as a reading table, per cold temperature and step (cold_parts): the judged comparison (the mean
    distance from the start, eq. B.1, cold and warm, their paired excess with its 95% t interval, the part's verdict
    at 95% and at rule_every_part's corrected level, which alone can make the claim differ) and the paper's distance
    at the end (BERT: model-specific, shown, not judged)."""
    paper = parse_pairs(paper_claim("cold_chains_stay")["values"])
    parts = cold_parts(cold)
    warm = f"warm distance (τ = {warm_tau:g})"
    corrected = f"verdict at {every_part_level(max(len(parts), 1)):.2%}"
    rows = [
        {
            "τ": p["tau"],
            "read at": p["point"],
            "chains": p["chains"],
            "distance from start": p["distance"],
            warm: p["warm_distance"],
            f"excess over {COLD_FACTOR:g} × warm [95%]": interval_text(
                p["excess"], p["low"], p["high"], digits=3, signed=True, missing="too few chains"
            ),
            "verdict at 95%": p["verdict"],
            corrected: p["corrected"],
            "paper's distance (BERT)": paper.get("tau" + f"{p['tau']:g}".replace(".", ""), "—")
            if p["point"] == "end"
            else "—",
        }
        for p in parts
    ]
    return reading_table(pd.DataFrame(rows), {"τ": "{:g}", "distance from start": "{:.3f}", warm: "{:.3f}"})


def cold_movement_view(cold: pd.DataFrame, warm_tau: float):
    """The measure cold_chains_stay was judged on until version 0.5.0 (cold_movement), shown, not judged: per cold
    temperature, the mean movement after the burn-in, cold and warm, and their paired excess with its 95% t
    interval."""
    warm = f"warm moved (τ = {warm_tau:g})"
    rows = [
        {
            "τ": m["tau"],
            "chains": m["chains"],
            "moved after burn-in": m["moved"],
            warm: m["warm_moved"],
            f"excess over {COLD_FACTOR:g} × warm [95%]": interval_text(
                m["excess"], m["low"], m["high"], digits=3, signed=True, missing="too few chains"
            ),
        }
        for m in cold_movement(cold)
    ]
    return reading_table(pd.DataFrame(rows), {"τ": "{:g}", "moved after burn-in": "{:.3f}", warm: "{:.3f}"})


def cold_text(cold: pd.DataFrame) -> dict:
    """The sentence the closing section quotes beside the judged distance: the cold chains' movement after the
    burn-in against the warm chains', per cold temperature (cold_movement; not judged)."""
    moves = cold_movement(cold)
    text = "; ".join(f"τ = {m['tau']:g}: {m['moved']:.3f} against warm {m['warm_moved']:.3f}" for m in moves)
    return {"cold_moved": text or "no cold run"}


def run_text(
    traps: pd.DataFrame, summaries: dict, median_drift: dict, rows: list[dict], cfg, judged_tau: float = PAPER_TAU
) -> dict:
    """Every sentence the chapter's closing section quotes (the verdicts are glued by ChapterRun.claims), one per
    case the run can produce; `rows`: claim_rows, read at their judged rows (those at `judged_tau`)."""
    claims = pd.DataFrame([row for row in rows if row.get("judged", True)]).set_index("claim")
    again = (
        traps.groupby(["temperature", "chain"]).text.transform(lambda texts: texts.duplicated())
        if len(traps)
        else pd.Series(dtype=bool)
    )
    return {
        "run": f"{cfg.n_chains} chains of {cfg.steps:,} steps per temperature, n = {cfg.seq_len}, "
        f"window {cfg.window} steps, profile {cfg.profile}",
        **_temperature_text(summaries, median_drift),
        "setup_differences": claims.setup.get("trap_count", "—"),
        "theorem8": _theorem8_text(traps),
        "repeat_traps": f"{int(again.sum())} of {len(traps)}",
        "weakest": _weakest_text(traps[np.isclose(traps.temperature, judged_tau)] if len(traps) else traps),
        "paper_tau": f"{PAPER_TAU:g}",
        "judged_tau": f"{judged_tau:g}",
        "judged_traps": _traps_text(summaries[judged_tau]) if judged_tau in summaries else "no run",
        "rho": claims.loc["mean_gap_correlation"].ours_text,
        "cold_summary": claims.loc["cold_chains_stay"].ours_text,
        "cold_factor": f"{COLD_FACTOR:g}",
        "duration_factor": f"{DURATION_FACTOR:g}",
    }


def _temperature_text(summaries: dict, median_drift: dict) -> dict:
    """The run's first ("hot") temperature: its drift, traps and perfect traps; `colder_traps`, the same clause for its
    last temperature, or nothing when the run has one (the paper profile, a protein model)."""
    taus = list(summaries)

    def perfect(s: dict) -> str:
        return f"{s['perfect']} ({s['perfect_share']:.0%})" if s["count"] else "none"

    hot, cold = summaries[taus[0]], summaries[taus[-1]]
    return {
        "hot_tau": f"{taus[0]:g}",
        "hot_drift": f"{median_drift[taus[0]]:.2f}",
        "hot_traps": _traps_text(hot),
        "hot_perfect": perfect(hot),
        "colder_traps": f"; at τ = {taus[-1]:g}, {_traps_text(cold)} (perfect: {perfect(cold)})"
        if len(taus) > 1
        else "",
    }


def _traps_text(summary: dict) -> str:
    count = summary["count"]
    return f"{_count_text(count, 'trap')}" if count else "no trap"


def _theorem8_text(traps: pd.DataFrame) -> str:
    """Theorem 8's bound against the observed lifetimes of our perfect traps."""
    perfect = traps[traps.kind == "perfect"]
    if perfect.empty:
        return "we found no perfect trap, so there is no bound to set against a lifetime"
    factor = (perfect.duration / perfect.theorem8_bound).min()
    return (
        f"for our {_count_text(len(perfect), 'perfect trap')} the largest bound is "
        f"{perfect.theorem8_bound.max():.2g} steps, and every observed duration exceeds its bound by a factor "
        f"of at least {factor:.2g}"
    )


def _weakest_text(at: pd.DataFrame) -> str:
    """Where the final escapes of the paper's temperature came, against the kernel's and a uniform site's share."""
    hits, tries, chance = final_escapes(at)
    if tries == 0:
        return f"no trap at τ = {PAPER_TAU:g} ended inside the run, so there is no final escape to place"
    return (
        f"at τ = {PAPER_TAU:g}, {hits} of {tries} final escapes came at a weakest-gap site, against "
        f"{chance:.0%} that the kernel's one-step law puts there ({int(at.departures_at_weakest.sum())} of all "
        f"{int(at.departures.sum())} departures, and {weakest_site_chance(at[at.escaped].gaps):.0%} for a "
        "uniformly chosen site)"
    )
