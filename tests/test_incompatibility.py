"""Chapter 1: the rectangle sampler, token influence, the causal-LM control and Table 1's statistics."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

import book_tools as bt
import glauber_core as glauber
from chapters import incompatibility as ch
from chapters.incompatibility import judging, science


def random_states(cond, count, n, seed):
    """count states of n allowed tokens drawn uniformly."""
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    generator = torch.Generator().manual_seed(seed)
    return allowed[torch.randint(len(allowed), (count, n), generator=generator)]


def asymmetric_potts(n=5, q=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return glauber.PottsConditionals(
        torch.randn(n, n, generator=generator, dtype=torch.float64),
        torch.randn(n, q, generator=generator, dtype=torch.float64),
        q=q,
    )


# ---------------------------------------------------------------------------------------------
# The causal-LM control
# ---------------------------------------------------------------------------------------------


def test_causal_control_delta_is_zero_for_random_gpt2(tiny_gpt2):
    rectangles = ch.sample_rectangles(tiny_gpt2, random_states(tiny_gpt2, 6, 9, 0), 16, top_k=50, seed=1)
    x, y, w, z = glauber.rectangle_states(*rectangles.args())
    log_x, log_y = tiny_gpt2.log_joint(x), tiny_gpt2.log_joint(y)
    assert (log_x - log_y).abs().min() > 1e-3  # the edges are far from zero; only their sum cancels
    for temperature in (1.0, 0.7):
        delta = glauber.rectangle_delta(tiny_gpt2, *rectangles.args(), temperature=temperature)
        assert delta.dtype == torch.float64 and delta.shape == (16,)
        assert delta.abs().max() < 1e-9
    frame = ch.rectangle_frame(tiny_gpt2, rectangles, batch_size=6)
    assert frame.abs_delta.max() < 1e-9 and frame.influence.isna().all()


def test_log_joint_is_the_sum_of_naive_next_token_log_probs(tiny_gpt2):
    states = random_states(tiny_gpt2, 3, 7, 2)
    expected = torch.zeros(3, dtype=torch.float64)
    with torch.no_grad():
        for b in range(3):
            for t in range(7):
                prefix = torch.tensor([[tiny_gpt2.start_id] + states[b, :t].tolist()])
                logits = tiny_gpt2.model(input_ids=prefix).logits[0, -1].double()
                expected[b] += torch.log_softmax(logits, -1)[states[b, t]]
    tiny_gpt2.batch_size = 2  # exercise the chunking
    try:
        got = tiny_gpt2.log_joint(states)
    finally:
        tiny_gpt2.batch_size = 32
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)
    assert tiny_gpt2.start_id == tiny_gpt2.tokenizer.cls_token_id


def test_next_token_scores_are_the_logits_given_the_prefix(tiny_gpt2):
    states = random_states(tiny_gpt2, 2, 6, 3)
    scores = tiny_gpt2.next_token_scores(states, torch.tensor([[0, 4], [5, 2]]))
    with torch.no_grad():
        for b, sites in enumerate([[0, 4], [5, 2]]):
            for m, site in enumerate(sites):
                prefix = torch.tensor([[tiny_gpt2.start_id] + states[b, :site].tolist()])
                torch.testing.assert_close(
                    scores[b, m], tiny_gpt2.model(input_ids=prefix).logits[0, -1], rtol=0, atol=1e-4
                )


def test_causal_lm_never_allows_special_tokens(tiny_gpt2):
    specials = tiny_gpt2.tokenizer.all_special_ids
    assert not tiny_gpt2.allowed[specials].any()
    assert tiny_gpt2.vocab_size == len(tiny_gpt2.tokenizer)
    text = "the minister said on monday"
    assert tiny_gpt2.decode(tiny_gpt2.encode(text)) == text


def test_unknown_causal_lm_offline_raises_one_value_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="no-such-org/no-such-causal-lm.*unreachable"):
        glauber.load_causal_lm("no-such-org/no-such-causal-lm")


def test_influence_is_refused_for_a_causal_lm(tiny_gpt2):
    rectangles = ch.sample_rectangles(tiny_gpt2, random_states(tiny_gpt2, 2, 5, 4), 2, seed=0)
    with pytest.raises(ValueError, match="causal LM"):
        ch.token_influence(tiny_gpt2, *rectangles.args())


# ---------------------------------------------------------------------------------------------
# The rectangle sampler
# ---------------------------------------------------------------------------------------------


def test_sampler_never_proposes_the_current_or_a_special_token(tiny_bert):
    states = random_states(tiny_bert, 6, 10, 5)
    rectangles = ch.sample_rectangles(tiny_bert, states, 120, top_k=50, seed=3, batch_size=16)
    rows = torch.arange(120)
    x = rectangles.tokens
    assert torch.equal(x, states[torch.arange(120) % 6]) and torch.equal(rectangles.passage, rows % 6)
    assert (rectangles.i != rectangles.j).all()
    assert (rectangles.a_new != x[rows, rectangles.i]).all() and (rectangles.b_new != x[rows, rectangles.j]).all()
    allowed = tiny_bert.allowed.cpu()
    assert allowed[rectangles.a_new].all() and allowed[rectangles.b_new].all()
    # each replacement is among the top 50 allowed, non-current tokens of the masked-site scores
    for site, new in ((rectangles.i, rectangles.a_new), (rectangles.j, rectangles.b_new)):
        scores = tiny_bert.log_scores(x, site).cpu().double()
        scores[:, ~allowed] = float("-inf")
        scores[rows, x[rows, site]] = float("-inf")
        top = scores.topk(50, dim=1).indices
        assert (top == new.unsqueeze(1)).any(1).all()
    # the random model does rank unused/special tokens high: the exclusion is doing work
    raw_top = tiny_bert.log_scores(x, rectangles.i).cpu().topk(50, dim=1).indices
    assert (~allowed[raw_top]).any()


@pytest.mark.parametrize("architecture", ["roberta", "modernbert"])
def test_sampler_and_table_use_each_models_own_tokens(tiny_mlms, architecture):
    cond = tiny_mlms[architecture]
    rectangles = ch.sample_rectangles(cond, random_states(cond, 4, 8, 9), 12, seed=0)
    rows = torch.arange(12)
    x = rectangles.tokens
    assert (rectangles.a_new != x[rows, rectangles.i]).all() and (rectangles.b_new != x[rows, rectangles.j]).all()
    assert cond.allowed.cpu()[torch.cat([rectangles.a_new, rectangles.b_new])].all()
    frame = ch.rectangle_frame(cond, rectangles, batch_size=5)
    np.testing.assert_allclose(frame.delta, glauber.rectangle_delta(cond, *rectangles.args()).numpy(), atol=5e-7)
    assert list(frame.A_new) == cond.tokenizer.convert_ids_to_tokens(rectangles.a_new.tolist())


class FavoursForbidden:
    """Scores that rank disallowed tokens first, then the current token, then token 1 > 2 > 3 > ..."""

    vocab_size = 8
    allowed = torch.tensor([False, True, True, True, True, True, True, False])
    device = torch.device("cpu")

    def log_scores(self, tokens, positions):
        scores = -torch.arange(8, dtype=torch.float64).expand(len(tokens), 8).clone()
        scores[:, ~self.allowed] = 100.0
        scores[torch.arange(len(tokens)), tokens[torch.arange(len(tokens)), positions]] = 50.0
        return scores


def test_sampler_with_top_1_takes_the_best_allowed_non_current_token():
    cond = FavoursForbidden()
    states = torch.tensor([[1, 2, 3, 4], [2, 1, 5, 6]])
    rectangles = ch.sample_rectangles(cond, states, 40, top_k=1, seed=0)
    rows = torch.arange(40)
    for site, new in ((rectangles.i, rectangles.a_new), (rectangles.j, rectangles.b_new)):
        expected = torch.where(rectangles.tokens[rows, site] == 1, 2, 1)
        assert torch.equal(new, expected)


def test_sampler_positions_cover_every_ordered_pair_and_top_k_larger_than_the_vocabulary():
    cond = FavoursForbidden()
    rectangles = ch.sample_rectangles(cond, torch.tensor([[1, 2, 3, 4]]), 600, top_k=100, seed=1)
    pairs = set(zip(rectangles.i.tolist(), rectangles.j.tolist()))
    assert pairs == {(a, b) for a in range(4) for b in range(4) if a != b}
    used = set(rectangles.a_new.tolist()) | set(rectangles.b_new.tolist())
    assert used == {1, 2, 3, 4, 5, 6}  # every allowed token, never 0 or 7
    again = ch.sample_rectangles(cond, torch.tensor([[1, 2, 3, 4]]), 600, top_k=100, seed=1)
    assert torch.equal(again.a_new, rectangles.a_new)


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(tokens=torch.tensor([[1]])), "at least 2 sites"),
        (dict(top_k=0), "top_k"),
        (dict(top_k=2.5), "top_k"),
        (dict(count=0), "count"),
    ],
)
def test_sampler_bad_input_raises_one_value_error(bad, message):
    args = dict(tokens=torch.tensor([[1, 2, 3]]), count=4, top_k=3)
    args.update(bad)
    with pytest.raises(ValueError, match=message):
        ch.sample_rectangles(FavoursForbidden(), args["tokens"], args["count"], top_k=args["top_k"])


# ---------------------------------------------------------------------------------------------
# delta at temperature tau, token influence, the rectangle table
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.25, 0.5, 2.0, 7.0])
def test_delta_at_tau_is_delta_at_one_over_tau(tiny_bert, temperature):
    rectangles = ch.sample_rectangles(tiny_bert, random_states(tiny_bert, 8, 9, 6), 24, seed=2)
    at_one = glauber.rectangle_delta(tiny_bert, *rectangles.args())
    literal = ch.rectangle_delta_normalized(tiny_bert, *rectangles.args(), temperature=temperature)
    assert at_one.abs().max() > 1e-4  # a random MLM is incompatible: the check is not 0 == 0
    torch.testing.assert_close(literal, at_one / temperature, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        glauber.rectangle_delta(tiny_bert, *rectangles.args(), temperature=temperature),
        at_one / temperature,
        rtol=1e-12,
        atol=1e-12,
    )


def test_literal_delta_matches_the_potts_closed_form():
    model = asymmetric_potts()
    rectangles = ch.sample_rectangles(
        model, torch.randint(4, (10, 5), generator=torch.Generator().manual_seed(0)), 50, top_k=3, seed=0
    )
    x, i, j, a_new, b_new = rectangles.args()
    rows = torch.arange(50)
    a_old, b_old = x[rows, i], x[rows, j]
    coupling = model.coupling
    # from s_i(a) = h_i(a) + sum_k J_ik [x_k = a]: delta = (J_ji - J_ij) ([A'=B'] - [A'=B] - [A=B'] + [A=B])
    same = (a_new == b_new).double() - (a_new == b_old).double() - (a_old == b_new).double() + (a_old == b_old).double()
    expected = (coupling[j, i] - coupling[i, j]) * same
    for temperature in (1.0, 0.5):
        torch.testing.assert_close(
            ch.rectangle_delta_normalized(model, *rectangles.args(), temperature=temperature),
            expected / temperature,
            rtol=0,
            atol=1e-12,
        )


def test_influence_matches_a_direct_computation(tiny_bert):
    rectangles = ch.sample_rectangles(tiny_bert, random_states(tiny_bert, 5, 8, 7), 15, seed=4)
    x, i, j, a_new, b_new = rectangles.args()
    expected = torch.zeros(15, 2, dtype=torch.float64)
    for r in range(15):

        def log_p(state, site):
            scores = tiny_bert.log_scores(state.unsqueeze(0), torch.tensor([site])).cpu().double()[0]
            scores[~tiny_bert.allowed.cpu()] = float("-inf")
            return torch.log_softmax(scores, -1)[state[site]]

        w, y = x[r].clone(), x[r].clone()
        w[j[r]], y[i[r]] = b_new[r], a_new[r]
        expected[r, 0] = (log_p(x[r], int(i[r])) - log_p(w, int(i[r]))).abs()
        expected[r, 1] = (log_p(x[r], int(j[r])) - log_p(y, int(j[r]))).abs()
    # one sequence at a time vs batched: fp32 forwards differ by rounding (~1e-7) only
    assert expected.max() > 1e-5
    torch.testing.assert_close(ch.rectangle_influences(tiny_bert, *rectangles.args()), expected, rtol=0, atol=5e-7)
    torch.testing.assert_close(ch.token_influence(tiny_bert, *rectangles.args()), expected.amax(1), rtol=0, atol=5e-7)
    frame = ch.rectangle_frame(tiny_bert, rectangles, batch_size=4)
    np.testing.assert_allclose(frame.paper_influence, expected.amax(1).numpy(), atol=5e-7)
    np.testing.assert_allclose(frame.delta, glauber.rectangle_delta(tiny_bert, *rectangles.args()).numpy(), atol=5e-7)
    assert (frame.distance == (frame.i - frame.j).abs()).all()


def test_pair_influence_is_the_largest_tv_over_the_alternative_tokens():
    model = asymmetric_potts(n=5, q=6, seed=2)
    rectangles = ch.random_rectangles(model, 5, 12, seed=3)
    tried = ch.alternative_tokens(model, rectangles, k=3, top_k=6, seed=0)
    assert tried.shape == (12, 2, 3)
    assert all(len(set(row.tolist())) == 3 for row in tried.reshape(-1, 3))  # distinct at each site
    rows = torch.arange(12)
    own = [{int(rectangles.tokens[r, rectangles.i[r]]), int(rectangles.a_new[r])} for r in rows]
    assert all(not own[r] & set(tried[r, 0].tolist()) for r in rows)  # never the rectangle's A or A' at i
    own = [{int(rectangles.tokens[r, rectangles.j[r]]), int(rectangles.b_new[r])} for r in rows]
    assert all(not own[r] & set(tried[r, 1].tolist()) for r in rows)  # never B or B' at j
    small = asymmetric_potts(n=5, q=4, seed=2)  # 2 tokens besides a rectangle's own two: k shrinks to 2
    assert ch.alternative_tokens(small, ch.random_rectangles(small, 5, 4, seed=3), k=3, top_k=4).shape[2] == 2
    again = ch.alternative_tokens(model, rectangles, k=3, top_k=6, seed=0)
    assert torch.equal(tried, again) and not torch.equal(tried, ch.alternative_tokens(model, rectangles, 3, 6, 1))
    got = ch.pair_influence(model, rectangles, tried, temperature=0.5)
    x, i, j = rectangles.tokens, rectangles.i, rectangles.j
    for r in range(12):
        for column, (site, other) in enumerate(((int(i[r]), int(j[r])), (int(j[r]), int(i[r])))):
            dists = []
            for b in tried[r, 1 - column].tolist():
                state = x[r].clone()
                state[other] = b
                dists.append(glauber.conditional_probs(model, state.unsqueeze(0), torch.tensor([site]), 0.5)[0])
            best = max(0.5 * float((p - q).abs().sum()) for p in dists for q in dists)
            assert float(got[r, column]) == pytest.approx(best, abs=1e-12)
    frame = ch.rectangle_frame(model, rectangles, 0.5, top_k=6, alternatives=3)
    np.testing.assert_allclose(frame.influence, got.amax(1).numpy(), atol=1e-12)
    assert (frame.temperature == 0.5).all()
    with pytest.raises(ValueError, match="k"):
        ch.alternative_tokens(model, rectangles, k=1, top_k=4)
    tiny = asymmetric_potts(n=5, q=3, seed=2)
    with pytest.raises(ValueError, match="besides"):
        ch.alternative_tokens(tiny, ch.random_rectangles(tiny, 5, 4, seed=3), k=3, top_k=3)


def test_influence_matches_the_potts_closed_form():
    model = asymmetric_potts(n=4, q=3, seed=1)
    rectangles = ch.sample_rectangles(model, torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]]), 30, top_k=2, seed=5)
    x, i, j, a_new, b_new = rectangles.args()
    expected = []
    for r in range(30):

        def log_p(state, site):
            scores = model.field[site] + torch.stack(
                [sum(model.coupling[site, k] * float(state[k] == a) for k in range(4) if k != site) for a in range(3)]
            )
            return torch.log_softmax(scores, -1)[state[site]]

        w, y = x[r].clone(), x[r].clone()
        w[j[r]], y[i[r]] = b_new[r], a_new[r]
        expected.append(
            max(abs(log_p(x[r], int(i[r])) - log_p(w, int(i[r]))), abs(log_p(x[r], int(j[r])) - log_p(y, int(j[r]))))
        )
    torch.testing.assert_close(
        ch.token_influence(model, *rectangles.args()), torch.stack(expected).double(), rtol=0, atol=1e-12
    )


# ---------------------------------------------------------------------------------------------
# Table 1's statistics
# ---------------------------------------------------------------------------------------------


def test_sign_test_above_a_floor_is_the_exact_binomial_tail():
    k, total, p = ch.sign_test_above([0.0, -2.0, 3.0, 1e-9], floor=1e-6)
    assert (k, total) == (2, 4) and p == pytest.approx(11 / 16)
    k, total, p = ch.sign_test_above(np.full(40, 0.5), floor=1e-6)
    assert (k, total) == (40, 40) and p == pytest.approx(2.0**-40)
    assert ch.sign_test_above(np.zeros(5), floor=0.0)[2] == 1.0
    with pytest.raises(ValueError, match="floor"):
        ch.sign_test_above([1.0], floor=-1.0)


def test_bootstrap_interval_and_spearman():
    values = np.random.default_rng(0).exponential(size=400)
    low, high = bt.bootstrap_ci(values, resamples=4000)
    half = 1.96 * values.std(ddof=1) / math.sqrt(len(values))  # the normal interval, close for n = 400
    assert low < values.mean() < high
    assert abs((high - low) / 2 - half) < 0.15 * half
    assert bt.bootstrap_ci(np.full(5, 2.0)) == (2.0, 2.0)
    rho, low, high = bt.spearman_ci(np.arange(20.0), np.arange(20.0) ** 3)
    assert rho == pytest.approx(1.0) and low == pytest.approx(1.0) and high == pytest.approx(1.0)
    x = np.random.default_rng(1).normal(size=300)
    y = x + np.random.default_rng(2).normal(size=300)
    from scipy.stats import spearmanr

    rho, low, high = bt.spearman_ci(x, y)
    assert rho == pytest.approx(spearmanr(x, y).statistic) and low < rho < high
    with pytest.raises(ValueError, match="values"):
        bt.bootstrap_ci([1.0])


def test_incompatibility_summary_row(tiny_bert):
    rectangles = ch.sample_rectangles(tiny_bert, random_states(tiny_bert, 6, 8, 8), 12, seed=6)
    frame = ch.rectangle_frame(tiny_bert, rectangles)
    row = ch.incompatibility_summary(frame, floor=1e-4, resamples=500)
    assert row["rectangles"] == 12 and row["mean_abs_delta"] == pytest.approx(frame.abs_delta.mean())
    assert row["ci_low"] <= row["mean_abs_delta"] <= row["ci_high"]
    assert row["above_floor"] == int((frame.abs_delta > 1e-4).sum())


def test_summary_with_nan_or_zero_deltas_says_so_without_warnings():
    import warnings

    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zeros = ch.incompatibility_summary(pd.DataFrame({"abs_delta": np.zeros(10)}), floor=1e-4, resamples=200)
        assert zeros["above_floor"] == 0 and zeros["share_above"] == 0 and zeros["max_abs_delta"] == 0
        empty = ch.incompatibility_summary(pd.DataFrame({"abs_delta": [np.nan, np.nan]}), floor=1e-4)
    assert empty["finite"] == 0 and math.isnan(empty["mean_abs_delta"]) and math.isnan(empty["max_abs_delta"])
    assert judging._detected_verdict(zeros)[0] == bt.DIFFERS  # zero above the floor is the answer
    assert judging._detected_verdict(empty) == (bt.INCONCLUSIVE, "no rectangle gave a finite delta")


# ---------------------------------------------------------------------------------------------
# One code path for every model; the references of the control
# ---------------------------------------------------------------------------------------------


def test_rectangle_frame_takes_delta_from_the_cores_rectangle_delta(tiny_bert, monkeypatch):
    rectangles = ch.sample_rectangles(tiny_bert, random_states(tiny_bert, 4, 8, 11), 10, seed=3)
    calls = []
    original = science.rectangle_delta

    def spy(*args, **kwargs):
        calls.append(len(args[1]))
        return original(*args, **kwargs)

    monkeypatch.setattr(science, "rectangle_delta", spy)
    frame = ch.rectangle_frame(tiny_bert, rectangles, batch_size=4)
    assert calls == [4, 4, 2]
    assert science.rectangle_delta is spy and glauber.rectangle_delta is original
    np.testing.assert_array_equal(frame.delta[:4], original(tiny_bert, *rectangles.take([0, 1, 2, 3]).args()).numpy())


def test_potts_references_sit_at_and_off_the_floor_through_the_same_path():
    references = ch.potts_references(12, q=3, seed=2)
    symmetric, asymmetric = references["Potts, symmetric J"], references["Potts, asymmetric J"]
    assert torch.equal(symmetric.coupling, symmetric.coupling.T)
    assert not torch.equal(asymmetric.coupling, asymmetric.coupling.T)
    rectangles = ch.random_rectangles(asymmetric, 12, 200, seed=1)
    rows = torch.arange(200)
    x = rectangles.tokens
    assert (rectangles.a_new != x[rows, rectangles.i]).all() and (rectangles.b_new != x[rows, rectangles.j]).all()
    assert len(set(rectangles.passage.tolist())) == 200
    sym = ch.rectangle_frame(symmetric, rectangles)
    asym = ch.rectangle_frame(asymmetric, rectangles)
    assert sym.abs_delta.max() < 1e-12
    assert asym.abs_delta.max() > 0.1 and (asym.abs_delta > 1e-4).mean() > 0.2
    assert list(sym.A[:3]) == [str(int(x[r, rectangles.i[r]])) for r in range(3)]
    assert ch.batching_jitter(symmetric, rectangles) < 1e-12


def test_checks_pass_through_one_path_with_tiny_models(tiny_bert, tiny_gpt2):
    mlm_rects = ch.sample_rectangles(tiny_bert, random_states(tiny_bert, 6, 8, 12), 12, seed=1)
    causal_rects = ch.sample_rectangles(tiny_gpt2, random_states(tiny_gpt2, 6, 8, 13), 12, seed=1)
    models = {"mlm": (tiny_bert, mlm_rects), "causal": (tiny_gpt2, causal_rects)}
    for name, model in ch.potts_references(8, seed=0).items():
        models[name] = (model, ch.random_rectangles(model, 8, 12, seed=0))
    summaries, floors = {}, {}
    for name, (model, rects) in models.items():
        frame = ch.rectangle_frame(model, rects)
        floors[name] = ch.rounding_floor(model, rects, frame)
        summaries[name] = ch.incompatibility_summary(frame, floors[name]["floor"], resamples=200)
    assert np.isnan(floors["causal"]["precision_gap"]) and floors["mlm"]["precision_gap"] > 0
    rows = ch.check_rows(summaries, floors, causal="causal", temperature_gap=1e-13)
    assert [row["result"] for row in rows] == ["pass"] * 4, rows
    # a compatible model above its floor, or a too-large temperature gap, fails its check
    broken = {**summaries, "causal": dict(summaries["causal"], max_abs_delta=1.0)}
    rows = ch.check_rows(broken, floors, causal="causal", temperature_gap=1e-3)
    assert [row["result"] for row in rows] == ["fail", "pass", "pass", "fail"]
    swapped = ch.check_rows(summaries, floors, causal="causal", symmetric=ch.ASYMMETRIC, asymmetric=ch.SYMMETRIC)
    assert swapped[1]["result"] == "fail" and len(swapped) == 3


def summary(max_abs=1.0, above=290, finite=300):
    low, high = bt.share_intervals([above], [finite])
    return {
        "rectangles": finite,
        "finite": finite,
        "mean_abs_delta": 0.5,
        "ci_low": 0.4,
        "ci_high": 0.6,
        "median_abs_delta": 0.3,
        "max_abs_delta": max_abs,
        "above_floor": above,
        "floor": 1e-4,
        "share_above": above / finite,
        "share_low": float(low[0]),
        "share_high": float(high[0]),
        "sign_test_p": 1e-20,
    }


@pytest.mark.parametrize(
    "above, expected", [(290, bt.REPRODUCED), (150, bt.REPRODUCED), (1, bt.REPRODUCED), (0, bt.DIFFERS)]
)
def test_detected_rule_reaches_every_outcome(above, expected):
    verdict, reason = judging._detected_verdict(summary(above=above))
    assert verdict == expected and f"{above} of 300" in reason
    assert judging._detected_verdict(dict(summary(), finite=0))[0] == bt.INCONCLUSIVE


def test_rank_correlation_is_nan_with_a_reason_when_it_cannot_be_estimated():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rho, low, high, why = ch.rank_correlation_ci(np.zeros(10), np.arange(10.0))
        assert math.isnan(rho) and "same for every" in why
        assert "fewer than 3" in ch.rank_correlation_ci([1.0, np.nan, 2.0], [1.0, 2.0, 3.0])[3]
        rho, low, high, why = ch.rank_correlation_ci(np.arange(30.0), np.arange(30.0) ** 2, resamples=200)
    assert rho == pytest.approx(1.0) and low <= rho <= high and why == ""
    assert ch.correlation_text(low, high) == "farther sites show more incompatibility"
    assert ch.correlation_text(-0.5, -0.1) == "closer sites show more incompatibility"
    assert ch.correlation_text(-0.5, 0.1).startswith("the interval includes 0")
    assert "no interval" in ch.correlation_text(math.nan, math.nan, why)
    assert [ch.band_position_text(*v, 0.6, 0.8) for v in ((0.1, 0.2), (0.9, 1.0), (0.5, 0.7))] == [
        "lies below",
        "lies above",
        "overlaps",
    ]


@pytest.mark.parametrize(
    "influence, expected",
    [
        ((0.4, 0.2, 0.6, ""), bt.REPRODUCED),
        ((-0.4, -0.6, -0.2, ""), bt.DIFFERS),
        ((0.1, -0.1, 0.3, ""), bt.INCONCLUSIVE),
        ((0.15, 0.05, 0.25, ""), bt.INCONCLUSIVE),  # above 0, yet it contains the smallest effect of interest 0.1
        ((0.05, 0.01, 0.09, ""), bt.DIFFERS),  # above 0, below 0.1: at most a weak relation
        ((math.nan,) * 3 + ("one side is constant",), bt.INCONCLUSIVE),
    ],
)
def test_claim_rows(influence, expected):
    rows = ch.claim_rows(
        summary(),
        influence,
        model="minilm-l4-bbc-mlm",
        setup={"rectangles": 300, "top_k": 50, "passages": "BBC News", "temperature": 1.0},
    )
    by_claim = {row["claim"]: row for row in rows}
    assert list(by_claim) == ["incompatibility_detected", "influence_amplifies_delta", "incompatibility_mean_abs_delta"]
    assert by_claim["incompatibility_detected"]["verdict"] == bt.REPRODUCED
    assert "290 of 300" in by_claim["incompatibility_detected"]["ours_text"]
    assert by_claim["influence_amplifies_delta"]["verdict"] == expected
    specific = by_claim["incompatibility_mean_abs_delta"]
    assert specific["verdict"] == bt.OTHER_SETUP and "passages BBC News (paper: MS MARCO)" in specific["setup"]
    assert "minilm-l4-bbc-mlm" in specific["setup"]
    assert all("nan" not in row["ours_text"].lower() for row in rows)
    assert all("temperature" not in row["quantity"] for row in rows)
    words = prose_text(rows, summary(), influence)
    assert words["size_text"] == "lies below" and words["mean_setup"] == specific["setup"]
    assert words["above_floor"] == "290 of 300" and words["floor"] == "1.0e-04"
    assert set(words) >= {"mean_text", "floor", "rho_influence", "sign_p", "temperature_gap", "temperature_rows"}
    assert all(isinstance(value, str) and "nan" not in value for value in words.values())


def test_rows_away_from_the_paper_temperature_say_so():
    rows = ch.claim_rows(
        summary(),
        (0.4, 0.2, 0.6, ""),
        model="m",
        setup={"rectangles": 300, "top_k": 50, "passages": "MS MARCO", "temperature": 0.5},
    )
    assert all("at temperature 0.5 (the paper's: 1)" in row["quantity"] for row in rows)
    assert rows[0]["verdict"] == bt.REPRODUCED  # a general claim is still judged by its rule


@pytest.mark.parametrize(
    "model, setup, judged",
    [
        ("bert-base-uncased", {"rectangles": 300, "top_k": 50, "passages": "MS MARCO"}, False),  # no temperature
        ("bert-base-uncased", {"rectangles": 300, "top_k": 50, "passages": "MS MARCO", "temperature": 1.0}, True),
        ("bert-base-uncased", {"rectangles": 300, "top_k": 50, "passages": "BBC News"}, False),
        ("bert-base-uncased", {"rectangles": 200, "top_k": 50, "passages": "MS MARCO"}, False),
        ("bert-base-uncased", {"rectangles": 300, "top_k": 50, "passages": "MS MARCO", "temperature": 2.0}, False),
        ("minilm-l4-bbc-mlm", {"rectangles": 300, "top_k": 50, "passages": "MS MARCO"}, False),
    ],
)
def test_mean_abs_delta_is_judged_only_on_the_papers_setup(model, setup, judged):
    rows = {}
    for low, high in ((0.66, 0.75), (0.2, 0.3), (0.5, 0.7)):
        m = dict(summary(), mean_abs_delta=(low + high) / 2, ci_low=low, ci_high=high)
        rows[(low, high)] = ch.claim_rows(m, (0.4, 0.2, 0.6, ""), model=model, setup=setup)[-1]
    verdicts = [row["verdict"] for row in rows.values()]
    if judged:
        assert verdicts == [bt.REPRODUCED, bt.DIFFERS, bt.INCONCLUSIVE]
        assert rows[(0.66, 0.75)]["setup"].startswith("the paper's model and protocol")
    else:
        assert verdicts == [bt.OTHER_SETUP] * 3


def prose_text(rows, m, influence):
    check = pd.DataFrame(
        {"temperature": [0.5, 2.0], "rectangles": 8, "max_abs_delta": [2.0, 0.5], "identity_gap": [1e-16, 2e-16]}
    )
    rho = (0.3, -0.1, 0.6, "")
    return ch.prose_text(rows, m, influence=influence, shared=rho, distance=rho, check=check, temperature=1.0)


def test_small_mean_abs_delta_keeps_two_significant_digits():
    small = dict(summary(), mean_abs_delta=1.8e-4, ci_low=1.1e-4, ci_high=2.7e-4)
    rows = ch.claim_rows(small, (0.5, 0.2, 0.7, ""), model="m", setup={"rectangles": 16})
    assert prose_text(rows, small, (0.5, 0.2, 0.7, ""))["mean_text"] == "0.00018 [0.00011, 0.00027]"


# ---------------------------------------------------------------------------------------------
# Settings, the saved tables and the page's views
# ---------------------------------------------------------------------------------------------


def test_settings_are_data_with_the_derived_values():
    cfg = ch.settings("smoke")
    assert vars(cfg).items() >= ch.SETTINGS["smoke"].items() and cfg.profile == "smoke"
    assert (cfg.source, cfg.control_source, cfg.seeds, cfg.temperature) == ("bbc", "bbc", 16, 1.0)
    assert cfg.setup == {"rectangles": 16, "top_k": 50, "passages": "BBC News", "temperature": 1.0}
    paper = ch.settings("paper", temperature=2, rectangles=0, top_k=7)
    assert paper.source == "ms_marco"
    assert paper.rectangles == int(bt.paper_protocol("incompatibility_detected")["rectangles"])
    assert paper.top_k == 7 and paper.temperature == 2.0 and paper.setup["passages"] == "MS MARCO"
    assert ch.settings("paper", passages="bbc").source == "bbc"
    for bad, message in (
        (dict(passages="wiki"), "passages must be one of"),
        (dict(temperature=0), "temperature"),
        (dict(profile="huge"), "profile must be one of"),
    ):
        with pytest.raises(ValueError, match=message):
            ch.settings(bad.pop("profile", "quick"), **bad)


def potts_run(temperature):
    """The chapter's pipeline on the two Potts references: models, floors and summaries."""
    references = ch.potts_references(6, seed=1)
    models = {}
    for name, model in references.items():
        rects = ch.random_rectangles(model, 6, 10, seed=2)
        models[name] = (model, rects, ch.rectangle_frame(model, rects, temperature, top_k=3))
    floors = {name: ch.rounding_floor(m, r, f, temperature) for name, (m, r, f) in models.items()}
    summaries = {
        name: ch.incompatibility_summary(f, floors[name]["floor"], resamples=100) for name, (_, _, f) in models.items()
    }
    return models, floors, summaries


