"""Chapter 4 on a protein model: the germline-reversion basin (chapters/basins/reversion.py), on cases with a known
answer: framework sites against IMGT's regions, substitutions counted site by site, the estimator on a hand-built
trajectory and on a deterministic chain, its expectation on independent sites, and the claims row."""

import importlib.util
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import glauber_core as glauber
import verdicts as vd
from chapters import basins as ch

needs_anarci = pytest.mark.skipif(
    not importlib.util.find_spec("anarci"), reason="germline genes need the PyPI package anarci (requirements.txt)"
)
PROTEIN = SimpleNamespace(protein=True)  # what glauber_core.is_protein reads


def potts(germline: torch.Tensor, colours: int, field: float) -> glauber.PottsConditionals:
    """Independent sites with `field` on each site's germline colour: p_g = e^(h/tau) / (e^(h/tau) + q - 1)."""
    fields = torch.zeros(len(germline), colours)
    fields[torch.arange(len(germline)), germline] = field
    return glauber.PottsConditionals(torch.zeros(len(germline), len(germline)), fields, colours)


def test_protein_settings_run_whole_genes_and_a_temperature_grid():
    cfg = ch.settings("quick", PROTEIN)
    assert cfg.seq_len == 90 and cfg.substitutions == [0, 2, 4, 8] and cfg.temperatures == [0.5, 1.0, 2.0]
    assert cfg.passages == "germline" and cfg.n_seeds >= 2
    chain_steps = cfg.n_seeds * len(cfg.substitutions) * len(cfg.temperatures) * cfg.steps
    assert chain_steps / 32 <= 480, "AntiBERTy at ~32 chain-steps/s on 2 CPUs: within 8 minutes"
    assert ch.settings("smoke", PROTEIN, temperatures=[1.5], seq_len=91).temperatures == [1.5]
    assert ch.settings("smoke", PROTEIN, temperatures="0.5 1").temperatures == [0.5, 1.0]  # papermill's text
    assert not hasattr(ch.settings("smoke", temperatures=[1.5]), "temperatures")  # a text model ignores it
    with pytest.raises(ValueError, match="temperature"):
        ch.settings("smoke", PROTEIN, temperatures=[-1.0])


@needs_anarci
def test_framework_sites_are_imgts_fr1_fr2_fr3():
    allele = "IGHV3-23*01"
    regions = glauber.germline_regions(allele)
    mask = ch.framework_sites([allele, allele], 90)
    assert mask.shape == (2, 90) and torch.equal(mask[0], mask[1])
    for name, (start, end) in regions.items():
        inside = mask[0, start : min(end, 90)]
        assert bool(inside.all()) if name in ch.FRAMEWORK else not bool(inside.any()), name
    assert int(mask[0].sum()) == sum(min(e, 90) - s for k, (s, e) in regions.items() if k in ch.FRAMEWORK)
    with pytest.raises(ValueError, match="no human germline V gene"):
        ch.framework_sites(["IGHV99-1*01"], 90)


def test_mutate_framework_puts_k_other_tokens_at_framework_sites_only():
    cond = glauber.PottsConditionals(torch.zeros(12, 12), None, 5)
    germline = torch.tensor([[0] * 12, [1] * 12])
    framework = torch.zeros(2, 12, dtype=torch.bool)
    framework[:, 2:9] = True
    starts = ch.mutate_framework(cond, germline, framework, [0, 2, 5], genes=["a", "b"], seed=3)
    assert starts.tokens.shape == (6, 12) and starts.row.tolist() == [0, 1] * 3
    assert starts.substitutions.tolist() == [0, 0, 2, 2, 5, 5] and starts.genes == ["a", "b"] * 3
    changed = starts.tokens != starts.germline
    assert torch.equal(changed, starts.mutated) and changed.sum(1).tolist() == [0, 0, 2, 2, 5, 5]
    assert not (changed & ~starts.framework).any()  # CDRs untouched
    assert torch.equal(starts.germline, germline[starts.row])
    again = ch.mutate_framework(cond, germline, framework, [0, 2, 5], genes=["a", "b"], seed=3)
    assert torch.equal(again.tokens, starts.tokens)  # seeded
    draws = ch.mutate_framework(cond, germline[:1].repeat(400, 1), framework[:1].repeat(400, 1), [1], seed=0)
    tokens = draws.tokens[draws.mutated]
    assert (tokens != 0).all() and set(tokens.tolist()) == {1, 2, 3, 4}  # a uniform other token
    assert np.bincount(tokens.numpy(), minlength=5)[1:].min() > 60
    with pytest.raises(ValueError, match="exceed the 7 framework sites"):
        ch.mutate_framework(cond, germline, framework, [8])
    with pytest.raises(ValueError, match="shape"):
        ch.mutate_framework(cond, germline, framework[:, :5], [1])
    with pytest.raises(ValueError, match="substitutions"):
        ch.mutate_framework(cond, germline, framework, [-1])


