"""Chapter 5's verdict rules calibrated on ground truth: each general claim's estimator and rule, the very
functions the notebook calls (detect_traps, trap_catalogue, trap_frame, the row functions whose verdicts come from
verdicts.py's chapter-5 rules), run on small chains whose answer is known by mathematics, must say "reproduced"
where the claim holds and "differs" where it fails (or, where the run cannot reach a side, inconclusive;
book/paper_claims.csv's `calibration` column says which). The quick-size cases are make calibrate's own
(tools/calibration/traps.py), here at one seed; make calibrate runs them at 50.

The chains are independent sites whose fields depend on a frozen last site (a profile id), so that each chain of
a batch has its own, exactly known score gaps; states are embedded by `site_embeddings`, whose cosine distance
is the Hamming distance over n.
"""

import functools
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import glauber_core as glauber
import verdicts as vd
from chapters import traps as ch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from calibration import traps as cal  # noqa: E402 (make calibrate's known-answer chains)

AT = cal.AT


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
    """Locked wells with a rotor pair in well 1: every held state there has Δ* = -30 exactly (one of the pair is at
    gap -30), every one in well 0 Δ* = 30 (n - 3) / (n - 2) (a well site sees the other n - 3 of its n - 2 sites):
    both kinds, known exactly."""
    traps, _ = cal.trap_run(cal.LockedWells(cal.N, rotor_in_well_1=True), 0, null=False)
    assert set(traps.min_gap.round(9)) == {round(30 * (cal.N - 3) / (cal.N - 2), 9), -30.0}
    assert ch.split_row(traps, AT)["verdict"] == vd.REPRODUCED
    traps, _ = run_profiles(locked(1, N), 40, 300, WINDOW, THRESHOLD)  # 40 ground-state chains: 40 perfect
    assert (traps.kind == "perfect").sum() == 40 and len(ch.distinct_held_states(traps)) == 40
    assert ch.split_row(traps, AT)["verdict"] == vd.DIFFERS


def test_a_tied_site_is_neither_kind_of_trap():
    """A last site with no field holds a token tied with the other (gap 0 exactly): the held state is not the strict
    argmax (the catalogue's kind says approximate), but its gap is within the tie tolerance, so trap_split counts it
    as neither kind: perfect traps beside tied ones do not show both kinds."""
    fields = np.concatenate([locked(1, N), locked(1, N, free_last=True)])  # profile 0 perfect, 1 tied
    traps, _ = run_profiles(fields, 10, STEPS, WINDOW, THRESHOLD)
    assert set(traps.kind) == {"perfect", "approximate"} and (traps.min_gap[traps.kind == "approximate"] == 0).all()
    row = ch.split_row(traps, AT)
    assert row["verdict"] == vd.INCONCLUSIVE and "10 tied" in row["ours_text"], row["ours_text"]


def test_trap_split_counts_a_re_entered_state_once():
    """Gated wells (all 0, all 1; Δ* = 2.5 at the gate): chains escape through the gate and come back, so the
    detector finds some held states again (at seed 1 one chain does; at n = 20 most seeds see none), and split_row
    counts each chain's distinct states, every one perfect."""
    traps, _ = cal.trap_run(cal.Gate(2.5, [8.0] * (cal.N - 1)), 1, null=False)
    distinct = ch.distinct_held_states(traps)
    assert len(distinct) < len(traps) and distinct.entries.max() > 1  # re-entries occur
    assert len(distinct) == len({(c, tuple(s)) for c, s in zip(traps.chain, traps.state)})
    assert set(traps.min_gap.round(9)) == {2.5}
    row = ch.split_row(traps, AT)
    assert f"of {len(distinct)} distinct held states ({len(traps)} traps)" in row["ours_text"]
    assert row["verdict"] == vd.INCONCLUSIVE  # fewer than 35 distinct perfect states: an absence cannot differ yet


def test_trap_split_with_no_trap_is_inconclusive():
    traps, _ = run_profiles(np.zeros((1, N, 4)), 10, STEPS, WINDOW, THRESHOLD)  # uniform conditionals: moves
    assert traps.empty and ch.split_row(traps, AT)["verdict"] == vd.INCONCLUSIVE


# ------------------------------------------------------------------------------------------------
# approximate_trap_duration: ended approximate traps against the detector on a surrogate without collective
# persistence (persistence_surrogate: each site's own flip rate and law, sites independent)
# ------------------------------------------------------------------------------------------------


def duration_case(run, tokens, window, threshold=THRESHOLD, cond=None):
    """The notebook's path on Hamming vectors: detect, catalogue, the surrogate's null, the row."""
    from types import SimpleNamespace

    traps = ch.detect_traps(ch.site_embeddings(tokens), run.steps, window, threshold)
    catalogue = ch.trap_catalogue(cond, run, traps) if cond is not None else traps.assign(kind="approximate")
    null = ch.null_durations(None, None, SimpleNamespace(tokens=tokens, steps=run.steps), window, threshold)
    row = ch.duration_row(catalogue, null, window, int(run.steps[-1]), AT)
    return catalogue, (row["verdict"], row["reason"], row["ours"], row["low"], row["high"])


