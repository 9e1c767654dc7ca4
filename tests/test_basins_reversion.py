"""Chapter 4 on a protein model: the germline-reversion basin (chapters/basins/reversion.py), on cases with a known
answer: framework sites against IMGT's regions, substitutions counted site by site, the estimator on a hand-built
trajectory and on a deterministic chain, its expectation on independent sites, and the claims row; and what is shown
beside it: the pseudo-log-likelihood against Potts conditionals written out by hand, end-state profiles, rates of
change per IMGT region on a hand-built trajectory, and a user's antibody aligned to its nearest germline."""

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
    scored = cfg.n_seeds * len(cfg.substitutions) * (1 + (cfg.pll_records - 1) * len(cfg.temperatures))
    assert scored * cfg.seq_len / 32 <= 200, "PLL: 90 forwards a state at ~32 a second, about 3 minutes at most"
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
    assert starts.alphabet == 5  # every colour allowed: the no-pull difference is 2/5 - 1
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
        alphabet=3,
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
    assert list(frame.columns) == ch.REVERSION_COLUMNS and len(frame) == 6 and (frame.alphabet == 3).all()
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
    assert [p["verdict"] for p in judged["parts"]] == [vd.INCONCLUSIVE] * 2
    assert all("zero width" in p["reason"] for p in judged["parts"]) and [p["chains"] for p in judged["parts"]] == [
        6,
        6,
    ]


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


def test_a_uniform_model_puts_the_mean_difference_at_the_no_pull_null():
    """No field over twenty colours (no pull): a visited mutated site is back with probability 1/20 and a visited
    kept one has left with 19/20, so the chains' mean difference is 2/20 - 1, the rule's null; 200 chains'
    interval holds it (inconclusive) where the old null 0 would have said differs."""
    n, colours, steps = 40, 20, 60
    germline = torch.arange(n) % colours
    starts = ch.mutate_framework(
        potts(germline, colours, 0.0), germline.repeat(200, 1), torch.ones(200, n, dtype=torch.bool), [10], seed=2
    )
    run = glauber.glauber(
        potts(germline, colours, 0.0), starts.tokens, steps, 1.0, seed=5, record_every=steps, progress=False
    )
    frame = ch.reversion_frame(starts, {1.0: run})
    ends = ch.reversion_ends(frame)
    assert ends.reverted.sum() / ends.mutated_visited.sum() == pytest.approx(1 / colours, abs=0.01)
    assert ends.left.sum() / ends.kept_visited.sum() == pytest.approx(1 - 1 / colours, abs=0.01)
    (part,) = ch.reversion_verdict(frame)["parts"]
    assert part["low"] < 2 / colours - 1 < part["high"] and part["verdict"] == vd.INCONCLUSIVE


def _judged_frame(shift: float, chains: int = 6, alphabet: int = 20, temperatures=(0.5, 1.0)) -> pd.DataFrame:
    """A reversion_frame-like table at one last step: per temperature, mutated chains with differences spread
    about `shift` (and one k = 0 chain the verdict leaves out)."""
    rows = []
    for tau in temperatures:
        for chain in range(chains + 1):
            k = 0 if chain == chains else 2
            value = np.nan if k == 0 else shift + 0.01 * (chain - chains / 2)
            rows.append(dict(temperature=tau, chain=chain, substitutions=k, step=9, difference=value))
    frame = pd.DataFrame(rows).assign(reverted_share=0.5, left_share=0.1, alphabet=alphabet, context=90, free=90)
    frame["mutated_visited"] = frame.substitutions
    frame.loc[frame.substitutions == 0, "reverted_share"] = np.nan
    return frame


