"""Chapter 5: metastable traps (appendix A.1, Table 4, C.1-C.3).

Imports the core (and the book's intervals); never another chapter module.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from book_tools import (
    PASSAGE_NAMES,
    claim_row,
    interval_text,
    model_specific_row,
    paper_claim,
    paper_number,
    paper_protocol,
    parse_pairs,
    profile_settings,
    reading_table,
    share_text,
)
from glauber_core import (
    Conditionals,
    TemperedConditionals,
    Trajectory,
    chain_seeds,
    check_count,
    check_temperature,
    check_tokens,
    conditional_probs,
    glauber,
    is_protein,
    score_gaps,
)
from verdicts import (
    DIFFERS,
    INCONCLUSIVE,
    NOT_RUN,
    REPRODUCED,
    finite,
    mean_interval,
    rank_correlation,
    rule_both_kinds,
    rule_every_part,
    rule_one_sided,
    rule_share_above_chance,
    share_intervals,
)

TRAP_COLUMNS = ("chain", "start", "end", "duration", "start_record", "end_record", "from_start", "censored")


def _record_spacing(steps, records: int) -> torch.Tensor:
    """The recorded steps as LongTensor[R], checked to be increasing and evenly spaced."""
    steps = torch.as_tensor(steps)
    if steps.dim() != 1 or len(steps) != records or records < 2 or steps.is_floating_point():
        raise ValueError(
            f"steps must be a LongTensor of the {records} recorded steps (at least 2), "
            f"got shape {tuple(steps.shape)} and dtype {steps.dtype}"
        )
    spacing = steps.diff()
    if (spacing <= 0).any() or (spacing != spacing[0]).any():
        raise ValueError(
            "steps must be increasing and evenly spaced: run glauber with `steps` a multiple of `record_every`"
        )
    return steps.long()


def window_distances(embeddings, steps, window: int) -> torch.Tensor:
    """d(x_t, x_s) = 1 - cos(phi(x_t), phi(x_s)) from each anchor record t to s = t, t + r, ..., t + w.

    embeddings [B, R, d] at the recorded `steps` (spacing r); `window` w in Glauber steps, a multiple
    of r. Anchors are the K = R - w / r records with a whole window: FloatTensor[B, K, w / r + 1].
    """
    embeddings = torch.as_tensor(embeddings)
    if embeddings.dim() != 3 or not embeddings.is_floating_point() or embeddings.shape[2] < 1:
        raise ValueError(
            f"embeddings must be a float tensor [B, R, d], got {tuple(embeddings.shape)} of dtype {embeddings.dtype}"
        )
    norms = embeddings.norm(dim=-1, keepdim=True)
    if not torch.isfinite(embeddings).all() or (norms == 0).any():
        raise ValueError("embeddings must be finite and non-zero (cosine distance needs a direction)")
    steps = _record_spacing(steps, embeddings.shape[1])
    spacing = int(steps[1] - steps[0])
    window = check_count(window, "window", 1)
    if window % spacing or window > int(steps[-1] - steps[0]):
        raise ValueError(
            f"window must be a multiple of the record spacing {spacing} and at most the recorded "
            f"span {int(steps[-1] - steps[0])}, got {window}"
        )
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


def trap_catalogue(
    cond: Conditionals, trajectory: Trajectory, traps: pd.DataFrame, *, max_rows: int = 256
) -> pd.DataFrame:
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
        state=states.tolist(),
        text=texts,
        gaps=gaps.tolist(),
        mean_gap=gaps.mean(1).numpy(),
        min_gap=min_gap.numpy(),
        weakest_site=gaps.argmin(1).numpy() if len(states) else np.empty(0, int),
        kind=np.where(perfect.numpy(), "perfect", "approximate"),
        temperature=tau,
        theorem8_bound=bound.numpy(),
    )


def _at_state(trajectory: Trajectory, chain: int, first: int, target: torch.Tensor) -> torch.Tensor:
    """Whether chain `chain` sits at `target` after each step from the trap's first record on, from the move
    log: BoolTensor[T - begin + 1], index j = step begin + j, begin = the step of record `first`."""
    begin = int(trajectory.steps[first])
    sites = trajectory.sites[chain, begin:]
    changes = (trajectory.new_tokens[chain, begin:] != target[sites]).long() - (
        trajectory.old_tokens[chain, begin:] != target[sites]
    ).long()
    start = (trajectory.tokens[chain, first] != target).sum()
    return torch.cat([start.view(1), start + changes.cumsum(0)]) == 0


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
    states, gaps = (
        torch.as_tensor(v).reshape(-1, n) if len(traps) == 0 else torch.as_tensor(v) for v in (states, gaps)
    )
    states, gaps = states.long(), gaps.double()
    if states.shape != (len(traps), n) or gaps.shape != (len(traps), n):
        raise ValueError(
            f"states and gaps must both be [{len(traps)}, {n}] (one row per trap), got "
            f"{tuple(states.shape)} and {tuple(gaps.shape)}"
        )
    if trajectory.sites.shape[1] != int(trajectory.steps[-1]):
        raise ValueError("the trajectory's move log does not cover every step; pass the Trajectory from glauber")
    rows = []
    for k, (chain, first, last) in enumerate(zip(traps.chain, traps.start_record, traps.end_record)):
        target, begin, end = states[k], int(trajectory.steps[first]), int(trajectory.steps[last])
        at_state = _at_state(trajectory, chain, first, target)  # index j: step begin + j
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
        rows.append(
            (
                True,
                step - 1,
                step,
                site,
                int(trajectory.old_tokens[chain, move]),
                int(trajectory.new_tokens[chain, move]),
                float(trajectory.log_probs[chain, move].exp()),
                float(gaps[k, site]),
                rank,
                rank == 0,
            )
        )
    columns = [
        "escaped",
        "last_visit",
        "escape_step",
        "escape_site",
        "old_token",
        "new_token",
        "escape_prob",
        "escape_gap",
        "site_rank",
        "at_weakest",
    ]
    return pd.DataFrame(rows, columns=columns).astype({"escaped": bool, "at_weakest": bool})


def trap_summary(catalogue: pd.DataFrame, chains: int, steps: int, *, draws: int = 2000, seed: int = 0) -> dict:
    """The numbers appendix A.1 reports, from a trap catalogue of `chains` chains run for `steps` steps.

    count and rate (traps per chain per 10,000 steps) with its exact 95% Poisson interval; perfect count,
    share and its 95% Wilson interval; mean duration with a 95% percentile-bootstrap interval (traps
    resampled), min and max; Spearman correlations of duration with the mean gap and with the min gap,
    their difference and its bootstrap interval (NaN with fewer than 3 traps).
    """
    from scipy.stats import chi2

    chains, steps = check_count(chains, "chains", 1), check_count(steps, "steps", 1)
    draws = check_count(draws, "draws", 1)
    if not isinstance(catalogue, pd.DataFrame) or not {"duration", "kind", "mean_gap", "min_gap"} <= set(catalogue):
        raise ValueError("catalogue must be the DataFrame of trap_catalogue (duration, kind, mean_gap, min_gap)")
    count = len(catalogue)
    duration = catalogue.duration.to_numpy(float)
    perfect = int((catalogue.kind == "perfect").sum())
    share = perfect / count if count else math.nan
    perfect_low, perfect_high = (
        (float(v[0]) for v in share_intervals([perfect], [count])) if count else (math.nan, math.nan)
    )
    resample = np.random.default_rng(seed).integers(0, max(count, 1), size=(draws, count))
    exposure = chains * steps / 10_000
    summary = dict(
        count=count,
        rate_per_10k=count / exposure,
        rate_low=chi2.ppf(0.025, 2 * count) / 2 / exposure if count else 0.0,
        rate_high=chi2.ppf(0.975, 2 * count + 2) / 2 / exposure,
        perfect=perfect,
        perfect_share=share,
        perfect_low=perfect_low,
        perfect_high=perfect_high,
        mean_duration=duration.mean() if count else math.nan,
        min_duration=duration.min() if count else math.nan,
        max_duration=duration.max() if count else math.nan,
    )
    means = duration[resample].mean(1) if count else np.full(draws, np.nan)
    summary["duration_low"], summary["duration_high"] = np.percentile(means, [2.5, 97.5]) if count else (math.nan,) * 2
    if count < 3:
        return summary | dict(
            rho_mean=math.nan,
            rho_min=math.nan,
            rho_difference=math.nan,
            difference_low=math.nan,
            difference_high=math.nan,
        )
    mean_gap, min_gap = catalogue.mean_gap.to_numpy(float), catalogue.min_gap.to_numpy(float)
    rho_mean, rho_min = float(rank_correlation(duration, mean_gap)), float(rank_correlation(duration, min_gap))
    boot = rank_correlation(duration[resample], mean_gap[resample]) - rank_correlation(
        duration[resample], min_gap[resample]
    )
    low, high = np.nanpercentile(boot, [2.5, 97.5]) if np.isfinite(boot).any() else (math.nan, math.nan)
    return summary | dict(
        rho_mean=rho_mean,
        rho_min=rho_min,
        rho_difference=rho_mean - rho_min,
        difference_low=float(low),
        difference_high=float(high),
    )


# --------------------------------------------------------------------------------------------
# The chapter's tables, figure, claims rows and sentences (the notebook shows them; they handle every case a
# model can produce: zero traps, no escape, constant or missing statistics)
# --------------------------------------------------------------------------------------------


def weakest_site_chance(gaps) -> float:
    """The share of escapes a uniformly chosen site would put at a weakest site: the mean, over traps, of
    (number of sites tied at the minimum gap) / n. NaN with no traps."""
    shares = [float(np.mean(np.asarray(g, float) == np.min(g))) for g in gaps if len(g)]
    return float(np.mean(shares)) if shares else math.nan


def site_embeddings(tokens) -> torch.Tensor:
    """An embedding-free distance for chains on small vocabularies (Potts models in the calibration tests):
    each recorded state [B, R, n] as the concatenation of its sites' one-hot vectors, FloatTensor[B, R, n V].
    Its cosine distance is the Hamming distance over n, so detect_traps and distance_at read it as they read a
    sentence embedding."""
    tokens = torch.as_tensor(tokens)
    if tokens.dim() != 3 or tokens.is_floating_point():
        raise ValueError(f"tokens must be a LongTensor [B, R, n], got {tuple(tokens.shape)} of {tokens.dtype}")
    vocab = int(tokens.max()) + 1
    return torch.nn.functional.one_hot(tokens.long(), vocab).flatten(2).float()


# --------------------------------------------------------------------------------------------
# Running the chains: every temperature in one batch
# --------------------------------------------------------------------------------------------


def chains_at_temperatures(
    cond: Conditionals, x0, temperatures, steps: int, *, seed: int = 0, record_every: int = 1
) -> dict:
    """{tau: Trajectory} of glauber(cond, x0, steps, tau, seed=seed) at every tau, run as one batch: the
    chains of each temperature keep the per-chain seeds (chain_seeds(seed, B)) of a run of their own, so each
    trajectory is that run's, token for token, while one forward per step serves every temperature."""
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
    )

    def rows(t: int, tau: float) -> Trajectory:
        part = slice(t * batch, (t + 1) * batch)
        return Trajectory(
            run.tokens[part],
            run.steps,
            run.sites[part],
            run.old_tokens[part],
            run.new_tokens[part],
            run.log_probs[part],
            tau,
        )

    return {tau: rows(t, tau) for t, tau in enumerate(taus)}


