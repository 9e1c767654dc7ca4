"""Chapter 1: the rectangle test at scale (section 4, Table 1, Figs. 5-6).

Imports the core and the book's tools (intervals, verdict rules, claims rows); never another chapter
module. Every delta goes through the core's `rectangle_delta`, whatever the model (masked LM, causal
LM, Potts reference), so the control and the references test the code path the masked LM uses.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from glauber_core import (
    CausalLMJoint,
    Conditionals,
    PottsConditionals,
    check_count,
    check_temperature,
    check_tokens,
    rectangle_delta,
    rectangle_input,
    rectangle_states,
)
import book_tools as bt


def rectangle_scores(cond: Conditionals, x, i, j, a_new, b_new):
    """One batched forward for the four edges: scores [4, B, V] (fp64, -inf off `allowed`) at
    (x, i), (y, j), (x, j), (w, i), and the edges' new and old tokens [4, B]."""
    x, y, w, _ = rectangle_states(x, i, j, a_new, b_new)
    rows = torch.arange(len(x), device=x.device)
    a_old, b_old = x[rows, i], x[rows, j]
    scores = cond.log_scores(torch.cat([x, y, x, w]), torch.cat([i, j, j, i])).double()
    scores = scores + torch.where(cond.allowed.to(scores.device), 0.0, float("-inf")).double()
    new = torch.stack([a_new, b_new, b_new, a_new]).to(scores.device)
    old = torch.stack([a_old, b_old, b_old, a_old]).to(scores.device)
    return scores.view(4, len(x), -1), new, old


def rectangle_delta_normalized(cond: Conditionals, tokens, i, j, a_new, b_new, temperature: float = 1.0):
    """delta of section 4 with every edge taken literally, log p_tau(new | .) - log p_tau(old | .), each
    p_tau the normalised softmax(s / tau) over allowed tokens (fp64). Equals rectangle_delta: the
    normaliser of an edge cancels inside it, so delta(tau) = delta(1) / tau."""
    temperature = check_temperature(temperature)
    x, i, j, a_new, b_new = rectangle_input(cond, tokens, i, j, a_new, b_new)
    if isinstance(cond, CausalLMJoint):
        raise ValueError("rectangle_delta_normalized needs masked-LM conditionals; use rectangle_delta on a causal LM")
    scores, new, old = rectangle_scores(cond, x, i, j, a_new, b_new)
    log_p = torch.log_softmax(scores / temperature, -1)
    edge = (log_p.gather(2, new.unsqueeze(2)) - log_p.gather(2, old.unsqueeze(2))).squeeze(2)
    return ((edge[0] + edge[1]) - (edge[2] + edge[3])).cpu()


def token_influence(cond: Conditionals, tokens, i, j, a_new, b_new) -> torch.Tensor:
    """max(Influence(i, j), Influence(j, i)) per rectangle (the paper's Fig. 6), at tau = 1, fp64:
    Influence(i, j) = |log p(x_i | x_-i) - log p(x_i | w_-i)| with w = x^{j->B'}, and
    Influence(j, i) = |log p(x_j | x_-j) - log p(x_j | y_-j)| with y = x^{i->A'}."""
    return rectangle_influences(cond, tokens, i, j, a_new, b_new).amax(1)


def rectangle_influences(cond: Conditionals, tokens, i, j, a_new, b_new) -> torch.Tensor:
    """[B, 2] of Influence(i, j) and Influence(j, i) (see token_influence), from one batched forward."""
    x, i, j, a_new, b_new = rectangle_input(cond, tokens, i, j, a_new, b_new)
    if isinstance(cond, CausalLMJoint):
        raise ValueError("token influence needs masked-LM conditionals p(x_i | x_-i); a causal LM has none")
    scores, _, old = rectangle_scores(cond, x, i, j, a_new, b_new)
    log_p_old = torch.log_softmax(scores, -1).gather(2, old.unsqueeze(2)).squeeze(2)  # [4, B]
    return torch.stack([(log_p_old[0] - log_p_old[3]).abs(), (log_p_old[2] - log_p_old[1]).abs()], 1).cpu()


