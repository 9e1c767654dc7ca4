"""Chapter 4 on AntiBERTy (a protein masked LM pretrained by others): the notebook's protein path at a tiny size:
germline reversion and its claims row, the pseudo-log-likelihood (against one-site-at-a-time scoring), the end-state
profile and region rates, and a real antibody (trastuzumab's heavy chain) as a seed."""

import importlib.util

import numpy as np
import pytest
import torch

import glauber_core as glauber
import verdicts as vd
from chapters import basins as ch

pytestmark = [  # found, not imported: importing antiberty costs every worker seconds of collection
    pytest.mark.skipif(
        not importlib.util.find_spec("antiberty"), reason="needs the PyPI package antiberty==0.1.3 (requirements.txt)"
    ),
    pytest.mark.skipif(
        not importlib.util.find_spec("anarci"), reason="germline seeds need the PyPI package anarci (requirements.txt)"
    ),
]

TRASTUZUMAB_VH = (
    "EVQLVESGGGLVQPGGSLRLSCAASGFNIKDTYIHWVRQAPGKGLEWVARIYPTNGYTRYADSVKGRFTISADTSKNTAYLQMNSLRAEDTAVYYCSR"
    "WGGDGFYAMDYWGQGTLVTVSS"
)


def test_the_notebooks_protein_cells_on_antiberty_at_the_tiniest_size(antiberty):
    """One germline of 90 residues, k = 0 and 2, one temperature, two steps (AntiBERTy is slow on CPU; the
    chapter's own run is the notebook's): reversion, its row, PLL, the end profile and the region rates."""
    cfg = ch.settings("smoke", antiberty, n_seeds=1, steps=2, record_every=1, temperatures=[1.0])
    assert cfg.protein and cfg.seq_len == 90 and cfg.pll_records == 2
    germlines = glauber.seed_passages(antiberty, cfg.seq_len, cfg.n_seeds, seed=0, passages="germline")
    framework = ch.framework_sites(germlines.genes, cfg.seq_len)
    starts = ch.mutate_framework(antiberty, germlines.tokens, framework, [0, 2], genes=germlines.genes, seed=0)
    runs = {
        tau: glauber.glauber(antiberty, starts.tokens, cfg.steps, tau, seed=0, record_every=1, progress=False)
        for tau in cfg.temperatures
    }
    frame = ch.reversion_frame(starts, runs)
    assert len(frame) == 2 * 3 and set(frame.gene) == set(germlines.genes) and (frame.context == 90).all()
    assert (frame.alphabet == 20).all()  # the no-pull difference is 2/20 - 1
    judged = ch.reversion_verdict(frame)
    assert judged["null"] == pytest.approx(-0.9)
    assert [p["verdict"] for p in judged["parts"]] == [vd.INCONCLUSIVE]  # one mutated chain: no interval
    assert [r["claim"] for r in ch.reversion_rows(frame, judged, cfg.steps)] == ["germline_reversion_tau10"]

    scored = ch.score_records(antiberty, runs, cfg.pll_records)
    assert scored[1.0].records.tolist() == [0, 2]
    pll = ch.pll_frame(starts, runs, scored)
    assert len(pll) == 2 * 2 and (pll.pll < 0).all() and (pll.free == 90).all()
    assert (pll.pll_per_residue > -np.log(20)).all()  # AntiBERTy knows a germline better than uniform residues
    germline = pll[(pll.substitutions == 0) & (pll.step == 0)].pll.item()
    assert germline > pll[(pll.substitutions == 2) & (pll.step == 0)].pll.item()  # framework mutations cost
    one_by_one = sum(
        glauber.conditional_log_probs(antiberty, germlines.tokens, torch.tensor([i]))[0, germlines.tokens[0, i]].item()
        for i in range(0, 90, 30)
    )
    log_probs = ch.site_log_probs(antiberty, germlines.tokens, chunk=64)
    assert log_probs[0, ::30].gather(1, germlines.tokens[0, ::30, None]).sum().item() == pytest.approx(
        one_by_one, abs=1e-4
    )
    assert ch.pseudo_log_likelihood(antiberty, germlines.tokens, log_probs=log_probs).item() == pytest.approx(
        germline, abs=1e-4
    )

    profile = ch.endpoint_profile(antiberty, starts, scored)
    residues = list(profile.columns[profile.columns.get_loc("entropy") + 1 : profile.columns.get_loc("context")])
    assert sorted(residues) == sorted(glauber.AMINO_ACIDS) and len(profile) == 90
    assert np.allclose(profile[residues].sum(1), 1.0) and profile.entropy.between(0, np.log2(20)).all()
    assert "".join(profile.germline) == germlines.texts[0]
    rates = ch.region_rates(starts, runs)
    assert set(rates.region) == set(ch.REGIONS) and (rates.groupby("chain").sites.sum() == 90).all()
    assert (rates.groupby("chain").visits.sum() == cfg.steps).all() and (rates.changed <= rates.moves).all()


def test_trastuzumab_aligns_to_an_ighv3_germline_and_runs_as_a_seed(antiberty):
    antibody = ch.antibody_start(antiberty, TRASTUZUMAB_VH)
    assert antibody.genes[0].startswith("IGHV3-") and antibody.tokens.shape == (1, 90)
    assert 0.7 < antibody.identity < 1 and int(antibody.substitutions) == round((1 - antibody.identity) * 90)
    assert antiberty.decode(antibody.tokens[0]) == TRASTUZUMAB_VH[:90]
    runs = {1.0: glauber.glauber(antiberty, antibody.tokens, 2, 1.0, seed=0, progress=False)}
    reversion = ch.reversion_frame(antibody, runs)
    assert (reversion.mutated == int(antibody.substitutions)).all()
    pll = ch.pll_frame(antibody, runs, ch.score_records(antiberty, runs, 2))
    assert ch.antibody_view(reversion, pll).data.shape == (1, 5)
    with pytest.raises(ValueError, match="'B' at position 3"):
        ch.antibody_start(antiberty, "EVB")
