"""Chapter 5 core: trap detection, the trap catalogue and escape events (appendix A.1, C.1-C.3).

Every check uses a trajectory or a model whose answer is known exactly: constructed embedding paths
with traps at known positions, a Potts model whose score gaps follow by hand, a hand-written move log.
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch

import book_tools as bt
import glauber_core as glauber
from chapters import traps as ch

# ------------------------------------------------------------------------------------------------
# Constructed trajectories
# ------------------------------------------------------------------------------------------------


def constructed_embeddings(records: int, holds: list[list[tuple[int, int]]], noise: float = 0.05):
    """Embeddings [B, R, d] in which every record outside a hold points its own way (distance 1 to
    everything else) and the records of a hold (first, last record, inclusive) share one direction,
    up to a small orthogonal jitter (pairwise distance about noise^2 / 2)."""
    batch = len(holds)
    traps = sum(len(h) for h in holds)
    dim = batch * records + traps
    vectors = torch.zeros(batch, records, dim, dtype=torch.float64)
    own = torch.arange(batch * records).view(batch, records)
    vectors[torch.arange(batch).unsqueeze(1), torch.arange(records), own] = 1.0
    column = batch * records
    for chain, chain_holds in enumerate(holds):
        for first, last in chain_holds:
            vectors[chain, first : last + 1] *= noise
            vectors[chain, first : last + 1, column] = 1.0
            column += 1
    return vectors.float()


def test_window_drift_is_the_mean_distance_from_each_window_start():
    g = torch.Generator().manual_seed(0)
    embeddings = torch.randn(3, 13, 5, generator=g)
    steps = torch.arange(13) * 4
    drift = ch.window_drift(embeddings, steps, 12)
    unit = embeddings / embeddings.norm(dim=-1, keepdim=True)
    expected = torch.tensor(
        [[np.mean([1 - float(unit[b, t] @ unit[b, t + j]) for j in (1, 2, 3)]) for t in range(10)] for b in range(3)]
    )
    assert drift.shape == (3, 10)
    torch.testing.assert_close(drift, expected.float(), atol=1e-5, rtol=0)
    distances = ch.window_distances(embeddings, steps, 12)
    assert distances.shape == (3, 10, 4)
    assert torch.all(distances[..., 0].abs() < 1e-6)


def test_detect_traps_finds_exactly_the_constructed_traps():
    # 101 records every 10 steps; window 100 steps (10 records); threshold 0.12.
    holds = [
        [(10, 40), (41, 60)],  # two traps back to back: two rows, not one
        [(80, 100)],  # holds to the end of the run: censored
        [(0, 15), (70, 76)],  # starts in a trap; the 7-record hold is too short to flag
        [(20, 50)],  # a one-record excursion at record 35 (made below) does not split it
        [],  # never trapped
    ]
    embeddings = constructed_embeddings(101, holds)
    embeddings[3, 35] = 0.0
    embeddings[3, 35, 0] = 1.0  # its own direction: far from everything on chain 3
    traps = ch.detect_traps(embeddings, torch.arange(101) * 10, window=100, threshold=0.12)
    expected = pd.DataFrame(
        [
            (0, 100, 400, 300, 10, 40, False, False),
            (0, 410, 600, 190, 41, 60, False, False),
            (1, 800, 1000, 200, 80, 100, False, True),
            (2, 0, 150, 150, 0, 15, True, False),
            (3, 200, 500, 300, 20, 50, False, False),
        ],
        columns=list(ch.TRAP_COLUMNS),
    )
    pd.testing.assert_frame_equal(traps, expected, check_dtype=False)


def test_detect_traps_threshold_and_window_decide_the_borderline_hold():
    # A hold of 9 records (80 steps) against a 100-step window: the best anchor, its first record,
    # has 2 of its 10 window records outside the hold (drift 0.2), so it counts only for threshold > 0.2.
    embeddings = constructed_embeddings(40, [[(10, 18)]], noise=0.0)
    steps = torch.arange(40) * 10
    assert len(ch.detect_traps(embeddings, steps, 100, 0.19)) == 0
    found = ch.detect_traps(embeddings, steps, 100, 0.21)
    assert found[["start", "end"]].values.tolist() == [[100, 180]]
    # with a shorter window the whole hold flags from its first record
    assert ch.detect_traps(embeddings, steps, 50, 0.05)[["start", "end"]].values.tolist() == [[100, 180]]


def test_detect_traps_with_no_trap_returns_an_empty_table():
    embeddings = constructed_embeddings(30, [[], []])
    traps = ch.detect_traps(embeddings, torch.arange(30), 5, 0.12)
    assert len(traps) == 0 and list(traps.columns) == list(ch.TRAP_COLUMNS)


# ------------------------------------------------------------------------------------------------
# Trajectories with a move log, built by hand
# ------------------------------------------------------------------------------------------------


def path_trajectory(x0, sites, new_tokens, record_every: int, temperature: float = 1.0, log_prob: float = -0.5):
    """A Trajectory whose chains start at x0 [B, n] and, at step t, set site sites[b, t-1] to
    new_tokens[b, t-1]; records every `record_every` steps; every move has log-probability log_prob."""
    x = torch.as_tensor(x0).clone()
    sites, new_tokens = torch.as_tensor(sites), torch.as_tensor(new_tokens)
    batch, steps = sites.shape
    rows = torch.arange(batch)
    old, records = [], [x.clone()]
    for t in range(steps):
        old.append(x[rows, sites[:, t]].clone())
        x[rows, sites[:, t]] = new_tokens[:, t]
        if (t + 1) % record_every == 0:
            records.append(x.clone())
    return glauber.Trajectory(
        torch.stack(records, 1),
        torch.arange(0, steps + 1, record_every),
        sites,
        torch.stack(old, 1),
        new_tokens,
        torch.full((batch, steps), log_prob),
        temperature,
    )


def hand_path(n: int, steps: int, start, moves: dict):
    """sites and new tokens of one chain: at step t in `moves` set (site, token); other steps are no-op
    moves at site t % n (the chain redraws the token it already has)."""
    x = list(start)
    sites, new = [], []
    for t in range(1, steps + 1):
        site, token = moves.get(t, (t % n, None))
        token = x[site] if token is None else token
        x[site] = token
        sites.append(site)
        new.append(token)
    return sites, new


def test_escape_events_follow_the_move_log():
    # x* = (0, 0, 0, 0) with gaps (1.0, 0.2, 3.0, 0.5): the weakest site is 1.
    n, steps = 4, 40
    moves_a = {
        1: (0, 3),
        3: (2, 1),
        6: (0, 0),
        7: (2, 0),  # reach x* at step 7
        12: (3, 1),
        14: (3, 0),  # a flicker: leave at 12, back at 14
        20: (1, 2),
        22: (2, 2),
        30: (0, 1),
    }  # the escape: site 1 at step 20
    moves_b = {2: (3, 0), 26: (3, 2)}  # at x* from step 2; leaves at 26, after the trap's last record
    moves_c = {5: (2, 0)}  # at x* from step 5 to the end: never escapes
    paths = [
        hand_path(n, steps, s, m)
        for s, m in (((3, 0, 1, 0), moves_a), ((0, 0, 0, 1), moves_b), ((0, 0, 2, 0), moves_c))
    ]
    trajectory = path_trajectory(
        torch.tensor([[3, 0, 1, 0], [0, 0, 0, 1], [0, 0, 2, 0]]),
        [p[0] for p in paths],
        [p[1] for p in paths],
        record_every=2,
        log_prob=math.log(0.01),
    )
    traps = pd.DataFrame({"chain": [0, 1, 2, 0], "start_record": [4, 1, 3, 4], "end_record": [12, 10, 20, 12]})
    states = torch.zeros(4, n, dtype=torch.long)
    gaps = torch.tensor([[1.0, 0.2, 3.0, 0.5]] * 3 + [[1.0, 2.0, 3.0, 0.5]], dtype=torch.float64)
    events = ch.escape_events(trajectory, traps, states, gaps)
    assert events.escaped.tolist() == [True, True, False, True]
    assert events.last_visit.tolist() == [19, 25, 40, 19]
    assert events.escape_step.tolist() == [20, 26, -1, 20]
    assert events.escape_site.tolist() == [1, 3, -1, 1]
    assert events.old_token.tolist()[:2] == [0, 0] and events.new_token.tolist()[:2] == [2, 2]
    np.testing.assert_allclose(events.escape_gap, [0.2, 0.5, np.nan, 2.0])
    assert events.site_rank.tolist() == [0, 1, -1, 2]  # site 3 (0.5) has one gap below it; site 1 (2.0) two
    assert events.at_weakest.tolist() == [True, False, False, False]
    np.testing.assert_allclose(events.escape_prob[[0, 1, 3]], 0.01)
    assert math.isnan(events.escape_prob[2])


def test_held_state_is_the_most_frequent_record_and_ties_go_to_the_first():
    records = torch.tensor([[[1, 1], [2, 2], [2, 2], [1, 1], [3, 3], [3, 3], [1, 1], [4, 4]]])
    trajectory = glauber.Trajectory(
        records, torch.arange(8), *[torch.zeros(1, 7, dtype=torch.long)] * 3, torch.zeros(1, 7), 1.0
    )
    traps = pd.DataFrame({"chain": [0, 0, 0], "start_record": [0, 1, 4], "end_record": [7, 5, 5]})
    assert ch.held_states(trajectory, traps).tolist() == [[1, 1], [2, 2], [3, 3]]


# ------------------------------------------------------------------------------------------------
# The catalogue on a Potts model with gaps known by hand
# ------------------------------------------------------------------------------------------------


def ferro_potts() -> glauber.PottsConditionals:
    """Three sites, three colours, J_ij = 1, no field: s_i(a; x) = #{j != i: x_j = a}."""
    return glauber.PottsConditionals(torch.ones(3, 3), q=3)