# --------------------------------------------------------------------------------------------
# A protein model (AntiBERTy): Hamming distances instead of sentence embeddings, germline seeds and their gaps
# --------------------------------------------------------------------------------------------


def hamming_vectors(tokens) -> torch.Tensor:
    """site_embeddings scaled to unit norm, FloatTensor[B, R, n V]: the cosine distance of two states is their
    Hamming distance over n, and distance_at reads these vectors as it reads unit-norm sentence embeddings."""
    vectors = site_embeddings(tokens)
    return vectors / math.sqrt(torch.as_tensor(tokens).shape[2])


def state_vectors(cond, embedder, trajectory: Trajectory) -> torch.Tensor:
    """The recorded states as unit vectors [B, R, d] for detect_traps and distance_at: the sentence embedding
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


def distance_phrases(cond, embedder_name: str = "all-MiniLM-L6-v2") -> dict:
    """The sentences that name the chapter's distance and seeds for this model."""
    if is_protein(cond):
        return {
            "distance": (
                "this model is a protein MLM, and a sentence embedder has no meaning for an amino-acid "
                "sequence, so every distance here is the Hamming distance over n: each state is the "
                "concatenation of its sites' one-hot vectors (`ch.site_embeddings`), whose cosine distance "
                "is exactly the share of sites that differ. The window and threshold logic is the "
                "paper's, unchanged; a drift below the threshold means the chain stays, on average, within "
                "that share of its sites of where the window began"
            ),
            "seeds": "human IMGT germline V genes (heavy, kappa and lambda, from `anarci`) cut to their "
            "first n residues from the start of framework 1",
        }
    return {
        "distance": (f"distances are cosine distances between {embedder_name} sentence embeddings (eq. B.1)"),
        "seeds": "held-out BBC News paragraphs (MS MARCO at the `paper` profile, online) cut to n tokens",
    }


def seed_source(cond, passages: str) -> str:
    """The seed passages the run uses: a protein model takes germline V genes (for the default "bbc" too)."""
    return "germline" if is_protein(cond) and passages in ("", "bbc") else passages


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


def germline_gaps(cond, seeds: pd.DataFrame, *, max_rows: int = 256) -> pd.DataFrame:
    """Score gaps Delta_i(x) on the germlines themselves (one batched glauber.score_gaps call): per seed its gaps,
    mean and min gap, negative_sites (sites whose residue is not the model's argmax) and perfect (every
    residue the argmax, Delta* > 0: a perfect trap in the sense of appendix A.1)."""
    if not isinstance(seeds, pd.DataFrame) or not {"tokens", "family", "chain"} <= set(seeds):
        raise ValueError("seeds must be the DataFrame of germline_seeds (tokens, family, chain)")
    if seeds.empty:
        raise ValueError("no germline seed to measure")
    gaps = score_gaps(cond, torch.tensor(seeds.tokens.tolist()), max_rows=max_rows)
    return seeds.drop(columns="tokens").assign(
        gaps=gaps.tolist(),
        mean_gap=gaps.mean(1).numpy(),
        min_gap=gaps.amin(1).numpy(),
        negative_sites=(gaps < 0).sum(1).numpy(),
        perfect=(gaps.amin(1) > 0).numpy(),
    )


def germline_section(cond, n: int) -> pd.DataFrame | None:
    """The germline gaps of a protein model (appendix A.1's gaps on the seeds themselves): germline_gaps on every
    distinct germline cut to n residues, one row per seed. A text model has no germline: one sentence, and None."""
    if not is_protein(cond):
        print("A text model has no germline seeds: this section is for protein models (e.g. AntiBERTy).")
        return None
    return germline_gaps(cond, germline_seeds(cond, n))


def germline_family_table(gaps: pd.DataFrame | None):
    """Per germline family (chain order, then family), then every seed: how many seeds, how many are perfect
    traps (k of m, with a 95% Wilson interval from five seeds on), the sites with a negative gap (all, and the
    mean per seed) and the median min gap Delta*, as a reading table (its data also keeps chain, perfect share
    and the number of sites). None for a text model (no germline)."""
    if gaps is None:
        return None

    def row(name, chain, group):
        seeds, perfect = len(group), int(group.perfect.sum())
        return {
            "family": name,
            "chain": chain,
            "seeds": seeds,
            "perfect traps": share_text(perfect, seeds),
            "perfect share": perfect / seeds,
            "sites with Δ_i < 0": int(group.negative_sites.sum()),
            "of sites": int(seeds * len(group.gaps.iloc[0])),
            "per seed": float(group.negative_sites.mean()),
            "median Δ*": float(group.min_gap.median()),
        }

    order = {"heavy": 0, "kappa": 1, "lambda": 2}
    keyed = gaps.assign(
        _order=gaps.chain.map(order).fillna(3), _number=gaps.family.str.extract(r"(\d+)$")[0].astype(float)
    )
    rows = [
        row(family, group.chain.iloc[0], group)
        for family, group in keyed.sort_values(["_order", "_number"]).groupby("family", sort=False)
    ]
    rows.append(row("all", "all", gaps))
    table = reading_table(pd.DataFrame(rows), {"per seed": "{:.2f}", "median Δ*": "{:.2f}"})
    return table.hide(["chain", "perfect share", "of sites"], axis="columns")


