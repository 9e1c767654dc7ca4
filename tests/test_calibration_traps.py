"""Chapter 5's verdict rules calibrated on ground truth: each general claim's estimator and rule, the very
functions the notebook calls (detect_traps, trap_catalogue, trap_frame, judge_*), run on small chains whose answer
is known by mathematics, must say "reproduced" where the claim holds and "differs" where it fails (or, where only
one side can exist, that side; book/paper_claims.csv's `calibration` column says which).

The chains are independent sites whose fields depend on a frozen last site (a profile id), so that each chain of
a batch has its own, exactly known score gaps; states are embedded by `site_embeddings`, whose cosine distance
is the Hamming distance over n.
"""

import functools
import math

import numpy as np
import torch

import glauber_core as glauber
import verdicts as vd
from chapters import traps as ch


class ProfileFields:
    """s_i(a; x) = fields[x_last, i, a]: independent sites whose fields depend on the frozen last site, which
    holds the chain's profile id (its own score 50 for its own colour, so it never moves and never is weakest)."""

    def __init__(self, fields):
        fields = torch.as_tensor(fields, dtype=torch.float64)
        profiles, n, vocab = fields.shape
        own = torch.zeros(profiles, 1, vocab, dtype=torch.float64)
        own[torch.arange(profiles), 0, torch.arange(profiles)] = 50.0
        self.scores = torch.cat([fields, own], 1)
        self.vocab_size, self.max_sites, self.n = vocab, n + 1, n
        self.allowed = torch.ones(vocab, dtype=torch.bool)
        self.device, self.name_or_path = torch.device("cpu"), "profile-fields"

    def log_scores(self, tokens, positions):
        return self.scores[tokens[:, -1], positions]


def run_profiles(
    fields,
    chains_per: int,
    steps: int,
    window: int,
    threshold: float,
    tau: float = 1.0,
    *,
    record_every: int = 1,
    seed: int = 0,
    judge_with=None,
):
    """Glauber chains from the all-0 state, `chains_per` per profile; traps detected on site embeddings and
    catalogued (gaps, departures, the kernel's share) under `judge_with` (default: the chain's own model)."""
    cond = ProfileFields(fields)
    profiles, n = cond.scores.shape[0], cond.n
    ids = torch.arange(profiles).repeat_interleave(chains_per)
    x0 = torch.cat([torch.zeros(len(ids), n, dtype=torch.long), ids[:, None]], 1)
    frozen = torch.arange(n + 1) == n
    run = glauber.glauber(cond, x0, steps, tau, frozen=frozen, seed=seed, record_every=record_every, progress=False)
    embeddings = ch.site_embeddings(run.tokens[:, :, :n])
    judge = judge_with or cond
    found = {tau: ch.trap_catalogue(judge, run, ch.detect_traps(embeddings, run.steps, window, threshold))}
    return ch.trap_frame(judge, {tau: (run, embeddings)}, found), run


def locked(profiles: int, n: int, vocab: int = 2, gap: float = 30.0, free_last: bool = False):
    """Fields of `profiles` identical profiles: colour 0 ahead by `gap` at every site (a ground state every chain
    keeps at tau = 1: every token the argmax, a perfect trap); with free_last the last site has no field (gap 0:
    not every token the strict argmax, an approximate trap held by its locked neighbours)."""
    fields = np.zeros((profiles, n, vocab))
    fields[:, :, 0] = gap
    if free_last:
        fields[:, -1, :] = 0.0
    return fields


# The notebook's detector settings at n = 10 (ch.settings): a 15-sweep window and the paper's threshold.
N, STEPS = 10, 600
_DETECTOR = ch.settings("quick", seq_len=N, record_every=1)
WINDOW, THRESHOLD = _DETECTOR.window, _DETECTOR.threshold
assert (WINDOW, THRESHOLD) == (150, 0.12)


# ------------------------------------------------------------------------------------------------
# trap_split: both kinds occur
# ------------------------------------------------------------------------------------------------