def test_approximate_traps_of_a_two_well_chain_outlast_the_detectors_null():
    cond = cal.TwoWells(9, 8, 5.0)  # 8 coupled sites in two wells, plus a free one (gap 0: approximate)
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
    assert ch.duration_row(traps, [150.0, 160.0], WINDOW, STEPS, AT)["verdict"] == vd.INCONCLUSIVE


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
    row = ch.correlation_row(first_departure_traps("mean"), AT)
    assert row["verdict"] == vd.REPRODUCED, row["reason"]
    row = ch.correlation_row(first_departure_traps("min"), AT)
    assert row["verdict"] == vd.DIFFERS, row["reason"]


# ------------------------------------------------------------------------------------------------
# escape_weakest_site: the final escapes against the kernel's one-step share at the held states
# ------------------------------------------------------------------------------------------------


def gate_traps(gate: float, fields, chains: int, steps: int, window: int):
    cond = cal.Gate(gate, fields)
    run = glauber.glauber(cond, torch.zeros(chains, cond.n, dtype=torch.long), steps, 1.0, seed=0, progress=False)
    vectors = ch.site_embeddings(run.tokens)
    found = {1.0: ch.trap_catalogue(cond, run, ch.detect_traps(vectors, run.steps, window, THRESHOLD))}
    return ch.trap_frame(cond, {1.0: (run, vectors)}, found)


def test_final_escapes_at_a_weakest_gate_beat_the_kernel_and_at_a_strong_gate_fall_below_it():
    # the gate is the weakest site (gap 2.5 against 4): the kernel puts about a third of departures there,
    # the final escapes are mostly there
    traps = gate_traps(2.5, [4.0] * 9, 16, 2000, 60)
    row, (_, tries, chance) = ch.weakest_row(traps, AT), ch.final_escapes(traps)
    assert tries > 50 and row["verdict"] == vd.REPRODUCED and row["low"] > chance, row["reason"]
    # the gate is strong (4) and site 1 the weakest (gap 1): the kernel puts about 60% of departures at site
    # 1, which are undone; the final escapes come through the gate
    traps = gate_traps(4.0, [1.0] + [4.0] * 8, 32, 2000, WINDOW)
    row, (_, tries, chance) = ch.weakest_row(traps, AT), ch.final_escapes(traps)
    assert tries > 50 and row["verdict"] == vd.DIFFERS and row["high"] < chance, row["reason"]
    # all departures, by contrast, follow the kernel's one-step law by construction (a 99.9% interval: at 95% an
    # exact law falls outside one run in twenty)
    moves, at = int(traps.departures.sum()), int(traps.departures_at_weakest.sum())
    low, high = (float(v[0]) for v in vd.share_intervals([at], [moves], level=0.999))
    assert low <= ch.kernel_chance(traps) <= high


def test_a_run_with_no_escape_is_inconclusive():
    traps, _ = run_profiles(locked(1, N, free_last=True), 4, STEPS, WINDOW, THRESHOLD)  # held the whole run
    assert traps.censored.all() and ch.weakest_row(traps, AT)["verdict"] == vd.INCONCLUSIVE


# ------------------------------------------------------------------------------------------------
# cold_chains_stay: the distance from the start at the burn-in and at the end, cold against warm from the same starts
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c for c in cal.CASES if c.claim == "cold_chains_stay"], ids=lambda c: c.name)
def test_cold_cases_decide_their_known_answer_at_seed_0(case):
    """Chains at (or one site off) the model's favourites stay near their start; chains from random starts fall to
    their favourites (or a well) and freeze there, as far from their start as the warm chains: they do not stay,
    at the 4 parts' corrected level (every_part_level(4) = 98.75%) too."""
    assert case.run(0) == (vd.REPRODUCED if case.truth == "holds" else vd.DIFFERS)


def test_a_chain_that_falls_then_freezes_is_far_from_its_start():
    """From random starts, strict favourites at tau 0.01: the cold chains fall to their favourites during the burn-in
    and never move again (moved 0), 3/4 of their sites from the start on average, as far as the warm chains."""
    cond = cal.favourites(cal.N, 4, seed=0)
    x0 = cal.random_starts(cal.QUICK.n_chains, cal.N, 4, seed=0)
    runs = ch.chains_at_temperatures(cond, x0, [1.0, 0.01], cal.QUICK.cold_steps, record_every=cal.QUICK.cold_record)
    vectors = {tau: (ch.state_vectors(cond, None, run), run.steps) for tau, run in runs.items()}
    cold = ch.cold_frame(vectors.pop(1.0), vectors, cal.QUICK.burn_in, cal.QUICK.cold_steps)
    assert cold.moved.max() < 1e-6 and np.allclose(cold.distance, cold.burn_in_distance)
    assert (x0 != cond.field.argmax(1)).double().mean() == pytest.approx(cold.distance.mean(), abs=1e-6)
    assert cold.distance.mean() > 0.5 and ch.cold_row(cold)["verdict"] == vd.DIFFERS


# ------------------------------------------------------------------------------------------------
# make calibrate's quick-size cases, one seed each
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c for c in cal.CASES if c.claim != "cold_chains_stay"], ids=lambda c: c.name)
def test_quick_size_cases_never_decide_wrongly_at_seed_0(case):
    wrong = vd.DIFFERS if case.truth == "holds" else vd.REPRODUCED
    assert case.run(0) != wrong