def test_trap_catalogue_gaps_classes_and_theorem8_bound():
    potts = ferro_potts()
    # chain 0 sits at (0, 0, 0) for steps 4..20; chain 1 at (0, 0, 1) for steps 2..30.
    path0 = hand_path(3, 30, (1, 2, 0), {3: (0, 0), 4: (1, 0), 21: (2, 2)})
    path1 = hand_path(3, 30, (2, 0, 1), {2: (0, 0)})
    trajectory = path_trajectory(
        torch.tensor([[1, 2, 0], [2, 0, 1]]),
        [path0[0], path1[0]],
        [path0[1], path1[1]],
        record_every=2,
        temperature=0.5,
    )
    traps = pd.DataFrame(
        {
            "chain": [0, 1],
            "start": [4, 2],
            "end": [20, 30],
            "duration": [16, 28],
            "start_record": [2, 1],
            "end_record": [10, 15],
        }
    )
    catalogue = ch.trap_catalogue(potts, trajectory, traps)
    assert catalogue.state.tolist() == [[0, 0, 0], [0, 0, 1]]
    # (0,0,0): every site scores its own colour 2, the others 0 -> gaps (2, 2, 2), perfect.
    # (0,0,1): sites 0 and 1 tie colours 0 and 1 at score 1 -> gap 0; site 2 scores 0 for its own colour
    # against 2 for colour 0 -> gap -2. Delta* = -2 < 0: approximate.
    np.testing.assert_allclose(np.array(catalogue.gaps.tolist()), [[2, 2, 2], [0, 0, -2]])
    np.testing.assert_allclose(catalogue.mean_gap, [2.0, -2 / 3])
    np.testing.assert_allclose(catalogue.min_gap, [2.0, -2.0])
    assert catalogue.weakest_site.tolist() == [0, 2]
    assert catalogue.kind.tolist() == ["perfect", "approximate"]
    np.testing.assert_allclose(catalogue.theorem8_bound[0], math.exp(2.0 / 0.5) / (4 * 3))
    assert math.isnan(catalogue.theorem8_bound[1])
    assert catalogue.text.tolist() == ["0 0 0", "0 0 1"]
    assert (catalogue.temperature == 0.5).all() and catalogue.duration.tolist() == [16, 28]
    events = ch.escape_events(
        trajectory, traps, torch.tensor(catalogue.state.tolist()), torch.tensor(catalogue.gaps.tolist())
    )
    assert events.escape_step.tolist() == [21, -1] and events.escape_site.tolist() == [2, -1]
    assert events.at_weakest.tolist() == [True, False]  # all three gaps tie at 2: every site is weakest


def test_pipeline_on_a_potts_chain_is_consistent_with_its_path():
    """Detect -> catalogue -> escapes on a real Glauber run of a cold ferromagnetic Potts chain, with each
    state embedded as its own direction; every reported escape must match the replayed path."""
    potts = glauber.PottsConditionals(torch.ones(4, 4) * 1.5, q=3)
    x0 = torch.tensor([[0, 1, 2, 0], [1, 1, 2, 2], [2, 0, 1, 1]])
    steps = 600
    trajectory = glauber.glauber(potts, x0, steps, temperature=0.7, seed=3, progress=False)
    codes = (trajectory.tokens * 3 ** torch.arange(4)).sum(-1)
    embeddings = torch.nn.functional.one_hot(codes, 81).float()
    traps = ch.detect_traps(embeddings, trajectory.steps, window=40, threshold=0.12)
    assert len(traps) > 0
    catalogue = ch.trap_catalogue(potts, trajectory, traps)
    assert set(catalogue.kind) <= {"perfect", "approximate"}
    events = ch.escape_events(
        trajectory, traps, torch.tensor(catalogue.state.tolist()), torch.tensor(catalogue.gaps.tolist())
    )
    for row, event in zip(catalogue.itertuples(), events.itertuples()):
        held = torch.tensor(row.state)
        states = trajectory.tokens[row.chain]  # recorded every step here
        assert torch.equal(states[event.last_visit], held)
        if event.escaped:
            assert not torch.equal(states[event.escape_step], held)
            assert event.last_visit == event.escape_step - 1 and event.last_visit >= row.start
            assert int(trajectory.sites[row.chain, event.escape_step - 1]) == event.escape_site
            later = states[event.escape_step : row.end + 1]
            assert not (later == held).all(1).any()  # never back at x* within the trap after the escape
        else:
            assert (states[event.last_visit :] == held).all()