def test_trap_split_holds_with_both_kinds_and_differs_with_perfect_traps_only():
    fields = np.concatenate([locked(1, N), locked(1, N, free_last=True)])  # profile 0 perfect, 1 approximate
    traps, _ = run_profiles(fields, 10, STEPS, WINDOW, THRESHOLD)
    assert set(traps.kind) == {"perfect", "approximate"}
    assert ch.judge_split(traps)[0] == vd.REPRODUCED
    traps, _ = run_profiles(locked(1, N), 40, 300, WINDOW, THRESHOLD)  # 40 ground-state chains: 40 perfect
    assert (traps.kind == "perfect").sum() == 40
    assert ch.judge_split(traps)[0] == vd.DIFFERS


def test_trap_split_with_no_trap_is_inconclusive():
    traps, _ = run_profiles(np.zeros((1, N, 4)), 10, STEPS, WINDOW, THRESHOLD)  # uniform conditionals: moves
    assert traps.empty and ch.judge_split(traps)[0] == vd.INCONCLUSIVE


# ------------------------------------------------------------------------------------------------
# approximate_trap_duration: ended approximate traps against the detector on a surrogate without collective
# persistence (persistence_surrogate: each site's own flip rate and law, sites independent)
# ------------------------------------------------------------------------------------------------


class CurieWeiss:
    """n coupled binary sites, s_i(a; x) = J / n * #{j != i coupled: x_j = a}: two wells (all 0, all 1) that a
    chain leaves only collectively; plus one free site (no field: gap 0 at every held state, an approximate
    trap)."""

    def __init__(self, n: int, coupling: float):
        self.n, self.coupling = n, coupling
        self.vocab_size, self.max_sites = 2, n + 1
        self.allowed = torch.ones(2, dtype=torch.bool)
        self.device, self.name_or_path = torch.device("cpu"), "curie-weiss"

    def log_scores(self, tokens, positions):
        coupled = tokens[:, : self.n]
        inside = positions < self.n
        own = coupled.gather(1, positions.clamp_max(self.n - 1)[:, None]).squeeze(1)
        ones = coupled.sum(1).double() - torch.where(inside, own, 0).double()
        others = torch.where(inside, self.n - 1.0, float(self.n))
        scores = torch.stack([others - ones, ones], 1) * self.coupling / self.n
        return torch.where(inside[:, None], scores, torch.zeros_like(scores))


def duration_case(run, tokens, window, threshold=THRESHOLD, cond=None):
    """The notebook's path on Hamming vectors: detect, catalogue, the surrogate's null, the judge."""
    from types import SimpleNamespace

    traps = ch.detect_traps(ch.site_embeddings(tokens), run.steps, window, threshold)
    catalogue = ch.trap_catalogue(cond, run, traps) if cond is not None else traps.assign(kind="approximate")
    null = ch.null_durations(None, None, SimpleNamespace(tokens=tokens, steps=run.steps), window, threshold)
    return catalogue, ch.judge_approximate_duration(catalogue, null)


def test_approximate_traps_of_a_two_well_chain_outlast_the_detectors_null():
    cond = CurieWeiss(8, 5.0)
    run = glauber.glauber(cond, torch.zeros(16, 9, dtype=torch.long), 3000, 1.0, seed=0, progress=False)
    traps, (verdict, reason, ratio, low, _) = duration_case(run, run.tokens, 90, cond=cond)
    assert (traps.kind == "approximate").all() and (~traps.censored).sum() >= 8
    assert verdict == vd.REPRODUCED and low > ch.DURATION_FACTOR, reason


def test_a_stationary_independent_site_chain_differs_and_a_never_ending_trap_is_not_judged():
    """Independent sites near their favourites (field 1.5, no metastability): the detector flags stretches, and
    their surrogate, the same law, gives as long ones (ratio about 1). A trap held for the whole run (locked
    neighbours) never ends: stable, not metastable, so it is not judged."""
    fields = np.zeros((2, N, 2))
    fields[:, :-1, 0] = 1.5
    _, run = run_profiles(fields, 20, 1500, WINDOW, THRESHOLD)
    traps, (verdict, reason, ratio, _, high) = duration_case(run, run.tokens[:, :, :N], WINDOW)
    assert (~traps.censored).sum() > 5 and 0.5 < ratio < 1.5
    assert verdict == vd.DIFFERS and high < ch.DURATION_FACTOR, reason
    traps, _ = run_profiles(locked(1, N, free_last=True), 10, STEPS, WINDOW, THRESHOLD)
    assert traps.censored.all()
    assert ch.judge_approximate_duration(traps, [150.0, 160.0])[0] == vd.INCONCLUSIVE


