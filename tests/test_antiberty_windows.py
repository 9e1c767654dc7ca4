"""A protein chapter's free sites stay inside FR1 (bt.fr1_window), its tables say what the state was
(ChapterRun.state, ChapterRun.save), chapter 3's regime chains run in a whole gene and chapter 5 runs the judged
temperature alone on a protein model. Skipped when antiberty or anarci is not installed."""

import importlib.util

import pandas as pd
import pytest
import torch

import book_tools as bt
import glauber_core as glauber
from chapters import bounds as ch2
from chapters import incompatibility as ch1
from chapters import phase as ch3
from chapters import traps as ch5

pytestmark = [
    pytest.mark.skipif(
        not importlib.util.find_spec("antiberty"), reason="needs the PyPI package antiberty==0.1.3 (requirements.txt)"
    ),
    pytest.mark.skipif(
        not importlib.util.find_spec("anarci"), reason="germline seeds need the PyPI package anarci (requirements.txt)"
    ),
]


def test_fr1_length_is_the_shortest_gapped_fr1_of_the_human_genes():
    # IMGT's FR1 is positions 1-26; a gene's FR1 residues are those positions less its gaps
    table = glauber._imgt_v_genes()["V"]
    lengths = [26 - gapped[:26].count("-") for chain in "HKL" for gapped in table[chain]["human"].values()]
    assert bt.fr1_length() == min(lengths) == 25
    assert bt.fr1_window(25) == 25 and bt.fr1_window(1) == 1
    for bad in (0, 26):
        with pytest.raises(ValueError, match=f"seq_len = {bad}: .*from 1 to 25"):
            bt.fr1_window(bad)


def test_every_protein_chapter_refuses_free_sites_past_fr1(antiberty):
    for settings in (ch1.settings, ch2.settings, ch5.settings):
        assert settings("smoke", antiberty, seq_len=25).free == 25
        with pytest.raises(ValueError, match="seq_len = 26"):
            settings("smoke", antiberty, seq_len=26)
    with pytest.raises(ValueError, match="window_span = 26"):
        ch3.settings("smoke", antiberty, window_span=26)
    assert ch1.settings("smoke").free == 0  # a text model: every site, no limit
    assert ch1.settings("smoke", seq_len=26).seq_len == 26


def test_chapter_5_runs_the_judged_temperature_alone_on_a_protein_model(antiberty):
    assert ch5.settings("quick", antiberty).temperatures == [ch5.PAPER_TAU]
    assert ch5.settings("quick", antiberty, temperatures=[]).temperatures == [ch5.PAPER_TAU]  # the notebook's default
    assert ch5.settings("quick", antiberty, temperatures=[1.0, 0.5]).temperatures == [1.0, 0.5]
    assert ch5.settings("quick").temperatures == ch5.SETTINGS["quick"]["temperatures"]


def test_a_protein_run_stamps_its_state_on_tables_without_one(antiberty, tmp_path, monkeypatch):
    monkeypatch.setenv("GLAUBER_RESULTS", str(tmp_path))
    run = bt.ChapterRun("01_incompatibility", "smoke", "antiberty")
    run._cond = antiberty
    plain = pd.DataFrame({"x": [1, 2]})
    assert "context" not in run.save(plain, "before")  # no state named: nothing stamped
    run.state(90, 12)
    saved = run.save(plain, "plain")
    assert saved.context.tolist() == [90, 90] and saved.free.tolist() == [12, 12]
    assert pd.read_csv(tmp_path / "01_incompatibility" / "plain.csv").free.tolist() == [12, 12]
    own_n = run.save(pd.DataFrame({"n": [2, 6]}), "grid")
    assert own_n.free.tolist() == [2, 6] and own_n.context.tolist() == [90, 90]
    own = run.save(pd.DataFrame({"context": [7], "free": [3]}), "own")
    assert own.context.tolist() == [7] and own.free.tolist() == [3]
    reference = run.save(pd.DataFrame({"x": [1], "model": ["Potts"]}), "potts")
    assert "context" not in reference and "free" not in reference
    mixed = run.save(pd.DataFrame({"x": [1, 2], "model": ["antiberty", "Potts"]}), "table")
    assert mixed.context.tolist()[0] == 90 and mixed.free.isna().tolist() == [False, True]
    written = (tmp_path / "01_incompatibility" / "table.csv").read_text().splitlines()
    assert written[1].endswith(",90,12,smoke") and written[2].endswith(",,,smoke")  # integers, then empty
    empty = run.save(pd.DataFrame({"x": []}), "empty")
    assert {"context", "free"} <= set(empty.columns) and empty.empty


def test_regime_chains_run_in_a_whole_gene_and_show_the_window(antiberty):
    cfg = ch3.settings("smoke", antiberty)
    start, frozen = ch3.regime_start(antiberty, cfg)
    assert start.shape == (1, cfg.context_length) and frozen.shape == (cfg.context_length,)
    free = (~frozen).nonzero().flatten()
    assert len(free) == cfg.large and int(free.max()) < cfg.window_span
    chains, _ = ch3.multi_temperature_glauber(antiberty, start, [1.0], 6, seed=0, progress=False, frozen=frozen)
    assert torch.equal(chains.tokens[0, :, frozen], start[:, frozen].expand(len(chains.steps), -1))
    excerpts = ch3.chain_excerpts(antiberty, chains, ["tau = 1"], count=2, frozen=frozen)
    shown = int(free.max()) + 2  # one residue after the last free site
    assert excerpts["tau = 1"].iloc[0] == antiberty.decode_batch(start[:, :shown])[0]
    whole = ch3.chain_excerpts(antiberty, chains, ["tau = 1"], count=2)
    assert whole["tau = 1"].iloc[0] == antiberty.decode_batch(start)[0]
