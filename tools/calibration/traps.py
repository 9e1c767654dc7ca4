"""Chapter 5's general claims on known-answer chains at the quick profile's sizes (make calibrate): each case runs
the chapter's own estimators (detect_traps, trap_catalogue, trap_frame, null_durations, cold_frame) on Hamming
vectors (state_vectors without an embedder, as on a protein model) and its row functions, whose verdicts come from
verdicts.py's chapter-5 rules. The trap chains start from random states; the cold chains from the model's favourites
(as text mostly holds its model's first choices) where the claim holds, and from random states (a chain that falls
to its favourites and freezes, far from its start) where it fails."""

from __future__ import annotations

import torch

import glauber_core as glauber
from chapters import traps as ch

from . import cases, quick_sizes

QUICK = ch.settings("quick")
N, TAU = QUICK.seq_len, ch.PAPER_TAU
AT = f"τ = {TAU:g}"
# The size each claim's power curve scales: the chains its statistic pools (one a profile for mean_gap_correlation),
# and for approximate_trap_duration the steps, so that a chain runs long enough to see its traps end.
SIZES = {
    **dict.fromkeys(("cold_chains_stay", "trap_split", "escape_weakest_site", "mean_gap_correlation"), ("n_chains",)),
    "approximate_trap_duration": ("steps",),
}


def sized(claim: str, scale: int):
    """The quick settings with `claim`'s SIZES times `scale`."""
    return quick_sizes(ch, SIZES[claim], scale)


def random_starts(chains: int, n: int, colours: int, seed: int) -> torch.Tensor:
    """`chains` uniformly random states of n sites (the book's chains start from text, not a ground state)."""
    return torch.randint(0, colours, (chains, n), generator=torch.Generator().manual_seed(seed))


def independent_sites(field) -> glauber.PottsConditionals:
    """Sites with no coupling: s_i(a; x) = field[i, a], whatever the others hold."""
    field = torch.as_tensor(field, dtype=torch.float64)
    return glauber.PottsConditionals(torch.zeros(len(field), len(field)), field, q=field.shape[1])


def favourites(n: int, colours: int, seed: int, low: float = 1.0, high: float = 3.0) -> glauber.PottsConditionals:
    """Independent sites, each with its own favourite colour ahead of the others by a gap drawn in [low, high]."""
    generator = torch.Generator().manual_seed(seed)
    field = torch.zeros(n, colours, dtype=torch.float64)
    gaps = low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)
    field[torch.arange(n), torch.randint(0, colours, (n,), generator=generator)] = gaps
    return independent_sites(field)


def tied_favourites(n: int, colours: int, gap: float = 2.0) -> glauber.PottsConditionals:
    """Independent sites whose two first colours tie, `gap` ahead of the rest: however cold, a site keeps
    flipping between its two favourites (no strict argmax, so nothing holds the chain)."""
    field = torch.zeros(n, colours, dtype=torch.float64)
    field[:, :2] = gap
    return independent_sites(field)


def mean_field_potts(n: int, colours: int, total: float) -> glauber.PottsConditionals:
    """Curie-Weiss Potts: every pair coupled by total / (n - 1), no field; `colours` wells (every site alike)."""
    return glauber.PottsConditionals(torch.full((n, n), total / (n - 1), dtype=torch.float64), q=colours)


# --------------------------------------------------------------------------------------------
# cold_chains_stay (C.3): the distance from the start at the burn-in and at the end, cold against warm
# --------------------------------------------------------------------------------------------


def favourite_starts(cond: glauber.PottsConditionals, chains: int, off: int = 0, seed: int = 0) -> torch.Tensor:
    """`chains` copies of the state that holds each site's favourite colour (the argmax of its field: the model's
    first choice everywhere, as the text a model was trained on mostly is), each with `off` random sites set to a
    random other colour (a text the model would change at `off` places)."""
    generator = torch.Generator().manual_seed(seed)
    n, colours = cond.field.shape
    x0 = cond.field.argmax(1).repeat(chains, 1)
    for chain in range(chains):
        sites = torch.randperm(n, generator=generator)[:off]
        x0[chain, sites] = (x0[chain, sites] + torch.randint(1, colours, (off,), generator=generator)) % colours
    return x0


def well_starts(chains: int, n: int, colours: int, seed: int) -> torch.Tensor:
    """`chains` states with every site the same colour (a well of mean_field_potts), the colour drawn per chain."""
    return random_starts(chains, 1, colours, seed).repeat(1, n)