def germline_figure(gaps: pd.DataFrame | None):
    """Two panels: how many sites of a germline have a negative gap (seeds per count), and the share of
    germlines whose residue at each site is not the model's argmax. None for a text model."""
    import matplotlib.pyplot as plt

    if gaps is None:
        return None
    table = np.asarray(gaps.gaps.tolist(), float)
    counts = np.bincount(gaps.negative_sites.to_numpy(int), minlength=1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3))
    left.bar(np.arange(len(counts)), counts, color="C0")
    left.set(
        xlabel="sites with a negative gap",
        ylabel="germline seeds",
        title=f"{int(gaps.perfect.sum())} of {len(gaps)} germlines are perfect traps",
    )
    right.bar(np.arange(1, table.shape[1] + 1), (table < 0).mean(0), color="C3")
    right.set(
        xlabel="site (residue position)",
        ylabel="share with Δ_i < 0",
        ylim=(0, 1),
        title="where the germline residue is not the argmax",
    )
    fig.tight_layout()
    return fig


def germline_phrases(gaps: pd.DataFrame | None, run_seeds=()) -> dict:
    """The sentences the germline and cold sections quote: the perfect share, the negative sites, and the share
    of negative-gap sites among the run's own seeds (`run_seeds`: their residue strings)."""
    if gaps is None:
        return {
            "germline": "this model is not a protein model, so there is no germline to measure",
            "cold_germline": "",
        }
    seeds, perfect = len(gaps), int(gaps.perfect.sum())
    sites = int(gaps.negative_sites.sum())
    n = len(gaps.gaps.iloc[0])
    one = int((gaps.negative_sites == 1).sum())
    phrases = {
        "germline": (
            f"{perfect} of {seeds} germline seeds ({perfect / seeds:.0%}) are perfect traps; "
            f"{sites} of {seeds * n} sites ({sites / (seeds * n):.0%}) have a negative gap, "
            f"and {one} seeds are one residue away from being perfect (exactly one negative "
            "gap)"
        )
    }
    mine = gaps[gaps.residues.isin(list(run_seeds))]
    phrases["cold_germline"] = (
        f" On this protein model the run's {len(mine)} seeds have a negative gap at "
        f"{mine.negative_sites.sum() / (len(mine) * n):.0%} of their sites (germline section). A visit to such a "
        "site keeps the germline residue with probability at most e^(Δ_i/τ) (Δ_i < 0; e^-50 for Δ_i = -5 at "
        "τ = 0.1), so a cold chain leaves its start at those sites by construction: its distance from a germline "
        "says how far the seed lies from the states the cold chain settles in, not that it keeps moving."
        if len(mine)
        else ""
    )
    return phrases


def departure_counts(trajectory: Trajectory, traps: pd.DataFrame, states, gaps) -> pd.DataFrame:
    """Every move that left a trap's held state x*, from the trap's first record to its last (or, when the chain
    left x* for the last time only after it, to that escape): per trap, departures (how many) and
    departures_at_weakest (how many changed a site with the smallest gap; ties all count). Under Glauber dynamics
    each departure picks site i with probability proportional to 1 - p_tau(x*_i | x*_-i): kernel_weakest_share
    gives the share the kernel alone puts at the weakest sites."""
    _check_traps(trajectory, traps)
    n = trajectory.tokens.shape[2]
    states = torch.as_tensor(states).reshape(-1, n).long()
    gaps = torch.as_tensor(gaps).reshape(-1, n).double()
    if states.shape[0] != len(traps) or gaps.shape[0] != len(traps):
        raise ValueError(f"states and gaps must both be [{len(traps)}, {n}] (one row per trap)")
    if trajectory.sites.shape[1] != int(trajectory.steps[-1]):
        raise ValueError("the trajectory's move log does not cover every step; pass the Trajectory from glauber")
    rows = []
    for k, (chain, first, last) in enumerate(zip(traps.chain, traps.start_record, traps.end_record)):
        target, begin, end = states[k], int(trajectory.steps[first]), int(trajectory.steps[last])
        sites = trajectory.sites[chain, begin:]
        at_state = _at_state(trajectory, chain, first, target)  # index j: step begin + j
        visits = at_state[: end - begin + 1].nonzero()
        stop = end - begin
        if len(visits):
            leaves = (~at_state[int(visits[-1]) :]).nonzero()
            if len(leaves):
                stop = max(stop, int(visits[-1]) + int(leaves[0]))
        left = (at_state[:-1] & ~at_state[1:])[:stop].nonzero().squeeze(1)  # the move begin + j left x*
        weakest = gaps[k] == gaps[k].min()
        rows.append((len(left), int(weakest[sites[left]].sum())))
    return pd.DataFrame(rows, columns=["departures", "departures_at_weakest"], dtype=int)


def kernel_weakest_share(cond: Conditionals, states, gaps, temperature: float) -> np.ndarray:
    """Per held state x*: the share of the Glauber kernel's exit probability that falls on its weakest-gap sites,
    sum_{i weakest} (1 - p_tau(x*_i | x*_-i)) / sum_i (1 - p_tau(x*_i | x*_-i)) (NaN where x* cannot be left).
    Every departure follows this law, so it is the share of all departures at a weakest site in expectation;
    escape_weakest_site sets the FINAL escapes (the departures the chain did not undo) against it."""
    states = torch.as_tensor(states).long()
    if states.dim() != 2 or len(states) == 0:
        return np.empty(0)
    gaps = torch.as_tensor(gaps).double().reshape(states.shape)
    batch, n = states.shape
    rows, sites = torch.arange(batch).repeat_interleave(n), torch.arange(n).repeat(batch)
    stay = torch.cat(
        [
            conditional_probs(cond, states[rows[k : k + 256]], sites[k : k + 256], temperature)
            .double()
            .cpu()
            .gather(1, states[rows[k : k + 256], sites[k : k + 256]].unsqueeze(1))
            .squeeze(1)
            for k in range(0, len(rows), 256)
        ]
    ).view(batch, n)
    leave = (1 - stay).clamp_min(0)
    weakest = gaps == gaps.amin(1, keepdim=True)
    total = leave.sum(1)
    share = torch.where(total > 0, (leave * weakest).sum(1) / total.clamp_min(1e-300), math.nan)
    return share.numpy()


