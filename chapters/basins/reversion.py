"""Chapter 4 on a protein MLM: a germline-reversion basin (section 6.2's basins, ours, beyond the paper).

A human germline V gene is where an antibody starts before somatic mutation; a model trained on mature antibodies
may pull a mutated gene back to it. We start Glauber chains at germline genes (the whole gene from FR1, `context`
residues, every site free) with k substitutions at IMGT framework sites (FR1, FR2, FR3), and ask whether after T
steps the mutated sites are back at the germline residue more often than the unmutated framework sites have left
it. Shares are over the sites the chain has updated at least once (a site it never drew keeps its residue and says
nothing about the model; random scan picks sites regardless of the state, so this conditioning is fair). The
per-chain estimate is `difference` = reverted share - left share, against its value with no pull toward the germline
(conditionals uniform over the `alphabet` of |V| tokens: 2/|V| - 1); judging.reversion_verdict judges it
(verdicts.rule_reversion), each temperature of the profile's grid its own claim.

What protein-MLM users read beside it, shown and never judged: the chains' pseudo-log-likelihood (the model's own
score of a sequence), the per-site entropy of its conditionals at the chains' end states (a sequence logo), the
rates of change of each IMGT region, and any antibody of the user's as one more seed, started at its somatic
mutations and asked whether it walks back to its nearest human germline V gene.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from glauber_core import (
    GERMLINE_CONTEXT,
    Trajectory,
    check_count,
    check_tokens,
    conditional_log_probs,
    germline_regions,
    germline_v_genes,
)

# IMGT's framework regions of a V gene (germline_regions' names); the rest (CDR1, CDR2) is left unmutated
FRAMEWORK = ("fr1", "fr2", "fr3")

# IMGT's regions of a V gene in order (germline_regions' names): the gene ends in FR3, before any CDR3
REGIONS = ("fr1", "cdr1", "fr2", "cdr2", "fr3")

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
    "alphabet",
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
    chain; `genes` names the germlines, default "germline g"), alphabet (|V|, the allowed tokens))."""
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
        alphabet=len(allowed),
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
    per-chain estimate the verdict reads at the last step; `alphabet` (starts.alphabet, |V|: the no-pull
    difference is 2/|V| - 1), `context` residues a state, `free` sites (every one). Columns REVERSION_COLUMNS."""
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
        frames.append(frame.assign(alphabet=int(starts.alphabet), context=n, free=n))
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


# --------------------------------------------------------------------------------------------
# Any antibody as a seed: its nearest human germline V gene and its somatic mutations
# --------------------------------------------------------------------------------------------


def antibody_start(cond, sequence: str, context: int = GERMLINE_CONTEXT) -> SimpleNamespace:
    """A user's antibody as one more reversion seed (ours, beyond the paper): `sequence` (a variable domain from
    FR1; cond.encode raises ValueError on a letter outside the 20 residues) aligned without indels to the human
    germline V gene (germline_v_genes) of highest identity over their common prefix, both cut to the shorter
    length and at most `context` residues (ties: the first gene in germline_v_genes' order). Its residues that
    differ from that germline are its somatic mutations. Returns mutate_framework's namespace for the one chain
    (tokens [1, L], germline, mutated, framework, row, substitutions = its mutation count, genes = [the
    allele], alphabet) with `identity`, the share of its L residues at the germline's."""
    context = check_count(context, "context", 1)
    residues = cond.decode(cond.encode(sequence))
    best = (-1.0, "", 0, "")
    for allele, _, _, gene in germline_v_genes():
        length = min(len(residues), len(gene), context)
        identity = sum(a == b for a, b in zip(residues[:length], gene[:length])) / length
        best = max(best, (identity, allele, length, gene), key=lambda candidate: candidate[0])
    identity, allele, length, gene = best
    tokens, germline = cond.encode(residues[:length])[None], cond.encode(gene[:length])[None]
    mutated = tokens != germline
    return SimpleNamespace(
        tokens=tokens,
        germline=germline,
        mutated=mutated,
        framework=framework_sites([allele], length),
        row=torch.tensor([0]),
        substitutions=mutated.sum(1),
        genes=[allele],
        alphabet=int(cond.allowed.sum()),
        identity=identity,
    )


# --------------------------------------------------------------------------------------------
# Pseudo-log-likelihood and per-site entropy of the chains' states
# --------------------------------------------------------------------------------------------


def site_log_probs(cond, states, *, chunk: int = 256) -> torch.Tensor:
    """log p_theta(a | x_-i) at tau = 1 (eq. 3.1), FloatTensor[S, n, V], at every site i of states [S, n]: one
    batched forward per chunk of `chunk` (state, site) rows. V is a protein model's small vocabulary (-inf off
    the allowed tokens)."""
    states, chunk = check_tokens(cond, states, "states").cpu(), check_count(chunk, "chunk", 1)
    count, n = states.shape
    rows, sites = torch.arange(count).repeat_interleave(n), torch.arange(n).repeat(count)
    parts = [conditional_log_probs(cond, states[r], i).cpu() for r, i in zip(rows.split(chunk), sites.split(chunk))]
    return torch.cat(parts).reshape(count, n, -1)


def pseudo_log_likelihood(cond, states, *, log_probs: torch.Tensor | None = None, chunk: int = 256) -> torch.Tensor:
    """The pseudo-log-likelihood PLL(x) = sum_i log p_theta(x_i | x_-i) at tau = 1 over every site of each state
    [S, n], Tensor[S] in fp64 (the antiberty package reports PLL / n, the per-residue mean). `log_probs`:
    site_log_probs of the states, when already scored."""
    states = check_tokens(cond, states, "states").cpu()
    log_probs = site_log_probs(cond, states, chunk=chunk) if log_probs is None else log_probs
    return log_probs.gather(2, states[..., None]).squeeze(2).double().sum(1)


def record_picks(records: int, count: int) -> torch.Tensor:
    """`count` of a run's `records` record indices: the first, the last and evenly between (fewer if records are
    fewer), LongTensor."""
    records, count = check_count(records, "records", 1), check_count(count, "count", 1)
    return torch.linspace(0, records - 1, min(count, records)).round().long().unique()


def score_records(cond, runs: dict, count: int, *, chunk: int = 256) -> dict:
    """The chains' states scored by site_log_probs: per temperature (runs: temperature -> Trajectory), `count`
    records of every chain (record_picks: its start, its end and evenly between) -> SimpleNamespace(records [R'],
    log_probs [B, R', n, V]). Each distinct state is scored once (the temperatures share their starts)."""
    picks = {tau: record_picks(len(run.steps), count) for tau, run in runs.items()}
    states = [run.tokens[:, picks[tau]].reshape(-1, run.tokens.shape[2]) for tau, run in runs.items()]
    if not states:
        raise ValueError("runs must hold at least one temperature")
    unique, inverse = torch.unique(torch.cat(states), dim=0, return_inverse=True)
    log_probs = site_log_probs(cond, unique, chunk=chunk)[inverse].split([len(s) for s in states])
    return {
        tau: SimpleNamespace(records=picks[tau], log_probs=scores.reshape(*run.tokens[:, picks[tau]].shape, -1))
        for (tau, run), scores in zip(runs.items(), log_probs)
    }


PLL_COLUMNS = ["temperature", "chain", "gene", "substitutions", "step", "pll", "pll_per_residue", "context", "free"]


def pll_frame(starts: SimpleNamespace, runs: dict, scored: dict) -> pd.DataFrame:
    """Per temperature, chain and scored record (score_records' `scored` of `runs`, chains started at
    starts.tokens): the pseudo-log-likelihood `pll` (the sum over the free sites, here every one) and
    `pll_per_residue` (its mean), with gene, substitutions, step, context and free. Columns PLL_COLUMNS."""
    frames = []
    for tau, run in runs.items():
        records, log_probs = scored[tau].records, scored[tau].log_probs
        tokens = run.tokens[:, records]
        pll = log_probs.gather(3, tokens[..., None]).squeeze(3).double().sum(2)  # [B, R']
        batch, size, n = tokens.shape
        frames.append(
            pd.DataFrame(
                {
                    "temperature": float(tau),
                    "chain": np.repeat(np.arange(batch), size),
                    "gene": np.repeat(np.asarray(starts.genes, dtype=object), size),
                    "substitutions": np.repeat(starts.substitutions.numpy(), size),
                    "step": np.tile(run.steps[records].numpy(), batch),
                    "pll": pll.reshape(-1).numpy(),
                    "pll_per_residue": pll.reshape(-1).numpy() / n,
                    "context": n,
                    "free": n,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)[PLL_COLUMNS]


def pll_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """pll_frame per temperature and substitution count k: chains and the mean PLL per residue at the start and
    after the last step, and its change."""
    first = frame.groupby("temperature").step.transform("min")
    last = frame.groupby("temperature").step.transform("max")
    keys = ["temperature", "substitutions"]
    start = frame[frame.step == first].groupby(keys).pll_per_residue.agg(["size", "mean"])
    end = frame[frame.step == last].groupby(keys).pll_per_residue.mean()
    summary = pd.DataFrame({"chains": start["size"], "start": start["mean"], "end": end}).reset_index()
    return summary.assign(change=summary.end - summary.start)


def site_regions(allele: str, n: int) -> np.ndarray:
    """The IMGT region (REGIONS) of each of an allele's first n residues from FR1 (germline_regions)."""
    names = np.full(check_count(n, "n", 1), "", dtype=object)
    for name, (start, end) in germline_regions(allele).items():
        names[start : min(end, n)] = name
    return names


def endpoint_profile(cond, starts: SimpleNamespace, scored: dict) -> pd.DataFrame:
    """The chains' end states as a sequence profile: per temperature (score_records' `scored`), gene and site,
    the mean over the gene's chains of the conditional p_tau(. | x_-i) at the chain's own temperature at its last state (score_records'
    last record; log p_tau = log_softmax(log p_1 / tau)), one column per allowed residue (cond.decode), its
    `entropy` in bits, the site's IMGT `region` and `germline` residue, the gene's `chains`, context and free."""
    allowed = cond.allowed.cpu().nonzero().squeeze(1)
    residues = cond.decode_batch(allowed[:, None])
    genes = list(dict.fromkeys(starts.genes))
    frames = []
    for tau, scores in scored.items():
        log_probs = torch.log_softmax(scores.log_probs[:, -1].double() / tau, -1)[..., allowed]  # [B, n, A]
        n = log_probs.shape[1]
        for gene in genes:
            chains = [c for c, g in enumerate(starts.genes) if g == gene]
            profile = log_probs[chains].exp().mean(0)  # [n, A]
            entropy = -torch.xlogy(profile, profile).sum(1) / np.log(2)
            frame = pd.DataFrame(profile.numpy(), columns=residues)
            frame.insert(0, "entropy", entropy.numpy())
            frame.insert(0, "germline", cond.decode_batch(starts.germline[chains[0]][:, None]))
            frame.insert(0, "region", site_regions(gene, n))
            frame.insert(0, "site", np.arange(n))
            frame.insert(0, "chains", len(chains))
            frame.insert(0, "gene", gene)
            frame.insert(0, "temperature", float(tau))
            frames.append(frame.assign(context=n, free=n))
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------------------------
# Rates of change per IMGT region
# --------------------------------------------------------------------------------------------

REGION_COLUMNS = [
    "temperature",
    "chain",
    "gene",
    "substitutions",
    "region",
    "sites",
    "changed",
    "changed_share",
    "visits",
    "moves",
    "moves_per_visit",
    "context",
    "free",
]


def region_rates(starts: SimpleNamespace, runs: dict) -> pd.DataFrame:
    """Per temperature, chain and IMGT region of its gene (REGIONS; site_regions): the region's `sites`, those
    whose residue after the last step differs from the chain's start (`changed`, `changed_share`), the steps that
    drew one of its sites (`visits`) and those that changed its residue (`moves`, `moves_per_visit`, NaN with no
    visit). Columns REGION_COLUMNS."""
    rows = []
    for tau, run in runs.items():
        batch, _, n = run.tokens.shape
        changed = (run.tokens[:, -1] != run.tokens[:, 0]).long()
        sites = run.sites.long()
        visits = torch.zeros(batch, n, dtype=torch.long).scatter_add_(1, sites, torch.ones_like(sites))
        moves = torch.zeros(batch, n, dtype=torch.long).scatter_add_(
            1, sites, (run.new_tokens != run.old_tokens).long()
        )
        for chain, gene in enumerate(starts.genes):
            regions = site_regions(gene, n)
            for region in REGIONS:
                at = torch.from_numpy(regions == region)
                if at.any():
                    rows.append(
                        dict(
                            temperature=float(tau),
                            chain=chain,
                            gene=gene,
                            substitutions=int(starts.substitutions[chain]),
                            region=region,
                            sites=int(at.sum()),
                            changed=int(changed[chain, at].sum()),
                            visits=int(visits[chain, at].sum()),
                            moves=int(moves[chain, at].sum()),
                            context=n,
                            free=n,
                        )
                    )
    frame = pd.DataFrame(rows)
    frame["changed_share"] = frame.changed / frame.sites
    frame["moves_per_visit"] = frame.moves / frame.visits.where(frame.visits > 0)
    return frame[REGION_COLUMNS]


def region_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """region_rates pooled over the chains of each temperature and region: the share of the region's sites
    changed after the last step and its moves per visit."""
    pooled = frame.groupby(["temperature", "region"], sort=False)[["sites", "changed", "visits", "moves"]].sum()
    pooled["changed_share"] = pooled.changed / pooled.sites
    pooled["moves_per_visit"] = pooled.moves / pooled.visits.where(pooled.visits > 0)
    return pooled.reset_index()
