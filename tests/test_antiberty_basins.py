"""Chapter 4 on AntiBERTy (a protein masked LM): the germline-family scorer that stands in for the topic scorer,
checked on the germlines themselves, and a short Glauber run through the chapter's recurrence statistics with
IGHV3 in politics' place."""

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


def test_families_are_the_human_germline_families():
    families = ch.germline_families()
    assert len(families) == 22 and families[:7] == [f"IGHV{k}" for k in range(1, 8)]
    assert ch.FAMILY_TARGET in families and set(ch.FAMILY_SEEDS) <= set(families)
    heavy = [f for _, f, c, _ in glauber.germline_v_genes() if c == "heavy"]
    assert max(set(heavy), key=heavy.count) == ch.FAMILY_TARGET == "IGHV3"


@pytest.mark.parametrize("n", [20, None])
def test_a_germline_is_nearest_its_own_family_with_identity_one(n):
    genes = glauber.germline_v_genes()
    texts = [r[:n] if n else r for *_, r in genes]
    own = [f for _, f, _, _ in genes]
    families = ch.germline_families()
    identity = ch.family_identity(texts).numpy()
    at = np.arange(len(texts)), [families.index(f) for f in own]
    assert np.allclose(identity[at], 1.0) and (identity <= 1).all() and (identity >= 0).all()
    scores = ch.family_scores(texts)
    assert torch.allclose(scores.sum(1), torch.ones(len(texts)))
    nearest = np.asarray(families)[scores.argmax(1).numpy()]
    # a cut shared by two families is a tie: its own family is then among the nearest
    assert all(p == f or identity[k, families.index(p)] == 1 for k, (p, f) in enumerate(zip(nearest, own)))
    assert np.mean(nearest == np.asarray(own)) > 0.98


def test_identity_counts_residues_and_scores_route_through_topic_scores():
    germline = next(r for a, _, _, r in glauber.germline_v_genes() if a == "IGHV3-23*01")[:20]
    mutated = "W" * 5 + germline[5:]
    assert ch.family_identity([mutated], ["IGHV3"]).item() >= 0.75
    assert ch.family_identity([mutated], ["IGHV3"], counts=True).item() >= 15
    through = ch.topic_scores([germline, mutated], ["IGHV3", "IGKV1"], model=ch.FAMILY_SCORER)
    assert torch.allclose(through, ch.family_scores([germline, mutated], ["IGHV3", "IGKV1"]))
    assert (through[:, 0] > 0.5).all()
    with pytest.raises(ValueError, match="no human germline families"):
        ch.family_identity([germline], ["politics"])
    check, accuracy = ch.germline_check_frames(20, ch.germline_families())
    assert set(accuracy.index) == {"heavy", "kappa", "lambda"} and (check["own identity"] == 1).all()


def test_a_short_antiberty_run_through_the_recurrence_statistics(antiberty):
    cfg = ch.settings("smoke", antiberty, passages="bbc")  # a protein model takes germline seeds always
    n, labels, baseline, target, seed_labels = 12, cfg.labels, cfg.baseline, cfg.target, cfg.seed_labels
    assert cfg.protein and cfg.passages == "germline" and labels == ch.germline_families()
    assert target == ch.FAMILY_TARGET and seed_labels == {f: f for f in ch.FAMILY_SEEDS}
    seeds = ch.family_seeds(antiberty, n, 2, seed=0)
    assert [p.families for p in seeds] == [[f, f] for f in ch.FAMILY_SEEDS]
    x0 = torch.cat([p.tokens for p in seeds])
    seed_topic = [t for p in seeds for t in p.topics]
    run = glauber.glauber(antiberty, x0, 16, 1.0, seed=0, record_every=4, progress=False)
    scores, steps = ch.trajectory_topic_scores(antiberty, run, labels, model=ch.FAMILY_SCORER)
    assert scores.shape == (len(x0), 5, len(labels))
    start = scores[:, 0].argmax(1).tolist()
    assert [labels[k] for k in start] == seed_topic  # each chain starts at a germline of its family
    frame = ch.topic_frame(scores, steps, labels, seed_topic=seed_topic)
    chance = ch.state_topic_scores(
        antiberty, ch.chance_tokens(antiberty, 40, n, seed=1), labels, model=ch.FAMILY_SCORER
    )
    chance_target = chance[:, labels.index(target)].numpy()
    crossings = ch.crossing_frame(frame, labels, baseline, target, seed_labels)
    assert len(crossings) == 8 and target not in set(crossings.seed_topic)
    recurrence = ch.recurrence_verdict(crossings, chance_target, baseline)
    ends = ch.chain_ends(frame, labels, target, seed_labels)
    rises = ch.rise_frame(ends)
    ends_judged = ch.ends_verdict(ends, chance_target)
    assert list(rises.index) == [f for f in ch.FAMILY_SEEDS if f != target]
    own = [labels.index(t) for t in seed_topic]
    at = np.arange(len(own))
    loss = ch.seed_loss_frame(
        seed_topic, scores[at, 0, own].numpy(), scores[at, -1, own].numpy(), chance[:, own].numpy()
    )
    assert list(loss.index) == list(ch.FAMILY_SEEDS) and (loss.chains == 2).all()
    table3 = ch.recurrence_frame(frame, target, baseline, seed_labels)
    assert (table3["seed score at start"] > 0.5).all()  # 12 residues: near, not alone
    rows = ch.claim_rows(
        crossings,
        recurrence,
        rises,
        ends,
        ends_judged,
        loss,
        setup={"n": n, "labels": len(labels)},
        model="antiberty",
        target=target,
    )
    assert [r["claim"] for r in rows] == [
        "politics_recurrence",
        "politics_rises_every_topic",
        "politics_ends_above_basin_free",
        "seed_topic_loss",
    ]
    assert all(
        r["verdict"] in vd.VERDICTS and ("IGHV3" in r["quantity"] or "seed family" in r["quantity"]) for r in rows
    )
    assert all("politics" not in r["ours_text"] for r in rows)
    assert "softmax over 22 families" in rows[0]["quantity"]
    summary = ch.summary_text(table3, frame, labels, None, q=0.0, looks=4, by_chance=0.0, run="test", target=target)
    assert summary["prefix_gains"] == "no prefix run"