def cold_verdict(cond, seed: int, scale: int = 1, starts=None) -> str:
    """The notebook's cold comparison at the quick sizes (`scale` times its chains): the warm (tau = 1) and cold
    chains from the same starts (`starts(chains)`, else uniformly random ones), cold_frame on Hamming vectors,
    cold_row's verdict (rule_every_part over 2 cold temperatures x 2 steps: differs at every_part_level(4))."""
    cfg = sized("cold_chains_stay", scale)
    taus = [cfg.temperatures[0], *cfg.cold_temperatures]
    x0 = random_starts(cfg.n_chains, N, cond.vocab_size, seed) if starts is None else starts(cfg.n_chains)
    runs = ch.chains_at_temperatures(cond, x0, taus, cfg.cold_steps, seed=seed, record_every=cfg.cold_record)
    vectors = {tau: (ch.state_vectors(cond, None, run), run.steps) for tau, run in runs.items()}
    cold = ch.cold_frame(vectors.pop(taus[0]), vectors, cfg.burn_in, cfg.cold_steps)
    return ch.cold_row(cold)["verdict"]


def at_favourites(cond, seed: int, scale: int = 1, off: int = 0) -> str:
    """cold_verdict from the favourite state with `off` sites changed (favourite_starts)."""
    return cold_verdict(cond, seed, scale, lambda chains: favourite_starts(cond, chains, off, seed))


