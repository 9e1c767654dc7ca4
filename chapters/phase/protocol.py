"""Chapter 3's protocol (section 6.1, Figs. 2, 3, 7): the settings of each profile (SETTINGS, and PROTEIN_SETTINGS
for a protein MLM), the seed passages and frozen-context windows, and the batched runs behind every number: the
coupling grid of Fig. 2 and the many-temperature drift chains of Figs. 3 and 7, each chain seeded by its temperature.

Imports the core and book_tools; never another chapter.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from glauber_core import (
    GERMLINE_CONTEXT,
    Conditionals,
    MaskedLMConditionals,
    TemperedConditionals,
    Trajectory,
    WindowConditionals,
    check_count,
    check_temperature,
    check_tokens,
    coupling_times,
    embedding_distance,
    free_sites,
    glauber,
    is_protein,
    seed_passages,
    trajectory_distances,
)

from .estimators import logistic_fit, scaled_budget_grid

# Each profile fixes every size of the chapter. `paper` follows the paper item by item: Fig. 2's 10^4-step
# coupling budget; Fig. 3a's T = 10^4 steps at tau = 1 with 100 trials per length; Fig. 3b's tau = 1.4, 50 trials
# per length, a 1,000-step cutoff and R = 1; Fig. 7's 100 chains, a 5,000-step cutoff and embeddings every 5
# steps. One batched drift run per length serves all three drift protocols: each protocol reads its own chains
# (the first `*_chains` starts) and its own cutoff (the records up to `*_steps`) from it. Fig. 3b's hitting times
# have their own run at `hit_tau` (`hit_chains` starts, recorded every `hit_record_every` steps: the shortest
# times are a few steps), the section 7 alpha its own (`alpha_contexts` starts, final states only), and Fig. 3a's
# ceiling d_ref(n) is measured on `ceiling_pairs` pairs of unrelated passages of each length. `alpha_grid`: the
# temperatures at which alpha-hat is scored on the seed passages, for Theorem 5's threshold (theorem5_bound_loose);
# `alpha_length` is one of `grid_lengths`, so that alpha-hat and the coupling boundary describe one chain.
# `saturation_anchor`: the drift run's length at n = 24 when it grows like n ln n (issue 63: Fig. 3a's distance at
# a fixed T cannot saturate at the longer lengths of a short run, so each length runs nlogn_steps; 0: every length
# runs `drift_steps` and is read at `saturation_steps`, as the paper's 10^4 steps are).
# The coupling grid runs in two stages (issue 63, two_stage_grid): `pairs` pairs at `grid_temperatures` find each
# length's boundary and width, then `stage_pairs` new pairs run at that boundary times exp(width x `stage_offsets`)
# (offsets in units of the first stage's width in log tau), where a pair's outcome says most about the boundary
# and the width; one
# fit pools every pair of every length (pooled_transition_fit). The quick lengths are a factor 4 apart so that a
# shift and a sharpening can show between them; `paper` keeps the paper's one grid (stage_pairs 0).
SETTINGS = {
    "smoke": dict(
        grid_lengths=[6, 10],
        grid_temperatures=[1.0, 2.0, 4.0],
        pairs=3,
        stage_pairs=3,
        stage_offsets=[-1.5, 1.5],
        budget=40,
        drift_lengths=[6, 8, 10],
        drift_temperatures=[0.3, 1.0, 1.4, 4.0],
        drift_chains=3,
        drift_steps=40,
        record_every=4,
        saturation_tau=1.0,
        saturation_steps=40,
        saturation_chains=3,
        saturation_anchor=0,
        hit_tau=1.4,
        hit_steps=40,
        hit_chains=3,
        hit_record_every=1,
        hit_radius=0.7,
        ceiling_pairs=3,
        crossover_steps=40,
        crossover_chains=3,
        alpha_length=6,
        alpha_contexts=2,
        alpha_grid=[1.0, 2.0, 4.0, 8.0],
        top_k=2,
        regime_steps=20,
        n_boot=20,
        passages="bbc",
    ),
    "quick": dict(
        grid_lengths=[6, 24],
        grid_temperatures=[0.75, 1.0, 1.5, 2.0, 3.0],
        pairs=8,
        stage_pairs=16,
        stage_offsets=[-1.5, -0.5, 0.5, 1.5],
        budget=400,
        drift_lengths=[6, 10, 16, 24],
        drift_temperatures=[0.3, 1.0, 1.4, 2.5],
        drift_chains=6,
        drift_steps=300,
        record_every=4,
        saturation_tau=1.0,
        saturation_steps=300,
        saturation_chains=6,
        saturation_anchor=1_000,
        hit_tau=1.4,
        hit_steps=200,
        hit_chains=32,
        hit_record_every=1,
        hit_radius=0.7,
        ceiling_pairs=24,
        crossover_steps=300,
        crossover_chains=6,
        alpha_length=6,
        alpha_contexts=16,
        alpha_grid=[1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0],
        top_k=3,
        regime_steps=200,
        n_boot=200,
        passages="bbc",
    ),
    "paper": dict(
        grid_lengths=[8, 16, 20, 32, 48, 64],
        grid_temperatures=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0],
        pairs=100,
        stage_pairs=0,
        stage_offsets=[],
        budget=10_000,
        drift_lengths=[8, 12, 16, 20, 24, 32, 48, 64],
        drift_temperatures=[0.5, 1.0, 1.4, 2.0, 3.0],
        drift_chains=100,
        drift_steps=10_000,
        record_every=5,
        saturation_tau=1.0,
        saturation_steps=10_000,
        saturation_chains=100,
        saturation_anchor=0,
        hit_tau=1.4,
        hit_steps=1_000,
        hit_chains=50,
        hit_record_every=1,
        hit_radius=1.0,
        ceiling_pairs=100,
        crossover_steps=5_000,
        crossover_chains=100,
        alpha_length=20,
        alpha_contexts=16,
        alpha_grid=[1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 24.0, 32.0],
        top_k=8,
        regime_steps=10_000,
        n_boot=1000,
        passages="ms_marco",
    ),
}


# A protein MLM (AntiBERTy, `glauber_core.is_protein`): full-length coupled chains to coalescence do not fit on two
# cores (about 32 chain-steps/s at 96 residues), so every coupling and drift run moves `n` free sites spread over
# the first `window_span` residues (FR1: the positions the book used when it cut them out) of a whole human
# germline V gene of `context_length` residues, every other residue frozen; the number of free sites plays the
# role of n, and the distance to the start is the Hamming share of free sites that differ from it.
PROTEIN_SETTINGS = {
    "smoke": dict(
        context_length=GERMLINE_CONTEXT,
        window_span=16,
        window_contexts=2,
        grid_lengths=[2, 3],
        grid_temperatures=[1.0, 4.0],
        pairs=2,
        stage_pairs=2,
        stage_offsets=[-1.5, 1.5],
        budget=20,
        drift_lengths=[2, 3, 4],
        drift_temperatures=[1.0, 2.5],
        drift_chains=2,
        drift_steps=12,
        record_every=2,
        saturation_tau=1.0,
        saturation_steps=12,
        saturation_chains=2,
        saturation_anchor=0,
        hit_tau=2.5,
        hit_steps=12,
        hit_chains=2,
        hit_record_every=1,
        hit_radius=1.0,
        ceiling_pairs=2,
        crossover_steps=12,
        crossover_chains=2,
        alpha_length=2,
        alpha_contexts=2,
        alpha_grid=[1.0, 2.0, 4.0, 8.0],
        top_k=2,
        regime_steps=4,
        n_boot=20,
        passages="germline",
    ),
    "quick": dict(
        context_length=GERMLINE_CONTEXT,
        window_span=24,
        window_contexts=2,
        grid_lengths=[2, 4, 6],
        grid_temperatures=[0.5, 1.0, 2.0, 4.0],
        pairs=4,
        stage_pairs=4,
        stage_offsets=[-1.5, 1.5],
        budget=100,
        drift_lengths=[2, 3, 4, 6],
        drift_temperatures=[0.5, 1.0, 2.5],
        drift_chains=4,
        drift_steps=60,
        record_every=2,
        saturation_tau=1.0,
        saturation_steps=60,
        saturation_chains=4,
        saturation_anchor=0,
        hit_tau=2.5,
        hit_steps=60,
        hit_chains=4,
        hit_record_every=1,
        hit_radius=1.0,
        ceiling_pairs=4,
        crossover_steps=60,
        crossover_chains=4,
        alpha_length=4,
        alpha_contexts=4,
        alpha_grid=[1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0],
        top_k=3,
        regime_steps=20,
        n_boot=200,
        passages="germline",
    ),
    "paper": dict(
        context_length=GERMLINE_CONTEXT,
        window_span=24,
        window_contexts=4,
        grid_lengths=[2, 4, 6, 8, 12],
        grid_temperatures=[0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0],
        pairs=100,
        stage_pairs=0,
        stage_offsets=[],
        budget=10_000,
        drift_lengths=[2, 3, 4, 6, 8, 12],
        drift_temperatures=[0.5, 1.0, 1.5, 2.5],
        drift_chains=100,
        drift_steps=5_000,
        record_every=5,
        saturation_tau=1.0,
        saturation_steps=5_000,
        saturation_chains=100,
        saturation_anchor=0,
        hit_tau=2.5,
        hit_steps=1_000,
        hit_chains=50,
        hit_record_every=1,
        hit_radius=1.0,
        ceiling_pairs=100,
        crossover_steps=5_000,
        crossover_chains=100,
        alpha_length=6,
        alpha_contexts=16,
        alpha_grid=[1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 24.0, 32.0],
        top_k=4,
        regime_steps=1_000,
        n_boot=1000,
        passages="germline",
    ),
}


PAPER_SEED_LENGTH = 20  # the paper's seed text length in tokens (appendix B.2): where Fig. 2's boundary is read
FALLBACK_STAGE_WIDTH = 0.2  # a second coupling stage's width in log tau when the first stage has no fit (stage_centre)
SATURATION_LENGTH = 24  # the length whose drift run `saturation_anchor` sets (issue 63: at least 1,000 steps there)


def nlogn_steps(n: int, steps: int, anchor: int, record: int) -> int:
    """A drift run's length at n when it grows like n ln n (issue 63): max(steps, anchor n ln n / (24 ln 24)),
    rounded up to a multiple of the record spacing (so that the run records its last step), so that a length is offered about as many updates per site, up
    to the log factor a coupon collector needs to visit every site, as n = 24 is in `anchor` steps; `steps` is
    the floor (every protocol that reads the run up to it keeps its records); anchor 0: `steps` at every length."""
    if not anchor:
        return steps
    scaled = anchor * n * math.log(n) / (SATURATION_LENGTH * math.log(SATURATION_LENGTH))
    return record * math.ceil(max(steps, scaled) / record - 1e-9)


def settings(profile: str, cond=None, **overrides) -> SimpleNamespace:
    """The chapter's settings at `profile`: SETTINGS, or PROTEIN_SETTINGS for a protein MLM (`glauber_core.is_protein`),
    each override that is not None, 0, "" or [] in place of the profile's value (bt.profile_settings), and what
    follows from them: `protein`; `lengths`, the sorted coupling-grid lengths, with `small` and `large` their
    ends and `near` the one nearest the paper's seed length (where Fig. 2's boundary is read, section 6.1);
    `drift_taus`, every temperature of the shared drift run (the drift temperatures and those of Figs. 3a, 3b);
    `drift_steps_at` and `saturation_steps_at`, {n: steps} per drift length (nlogn_steps of `drift_steps` and of
    `saturation_steps` with the profile's `saturation_anchor`): how long each length's drift run is, and where
    Fig. 3a reads it.
    Raises ValueError when `alpha_length` is not a grid length (alpha-hat and the boundary must share a chain), or
    when a protein MLM's window_span reaches past FR1 (bt.fr1_window)."""
    protein = is_protein(cond)
    cfg = bt.profile_settings(profile, PROTEIN_SETTINGS if protein else SETTINGS, **overrides)
    lengths, drift = sorted(cfg.grid_lengths), sorted(cfg.drift_lengths)
    if cfg.alpha_length not in lengths:
        raise ValueError(f"alpha_length = {cfg.alpha_length} must be one of the grid lengths {lengths}")
    if protein:
        bt.fr1_window(cfg.window_span, "window_span")
    return SimpleNamespace(
        **vars(cfg),
        protein=protein,
        lengths=lengths,
        small=lengths[0],
        large=lengths[-1],
        near=min(lengths, key=lambda n: abs(n - PAPER_SEED_LENGTH)),
        drift_taus=sorted({*cfg.drift_temperatures, cfg.saturation_tau, cfg.hit_tau}),
        drift_steps_at={n: nlogn_steps(n, cfg.drift_steps, cfg.saturation_anchor, cfg.record_every) for n in drift},
        saturation_steps_at={  # never past the run (a drift_steps override below saturation_steps)
            n: min(
                nlogn_steps(n, cfg.saturation_steps, cfg.saturation_anchor, cfg.record_every),
                nlogn_steps(n, cfg.drift_steps, cfg.saturation_anchor, cfg.record_every),
            )
            for n in drift
        },
    )


def run_lengths_text(steps_at: dict) -> str:
    """Per-length run lengths ({n: steps}) in words: "300" when every length runs as long, else the shortest and
    the longest with their lengths, e.g. "300 (n = 8) to 1,000 (n = 24)"."""
    values = sorted(set(steps_at.values()))
    if len(values) == 1:
        return f"{values[0]:,}"
    first, last = min(steps_at, key=steps_at.get), max(steps_at, key=steps_at.get)
    return f"{steps_at[first]:,} (n = {first}) to {steps_at[last]:,} (n = {last})"


def crossover_radii() -> list[float]:
    """Fig. 7's thresholds, read from the protocol column of paper_claims.csv."""
    return [float(r) for r in bt.paper_protocol("crossover_fractions")["radius"].split()]


def window_sites(context_length: int, free: int, span: int = 0) -> torch.Tensor:
    """`free` sites spread evenly over the first `span` residues of a context of `context_length` (0: all of
    it; a protein MLM's FR1 stretch inside the whole gene), never the span's two ends: LongTensor[free], the free
    sites of a frozen-context window."""
    context_length, free = check_count(context_length, "context_length", 3), check_count(free, "free", 1)
    span = min(span or context_length, context_length)
    if free > span - 2:
        raise ValueError(f"{free} free sites do not fit inside a span of {span} residues (ends kept)")
    return torch.linspace(0, span - 1, free + 2)[1:-1].round().long()


def window_mask(context_length: int, free: int, span: int = 0) -> torch.Tensor:
    """`frozen` for glauber.glauber: BoolTensor[context_length], True at every site except the window_sites."""
    mask = torch.ones(context_length, dtype=torch.bool)
    mask[window_sites(context_length, free, span)] = False
    return mask


def temperature_seeds(seed: int, temperatures, count: int) -> list[int]:
    """Per-chain seeds of a batch that runs `count` chains at each temperature (row t * count + c): chain c at
    temperature tau gets the c-th seed of a stream keyed by (seed, tau in millionths), whatever else is in the grid."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    keyed = [round(tau * 1e6) for tau in check_temperature(temperatures, many=True)]
    if len(set(keyed)) < len(keyed):
        raise ValueError(
            f"temperatures must differ by at least 1e-6 (equal ones would run identical chains), "
            f"got {list(temperatures)}"
        )
    keys = [np.random.SeedSequence([int(seed) % 2**64, key]).generate_state(count, np.uint64) for key in keyed]
    return [int(key) & ((1 << 63) - 1) for block in keys for key in block]


def coupling_grid(
    cond: Conditionals, x0, y0, temperatures, max_steps: int, *, seed: int = 0, progress: bool = True
) -> pd.DataFrame:
    """Coupling times of every pair (x0[p], y0[p]) at every temperature, all in one batch (Fig. 2).

    Pair p at temperatures[t] is batch row t * P + p with seed temperature_seeds(seed, temperatures, P)[t * P + p],
    so a cell's times do not depend on the grid's other temperatures.
    Returns one row per (temperature, pair): n, temperature, pair, time (-1: not within max_steps), coupled.
    """
    temperatures = torch.tensor(check_temperature(temperatures, many=True), dtype=torch.float64)
    x, y = check_tokens(cond, x0, "x0"), check_tokens(cond, y0, "y0")
    pairs, n = x.shape
    times = coupling_times(
        cond,
        x.repeat(len(temperatures), 1),
        y.repeat(len(temperatures), 1),
        max_steps,
        temperatures.repeat_interleave(pairs),
        seed=temperature_seeds(seed, temperatures.tolist(), pairs),
        progress=progress,
    )
    return pd.DataFrame(
        {
            "n": n,
            "temperature": temperatures.repeat_interleave(pairs).numpy(),
            "pair": np.tile(np.arange(pairs), len(temperatures)),
            "time": times.numpy(),
            "coupled": times.numpy() >= 0,
        }
    )


def window_coupling_grid(
    cond: Conditionals,
    contexts,
    free: int,
    temperatures,
    pairs: int,
    max_steps: int,
    *,
    seed: int = 0,
    progress: bool = True,
    span: int = 0,
) -> pd.DataFrame:
    """Fig. 2 on a protein MLM: coupling times with `free` free sites (window_sites over the first `span`
    residues) inside each frozen context (contexts [C, L], whole germline V genes). Per context, `pairs` pairs: one chain starts from the germline's own
    residues at the free sites, the other from uniformly drawn residues (seeded); all temperatures share one
    batch (coupling_grid on WindowConditionals, seed + c). Columns as coupling_grid, with n = `free` (the number
    of free sites plays the role of n), `pair` numbered across contexts, `gene` (the context's index) and
    `context` (its residues)."""
    contexts = check_tokens(cond, contexts, "contexts")
    pairs = check_count(pairs, "pairs", 1)
    sites = window_sites(contexts.shape[1], free, span)
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    generator, frames = torch.Generator().manual_seed(seed), []
    for c, context in enumerate(contexts):
        window = WindowConditionals(cond, context, sites)
        x0 = context[sites].repeat(pairs, 1)
        y0 = allowed[torch.randint(len(allowed), (pairs, len(sites)), generator=generator)]
        frame = coupling_grid(window, x0, y0, temperatures, max_steps, seed=seed + c, progress=progress)
        frames.append(frame.assign(pair=frame.pair + c * pairs, gene=c, context=contexts.shape[1], free=len(sites)))
    return pd.concat(frames, ignore_index=True)


def stage_centre(first: pd.DataFrame, budget: int, large: int) -> tuple[float, float]:
    """(centre, width) of a length's second coupling stage: the first stage's boundary tau_1/2 on the budget
    scaled by n log n (the judged grid: scaled_budget_grid) and its width in log tau (scale / tau_1/2), from its
    rising logistic fit, the centre kept inside the first stage's temperatures and the width inside
    [0.05, 0.5]; without a fit, the first-stage temperature whose share met is nearest 1/2 (the hottest when
    none met) and the width FALLBACK_STAGE_WIDTH."""
    scaled = scaled_budget_grid(first, budget, large)
    temps = scaled.temperature.to_numpy(dtype=float)
    midpoint, scale = logistic_fit(temps, scaled.coupled.to_numpy(dtype=float))
    if math.isfinite(midpoint) and scale > 0 and midpoint > 0:
        return float(np.clip(midpoint, temps.min(), temps.max())), float(np.clip(scale / midpoint, 0.05, 0.5))
    share = scaled.groupby("temperature").coupled.mean()
    return float(share.index.max() if share.max() == 0 else share.sub(0.5).abs().idxmin()), FALLBACK_STAGE_WIDTH


def two_stage_grid(run_stage, n: int, cfg) -> pd.DataFrame:
    """A length's coupling grid in two stages (issue 63): run_stage(temperatures, stage) -> coupling_grid table;
    stage 1 at cfg.grid_temperatures (`pairs` pairs), stage 2 at centre x exp(width x cfg.stage_offsets)
    (stage_centre; its own `stage_pairs` pairs, numbered after stage 1's), where the share met changes and each
    pair says most about the boundary and the width (offsets of +-1.5 widths: the D-optimal points of a logistic
    curve lie at +-1.54). With stage_pairs 0, stage 1 alone. Column `stage` says which."""
    first = run_stage(cfg.grid_temperatures, 1).assign(stage=1)
    if not cfg.stage_pairs:
        return first
    centre, width = stage_centre(first, cfg.budget, cfg.large)
    taus = sorted({round(centre * math.exp(width * offset), 4) for offset in cfg.stage_offsets})
    second = run_stage(taus, 2).assign(stage=2)
    return pd.concat([first, second.assign(pair=second.pair + first.pair.max() + 1)], ignore_index=True)


def length_grid(cond, n: int, cfg, seed: int = 0) -> pd.DataFrame:
    """The two-stage coupling grid of one length n (two_stage_grid): a text model's pairs of held-out passages
    of n tokens (coupling_grid; `pairs` in stage 1, `stage_pairs` in stage 2, all drawn at once); a protein
    MLM's n free sites in `window_contexts` frozen germline contexts of `context_length` residues
    (window_coupling_grid, each stage's pairs spread over the contexts). Stage 1 runs on `seed`, stage 2 on a
    stream keyed by (seed, 2)."""
    sizes = {1: cfg.pairs, 2: cfg.stage_pairs}
    seeds = {1: seed, 2: int(np.random.SeedSequence([seed, 2]).generate_state(1)[0] >> 33)}
    if is_protein(cond):
        if cfg.pairs < cfg.window_contexts or any(size % cfg.window_contexts for size in sizes.values()):
            raise ValueError(
                f"pairs ({cfg.pairs}) and stage_pairs ({cfg.stage_pairs}) must be multiples of "
                f"window_contexts ({cfg.window_contexts}), pairs positive"
            )
        contexts = seed_passages(cond, cfg.context_length, cfg.window_contexts, seed=seed, passages=cfg.passages)

        def run_stage(temperatures, stage):
            return window_coupling_grid(
                cond,
                contexts.tokens,
                n,
                temperatures,
                sizes[stage] // cfg.window_contexts,
                cfg.budget,
                seed=seeds[stage],
                progress=False,
                span=cfg.window_span,
            )

    else:
        starts = seed_passages(cond, n, 2 * (cfg.pairs + cfg.stage_pairs), seed=seed, passages=cfg.passages).tokens
        x, y = starts[0::2], starts[1::2]
        rows = {1: slice(0, cfg.pairs), 2: slice(cfg.pairs, None)}

        def run_stage(temperatures, stage):
            return coupling_grid(
                cond, x[rows[stage]], y[rows[stage]], temperatures, cfg.budget, seed=seeds[stage], progress=False
            )

    return two_stage_grid(run_stage, n, cfg)


def multi_temperature_glauber(
    cond: Conditionals,
    x0,
    temperatures,
    steps: int,
    *,
    seed: int = 0,
    record_every: int = 1,
    progress: bool = True,
    frozen=0,
) -> tuple[Trajectory, pd.DataFrame]:
    """Chains from every start x0[c] at every temperature in one batched `glauber` run: row t * C + c
    runs from x0[c] at temperatures[t] with seed temperature_seeds(seed, temperatures, C)[t * C + c] (a chain
    does not depend on the other temperatures); `frozen` as for glauber.glauber (the same fixed sites in every
    chain). Returns the trajectory and a table of (row, temperature, start)."""
    x = check_tokens(cond, x0, "x0")
    taus = torch.tensor(check_temperature(temperatures, many=True), dtype=torch.float64)
    starts = len(x)
    tempered = TemperedConditionals(cond, taus.repeat_interleave(starts))
    trajectory = glauber(
        tempered,
        x.repeat(len(taus), 1),
        steps,
        1.0,
        frozen=frozen,
        seed=temperature_seeds(seed, taus.tolist(), starts),
        record_every=record_every,
        progress=progress,
    )
    rows = pd.DataFrame(
        {
            "row": np.arange(len(taus) * starts),
            "temperature": taus.repeat_interleave(starts).numpy(),
            "start": np.tile(np.arange(starts), len(taus)),
        }
    )
    return trajectory, rows


def drift_starts(cond, n: int, cfg, seed: int = 0, count: int = 0):
    """(Passages, frozen) of one drift length: a text model's `count` passages of n tokens (0: `drift_chains`),
    nothing frozen; a protein MLM's germline contexts of `context_length` residues with n free sites
    (window_mask)."""
    count = count or cfg.drift_chains
    if is_protein(cond):
        starts = seed_passages(cond, cfg.context_length, count, seed=seed, passages=cfg.passages)
        return starts, window_mask(cfg.context_length, n, cfg.window_span)
    return seed_passages(cond, n, count, seed=seed, passages=cfg.passages), 0


def regime_start(cond, cfg, seed: int = 0):
    """(x0 [1, L], frozen) of appendix C.3's regime chains: a text model's held-out passage of PAPER_SEED_LENGTH
    tokens, every site free; a protein MLM's whole germline gene with the grid's largest number of free sites
    (drift_starts)."""
    if is_protein(cond):
        starts, frozen = drift_starts(cond, cfg.large, cfg, seed=seed, count=1)
        return starts.tokens, frozen
    return seed_passages(cond, PAPER_SEED_LENGTH, 1, seed=seed).tokens, 0


def ceiling_distances(cond, embedder, n: int, pairs: int, *, seed: int = 0, passages: str = "bbc") -> torch.Tensor:
    """Fig. 3a's ceiling: d(a, b) = 1 - cos(phi(a), phi(b)) between `pairs` pairs of unrelated passages of n tokens
    (2 * pairs distinct held-out passages, decoded as the chains' states are), FloatTensor[pairs]: what a chain
    that forgot its start shows at that length."""
    starts = seed_passages(cond, n, 2 * check_count(pairs, "pairs", 1), seed=seed, passages=passages).tokens
    texts = cond.decode_batch(starts)
    return embedding_distance(embedder, texts[:pairs], texts[pairs:])


def read_out_steps(steps, lengths, cutoffs: dict) -> np.ndarray:
    """Per record of a drift frame (its `steps` and lengths `lengths`, one value a row), whether it is its length's
    read-out: the last recorded step at or before that length's cutoff (`cutoffs`, {n: T(n)}), as distance_at_ends
    reads it. A boolean array over the rows."""
    frame = pd.DataFrame({"step": np.asarray(steps), "n": np.asarray(lengths)})
    cutoff = frame.n.map(cutoffs)
    last = frame.step.where(frame.step <= cutoff).groupby(frame.n).transform("max")
    return (frame.step == last).to_numpy()


def protocol_slice(rows: pd.DataFrame, steps: torch.Tensor, chains: int, cutoff: int):
    """(row mask [B], record mask [R]) of one protocol within a shared drift run: the first `chains` starts
    at each temperature, and the records at or before step `cutoff`."""
    return (torch.as_tensor(rows.start.to_numpy() < chains), torch.as_tensor(steps) <= cutoff)


def hamming_distances(trajectory: Trajectory, frozen=0) -> torch.Tensor:
    """d(x_t, x_0) for a protein MLM: the share of free sites whose residue differs from the start, for every
    recorded state of every chain, FloatTensor[B, R] in [0, 1] (0 at record 0). `frozen` as for glauber.glauber."""
    tokens = torch.as_tensor(trajectory.tokens)
    if tokens.dim() != 3:
        raise ValueError(f"trajectory.tokens must be [B, R, n], got {tuple(tokens.shape)}")
    sites = free_sites(frozen, tokens.shape[2])
    moved = tokens[:, :, sites] != tokens[:, :1, sites]
    return moved.float().mean(-1)


def drift_distances(cond, embedder, trajectory: Trajectory, frozen=0) -> torch.Tensor:
    """d(x_t, x_0): the embedding distance of glauber.trajectory_distances for a text model, the Hamming share of
    free sites (hamming_distances) for a protein MLM (embedder None)."""
    if is_protein(cond):
        return hamming_distances(trajectory, frozen)
    return trajectory_distances(cond, embedder, trajectory)


def chain_excerpts(
    cond: MaskedLMConditionals, trajectory: Trajectory, labels, count: int = 4, frozen=0
) -> pd.DataFrame:
    """Text of each chain of a trajectory at `count` evenly spaced records: one column per chain (labels). With
    a `frozen` mask (a protein MLM's window in its whole gene) the text ends one residue after the last free site."""
    if len(labels) != trajectory.tokens.shape[0]:
        raise ValueError(f"need one label per chain ({trajectory.tokens.shape[0]}), got {len(labels)}")
    picks = np.unique(np.linspace(0, len(trajectory.steps) - 1, check_count(count, "count", 1)).round().astype(int))
    free = (~torch.as_tensor(frozen, dtype=torch.bool)).nonzero()
    end = int(free.max()) + 2 if torch.is_tensor(frozen) and len(free) else None
    return pd.DataFrame(
        {label: cond.decode_batch(trajectory.tokens[b, picks, :end]) for b, label in enumerate(labels)},
        index=[f"step {int(trajectory.steps[k])}" for k in picks],
    )