def cold_distances(warm: torch.Tensor, cold: dict) -> pd.DataFrame:
    """Appendix C.3's comparison, one row per (cold temperature, chain): the cold chain's embedding distance
    from its start after the cold run, and the warm (reference) chain's distance from the same start after
    the same number of steps. warm: FloatTensor[B]; cold: {tau: FloatTensor[B]}."""
    warm = torch.as_tensor(warm, dtype=torch.float64).reshape(-1)
    frames = []
    for tau, distance in cold.items():
        distance = torch.as_tensor(distance, dtype=torch.float64).reshape(-1)
        if distance.shape != warm.shape:
            raise ValueError(f"cold run tau={tau} has {len(distance)} chains, the warm run {len(warm)}")
        frames.append(
            pd.DataFrame(
                {
                    "temperature": float(tau),
                    "chain": np.arange(len(warm)),
                    "distance": distance.numpy(),
                    "warm_distance": warm.numpy(),
                }
            )
        )
    columns = ["temperature", "chain", "distance", "warm_distance"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def counts_table(summaries: dict, paper: dict, chains: int, steps: int, n: int):
    """Table 4's counts beside the paper's, as a reading table: one row for the paper (numbers from
    paper_claims.csv, in `paper`: count, perfect, mean, min, max, chains, steps) and one per temperature of this
    run; the mean duration carries its range in brackets, "in sweeps" divides it by n."""

    def row(label, count, rate, perfect, mean, low, high, sweeps):
        none = count == 0
        return {
            "run": label,
            "traps": int(count),
            "per chain per 10k steps": rate,
            "perfect": "0" if none else f"{perfect:.0f} ({perfect / count:.0%})",
            "mean duration": "—" if none else f"{mean:.0f} ({low:.0f}–{high:,.0f})",
            "in sweeps": "—" if none or not sweeps else f"{mean / sweeps:.1f}",
        }

    exposure = paper["chains"] * paper["steps"] / 10_000
    rows = [
        row(
            f"paper: τ = 1, {paper['chains']:.0f} × {paper['steps']:,.0f} (n not stated)",
            paper["count"],
            paper["count"] / exposure,
            paper["perfect"],
            paper["mean"],
            paper["min"],
            paper["max"],
            None,
        )
    ]
    rows += [
        row(
            f"ours: τ = {tau:g}, {chains} × {steps:,}",
            s["count"],
            s["rate_per_10k"],
            s["perfect"],
            s["mean_duration"],
            s["min_duration"],
            s["max_duration"],
            n,
        )
        for tau, s in summaries.items()
    ]
    return reading_table(pd.DataFrame(rows), {"per chain per 10k steps": "{:.2f}"})


def gap_figure(traps: pd.DataFrame, summaries: dict):
    """Duration against the mean and the minimum score gap (appendix A.1), one panel each, coloured by
    temperature, with each temperature's Spearman correlation in the title; returns the Figure. With no trap,
    says so and draws nothing (returns None)."""
    import seaborn as sns

    if traps.empty:
        print("No trap was detected, so there is no duration to set against a gap.")
        return None
    long = traps.melt(
        id_vars=["temperature", "duration"], value_vars=["mean_gap", "min_gap"], var_name="gap", value_name="value"
    )
    grid = sns.relplot(
        data=long,
        x="value",
        y="duration",
        hue="temperature",
        col="gap",
        kind="scatter",
        palette="viridis",
        height=3.4,
        facet_kws=dict(sharex=False),
    )
    grid.set_axis_labels("score gap (logit units)", "trap duration (steps)")
    for ax, name, key in zip(grid.axes.flat, ["mean gap", "min gap"], ["rho_mean", "rho_min"]):
        rho = ", ".join(
            f"τ={tau:g}: " + ("n/a" if math.isnan(s[key]) else f"{s[key]:.2f}") for tau, s in summaries.items()
        )
        ax.set_title(f"{name} vs duration\nSpearman {rho}", fontsize=10)
    return grid.figure


def weakest_table(traps: pd.DataFrame):
    """Per temperature (each its own labelled row), as a reading table: the departures from held states at a
    weakest-gap site (k of all), the kernel's share (kernel_weakest_share, weighted by departures) and a uniform
    site's (weakest_site_chance); then the traps' final escapes at a weakest site (k of all) and the median
    probability of the escaping token. None, with a sentence, when no trap left its held state."""
    if traps.empty or traps.departures.sum() == 0:
        print("No departure to count: no trap left its held state inside the run.")
        return None
    rows = []
    for tau, group in traps.groupby("temperature"):
        escaped = group[group.escaped]
        rows.append(
            {
                "τ": tau,
                "departures at a weakest site": f"{int(group.departures_at_weakest.sum())} of {int(group.departures.sum())}",
                "kernel's share": kernel_chance(group),
                "uniform site's share": weakest_site_chance(group.gaps),
                "final escapes at a weakest site": f"{int(escaped.at_weakest.sum())} of {len(escaped)}",
                "median p(new token)": float(escaped.escape_prob.median()) if len(escaped) else math.nan,
            }
        )
    return reading_table(
        pd.DataFrame(rows),
        {"τ": "{:g}", "kernel's share": "{:.2f}", "uniform site's share": "{:.2f}", "median p(new token)": "{:.3f}"},
    )


def _count_text(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


# --------------------------------------------------------------------------------------------
# The claims: one estimator + rule per general claim, each judged at the paper's temperature only
# (tests/test_calibration_traps.py runs each on ground-truth chains through these very functions)
# --------------------------------------------------------------------------------------------

# "Near the start" for cold_chains_stay, fixed before any run: the paper's own drift threshold for a chain
# that does not move (appendix A.1), read from paper_claims.csv. A cold temperature reproduces the claim when the
# upper 95% bound of its chains' mean distance from the start lies below it, and differs when the lower bound
# lies above it.
NEAR_START = float(parse_pairs(paper_claim("trap_split")["protocol"])["threshold"])
# The temperature the paper's trap claims are stated at (Table 4): only its traps are judged.
PAPER_TAU = float(parse_pairs(paper_claim("trap_split")["protocol"])["tau"])


def kernel_chance(traps: pd.DataFrame) -> float:
    """The kernel's expected share of departures at a weakest site over these traps: each trap's
    kernel_weakest_share weighted by its departures (NaN with no departure)."""
    weights = traps.departures.to_numpy(float)
    shares = traps.kernel_share.to_numpy(float)
    keep = np.isfinite(shares) & (weights > 0)
    return float((weights[keep] * shares[keep]).sum() / weights[keep].sum()) if keep.any() else math.nan


def judge_split(traps: pd.DataFrame) -> tuple[str, str, str]:
    """trap_split on one temperature's traps: rule_both_kinds. (verdict, reason, ours_text)."""
    count, perfect = len(traps), int((traps.kind == "perfect").sum())
    verdict, reason = rule_both_kinds(perfect, count)
    text = (
        f"{perfect} perfect, {count - perfect} approximate of {_count_text(count, 'trap')}"
        if count
        else "no trap was detected"
    )
    return verdict, reason, text


def persistence_surrogate(tokens, *, seed: int = 0) -> torch.Tensor:
    """A chain with each site's own persistence and no collective persistence, LongTensor[B, R, n]: per chain
    and site, an independent Markov chain on the recorded tokens that, at each record, with probability q
    redraws the site from its empirical law (the token at a uniformly drawn record of the same chain), q set so
    that the site changes between records as often as in the real chain (q = c / (1 - sum_a p_a^2), c the
    share of consecutive records at which it changed, p its empirical law; at most 1). Sites are independent:
    no held state outlasts what its sites' own flip rates give. It starts from its stationary law."""
    tokens = torch.as_tensor(tokens).long()
    if tokens.dim() != 3 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be a LongTensor [B, R, n] with at least 2 records, got {tuple(tokens.shape)}")
    batch, records, n = tokens.shape
    changed = (tokens[:, 1:] != tokens[:, :-1]).double().mean(1)  # [B, n]
    same = torch.tensor(
        [
            [
                float((torch.unique(tokens[b, :, i], return_counts=True)[1].double() / records).square().sum())
                for i in range(n)
            ]
            for b in range(batch)
        ],
        dtype=torch.float64,
    ).reshape(batch, n)  # sum_a p_a^2 per (chain, site)
    q = torch.where(same < 1, changed / (1 - same).clamp_min(1e-12), 0.0).clamp(0, 1)
    gen = torch.Generator().manual_seed(seed)
    redraw = torch.rand(batch, records, n, generator=gen, dtype=torch.float64) < q[:, None]
    redraw[:, 0] = True
    draws = torch.randint(0, records, (batch, records, n), generator=gen)
    last = torch.where(redraw, torch.arange(records)[None, :, None], 0).cummax(1).values
    return tokens.gather(1, draws.gather(1, last))


def null_durations(
    cond, embedder, trajectory: Trajectory, window: int, threshold: float, *, seed: int = 0
) -> np.ndarray:
    """What the detector gives a chain without collective persistence: the durations (steps) of the traps
    detect_traps finds on persistence_surrogate of this run (embedded as the run is, state_vectors) that end
    inside it (not censored)."""
    surrogate = persistence_surrogate(trajectory.tokens, seed=seed)
    vectors = state_vectors(cond, embedder, SimpleNamespace(tokens=surrogate))
    traps = detect_traps(vectors, trajectory.steps, window, threshold)
    return traps[~traps.censored].duration.to_numpy(float)


# A metastable trap outlasts what the detector gives a chain without collective persistence by at least this
# factor (fixed before any run). The null chain's ratio is 1 in expectation, so "differs" (the interval at or
# below the factor) is reachable on a chain whose traps the detector alone explains.
DURATION_FACTOR = 2.0


def judge_approximate_duration(
    traps: pd.DataFrame, null, *, seed: int = 0, resamples: int = 4000
) -> tuple[str, str, float, float, float]:
    """approximate_trap_duration on one temperature's traps: the mean duration of the approximate traps that
    ended inside the run (censored ones excluded: their duration is a lower bound, and a trap that never
    escapes is stable, not metastable) over the mean duration of the ended traps the detector finds on the
    run's persistence_surrogate (`null`: null_durations), with a 95% percentile bootstrap interval (both sets
    resampled), against DURATION_FACTOR by rule_one_sided. (verdict, reason, ratio, low, high)."""
    ended = (
        traps[(traps.kind == "approximate") & ~traps.censored].duration.to_numpy(float) if len(traps) else np.empty(0)
    )
    null = np.asarray(null, float)
    nan3 = (math.nan,) * 3
    if len(ended) == 0:
        kept = int((traps.kind == "approximate").sum()) if len(traps) else 0
        why = (
            f"{_count_text(kept, 'approximate trap')}, none ended inside the run" if kept else "zero approximate traps"
        )
        return INCONCLUSIVE, f"{why}: a run with approximate traps that escape would decide it", *nan3
    if len(null) == 0:
        return (
            INCONCLUSIVE,
            "the detector found no ended trap on the surrogate without collective persistence: "
            "no null duration to compare with; a longer run would give one",
            *nan3,
        )
    ratio = float(ended.mean() / null.mean())
    if len(ended) < 2 or len(null) < 2:
        return (
            INCONCLUSIVE,
            f"{len(ended)} ended approximate trap(s) and {len(null)} null trap(s): at least 2 of each give an interval",
            ratio,
            math.nan,
            math.nan,
        )
    rng = np.random.default_rng(seed)
    boot = ended[rng.integers(0, len(ended), (resamples, len(ended)))].mean(1) / null[
        rng.integers(0, len(null), (resamples, len(null)))
    ].mean(1)
    low, high = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
    verdict, reason = rule_one_sided(low, high, DURATION_FACTOR, "above", events=len(ended), estimate=ratio)
    return (
        verdict,
        (f"{len(ended)} ended approximate traps against {len(null)} null traps, ratio {ratio:.2f}: " + reason),
        ratio,
        low,
        high,
    )


def judge_gap_correlation(traps: pd.DataFrame, *, seed: int = 0) -> tuple[str, str, dict]:
    """mean_gap_correlation on one temperature's traps, gaps unscaled: trap_summary's Spearman difference
    rho(duration, mean gap) - rho(duration, min gap) with its bootstrap interval, against 0 by rule_one_sided.
    (verdict, reason, summary)."""
    s = trap_summary(traps, 1, 1, seed=seed)
    if not finite(s["rho_difference"], s["difference_low"], s["difference_high"]):
        return (
            INCONCLUSIVE,
            f"{_count_text(len(traps), 'trap')}: a rank correlation needs at least 3 traps with "
            "varying durations and gaps; a run with more traps would decide it",
            s,
        )
    verdict, reason = rule_one_sided(
        s["difference_low"], s["difference_high"], 0.0, "above", events=len(traps), estimate=s["rho_difference"]
    )
    return verdict, reason, s


def judge_weakest_site(traps: pd.DataFrame) -> tuple[str, str, int, int, float, float, float]:
    """escape_weakest_site on one temperature's traps: the FINAL escapes (escape_events: the departure that
    ended the trap's last visit to its held state, selected by what followed it) at a weakest-gap site,
    against the kernel's share at those held states (the mean kernel_share over the escaped traps: what a
    departure drawn by the one-step law alone would give) by rule_share_above_chance; censored traps (still
    held at the run's end) have no final escape. Every departure follows
    the kernel's law, so the share of all departures is the kernel's by construction; a final escape is the
    departure the chain did not undo, and can come at the weakest site more (or less) often.
    (verdict, reason, hits, tries, chance, low, high)."""
    escaped = traps[traps.escaped & ~traps.censored] if len(traps) else traps  # the trap ended in the run
    hits, tries = (int(escaped.at_weakest.sum()), len(escaped)) if len(escaped) else (0, 0)
    chance = (
        float(np.nanmean(escaped.kernel_share.to_numpy(float)))
        if tries and np.isfinite(escaped.kernel_share.to_numpy(float)).any()
        else math.nan
    )
    if not tries or not finite(chance):
        return (
            INCONCLUSIVE,
            "zero escapes: no trap ended inside the run; a run with escapes would decide it",
            hits,
            tries,
            chance,
            math.nan,
            math.nan,
        )
    verdict, reason, low, high = rule_share_above_chance(hits, tries, chance)
    return verdict, reason, hits, tries, chance, low, high


def judge_cold(cold: pd.DataFrame, near: float = NEAR_START) -> tuple[str, str, list[dict]]:
    """cold_chains_stay: per cold temperature, the chains' mean distance from their start with its 95% t
    interval; reproduced when the upper bound lies below `near`, differs when the lower bound lies above it
    (rule_one_sided, direction below), every temperature combined by rule_every_part. The distance may be an
    embedding's cosine distance or site_embeddings' Hamming share. (verdict, reason, one dict per tau)."""
    parts = []
    for tau, group in cold.groupby("temperature", sort=False):
        mean, low, high = mean_interval(group.distance.to_numpy(float))
        if not finite(low, high):
            verdict, reason = INCONCLUSIVE, f"{len(group)} chain(s): too few for an interval; 2 or more decide it"
        else:
            verdict, reason = rule_one_sided(low, high, near, "below", estimate=mean)
        parts.append(
            dict(tau=float(tau), chains=len(group), mean=mean, low=low, high=high, verdict=verdict, reason=reason)
        )
    if not parts:
        return INCONCLUSIVE, "no cold run", parts
    verdict, reason = rule_every_part([p["verdict"] for p in parts], [f"τ={p['tau']:g}" for p in parts])
    return verdict, f"near the start = below {near:g}; {reason}", parts


def worst_cold_part(parts: list[dict]) -> dict | None:
    """The cold temperature that decides cold_chains_stay: a differing one first, then an undecided one, then
    the one with the largest upper bound (None with no part)."""
    order = {DIFFERS: 0, INCONCLUSIVE: 1}
    return min(
        parts, key=lambda p: (order.get(p["verdict"], 2), -(p["high"] if finite(p["high"]) else math.inf)), default=None
    )


def claim_rows(
    traps: pd.DataFrame,
    summaries: dict,
    cold: pd.DataFrame,
    *,
    model: str,
    setup: dict,
    log_vocab: float,
    window: int,
    null=(),
    paper_tau: float = PAPER_TAU,
    seed: int = 0,
) -> list[dict]:
    """Every claims row of the chapter (appendix A.1, Table 4, C.2, C.3), each judged on the traps of the
    paper's temperature only (other temperatures are the chapter's own labelled table rows, not verdicts); with
    no run at that temperature the trap rows are "not run here". `null`: null_durations of the run at
    `paper_tau` (approximate_trap_duration's null). The model-specific rows go through model_specific_row."""
    at = f"τ = {paper_tau:g}"
    here = traps[np.isclose(traps.temperature, paper_tau)] if len(traps) else traps
    ran = paper_tau in summaries
    general = (
        [
            _split_row(here, at),
            _duration_row(here, np.asarray(null, float), window, at, seed),
            _correlation_row(here, at, seed),
            _weakest_row(here, at),
        ]
        if ran
        else _not_run_rows(at)
    )
    summary = summaries.get(paper_tau) or trap_summary(here, 1, 1)
    missing = f"no trap at {at}" if ran else f"no chain at {at}"
    measured = dict(model=model, setup=setup)
    return [
        *general,
        _cold_row(cold),
        _count_row(summary, at, **measured),
        _perfect_share_row(summary, at, missing, **measured),
        _mean_duration_row(summary, at, missing, **measured),
        _below_lnv_row(here, log_vocab, paper_tau, at, missing, **measured),
    ]


TRAP_CLAIMS = ("trap_split", "approximate_trap_duration", "mean_gap_correlation", "escape_weakest_site")


def _not_run_rows(at: str) -> list[dict]:
    """The trap claims of a run with no chain at the paper's temperature: not run here."""
    return [
        claim_row(
            claim,
            "—",
            math.nan,
            f"no chain at the paper's {at}",
            NOT_RUN,
            f"the run has no chain at the paper's {at}",
            at,
        )
        for claim in TRAP_CLAIMS
    ]


def _split_row(here: pd.DataFrame, at: str) -> dict:
    """trap_split (judge_split), saying when the run is too small for an absent kind to differ."""
    verdict, reason, text = judge_split(here)
    count, perfect = len(here), int((here.kind == "perfect").sum())
    needed = math.ceil(3.84 / 0.1)  # rule_both_kinds' default rare share
    if verdict != REPRODUCED and 0 < count < needed:
        reason += (
            f"; with {count} < {needed} traps an absent kind cannot reach differs (the paper's own "
            f"{int(paper_counts()['count'])} could not either)"
        )
    return claim_row(
        "trap_split",
        "perfect / all traps",
        perfect / count if count else math.nan,
        text,
        verdict,
        f"at {at}: {reason}",
        at,
    )


def _duration_row(here: pd.DataFrame, null: np.ndarray, window: int, at: str, seed: int) -> dict:
    """approximate_trap_duration (judge_approximate_duration): the ended approximate traps over the null's."""
    verdict, reason, ratio, low, high = judge_approximate_duration(here, null, seed=seed)
    kept = int(((here.kind == "approximate") & ~here.censored).sum()) if len(here) else 0
    counts = f"{_count_text(kept, 'ended approximate trap')}, {len(null)} null traps"
    estimate = interval_text(ratio, low, high, missing="") if finite(low, high) else f"{ratio:.2f}"
    text = f"{estimate} ({counts})" if finite(ratio) else f"not estimated: {counts}"
    return claim_row(
        "approximate_trap_duration",
        "mean ended approximate-trap duration / the detector's on a "
        f"surrogate without collective persistence (window {window} steps)",
        ratio,
        text,
        verdict,
        f"at {at}, null a ratio of {DURATION_FACTOR:g}: {reason}",
        at,
        low=low,
        high=high,
        null=DURATION_FACTOR,
    )


def _correlation_row(here: pd.DataFrame, at: str, seed: int) -> dict:
    """mean_gap_correlation (judge_gap_correlation): rho(duration, mean gap) - rho(duration, min gap)."""
    verdict, reason, s = judge_gap_correlation(here, seed=seed)
    value = s["rho_difference"]
    if finite(value):
        minus = f"({s['rho_min']:.2f})" if s["rho_min"] < 0 else f"{s['rho_min']:.2f}"
        text = f"{s['rho_mean']:.2f} - {minus} = " + interval_text(
            value, s["difference_low"], s["difference_high"], missing="the bootstrap gave no interval"
        )
    else:
        text = f"not estimated: {_count_text(len(here), 'trap')} at {at}"
    return claim_row(
        "mean_gap_correlation",
        "ρ(duration, mean gap) - ρ(duration, min gap)",
        value,
        text,
        verdict,
        f"at {at}, gaps unscaled, null 0: {reason}",
        at,
        low=s["difference_low"],
        high=s["difference_high"],
        null=0.0,
    )


def _weakest_row(here: pd.DataFrame, at: str) -> dict:
    """escape_weakest_site (judge_weakest_site): final escapes at a weakest site against the kernel's share."""
    verdict, reason, hits, tries, chance, low, high = judge_weakest_site(here)
    text = (
        share_text(hits, tries) + f" final escapes at a weakest site; kernel's share {chance:.2f}"
        if tries
        else "no trap ended inside the run"
    )
    return claim_row(
        "escape_weakest_site",
        "share of final escapes from the held state at a weakest site",
        hits / tries if tries else math.nan,
        text,
        verdict,
        f"at {at}, null the kernel's one-step share at the held states: {reason}",
        at,
        low=low,
        high=high,
        null=chance,
    )


def _cold_row(cold: pd.DataFrame) -> dict:
    """cold_chains_stay (judge_cold), shown at its worst cold temperature with that temperature's interval."""
    verdict, reason, parts = judge_cold(cold)
    text = "; ".join(
        f"τ={p['tau']:g}: " + interval_text(p["mean"], p["low"], p["high"], digits=3, missing=f"{p['chains']} chain(s)")
        for p in parts
    )
    worst = worst_cold_part(parts) or dict(mean=math.nan, low=math.nan, high=math.nan)
    return claim_row(
        "cold_chains_stay",
        "mean distance from the start after the cold run, at the worst "
        "cold temperature" + (f" (τ = {worst['tau']:g})" if parts else ""),
        worst["mean"],
        text or "no cold run",
        verdict,
        reason,
        ", ".join(f"τ = {p['tau']:g}" for p in parts) or "—",
        low=worst["low"],
        high=worst["high"],
        null=NEAR_START,
    )


def _count_row(s: dict, at: str, *, model: str, setup: dict) -> dict:
    """trap_count (Table 4): the traps found, with an exact Poisson interval over the run's exposure."""
    found, exposure = s["count"], setup["chains"] * setup["steps"] / 10_000
    low, high = s["rate_low"] * exposure, s["rate_high"] * exposure
    text = f"{found} (95% Poisson {low:.1f} to {high:.1f}; rate {s['rate_per_10k']:.2f} per chain per 10k steps)"
    return model_specific_row(
        "trap_count", f"traps detected at {at}", found, text, model=model, setup=setup, low=low, high=high
    )


def _perfect_share_row(s: dict, at: str, missing: str, *, model: str, setup: dict) -> dict:
    """perfect_trap_share (Table 4): perfect traps among all, with a Wilson interval."""
    text = share_text(s["perfect"], s["count"]) if s["count"] else missing
    return model_specific_row(
        "perfect_trap_share",
        f"perfect / all traps at {at}",
        s["perfect_share"],
        text,
        model=model,
        setup=setup,
        low=s["perfect_low"],
        high=s["perfect_high"],
    )


def _mean_duration_row(s: dict, at: str, missing: str, *, model: str, setup: dict) -> dict:
    """trap_mean_duration (Table 4): the mean duration in steps, with a bootstrap interval."""
    text = interval_text(s["mean_duration"], s["duration_low"], s["duration_high"], digits=0, missing=missing)
    return model_specific_row(
        "trap_mean_duration",
        f"mean trap duration at {at} (steps)",
        s["mean_duration"],
        text,
        model=model,
        setup=setup,
        low=s["duration_low"],
        high=s["duration_high"],
    )


def _below_lnv_row(
    here: pd.DataFrame, log_vocab: float, tau: float, at: str, missing: str, *, model: str, setup: dict
) -> dict:
    """delta_star_below_lnv (A.1): the share of traps whose Delta*/tau is below ln|V|, with a Wilson interval."""
    count = len(here)
    if not count:
        return model_specific_row(
            "delta_star_below_lnv",
            f"share of traps at {at} with Δ*/τ < ln|V|",
            math.nan,
            missing,
            model=model,
            setup=setup,
        )
    below = int(((here.min_gap / tau) < log_vocab).sum())
    low, high = (float(v[0]) for v in share_intervals([below], [count]))
    text = share_text(below, count) + f" (ln|V| = {log_vocab:.2f}, largest Δ*/τ {here.min_gap.max() / tau:.2f})"
    return model_specific_row(
        "delta_star_below_lnv",
        f"share of traps at {at} with Δ*/τ < ln|V|",
        below / count,
        text,
        model=model,
        setup=setup,
        low=low,
        high=high,
    )


# --------------------------------------------------------------------------------------------
# The notebook's settings, tables and sentences
# --------------------------------------------------------------------------------------------


TABLE4 = paper_protocol("trap_count")  # the paper's Table 4 protocol (chains, steps, tau, window, threshold)
COLD_PROTOCOL = paper_protocol("cold_chains_stay")  # appendix C.3's cold chains (steps, temperatures)
_SHARED = dict(
    threshold=float(TABLE4["threshold"]),
    passages="bbc",
    cold_temperatures=[float(t) for t in COLD_PROTOCOL["temperatures"].split()],
)
# Per profile (see the notebook's table): n, chains per temperature, steps, cold-chain steps, record spacing,
# temperatures (the paper's tau first). No window: 15 sweeps of the sequence (15 n steps).
SETTINGS = {
    "smoke": {
        "seq_len": 8,
        "n_chains": 3,
        "steps": 240,
        "cold_steps": 48,
        "record_every": 8,
        "temperatures": [1.0, 0.5],
        **_SHARED,
    },
    "quick": {
        "seq_len": 12,
        "n_chains": 16,
        "steps": 1_000,
        "cold_steps": 400,
        "record_every": 10,
        "temperatures": [1.0, 0.5],
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
        **_SHARED,
        "passages": "ms_marco",
    },
}


def settings(profile: str, cond=None, **overrides) -> SimpleNamespace:
    """The chapter's settings (appendix A.1's protocol at this profile): SETTINGS[profile] with the overrides
    (profile_settings: None, 0, "", [] keep the profile's), then what follows from them: a run length that is a
    whole number of record spacings; the drift window, the profile's or 15 sweeps (15 n steps: the paper's 300
    steps if its passages had 20 tokens, which the paper does not state), rounded to a multiple of the record
    spacing; the cold chains' steps, at most the warm run's and a multiple of its record spacing (so the warm
    chain's distance after as many steps is a recorded one); and the seed passages for `cond` (seed_source: a
    protein model takes germline V genes; names from book_tools.PASSAGE_NAMES)."""
    cfg = profile_settings(profile, SETTINGS, **overrides)
    if cfg.passages not in PASSAGE_NAMES:
        raise ValueError(f"passages must be one of {sorted(PASSAGE_NAMES)}, got {cfg.passages!r}")
    record = cfg.record_every
    steps = cfg.steps - cfg.steps % record  # records evenly spaced
    window = getattr(cfg, "window", 0) or 15 * cfg.seq_len
    cold = min(cfg.cold_steps, steps)
    return SimpleNamespace(
        **vars(cfg)
        | dict(
            steps=steps,
            window=max(record, round(window / record) * record),
            cold_steps=max(record, cold - cold % record),
            passages=seed_source(cond, cfg.passages),
        )
    )


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


def trap_table(cond: Conditionals, runs: dict, found: dict) -> pd.DataFrame:
    """Every temperature's catalogue joined with its escape events, its departures from the held states and
    the kernel's share of exit probability at the weakest sites, one row per trap (index `trap`)."""
    tables = []
    for tau, catalogue in found.items():
        run = runs[tau][0]
        states, gaps = catalogue.state.tolist(), catalogue.gaps.tolist()
        events = escape_events(run, catalogue, states, gaps)
        moves = departure_counts(run, catalogue, states, gaps)
        share = kernel_weakest_share(cond, states, gaps, tau) if len(catalogue) else np.empty(0)
        tables.append(catalogue.join(events).join(moves).assign(kernel_share=share))
    traps = pd.concat(tables, ignore_index=True).rename_axis("trap").reset_index()
    return traps.astype(
        {
            "escaped": bool,
            "at_weakest": bool,
            "temperature": float,
            "duration": int,
            "departures": int,
            "departures_at_weakest": int,
            "kernel_share": float,
        }
    )


def site_table(traps: pd.DataFrame) -> pd.DataFrame:
    """One row per (trap, site): the held token and its score gap (model and profile columns kept)."""
    keep = [c for c in ("trap", "temperature", "model", "profile") if c in traps]
    rows = [
        dict(zip(keep, values), site=site, token=token, gap=gap)
        for values, state, gaps in zip(traps[keep].itertuples(index=False), traps.state, traps.gaps)
        for site, (token, gap) in enumerate(zip(state, gaps))
    ]
    return pd.DataFrame(rows, columns=[*keep, "site", "token", "gap"])


def summary_frame(summaries: dict) -> pd.DataFrame:
    """trap_summary of every temperature, one row each (the chapter's summary.csv)."""
    return pd.DataFrame([dict(temperature=tau, **s) for tau, s in summaries.items()])


def drift_figure(runs: dict, found: dict, window: int, threshold: float, chains: int = 3):
    """The rolling drift D_t of appendix A.1 for the first `chains` chains of each temperature (one panel per
    temperature), with the threshold dashed and the detected traps shaded; returns the Figure."""
    import matplotlib.pyplot as plt

    shown = min(chains, len(next(iter(runs.values()))[1]))
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 2.6 * len(runs)), sharex=True, squeeze=False)
    for ax, (tau, (trajectory, vectors)) in zip(axes[:, 0], runs.items()):
        drift = window_drift(vectors, trajectory.steps, window)
        for chain in range(shown):
            ax.plot(trajectory.steps[: drift.shape[1]], drift[chain], lw=1, label=f"chain {chain}")
        for row in found[tau][found[tau].chain < shown].itertuples():
            ax.axvspan(row.start, row.end, color=f"C{row.chain}", alpha=0.15)
        ax.axhline(threshold, color="black", ls="--", lw=1)
        ax.set_ylim(bottom=0)
        ax.set(ylabel=f"$D_t$ ({window}-step window)", title=rf"Rolling drift, $\tau$ = {tau:g} (shaded: traps)")
    axes[0, 0].legend(fontsize=8, ncol=shown)
    axes[-1, 0].set(xlabel="window start $t$ (Glauber step)")
    return fig