def test_the_reading_tables_of_a_run_with_traps_and_escapes():
    """The tables a reader sees on the Potts run above: no index, at most 6 columns, no NaN printed, and their
    numbers the run's (the longest trap first, every escape and departure counted)."""
    from types import SimpleNamespace

    potts = glauber.PottsConditionals(torch.ones(4, 4) * 1.5, q=3)
    x0 = torch.tensor([[0, 1, 2, 0], [1, 1, 2, 2], [2, 0, 1, 1]])
    trajectory = glauber.glauber(potts, x0, 600, temperature=1.0, seed=3, progress=False)
    embeddings = torch.nn.functional.one_hot((trajectory.tokens * 3 ** torch.arange(4)).sum(-1), 81).float()
    found = {1.0: ch.trap_catalogue(potts, trajectory, ch.detect_traps(embeddings, trajectory.steps, 40, 0.12))}
    traps = ch.trap_frame(potts, {1.0: (trajectory, embeddings)}, found)
    assert traps.escaped.any()
    summaries = {1.0: ch.trap_summary(found[1.0], 3, 600)}
    tokenizer = SimpleNamespace(convert_ids_to_tokens=str)
    tables = [
        ch.catalogue_view(traps),
        ch.counts_view(summaries, ch.paper_counts(), 3, 600, 4),
        ch.theorem8_view(traps),
        ch.correlation_view(summaries),
        ch.escape_view(traps, tokenizer),
        ch.weakest_view(traps),
    ]
    for table in tables:
        html = table.to_html()
        assert len(table.data.columns) <= 6 and "row_heading" not in html and ">nan<" not in html.lower()
    catalogue, _, _, _, escapes, weakest = (t.data for t in tables)
    assert catalogue.duration.iloc[0] == traps.duration.max()
    assert len(escapes) == min(8, int(traps.escaped.sum())) and escapes["gap rank"].ge(0).all()
    row = weakest.iloc[0]
    assert row["departures at a weakest site"] == (f"{traps.departures_at_weakest.sum()} of {traps.departures.sum()}")
    assert row["final escapes at a weakest site"] == f"{traps.at_weakest.sum()} of {traps.escaped.sum()}"
    figure = ch.gap_figure(traps, summaries)
    assert len(figure.axes) == 2


# ------------------------------------------------------------------------------------------------
# Summary numbers
# ------------------------------------------------------------------------------------------------


def test_trap_summary_counts_shares_and_rank_correlations():
    from scipy.stats import binomtest, spearmanr

    catalogue = pd.DataFrame(
        {
            "duration": [100, 200, 300, 400],
            "kind": ["perfect"] + ["approximate"] * 3,
            "mean_gap": [1.0, 2.0, 3.0, 4.0],
            "min_gap": [4.0, 3.0, 2.0, 1.0],
        }
    )
    summary = ch.trap_summary(catalogue, chains=2, steps=5000, draws=500)
    assert summary["count"] == 4 and summary["rate_per_10k"] == 4.0
    # exact (Garwood) 95% Poisson limits for 4 events: 1.0899 and 10.2416, here per 1 unit of exposure
    assert summary["rate_low"] == pytest.approx(1.0899, abs=1e-4)
    assert summary["rate_high"] == pytest.approx(10.2416, abs=1e-4)
    assert summary["perfect"] == 1 and summary["perfect_share"] == 0.25
    wilson = binomtest(1, 4).proportion_ci(method="wilson")
    assert summary["perfect_low"] == pytest.approx(wilson.low) and summary["perfect_high"] == pytest.approx(wilson.high)
    assert summary["mean_duration"] == 250 and (summary["min_duration"], summary["max_duration"]) == (100, 400)
    assert 100 <= summary["duration_low"] <= 250 <= summary["duration_high"] <= 400
    assert summary["rho_mean"] == pytest.approx(1.0) and summary["rho_min"] == pytest.approx(-1.0)
    assert summary["rho_difference"] == pytest.approx(2.0)
    g = np.random.default_rng(1)
    x, y = g.integers(0, 5, 30).astype(float), g.normal(size=30)
    assert bt.rank_correlation(x, y) == pytest.approx(spearmanr(x, y).statistic)
    few = ch.trap_summary(catalogue.head(2), chains=1, steps=100, draws=10)
    assert math.isnan(few["rho_difference"]) and few["count"] == 2
    none = ch.trap_summary(catalogue.head(0), chains=1, steps=100, draws=10)
    assert none["count"] == 0 and math.isnan(none["perfect_share"]) and math.isnan(none["mean_duration"])
    # no event: the upper limit solves e^-mu = 0.025, mu = ln 40, over 100 steps = 0.01 units of exposure
    assert none["rate_low"] == 0 and none["rate_high"] == pytest.approx(math.log(40) / 0.01)


# ------------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------------


def test_bad_input_raises_one_clear_error():
    embeddings = constructed_embeddings(20, [[]])
    steps = torch.arange(20) * 5
    with pytest.raises(ValueError, match="evenly spaced"):
        ch.detect_traps(embeddings, torch.tensor([0, 5, 10, 16] + list(range(20, 100, 5))), 10)
    with pytest.raises(ValueError, match="multiple of the record spacing"):
        ch.detect_traps(embeddings, steps, 12)
    with pytest.raises(ValueError, match="multiple of the record spacing"):
        ch.detect_traps(embeddings, steps, 500)
    with pytest.raises(ValueError, match="threshold"):
        ch.detect_traps(embeddings, steps, 10, threshold=0.0)
    with pytest.raises(ValueError, match="threshold"):
        ch.detect_traps(embeddings, steps, 10, threshold=2.5)
    with pytest.raises(ValueError, match=r"embeddings must be a float tensor \[B, R, d\]"):
        ch.detect_traps(embeddings[0], steps, 10)
    with pytest.raises(ValueError, match="non-zero"):
        ch.detect_traps(torch.zeros(1, 20, 3), steps, 10)
    with pytest.raises(ValueError, match="window must be an integer"):
        ch.window_drift(embeddings, steps, 0)
    with pytest.raises(ValueError, match="recorded steps"):
        ch.window_drift(embeddings, steps[:-1], 10)
    trajectory = path_trajectory(torch.zeros(1, 3, dtype=torch.long), [[0] * 6], [[1] * 6], record_every=2)
    with pytest.raises(ValueError, match="outside this trajectory"):
        ch.held_states(trajectory, pd.DataFrame({"chain": [1], "start_record": [0], "end_record": [1]}))
    with pytest.raises(ValueError, match="DataFrame of detect_traps"):
        ch.held_states(trajectory, pd.DataFrame({"chain": [0]}))
    traps = pd.DataFrame({"chain": [0], "start_record": [1], "end_record": [3]})
    with pytest.raises(ValueError, match="one row per trap"):
        ch.escape_events(trajectory, traps, torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="never occurs"):
        ch.escape_events(trajectory, traps, torch.full((1, 3), 2), torch.zeros(1, 3))
    with pytest.raises(ValueError, match="catalogue must be"):
        ch.trap_summary(pd.DataFrame({"duration": [1]}), 1, 1)
    with pytest.raises(ValueError, match="chains must be"):
        ch.trap_summary(pd.DataFrame(columns=["duration", "kind", "mean_gap", "min_gap"]), 0, 1)


def test_weakest_site_chance_counts_ties():
    assert ch.weakest_site_chance([[1.0, 0.2, 3.0, 0.5]]) == pytest.approx(0.25)
    assert ch.weakest_site_chance([[2.0, 2.0, 2.0], [0.0, 1.0, 1.0, 0.0]]) == pytest.approx(0.75)
    assert math.isnan(ch.weakest_site_chance([]))


# ------------------------------------------------------------------------------------------------
# The chapter end to end on runs that find nothing, and on constructed traps
# ------------------------------------------------------------------------------------------------