def _starts() -> SimpleNamespace:
    """Two chains of 6 sites at germline 0: chain 0 has sites 0 and 1 mutated, chain 1 none; framework 0-3."""
    germline = torch.zeros(2, 6, dtype=torch.long)
    mutated = torch.tensor([[1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    framework = torch.tensor([[1, 1, 1, 1, 0, 0]] * 2, dtype=torch.bool)
    tokens = torch.where(mutated, torch.tensor(2), germline)
    return SimpleNamespace(
        tokens=tokens,
        germline=germline,
        mutated=mutated,
        framework=framework,
        row=torch.tensor([0, 0]),
        substitutions=torch.tensor([2, 0]),
        genes=["g", "g"],
    )


def test_reversion_frame_counts_reverted_and_left_sites_over_visited_sites_exactly():
    starts = _starts()
    # steps 1-4: chain 0 updates sites 0, 2, 4, 1 (site 1 redrawn as its mutant, 2); chain 1 updates 3, 3, 5, 0
    sites = torch.tensor([[0, 2, 4, 1], [3, 3, 5, 0]])
    middle = torch.tensor([[0, 2, 1, 0, 0, 0], [0, 0, 0, 3, 0, 0]])  # after step 2
    final = torch.tensor([[0, 2, 1, 0, 1, 0], [0, 0, 0, 3, 0, 1]])  # after step 4
    run = glauber.Trajectory(
        tokens=torch.stack([starts.tokens, middle, final], 1),
        steps=torch.tensor([0, 2, 4]),
        sites=sites,
        old_tokens=torch.zeros(2, 4, dtype=torch.long),
        new_tokens=torch.zeros(2, 4, dtype=torch.long),
        log_probs=torch.zeros(2, 4),
        temperature=1.0,
    )
    frame = ch.reversion_frame(starts, {1.0: run})
    assert list(frame.columns) == ch.REVERSION_COLUMNS and len(frame) == 6
    frame = frame.set_index(["chain", "step"])
    columns = ["mutated", "mutated_visited", "reverted", "kept", "kept_visited", "left"]
    assert frame.loc[(0, 0), columns].tolist() == [2, 0, 0, 2, 0, 0]
    assert np.isnan(frame.loc[(0, 0), "difference"])  # nothing visited yet: no share
    assert frame.loc[(0, 2), columns].tolist() == [2, 1, 1, 2, 1, 1]  # site 0 back, site 2 left
    assert frame.loc[(0, 2), "difference"] == 0.0  # 1/1 - 1/1
    assert frame.loc[(0, 4), columns].tolist() == [2, 2, 1, 2, 1, 1]  # site 1 visited, still its mutant
    assert frame.loc[(0, 4), "difference"] == pytest.approx(0.5 - 1.0)
    assert frame.loc[(1, 4), columns].tolist() == [0, 0, 0, 4, 2, 1]  # sites 3 (left) and 0 (kept) visited
    assert np.isnan(frame.loc[(1, 4), "difference"]) and frame.loc[(1, 4), "left_share"] == 0.5
    assert (frame.context == 6).all() and (frame.free == 6).all()
    ends = ch.reversion_ends(frame.reset_index())
    assert ends.step.tolist() == [4, 4]
    summary = ch.reversion_summary(frame.reset_index())
    assert summary.substitutions.tolist() == [0, 2] and summary.chains.tolist() == [1, 1]
    with pytest.raises(ValueError, match="Trajectory"):
        ch.reversion_frame(starts, {1.0: "not a run"})


def test_visited_sites_follow_each_steps_site():
    run = glauber.Trajectory(
        tokens=torch.zeros(1, 3, 4, dtype=torch.long),
        steps=torch.tensor([0, 1, 3]),
        sites=torch.tensor([[2, 0, 2]]),
        old_tokens=torch.zeros(1, 3, dtype=torch.long),
        new_tokens=torch.zeros(1, 3, dtype=torch.long),
        log_probs=torch.zeros(1, 3),
        temperature=1.0,
    )
    visited = ch.visited_sites(run, 4)
    assert visited[0].tolist() == [[False] * 4, [False, False, True, False], [True, False, True, False]]


def test_a_deterministic_chain_reverts_every_mutated_site_and_its_interval_has_zero_width():
    """A field of 1,000 on the germline colour: a visited site is back at its germline residue with probability 1
    in float64; a systematic scan of T = n steps visits every site once, so every chain's difference is exactly 1,
    and the rule, on a statistic with no spread, says inconclusive."""
    n, colours = 30, 4
    germline = torch.arange(n) % colours
    cond = potts(germline, colours, 1000.0)
    framework = torch.ones(3, n, dtype=torch.bool)
    starts = ch.mutate_framework(cond, germline.repeat(3, 1), framework, [0, 2, 5], seed=1)
    runs = {tau: glauber.glauber(cond, starts.tokens, n, tau, scan="systematic", progress=False) for tau in (0.5, 1)}
    ends = ch.reversion_ends(ch.reversion_frame(starts, runs))
    mutated = ends[ends.substitutions > 0]
    assert (mutated.reverted == mutated.mutated).all() and (ends.left == 0).all()
    assert (ends.mutated_visited == ends.mutated).all() and (ends.kept_visited == ends.kept).all()
    assert (mutated.difference == 1.0).all() and ends[ends.substitutions == 0].difference.isna().all()
    judged = ch.reversion_verdict(ch.reversion_frame(starts, runs))
    assert judged["verdict"] == vd.INCONCLUSIVE and "zero width" in judged["reason"]
    assert [p["chains"] for p in judged["parts"]] == [6, 6]


def test_independent_sites_revert_and_leave_at_their_known_rates():
    """Random scan on independent sites: a site the chain has updated holds its germline colour with probability
    p_g (its field alone), whatever it held, so over visited sites the mean reverted share is p_g and the mean left
    share 1 - p_g, at any number of steps; a short run leaves most chains without a visited mutated site."""
    n, colours, field, steps, tau = 40, 3, 1.5, 60, 1.0
    germline = torch.arange(n) % colours
    cond = potts(germline, colours, field)
    framework = torch.ones(200, n, dtype=torch.bool)
    starts = ch.mutate_framework(cond, germline.repeat(200, 1), framework, [10], seed=2)
    run = glauber.glauber(cond, starts.tokens, steps, tau, seed=5, record_every=steps, progress=False)
    ends = ch.reversion_ends(ch.reversion_frame(starts, {tau: run}))
    p_g = np.exp(field / tau) / (np.exp(field / tau) + colours - 1)
    weighted = ends.reverted.sum() / ends.mutated_visited.sum()  # pooled over chains: unbiased for p_g
    assert weighted == pytest.approx(p_g, abs=0.03)
    assert ends.left.sum() / ends.kept_visited.sum() == pytest.approx(1 - p_g, abs=0.02)
    assert ends.difference.mean() == pytest.approx(2 * p_g - 1, abs=0.05)
    visited = 1 - (1 - 1 / n) ** steps
    assert ends.mutated_visited.mean() == pytest.approx(10 * visited, abs=0.3)


def _judged_frame(shift: float, chains: int = 6) -> pd.DataFrame:
    """A reversion_frame-like table at one last step: per temperature, mutated chains with differences spread
    about `shift` (and one k = 0 chain the verdict leaves out)."""
    rows = []
    for tau in (0.5, 1.0):
        for chain in range(chains + 1):
            k = 0 if chain == chains else 2
            value = np.nan if k == 0 else shift + 0.05 * (chain - chains / 2)
            rows.append(dict(temperature=tau, chain=chain, substitutions=k, step=9, difference=value))
    frame = pd.DataFrame(rows).assign(reverted_share=0.5, left_share=0.1, context=90, free=90)
    frame["mutated_visited"] = frame.substitutions
    frame.loc[frame.substitutions == 0, "reverted_share"] = np.nan
    return frame


@pytest.mark.parametrize("shift, verdict", [(0.4, vd.REPRODUCED), (-0.4, vd.DIFFERS), (0.01, vd.INCONCLUSIVE)])
def test_reversion_verdict_and_row_reach_every_outcome(shift, verdict):
    frame = _judged_frame(shift)
    judged = ch.reversion_verdict(frame)
    assert judged["verdict"] == verdict and [p["chains"] for p in judged["parts"]] == [6, 6]
    (row,) = ch.reversion_rows(frame, judged, 270)
    assert row["claim"] == "germline_reversion" and row["table"] == "beyond" and row["kind"] == "general"
    assert row["verdict"] == verdict and row["null"] == 0.0 and row["low"] <= row["ours"] <= row["high"]
    assert "90 residues" in row["quantity"] and "k = 2 " in row["quantity"] and "270 steps" in row["quantity"]
    assert "τ = 0.5" in row["ours_text"] and "drawn mutated site, 90 residues" in row["ours_text"]
    for view in (ch.reversion_view(frame), ch.reversion_verdicts_view(judged)):
        html = view.to_html()
        assert view.data.shape[1] <= 6 and not re.search(r"\bnan\b", html, re.I) and all(view.hide_index_)


def test_a_run_without_mutated_chains_is_inconclusive_and_says_so():
    frame = _judged_frame(0.4)
    frame = frame[frame.substitutions == 0]
    judged = ch.reversion_verdict(frame)
    assert judged["verdict"] == vd.INCONCLUSIVE and "fewer than two mutated chains" in judged["reason"]
    (row,) = ch.reversion_rows(frame, judged, 10)
    assert row["ours_text"] == "no chain with a substitution in this run" and "k = no" in row["quantity"]
    undrawn = _judged_frame(0.4).assign(mutated_visited=0, difference=np.nan, reverted_share=np.nan)
    judged = ch.reversion_verdict(undrawn)  # a short run: no chain has drawn a mutated site yet
    (row,) = ch.reversion_rows(undrawn, judged, 10)
    assert judged["verdict"] == vd.INCONCLUSIVE and "τ = 1: no chain drew a mutated site" in row["ours_text"]
    assert "nan" not in row["ours_text"].lower()


def test_reversion_figure_draws_one_panel_a_temperature():
    import matplotlib

    matplotlib.use("Agg")
    frame = _judged_frame(0.4)
    figure = ch.reversion_figure(pd.concat([frame.assign(step=0), frame]))
    assert len(figure.axes) == 2 and [a.get_title() for a in figure.axes] == ["τ = 0.5", "τ = 1"]


@needs_anarci
def test_the_notebooks_protein_cells_on_antiberty_at_the_tiniest_size(antiberty):
    """The protein path end to end on AntiBERTy: one germline of 90 residues, k = 0 and 2, one temperature, two
    steps (AntiBERTy is slow on CPU; the chapter's own run is the notebook's)."""
    cfg = ch.settings("smoke", antiberty, n_seeds=1, steps=2, record_every=1, temperatures=[1.0])
    assert cfg.protein and cfg.seq_len == 90
    germlines = glauber.seed_passages(antiberty, cfg.seq_len, cfg.n_seeds, seed=0, passages="germline")
    framework = ch.framework_sites(germlines.genes, cfg.seq_len)
    starts = ch.mutate_framework(antiberty, germlines.tokens, framework, [0, 2], genes=germlines.genes, seed=0)
    runs = {
        tau: glauber.glauber(antiberty, starts.tokens, cfg.steps, tau, seed=0, record_every=1, progress=False)
        for tau in cfg.temperatures
    }
    frame = ch.reversion_frame(starts, runs)
    assert len(frame) == 2 * 3 and set(frame.gene) == set(germlines.genes) and (frame.context == 90).all()
    judged = ch.reversion_verdict(frame)
    assert judged["verdict"] == vd.INCONCLUSIVE  # one mutated chain: no interval
    assert [r["claim"] for r in ch.reversion_rows(frame, judged, cfg.steps)] == ["germline_reversion"]