# ------------------------------------------------------------------------------------------------
# mean_gap_correlation: the escape rate of independent sites is sum_i (1/n) p_i(leave), known exactly
# ------------------------------------------------------------------------------------------------


def gap_profiles(kind: str, profiles: int = 8, n: int = 8, seed: int = 0):
    """kind "mean": every site at m_k except one at m_k - d_k (d_k shuffled): the exit rate, a sum over all
    sites, follows m_k, which the mean gap tracks and the shuffled minimum does not. kind "min": one weak site
    at m_k, the others large and shuffled: the rate follows the weak site (the minimum) and the mean follows
    the shuffled large gaps."""
    rng = np.random.default_rng(seed)
    fields = np.zeros((profiles, n, profiles))
    m = np.linspace(2.5, 5.5, profiles) if kind == "mean" else np.linspace(2.0, 5.0, profiles)
    for k in range(profiles):
        if kind == "mean":
            fields[k, :, 0] = m[k]
            fields[k, -1, 0] = m[k] - rng.permutation(np.linspace(0, 1.4, profiles))[k]
        else:
            fields[k, :-1, 0] = rng.uniform(8, 14, n - 1)
            fields[k, -1, 0] = m[k]
    return fields


@functools.cache
def first_departure_traps(kind: str):
    """Traps that end at their first departure: a threshold below one flipped site in one recorded state of
    the 8-step window."""
    return run_profiles(gap_profiles(kind), 4, 1200, 8, 0.01)[0]


def test_mean_gap_correlation_holds_when_the_rate_follows_the_mean_and_differs_when_it_follows_the_min():
    verdict, _, s = ch.judge_gap_correlation(first_departure_traps("mean"))
    assert verdict == vd.REPRODUCED, s
    traps = first_departure_traps("min")
    verdict, _, s = ch.judge_gap_correlation(traps)
    assert verdict == vd.DIFFERS, s


# ------------------------------------------------------------------------------------------------
# escape_weakest_site: the final escapes against the kernel's one-step share at the held states
# ------------------------------------------------------------------------------------------------


class Gate:
    """Binary sites; site 0 a gate, s_0(a; x) = g * (share of the other sites at a); site i >= 1,
    s_i(a; x) = h_i [a == x_0]. A departure at the gate starts a cascade into the other well (the chain does
    not come back); a departure elsewhere is undone. So the final escapes are at the gate, whatever share of
    the kernel's exit probability it has."""

    def __init__(self, gate: float, fields):
        self.gate, self.fields = gate, torch.as_tensor(fields, dtype=torch.float64)
        self.n = len(fields) + 1
        self.vocab_size, self.max_sites = 2, self.n
        self.allowed = torch.ones(2, dtype=torch.bool)
        self.device, self.name_or_path = torch.device("cpu"), "gate"

    def log_scores(self, tokens, positions):
        ones = tokens[:, 1:].double().mean(1)
        gate = torch.stack([1 - ones, ones], 1) * self.gate
        field = self.fields[(positions - 1).clamp_min(0)]
        site = torch.stack([(tokens[:, 0] == 0).double(), (tokens[:, 0] == 1).double()], 1) * field[:, None]
        return torch.where((positions == 0)[:, None], gate, site)


def gate_traps(gate: float, fields, chains: int, steps: int, window: int):
    cond = Gate(gate, fields)
    run = glauber.glauber(cond, torch.zeros(chains, cond.n, dtype=torch.long), steps, 1.0, seed=0, progress=False)
    vectors = ch.site_embeddings(run.tokens)
    found = {1.0: ch.trap_catalogue(cond, run, ch.detect_traps(vectors, run.steps, window, THRESHOLD))}
    return ch.trap_frame(cond, {1.0: (run, vectors)}, found)