@dataclass
class Rectangles:
    """Rectangles of section 4: base states x [R, n], sites i != j [R], replacements A', B' [R], and
    the index of the seed passage each x came from [R]."""

    tokens: torch.Tensor
    i: torch.Tensor
    j: torch.Tensor
    a_new: torch.Tensor
    b_new: torch.Tensor
    passage: torch.Tensor

    def __len__(self) -> int:
        return len(self.i)

    def take(self, rows) -> "Rectangles":
        """The rectangles at `rows` (indices or a boolean mask)."""
        rows = torch.as_tensor(rows)
        return Rectangles(*(getattr(self, f)[rows] for f in ("tokens", "i", "j", "a_new", "b_new", "passage")))

    def args(self) -> tuple[torch.Tensor, ...]:
        """(tokens, i, j, a_new, b_new), the arguments of rectangle_delta and token_influence."""
        return self.tokens, self.i, self.j, self.a_new, self.b_new


def proposal_scores(cond, tokens, sites) -> torch.Tensor:
    """Scores [B, M, V] the sampler draws replacements from at sites [B, M] of tokens [B, n]: the MLM's
    s_i(. ; x_-i) (site masked, one forward per site), or for a causal LM its next-token logits given
    x_<i (one forward per state; its full conditional would need |V| forwards per site)."""
    if isinstance(cond, CausalLMJoint):
        return cond.next_token_scores(tokens, sites)
    batch, m = sites.shape
    scores = cond.log_scores(tokens.repeat_interleave(m, 0), sites.reshape(-1).to(tokens.device))
    return scores.cpu().view(batch, m, -1)