# Expected distances (Hamming share): from the favourites, cold chains keep them (0, or off / N) while warm ones lie
# at the share of sites off their favourite (about 0.3 for gaps 1-3, 0.7 for gap 0.3; a cold chain at tau 0.1 with
# gap 0.3 about 0.13). From uniformly random starts, every chain, cold or warm, ends (and lies at its burn-in) at
# 1 - 1/q of its start's sites on independent sites, about 2/3 on mean-field Potts: a ratio of 1, over the factor.
CASES = cases(
    __file__,
    [
        ("cold_chains_stay", "independent sites, favourite ahead by 1-3, starts at the favourites", "holds",
         "05_traps", lambda seed, scale=1: at_favourites(favourites(N, 4, seed), seed, scale)),
        ("cold_chains_stay", "independent sites, favourite ahead by 1-3, starts one site off the favourites",
         "holds", "05_traps", lambda seed, scale=1: at_favourites(favourites(N, 4, seed), seed, scale, off=1)),
        ("cold_chains_stay", "weak favourites (gap 0.3) from the favourites: at tau 0.1 a fifth of the warm distance",
         "holds", "05_traps", lambda seed, scale=1: at_favourites(favourites(N, 4, seed, 0.3, 0.3), seed, scale)),
        ("cold_chains_stay", "mean-field Potts (3 wells, coupling 2), starts in a well", "holds", "05_traps",
         lambda seed, scale=1: cold_verdict(mean_field_potts(N, 3, 2.0), seed, scale,
                                            lambda chains: well_starts(chains, N, 3, seed))),
        ("cold_chains_stay", "falls, then freezes: favourites ahead by 1-3, random starts", "fails", "05_traps",
         lambda seed, scale=1: cold_verdict(favourites(N, 4, seed), seed, scale)),
        ("cold_chains_stay", "falls, then freezes: mean-field Potts (3 wells), random starts", "fails", "05_traps",
         lambda seed, scale=1: cold_verdict(mean_field_potts(N, 3, 2.0), seed, scale)),
        ("cold_chains_stay", "uniform conditionals (temperature-blind)", "fails", "05_traps",
         lambda seed, scale=1: cold_verdict(independent_sites(torch.zeros(N, 4)), seed, scale)),
        ("cold_chains_stay", "two tied favourites at every site, starts at one of them", "fails", "05_traps",
         lambda seed, scale=1: cold_verdict(tied_favourites(N, 4), seed, scale,
                                            lambda chains: torch.zeros(chains, N, dtype=torch.long))),
    ],
    SIZES,
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# The trap claims (appendix A.1, C.2): one run at tau = 1 through the chapter's detector and catalogue
# --------------------------------------------------------------------------------------------


def trap_run(cond, seed: int, cfg=QUICK, *, null: bool = True, x0=None, frozen=0):
    """The notebook's trap pipeline at the settings `cfg` (the quick ones, or sized) on Hamming vectors:
    cfg.n_chains chains at tau = 1 from random starts (or `x0`; `frozen` sites fixed), detect_traps,
    trap_catalogue, trap_frame and (with `null`) null_durations. (traps, null)."""
    x0 = random_starts(cfg.n_chains, N, cond.vocab_size, seed) if x0 is None else x0
    run = glauber.glauber(
        cond, x0, cfg.steps, TAU, frozen=frozen, seed=seed, record_every=cfg.record_every, progress=False
    )
    vectors = ch.state_vectors(cond, None, run)
    found = {TAU: ch.trap_catalogue(cond, run, ch.detect_traps(vectors, run.steps, cfg.window, cfg.threshold))}
    durations = ch.null_durations(cond, None, run, cfg.window, cfg.threshold, seed=seed) if null else []
    return ch.trap_frame(cond, {TAU: (run, vectors)}, found), durations


class TwoWells:
    """Binary Curie-Weiss on the first `coupled` sites, s_i(a; x) = J / coupled * #{j != i coupled: x_j = a}: two
    wells (all 0, all 1) that a chain leaves only collectively; the other sites have no field (gap 0 at every held
    state: the held token ties with the other, so it is not the unique argmax and chapter 5 counts the state as an
    approximate trap, held by collective persistence alone)."""

    def __init__(self, n: int, coupled: int, coupling: float):
        self.n, self.coupled, self.coupling = n, coupled, coupling
        self.vocab_size, self.max_sites, self.protein = 2, n, False
        self.allowed, self.device = torch.ones(2, dtype=torch.bool), torch.device("cpu")
        self.name_or_path = f"two-wells(n={n}, coupled={coupled}, J={coupling:g})"

    def log_scores(self, tokens, positions):
        wells = tokens[:, : self.coupled]
        inside = positions < self.coupled
        own = wells.gather(1, positions.clamp_max(self.coupled - 1)[:, None]).squeeze(1)
        ones = wells.sum(1).double() - torch.where(inside, own, 0).double()
        others = torch.where(inside, self.coupled - 1.0, float(self.coupled))
        scores = torch.stack([others - ones, ones], 1) * self.coupling / self.coupled
        return torch.where(inside[:, None], scores, torch.zeros_like(scores))


def free_last_site(field: float) -> glauber.PottsConditionals:
    """Independent binary sites, colour 0 ahead by `field` at every site but the last, which has no field."""
    scores = torch.zeros(N, 2, dtype=torch.float64)
    scores[:-1, 0] = field
    return independent_sites(scores)


class LockedWells:
    """Binary sites 0..n-3 in two wells locked by a strong mean-field coupling (J = 30: a chain stays in the well its
    start's majority picks); the last two sites i, k follow site 0 with gap 30, except, with `rotor_in_well_1`, in
    well 1, where they chase each other: s_i(a) = 30 [a = 1 - x_k], s_k(a) = 30 [a = x_i], so each of their four
    states has one of the two at gap -30. So every held state in well 0 is a perfect trap and, with the rotor, every
    one in well 1 an approximate trap (Delta* = -30, far beyond the tie tolerance)."""

    def __init__(self, n: int, rotor_in_well_1: bool, coupling: float = 30.0):
        self.wells, self.rotor, self.coupling = TwoWells(n, n - 2, coupling), rotor_in_well_1, coupling
        self.vocab_size, self.max_sites, self.protein = 2, n, False
        self.allowed, self.device = torch.ones(2, dtype=torch.bool), torch.device("cpu")
        self.name_or_path = f"locked-wells(n={n}, rotor={rotor_in_well_1})"

    def log_scores(self, tokens, positions):
        n = tokens.shape[1]
        rotor = torch.where(positions == n - 2, 1 - tokens[:, -1], tokens[:, -2])  # the rotor's favourites
        target = torch.where((tokens[:, 0] == 1) & self.rotor, rotor, tokens[:, 0])
        pair = torch.nn.functional.one_hot(target, 2).double() * self.coupling
        return torch.where((positions >= n - 2)[:, None], pair, self.wells.log_scores(tokens, positions))


def split_verdict(seed: int, rotor_in_well_1: bool, scale: int = 1) -> str:
    """trap_split at the quick sizes (split_row on trap_run's traps) on LockedWells."""
    cfg = sized("trap_split", scale)
    return ch.split_row(trap_run(LockedWells(N, rotor_in_well_1), seed, cfg, null=False)[0], AT)["verdict"]


def reentry_verdict(seed: int, scale: int = 1) -> str:
    """trap_split at the quick sizes on Gate(2.5, 8): two perfect wells (all 0, all 1) that chains leave through the
    gate and come back to, so a chain re-enters its held states; split_row counts each once. The other sites at gap 8
    (not 4): a site off its well (gap -8) is undone at its next visit (p 0.9997), so no held state has one."""
    cfg = sized("trap_split", scale)
    return ch.split_row(trap_run(Gate(2.5, [8.0] * (N - 1)), seed, cfg, null=False)[0], AT)["verdict"]


def duration_verdict(cond, seed: int, scale: int = 1) -> str:
    """approximate_trap_duration at the quick sizes (duration_row on trap_run's traps and null)."""
    cfg = sized("approximate_trap_duration", scale)
    traps, null = trap_run(cond, seed, cfg)
    return ch.duration_row(traps, null, cfg.window, cfg.steps, AT, seed)["verdict"]


CASES += cases(
    __file__,
    [
        ("trap_split", "two locked wells, one perfect and one with a rotor pair (approximate, Δ* = -30)", "holds",
         "05_traps", lambda seed, scale=1: split_verdict(seed, True, scale)),
        ("trap_split", "two locked wells, every held state perfect", "fails", "05_traps",
         lambda seed, scale=1: split_verdict(seed, False, scale)),
        ("trap_split", "re-entries: gated wells, every held state perfect, re-entered after escapes", "fails",
         "05_traps", reentry_verdict),
        ("approximate_trap_duration", f"two wells ({N - 1} sites, J = 3.5) and a free site", "holds", "05_traps",
         lambda seed, scale=1: duration_verdict(TwoWells(N, N - 1, 3.5), seed, scale)),
        ("approximate_trap_duration", "independent sites (field 2) and a free site: no collective persistence",
         "fails", "05_traps", lambda seed, scale=1: duration_verdict(free_last_site(2.0), seed, scale)),
    ],
    SIZES,
)  # fmt: skip


class Gate:
    """Binary sites; site 0 a gate, s_0(a; x) = g * (share of the other sites at a); site i >= 1,
    s_i(a; x) = h_i [a == x_0]. A departure at the gate starts a cascade into the other well (the chain does not
    come back); a departure elsewhere is undone. So the final escapes come at the gate, whatever share of the
    kernel's exit probability it has (appendix C.2's claim holds exactly when the gate is the weakest site)."""

    def __init__(self, gate: float, fields):
        self.gate, self.fields = gate, torch.as_tensor(fields, dtype=torch.float64)
        self.n = len(self.fields) + 1
        self.vocab_size, self.max_sites, self.protein = 2, self.n, False
        self.allowed, self.device = torch.ones(2, dtype=torch.bool), torch.device("cpu")
        self.name_or_path = f"gate(g={gate:g})"

    def log_scores(self, tokens, positions):
        ones = tokens[:, 1:].double().mean(1)
        gate = torch.stack([1 - ones, ones], 1) * self.gate
        field = self.fields[(positions - 1).clamp_min(0)]
        site = torch.stack([(tokens[:, 0] == 0).double(), (tokens[:, 0] == 1).double()], 1) * field[:, None]
        return torch.where((positions == 0)[:, None], gate, site)


def weakest_verdict(cond, seed: int, scale: int = 1) -> str:
    """escape_weakest_site at the quick sizes (weakest_row on trap_run's traps)."""
    return ch.weakest_row(trap_run(cond, seed, sized("escape_weakest_site", scale), null=False)[0], AT)["verdict"]


CASES += cases(
    __file__,
    [
        ("escape_weakest_site", "gate (gap 2.5) the weakest site, the others 4: escapes through the gate", "holds",
         "05_traps", lambda seed, scale=1: weakest_verdict(Gate(2.5, [4.0] * (N - 1)), seed, scale)),
        ("escape_weakest_site", "strong gate (4), site 1 the weakest (1): its departures are undone", "fails",
         "05_traps", lambda seed, scale=1: weakest_verdict(Gate(4.0, [1.0] + [4.0] * (N - 2)), seed, scale)),
    ],
    SIZES,
)  # fmt: skip


class Profiles:
    """One chain per profile: binary sites 0..n-2 and a frozen last site holding the chain's profile id (score 50
    for its own id: never the weakest). Site i of profile k: s_i(a; x) = gate[k] * (share of sites 1..n-2 at a)
    for i = 0 when `gated` (a departure there starts a cascade: the others follow site 0), else field[k, 0] [a == 0];
    for i >= 1, field[k, i] [a == x_0] when gated, else field[k, i] [a == 0]. Colours 2.. score -30 (never drawn)."""

    def __init__(self, field, gate=None):
        self.field = torch.as_tensor(field, dtype=torch.float64)
        self.gate = None if gate is None else torch.as_tensor(gate, dtype=torch.float64)
        profiles, sites = self.field.shape
        self.n, self.vocab_size, self.max_sites, self.protein = sites + 1, max(profiles, 2), sites + 1, False
        self.allowed, self.device = torch.ones(self.vocab_size, dtype=torch.bool), torch.device("cpu")
        self.name_or_path = f"profiles({profiles}, gated={gate is not None})"

    def log_scores(self, tokens, positions):
        profile, last = tokens[:, -1], self.n - 1
        scores = torch.full((len(tokens), self.vocab_size), -30.0, dtype=torch.float64)
        target = tokens[:, 0] if self.gate is not None else torch.zeros_like(profile)
        field = self.field[profile, positions.clamp_max(last - 1)]
        scores[:, :2] = torch.nn.functional.one_hot(target, 2).double() * field[:, None]
        if self.gate is not None:
            ones = tokens[:, 1:last].double().mean(1)
            gate = torch.stack([1 - ones, ones], 1) * self.gate[profile][:, None]
            scores[:, :2] = torch.where((positions == 0)[:, None], gate, scores[:, :2])
        own = torch.nn.functional.one_hot(profile, self.vocab_size).double() * 50.0
        return torch.where((positions == last)[:, None], own, scores)


def profile_run(cond: Profiles, seed: int, cfg):
    """trap_run with one chain per profile (cfg.n_chains of them): random binary starts, the profile id frozen in
    the last site."""
    chains = cfg.n_chains
    x0 = torch.cat([random_starts(chains, N - 1, 2, seed), torch.arange(chains)[:, None]], 1)
    return trap_run(cond, seed, cfg, null=False, x0=x0, frozen=torch.arange(N) == N - 1)[0]


def mean_profiles(seed: int, chains: int) -> Profiles:
    """Independent sites (no gate): every site of profile k ahead by m_k (2 to 3), one shuffled site weaker by d_k
    (0 to 1): a trap ends when enough sites are off at once, at a rate set by all sites (the mean gap)."""
    generator = torch.Generator().manual_seed(seed)
    m = torch.linspace(2.0, 3.0, chains, dtype=torch.float64)
    field = m[:, None].repeat(1, N - 1)
    field[:, -1] -= torch.rand(chains, generator=generator, dtype=torch.float64)
    return Profiles(field)


def min_profiles(seed: int, chains: int) -> Profiles:
    """Gated sites: profile k's gate (the weakest site) ahead by g_k (2 to 4), the others by shuffled gaps in
    [6, 12]: a trap ends when the gate departs (a cascade), at a rate set by the minimum gap alone."""
    generator = torch.Generator().manual_seed(seed)
    field = 6 + 6 * torch.rand(chains, N - 1, generator=generator, dtype=torch.float64)
    return Profiles(field, gate=torch.linspace(2.0, 4.0, chains, dtype=torch.float64))


def correlation_verdict(profiles, seed: int, scale: int = 1) -> str:
    """mean_gap_correlation at the quick sizes (correlation_row on the traps of `profiles(seed, chains)`, one
    chain a profile)."""
    cfg = sized("mean_gap_correlation", scale)
    return ch.correlation_row(profile_run(profiles(seed, cfg.n_chains), seed, cfg), AT, seed)["verdict"]


CASES += cases(
    __file__,
    [
        ("mean_gap_correlation", "independent sites whose exit rate follows all gaps (the mean)", "holds",
         "05_traps", lambda seed, scale=1: correlation_verdict(mean_profiles, seed, scale)),
        ("mean_gap_correlation", "gated sites whose exit rate follows the gate (the minimum gap)", "fails",
         "05_traps", lambda seed, scale=1: correlation_verdict(min_profiles, seed, scale)),
    ],
    SIZES,
)  # fmt: skip