def chapter_settings(**changes):
    from types import SimpleNamespace

    settings = dict(
        n_chains=3,
        steps=60,
        seq_len=3,
        window=10,
        threshold=0.12,
        temperatures=[1.0, 0.5],
        record_every=2,
        cold_steps=20,
        burn_in=10,
        profile="test",
        passages="bbc",
    )
    return SimpleNamespace(**(settings | changes))


def test_zero_traps_finish_with_sentences_and_inconclusive_rows(capsys):
    """A run in which nothing stays put (every recorded state its own direction): no trap at any temperature.
    Every table, figure and sentence of the chapter must still come out, the general claims inconclusive and
    the model-specific ones other setup."""
    potts = ferro_potts()
    cfg = chapter_settings()
    x0 = torch.tensor([[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    runs, found, drift = {}, {}, {}
    for tau in cfg.temperatures:
        run = glauber.glauber(potts, x0, cfg.steps, tau, seed=1, record_every=cfg.record_every, progress=False)
        vectors = torch.eye(3 * len(run.steps)).view(3, len(run.steps), -1)
        traps = ch.detect_traps(vectors, run.steps, cfg.window, cfg.threshold)
        assert traps.empty
        runs[tau] = (run, vectors)
        found[tau] = ch.trap_catalogue(potts, run, traps)
        drift[tau] = float(ch.window_drift(vectors, run.steps, cfg.window).median())
    traps = ch.trap_frame(potts, runs, found)
    assert traps.empty and {"escaped", "at_weakest", "kind", "gaps"} <= set(traps.columns)
    assert ch.site_frame(traps).empty
    summaries = {tau: ch.trap_summary(found[tau], cfg.n_chains, cfg.steps) for tau in found}
    assert ch.catalogue_view(traps) is None
    assert ch.gap_figure(traps, summaries) is None
    assert ch.escape_view(traps, None) is None
    assert ch.weakest_view(traps) is None
    assert "No trap" in capsys.readouterr().out
    assert len(ch.drift_figure(runs, found, cfg.window, cfg.threshold).axes) == len(runs)
    assert ch.correlation_view(summaries).data["traps"].eq(0).all()
    counts = ch.counts_view(summaries, ch.paper_counts(), cfg.n_chains, cfg.steps, cfg.seq_len).data
    assert counts.traps.tolist()[1:] == [0, 0] and (counts["mean duration"][1:] == "—").all()
    assert len(ch.theorem8_view(traps).data) == 1  # the paper's row only
    warm = (runs[1.0][1], runs[1.0][0].steps)
    cold = ch.cold_frame(warm, {0.1: warm, 0.01: warm}, cfg.burn_in, cfg.cold_steps)
    rows = ch.claim_rows(traps, summaries, cold, model="potts", setup=ch.claims_setup(cfg), vocab=3, window=cfg.window)
    claims = pd.DataFrame(rows).set_index("claim")
    general = claims[claims.kind == "general"]
    # every recorded state its own direction: every chain moves 1, cold and warm alike, a zero-width interval
    assert (general.verdict == bt.INCONCLUSIVE).all(), general.verdict
    assert (general.drop(index="cold_chains_stay").setup == "τ = 1").all()
    assert "zero width" in claims.loc["cold_chains_stay", "reason"]
    assert (claims[claims.kind == "model-specific"].verdict == bt.OTHER_SETUP).all()
    assert not claims.ours_text.str.contains("nan").any()
    assert "n 3 (paper: not stated)" in claims.loc["trap_count", "setup"]
    phrases = ch.run_text(traps, summaries, drift, rows, cfg)
    assert phrases["hot_traps"] == "no trap" and "no perfect trap" in phrases["theorem8"]
    assert "no final escape" in phrases["weakest"] and phrases["repeat_traps"] == "0 of 0"
    assert phrases["judged_tau"] == "1" and phrases["judged_traps"] == "no trap"


def constructed_traps(kinds, durations, departures_at_weakest, temperature=1.0):
    """A trap table as trap_frame makes it, with the columns the claims read (one departure per trap, the kernel
    putting a third of them at the weakest site)."""
    count = len(kinds)
    gaps = [[2.0, 1.0, 3.0] if kind == "perfect" else [2.0, -1.0, 3.0] for kind in kinds]
    return pd.DataFrame(
        {
            "trap": range(count),
            "chain": range(count),
            "state": [[k, 0, 0] for k in range(count)],
            "temperature": temperature,
            "kind": kinds,
            "duration": durations,
            "gaps": gaps,
            "mean_gap": [np.mean(g) for g in gaps],
            "min_gap": [min(g) for g in gaps],
            "escaped": True,
            "censored": False,
            "at_weakest": departures_at_weakest,
            "departures": 1,
            "departures_at_weakest": [int(v) for v in departures_at_weakest],
            "kernel_share": 1 / 3,
            "text": [f"trap {k}" for k in range(count)],
        }
    )


def cold_table(warm_distance, distance: dict) -> pd.DataFrame:
    """A cold_frame with given distances from the start, the same at the burn-in and at the end (so moved 0)."""
    return pd.concat(
        [
            pd.DataFrame(
                dict(
                    temperature=tau,
                    chain=range(len(d)),
                    burn_in_distance=d,
                    distance=d,
                    moved=0.0,
                    warm_burn_in_distance=warm_distance,
                    warm_distance=warm_distance,
                    warm_moved=warm_distance,
                )
            )  # fmt: skip
            for tau, d in distance.items()
        ],
        ignore_index=True,
    )


def test_claim_rows_judge_one_temperature_and_show_the_papers_beside():
    kinds = ["perfect"] * 4 + ["approximate"] * 8
    traps = constructed_traps(
        kinds, [500, 450, 900, 700] + [300, 320, 400, 380, 500, 350, 420, 330], [True] * 11 + [False]
    )
    cold = cold_table([0.6, 0.7, 0.5, 0.65], {0.1: [0.05, 0.1, 0.04, 0.08], 0.01: [0.0, 0.01, 0.0, 0.02]})
    cfg = chapter_settings(window=150, steps=2000)  # room for the null: 2000 >= 4 x its mean duration
    # the same traps at tau 0.5 (not the paper's) and none at tau 1: the trap claims cannot be judged
    colder = traps.assign(temperature=0.5)
    summaries = {1.0: ch.trap_summary(colder.head(0), 12, 2000), 0.5: ch.trap_summary(colder, 12, 2000)}
    setup = ch.claims_setup(cfg)
    rows = ch.claim_rows(colder, summaries, cold, model="m", setup=setup, vocab=30000, window=150)
    verdicts = pd.DataFrame(rows).set_index("claim").verdict
    for claim in ch.TRAP_CLAIMS:
        assert verdicts[claim] == bt.INCONCLUSIVE, claim
    null = [100.0, 120.0, 110.0, 130.0, 90.0, 105.0]  # what the detector gives a chain without persistence
    # judged at a matched 0.5: the trap claims decided there, the paper's tau = 1 rows shown beside, not judged
    rows = ch.claim_rows(
        colder, summaries, cold, model="m", setup=setup, vocab=30000, window=150, nulls={0.5: null}, judged_tau=0.5
    )
    frame = pd.DataFrame(rows)
    judged = frame[frame.judged.ne(False)].set_index("claim")
    shown = frame[frame.judged.eq(False)].set_index("claim")
    assert list(shown.index) == list(ch.TRAP_CLAIMS) and not judged.index.duplicated().any()
    assert (
        judged.loc["trap_split", "verdict"] == bt.REPRODUCED
        and judged.loc["trap_split", "setup"] == "τ = 0.5 (matched)"
    )
    assert judged.loc["approximate_trap_duration", "verdict"] == bt.REPRODUCED
    assert (shown.verdict == bt.INCONCLUSIVE).all() and (shown.setup == "τ = 1").all()
    assert shown.reason.str.startswith("shown beside, not judged").all()
    assert not shown.reason.str.contains("would decide").any()  # no run at tau = 1 is what decides them here
    assert "zero cases: nothing to split" in shown.loc["trap_split", "reason"]
    rows = ch.claim_rows(
        traps,
        {1.0: ch.trap_summary(traps, 12, 2000)},
        cold,
        model="m",
        setup=ch.claims_setup(cfg),
        vocab=30000,
        window=150,
        nulls={1.0: null},
    )
    claims = pd.DataFrame(rows).set_index("claim")
    verdicts = claims.verdict
    assert verdicts["trap_split"] == bt.REPRODUCED
    assert verdicts["approximate_trap_duration"] == bt.REPRODUCED  # about 3.4 times the null's durations
    assert verdicts["escape_weakest_site"] == bt.REPRODUCED  # 11 of 12 final escapes against the kernel's 1/3
    cold_row = claims.loc["cold_chains_stay"]  # the deciding part (largest upper end) with its interval
    assert "τ = 0.1, burn-in" in cold_row.quantity and cold_row.high < 0 and cold_row.low < cold_row.ours
    assert cold_row.setup == "τ = 0.1, τ = 0.01"
    assert (
        "(-" not in claims.loc["mean_gap_correlation", "ours_text"]
        or "- (" in claims.loc["mean_gap_correlation", "ours_text"]
    )
    assert verdicts["cold_chains_stay"] == bt.REPRODUCED  # both far nearer their start than half the warm chains
    assert verdicts["trap_count"] == bt.OTHER_SETUP and verdicts["delta_star_below_lnv"] == bt.OTHER_SETUP
    assert claims.loc["trap_split", "setup"] == "τ = 1"
    # the same claims where the run says otherwise
    short = constructed_traps(["approximate"] * 40, [100 + k for k in range(40)], [False] * 40)
    moving = cold_table([0.2, 0.25, 0.3], {0.1: [0.6, 0.7, 0.65]})
    rows = ch.claim_rows(
        short,
        {1.0: ch.trap_summary(short, 40, 2000)},
        moving,
        model="m",
        setup=ch.claims_setup(cfg),
        vocab=30000,
        window=150,
        nulls={1.0: [100.0 + k for k in range(0, 40, 2)]},
    )
    verdicts = pd.DataFrame(rows).set_index("claim").verdict
    assert verdicts["trap_split"] == bt.DIFFERS
    assert verdicts["approximate_trap_duration"] == bt.DIFFERS
    assert verdicts["escape_weakest_site"] == bt.DIFFERS
    assert verdicts["cold_chains_stay"] == bt.DIFFERS


def paper_profile_setup(**changes) -> dict:
    """claims_setup of the chapter's `paper` profile (ch.SETTINGS, as the notebook builds it)."""
    return ch.claims_setup(ch.settings("paper")) | changes


def test_settings_follow_the_profile_and_derive_the_rest():
    """SETTINGS per profile, overrides that are unset keep the profile's, and what follows is derived: a run of
    whole record spacings, the 15-sweep window, the cold budget, the paper's threshold and cold temperatures,
    and germline seeds for a protein model."""
    from types import SimpleNamespace

    assert set(ch.SETTINGS) == set(bt.PROFILES)
    smoke = ch.settings("smoke", None, seq_len=0, temperatures=[], passages="", window=0)
    assert (smoke.seq_len, smoke.window, smoke.temperatures, smoke.passages) == (8, 120, [1.0], "bbc")
    assert (smoke.match_starts, ch.settings("quick").match_starts, ch.MATCH_LENGTH) == (4, 30, 20)
    assert smoke.threshold == float(bt.paper_protocol("trap_split")["threshold"])
    assert smoke.cold_temperatures == [0.1, 0.01]
    odd = ch.settings("quick", steps=1_005, record_every=10, cold_steps=5_000, window=100, seq_len=7)
    assert (odd.steps, odd.cold_steps, odd.window, odd.seq_len) == (1_000, 1_000, 100, 7)
    # the burn-in: the cold run's first quarter in whole record spacings, recorded with the run's end
    assert (odd.burn_in, odd.cold_record) == (250, 250)
    assert (smoke.burn_in, smoke.cold_record) == (8, 8)  # 48 // 4 = 12, down to the spacing 8
    paper = ch.settings("paper")
    table4 = bt.paper_protocol("trap_count")
    assert (paper.n_chains, paper.steps, paper.window) == (
        int(table4["chains"]),
        int(table4["steps"]),
        int(table4["window"]),
    )
    assert paper.passages == "ms_marco" and paper.temperatures == [ch.PAPER_TAU]
    protein = SimpleNamespace(protein=True)
    assert ch.settings("smoke", protein).passages == "germline"
    assert ch.settings("paper", protein).passages == "ms_marco"  # named passages are kept
    with pytest.raises(ValueError, match="passages must be one of"):
        ch.settings("smoke", passages="wiki")
    with pytest.raises(ValueError, match="profile must be one of"):
        ch.settings("huge")


def test_the_page_reads_its_profiles_from_the_settings():
    """The profiles table and the glued sizes come from SETTINGS through settings, never typed on the page."""
    from types import SimpleNamespace

    view = ch.profiles_view().data
    assert len(view) == len(ch.SETTINGS)
    for (_, row), profile in zip(view.iterrows(), ch.SETTINGS):
        cfg = ch.settings(profile)
        assert (row["n"], row["chains per τ"], row["steps"]) == (cfg.seq_len, cfg.n_chains, f"{cfg.steps:,}")
        assert row["window"] == f"{cfg.window:,} steps" and row["seeds"] == cfg.passages
    text = ch.setup_text(ch.settings("smoke"), SimpleNamespace(allowed=torch.ones(30, dtype=torch.bool)))
    assert text["paper_n"] == str(ch.SETTINGS["paper"]["seq_len"])
    assert text["cold_level"] == "98.75%"  # every_part_level over 2 cold temperatures x 2 steps


def test_model_specific_rows_are_judged_on_the_papers_model_and_setup_only(monkeypatch):
    monkeypatch.delenv("GLAUBER_PROFILE", raising=False)
    traps = constructed_traps(["perfect"] * 4 + ["approximate"] * 13, [671] * 17, [True] * 17)
    cold = cold_table([0.6, 0.7], {0.1: [0.05, 0.04]})
    judged = (bt.REPRODUCED, bt.DIFFERS, bt.INCONCLUSIVE)
    for setup, model, expected in (
        (paper_profile_setup(), "bert-base-uncased", judged),
        (paper_profile_setup(), "bundled-model", (bt.OTHER_SETUP,)),
        (paper_profile_setup(chains=16), "bert-base-uncased", (bt.OTHER_SETUP,)),
        (paper_profile_setup(passages="BBC News"), "bert-base-uncased", (bt.OTHER_SETUP,)),
    ):
        rows = ch.claim_rows(
            traps,
            {1.0: ch.trap_summary(traps, 30, 10_000)},
            cold,
            model=model,
            setup=setup,
            vocab=30522,
            window=300,
        )
        claims = pd.DataFrame(rows).set_index("claim")
        for claim in ("trap_count", "perfect_trap_share", "trap_mean_duration", "delta_star_below_lnv"):
            assert claims.loc[claim, "verdict"] in expected, (claim, model, setup, claims.loc[claim, "reason"])


def test_hamming_vectors_give_the_share_of_differing_sites():
    """The protein model's stand-in for sentence embeddings: unit vectors whose cosine distance is Hamming / n."""
    from types import SimpleNamespace

    tokens = torch.randint(0, 5, (3, 7, 6), generator=torch.Generator().manual_seed(0))
    vectors = ch.hamming_vectors(tokens)
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(3, 7))
    cosine = 1 - (vectors[:, :, None] * vectors[:, None]).sum(-1)
    hamming = (tokens[:, :, None] != tokens[:, None]).float().mean(-1)
    torch.testing.assert_close(cosine, hamming, atol=1e-6, rtol=0)
    run = SimpleNamespace(tokens=tokens)
    torch.testing.assert_close(ch.start_distances(None, None, run), hamming[:, :, 0])
    torch.testing.assert_close(ch.state_vectors(None, None, run), vectors)


def test_a_text_model_has_no_germline_section(capsys):
    """Text models keep their seeds and embedder; the germline table and sentences say there is nothing."""
    from types import SimpleNamespace

    text_model = SimpleNamespace(protein=False)
    assert not glauber.is_protein(text_model) and ch.seed_source(text_model, "bbc") == "bbc"
    assert ch.germline_section(text_model, 8) is None
    assert "protein" in capsys.readouterr().out
    assert ch.germline_family_view(None) is None and ch.germline_figure(None) is None
    assert ch.germline_text(None)["cold_germline"] == ""
    assert "sentence embeddings" in ch.distance_text(text_model)["distance"]


# ------------------------------------------------------------------------------------------------
# Every temperature in one batch
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["potts", "tiny_bert"])
def test_chains_at_temperatures_equal_runs_of_their_own(model, request):
    """One batch over temperatures (1/tau not exact in binary at 0.1 and 0.3) gives every chain the trajectory
    of a glauber run at its temperature alone: the same sites and tokens, and the same log-probabilities up to
    the last bits that a larger batch's matrix products may round differently."""
    cond = (
        glauber.PottsConditionals(torch.randn(5, 5, generator=torch.Generator().manual_seed(2)), q=3)
        if model == "potts"
        else request.getfixturevalue(model)
    )
    x0 = (
        torch.randint(0, 3, (3, 5), generator=torch.Generator().manual_seed(1))
        if model == "potts"
        else glauber.seed_passages(cond, 6, 3, seed=0).tokens
    )
    taus = [1.0, 0.3, 0.1]
    runs = ch.chains_at_temperatures(cond, x0, taus, 40, seed=7, record_every=8)
    assert list(runs) == taus
    for tau in taus:
        alone = glauber.glauber(cond, x0, 40, tau, seed=7, record_every=8, progress=False)
        batched = runs[tau]
        assert batched.temperature == tau and torch.equal(batched.steps, alone.steps)
        for field in ("tokens", "sites", "old_tokens", "new_tokens"):
            assert torch.equal(getattr(batched, field), getattr(alone, field)), (tau, field)
        assert torch.allclose(batched.log_probs, alone.log_probs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("temperatures", [[1.0, 1.0], [], [1.0, 0.0]])
def test_chains_at_temperatures_reject_bad_temperature_lists(temperatures):
    with pytest.raises(ValueError, match="temperatures"):
        ch.chains_at_temperatures(
            glauber.PottsConditionals(torch.ones(3, 3), q=2), torch.zeros(2, 3, dtype=torch.long), temperatures, 3
        )


def test_cold_frame_measures_the_distance_from_the_start_at_the_burn_in_and_the_end():
    """Hamming vectors of known states: the cold chain falls 2 of 4 sites from its start during its burn-in, then
    freezes; the warm one lies 1 of 4 off at the burn-in and 4 of 4 at the end."""
    steps = torch.tensor([0, 5, 10])
    cold_states = torch.tensor([[[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]]])  # moves 2 of 4 by step 5, then stays
    warm_states = torch.tensor([[[0, 0, 0, 0], [0, 0, 0, 1], [1, 1, 1, 1]]])  # 1 of 4 by step 5, 3 more after it
    warm = (ch.hamming_vectors(warm_states), steps)
    frame = ch.cold_frame(warm, {0.1: (ch.hamming_vectors(cold_states), steps)}, burn_in=5, end=10)
    row = frame.iloc[0]
    assert (row.burn_in_distance, row.distance, row.moved) == pytest.approx((0.5, 0.5, 0.0))
    assert (row.warm_burn_in_distance, row.warm_distance, row.warm_moved) == pytest.approx((0.25, 1.0, 0.75))
    with pytest.raises(ValueError, match="recorded steps"):
        ch.movement(warm[0], steps, 3, 10)


def test_cold_row_judges_the_distance_from_the_start_not_the_freezing():
    """Chains that fall far from their start during the burn-in and then freeze (moved 0) lie 0.75 from it against
    the warm chains' 0.8: not near their start, whatever they do after; chains at their start (0) stay. Both steps
    are parts: a cold chain near its start at the end but not at the burn-in does not stay."""
    warm = [0.8, 0.75, 0.85, 0.8]
    fell = cold_table(warm, {0.1: [0.75, 0.7, 0.8, 0.75], 0.01: [0.75, 0.8, 0.7, 0.75]})
    assert (fell.moved == 0).all() and ch.cold_row(fell)["verdict"] == bt.DIFFERS
    stayed = cold_table(warm, {0.1: [0.0, 0.1, 0.05, 0.0], 0.01: [0.0, 0.0, 0.02, 0.01]})
    row = ch.cold_row(stayed)
    assert row["verdict"] == bt.REPRODUCED and row["reason"].count("reproduced") >= 4  # 2 temperatures x 2 steps
    away = stayed.assign(burn_in_distance=np.where(stayed.temperature == 0.1, 0.7, stayed.burn_in_distance))
    parts = {(p["tau"], p["point"]): p["verdict"] for p in ch.cold_parts(away)}
    assert parts == {(0.1, "burn-in"): bt.DIFFERS, (0.1, "end"): bt.REPRODUCED, (0.01, "burn-in"): bt.REPRODUCED,
                     (0.01, "end"): bt.REPRODUCED}  # fmt: skip
    assert ch.cold_row(away)["verdict"] == bt.DIFFERS
    view = ch.cold_view(stayed, 1.0).data
    assert view["read at"].tolist() == ["burn-in", "end"] * 2
    assert view["verdict at 95%"].eq(bt.REPRODUCED).all() and view["verdict at 98.75%"].eq(bt.REPRODUCED).all()


def test_cold_row_differs_only_where_a_part_differs_at_the_corrected_level():
    """Bonferroni over the 4 parts (2 temperatures x 2 steps, every_part_level(4) = 98.75%): a part whose paired
    excess lies 4.9 standard errors above 0 over 4 chains differs at 95% (t_3 = 3.18) but not at 98.75% (t_3 =
    5.39): the claim is inconclusive, not differs; at 9.8 standard errors the part differs at both and so does the
    claim."""
    warm = np.array([0.8, 0.75, 0.85, 0.8])
    stayed = cold_table(warm, {0.1: [0.0, 0.1, 0.05, 0.0], 0.01: [0.0, 0.0, 0.02, 0.01]})
    for excess, part, claim in (
        ([0.1, 0.2, 0.3, 0.2], (bt.DIFFERS, bt.INCONCLUSIVE), bt.INCONCLUSIVE),
        ([0.15, 0.2, 0.25, 0.2], (bt.DIFFERS, bt.DIFFERS), bt.DIFFERS),
    ):
        away = np.where(stayed.temperature == 0.1, np.tile(warm / 2 + excess, 2), stayed.burn_in_distance)
        parts = ch.cold_parts(stayed.assign(burn_in_distance=away))
        assert (parts[0]["verdict"], parts[0]["corrected"]) == part
        assert all(p["corrected"] == bt.REPRODUCED for p in parts[1:])
        row = ch.cold_row(stayed.assign(burn_in_distance=away))
        assert row["verdict"] == claim and "98.75% per part" in row["reason"]


def test_the_movement_after_the_burn_in_is_shown_not_judged():
    """The measure judged until version 0.5.0 (cold_movement): per cold temperature, the chains' mean movement after
    the burn-in, cold and warm, and the paired excess over COLD_FACTOR x warm with its 95% t interval; chains that
    fell from their start and froze move 0 (far below half the warm chains') while the judged distance differs."""
    warm = [0.8, 0.75, 0.85, 0.8]
    fell = cold_table(warm, {0.1: [0.75, 0.7, 0.8, 0.75], 0.01: [0.75, 0.8, 0.7, 0.75]})
    moves = ch.cold_movement(fell)
    assert [m["tau"] for m in moves] == [0.1, 0.01] and all(m["moved"] == 0 for m in moves)
    assert moves[0]["excess"] == pytest.approx(-0.4) and moves[0]["high"] < 0
    assert ch.cold_row(fell)["verdict"] == bt.DIFFERS
    view = ch.cold_movement_view(fell, 1.0).data
    assert view.columns.tolist()[:3] == ["τ", "chains", "moved after burn-in"] and "verdict" not in view
    assert ch.cold_text(fell)["cold_moved"] == "τ = 0.1: 0.000 against warm 0.800; τ = 0.01: 0.000 against warm 0.800"
    assert ch.cold_text(fell.head(0))["cold_moved"] == "no cold run"


def test_split_row_counts_distinct_held_states_and_ties_as_neither_kind():
    """AntiBERTy's pattern: one chain re-enters one held state three times (Δ* = -0.065) and holds its twin once
    (+0.065); 4 other chains hold perfect states, one of them twice. Distinct held states: 5 perfect (the twin among
    them), 1 approximate; a Δ* within the tie tolerance is neither kind."""
    traps = constructed_traps(["perfect"] * 9, [300] * 9, [True] * 9).assign(
        chain=[0, 0, 0, 0, 1, 2, 3, 4, 4],
        state=[[1, 0, 0], [2, 0, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0], [5, 0, 0], [5, 0, 0]],
        min_gap=[-0.065, 0.065, -0.065, -0.065, 2.0, 2.0, 2.0, 1.0, 1.0],
    )
    distinct = ch.distinct_held_states(traps)
    assert distinct.trap.tolist() == [0, 1, 4, 5, 6, 7] and distinct.entries.tolist() == [3, 1, 1, 1, 1, 2]
    row = ch.split_row(traps, "τ = 1")
    assert row["verdict"] == bt.REPRODUCED and row["ours"] == pytest.approx(5 / 6)
    assert row["ours_text"] == "5 perfect, 1 approximate of 6 distinct held states (9 traps)"
    tied = traps.assign(min_gap=traps.min_gap.where(traps.chain != 0, ch.TIE_TOLERANCE / 2 * np.sign(traps.min_gap)))
    row = ch.split_row(tied, "τ = 1")
    assert row["verdict"] == bt.INCONCLUSIVE and "2 tied" in row["ours_text"] and "tied held state" in row["reason"]
    assert ch.distinct_held_states(traps.head(0)).empty


def test_theorem8_row_counts_traps_whose_bound_is_below_one_step():
    """Delta*/tau < ln(4|V|) is where e^(Delta*/tau) / (4|V|) < 1: a gap between ln|V| and ln(4|V|) still counts."""
    vocab = 100
    gaps = [math.log(vocab) + 0.5, math.log(4 * vocab) + 0.5]  # ln|V| < the first < ln(4|V|) < the second
    traps = constructed_traps(["perfect"] * 2, [300, 300], [True, True]).assign(min_gap=gaps)
    assert math.exp(gaps[0]) / (4 * vocab) < 1 < math.exp(gaps[1]) / (4 * vocab)
    rows = ch.claim_rows(
        traps,
        {1.0: ch.trap_summary(traps, 2, 1000)},
        cold_table([0.5, 0.6], {0.1: [0.0, 0.01]}),
        model="m",
        setup=ch.claims_setup(chapter_settings()),
        vocab=vocab,
        window=10,
    )
    row = pd.DataFrame(rows).set_index("claim").loc["delta_star_below_lnv"]
    assert row.ours == 0.5 and "ln(4|V|) = 5.99" in row.ours_text


def test_a_window_in_a_longer_state_reads_its_gaps_and_kernel_in_context():
    """A protein MLM's chains move only the first n sites of a whole gene: the trajectory records that window,
    and the gaps and the kernel's exit law of a held state are the model's on the whole state."""
    potts = glauber.PottsConditionals(torch.ones(5, 5), q=3)  # s_i(a; x) = #{j != i: x_j = a}
    genes = torch.tensor([[0, 0, 1, 1, 1], [2, 2, 2, 0, 0]])
    runs = ch.chains_at_temperatures(potts, genes, [1.0, 0.5], 40, seed=0, record_every=4, free=2)
    for trajectory in runs.values():
        assert trajectory.tokens.shape == (2, 11, 2) and bool((trajectory.sites < 2).all())
    window = torch.tensor([[0, 0], [0, 0]])
    full = ch.with_context(window, genes)
    assert full.tolist() == [[0, 0, 1, 1, 1], [0, 0, 2, 0, 0]]
    trajectory = path_trajectory(window, [[0, 1]] * 2, [[0, 0]] * 2, record_every=1)
    traps = pd.DataFrame(
        {
            "chain": [0, 1],
            "start": [0, 0],
            "end": [2, 2],
            "duration": [2, 2],
            "start_record": [0, 0],
            "end_record": [2, 2],
        }
    )
    catalogue = ch.trap_catalogue(potts, trajectory, traps, contexts=genes)
    # chain 0 in (0, 0 | 1, 1, 1): site 0 scores colour 0 once, colour 1 three times -> gap 1 - 3 = -2
    # chain 1 in (0, 0 | 2, 0, 0): site 0 scores colour 0 three times, colour 2 once -> gap 3 - 1 = 2
    np.testing.assert_allclose(np.array(catalogue.gaps.tolist()), [[-2, -2], [2, 2]])
    assert catalogue.kind.tolist() == ["approximate", "perfect"]
    shares = ch.kernel_weakest_share(potts, window, catalogue.gaps.tolist(), 1.0, genes)
    np.testing.assert_allclose(shares, [1.0, 1.0])  # both sites tie as weakest
    with pytest.raises(ValueError, match="contexts"):
        ch.with_context(window, genes[:1])


def test_no_trap_in_a_window_run_gives_an_empty_frame():
    potts = glauber.PottsConditionals(torch.ones(5, 5), q=3)
    genes = torch.tensor([[0, 0, 1, 1, 1], [2, 2, 2, 0, 0]])
    runs = ch.chains_at_temperatures(potts, genes, [1.0], 8, seed=0, record_every=4, free=2)
    vectors = {tau: (chains, ch.state_vectors(potts, None, chains)) for tau, chains in runs.items()}
    found = {1.0: ch.trap_catalogue(potts, runs[1.0], ch.detect_traps(vectors[1.0][1], runs[1.0].steps, 8, 1e-9))}
    assert found[1.0].empty and ch.trap_frame(potts, vectors, found, contexts=genes).empty


# ---- the matched temperature (issue 63, item 3) ----


def test_fixed_points_of_independent_sites_are_each_sites_favourite_with_ties_to_the_lowest_id():
    """No coupling: one sweep sets every site to its field's argmax (a tie to the lowest colour), the next changes
    nothing, so every start settles there."""
    field = torch.tensor([[0.0, 2.0, 1.0], [1.5, 0.0, 1.5], [0.0, 0.0, 3.0]])
    potts = glauber.PottsConditionals(torch.zeros(3, 3), field, q=3)
    starts = torch.tensor([[0, 0, 0], [2, 1, 0], [1, 0, 2]])
    states, settled = ch.fixed_points(potts, starts)
    assert settled.all() and (states == torch.tensor([1, 0, 2])).all()


def test_fixed_points_stop_on_a_cycle_of_incompatible_conditionals():
    """Site 0 copies site 1, site 1 avoids site 0 (asymmetric J, incompatible): from (0, 0) a sweep gives (0, 1),
    then (1, 0), then (0, 1) again, a cycle, so the start never settles; the check stops it after three sweeps."""
    coupling = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    potts = glauber.PottsConditionals(coupling, q=2)
    states, settled = ch.fixed_points(potts, torch.tensor([[0, 0]]), max_sweeps=50)
    assert not settled.any() and states.tolist() in ([[0, 1]], [[1, 0]])


def test_matched_temperature_reads_the_median_mean_gap_against_the_papers():
    """Independent sites whose favourite leads by g at every site: every fixed point has mean gap g, so tau_m =
    min(1, g / 4.12) rounded to 0.05; a gap deeper than the paper's caps at 1."""
    for gap, expected in ((2.06, 0.5), (1.0, 0.25), (9.0, 1.0)):
        field = torch.zeros(4, 3)
        field[:, 2] = gap
        potts = glauber.PottsConditionals(torch.zeros(4, 4), field, q=3)
        matched = ch.matched_temperature(potts, torch.zeros(5, 4, dtype=torch.long))
        assert matched["tau_m"] == pytest.approx(expected) and matched["settled"] == matched["starts"] == 5
        assert matched["median_gap"] == pytest.approx(gap) and ch.PAPER_TRAP_GAP == 4.12
    with pytest.raises(ValueError, match="reference_gap"):
        ch.matched_temperature(potts, torch.zeros(1, 4, dtype=torch.long), reference_gap=0.0)


def test_matched_temperature_leaves_out_starts_that_do_not_settle_and_reads_free_sites_only():
    """A cycling start is counted and left out; with `sites`, the gaps are those of the free sites alone."""
    coupling = torch.tensor([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    field = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 3.0]])
    potts = glauber.PottsConditionals(coupling, field, q=2)
    cycling = ch.matched_temperature(potts, torch.tensor([[0, 0, 0]]))
    assert cycling["settled"] == 0 and math.isnan(cycling["tau_m"])
    free = ch.matched_temperature(potts, torch.tensor([[0, 0, 1]]), sites=[2])
    assert free["settled"] == 1 and free["median_gap"] == pytest.approx(3.0)


def test_the_run_adds_the_matched_temperature_after_the_profiles_once():
    assert ch.run_temperatures([1.0], 0.55) == [1.0, 0.55]
    assert ch.run_temperatures([1.0], 1.0) == [1.0]  # a model as sharp as BERT runs at the paper's tau alone
    assert ch.run_temperatures([1.0], math.nan) == [1.0]  # no start settled: no matched run


def test_matched_text_says_how_long_a_run_would_need_to_be_for_trap_split():
    """35 distinct held states (cases_to_rule_out(10%)) at the run's rate, or at the paper's with none seen; before
    the run the rule's numbers, after it the need alone (a glue key is written once)."""
    matched = dict(tau_m=0.5, median_gap=2.06, unrounded=0.5, settled=28, starts=30)
    traps = pd.DataFrame(
        dict(temperature=[0.5, 0.5, 1.0], chain=[0, 1, 0], state=[(1, 2), (3, 4), (5, 6)], min_gap=[0.1, -0.2, 0.3])
    )
    before = ch.matched_text(matched)
    assert before["tau_m"] == "0.5" and before["tau_m_settled"] == "28 of 30" and "matched_need" not in before
    after = ch.matched_need_text(matched, traps, chains=10, steps=1_000)
    assert set(after) == {"matched_need"} and not set(after) & set(before)
    assert "2 distinct held states" in after["matched_need"] and "175,000 chain-steps" in after["matched_need"]
    none = ch.matched_need_text(matched, traps.head(0), chains=10, steps=1_000)["matched_need"]
    assert "617,647 chain-steps at the paper's rate" in none
    unsettled = dict(tau_m=math.nan, median_gap=math.nan, unrounded=math.nan, settled=0, starts=4)
    assert "nan" not in " ".join(ch.matched_text(unsettled).values()).lower()
    assert "no start settled" in ch.matched_need_text(unsettled, traps, chains=10, steps=1_000)["matched_need"]


def test_chains_seeded_at_the_fixed_points_hold_perfect_traps_beside_the_judged_run():
    """Independent sites whose favourite leads by 6 at every site: the fixed point is the favourites, and chains
    started there at tau_m = 1 stay (a site leaves with probability about 2 e^-6 per update), so the detector finds
    a perfect held state in every chain, reported beside the judged run (seeding_view) and never judged."""
    field = torch.zeros(4, 3)
    field[:, 1] = 6.0
    potts = glauber.PottsConditionals(torch.zeros(4, 4), field, q=3)
    matched = ch.matched_temperature(potts, torch.zeros(5, 4, dtype=torch.long))
    assert (matched["fixed"] == 1).all() and ch.judged_temperature(matched["tau_m"]) == 1.0
    cfg = chapter_settings(n_chains=3, steps=80, seq_len=4, window=20, record_every=4, free=0)
    fixed = ch.fixed_point_traps(potts, None, matched, cfg)
    states = ch.distinct_held_states(fixed)
    assert len(states) == 3 and (states.min_gap > ch.TIE_TOLERANCE).all() and (fixed.kind == "perfect").all()
    view = ch.seeding_view(fixed.head(0).assign(temperature=1.0), fixed, (3, 3), cfg.steps, 1.0).data
    assert view["distinct held states"].tolist() == [0, 3] and view.perfect.tolist() == [0, 3]
    assert "3 distinct states, 3 of them perfect" in ch.fixed_point_text(fixed, 3, 1.0)["fixed_points"]
    assert ch.fixed_point_traps(potts, None, dict(matched, fixed=matched["fixed"][:0]), cfg).empty
    assert ch.judged_temperature(math.nan) == ch.PAPER_TAU and ch.judged_temperature(0.55) == 0.55