@pytest.mark.parametrize(
    "shift, verdict", [(-0.6, vd.REPRODUCED), (-0.95, vd.DIFFERS), (-0.89, vd.INCONCLUSIVE), (0.4, vd.REPRODUCED)]
)
def test_reversion_verdict_and_rows_reach_every_outcome_against_no_pull(shift, verdict):
    """Twenty residues: no pull is a difference of 2/20 - 1 = -0.9, so -0.6 (reverted 0.2, left 0.8) is a pull."""
    frame = _judged_frame(shift)
    judged = ch.reversion_verdict(frame)
    assert judged["null"] == pytest.approx(-0.9) and [p["chains"] for p in judged["parts"]] == [6, 6]
    rows = ch.reversion_rows(frame, judged, 270)
    assert [r["claim"] for r in rows] == ["germline_reversion_tau05", "germline_reversion_tau10"]
    for row, tau in zip(rows, ("0.5", "1")):
        assert row["table"] == "beyond" and row["kind"] == "general" and row["verdict"] == verdict
        assert row["null"] == pytest.approx(-0.9) and row["low"] <= row["ours"] <= row["high"]
        assert f"at τ = {tau}:" in row["quantity"] and "null -0.90" in row["quantity"]
        assert "90 residues" in row["quantity"] and "k = 2 " in row["quantity"] and "270 steps" in row["quantity"]
        assert row["ours_text"].startswith(f"τ = {tau}: reverted 0.50 (no pull 0.05), left 0.10 (no pull 0.95)")
        assert "against -0.90" in row["ours_text"] and "drawn mutated site, 90 residues" in row["ours_text"]
    for view in (ch.reversion_view(frame), ch.reversion_verdicts_view(judged)):
        html = view.to_html()
        assert view.data.shape[1] <= 6 and not re.search(r"\bnan\b", html, re.I) and all(view.hide_index_)
    assert "-0.90" in ch.reversion_verdicts_view(judged).to_html()


def test_two_residues_put_the_null_at_0_and_only_the_claims_temperatures_are_judged():
    frame = _judged_frame(-0.6, alphabet=2, temperatures=(0.5, 1.5, 2.0))
    judged = ch.reversion_verdict(frame)
    assert judged["null"] == 0.0 and [p["temperature"] for p in judged["parts"]] == [0.5, 2.0]
    assert [p["verdict"] for p in judged["parts"]] == [vd.DIFFERS] * 2  # with two residues -0.6 is drift away
    rows = ch.reversion_rows(frame, judged, 270)
    assert [r["claim"] for r in rows] == ["germline_reversion_tau05", "germline_reversion_tau20"]


def test_the_claims_temperatures_are_the_profiles_grid_and_in_paper_claims():
    for profile in ("quick", "paper"):
        assert ch.settings(profile, PROTEIN).temperatures == list(ch.REVERSION_CLAIMS)
    assert set(ch.settings("smoke", PROTEIN).temperatures) <= set(ch.REVERSION_CLAIMS)
    paper = vd.read_paper_claims().set_index("claim")
    for claim in ch.REVERSION_CLAIMS.values():
        assert paper.kind[claim] == "general" and paper.side[claim] == "above" and paper.chapter[claim] == "04_basins"
    assert not any(c == "germline_reversion" for c in paper.index)


def test_a_run_without_mutated_chains_is_inconclusive_and_says_so():
    frame = _judged_frame(0.4)
    frame = frame[frame.substitutions == 0]
    judged = ch.reversion_verdict(frame)
    assert {p["verdict"] for p in judged["parts"]} == {vd.INCONCLUSIVE}
    assert all("fewer than two mutated chains" in p["reason"] for p in judged["parts"])
    row = ch.reversion_rows(frame, judged, 10)[0]
    assert row["ours_text"] == "no chain with a substitution in this run" and "k = no" in row["quantity"]
    undrawn = _judged_frame(0.4).assign(mutated_visited=0, difference=np.nan, reverted_share=np.nan)
    judged = ch.reversion_verdict(undrawn)  # a short run: no chain has drawn a mutated site yet
    rows = ch.reversion_rows(undrawn, judged, 10)
    assert {p["verdict"] for p in judged["parts"]} == {vd.INCONCLUSIVE}
    assert rows[1]["ours_text"] == "τ = 1: no chain drew a mutated site"
    assert all("nan" not in r["ours_text"].lower() for r in rows)