def test_every_saved_table_carries_the_temperature():
    models, floors, summaries = potts_run(0.5)
    rho = ch.rank_correlation_ci(np.arange(10.0), np.arange(10.0) ** 2, resamples=50)
    rects = models[ch.ASYMMETRIC][1]
    tables = {
        "rectangles": ch.all_rectangles_frame(models),
        "floors": ch.floor_frame(floors, 0.5),
        "table1": ch.table_one_frame(summaries, models, 0.5),
        "correlations": ch.correlation_frame(0.5, influence=rho, distance=rho),
    }
    for name, table in tables.items():
        assert set(table.temperature) == {0.5}, name
        assert "model" in table or name == "correlations", name
    assert list(tables["table1"].role) == ["compatible (reference)", "incompatible (reference)"]
    assert list(tables["table1"].paper) == ["—", "—"] and list(tables["floors"].model) == list(models)
    assert set(tables["rectangles"].kind) == {ch.SYMMETRIC, ch.ASYMMETRIC}
    check = ch.temperature_check_frame(models[ch.ASYMMETRIC][0], rects, 4)
    assert list(check.temperature) == list(ch.CHECK_TEMPERATURES) and (check.rectangles == 4).all()
    assert (check.identity_gap < 1e-12).all() and (check.max_abs_delta > 0).all()


