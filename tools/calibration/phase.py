"""Chapter 3's general claims on known-answer chains at the quick profile's sizes (make calibrate).

Each case runs the chapter's own estimator and claims-row helper with the quick profile's lengths, chains, steps,
recording interval, temperature grid and bootstrap, on a Potts chain whose answer is known by mathematics, with a
distance whose law is known (the Hamming share of sites changed) where the notebook uses an embedding distance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

import glauber_core as glauber
from chapters import phase as ch3
from chapters.phase import judging as judging3

from . import cases, quick_sizes

CHAPTER = "03_phase_diagram"
# The sizes each claim's power curve scales: the chains (or coupled pairs per temperature) its statistic averages
# over, and the unrelated pairs of a ceiling; never the steps, grid or budget, which set what is measured.
SIZES = {
    "nlogn_fit": ("hit_chains",),
    "distance_saturates": ("saturation_chains", "ceiling_pairs"),
    "crossover_fractions": ("crossover_chains",),
    "boundary_shift_with_n": ("pairs", "stage_pairs"),
    "transition_width": ("pairs", "stage_pairs"),
    "context_averaged_alpha": ("alpha_contexts",),
    "theorem5_bound_loose": ("pairs", "stage_pairs", "alpha_contexts"),
}


def leaving_sites(n: int, field: float = 40.0) -> glauber.PottsConditionals:
    """Independent sites (J = 0) whose conditional puts all but e^-field of its mass on colour 1: from all-0
    starts the share of sites changed is the coupon collector's (section 6.1's known answer)."""
    return glauber.PottsConditionals(torch.zeros(n, n), torch.tensor([[0.0, field]] * n), q=2)


def hamming_share(trajectory: glauber.Trajectory) -> torch.Tensor:
    """The share of sites that differ from the chain's start, every record [B, R]: a distance bounded by 1."""
    return (trajectory.tokens != trajectory.tokens[:, :1]).double().mean(-1)


# ---- nlogn_fit (Fig. 3b) ----


def _hitting_verdict(seed: int, radius: float, scale: int = 1) -> str:
    """The hitting-time protocol on independent sites that always leave their colour: the quick profile's lengths,
    hitting chains, recording interval, cutoff and bootstrap, then the nlogn rule. Radius 1 (every site changed) is
    the coupon collector, n H_n: n log n holds; radius 1/2 takes about n ln 2 steps, linear in n: it fails."""
    cfg = quick_sizes(ch3, SIZES["nlogn_fit"], scale)
    lengths, times = [], []
    for n in cfg.drift_lengths:
        x0 = torch.zeros(cfg.hit_chains, n, dtype=torch.long)
        run = glauber.glauber(
            leaving_sites(n), x0, cfg.hit_steps, seed=seed * 1000 + n, record_every=cfg.hit_record_every, progress=False
        )
        hit = ch3.hitting_times(hamming_share(run), run.steps, radius)
        lengths += [n] * len(hit)
        times += hit.tolist()
    scaling = ch3.scaling_fits(np.array(lengths), np.array(times), n_boot=cfg.n_boot, seed=seed)
    events = int((np.array(times) >= 0).sum())
    return judging3._nlogn_row(scaling, events, cfg.hit_tau, radius)["verdict"]


# ---- distance_saturates (Fig. 3a) ----


