"""Chapter 3 on AntiBERTy (a protein MLM; the `antiberty` 0.1.3 wheel ships its weights), at a tiny size:
coupled chains on two free sites of a frozen germline, and the Hamming distance to the start that replaces
sentence embeddings. Skipped when antiberty is not installed."""

import importlib.util

import pytest
import torch

import glauber_core as glauber
from chapters import phase as ch

pytestmark = [  # found, not imported: importing antiberty costs every worker seconds of collection
    pytest.mark.skipif(
        not importlib.util.find_spec("antiberty"), reason="needs the PyPI package antiberty==0.1.3 (requirements.txt)"
    ),
    pytest.mark.skipif(
        not importlib.util.find_spec("anarci"), reason="germline seeds need the PyPI package anarci (requirements.txt)"
    ),
]

CONTEXT = 12


@pytest.fixture(scope="module")
def contexts(antiberty):
    return glauber.seed_passages(antiberty, CONTEXT, 2, seed=0).tokens


def test_window_conditionals_are_the_models_own(antiberty, contexts):
    sites = ch.window_sites(CONTEXT, 2)
    window = glauber.WindowConditionals(antiberty, contexts[0], sites)
    state = torch.stack([contexts[0, sites], contexts[1, sites]])
    positions = torch.tensor([0, 1])
    full = window.full_states(state)
    assert torch.equal(full[0], contexts[0]) and torch.equal(full[1, sites], contexts[1, sites])
    expected = antiberty.log_scores(full, sites[positions])
    assert torch.allclose(window.log_scores(state, positions), expected)
    assert glauber.is_protein(antiberty)
    for profile, table in ch.PROTEIN_SETTINGS.items():  # a protein MLM runs the protein profiles
        cfg = ch.settings(profile, antiberty)
        assert cfg.protein and vars(cfg).items() >= table.items()


def test_two_free_sites_couple_within_the_budget(antiberty, contexts):
    grid = ch.window_coupling_grid(antiberty, contexts[:1], 2, [2.0], pairs=2, max_steps=60, seed=0, progress=False)
    assert (
        len(grid) == 2
        and (grid.n == 2).all()
        and (grid.context == CONTEXT).all()
        and (grid.gene == 0).all()
        and (grid.free == 2).all()
    )
    assert grid.coupled.all() and (grid.time >= 0).all() and (grid.time <= 60).all()


def test_hamming_distance_to_the_start(antiberty, contexts):
    frozen = ch.window_mask(CONTEXT, 2)
    run, rows = ch.multi_temperature_glauber(
        antiberty, contexts[:1], [1.0, 4.0], 6, seed=0, progress=False, frozen=frozen
    )
    assert torch.equal(run.tokens[:, :, frozen], run.tokens[:, :1, frozen].expand(-1, run.tokens.shape[1], -1))
    distance = ch.hamming_distances(run, frozen)
    assert distance.shape == (2, 7) and (distance[:, 0] == 0).all()
    assert ((distance >= 0) & (distance <= 1)).all()
    assert set((distance * 2).round().unique().tolist()) <= {0.0, 1.0, 2.0}  # shares of 2 free sites
    assert torch.equal(ch.drift_distances(antiberty, None, run, frozen), distance)
