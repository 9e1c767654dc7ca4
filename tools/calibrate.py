"""Operating characteristics of the book's verdict rules at the book's own size (issue "Verdicts a referee signs").

    .venv/bin/python tools/calibrate.py [--seeds 50] [--claims nlogn_fit ...] [--out results/calibration]

For each case (a general claim, a chain whose answer is known by mathematics, and whether the claim holds or
fails on it) the chapter's own estimator and rule run at the quick profile's sizes, once per seed, and the
verdict is recorded. `runs.csv` keeps one row per (claim, case, seed) with the code version it was made at;
a rerun skips the rows already made at the current code version (resumable), and `operating_characteristics.csv`
summarises each case: the shares reproduced / differs / inconclusive, the wrong-decision share (differs where
the claim holds, reproduced where it fails) with its Wilson interval, and the power (decided correctly).

Only some claims have cases yet (see CASES); every other general claim is still calibrated on one draw in
tests/test_calibration_*.py.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import book_tools as bt  # noqa: E402
import glauber_core as glauber  # noqa: E402
import verdicts as vd  # noqa: E402
from chapters import bounds as ch2  # noqa: E402
from chapters import incompatibility as ch1  # noqa: E402
from chapters import phase as ch3  # noqa: E402
from chapters.bounds import judging as judging2  # noqa: E402
from chapters.incompatibility import judging as judging1  # noqa: E402
from chapters.phase import judging as judging3  # noqa: E402

OUT = bt.REPO_ROOT / "results" / "calibration"
RUN_COLUMNS = ("claim", "case", "truth", "seed", "verdict", "code")
SUMMARY_COLUMNS = (
    "claim",
    "case",
    "truth",
    "seeds",
    "reproduced",
    "differs",
    "inconclusive",
    "wrong",
    "wrong_share",
    "wrong_low",
    "wrong_high",
    "power",
    "code",
)


@dataclass(frozen=True)
class Case:
    """One known-answer chain for one claim: `run(seed)` returns the rule's verdict on it at the book's size."""

    claim: str
    name: str
    truth: str  # "holds" or "fails"
    chapter: str  # the notebook whose code version the case depends on
    run: Callable[[int], str]


# ---- nlogn_fit (chapter 3, Fig. 3b) at the quick profile's sizes -------------------------------------------------


def leaving_sites(n: int, field: float = 40.0) -> glauber.PottsConditionals:
    """Independent sites (J = 0) whose conditional puts all but e^-field of its mass on colour 1: from all-0
    starts the share of sites changed is the coupon collector's (section 6.1's known answer)."""
    return glauber.PottsConditionals(torch.zeros(n, n), torch.tensor([[0.0, field]] * n), q=2)


def _hitting_verdict(seed: int, radius: float) -> str:
    """Chapter 3's hitting-time protocol on independent sites that always leave their colour: the quick
    profile's lengths, chains per length, recording interval, cutoff and bootstrap, then its nlogn rule.
    Radius 1 (every site changed) is the coupon collector, n H_n: n log n holds; radius 1/2 takes about
    n ln 2 steps, linear in n: it fails."""
    cfg = ch3.settings("quick")
    lengths, times = [], []
    for n in cfg.drift_lengths:
        x0 = torch.zeros(cfg.hit_chains, n, dtype=torch.long)
        run = glauber.glauber(
            leaving_sites(n), x0, cfg.hit_steps, seed=seed * 1000 + n, record_every=cfg.record_every, progress=False
        )
        share = (run.tokens != run.tokens[:, :1]).double().mean(-1)
        hit = ch3.hitting_times(share, run.steps, radius)
        lengths += [n] * len(hit)
        times += hit.tolist()
    scaling = ch3.scaling_fits(np.array(lengths), np.array(times), n_boot=cfg.n_boot, seed=seed)
    events = int((np.array(times) >= 0).sum())
    return judging3._nlogn_row(scaling, events, cfg.hit_tau, radius)["verdict"]


# ---- incompatibility_detected (chapter 1, Table 1) at the quick profile's sizes ---------------------------------


def detected(cond, rectangles, top_k: int, resamples: int):
    """Chapter 1's pipeline for incompatibility_detected: the rectangles' frame, the rounding floor, the summary
    and the verdict; returns ((verdict, reason), summary, floor)."""
    frame = ch1.rectangle_frame(cond, rectangles, top_k=top_k)
    floor = ch1.rounding_floor(cond, rectangles, frame)
    summary = ch1.incompatibility_summary(frame, floor["floor"], resamples=resamples)
    return judging1._detected_verdict(summary), summary, floor


def _detected_verdict(seed: int, name: str) -> str:
    """Chapter 1's rectangle test on `cfg.rectangles` random rectangles of a Potts model on the quick profile's n
    sites: the symmetric coupling is compatible (fails), the asymmetric one is not (holds)."""
    cfg = ch1.settings("quick")
    cond = ch1.potts_references(cfg.seq_len, q=3, seed=seed)[name]
    rectangles = ch1.random_rectangles(cond, cfg.seq_len, cfg.rectangles, seed=seed)
    return detected(cond, rectangles, 3, cfg.resamples)[0][0]


def influence_chain(kind, n=8, q=4, seed=0):
    """Potts J = S + A with S symmetric (log-uniform magnitudes 0.05..2.5, random signs) and A antisymmetric
    (random signs sigma): asymmetry |J_ji - J_ij| = 2|A_ij| is 0.6 |S_ij| ("scales": grows with the
    coupling), 0.6 ("constant": |delta| independent of the pair, hence of any influence), or
    0.6 (2.6 - |S_ij|) / 2.6 ("falls": shrinks as the coupling grows)."""
    g = torch.Generator().manual_seed(seed)
    size = torch.exp(torch.empty(n, n, dtype=torch.float64).uniform_(np.log(0.05), np.log(2.5), generator=g))
    sign = torch.where(torch.rand(n, n, generator=g) < 0.5, -1.0, 1.0).double()
    symmetric = torch.triu(size * sign, 1)
    symmetric = symmetric + symmetric.T
    sigma = torch.triu(torch.where(torch.rand(n, n, generator=g) < 0.5, -1.0, 1.0).double(), 1)
    sigma = sigma - sigma.T
    asymmetry = {
        "scales": 0.3 * symmetric.abs(),
        "constant": 0.3 * torch.ones(n, n, dtype=torch.float64),
        "falls": 0.3 * (2.6 - symmetric.abs()) / 2.6,
    }[kind]
    field = 0.5 * torch.randn(n, q, generator=g, dtype=torch.float64)
    return glauber.PottsConditionals(symmetric + asymmetry * sigma, field, q=q)


def influence_frame(cond, count: int, seed: int):
    """Chapter 1's rectangle frame (with each rectangle's influence) on `count` random rectangles of a Potts
    chain, every colour a candidate and three alternatives a site."""
    rectangles = ch1.random_rectangles(cond, cond.n_sites, count, seed=seed)
    return ch1.rectangle_frame(cond, rectangles, top_k=cond.vocab_size, alternatives=3)


def _influence_verdict(seed: int, kind: str) -> str:
    """Chapter 1's influence protocol (the quick profile's rectangle count and bootstrap) on a Potts chain whose
    asymmetry grows with the coupling (the claim holds), falls as it grows, or is constant (it fails: rho = 0)."""
    cfg = ch1.settings("quick")
    frame = influence_frame(influence_chain(kind, seed=seed), cfg.rectangles, seed)
    estimate = ch1.rank_correlation_ci(frame.influence, frame.abs_delta, resamples=cfg.resamples // 5, seed=seed)
    return judging1._influence_verdict(estimate)[0]


# ---- mu_vs_pseudolikelihood_tv (chapter 2, section 7) on the fp32 path the book judges ----------------------------


class Float32Scores:
    """A Potts model whose scores come out in fp32, as a masked LM's logits do: the rounding the book's windows
    carry, which the rule's floor must absorb on a compatible chain."""

    def __init__(self, potts: glauber.PottsConditionals):
        self.potts, self.vocab_size, self.allowed = potts, potts.vocab_size, potts.allowed
        self.max_sites, self.device, self.protein = potts.max_sites, potts.device, False

    def log_scores(self, tokens, positions):
        return self.potts.log_scores(tokens, positions).float()


