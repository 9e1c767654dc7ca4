"""Chapters 1 and 2's own functions on AntiBERTy (a protein MLM pretrained by others) at a tiny size: a few
rectangles on germline seeds, and one exact window chain of k = 2 free sites over the full vocabulary."""

import importlib.util
import math

import numpy as np
import pytest
import torch

import glauber_core as glauber
from chapters import bounds as ch2
from chapters import incompatibility as ch1
from chapters.bounds import judging

pytestmark = [  # found, not imported: importing antiberty costs every worker seconds of collection
    pytest.mark.skipif(
        not importlib.util.find_spec("antiberty"), reason="needs the PyPI package antiberty==0.1.3 (requirements.txt)"
    ),
]


def test_rectangles_on_germline_seeds_give_finite_deltas_and_residue_texts(antiberty):
    cfg = ch1.settings("quick", antiberty)
    assert (cfg.source, cfg.control_source) == ("germline", "bbc")
    assert cfg.setup["passages"] == "IMGT germline V genes"
    assert cfg.seq_len == 20 and cfg.rectangles == 300
    # whole germline genes (90 residues: 303 distinct), rectangles in their first 20 residues (FR1)
    assert cfg.context_length == glauber.GERMLINE_CONTEXT and cfg.seeds == 300
    assert torch.equal(cfg.free_sites, torch.arange(20))
    seeds = glauber.seed_passages(antiberty, cfg.context_length, 4, seed=0, passages=cfg.source)
    rects = ch1.sample_rectangles(antiberty, seeds.tokens, 6, top_k=50, seed=0, sites=cfg.free_sites)
    assert bool((rects.i < 20).all() and (rects.j < 20).all())
    frame = ch1.rectangle_frame(antiberty, rects, 1.0, top_k=50, seed=0, free=cfg.seq_len)
    assert np.isfinite(frame.delta).all() and (frame.abs_delta > 0).all()
    assert (frame.context == 90).all() and (frame.free == 20).all()
    assert set(frame.A_new) <= set(glauber.AMINO_ACIDS) and (frame.A_new != frame.A).all()
    texts = ch1.rectangle_corner_texts(antiberty, rects, [0])[0]
    assert set(texts["x"]) <= set(glauber.AMINO_ACIDS) and len(texts["x"]) == 90 and texts["x"] in seeds.texts
    floor = ch1.rounding_floor(antiberty, rects, frame, 1.0, count=2)
    assert math.isfinite(floor["precision_gap"]) and floor["precision_gap"] < 1e-3  # fp32 against fp64
    assert (frame.abs_delta > floor["floor"]).any()


def test_exact_window_chain_of_two_free_sites(antiberty):
    contexts = ch2.window_contexts(antiberty, glauber.GERMLINE_CONTEXT, 2)
    assert contexts.family.nunique() == 2 and set(contexts.chain) <= {"heavy", "kappa", "lambda"}
    # the free sites start at each gene's own CDR1 (IGHV3-... : IMGT 27 is residue 26, the FR1 gap at 10)
    assert contexts["first"].tolist() == [glauber.germline_regions(g)["cdr1"][0] for g in contexts.label]
    assert ch2.full_vocabulary(antiberty)
    table, laws = ch2.full_window_frame(antiberty, contexts.iloc[:1], 2, [1.0, 4.0], "antiberty")
    assert (table.context == glauber.GERMLINE_CONTEXT).all() and (table.free == 2).all()
    assert list(table.columns[:10]) == [
        "model",
        "germline",
        "family",
        "k",
        "temperature",
        "states",
        "t_mix",
        "alpha",
        "bound",
        "pl_gap",
    ]
    assert (table.states == 400).all() and (table.forwards == 40).all()
    assert (table.row_error <= 1e-12).all() and (table.stationarity <= 1e-12).all()
    assert np.isfinite(table.t_mix).all()
    bounded = table[table.alpha < 1]
    assert (bounded.bound >= bounded.t_mix).all()
    assert (table.pl_gap >= 0).all()
    # the structured mixing time equals the matrix-power one
    every = antiberty.allowed.nonzero().squeeze(1)
    first = int(contexts["first"].iloc[0])
    window = glauber.WindowConditionals(antiberty, contexts.tokens[0], [first, first + 1], every)
    assert glauber.exact_mixing_time(window, 2, 1.0) == table.t_mix.iloc[0]
    label, k, tau, ids, mu, pl = laws[0]
    assert ids.shape == (400, 2) and abs(float(mu.sum()) - 1) < 1e-12 and abs(float(pl.sum()) - 1) < 1e-12
    assert [row["check"] for row in judging._window_checks(table)] == ["window_kernels", "theorem5_windows"]


def test_window_mixing_time_equals_matrix_powers_on_potts():
    generator = torch.Generator().manual_seed(0)
    raw = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    field = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    for coupling in (raw, 3 * raw):
        potts = glauber.PottsConditionals(coupling, field, 3)
        for tau in (0.3, 1.0):
            mu = glauber.exact_stationary(potts, 4, tau)
            assert ch2.window_mixing_time(potts, 4, tau, mu, chunk=7) == glauber.exact_mixing_time(potts, 4, tau)
