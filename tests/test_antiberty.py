"""AntiBERTy, a protein masked LM pretrained by others (the `antiberty` 0.1.3 wheel ships its weights), offline
through the core: loading by name, its 20 amino acids, conditionals against the plain forward, germline seeds
from `anarci`, and an exact Glauber chain over the full vocabulary on a window of a germline."""

import importlib.util
import re

import pytest
import torch

import glauber_core as glauber

pytestmark = [  # found, not imported: importing antiberty costs every worker seconds of collection
    pytest.mark.skipif(
        not importlib.util.find_spec("antiberty"), reason="needs the PyPI package antiberty==0.1.3 (requirements.txt)"
    ),
]


@pytest.fixture(scope="module")
def antiberty():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return glauber.load_mlm("AntiBERTy")


def germline(allele: str) -> str:
    return next(residues for name, _, _, residues in glauber.germline_v_genes() if name == allele)


def test_loads_offline_by_name_in_fp32(antiberty):
    assert isinstance(antiberty, glauber.MaskedLMConditionals) and antiberty.name_or_path == "antiberty"
    assert antiberty.vocab_size == 25 and antiberty.protein
    assert {p.dtype for p in antiberty.model.parameters()} == {torch.float32}
    assert antiberty.autocast is False  # fp32 on every device unless asked otherwise (bf16 gains little at 26M)


def test_proposals_are_exactly_the_20_amino_acids(antiberty):
    ids = antiberty.allowed.nonzero().squeeze(1).tolist()
    assert sorted(antiberty.tokenizer.convert_ids_to_tokens(ids)) == sorted(glauber.AMINO_ACIDS)


def test_a_germline_round_trips_through_encode_and_decode(antiberty):
    residues = germline("IGHV3-23*01")
    ids = antiberty.encode(residues)
    assert len(ids) == len(residues) and bool(antiberty.allowed[ids].all())
    assert antiberty.decode(ids) == residues and antiberty.decode_batch(ids[None]) == [residues]
    assert torch.equal(antiberty.encode(" ".join(residues)), ids)


def test_conditionals_equal_the_full_forward(antiberty):
    x = antiberty.encode(germline("IGKV1-39*01"))[:40].unsqueeze(0).repeat(4, 1)
    sites = torch.tensor([0, 7, 22, 39])
    ours = glauber.conditional_log_probs(antiberty, x, sites)
    tok = antiberty.tokenizer
    ids = torch.cat([torch.full((4, 1), tok.cls_token_id), x, torch.full((4, 1), tok.sep_token_id)], 1)
    ids[torch.arange(4), sites + 1] = tok.mask_token_id
    with torch.no_grad():
        logits = antiberty.model(input_ids=ids).logits[torch.arange(4), sites + 1]
    allowed = antiberty.allowed
    expected = torch.log_softmax(logits[:, allowed], -1)
    torch.testing.assert_close(ours[:, allowed], expected, atol=1e-5, rtol=0)
    assert (ours[:, ~allowed] == float("-inf")).all()


def test_predicts_masked_residues_of_human_heavy_germlines(antiberty):
    x = torch.stack([antiberty.encode(germline(a))[:60] for a in ("IGHV1-69*01", "IGHV3-23*01", "IGHV4-34*01")])
    sites = torch.arange(0, 60, 4).repeat(3)  # every fourth site of FR1 to CDR2 of each (45 forwards)
    rows = x.repeat_interleave(15, 0)
    scores = antiberty.log_scores(rows, sites)
    accuracy = (scores.argmax(-1).cpu() == rows[torch.arange(len(rows)), sites]).double().mean()
    assert accuracy > 0.9  # about 99% measured over every site of human heavy germlines


def test_germline_seeds_carry_gene_family_and_chain(antiberty):
    seeds = glauber.seed_passages(antiberty, 24, 8, seed=3)
    assert seeds.tokens.shape == (8, 24) and len(set(seeds.texts)) == 8
    genes = {name: (family, chain, residues) for name, family, chain, residues in glauber.germline_v_genes()}
    for text, gene, family, chain in zip(seeds.texts, seeds.genes, seeds.families, seeds.chains):
        assert genes[gene][0] == family and genes[gene][1] == chain and genes[gene][2][:24] == text
        assert family.startswith(("IGHV", "IGKV", "IGLV")) and chain in ("heavy", "kappa", "lambda")
    assert seeds.topics == seeds.families and seeds.article_ids == seeds.genes
    assert antiberty.decode_batch(seeds.tokens) == seeds.texts
    assert torch.equal(glauber.seed_passages(antiberty, 24, 8, seed=3, passages="germline").tokens, seeds.tokens)
    heavy = glauber.seed_passages(antiberty, 30, 5, topic="heavy", region="cdr1")
    assert set(heavy.chains) == {"heavy"} and all(t.startswith("G") for t in heavy.texts)  # CDR1 opens GFTF/GYTF...
    assert set(glauber.seed_passages(antiberty, 12, 4, topic="IGHV3").families) == {"IGHV3"}
    assert torch.equal(glauber.seed_passages(antiberty, 24, 8, seed=3, passages="bbc").tokens, seeds.tokens)
    with pytest.raises(ValueError, match="'germline' seeds a protein model"):
        glauber.seed_passages(antiberty, 12, 2, passages="ms_marco")
    with pytest.raises(ValueError, match="region must be one of"):
        glauber.seed_passages(antiberty, 12, 2, region="cdr3")