def catalogue_view(traps: pd.DataFrame, per_temperature: int = 8):
    """Table 4's shape as a reading table: the longest traps of each temperature with their mean and minimum
    gap, class and text (None, with a sentence, when there is none)."""
    if traps.empty:
        print("No trap was detected at any temperature of this run.")
        return None
    table = traps.sort_values(["temperature", "duration"], ascending=False).rename(
        columns={"temperature": "τ", "mean_gap": "mean gap", "min_gap": "min gap (Δ*)", "kind": "type"}
    )
    columns = ["τ", "duration", "mean gap", "min gap (Δ*)", "type", "text"]
    return reading_table(
        table.groupby("τ", sort=False).head(per_temperature)[columns],
        {"τ": "{:g}", "mean gap": "{:.2f}", "min gap (Δ*)": "{:.2f}"},
    )


def theorem8_table(traps: pd.DataFrame, rows: int = 10):
    """Theorem 8's bound e^(Delta*/tau) / (4 |V|) beside the observed duration, as a reading table: the paper's
    strongest trap (its numbers from paper_claims.csv), then our perfect traps by Delta* (the first `rows`)."""
    columns = ["temperature", "duration", "min_gap", "theorem8_bound", "text"]
    paper = pd.DataFrame(
        [
            dict(
                temperature=1.0,
                duration=paper_number("delta_star_below_lnv", "trap1_duration"),
                min_gap=paper_number("delta_star_below_lnv", "trap1_gap"),
                theorem8_bound=paper_number("delta_star_below_lnv", "trap1_bound"),
                text="paper's trap 1: a string of periods (BERT)",
            )
        ]
    )
    ours = traps[traps.kind == "perfect"][columns].sort_values("min_gap", ascending=False)
    table = (
        (pd.concat([paper, ours], ignore_index=True) if len(ours) else paper)
        .head(rows)
        .rename(columns={"temperature": "τ", "min_gap": "Δ*", "theorem8_bound": "Theorem 8 bound (steps)"})
    )
    return reading_table(
        table, {"τ": "{:g}", "duration": "{:,.0f}", "Δ*": "{:.2f}", "Theorem 8 bound (steps)": "{:.2e}"}
    )


