"""Chapter 4 on a protein MLM: a germline-reversion basin (section 6.2's basins, ours, beyond the paper).

A human germline V gene is where an antibody starts before somatic mutation; a model trained on mature antibodies
may pull a mutated gene back to it. We start Glauber chains at germline genes (the whole gene from FR1, `context`
residues, every site free) with k substitutions at IMGT framework sites (FR1, FR2, FR3), and ask whether after T
steps the mutated sites are back at the germline residue more often than the unmutated framework sites have left
it. Shares are over the sites the chain has updated at least once (a site it never drew keeps its residue and says
nothing about the model; random scan picks sites regardless of the state, so this conditioning is fair). The
per-chain estimate is `difference` = reverted share - left share; judging.reversion_verdict judges it
(verdicts.rule_reversion), every temperature of the profile's grid.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from glauber_core import Trajectory, check_count, check_tokens, germline_regions

# IMGT's framework regions of a V gene (germline_regions' names); the rest (CDR1, CDR2) is left unmutated
FRAMEWORK = ("fr1", "fr2", "fr3")

REVERSION_COLUMNS = [
    "temperature",
    "chain",
    "gene",
    "substitutions",
    "step",
    "mutated",
    "mutated_visited",
    "reverted",
    "kept",
    "kept_visited",
    "left",
    "reverted_share",
    "left_share",
    "difference",
    "context",
    "free",
]


def framework_sites(alleles, n: int) -> torch.Tensor:
    """BoolTensor[G, n]: True at each allele's IMGT framework residues (FRAMEWORK, by germline_regions) among its
    first n residues from FR1, the residues of a germline seed of n residues (seed_passages, passages="germline")."""
    n = check_count(n, "n", 1)
    alleles = list(alleles)
    if not alleles:
        raise ValueError("need at least one allele")
    mask = torch.zeros(len(alleles), n, dtype=torch.bool)
    for row, allele in enumerate(alleles):
        for name, (start, end) in germline_regions(allele).items():
            if name in FRAMEWORK:
                mask[row, start : min(end, n)] = True
    return mask


def mutate_framework(cond, germline, framework, substitutions, *, genes=None, seed: int = 0) -> SimpleNamespace:
    """The reversion chains' starts: for each count k of `substitutions` (in order) and each germline row g of
    germline [G, n], g with k of its framework sites (framework [G, n], chosen uniformly without replacement) each
    set to a uniformly chosen allowed token other than g's (seeded by a torch generator). Chains of one k are
    contiguous, B = len(substitutions) * G. Returns SimpleNamespace(tokens, germline [B, n], mutated, framework
    (BoolTensor[B, n]), row (LongTensor[B], the germline's row), substitutions (LongTensor[B]), genes (names per
    chain; `genes` names the germlines, default "germline g"))."""
    germline = check_tokens(cond, germline, "germline").cpu()
    framework = torch.as_tensor(framework, dtype=torch.bool)
    framework = framework[None] if framework.dim() == 1 else framework
    if framework.shape != germline.shape:
        raise ValueError(f"framework must be a mask of the germlines' shape {tuple(germline.shape)}")
    counts = [check_count(k, "substitutions", 0) for k in substitutions]
    if not counts:
        raise ValueError("substitutions must name at least one count k >= 0")
    room = int(framework.sum(1).min())
    if max(counts) > room:
        raise ValueError(f"k = {max(counts)} substitutions exceed the {room} framework sites of a germline")
    genes = [f"germline {g}" for g in range(len(germline))] if genes is None else list(genes)
    if len(genes) != len(germline):
        raise ValueError(f"{len(genes)} gene names for {len(germline)} germlines")
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    if len(allowed) < 2:
        raise ValueError("a substitution needs at least two allowed tokens")
    generator = torch.Generator().manual_seed(int(seed))
    rows = torch.arange(len(germline)).repeat(len(counts))
    tokens, mutated = germline[rows].clone(), torch.zeros(len(rows), germline.shape[1], dtype=torch.bool)
    for chain, (row, k) in enumerate(zip(rows.tolist(), np.repeat(counts, len(germline)))):
        sites = framework[row].nonzero().squeeze(1)
        for site in sites[torch.randperm(len(sites), generator=generator)[:k]].tolist():
            others = allowed[allowed != germline[row, site]]
            tokens[chain, site] = others[torch.randint(len(others), (1,), generator=generator)].item()
            mutated[chain, site] = True
    return SimpleNamespace(
        tokens=tokens,
        germline=germline[rows],
        mutated=mutated,
        framework=framework[rows],
        row=rows,
        substitutions=torch.tensor(np.repeat(counts, len(germline)), dtype=torch.long),
        genes=[genes[r] for r in rows.tolist()],
    )


def visited_sites(run: Trajectory, n: int) -> torch.Tensor:
    """BoolTensor[B, R, n]: whether each site was updated at least once by each record's step (run.sites, the
    site of every step)."""
    batch, steps = run.sites.shape
    first = torch.full((batch, n), steps + 1, dtype=torch.long)  # the step of each site's first update
    step = torch.arange(1, steps + 1, dtype=torch.long).expand(batch, steps)
    first.scatter_reduce_(1, run.sites.long(), step, reduce="amin")
    return first[:, None, :] <= run.steps.long()[None, :, None]


def reversion_frame(starts: SimpleNamespace, runs: dict) -> pd.DataFrame:
    """Per temperature (runs: temperature -> the Trajectory of chains started at starts.tokens), chain and recorded
    step: of the `mutated` sites, those the chain has updated (`mutated_visited`) and those back at their germline
    residue (`reverted`: a site back was updated); of the `kept` (unmutated framework) sites, those updated
    (`kept_visited`) and those off theirs (`left`); reverted_share = reverted / mutated_visited, left_share = left /
    kept_visited (NaN with no site visited) and `difference` = reverted_share - left_share (NaN for k = 0), the
    per-chain estimate the verdict reads at the last step; `context` residues a state, `free` sites (every one).
    Columns REVERSION_COLUMNS."""
    frames = []
    for temperature, run in runs.items():
        if not isinstance(run, Trajectory) or run.tokens.shape[0::2] != starts.tokens.shape:
            raise ValueError("each run must be a Trajectory of the chains started at starts.tokens")
        batch, records, n = run.tokens.shape
        at_germline, visited = run.tokens == starts.germline[:, None], visited_sites(run, n)  # [B, R, n]
        mutated, kept = starts.mutated[:, None], (starts.framework & ~starts.mutated)[:, None]
        frame = pd.DataFrame(
            {
                "temperature": float(temperature),
                "chain": np.repeat(np.arange(batch), records),
                "gene": np.repeat(np.asarray(starts.genes, dtype=object), records),
                "substitutions": np.repeat(starts.substitutions.numpy(), records),
                "step": np.tile(run.steps.numpy(), batch),
                "mutated": mutated.sum(2).expand(batch, records).reshape(-1).numpy(),
                "mutated_visited": (visited & mutated).sum(2).reshape(-1).numpy(),
                "reverted": (at_germline & mutated).sum(2).reshape(-1).numpy(),
                "kept": kept.sum(2).expand(batch, records).reshape(-1).numpy(),
                "kept_visited": (visited & kept).sum(2).reshape(-1).numpy(),
                "left": (~at_germline & kept).sum(2).reshape(-1).numpy(),
            }
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            frame["reverted_share"] = np.where(
                frame.mutated_visited > 0, frame.reverted / frame.mutated_visited, np.nan
            )
            frame["left_share"] = np.where(frame.kept_visited > 0, frame.left / frame.kept_visited, np.nan)
        frame["difference"] = frame.reverted_share - frame.left_share
        frames.append(frame.assign(context=n, free=n))
    if not frames:
        raise ValueError("runs must hold at least one temperature")
    return pd.concat(frames, ignore_index=True)[REVERSION_COLUMNS]


def reversion_ends(frame: pd.DataFrame) -> pd.DataFrame:
    """reversion_frame's rows at each temperature's last recorded step (after T steps): one row a chain."""
    last = frame.groupby("temperature").step.transform("max")
    return frame[frame.step == last].reset_index(drop=True)


def reversion_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per temperature and substitution count k, at the last step: chains, mean reverted share (NaN for k = 0),
    mean left share and mean difference (over chains with the share defined), with the context and free sites."""
    ends = reversion_ends(frame)
    return (
        ends.groupby(["temperature", "substitutions"])
        .agg(
            chains=("chain", "size"),
            reverted_share=("reverted_share", "mean"),
            left_share=("left_share", "mean"),
            difference=("difference", "mean"),
            context=("context", "first"),
            free=("free", "first"),
        )
        .reset_index()
    )
