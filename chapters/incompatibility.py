"""Chapter 1: the rectangle test at scale (section 4, Table 1, Figs. 5-6).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from glauber_core import (
    CausalLMJoint,
    Conditionals,
    check_count,
    check_temperature,
    check_tokens,
    rectangle_delta,
    rectangle_input,
    rectangle_states,
)
from book_tools import bootstrap_ci


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
    """One row per rectangle: passage, i, j, |i - j|, the tokens A, A', B, B', delta and |delta|, and for
    masked LMs the influences (token_influence); rectangle_delta's forwards run once per batch."""
    columns = {"delta": [], "influence_ij": [], "influence_ji": []}
    causal = isinstance(cond, CausalLMJoint)
    for rows in torch.arange(len(rectangles)).split(batch_size):
        args = rectangles.take(rows).args()
        if causal:
            columns["delta"].append(rectangle_delta(cond, *args))
            columns["influence_ij"].append(torch.full((len(rows),), float("nan"), dtype=torch.float64))
            columns["influence_ji"].append(columns["influence_ij"][-1])
            continue
        x, i, j, a_new, b_new = rectangle_input(cond, *args)
        scores, new, old = rectangle_scores(cond, x, i, j, a_new, b_new)
        edge = (scores.gather(2, new.unsqueeze(2)) - scores.gather(2, old.unsqueeze(2))).squeeze(2)
        columns["delta"].append(((edge[0] + edge[1]) - (edge[2] + edge[3])).cpu())
        log_p_old = torch.log_softmax(scores, -1).gather(2, old.unsqueeze(2)).squeeze(2)
        columns["influence_ij"].append((log_p_old[0] - log_p_old[3]).abs().cpu())
        columns["influence_ji"].append((log_p_old[2] - log_p_old[1]).abs().cpu())
    values = {k: torch.cat(v).numpy() for k, v in columns.items()}
    rows = torch.arange(len(rectangles))
    name = cond.tokenizer.convert_ids_to_tokens
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
    """One row of Table 1 from a rectangle_frame: N, mean and median |delta|, a 95% bootstrap interval
    for the mean, max |delta| and the sign test of |delta| against `floor`."""
    abs_delta = frame.abs_delta.to_numpy()
    low, high = bootstrap_ci(abs_delta, resamples=resamples, seed=seed)
    k, total, p = sign_test_above(abs_delta, floor)
    return {"rectangles": total, "mean_abs_delta": abs_delta.mean(), "ci_low": low, "ci_high": high,
            "median_abs_delta": float(np.median(abs_delta)), "max_abs_delta": abs_delta.max(),
            "above_floor": k, "sign_test_p": p}