def test_views_read_without_index_or_nan_and_figures_are_returned():
    import matplotlib

    matplotlib.use("Agg")
    models, floors, summaries = potts_run(1.0)
    frame = models[ch.ASYMMETRIC][2]
    views = [
        ch.rectangles_view(frame.head()),
        ch.floors_view(ch.floor_frame(floors, 1.0)),
        ch.table_one_view(ch.table_one_frame(summaries, models, 1.0)),
        ch.temperature_view(ch.temperature_check_frame(models[ch.ASYMMETRIC][0], models[ch.ASYMMETRIC][1], 3)),
    ]
    for view in views:
        html = view.to_html()
        assert "nan" not in html.lower() and len(view.data.columns) <= 6
        assert 'class="row_heading' not in html  # no index column
    rho = ch.rank_correlation_ci(frame.influence, frame.abs_delta, resamples=50)
    for fig in (
        ch.ecdf_figure(models, floors[ch.ASYMMETRIC]["floor"]),
        ch.influence_figure(frame, rho, rho),
        ch.distance_figure(frame, rho),
    ):
        assert isinstance(fig, matplotlib.figure.Figure) and fig.axes[0].get_title()
        matplotlib.pyplot.close(fig)


def test_a_gguf_is_parsed_once_while_the_control_loads(tmp_path):
    """science._gguf_read_once: inside, one GGUFReader per file and one tensor-name map per architecture (the
    same objects on a second call, the file's content unchanged); outside, gguf's own functions again."""
    import gguf

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("x", np.arange(4, dtype=np.float32))
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
    original = gguf.GGUFReader, gguf.get_tensor_name_map
    with science._gguf_read_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(path) is first
        assert first.tensors[0].data.tolist() == [0.0, 1.0, 2.0, 3.0]
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == original
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)