def _pseudo_likelihood_verdict(seed: int, symmetric: bool) -> str:
    """Chapter 2's windows at the quick profile's size (`windows` windows of 3 free sites with K = `window_tokens`
    values each, one random Potts model a window, scores in fp32) through its rule: a symmetric coupling is
    compatible (the claim fails: every PL gap is 0 up to rounding), an asymmetric one is not (it holds)."""
    cfg = ch2.settings("quick")
    gaps = []
    for window in range(cfg.windows):
        generator = torch.Generator().manual_seed(seed * 1000 + window)
        raw = 1.5 * torch.randn(3, 3, generator=generator, dtype=torch.float64)
        field = 0.5 * torch.randn(3, cfg.window_tokens, generator=generator, dtype=torch.float64)
        potts = glauber.PottsConditionals((raw + raw.T) / 2 if symmetric else raw, field, cfg.window_tokens)
        gaps.append(ch2.stationary_vs_pseudo_likelihood(Float32Scores(potts), 3, 1.0)["pl_gap"])
    return judging2._pseudo_likelihood_row(gaps)["verdict"]


CASES = tuple(
    Case(claim, name, truth, chapter, run)
    for claim, name, truth, chapter, run in (
        ("nlogn_fit", "coupon collector: every site changed (n H_n)", "holds", "03_phase_diagram",
         lambda seed: _hitting_verdict(seed, 1.0)),
        ("nlogn_fit", "half the sites changed (about n ln 2)", "fails", "03_phase_diagram",
         lambda seed: _hitting_verdict(seed, 0.5)),
        ("incompatibility_detected", "asymmetric Potts, 20 sites, 3 colours", "holds", "01_incompatibility",
         lambda seed: _detected_verdict(seed, "Potts, asymmetric J")),
        ("incompatibility_detected", "symmetric Potts, 20 sites, 3 colours", "fails", "01_incompatibility",
         lambda seed: _detected_verdict(seed, "Potts, symmetric J")),
        ("influence_amplifies_delta", "Potts, asymmetry grows with the coupling", "holds", "01_incompatibility",
         lambda seed: _influence_verdict(seed, "scales")),
        ("influence_amplifies_delta", "Potts, asymmetry falls as the coupling grows", "fails", "01_incompatibility",
         lambda seed: _influence_verdict(seed, "falls")),
        ("influence_amplifies_delta", "Potts, constant asymmetry (rho = 0)", "fails", "01_incompatibility",
         lambda seed: _influence_verdict(seed, "constant")),
        ("mu_vs_pseudolikelihood_tv", "asymmetric Potts windows, fp32 scores", "holds", "02_mixing_bounds",
         lambda seed: _pseudo_likelihood_verdict(seed, symmetric=False)),
        ("mu_vs_pseudolikelihood_tv", "symmetric Potts windows, fp32 scores", "fails", "02_mixing_bounds",
         lambda seed: _pseudo_likelihood_verdict(seed, symmetric=True)),
    )
)  # fmt: skip


