"""Calibration of chapter 1's rules on ground truth: the chapter's own estimators (the functions its notebook
calls, at a small size) on chains whose answer is known by mathematics, through the judging module's rules.

incompatibility_detected: compatible conditionals must give "differs" (no rectangle above the floor: zero is the
answer), incompatible ones "reproduced". make calibrate's cases (tools/calibration/incompatibility.py, 50 seeds)
are Potts chains: symmetric against asymmetric, and an fp32-scored one whose largest true |delta| is just above
or just below its fp32 floor. Single draws here add an explicit three-body joint read through the masked-LM
branch (untilted: differs; with a one-sided tilt: reproduced), a random causal LM's joint (differs) and a
random-weight MLM (reproduced). influence_amplifies_delta (against the smallest effect of interest rho = 0.1):
Potts chains whose asymmetry J_ji - J_ij grows with the coupling (reproduced), falls as it grows (differs), or is
constant with the influence read on colours drawn apart from the rectangle's (calibrate.null_frame), so that |delta|
is independent of the influence by construction (rho = 0: never reproduced, differs once the interval is narrow
enough; the paper's own shared-summand measure is shown to be positive there by construction).
"""

import sys
from pathlib import Path

import torch

import book_tools as bt
import glauber_core as glauber
import verdicts as vd
from chapters import incompatibility as ch
from chapters.incompatibility import judging

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from calibration import incompatibility as calibrate  # noqa: E402 (known-answer chains shared with make calibrate)
from calibration.incompatibility import influence_chain  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Ground-truth chains
# ---------------------------------------------------------------------------------------------


class JointConditionals:
    """Conditionals (masked-LM branch: no `log_joint`) read off an explicit joint on {0..q-1}^n, log pi(x) = sum_i h_i(x_i) + sum_{i<j}
    J_ij[x_i, x_j] + sum_i K_i[x_i, x_{i+1}, x_{i+2}] (fields, arbitrary pair tables, three-body terms): the
    score s_i(a; x_-i) is log pi(x^{i->a}), so every delta telescopes to 0. With `tilt` > 0, a term
    tilt * T[i, a, x_{i+1}] is added to site i's score only, which no joint has (T random): incompatible."""

    def __init__(self, n=7, q=4, seed=0, tilt=0.0):
        g = torch.Generator().manual_seed(seed)
        self.n, self.q, self.tilt = n, q, tilt
        self.h = torch.randn(n, q, generator=g, dtype=torch.float64)
        self.pair = torch.triu(torch.ones(n, n, dtype=torch.float64), 1)[:, :, None, None] * torch.randn(
            n, n, q, q, generator=g, dtype=torch.float64
        )
        self.three = torch.randn(n, q, q, q, generator=g, dtype=torch.float64)
        self.extra = torch.randn(n, q, q, generator=g, dtype=torch.float64)
        self.vocab_size, self.allowed, self.device, self.max_sites = q, torch.ones(q, dtype=torch.bool), "cpu", n

    def joint(self, x):
        total = self.h.gather(1, x.T).T.sum(1)
        for i in range(self.n):
            for j in range(i + 1, self.n):
                total = total + self.pair[i, j][x[:, i], x[:, j]]
            if i + 2 < self.n:
                total = total + self.three[i][x[:, i], x[:, i + 1], x[:, i + 2]]
        return total

    def log_scores(self, tokens, positions):
        rows = torch.arange(len(tokens))
        out = []
        for a in range(self.q):
            states = tokens.clone()
            states[rows, positions] = a
            out.append(self.joint(states))
        scores = torch.stack(out, 1)
        if self.tilt:
            after = tokens[rows, (positions + 1) % self.n]
            scores = scores + self.tilt * self.extra[positions, :, after]  # [B, q]
        return scores


def detected(cond, rectangles, top_k):
    """The chapter's pipeline for incompatibility_detected (calibrate.detected) with 200 bootstrap draws."""
    return calibrate.detected(cond, rectangles, top_k, resamples=200)


def influence(cond, count=300, seed=1, frame=calibrate.influence_frame):
    """The chapter's pipeline for influence_amplifies_delta on random rectangles of a Potts chain (`frame`:
    calibrate.influence_frame, or calibrate.null_frame for the null case)."""
    frame = frame(cond, count, seed)
    estimate = ch.rank_correlation_ci(frame.influence, frame.abs_delta, resamples=1000)
    paper = ch.rank_correlation_ci(frame.paper_influence, frame.abs_delta, resamples=1000)
    return judging._influence_verdict(estimate), estimate, paper


# ---------------------------------------------------------------------------------------------
# incompatibility_detected
# ---------------------------------------------------------------------------------------------


def test_detected_differs_on_symmetric_potts_and_reproduces_on_asymmetric():
    references = ch.potts_references(12, q=3, seed=3)
    rectangles = ch.random_rectangles(references["Potts, symmetric J"], 12, 300, seed=2)
    (verdict, reason), summary, floor = detected(references["Potts, symmetric J"], rectangles, 3)
    assert verdict == vd.DIFFERS and summary["above_floor"] == 0, reason
    assert summary["max_abs_delta"] <= floor["floor"] < 1e-10  # fp64 rounding, not a floor that hides delta
    (verdict, reason), summary, _ = detected(references["Potts, asymmetric J"], rectangles, 3)
    assert verdict == vd.REPRODUCED and summary["above_floor"] > 0, reason


def test_detected_on_an_explicit_joint_and_its_perturbation():
    joint = JointConditionals(seed=1)
    rectangles = ch.random_rectangles(joint, joint.n, 150, seed=4)
    (verdict, reason), summary, floor = detected(joint, rectangles, joint.q)
    assert verdict == vd.DIFFERS, reason
    tilted = JointConditionals(seed=1, tilt=0.05)
    (verdict, reason), summary, _ = detected(tilted, rectangles, joint.q)
    assert verdict == vd.REPRODUCED, reason