def locked_pairs(n: int, q: int = 20, coupling: float = 12.0) -> glauber.PottsConditionals:
    """q-colour Potts whose first n/2 sites form pairs (0, 1), (2, 3), ... with a strong coupling and whose other
    sites are free: a pair that agrees leaves its colour only after a site breaks away (probability about
    (q - 1) e^-coupling per visit) and its partner follows, so over the book's steps it keeps its start colour."""
    J = torch.zeros(n, n, dtype=torch.float64)
    for i in range(0, n // 2 - 1, 2):
        J[i, i + 1] = J[i + 1, i] = coupling
    return glauber.PottsConditionals(J, q=q)


def _locked_starts(n: int, count: int, q: int, generator) -> torch.Tensor:
    """Uniform states whose locked pairs agree (each pair one uniform colour): unrelated starts of locked_pairs."""
    x = torch.randint(0, q, (count, n), generator=generator)
    x[:, 1 : n // 2 : 2] = x[:, 0 : n // 2 - 1 : 2]
    return x


def _saturation_verdict(seed: int, locked: bool, q: int = 20, scale: int = 1) -> str:
    """Fig. 3a's protocol with the Hamming share (a distance bounded by 1) at the quick profile's lengths, chains,
    steps and recording interval, judged against the ceiling d_ref(n), the share between unrelated starts
    (`ceiling_pairs` pairs), each length run for its T(n) (nlogn_steps). Free sites (every site uniform over q
    colours): after T(n) steps (T >> n log n) every site has been redrawn, d sits at the ceiling (q - 1) / q: it
    saturates. Locked pairs on half the sites: they keep
    their start colour (escape takes about e^12 / (q - 1) visits), so d stays near half the ceiling: it does not."""
    cfg = quick_sizes(ch3, SIZES["distance_saturates"], scale)
    generator = torch.Generator().manual_seed(seed)
    n_all, final, late, ref_n, ref = [], [], [], [], []
    for n in cfg.drift_lengths:
        cond = locked_pairs(n, q) if locked else glauber.PottsConditionals(torch.zeros(n, n), q=q)
        starts = _locked_starts(n, cfg.saturation_chains + 2 * cfg.ceiling_pairs, q, generator)
        if not locked:
            starts = torch.randint(0, q, starts.shape, generator=generator)
        chains, others = starts[: cfg.saturation_chains], starts[cfg.saturation_chains :]
        steps = cfg.saturation_steps_at[n]  # grows like n ln n (nlogn_steps), as the chapter's run does
        run = glauber.glauber(cond, chains, steps, seed=seed * 1000 + n, record_every=cfg.record_every, progress=False)
        at_t, at_two_thirds = ch3.distance_at_ends(hamming_share(run), run.steps, steps)
        pairs = cfg.ceiling_pairs
        n_all += [n] * len(at_t)
        final += at_t.tolist()
        late += at_two_thirds.tolist()
        ref_n += [n] * pairs
        ref += (others[:pairs] != others[pairs:]).double().mean(-1).tolist()
    ceiling = ch3.ceiling_ratios(n_all, final, late, ref_n, ref, n_boot=cfg.n_boot, seed=seed)
    trend = ch3.saturation_trend(n_all, final, n_boot=cfg.n_boot, seed=seed)
    return judging3._saturation_row(ceiling, trend, cfg.saturation_tau, cfg.saturation_steps_at)["verdict"]


# ---- crossover_fractions (Fig. 7) ----


def _crossover_verdict(seed: int, field_on_start: float, q: int, scale: int = 1) -> str:
    """Fig. 7's protocol at the quick profile's lengths, temperatures, chains, steps, recording interval and radii,
    on independent sites with a field `field_on_start` on colour 0, the start, and the Hamming share. Every visit
    redraws a site from its conditional, which leaves the start colour with probability (q - 1) / (e^(field / tau)
    + q - 1): with the field on the start it rises with tau, and so (a coupling with the same uniforms at every tau
    shows it) does the share of chains that reached any radius by any step (the claim holds); with the field against
    the start it falls (it fails). A weak field on the start (1, q = 20: 0.40 at tau 0.3, 0.93 at 2.5) has every
    chain reach R = 0.4 within the run at every tau, hotter ones sooner: the ceiling an early cutoff must see past.
    A faint field on the start (0.1, q = 20: 0.93 at tau 0.3, 0.95 at 2.5) holds in every one of the quick
    profile's 12 (n, R) parts with a rise barely off the null: each part's interval then meets 0 about as often as at
    the null, so "differs" from some part is the risk measured (rule_every_part's Bonferroni correction)."""
    cfg = quick_sizes(ch3, SIZES["crossover_fractions"], scale)
    traces, rows = [], []
    for n in cfg.drift_lengths:
        cond = glauber.PottsConditionals(torch.zeros(n, n), torch.tensor([[field_on_start] + [0.0] * (q - 1)] * n), q=q)
        run, table = ch3.multi_temperature_glauber(
            cond,
            torch.zeros(cfg.crossover_chains, n, dtype=torch.long),
            cfg.drift_temperatures,
            cfg.crossover_steps,
            seed=seed * 1000 + n,
            record_every=cfg.record_every,
            progress=False,
        )
        traces.append(hamming_share(run))
        rows.append(table.assign(n=n))
    rise = ch3.rise_with_temperature(torch.cat(traces), run.steps, pd.concat(rows), ch3.crossover_radii(), seed=seed)
    return judging3._crossover_row(rise)["verdict"]


# ---- boundary_shift_with_n and transition_width (Fig. 2) ----


def curie_weiss(n: int, critical: float) -> glauber.PottsConditionals:
    """All-to-all Potts (q = 2) whose mean-field critical temperature is `critical` (per-site total coupling
    2 critical, pair coupling 2 critical / (n - 1)): below it two wells, above it one."""
    return glauber.PottsConditionals(torch.full((n, n), 2 * critical / (n - 1), dtype=torch.float64), q=2)


def switch(n: int, coupling: float = 6.0) -> glauber.PottsConditionals:
    """Sites 0 and 1 coupled to each other only (a two-site switch), the other n - 2 sites free (q = 2)."""
    J = torch.zeros(n, n, dtype=torch.float64)
    J[0, 1] = J[1, 0] = coupling
    return glauber.PottsConditionals(J, q=2)


def ground_state_grid(cond, n: int, cfg, seed: int) -> pd.DataFrame:
    """The chapter's two-stage coupling grid (ch3.two_stage_grid) at length n at `cfg`'s temperatures, pairs and
    budget, every pair started from the two ground states (all 0, all 1); stage s on seed 2 seed + s - 1."""

    def run_stage(temperatures, stage):
        pairs = cfg.pairs if stage == 1 else cfg.stage_pairs
        x0, y0 = torch.zeros(pairs, n, dtype=torch.long), torch.ones(pairs, n, dtype=torch.long)
        return ch3.coupling_grid(cond, x0, y0, temperatures, cfg.budget, seed=2 * seed + stage - 1, progress=False)

    return ch3.two_stage_grid(run_stage, n, cfg)


def _length_comparison(make, seed: int, cfg):
    """Section 2 of the chapter at `cfg` (quick_sizes): the two-stage grid from the ground states at each length,
    the budget scaled by n log n, and the pooled fit across lengths at both budgets. Returns (scaled pooled fit,
    fixed pooled fit, coupled pairs on the scaled budget)."""
    grid = pd.concat([ground_state_grid(make(n), n, cfg, seed) for n in cfg.lengths], ignore_index=True)
    scaled = ch3.scaled_budget_grid(grid, cfg.budget)
    return (
        ch3.pooled_transition_fit(scaled, cfg.small, cfg.large, cfg.n_boot, seed),
        ch3.pooled_transition_fit(grid, cfg.small, cfg.large, cfg.n_boot, seed),
        int(scaled.coupled.sum()),
    )


def _shift_verdict(seed: int, exponent: float, scale: int = 1) -> str:
    """boundary_shift_with_n on Curie-Weiss with a critical temperature 1.6 (n / 8)^exponent: it moves up with n
    (exponent 1/2: the claim holds) or down (exponent -1/2, from 2.8 at n = 8: it fails)."""
    start = 1.6 if exponent > 0 else 2.8
    cfg = quick_sizes(ch3, SIZES["boundary_shift_with_n"], scale)
    scaled, _, events = _length_comparison(lambda n: curie_weiss(n, start * (n / 8) ** exponent), seed, cfg)
    return judging3._boundary_shift_row(scaled, events, cfg.small, cfg.large)["verdict"]


def _width_verdict(seed: int, chain: str, scale: int = 1) -> str:
    """transition_width on a two-site switch (a fixed barrier: its width in log tau shrinks only like
    1 / log n, the claim holds) or on Curie-Weiss with a fixed critical temperature 2 (mean field: the width
    in log tau shrinks like n^-1/2, it fails)."""
    make = switch if chain == "switch" else (lambda n: curie_weiss(n, 2.0))
    cfg = quick_sizes(ch3, SIZES["transition_width"], scale)
    scaled, fixed, _ = _length_comparison(make, seed, cfg)
    return judging3._transition_width_row(scaled, cfg.small, cfg.large, fixed)["verdict"]


# ---- context_averaged_alpha (section 7) ----


class GatedPotts:
    """s_i(a; x) = gate(x) * coupling * #{j != i: x_j = a} + h_i(a) with gate(x) = 1[x_0 = `gate_colour`] for
    i != 0; site 0 feels a strong field towards colour 1 only. With gate colour 0 the seeds (x_0 = 0) are coupled and
    the visited states (x_0 = 1) are not; with gate colour 1 the other way round."""

    def __init__(self, n: int, gate_colour: int = 0, coupling: float = 2.0, q: int = 4):
        self.vocab_size, self.allowed, self.max_sites = q, torch.ones(q, dtype=torch.bool), n
        self.coupling, self.gate_colour, self.device, self.name_or_path = coupling, gate_colour, torch.device("cpu"), ""
        self.field = torch.zeros(n, q, dtype=torch.float64)
        self.field[0, 1] = 40.0

    def log_scores(self, tokens, positions):
        colours = torch.nn.functional.one_hot(tokens, self.vocab_size).double()
        own = torch.nn.functional.one_hot(positions, tokens.shape[1]).bool()
        counts = (colours * (~own).unsqueeze(-1)).sum(1)
        gate = ((tokens[:, 0] == self.gate_colour) & (positions != 0)).double().unsqueeze(1)
        return self.coupling * gate * counts + self.field[positions]


def _alpha_verdict(seed: int, gate_colour: int, scale: int = 1) -> str:
    """The section 7 estimator at the quick profile's length, contexts, candidates and steps: seeds with x_0 = 0
    (random elsewhere), chains at tau = 2 (past a boundary put at 1), alpha on seeds and on the final states. Gate
    colour 0: the visited states are uncoupled, the seeds are not (the claim holds); gate colour 1: the visited
    states are the coupled ones (it fails)."""
    cfg = quick_sizes(ch3, SIZES["context_averaged_alpha"], scale)
    n, tau = cfg.alpha_length, 2.0
    seeds = torch.randint(0, 4, (cfg.alpha_contexts, n), generator=torch.Generator().manual_seed(seed))
    seeds[:, 0] = 0
    cond = GatedPotts(n, gate_colour)
    run = glauber.glauber(cond, seeds, cfg.drift_steps, tau, seed=seed, record_every=cfg.drift_steps, progress=False)
    alpha = ch3.context_alpha(cond, seeds, {tau: run.final}, cfg.top_k)
    return judging3._alpha_row(alpha, 1.0, [tau])["verdict"]


# ---- theorem5_bound_loose (section 5.2 "On tightness", A.1) ----


class GatedSwitch(GatedPotts):
    """GatedPotts (q = 4, gate colour 0) plus a two-site switch of strength `switch` on the last two sites:
    alpha is large on seeds with x_0 = 0 (the gate open: above 1 up to tau = 8 on 200 random seeds), but every
    chain sets x_0 = 1 on its first visit and closes the gate, so pairs meet as fast as the switch lets them
    (coupling boundary about 1.02 at n = 6 and the quick budget, 200 pairs per temperature, where alpha on 64
    seeds reaches 1 up to tau = 6): tau_alpha / tau_1/2 about 6 (at least 7 at n = 8)."""

    def __init__(self, n: int, switch: float = 6.0):
        super().__init__(n, gate_colour=0)
        J = torch.zeros(n, n, dtype=torch.float64)
        J[n - 2, n - 1] = J[n - 1, n - 2] = switch
        self.switch = glauber.PottsConditionals(J, q=self.vocab_size)

    def log_scores(self, tokens, positions):
        return super().log_scores(tokens, positions) + self.switch.log_scores(tokens, positions)


def clique_in_switch(n: int, switch: float, coupling: float, size: int = 4) -> glauber.PottsConditionals:
    """q = 4 Potts: a two-site switch of strength `switch` on sites 0, 1 (it sets the coupling boundary) and a
    clique of `size` sites from site 2 with pair coupling `coupling` (it sets where alpha, a sum of size - 1
    influences, crosses 1); the other sites free. At n = 6 (the quick alpha_length: no free site) and the quick
    budget (200 pairs per temperature, 64 seeds): switch 10, coupling 2.5 has tau_1/2 about 1.74 and alpha above 1
    up to tau = 2.5, a ratio about 1.44; switch 12, coupling 1.2 has tau_1/2 about 2.05 and alpha above 1 only up
    to tau = 1.25 (the switch's own c_01 < 1 is the largest sum beyond), a ratio about 0.61. (At n = 8: 1.85 and
    1.4, 2.1 and under 0.72.)"""
    J = torch.zeros(n, n, dtype=torch.float64)
    J[0, 1] = J[1, 0] = switch
    clique = torch.arange(2, 2 + size)
    J[clique[:, None], clique[None, :]] = coupling
    J[clique, clique] = 0.0
    return glauber.PottsConditionals(J, q=4)


def _looseness_verdict(seed: int, cond, gate_open: bool, scale: int = 1) -> str:
    """Chapter 3's Theorem 5 protocol at the quick profile's alpha_length, coupling grid (two stages: temperatures,
    pairs, budget, bootstrap) and alpha grid (contexts, candidates): pairs from the ground states all 0 and all 1,
    transition_fits for the boundary tau_1/2, context_alpha on uniform seeds (x_0 = 0 when `gate_open`) for
    criterion_threshold, then the one-sided rule."""
    cfg = quick_sizes(ch3, SIZES["theorem5_bound_loose"], scale)
    n = cfg.alpha_length
    grid = ground_state_grid(cond, n, cfg, seed)
    fit = ch3.transition_fits(grid, n_boot=cfg.n_boot, seed=seed).set_index("n").loc[n]
    seeds = torch.randint(0, cond.vocab_size, (cfg.alpha_contexts, n), generator=torch.Generator().manual_seed(seed))
    if gate_open:
        seeds[:, 0] = 0
    alpha = ch3.context_alpha(cond, seeds, {}, cfg.top_k, seed_temperatures=cfg.alpha_grid)
    return judging3._theorem5_row(alpha, fit, n)["verdict"]


ALPHA_LENGTH = ch3.settings("quick").alpha_length
CASES = cases(
    __file__,
    [
        ("nlogn_fit", "coupon collector: every site changed (n H_n)", "holds", CHAPTER,
         lambda seed, scale=1: _hitting_verdict(seed, 1.0, scale)),
        ("nlogn_fit", "half the sites changed (about n ln 2)", "fails", CHAPTER,
         lambda seed, scale=1: _hitting_verdict(seed, 0.5, scale)),
        ("distance_saturates", "free sites, Hamming share at the ceiling", "holds", CHAPTER,
         lambda seed, scale=1: _saturation_verdict(seed, locked=False, scale=scale)),
        ("distance_saturates", "half the sites in locked pairs: half the ceiling", "fails", CHAPTER,
         lambda seed, scale=1: _saturation_verdict(seed, locked=True, scale=scale)),
        ("crossover_fractions", "independent sites, field on the start colour", "holds", CHAPTER,
         lambda seed, scale=1: _crossover_verdict(seed, 3.0, q=20, scale=scale)),
        ("crossover_fractions", "independent sites, weak field on the start: all leave, hotter sooner", "holds",
         CHAPTER, lambda seed, scale=1: _crossover_verdict(seed, 1.0, q=20, scale=scale)),
        ("crossover_fractions", "independent sites, faint field on the start: 12 parts near the null", "holds",
         CHAPTER, lambda seed, scale=1: _crossover_verdict(seed, 0.1, q=20, scale=scale)),
        ("crossover_fractions", "independent sites, field against the start colour", "fails", CHAPTER,
         lambda seed, scale=1: _crossover_verdict(seed, -3.0, q=3, scale=scale)),
        ("boundary_shift_with_n", "Curie-Weiss, critical temperature rising like n^1/2", "holds", CHAPTER,
         lambda seed, scale=1: _shift_verdict(seed, 0.5, scale)),
        ("boundary_shift_with_n", "Curie-Weiss, critical temperature falling like n^-1/2", "fails", CHAPTER,
         lambda seed, scale=1: _shift_verdict(seed, -0.5, scale)),
        ("transition_width", "two-site switch in free sites (fixed barrier)", "holds", CHAPTER,
         lambda seed, scale=1: _width_verdict(seed, "switch", scale)),
        ("transition_width", "Curie-Weiss, fixed critical temperature (mean field)", "fails", CHAPTER,
         lambda seed, scale=1: _width_verdict(seed, "curie-weiss", scale)),
        ("context_averaged_alpha", "gated Potts: visited states uncoupled", "holds", CHAPTER,
         lambda seed, scale=1: _alpha_verdict(seed, 0, scale)),
        ("context_averaged_alpha", "gated Potts: visited states the coupled ones", "fails", CHAPTER,
         lambda seed, scale=1: _alpha_verdict(seed, 1, scale)),
        ("theorem5_bound_loose", "gated Potts in a switch: tau_alpha about 6 tau_1/2", "holds", CHAPTER,
         lambda seed, scale=1: _looseness_verdict(seed, GatedSwitch(ALPHA_LENGTH), True, scale)),
        ("theorem5_bound_loose", "4-clique in a switch: tau_alpha about 1.4 tau_1/2", "holds", CHAPTER,
         lambda seed, scale=1: _looseness_verdict(seed, clique_in_switch(ALPHA_LENGTH, 10.0, 2.5), False, scale)),
        ("theorem5_bound_loose", "4-clique in a stiffer switch: about 0.6 tau_1/2", "fails", CHAPTER,
         lambda seed, scale=1: _looseness_verdict(seed, clique_in_switch(ALPHA_LENGTH, 12.0, 1.2), False, scale)),
    ],
    SIZES,
)  # fmt: skip