def case_version(case: Case) -> str:
    """The chapter's code version (book_tools.code_version) and this file's text: a change to either remakes the
    case's rows."""
    digest = hashlib.sha256(bt.code_version(case.chapter).encode() + Path(__file__).read_bytes())
    return digest.hexdigest()[:12]


def read_runs(path: Path) -> pd.DataFrame:
    """runs.csv, or an empty table with its columns."""
    if not path.exists():
        return pd.DataFrame(columns=list(RUN_COLUMNS))
    return pd.read_csv(path, dtype={"code": str, "verdict": str})


def run_cases(cases, seeds: int, out: Path, version=None, progress: bool = True) -> pd.DataFrame:
    """Run every case over seeds 0..seeds-1, skipping the (claim, case, seed) rows already in out/runs.csv at
    the case's current version; each new row is appended as soon as it is made, so an interrupted run resumes
    with nothing lost. Rows made at another version (`version(case)`, case_version by default) are dropped.
    Returns the runs of these cases."""
    version = version or case_version
    out.mkdir(parents=True, exist_ok=True)
    path = out / "runs.csv"
    runs = read_runs(path)
    versions = {(c.claim, c.name): version(c) for c in cases}
    current = runs.apply(lambda r: versions.get((r.claim, r.case), r.code) == r.code, axis=1) if len(runs) else []
    runs = runs[current] if len(runs) else runs
    runs.to_csv(path, index=False)
    done = set(zip(runs.claim, runs.case, runs.seed.astype(int))) if len(runs) else set()
    todo = [(c, s) for c in cases for s in range(seeds) if (c.claim, c.name, s) not in done]
    for case, seed in tqdm(todo, desc="calibration", disable=not progress):
        verdict = case.run(seed)
        row = pd.DataFrame([dict(claim=case.claim, case=case.name, truth=case.truth, seed=seed, verdict=verdict,
                                 code=versions[(case.claim, case.name)])])  # fmt: skip
        row.to_csv(path, mode="a", header=not path.exists() or path.stat().st_size == 0, index=False)
    runs = read_runs(path)
    names = {(c.claim, c.name) for c in cases}
    return runs[[(a, b) in names for a, b in zip(runs.claim, runs.case)]]


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per case: counts of each verdict, the wrong-decision share (differs where the claim holds,
    reproduced where it fails) with its 95% Wilson interval, and the power (the share decided correctly)."""
    rows = []
    for (claim, case, truth), part in runs.groupby(["claim", "case", "truth"], sort=False):
        counts = part.verdict.value_counts()
        wrong_verdict = vd.DIFFERS if truth == "holds" else vd.REPRODUCED
        right_verdict = vd.REPRODUCED if truth == "holds" else vd.DIFFERS
        seeds, wrong = len(part), int(counts.get(wrong_verdict, 0))
        low, high = (float(v[0]) for v in vd.share_intervals([wrong], [seeds]))
        rows.append(
            dict(
                claim=claim,
                case=case,
                truth=truth,
                seeds=seeds,
                reproduced=int(counts.get(vd.REPRODUCED, 0)),
                differs=int(counts.get(vd.DIFFERS, 0)),
                inconclusive=int(counts.get(vd.INCONCLUSIVE, 0)),
                wrong=wrong,
                wrong_share=wrong / seeds,
                wrong_low=low,
                wrong_high=high,
                power=int(counts.get(right_verdict, 0)) / seeds,
                code=",".join(sorted(set(part.code))),
            )
        )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="independent seeds per case (default 50)")
    parser.add_argument("--claims", nargs="*", help="only these claims (default: every claim with cases)")
    parser.add_argument("--out", type=Path, default=OUT, help="folder of runs.csv and operating_characteristics.csv")
    args = parser.parse_args(argv)
    known = sorted({c.claim for c in CASES})
    unknown = sorted(set(args.claims or []) - set(known))
    if unknown or args.seeds < 1:
        parser.error(
            f"--claims must be among {known}, --seeds at least 1" + (f"; unknown: {unknown}" if unknown else "")
        )
    cases = [c for c in CASES if not args.claims or c.claim in args.claims]
    run_cases(cases, args.seeds, args.out)
    summary = summarise(run_cases(CASES, 0, args.out, progress=False))  # every case's current rows, run or not
    summary.to_csv(args.out / "operating_characteristics.csv", index=False)
    with pd.option_context("display.width", 160, "display.max_colwidth", 48):
        print(summary.drop(columns=["code"]).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0 if (summary.wrong_share <= 0.10).all() or math.isnan(summary.wrong_share.max()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