def correlation_table(summaries: dict):
    """Spearman correlations of duration with the mean and the minimum gap (appendix A.1), one row per
    temperature (gaps unscaled; never pooled across temperatures), with the difference and its 95% bootstrap
    interval; the paper's temperature is the judged one."""
    rows = [
        {
            "τ": f"{tau:g}" + (" (judged)" if tau == PAPER_TAU else ""),
            "traps": s["count"],
            "ρ(duration, mean gap)": s["rho_mean"],
            "ρ(duration, min gap)": s["rho_min"],
            "difference [95%]": interval_text(
                s["rho_difference"], s["difference_low"], s["difference_high"], missing="—"
            ),
        }
        for tau, s in summaries.items()
    ]
    return reading_table(pd.DataFrame(rows), {"ρ(duration, mean gap)": "{:.2f}", "ρ(duration, min gap)": "{:.2f}"})


def escape_view(traps: pd.DataFrame, tokenizer, rows: int = 8):
    """The longest traps that ended inside the run (appendix C.2), as a reading table: the escape's site, the
    token it replaced and its replacement, the new token's probability and the rank of that site's gap (0 =
    weakest). None, with a sentence, when no trap ended."""
    escaped = traps[traps.escaped].sort_values("duration", ascending=False)
    if escaped.empty:
        print("No trap ended inside the run, so there is no escape to show.")
        return None
    names = tokenizer.convert_ids_to_tokens
    escaped = escaped.assign(
        change=[f"{names(int(a))} → {names(int(b))}" for a, b in zip(escaped.old_token, escaped.new_token)]
    )
    table = escaped[["temperature", "duration", "escape_site", "change", "escape_prob", "site_rank"]].head(rows)
    return reading_table(
        table.rename(
            columns={"temperature": "τ", "escape_site": "site", "escape_prob": "p(new token)", "site_rank": "gap rank"}
        ),
        {"τ": "{:g}", "p(new token)": "{:.3f}"},
    )