def sample_rectangles(cond, tokens, count: int, top_k: int = 50, seed: int = 0,
                      batch_size: int = 256) -> Rectangles:
    """`count` random rectangles on the seed passages tokens [P, n] (section 4): rectangle r uses passage
    r mod P, sites i != j uniform, A' uniform over the top_k allowed tokens at i by proposal_scores at
    the current state (never the current token), B' likewise at j. One forward per batch of sites."""
    count = check_count(count, "count", 1)
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
    passages = check_tokens(cond, tokens, "tokens").cpu()
    n = passages.shape[1]
    if n < 2:
        raise ValueError(f"a rectangle needs at least 2 sites, got n = {n}")
    generator = torch.Generator().manual_seed(int(seed))
    passage = torch.arange(count) % len(passages)
    i = torch.randint(n, (count,), generator=generator)
    j = (i + torch.randint(1, n, (count,), generator=generator)) % n
    x = passages[passage]
    sites = torch.stack([i, j], 1)
    current = x.gather(1, sites)
    u = torch.rand(count, 2, generator=generator, dtype=torch.float64)
    chosen = []
    device = getattr(cond, "device", cond.allowed.device)
    for rows in torch.arange(count).split(max(1, batch_size // 2)):
        scores = proposal_scores(cond, x[rows].to(device), sites[rows]).double()  # [b, 2, V]
        scores[:, :, ~cond.allowed.cpu()] = float("-inf")
        scores.scatter_(2, current[rows].unsqueeze(2), float("-inf"))
        top = scores.topk(min(top_k, scores.shape[2]), dim=2)
        usable = torch.isfinite(top.values).sum(2)
        if (usable == 0).any():
            raise ValueError("some site has no allowed replacement other than its current token")
        pick = (u[rows] * usable).long().clamp_max(usable - 1)
        chosen.append(top.indices.gather(2, pick.unsqueeze(2)).squeeze(2))
    a_new, b_new = torch.cat(chosen).unbind(1)
    return Rectangles(x, i, j, a_new, b_new, passage)


def rectangle_frame(cond, rectangles: Rectangles, batch_size: int = 64) -> pd.DataFrame:
    """One row per rectangle: passage, i, j, |i - j|, the tokens A, A', B, B', delta and |delta| (from the
    core's `rectangle_delta`, the one code path for every model), and for masked LMs the influences
    (token_influence, NaN for a causal LM, which has no full conditionals)."""
    columns = {"delta": [], "influence_ij": [], "influence_ji": []}
    causal = isinstance(cond, CausalLMJoint)
    for rows in torch.arange(len(rectangles)).split(batch_size):
        args = rectangles.take(rows).args()
        columns["delta"].append(rectangle_delta(cond, *args))
        if causal:
            influences = torch.full((len(rows), 2), float("nan"), dtype=torch.float64)
        else:
            influences = rectangle_influences(cond, *args)
        columns["influence_ij"].append(influences[:, 0])
        columns["influence_ji"].append(influences[:, 1])
    values = {k: torch.cat(v).numpy() for k, v in columns.items()}
    rows = torch.arange(len(rectangles))
    tokenizer = getattr(cond, "tokenizer", None)
    name = tokenizer.convert_ids_to_tokens if tokenizer is not None else (lambda ids: [str(t) for t in ids])
    frame = pd.DataFrame({
        "rectangle": rows.numpy(), "passage": rectangles.passage.numpy(), "i": rectangles.i.numpy(),
        "j": rectangles.j.numpy(), "distance": (rectangles.i - rectangles.j).abs().numpy(),
        "A": name(rectangles.tokens[rows, rectangles.i].tolist()), "A_new": name(rectangles.a_new.tolist()),
        "B": name(rectangles.tokens[rows, rectangles.j].tolist()), "B_new": name(rectangles.b_new.tolist()),
        "delta": values["delta"], "abs_delta": np.abs(values["delta"]),
        "influence_ij": values["influence_ij"], "influence_ji": values["influence_ji"]})
    return frame.assign(influence=np.fmax(frame.influence_ij, frame.influence_ji))


def rectangle_texts(cond, rectangles: Rectangles, rows) -> list[dict]:
    """For each of `rows`: the texts of the four states x, y, w, z and the two swaps, for display."""
    picked = rectangles.take(torch.tensor(np.array(rows, dtype=np.int64)))
    corners = rectangle_states(*picked.args())
    name = cond.tokenizer.convert_ids_to_tokens
    out = []
    for k in range(len(picked)):
        i, j = int(picked.i[k]), int(picked.j[k])
        swaps = (f"i={i}: {name(int(picked.tokens[k, i]))} -> {name(int(picked.a_new[k]))}; "
                 f"j={j}: {name(int(picked.tokens[k, j]))} -> {name(int(picked.b_new[k]))}")
        out.append({"swaps": swaps, **{s: cond.decode(c[k]) for s, c in zip("xywz", corners)}})
    return out


def sign_test_above(values, floor: float) -> tuple[int, int, float]:
    """Exact one-sided sign test of H0: median |value| <= floor against > floor.

    Returns (k, N, p): k of N values have |value| > floor, p = P(Binomial(N, 1/2) >= k). Used on delta,
    whose sign is arbitrary (swapping the two paths flips it), with the floor set by rounding.
    """
    from scipy.stats import binom

    values = np.abs(np.asarray(values, dtype=float))
    if values.ndim != 1 or len(values) < 1 or not np.isfinite(values).all():
        raise ValueError("values must be a non-empty 1-d array of finite numbers")
    if not (math.isfinite(floor) and floor >= 0):
        raise ValueError(f"floor must be a finite number >= 0, got {floor!r}")
    k = int((values > floor).sum())
    return k, len(values), float(binom.sf(k - 1, len(values), 0.5))


def incompatibility_summary(frame: pd.DataFrame, floor: float, resamples: int = 10_000,
                            seed: int = 0) -> dict:
    """One row of Table 1 from a rectangle_frame: N, how many deltas are finite, mean and median |delta|
    with a 95% bootstrap interval for the mean, max |delta| (NaN if any delta is not finite), how many
    rectangles lie above `floor` with the Wilson interval of that share, and the sign test's p."""
    abs_delta = frame.abs_delta.to_numpy(dtype=float)
    finite = abs_delta[np.isfinite(abs_delta)]
    row = {"rectangles": len(abs_delta), "finite": len(finite), "mean_abs_delta": math.nan,
           "ci_low": math.nan, "ci_high": math.nan, "median_abs_delta": math.nan,
           "max_abs_delta": float(np.max(abs_delta)) if len(abs_delta) else math.nan,
           "above_floor": 0, "share_above": math.nan, "share_low": math.nan, "share_high": math.nan,
           "sign_test_p": math.nan}
    if len(finite) == 0:
        return row
    k, total, p = sign_test_above(finite, floor)
    low, high = bt.share_intervals([k], [total])
    row.update(mean_abs_delta=float(finite.mean()), median_abs_delta=float(np.median(finite)),
               above_floor=k, share_above=k / total, share_low=float(low[0]), share_high=float(high[0]),
               sign_test_p=p)
    if len(finite) >= 2:
        row["ci_low"], row["ci_high"] = bt.bootstrap_ci(finite, resamples=resamples, seed=seed)
    return row


# ---------------------------------------------------------------------------------------------
# Reference models for the control: they go through the same rectangle_delta as the masked LM
# ---------------------------------------------------------------------------------------------

def potts_references(n: int, q: int = 3, seed: int = 0) -> dict[str, PottsConditionals]:
    """Two Potts models on n sites with q colours and the same random field: symmetric coupling
    (J + J^T) / 2, compatible with its Gibbs joint (delta = 0 up to fp64 rounding), and the
    asymmetric J itself, incompatible (delta = (J_ji - J_ij) x colour matches, closed form in the tests)."""
    n, q = check_count(n, "n", 2), check_count(q, "q", 2)
    generator = torch.Generator().manual_seed(int(seed))
    coupling = torch.randn(n, n, generator=generator, dtype=torch.float64)
    field = torch.randn(n, q, generator=generator, dtype=torch.float64)
    return {"Potts, symmetric J": PottsConditionals((coupling + coupling.T) / 2, field, q=q),
            "Potts, asymmetric J": PottsConditionals(coupling, field, q=q)}


def random_rectangles(cond, n: int, count: int, seed: int = 0) -> Rectangles:
    """`count` rectangles on uniform random states of n allowed tokens (one state per rectangle), with
    A' and B' uniform over the other allowed tokens: the sampler of section 4 with top-k = |V|, for
    small reference models that have no text."""
    count = check_count(count, "count", 1)
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    generator = torch.Generator().manual_seed(int(seed))
    states = allowed[torch.randint(len(allowed), (count, check_count(n, "n", 2)), generator=generator)]
    return sample_rectangles(cond, states, count, top_k=int(cond.vocab_size), seed=seed)


def batching_jitter(cond, rectangles: Rectangles, count: int = 8) -> float:
    """Largest change of rectangle_delta when the first `count` rectangles are computed one at a time
    instead of in one batch: the rounding of the arithmetic (0 when it is bitwise stable)."""
    few = rectangles.take(torch.arange(min(check_count(count, "count", 1), len(rectangles))))
    batched = rectangle_delta(cond, *few.args())
    alone = torch.cat([rectangle_delta(cond, *few.take([r]).args()) for r in range(len(few))])
    return float((batched - alone).abs().max())


# ---------------------------------------------------------------------------------------------
# The chapter's verdict rules (stated in the notebook before the run) and its claims rows
# ---------------------------------------------------------------------------------------------

def detected_verdict(summary: dict) -> tuple[str, str]:
    """incompatibility_detected: the share of rectangles with |delta| above the floor, Wilson 95%
    interval, against 1/2 (the sign test's null: the median |delta| sits at the floor). Reproduced when
    the interval lies above 1/2, differs when at or below, inconclusive otherwise or with no rectangle
    above the floor (zero events) or no finite delta."""
    k, total = int(summary["above_floor"]), int(summary["finite"])
    if total == 0:
        return bt.INCONCLUSIVE, "no rectangle gave a finite delta"
    verdict, reason = bt.rule_one_sided(summary["share_low"], summary["share_high"], 0.5, "above",
                                        events=k)
    return verdict, f"{k} of {total} above the floor; Wilson {reason}"


def control_verdict(summaries: dict[str, dict], compatible: list[str], floor: float) -> tuple[str, str]:
    """causal_control_zero by book_tools.rule_control: the compatible models (`compatible`, e.g. the
    causal LM and the symmetric Potts model) must all keep max |delta| at or below `floor`, every other
    model of `summaries` (known incompatible: the asymmetric Potts model, the masked LM) must exceed it."""
    unknown = [name for name in compatible if name not in summaries]
    if unknown or len(compatible) == len(summaries):
        raise ValueError(f"compatible must name some, not all, of {sorted(summaries)}; got {compatible}")
    worst = max(summaries[name]["max_abs_delta"] for name in compatible)
    references = {name: s["max_abs_delta"] for name, s in summaries.items() if name not in compatible}
    return bt.rule_control(worst, references, floor)


def rank_correlation_ci(x, y, resamples: int = 2_000, seed: int = 0) -> tuple[float, float, float, str]:
    """Spearman's rho of paired x, y with its bootstrap interval, over the pairs where both are finite;
    (nan, nan, nan, why) when there are fewer than 3 such pairs or one side is constant (no warning)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return math.nan, math.nan, math.nan, "fewer than 3 rectangles with finite values"
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan, math.nan, "one of the two quantities is the same for every rectangle"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # bootstrap draws that happen to be constant
        rho, low, high = bt.spearman_ci(x, y, resamples=resamples, seed=seed)
    return rho, low, high, ""


def distance_phrase(low: float, high: float, why: str = "") -> str:
    """How the rank correlation of |delta| with the distance |i - j| reads, from its interval."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"no interval could be estimated ({why or 'too few distinct values'})"
    if high < 0:
        return "closer sites show more incompatibility"
    if low > 0:
        return "farther sites show more incompatibility"
    return "the interval includes 0: no clear trend"


def range_phrase(low: float, high: float, target_low: float, target_high: float) -> str:
    """Where an interval [low, high] sits against a range: "lies below", "lies above" or "overlaps"."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "cannot be set beside (this run has no interval for)"
    if high < target_low:
        return "lies below"
    if low > target_high:
        return "lies above"
    return "overlaps"


def chapter_verdicts(summaries: dict[str, dict], *, mlm: str, compatible: list[str],
                     influence: tuple[float, float, float, str], floor: float,
                     setup: dict) -> tuple[list[dict], dict]:
    """The chapter's four claims rows and the words its prose quotes, from Table 1's summaries (one per
    model: `mlm`, the compatible models `compatible`, the other references), the influence correlation
    (rho, low, high, why) and the run's setup for the model-specific row."""
    m = summaries[mlm]
    rows, words = [], {}
    # incompatibility_detected (general)
    verdict, reason = detected_verdict(m)
    share = bt.interval_text(m["share_above"], m["share_low"], m["share_high"],
                             missing="no rectangle gave a finite delta")
    rows.append(bt.claim_row("incompatibility_detected",
                             f"share of rectangles with |delta| > {floor:g} (null 1/2)",
                             m["share_above"], share, verdict, reason))
    words.update(ch1_share_text=share, ch1_detected_verdict=verdict,
                 ch1_above_floor=f"{m['above_floor']} of {m['finite']}",
                 ch1_sign_p=f"{m['sign_test_p']:.0e}" if math.isfinite(m["sign_test_p"]) else "not defined")
    # causal_control_zero (general)
    verdict, reason = control_verdict(summaries, compatible, floor)
    parts = "; ".join(f"{name} {s['max_abs_delta']:.1e}" for name, s in summaries.items())
    worst = max(summaries[name]["max_abs_delta"] for name in compatible)
    rows.append(bt.claim_row("causal_control_zero", f"largest |delta| per model (floor {floor:g})",
                             worst, f"{parts} (floor {floor:g})", verdict, reason))
    words.update(ch1_control_verdict=verdict, ch1_control_reason=reason,
                 ch1_control_max=f"{worst:.1e}")
    # influence_amplifies_delta (general)
    rho, low, high, why = influence
    verdict, reason = bt.rule_one_sided(low, high, 0.0, "above")
    if why:
        reason = f"{why}: {reason}"
    rho_text = bt.interval_text(rho, low, high, missing=why or "no interval could be estimated")
    rows.append(bt.claim_row("influence_amplifies_delta", "Spearman rho(|delta|, influence) (null 0)",
                             rho, rho_text, verdict, reason))
    words.update(ch1_rho_influence=rho_text, ch1_influence_verdict=verdict)
    # incompatibility_mean_abs_delta (model-specific: shown, judged only on the paper's setup)
    mean_text = bt.interval_text(m["mean_abs_delta"], m["ci_low"], m["ci_high"],
                                 significant=2,
                                 missing="no rectangle gave a finite delta")
    rows.append(bt.model_specific_row(
        "incompatibility_mean_abs_delta", "mean |delta| over random rectangles (nats)",
        m["mean_abs_delta"], mean_text, model=mlm, setup=setup, low=m["ci_low"], high=m["ci_high"]))
    paper_low = bt.paper_number("incompatibility_mean_abs_delta", "low")
    paper_high = bt.paper_number("incompatibility_mean_abs_delta", "high")
    words.update(ch1_mean_text=mean_text, ch1_mean_verdict=rows[-1]["verdict"],
                 ch1_mean_setup=rows[-1]["setup"],
                 ch1_size_phrase=range_phrase(m["ci_low"], m["ci_high"], paper_low, paper_high))
    return rows, words
