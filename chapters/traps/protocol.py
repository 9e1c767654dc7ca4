"""Chapter 5's protocol (appendix A.1, Table 4, C.3): the profiles and settings, the chains run at every
temperature in one batch, the recorded states as vectors (sentence embeddings, or Hamming vectors on a protein
model) and a protein model's germline seeds with their score gaps."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import torch

from book_tools import (
    PASSAGE_NAMES,
    fr1_window,
    paper_claim,
    paper_number,
    paper_protocol,
    parse_pairs,
    profile_settings,
)
from glauber_core import (
    GERMLINE_CONTEXT,
    Conditionals,
    TemperedConditionals,
    Trajectory,
    chain_seeds,
    check_count,
    check_temperature,
    check_tokens,
    glauber,
    is_protein,
    score_gaps,
    seed_passages,
)
from profiles import _unset

# --------------------------------------------------------------------------------------------
# The profiles and the settings they give
# --------------------------------------------------------------------------------------------

TABLE4 = paper_protocol("trap_count")  # the paper's Table 4 protocol (chains, steps, tau, window, threshold)
COLD_PROTOCOL = paper_protocol("cold_chains_stay")  # appendix C.3's cold chains (steps, temperatures)
_SHARED = dict(
    threshold=float(TABLE4["threshold"]),
    passages="bbc",
    cold_temperatures=[float(t) for t in COLD_PROTOCOL["temperatures"].split()],
)


# Per profile (the page shows them through presentation.profiles_view): n, chains per temperature, steps, cold-chain
# steps, record spacing, temperatures (the paper's tau first; the run adds the matched tau_m after them,
# run_temperatures) and the starts tau_m is read from. No window: 15 sweeps of the sequence (15 n steps). The quick
# chains run at appendix B.2's n = 20 (MATCH_LENGTH), as the judged trap chains must (issue 63): the window is then
# the paper's 300 steps.
SETTINGS = {
    "smoke": {
        "seq_len": 8,
        "n_chains": 3,
        "steps": 240,
        "cold_steps": 48,
        "record_every": 8,
        "temperatures": [1.0],
        "match_starts": 4,
        **_SHARED,
    },
    "quick": {
        "seq_len": 20,
        "n_chains": 16,
        "steps": 1_000,
        "cold_steps": 400,
        "record_every": 10,
        "temperatures": [1.0],
        "match_starts": 30,
        **_SHARED,
    },
    "paper": {
        "seq_len": 20,
        "n_chains": int(TABLE4["chains"]),
        "steps": int(TABLE4["steps"]),
        "cold_steps": int(COLD_PROTOCOL["steps"]),
        "record_every": 5,
        "window": int(TABLE4["window"]),
        "temperatures": [float(TABLE4["tau"])],
        "match_starts": 30,
        **_SHARED,
        "passages": "ms_marco",
    },
}


# The temperature the paper's trap claims are stated at (Table 4): only its traps are judged.
PAPER_TAU = float(parse_pairs(paper_claim("trap_split")["protocol"])["tau"])
# The matched temperature's starts are cut to appendix B.2's n = 20 (the length the paper's 0.12 threshold and
# 300-step window were set at), whatever the profile's n (issue 63's rule).
MATCH_LENGTH = 20
# The smallest mean score gap the paper gives for a trap that held at tau = 1 (section A.1's scoring sentence, an
# approximate trap): the depth the matched temperature sets this model's tau -> 0 fixed points against.
PAPER_TRAP_GAP = paper_number("trap_split", "shallowest_mean_gap")


def settings(profile: str, cond=None, **overrides) -> SimpleNamespace:
    """The chapter's settings (appendix A.1's protocol at this profile): SETTINGS[profile] with the overrides
    (profile_settings: None, 0, "", [] keep the profile's), then what follows from them: a run length that is a
    whole number of record spacings; the drift window, the profile's or 15 sweeps (15 n steps: the paper's 300
    steps if its passages had 20 tokens, which the paper does not state), rounded to a multiple of the record
    spacing; the cold chains' steps, at most the warm run's and a multiple of its record spacing (so the warm
    chain's distance after as many steps is a recorded one); the cold chains' burn-in, the first quarter of their
    run (a multiple of the record spacing: appendix C.3 reads its cold chains after a start-up, e.g. steps 1k to
    10k at tau = 0.01), and the spacing that records both it and the cold run's end (cold_record); and the seed
    passages for `cond` (seed_source: a protein model takes germline V genes; names from
    book_tools.PASSAGE_NAMES). On a protein MLM a chain's state is the whole gene (`context_length`, GERMLINE_CONTEXT
    residues), only its first `free` = seq_len sites (FR1) move, and the profile's temperatures are the paper's tau
    alone unless `temperatures` is given (a whole-gene step costs about four text steps; the run adds the matched
    tau_m where it differs, run_temperatures); a text model has `free` 0 (every site). Raises
    ValueError when a protein MLM's seq_len reaches past FR1 (fr1_window)."""
    cfg = profile_settings(profile, SETTINGS, **overrides)
    protein = is_protein(cond)
    if protein and _unset(overrides.get("temperatures")):
        cfg.temperatures = [PAPER_TAU]  # a whole gene's step costs about 4 text steps: the paper's tau alone
    if cfg.passages not in PASSAGE_NAMES:
        raise ValueError(f"passages must be one of {sorted(PASSAGE_NAMES)}, got {cfg.passages!r}")
    record = cfg.record_every
    steps = cfg.steps - cfg.steps % record  # records evenly spaced
    window = getattr(cfg, "window", 0) or 15 * cfg.seq_len
    cold = max(record, min(cfg.cold_steps, steps) // record * record)
    burn_in = max(record, cold // 4 // record * record)
    return SimpleNamespace(
        **vars(cfg)
        | dict(
            context_length=GERMLINE_CONTEXT if protein else cfg.seq_len,
            free=fr1_window(cfg.seq_len) if protein else 0,
            steps=steps,
            window=max(record, round(window / record) * record),
            cold_steps=cold,
            burn_in=burn_in,
            cold_record=math.gcd(burn_in, cold),
            passages=seed_source(cond, cfg.passages),
        )
    )


def matching_starts(cond, cfg) -> tuple[torch.Tensor, range | None]:
    """The starts the matched temperature is read from (issue 63's rule) and their free sites: the first
    `cfg.match_starts` seed passages of seed 0 at MATCH_LENGTH tokens, every site free; on a protein model the
    germline genes in whole (`cfg.context_length` residues), the first `cfg.free` sites free, as the chains run."""
    length = cfg.context_length if cfg.free else MATCH_LENGTH
    starts = seed_passages(cond, length, cfg.match_starts, seed=0, passages=cfg.passages).tokens
    return starts, (range(cfg.free) if cfg.free else None)


def run_temperatures(temperatures, tau_m: float) -> list[float]:
    """The run's temperatures: the profile's (the paper's tau first), then the matched tau_m unless it is among
    them or undefined (NaN: no start settled)."""
    taus = [float(t) for t in temperatures]
    if math.isfinite(tau_m) and not any(math.isclose(tau_m, t) for t in taus):
        taus.append(float(tau_m))
    return taus


def judged_temperature(tau_m: float) -> float:
    """The temperature the general trap claims are judged at (issue 63): the matched tau_m, fixed before the run,
    where it is defined (it is the paper's tau on a model as sharp as BERT or sharper), else the paper's tau."""
    return float(tau_m) if math.isfinite(tau_m) else PAPER_TAU


def claims_setup(cfg) -> dict:
    """Our protocol for the model-specific rows, keyed as paper_claims.csv's `protocol` column: the paper's
    temperature when the run has it (the rows are measured there), else the run's first."""
    taus = [float(t) for t in cfg.temperatures]
    tau = PAPER_TAU if PAPER_TAU in taus else taus[0]
    return dict(
        chains=cfg.n_chains,
        steps=cfg.steps,
        tau=f"{tau:g}",
        window=cfg.window,
        threshold=f"{cfg.threshold:g}",
        n=cfg.seq_len,
        passages=PASSAGE_NAMES[cfg.passages],
    )


def paper_counts() -> dict:
    """The paper's Table 4 counts, read from paper_claims.csv (the only place they are typed)."""
    protocol = TABLE4
    return dict(
        count=paper_number("trap_count", "value"),
        perfect=paper_number("perfect_trap_share", "perfect"),
        mean=paper_number("trap_mean_duration", "value"),
        min=paper_number("trap_mean_duration", "min"),
        max=paper_number("trap_mean_duration", "max"),
        chains=float(protocol["chains"]),
        steps=float(protocol["steps"]),
    )


def seed_source(cond, passages: str) -> str:
    """The seed passages the run uses: a protein model takes germline V genes (for the default "bbc" too)."""
    return "germline" if is_protein(cond) and passages in ("", "bbc") else passages


# --------------------------------------------------------------------------------------------
# Running the chains: every temperature in one batch; the recorded states as vectors
# --------------------------------------------------------------------------------------------


def chains_at_temperatures(
    cond: Conditionals, x0, temperatures, steps: int, *, seed: int = 0, record_every: int = 1, free: int = 0
) -> dict:
    """{tau: Trajectory} of glauber(cond, x0, steps, tau, seed=seed) at every tau, run as one batch: the
    chains of each temperature keep the per-chain seeds (chain_seeds(seed, B)) of a run of their own, so each
    trajectory is that run's, token for token, while one forward per step serves every temperature. With
    `free` > 0 only the first `free` sites move (a protein MLM's window in its whole gene) and each trajectory
    records that window, tokens [B, R, free]: the model calls put it back in context (with_context)."""
    taus = check_temperature(temperatures, many=True)
    if len(set(taus)) < len(taus):
        raise ValueError(f"temperatures must be distinct (one run each), got {temperatures!r}")
    x = check_tokens(cond, x0, "x0")
    batch = len(x)
    run = glauber(
        TemperedConditionals(cond, torch.tensor(taus, dtype=torch.float64).repeat_interleave(batch)),
        x.repeat(len(taus), 1),
        steps,
        1.0,
        seed=chain_seeds(seed, batch) * len(taus),
        record_every=record_every,
        progress=False,
        frozen=torch.arange(x.shape[1]) >= free if free else 0,
    )
    window = slice(0, free or x.shape[1])

    def rows(t: int, tau: float) -> Trajectory:
        part = slice(t * batch, (t + 1) * batch)
        return Trajectory(
            run.tokens[part, :, window],
            run.steps,
            run.sites[part],
            run.old_tokens[part],
            run.new_tokens[part],
            run.log_probs[part],
            tau,
        )

    return {tau: rows(t, tau) for t, tau in enumerate(taus)}


def with_context(states, contexts) -> torch.Tensor:
    """The model's states [B, L]: each row's context [B, L] with its first n sites set to the window's state
    [B, n] (chains_at_temperatures' `free`); the states themselves when n = L (a text model)."""
    states, contexts = torch.as_tensor(states).long(), torch.as_tensor(contexts).long()
    if states.dim() != 2 or contexts.shape[0] != states.shape[0] or contexts.shape[1] < states.shape[1]:
        raise ValueError(f"states [B, n] need contexts [B, L >= n], got {tuple(states.shape)}, {tuple(contexts.shape)}")
    full = contexts.clone()
    full[:, : states.shape[1]] = states
    return full


def site_embeddings(tokens) -> torch.Tensor:
    """An embedding-free distance for chains on small vocabularies (Potts models in the calibration tests):
    each recorded state [B, R, n] as the concatenation of its sites' one-hot vectors, FloatTensor[B, R, n V].
    Its cosine distance is the Hamming distance over n, so detect_traps and movement read it as they read a
    sentence embedding."""
    tokens = torch.as_tensor(tokens)
    if tokens.dim() != 3 or tokens.is_floating_point():
        raise ValueError(f"tokens must be a LongTensor [B, R, n], got {tuple(tokens.shape)} of {tokens.dtype}")
    vocab = int(tokens.max()) + 1
    return torch.nn.functional.one_hot(tokens.long(), vocab).flatten(2).float()


def hamming_vectors(tokens) -> torch.Tensor:
    """site_embeddings scaled to unit norm, FloatTensor[B, R, n V]: the cosine distance of two states is their
    Hamming distance over n, and movement reads these vectors as it reads unit-norm sentence embeddings."""
    vectors = site_embeddings(tokens)
    return vectors / math.sqrt(torch.as_tensor(tokens).shape[2])


def state_vectors(cond, embedder, trajectory: Trajectory) -> torch.Tensor:
    """The recorded states as unit vectors [B, R, d] for detect_traps and movement: the sentence embedding
    (glauber.trajectory_embeddings) with an embedder, the one-hot site vectors (hamming_vectors: cosine distance =
    Hamming distance / n) with embedder None, as for a protein model."""
    if embedder is None:
        return hamming_vectors(trajectory.tokens)
    from glauber_core import trajectory_embeddings

    return trajectory_embeddings(cond, embedder, trajectory)


def start_distances(cond, embedder, trajectory: Trajectory) -> torch.Tensor:
    """d(x_t, x_0) for every recorded state, FloatTensor[B, R]: eq. B.1's embedding distance with an embedder,
    the Hamming share (sites differing from the start over n) with embedder None."""
    if embedder is None:
        tokens = trajectory.tokens
        return (tokens != tokens[:, :1]).double().mean(-1).float()
    from glauber_core import trajectory_distances

    return trajectory_distances(cond, embedder, trajectory)


# --------------------------------------------------------------------------------------------
# A protein model (AntiBERTy): germline seeds and their gaps
# --------------------------------------------------------------------------------------------


def germline_seeds(cond, n: int, region: str = "fr1") -> pd.DataFrame:
    """Every distinct human germline V gene cut to n residues from the start of `region` (the first allele of
    each cut, as glauber.seed_passages takes them): gene, family, chain, residues and tokens (ids), one row each."""
    from glauber_core import germline_v_genes

    n = check_count(n, "n", 1)
    cuts = {}
    for allele, family, chain, residues in germline_v_genes("human", region):
        if len(residues) >= n:
            cuts.setdefault(residues[:n], (allele, family, chain))
    rows = [
        dict(gene=a, family=f, chain=c, residues=r, tokens=cond.encode(r).tolist()) for r, (a, f, c) in cuts.items()
    ]
    frame = pd.DataFrame(rows, columns=["gene", "family", "chain", "residues", "tokens"])
    allowed = cond.allowed.cpu()
    return frame[[len(t) == n and bool(allowed[t].all()) for t in frame.tokens]].reset_index(drop=True)


def germline_gaps(cond, seeds: pd.DataFrame, *, max_rows: int = 256, free: int = 0) -> pd.DataFrame:
    """Score gaps Delta_i(x) on the germlines themselves (one batched glauber.score_gaps call) at their first
    `free` sites (0: all), read inside the whole seed: per seed its gaps, mean and min gap, negative_sites
    (sites whose residue is not the model's argmax) and perfect (every residue the argmax, Delta* > 0: a perfect
    trap in the sense of appendix A.1), with `context` (residues in the state) and `free`."""
    if not isinstance(seeds, pd.DataFrame) or not {"tokens", "family", "chain"} <= set(seeds):
        raise ValueError("seeds must be the DataFrame of germline_seeds (tokens, family, chain)")
    if seeds.empty:
        raise ValueError("no germline seed to measure")
    tokens = torch.tensor(seeds.tokens.tolist())
    free = free or tokens.shape[1]
    gaps = score_gaps(cond, tokens, max_rows=max_rows, sites=torch.arange(free))[:, :free]
    return seeds.drop(columns="tokens").assign(
        context=tokens.shape[1],
        free=free,
        gaps=gaps.tolist(),
        mean_gap=gaps.mean(1).numpy(),
        min_gap=gaps.amin(1).numpy(),
        negative_sites=(gaps < 0).sum(1).numpy(),
        perfect=(gaps.amin(1) > 0).numpy(),
    )


def germline_section(cond, n: int) -> pd.DataFrame | None:
    """The germline gaps of a protein model (appendix A.1's gaps on the seeds themselves): germline_gaps at the
    first n sites (FR1) of every distinct whole germline gene (GERMLINE_CONTEXT residues), one row per seed. A text
    model has no germline: one sentence, and None."""
    if not is_protein(cond):
        print("A text model has no germline seeds: this section is for protein models (e.g. AntiBERTy).")
        return None
    return germline_gaps(cond, germline_seeds(cond, GERMLINE_CONTEXT), free=n)