def distance_at(vectors, steps, step: int) -> torch.Tensor:
    """d(x_step, x_0) = 1 - cos(phi(x_step), phi(x_0)) per chain, from unit-norm embeddings [B, R, d] recorded
    at `steps`; `step` must be a recorded step."""
    steps = torch.as_tensor(steps)
    where = (steps == step).nonzero()
    if len(where) != 1:
        raise ValueError(f"step {step} is not one of the recorded steps")
    k = int(where[0, 0])
    return 1.0 - (vectors[:, k] * vectors[:, 0]).sum(-1)


def cold_view(cold: pd.DataFrame, warm_tau: float):
    """Appendix C.3 as a reading table, per cold temperature: the chains' mean distance from the start with its
    95% t interval and the part verdict of judge_cold (against NEAR_START), the warm chains' distance over as
    many steps for reference, and the paper's distance for that temperature (BERT)."""
    paper = parse_pairs(paper_claim("cold_chains_stay")["values"])
    warm = cold.groupby("temperature", sort=False).warm_distance.mean()
    _, _, parts = judge_cold(cold)
    rows = [
        {
            "τ": p["tau"],
            "chains": p["chains"],
            "distance [95%]": interval_text(p["mean"], p["low"], p["high"], digits=3, missing="no chain"),
            "verdict": p["verdict"],
            f"warm (τ = {warm_tau:g})": warm[p["tau"]],
            "paper (BERT)": paper.get("tau" + f"{p['tau']:g}".replace(".", ""), "—"),
        }
        for p in parts
    ]
    return reading_table(pd.DataFrame(rows), {"τ": "{:g}", f"warm (τ = {warm_tau:g})": "{:.3f}"})