def test_germline_table_counts():
    genes = glauber.germline_v_genes()
    chains = [chain for _, _, chain, _ in genes]
    assert (chains.count("heavy"), chains.count("kappa"), chains.count("lambda")) == (249, 82, 86)
    assert sum(family == "IGHV3" for _, family, _, _ in genes) == 111
    assert all("-" not in residues and 90 <= len(residues) <= 101 for *_, residues in genes)


def test_exact_window_chain_over_the_full_vocabulary(antiberty):
    context = antiberty.encode(germline("IGHV1-69*01"))[:30]
    every = antiberty.allowed.nonzero().squeeze(1)
    window = glauber.WindowConditionals(antiberty, context, [12, 17], every)  # 20 x 20 states
    kernel = glauber.glauber_kernel(window, 2, 1.0)
    assert window.forwards == 2 * 20  # one forward per (site, value of the other site)
    assert (kernel.sum(1) - 1).abs().max() <= 1e-12
    mu = glauber.exact_stationary(window, 2, 1.0)
    assert (mu @ kernel - mu).abs().max() <= 1e-12 and abs(mu.sum() - 1) <= 1e-12 and mu.min() > 0
    # a kernel entry is the model's own conditional: P(x, x^{i -> a}) = p(a | x_-i) / 2 for a != x_i
    full = window.full_states(torch.tensor([[3, 5]]))
    p = glauber.conditional_probs(antiberty, full, torch.tensor([17]))[0, every].double()
    torch.testing.assert_close(kernel[3 * 20 + 5, 3 * 20 + 11], p[11].cpu() / 2, atol=1e-6, rtol=0)


def test_missing_packages_give_one_sentence(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *rest: None if name in ("antiberty", "anarci") else find_spec(name, *rest),
    )
    with pytest.raises(ValueError, match=r"`pip install antiberty==0\.1\.3`") as error:
        glauber.load_mlm("antiberty")
    assert str(error.value).count(". ") == 0
    glauber.germline_v_genes.cache_clear()
    glauber._imgt_v_genes.cache_clear()
    try:
        with pytest.raises(ValueError, match="pip install --no-deps anarci"):
            glauber.germline_v_genes()
    finally:
        glauber.germline_v_genes.cache_clear()
        glauber._imgt_v_genes.cache_clear()


def test_germline_regions_follow_the_imgt_numbering():
    # IGHV3-23*01: FR1 25 residues (IMGT gap at 10), CDR1 GFTFSSYA (8), FR2 17, CDR2 ISGSGGST (8), FR3 to the end
    residues = germline("IGHV3-23*01")
    regions = glauber.germline_regions("IGHV3-23*01")
    assert list(regions) == ["fr1", "cdr1", "fr2", "cdr2", "fr3"]
    assert regions["fr1"] == (0, 25) and residues[slice(*regions["cdr1"])] == "GFTFSSYA"
    assert residues[slice(*regions["cdr2"])] == "ISGSGGST" and regions["fr3"][1] == len(residues)
    # IGKV1-39*01: CDR1 QSISSY (6), CDR2 AAS (3)
    kappa = germline("IGKV1-39*01")
    regions = glauber.germline_regions("IGKV1-39*01")
    assert kappa[slice(*regions["cdr1"])] == "QSISSY" and kappa[slice(*regions["cdr2"])] == "AAS"
    with pytest.raises(ValueError, match="no human germline V gene 'IGHV9-1\\*01'"):
        glauber.germline_regions("IGHV9-1*01")


@pytest.mark.parametrize(
    "text, letter, position",
    [("EVQLVX", "X", 6), ("EVQB", "B", 4), ("EVZQ", "Z", 3), ("UEVQ", "U", 1), ("EV-QL", "-", 3), ("EVQ*", "*", 4)]
    + [("EV1Q", "1", 3), ("EV[MASK]QL", "[", 3)],
)
def test_a_letter_outside_the_20_residues_is_named_with_its_position(antiberty, text, letter, position):
    with pytest.raises(ValueError, match=rf"'{re.escape(letter)}' at position {position} is not one of the 20"):
        antiberty.encode(text)


def test_lowercase_and_spaces_encode_as_residues_and_empty_text_asks_for_a_residue(antiberty):
    assert antiberty.encode("evq lv").tolist() == antiberty.encode("EVQLV").tolist()
    with pytest.raises(ValueError, match="give at least one residue"):
        antiberty.encode("  ")


def test_scores_refuse_the_states_glauber_refuses(antiberty):
    """[UNK] in the context and a state longer than the model takes: check_tokens' error, from log_scores and
    conditional_log_probs alike, never a distribution or a deep RuntimeError."""
    state = antiberty.encode("EVQLVESGGG").unsqueeze(0)
    state[0, 3] = antiberty.tokenizer.unk_token_id
    site = torch.tensor([0])
    for score in (antiberty.log_scores, lambda x, i: glauber.conditional_log_probs(antiberty, x, i)):
        with pytest.raises(ValueError, match="special or unused token ids"):
            score(state, site)
        with pytest.raises(ValueError, match="at most 510"):
            score(torch.full((1, 600), 8), site)


def test_seed_passages_name_what_exists(antiberty):
    with pytest.raises(ValueError, match="has n = 200 residues .*longest: 1\\d\\d.*IGHV3"):
        glauber.seed_passages(antiberty, 200, 1)
    with pytest.raises(ValueError, match="'IGHV9'.*families and chains: IGHV1, IGHV2"):
        glauber.seed_passages(antiberty, 10, 1, topic="IGHV9")