def random_states(cond, count, n, seed):
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    return allowed[torch.randint(len(allowed), (count, n), generator=torch.Generator().manual_seed(seed))]


def test_detected_differs_on_a_random_causal_lm_and_reproduces_on_a_random_mlm(tiny_gpt2, tiny_bert):
    rectangles = ch.sample_rectangles(tiny_gpt2, random_states(tiny_gpt2, 12, 10, 0), 24, top_k=50, seed=1)
    (verdict, reason), summary, floor = detected(tiny_gpt2, rectangles, 50)
    assert verdict == vd.DIFFERS and summary["max_abs_delta"] <= floor["floor"], reason
    rectangles = ch.sample_rectangles(tiny_bert, random_states(tiny_bert, 12, 10, 0), 24, top_k=50, seed=1)
    (verdict, reason), summary, floor = detected(tiny_bert, rectangles, 50)
    assert verdict == vd.REPRODUCED, reason
    # the floor covers the rounding of the fp32 forwards, measured against an fp64 recomputation
    assert floor["precision_gap"] > 0 and floor["floor"] >= ch.SAFETY * floor["precision_gap"]


def test_detected_verdict_is_the_same_at_every_temperature():
    references = ch.potts_references(10, q=3, seed=5)
    for name, expected in (("Potts, symmetric J", vd.DIFFERS), ("Potts, asymmetric J", vd.REPRODUCED)):
        cond = references[name]
        rectangles = ch.random_rectangles(cond, 10, 100, seed=6)
        for temperature in (0.25, 1.0, 4.0):
            frame = ch.rectangle_frame(cond, rectangles, temperature, top_k=3)
            floor = ch.rounding_floor(cond, rectangles, frame, temperature)
            summary = ch.incompatibility_summary(frame, floor["floor"], resamples=100)
            assert judging._detected_verdict(summary)[0] == expected, (name, temperature)


def test_floor_chain_puts_the_largest_true_delta_where_it_says_and_the_rule_decides_at_the_floor():
    for factor, expected in ((1.1, vd.REPRODUCED), (0.9, vd.DIFFERS)):
        cond, rectangles, _ = calibrate.floor_chain(0, factor)
        (verdict, reason), summary, floor = calibrate.detected(cond, rectangles, 3, 200)
        exact = glauber.PottsConditionals(cond.coupling, cond.field, q=3)  # the same chain scored in fp64
        true = glauber.rectangle_delta(exact, *rectangles.args()).abs()
        assert abs(float(true.max()) / floor["floor"] - factor) < 0.01  # the fp32 floor of the tilted chain itself
        assert floor["unit_rounding"] == torch.finfo(torch.float32).eps
        measured = torch.tensor(ch.rectangle_frame(cond, rectangles, top_k=3).abs_delta.to_numpy())
        assert float((measured - true).abs().max()) < 0.01 * floor["floor"]  # fp32 rounding: far below the floor
        assert verdict == expected, reason


# Kinds of known-answer chain a calibration text may name; each one named must be among the claim's cases.
CHAIN_KINDS = ("Potts", "fp32", "joint", "three-body", "BERT", "MLM", "causal", "Curie-Weiss", "independent sites")


def test_the_calibration_texts_name_only_chains_among_the_cases():
    claims = bt.read_paper_claims().set_index("claim")
    for claim in {case.claim for case in calibrate.CASES}:
        names = " ".join(case.name for case in calibrate.CASES if case.claim == claim).lower()
        text = claims.loc[claim, "calibration"].lower()
        missing = [kind for kind in CHAIN_KINDS if kind.lower() in text and kind.lower() not in names]
        assert not missing, (claim, missing)


# ---------------------------------------------------------------------------------------------
# influence_amplifies_delta
# ---------------------------------------------------------------------------------------------


def test_influence_reproduces_when_asymmetry_grows_with_the_coupling():
    (verdict, reason), estimate, _ = influence(influence_chain("scales"))
    assert verdict == vd.REPRODUCED, reason


def test_influence_differs_when_asymmetry_falls_as_the_coupling_grows():
    (verdict, reason), estimate, _ = influence(influence_chain("falls"))
    assert verdict == vd.DIFFERS, reason


def test_influence_is_not_reproduced_when_independent_by_construction():
    cond = influence_chain("constant")
    (verdict, reason), estimate, paper = influence(cond, frame=calibrate.null_frame)
    assert verdict in (vd.INCONCLUSIVE, vd.DIFFERS), reason
    (verdict, reason), estimate, _ = influence(cond, count=3000, frame=calibrate.null_frame)
    assert verdict == vd.DIFFERS and abs(estimate[0]) < 0.05, reason  # rho = 0: below the smallest effect 0.1
    # the paper's Fig. 6 measure (parts of delta's own summands) is positive here by construction
    assert paper[1] > 0


def test_the_null_chain_gives_exact_ties():
    """The null case's rho = 0 rests on |delta| = |J_ji - J_ij| |colour matches| with one |J_ji - J_ij| for every
    pair, to the bit: rounding would break the ties by the state, on which the influence depends too."""
    cond = influence_chain("constant", seed=3)
    assert not cond.field.any()
    gaps = (cond.coupling - cond.coupling.T).abs()[~torch.eye(cond.n_sites, dtype=torch.bool)]
    assert torch.equal(gaps, torch.full_like(gaps, float(gaps[0])))
    frame = calibrate.null_frame(cond, 400, 3)
    assert set(frame.abs_delta) == {0.0, float(gaps[0]), 2 * float(gaps[0])}