def test_reversion_figure_draws_one_panel_a_temperature():
    import matplotlib

    matplotlib.use("Agg")
    frame = _judged_frame(0.4)
    figure = ch.reversion_figure(pd.concat([frame.assign(step=0), frame]))
    assert len(figure.axes) == 2 and [a.get_title() for a in figure.axes] == ["τ = 0.5", "τ = 1"]


class LetteredPotts(glauber.PottsConditionals):
    """Potts conditionals whose colours print as residue letters (what endpoint_profile and antibody_start read)."""

    protein = True
    letters = "ACDEFGHIKLMNPQRSTVWY"

    def encode(self, text: str) -> torch.Tensor:
        bad = [c for c in text if c not in self.letters[: self.vocab_size]]
        if bad:
            raise ValueError(f"{bad[0]!r} is not one of the residues")
        return torch.tensor([self.letters.index(c) for c in text])

    def decode(self, ids) -> str:
        return "".join(self.letters[i] for i in torch.as_tensor(ids).reshape(-1).tolist())

    def decode_batch(self, ids) -> list[str]:
        return [self.decode(row) for row in torch.as_tensor(ids)]


def test_pseudo_log_likelihood_is_the_sum_of_potts_conditionals_written_out():
    """s_i(a) = h[i, a] + sum_{j != i} J[i, j] 1[x_j = a]; log p(x_i | x_-i) = s_i(x_i) - log sum_a e^{s_i(a)}."""
    n, colours = 5, 3
    generator = torch.Generator().manual_seed(4)
    coupling = torch.randn(n, n, generator=generator, dtype=torch.float64)
    field = torch.randn(n, colours, generator=generator, dtype=torch.float64)
    cond = glauber.PottsConditionals(coupling, field, colours)
    states = torch.randint(colours, (7, n), generator=generator)
    expected = np.zeros(len(states))
    for s, x in enumerate(states.tolist()):
        for i in range(n):
            scores = [
                field[i, a].item() + sum(coupling[i, j].item() * (x[j] == a) for j in range(n) if j != i)
                for a in range(colours)
            ]
            expected[s] += scores[x[i]] - np.log(np.exp(scores).sum())
    pll = ch.pseudo_log_likelihood(cond, states, chunk=4)  # chunks that cut states in two
    assert pll.dtype == torch.float64 and np.allclose(pll.numpy(), expected, atol=1e-10)
    log_probs = ch.site_log_probs(cond, states, chunk=3)
    assert log_probs.shape == (7, n, colours) and torch.allclose(
        log_probs.exp().sum(2), torch.ones(7, n, dtype=log_probs.dtype)
    )
    assert torch.equal(ch.pseudo_log_likelihood(cond, states, log_probs=log_probs), pll)
    independent = glauber.PottsConditionals(torch.zeros(n, n), field, colours)  # the product of the site marginals
    marginal = torch.log_softmax(field, 1)
    assert torch.allclose(ch.pseudo_log_likelihood(independent, states), marginal.gather(1, states.T).sum(0))


def test_record_picks_take_start_end_and_evenly_between():
    assert ch.record_picks(10, 4).tolist() == [0, 3, 6, 9]
    assert ch.record_picks(4, 2).tolist() == [0, 3] and ch.record_picks(2, 5).tolist() == [0, 1]
    assert ch.record_picks(1, 3).tolist() == [0]


def _hand_run(tokens: torch.Tensor, steps, sites, old, new, temperature: float = 1.0) -> glauber.Trajectory:
    batch, steps_taken = sites.shape
    return glauber.Trajectory(
        tokens=tokens,
        steps=torch.as_tensor(steps),
        sites=sites,
        old_tokens=old,
        new_tokens=new,
        log_probs=torch.zeros(batch, steps_taken),
        temperature=temperature,
    )