def test_final_escapes_at_a_weakest_gate_beat_the_kernel_and_at_a_strong_gate_fall_below_it():
    # the gate is the weakest site (gap 2.5 against 4): the kernel puts about a third of departures there,
    # the final escapes are mostly there
    traps = gate_traps(2.5, [4.0] * 9, 16, 2000, 60)
    verdict, reason, hits, tries, chance, low, _ = ch.judge_weakest_site(traps)
    assert tries > 50 and verdict == vd.REPRODUCED and low > chance, reason
    # the gate is strong (4) and site 1 the weakest (gap 1): the kernel puts about 60% of departures at site
    # 1, which are undone; the final escapes come through the gate
    traps = gate_traps(4.0, [1.0] + [4.0] * 8, 32, 2000, WINDOW)
    verdict, reason, hits, tries, chance, _, high = ch.judge_weakest_site(traps)
    assert tries > 50 and verdict == vd.DIFFERS and high < chance, reason
    # all departures, by contrast, follow the kernel's one-step law by construction (a 99.9% interval: at 95% an
    # exact law falls outside one run in twenty)
    moves, at = int(traps.departures.sum()), int(traps.departures_at_weakest.sum())
    low, high = (float(v[0]) for v in vd.share_intervals([at], [moves], level=0.999))
    assert low <= ch.kernel_chance(traps) <= high


def test_a_run_with_no_escape_is_inconclusive():
    traps, _ = run_profiles(locked(1, N, free_last=True), 4, STEPS, WINDOW, THRESHOLD)  # held the whole run
    assert traps.censored.all() and ch.judge_weakest_site(traps)[0] == vd.INCONCLUSIVE


# ------------------------------------------------------------------------------------------------
# cold_chains_stay: the upper bound of the distance from the start below NEAR_START, per temperature
# ------------------------------------------------------------------------------------------------


def cold_frame(fields, temperatures, steps: int = 400, chains: int = 8):
    """The notebook's cold comparison on Potts-like chains: distance from the start after `steps` steps,
    Hamming over n (site_embeddings) in place of the sentence embedding, through distance_at and cold_distances."""
    cond = ProfileFields(fields)
    n = cond.n
    x0 = torch.cat([torch.zeros(chains, n, dtype=torch.long), torch.zeros(chains, 1, dtype=torch.long)], 1)
    frozen = torch.arange(n + 1) == n
    distances = {}
    for tau in temperatures:
        run = glauber.glauber(cond, x0, steps, tau, frozen=frozen, record_every=steps, progress=False)
        vectors = ch.site_embeddings(run.tokens[:, :, :n])
        vectors = vectors / vectors.norm(dim=-1, keepdim=True)
        distances[tau] = ch.distance_at(vectors, run.steps, steps)
    return ch.cold_distances(distances[temperatures[0]], distances)


def test_cold_chains_at_a_ground_state_stay_and_uniform_chains_move():
    ferro = np.zeros((1, N, 3))
    ferro[0, :, 0] = 3.0  # ground state all 0, gap 3: at tau 0.1 and 0.01 it never leaves
    verdict, reason, parts = ch.judge_cold(cold_frame(ferro, [0.1, 0.01]))
    assert verdict == vd.REPRODUCED, reason
    assert all(p["high"] < ch.NEAR_START for p in parts)
    verdict, reason, parts = ch.judge_cold(cold_frame(np.zeros((1, N, 3)), [0.1, 0.01]))  # J = 0, h = 0
    assert verdict == vd.DIFFERS and all(p["low"] > ch.NEAR_START for p in parts), reason
    # one temperature stays, the other moves: the claim is "at every cold temperature"
    warm = np.zeros((1, N, 3))
    warm[0, :, 0] = 0.3  # a weak field: stays at tau 0.01 (gap / tau = 30), moves at tau 1
    assert ch.judge_cold(cold_frame(warm, [0.01, 1.0]))[0] == vd.DIFFERS


def test_near_start_is_the_papers_drift_threshold():
    import book_tools as bt

    assert float(bt.paper_protocol("trap_split")["threshold"]) == ch.NEAR_START
    assert not math.isnan(ch.NEAR_START)