def _traps_text(summary: dict) -> str:
    count = summary["count"]
    return f"{_count_text(count, 'trap')}" if count else "no trap"


def setup_phrases(cfg, cond) -> dict:
    """Sentences for the chapter's opening: the paper's Table 4 protocol, C.3's cold chains, the vocabulary
    size and ln(4|V|)."""
    vocab = int(cond.allowed.sum())
    return {
        "table4": f"{int(TABLE4['chains'])} chains of {int(TABLE4['steps']):,} steps at τ = {TABLE4['tau']}, "
        f"a {TABLE4['window']}-step window and a drift threshold of {TABLE4['threshold']}",
        "paper_cold_steps": f"{int(COLD_PROTOCOL['steps']):,}",
        "vocab": f"{vocab:,}",
        "log_4v": f"{math.log(4 * vocab):.1f}",
        "cold_steps": f"{cfg.cold_steps:,}",
        "cold_taus": " and ".join(f"{t:g}" for t in cfg.cold_temperatures) or "none",
    }


def run_phrases(traps: pd.DataFrame, summaries: dict, median_drift: dict, rows: list[dict], cfg) -> dict:
    """Every sentence the chapter's closing section quotes (the verdicts are glued by ChapterRun.claims), one per
    case the run can produce; `rows`: claim_rows."""
    claims = pd.DataFrame(rows).set_index("claim")
    again = (
        traps.groupby(["temperature", "chain"]).text.transform(lambda texts: texts.duplicated())
        if len(traps)
        else pd.Series(dtype=bool)
    )
    return {
        "run": f"{cfg.n_chains} chains of {cfg.steps:,} steps per temperature, n = {cfg.seq_len}, "
        f"window {cfg.window} steps, profile {cfg.profile}",
        **_temperature_phrases(summaries, median_drift),
        "setup_differences": claims.setup.get("trap_count", "—"),
        "theorem8": _theorem8_phrase(traps),
        "repeat_traps": f"{int(again.sum())} of {len(traps)}",
        "weakest": _weakest_phrase(traps[np.isclose(traps.temperature, PAPER_TAU)] if len(traps) else traps),
        "paper_tau": f"{PAPER_TAU:g}",
        "paper_tau_traps": _traps_text(summaries[PAPER_TAU]) if PAPER_TAU in summaries else "no run",
        "rho": claims.loc["mean_gap_correlation"].ours_text,
        "cold_summary": claims.loc["cold_chains_stay"].ours_text,
        "near_start": f"{NEAR_START:g}",
        "duration_factor": f"{DURATION_FACTOR:g}",
    }


def _temperature_phrases(summaries: dict, median_drift: dict) -> dict:
    """The first ("hot") and last ("cold") temperature of the run: its drift, traps and perfect traps."""
    taus = list(summaries)
    phrases = {}
    for tag, tau in (("hot", taus[0]), ("cold", taus[-1])):
        s = summaries[tau]
        phrases |= {
            f"{tag}_tau": f"{tau:g}",
            f"{tag}_drift": f"{median_drift[tau]:.2f}",
            f"{tag}_traps": _traps_text(s),
            f"{tag}_perfect": f"{s['perfect']} ({s['perfect_share']:.0%})" if s["count"] else "none",
        }
    return phrases


def _theorem8_phrase(traps: pd.DataFrame) -> str:
    """Theorem 8's bound against the observed lifetimes of our perfect traps."""
    perfect = traps[traps.kind == "perfect"]
    if perfect.empty:
        return "we found no perfect trap, so there is no bound to set against a lifetime"
    factor = (perfect.duration / perfect.theorem8_bound).min()
    return (
        f"for our {_count_text(len(perfect), 'perfect trap')} the largest bound is "
        f"{perfect.theorem8_bound.max():.2g} steps, and every observed duration exceeds its bound by a factor "
        f"of at least {factor:.2g}"
    )


def _weakest_phrase(at: pd.DataFrame) -> str:
    """Where the final escapes of the paper's temperature came, against the kernel's and a uniform site's share."""
    _, _, hits, tries, chance, _, _ = judge_weakest_site(at)
    if tries == 0:
        return f"no trap at τ = {PAPER_TAU:g} ended inside the run, so there is no final escape to place"
    return (
        f"at τ = {PAPER_TAU:g}, {hits} of {tries} final escapes came at a weakest-gap site, against "
        f"{chance:.0%} that the kernel's one-step law puts there ({int(at.departures_at_weakest.sum())} of all "
        f"{int(at.departures.sum())} departures, and {weakest_site_chance(at[at.escaped].gaps):.0%} for a "
        "uniformly chosen site)"
    )