@needs_anarci
def test_scored_records_give_each_chains_pll_and_its_end_profile():
    """Independent sites with fields: every pll is the sum of the site marginals at the state; the end profile of
    a gene is the mean of its chains' conditionals at tau, here the marginal softmax(h / tau) at every site."""
    n, colours = 90, 4
    generator = torch.Generator().manual_seed(1)
    field = torch.randn(n, colours, generator=generator, dtype=torch.float64)
    cond = LetteredPotts(torch.zeros(n, n), field, colours)
    germline = torch.randint(colours, (2, n), generator=generator)
    starts = ch.mutate_framework(
        cond, germline, ch.framework_sites(["IGHV3-23*01"] * 2, n), [0, 3], genes=["IGHV3-23*01", "IGKV1-39*01"], seed=0
    )
    runs = {
        tau: glauber.glauber(cond, starts.tokens, 40, tau, seed=2, record_every=10, progress=False)
        for tau in (0.5, 2.0)
    }
    scored = ch.score_records(cond, runs, 3)
    assert scored[0.5].records.tolist() == [0, 2, 4] and scored[0.5].log_probs.shape == (4, 3, n, colours)
    pll = ch.pll_frame(starts, runs, scored)
    assert list(pll.columns) == ch.PLL_COLUMNS and len(pll) == 2 * 4 * 3
    marginal = torch.log_softmax(field, 1)
    for row in pll.itertuples():
        state = runs[row.temperature].tokens[row.chain, row.step // 10]
        assert row.pll == pytest.approx(marginal[torch.arange(n), state].sum().item(), abs=1e-9)
    assert np.allclose(pll.pll_per_residue, pll.pll / n) and (pll.context == n).all() and (pll.free == n).all()
    starting = pll[pll.step == 0].sort_values(["temperature", "chain"])
    assert np.allclose(starting.pll.to_numpy()[:4], starting.pll.to_numpy()[4:])  # both temperatures share starts
    summary = ch.pll_summary(pll)
    assert summary.chains.tolist() == [2] * 4 and np.allclose(summary.change, summary.end - summary.start)
    profile = ch.endpoint_profile(cond, starts, scored)
    assert len(profile) == 2 * 2 * n and set(profile.chains) == {2}
    for tau in (0.5, 2.0):
        rows = profile[(profile.temperature == tau) & (profile.gene == "IGHV3-23*01")]
        expected = torch.softmax(field / tau, 1)
        assert np.allclose(rows[list("ACDE")].to_numpy(), expected.numpy(), atol=1e-9)
        entropy = -(expected * expected.log2()).sum(1)
        assert np.allclose(rows.entropy, entropy.numpy(), atol=1e-9)
        assert rows.region.tolist() == ch.site_regions("IGHV3-23*01", n).tolist()
        assert rows.germline.tolist() == list(cond.decode(germline[0]))
    assert (profile.context == n).all() and profile.region.isin(ch.REGIONS).all()


@needs_anarci
def test_site_regions_follow_imgts_regions():
    regions = ch.site_regions("IGHV3-23*01", 90)
    assert regions[:25].tolist() == ["fr1"] * 25 and regions[25:33].tolist() == ["cdr1"] * 8
    assert regions[50:58].tolist() == ["cdr2"] * 8 and regions[58:].tolist() == ["fr3"] * 32
    assert len(ch.site_regions("IGHV3-23*01", 30)) == 30


@needs_anarci
def test_region_rates_count_changes_and_moves_per_region_exactly():
    """One chain of IGHV3-23*01's 90 sites (FR1 0-24, CDR1 25-32, FR2 33-49, CDR2 50-57, FR3 58-89), four steps:
    site 26 (CDR1) changed and kept, site 0 (FR1) changed then changed back, site 60 (FR3) redrawn as itself."""
    n = 90
    start = torch.zeros(1, n, dtype=torch.long)
    end = start.clone()
    end[0, 26] = 2
    sites = torch.tensor([[26, 0, 0, 60]])
    old, new = torch.tensor([[0, 0, 1, 0]]), torch.tensor([[2, 1, 0, 0]])
    run = _hand_run(torch.stack([start, end], 1), [0, 4], sites, old, new)
    starts = SimpleNamespace(genes=["IGHV3-23*01"], substitutions=torch.tensor([0]))
    rates = ch.region_rates(starts, {1.0: run}).set_index("region")
    assert list(ch.region_rates(starts, {1.0: run}).columns) == ch.REGION_COLUMNS
    assert rates.sites.tolist() == [25, 8, 17, 8, 32] and rates.changed.tolist() == [0, 1, 0, 0, 0]
    assert rates.loc["cdr1", "changed_share"] == 1 / 8 and rates.visits.tolist() == [2, 1, 0, 0, 1]
    assert rates.moves.tolist() == [2, 1, 0, 0, 0] and rates.loc["fr1", "moves_per_visit"] == 1.0
    assert np.isnan(rates.loc["fr2", "moves_per_visit"]) and rates.loc["fr3", "moves_per_visit"] == 0.0
    summary = ch.region_summary(pd.concat([rates.reset_index()] * 2))
    assert summary.region.tolist() == list(ch.REGIONS) and summary.changed.tolist() == [0, 2, 0, 0, 0]
    html = ch.region_view(rates.reset_index()).to_html()
    assert "CDR1" in html and "12% (1.00)" in html and "no visit" in html


@needs_anarci
def test_an_antibody_aligns_to_its_own_germline_and_its_mutations_are_the_differences():
    cond = LetteredPotts(torch.zeros(90, 90), None, 20)
    genes = {allele: residues for allele, _, _, residues in glauber.germline_v_genes()}
    germline = genes["IGHV3-23*01"]
    antibody = ch.antibody_start(cond, germline[:95])
    assert antibody.identity == 1.0 and antibody.tokens.shape == (1, 90) and int(antibody.substitutions) == 0
    assert antibody.genes[0] in {a for a, r in genes.items() if r[:90] == germline[:90]}
    mutant = "W" + germline[1:40] + "C" + germline[41:60]  # 60 residues: the alignment is 60 long
    antibody = ch.antibody_start(cond, mutant)
    assert antibody.tokens.shape == (1, 60) and antibody.mutated[0].nonzero().squeeze(1).tolist() == [0, 40]
    assert antibody.identity == pytest.approx(58 / 60) and antibody.substitutions.tolist() == [2]
    assert antibody.alphabet == 20

    assert cond.decode(antibody.germline[0]) == genes[antibody.genes[0]][:60]
    assert torch.equal(antibody.framework, ch.framework_sites(antibody.genes, 60))
    with pytest.raises(ValueError, match="'J' is not one of"):
        ch.antibody_start(cond, germline[:30] + "J")


def test_the_protein_views_and_figures_draw_without_nan():
    import matplotlib

    matplotlib.use("Agg")
    pll = pd.DataFrame(
        dict(
            temperature=[1.0] * 4,
            chain=[0, 0, 1, 1],
            gene="g",
            substitutions=[0, 0, 2, 2],
            step=[0, 9, 0, 9],
            pll=[-90.0, -80.0, -100.0, -95.0],
            context=90,
            free=90,
        )
    ).assign(pll_per_residue=lambda f: f.pll / 90)
    html = ch.pll_view(pll).to_html()
    assert "+0.111" in html and not re.search(r"\bnan\b", html, re.I)
    assert len(ch.pll_figure(pll, pll[pll.chain == 0]).axes) == 1
    reversion = (
        _judged_frame(0.4)
        .assign(mutated=2, reverted=1, left=0, kept=10, kept_visited=4, temperature=1.0, chain=0)
        .iloc[:1]
    )
    html = ch.antibody_view(reversion, pll[pll.chain == 1]).to_html()
    assert "2 of 2" in html and "-1.111 → -1.056" in html
    sites = np.arange(12)
    profile = pd.DataFrame(
        dict(
            temperature=1.0,
            gene="g",
            chains=1,
            site=sites,
            region=["fr1"] * 4 + ["cdr1"] * 4 + ["fr2"] * 4,
            germline="A",
            entropy=1.0,
            A=0.5,
            C=0.5,
            context=12,
            free=12,
        )
    )
    assert len(ch.logo_figure(profile, "g").axes) == 1 and len(ch.entropy_figure(profile, "g").axes) == 1
    rates = pd.DataFrame(dict(temperature=[0.5, 1.0], region="fr1", sites=10, changed=[1, 2], visits=4, moves=2))
    assert len(ch.region_figure(rates).axes) == 2