class LastTokenConditionals:
    """s_i(a; x) = weight * 1[a = the state's last token], whatever the state's length: a cut that ends
    elsewhere than the whole state sees another last token."""

    vocab_size, max_sites, device = 4, 64, torch.device("cpu")
    allowed = torch.ones(4, dtype=torch.bool)

    def __init__(self, weight: float = 2.0):
        self.weight = weight

    def log_scores(self, tokens, positions):
        return self.weight * torch.nn.functional.one_hot(tokens[:, -1], 4).double()


def test_cut_versus_gene_is_the_total_variation_between_the_two_conditionals():
    genes = torch.tensor([[0, 1, 2, 1, 3, 3, 3], [0, 1, 2, 2, 0, 0, 2]])  # gene 1: cut and gene end alike (2)
    frame = ch.cut_versus_gene(LastTokenConditionals(2.0), genes, 4)
    assert list(frame.gene) == [0] * 4 + [1] * 4 and list(frame.site) == [0, 1, 2, 3] * 2
    assert (frame.context == 7).all() and (frame.free == 4).all()
    differ = (math.exp(2.0) - 1) / (math.exp(2.0) + 3)  # one-hot fields on two different colours
    assert np.allclose(frame.tv[frame.gene == 0], differ) and np.allclose(frame.tv[frame.gene == 1], 0.0)
    # the top prediction is the last token: 1 in gene 0's cut, 3 in its whole gene
    assert list(frame.top_cut[frame.gene == 0]) == [False, True, False, True] and not frame.top_gene[:4].any()
    with pytest.raises(ValueError, match="free = 8 exceeds the genes' 7 residues"):
        ch.cut_versus_gene(LastTokenConditionals(), genes, 8)
    import matplotlib

    matplotlib.use("Agg")
    named = frame.assign(gene=frame.gene.map({0: "IGHV-a", 1: "IGKV-b"}))
    assert ch.cut_versus_gene_text(named).startswith("Over 2 genes and 4 sites each, the two conditionals are 0.31")
    assert (
        "top prediction at 50% of the sites given the cut and at 25% given the whole gene of 7"
        in ch.cut_versus_gene_text(named)
    )
    figure = ch.cut_versus_gene_figure(named)
    assert figure.axes[0].get_ylabel() == "TV(cut, whole gene)" and len(figure.axes) == 2
    matplotlib.pyplot.close(figure)


def test_rectangles_lie_in_the_free_sites_of_a_longer_state():
    cond = ch.potts_references(12, seed=0)[ch.SYMMETRIC]
    tokens = torch.randint(0, cond.vocab_size, (3, 12), generator=torch.Generator().manual_seed(0))
    rects = ch.sample_rectangles(cond, tokens, 40, top_k=2, seed=1, sites=torch.arange(5))
    assert bool((rects.i < 5).all() and (rects.j < 5).all() and (rects.i != rects.j).all())
    everywhere = ch.sample_rectangles(cond, tokens, 40, top_k=2, seed=1)
    same = ch.sample_rectangles(cond, tokens, 40, top_k=2, seed=1, sites=torch.arange(12))
    assert torch.equal(everywhere.i, same.i) and torch.equal(everywhere.a_new, same.a_new)
    frame = ch.rectangle_frame(cond, rects, top_k=2, free=5)
    assert (frame.context == 12).all() and (frame.free == 5).all()
    with pytest.raises(ValueError, match="at least 2 sites, distinct"):
        ch.sample_rectangles(cond, tokens, 4, sites=[3, 3])
