"""Chapter 5 on AntiBERTy (a protein MLM; the `antiberty` 0.1.3 wheel ships its weights), at a tiny size:
score gaps on germlines themselves, the Hamming embedding that replaces sentence embeddings, and a short
cold chain through detect_traps and the trap catalogue. Skipped when antiberty is not installed."""

import importlib.util
import math

import numpy as np
import pytest
import torch

import glauber_core as glauber
from chapters import traps as ch

pytestmark = [  # found, not imported: importing antiberty costs every worker seconds of collection
    pytest.mark.skipif(
        not importlib.util.find_spec("antiberty"), reason="needs the PyPI package antiberty==0.1.3 (requirements.txt)"
    ),
    pytest.mark.skipif(
        not importlib.util.find_spec("anarci"), reason="germline seeds need the PyPI package anarci (requirements.txt)"
    ),
]

N = 8


@pytest.fixture(scope="module")
def germline(antiberty):
    return ch.germline_gaps(antiberty, ch.germline_seeds(antiberty, N))


def test_the_chapter_sees_a_protein_model_and_picks_germline_seeds_and_hamming(antiberty):
    assert glauber.is_protein(antiberty)
    assert ch.seed_source(antiberty, "bbc") == ch.seed_source(antiberty, "") == "germline"
    phrases = ch.distance_text(antiberty)
    assert "Hamming" in phrases["distance"] and "germline" in phrases["seeds"]


def test_germline_seeds_are_every_distinct_cut(antiberty):
    seeds = ch.germline_seeds(antiberty, N)
    cuts = {r[:N] for _, _, _, r in glauber.germline_v_genes() if len(r) >= N}
    assert set(seeds.residues) == cuts and len(seeds) == len(cuts)
    assert set(seeds.chain) == {"heavy", "kappa", "lambda"} and seeds.family.str.match(r"IG[HKL]V\d+$").all()
    for residues, tokens in zip(seeds.residues, seeds.tokens):
        assert antiberty.decode(torch.tensor(tokens)) == residues


def test_germline_gaps_are_the_score_margins_of_the_model(antiberty, germline):
    gaps = np.asarray(germline.gaps.tolist())
    assert gaps.shape == (len(germline), N) and np.isfinite(gaps).all()
    np.testing.assert_array_equal(germline.negative_sites, (gaps < 0).sum(1))
    np.testing.assert_array_equal(germline.perfect, gaps.min(1) > 0)
    np.testing.assert_allclose(germline.min_gap, gaps.min(1))
    # by hand on one seed: the log-probability margin of its residue over the best other amino acid
    x = antiberty.encode(germline.residues[0]).unsqueeze(0).repeat(N, 1)
    logp = glauber.conditional_log_probs(antiberty, x, torch.arange(N)).double()
    own = logp[torch.arange(N), x[0]]
    other = logp.scatter(1, x[0].unsqueeze(1), -math.inf)[:, antiberty.allowed].amax(1)
    np.testing.assert_allclose(gaps[0], (own - other).numpy(), atol=1e-4)


def test_the_family_table_counts_every_seed_once(germline):
    table = ch.germline_family_view(germline).data
    families, total = table[table.family != "all"], table[table.family == "all"].iloc[0]
    assert families.seeds.sum() == total.seeds == len(germline)
    assert total["sites with Δ_i < 0"] == germline.negative_sites.sum() and total["of sites"] == N * len(germline)
    assert list(families.chain) == sorted(families.chain, key=["heavy", "kappa", "lambda"].index)
    phrases = ch.germline_text(germline, germline.residues[:3])
    assert f"of {len(germline)} germline seeds" in phrases["germline"]
    assert "run's 3 seeds" in phrases["cold_germline"]


def test_the_hamming_embedding_reads_as_a_cosine_distance(antiberty):
    seeds = glauber.seed_passages(antiberty, N, 3, seed=0)
    run = glauber.glauber(antiberty, seeds.tokens, 16, 1.0, seed=0, record_every=4, progress=False)
    vectors = ch.state_vectors(antiberty, None, run)
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(vectors.shape[:2]))
    hamming = (run.tokens != run.tokens[:, :1]).double().mean(-1).float()
    torch.testing.assert_close(ch.start_distances(antiberty, None, run), hamming)
    torch.testing.assert_close(ch.distance_at(vectors, run.steps, 16), hamming[:, -1], atol=1e-6, rtol=0)
    distances = ch.window_distances(vectors, run.steps, 8)
    torch.testing.assert_close(
        distances[:, :, 2], (run.tokens[:, :-2] != run.tokens[:, 2:]).float().mean(-1), atol=1e-6, rtol=0
    )


def test_a_cold_chain_on_germlines_is_flagged_and_catalogued(antiberty):
    seeds = glauber.seed_passages(antiberty, N, 2, seed=0)
    run = glauber.glauber(antiberty, seeds.tokens, 96, 0.01, seed=0, record_every=4, progress=False)
    traps = ch.detect_traps(ch.state_vectors(antiberty, None, run), run.steps, window=32, threshold=0.12)
    assert len(traps) >= 1 and set(traps.chain) <= {0, 1}
    catalogue = ch.trap_catalogue(antiberty, run, traps)
    assert (catalogue.text.str.len() == N).all() and set(catalogue.text.iloc[0]) <= set(glauber.AMINO_ACIDS)
    gaps = np.asarray(catalogue.gaps.tolist())
    assert (catalogue.kind == np.where(gaps.min(1) > 0, "perfect", "approximate")).all()
    assert (catalogue.kind == "perfect").any()  # a chain at tau 0.01 settles where every residue is the argmax
    bound = catalogue.theorem8_bound[catalogue.kind == "perfect"]
    np.testing.assert_allclose(bound, np.exp(catalogue.min_gap[catalogue.kind == "perfect"] / 0.01) / 80)


def test_germline_gaps_inside_the_whole_gene_are_the_models_margins_there(antiberty):
    genes = ch.germline_seeds(antiberty, glauber.GERMLINE_CONTEXT).iloc[:2]
    inside = ch.germline_gaps(antiberty, genes, free=N)
    assert (inside.context == glauber.GERMLINE_CONTEXT).all() and (inside.free == N).all()
    gaps = np.asarray(inside.gaps.tolist())
    assert gaps.shape == (2, N) and np.isfinite(gaps).all()
    x = torch.tensor(genes.tokens.iloc[0]).unsqueeze(0).repeat(N, 1)
    logp = glauber.conditional_log_probs(antiberty, x, torch.arange(N)).double()
    own = logp[torch.arange(N), x[0, :N]]
    other = logp.scatter(1, x[0, :N].unsqueeze(1), -math.inf)[:, antiberty.allowed].amax(1)
    np.testing.assert_allclose(gaps[0], (own - other).numpy(), atol=1e-4)
    assert ch.germline_family_view(inside).data.iloc[-1]["of sites"] == 2 * N
