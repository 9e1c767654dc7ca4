"""The bundled masked LMs in models/ (the default minilm-l4-bbc-mlm and its family) and the training script's
masking."""

import functools
import importlib.util
import json
from pathlib import Path

import pytest
import torch

import glauber_core as glauber

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
FOLDER = MODELS_DIR / "minilm-l4-bbc-mlm"
FAMILY = glauber.bundled_models()
needs_weights = pytest.mark.skipif(
    not (FOLDER / "model.safetensors").exists(),
    reason=f"bundled weights missing from {FOLDER}; rebuild with `python models/train.py`",
)

# (text, acceptable words): one of them must be among the top-5 fillers of [MASK]. A model that has
# learned English news passes; a random or untrained head does not.
FILL_MASK_CHECKS = [
    ("the prime [MASK] said the plans would go ahead.", {"minister"}),
    ("prime minister tony [MASK] said on monday that the election would be fought on the economy.", {"blair"}),
    ("he scored two [MASK] in the second half.", {"goals", "tries"}),
    ("the company said its profits [MASK] by 10% last year.", {"rose", "fell", "increased"}),
    ("the [MASK] of england raised interest rates to 4.75%.", {"bank"}),
    ("the film won an [MASK] for best actress.", {"award", "oscar", "prize"}),
]


def load_train_module():
    """models/train.py as a module (models/ is not a package)."""
    spec = importlib.util.spec_from_file_location("bundled_train", MODELS_DIR / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def load_bundled(name):
    """A bundled model (float32, eval mode) and its tokenizer, loaded once per run (the tests only read them)."""
    from transformers import AutoTokenizer, BertForMaskedLM

    model = BertForMaskedLM.from_pretrained(MODELS_DIR / name, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(MODELS_DIR / name)


@functools.cache
def load_offline(name):
    """glauber.load_mlm(name) by its bundled name with the hub offline, once per run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return glauber.load_mlm(name, device="cpu")


def test_the_default_model_is_bundled():
    assert FOLDER.name in FAMILY


@needs_weights
@pytest.mark.parametrize("name", FAMILY)
def test_folder_has_fp16_weights_card_and_tokenizer(name):
    from safetensors import safe_open

    folder = MODELS_DIR / name
    weights = folder / "model.safetensors"
    assert weights.stat().st_size <= 45 * 2**20
    with safe_open(weights, framework="pt") as f:
        dtypes = {f.get_slice(key).get_dtype() for key in f.keys()}  # noqa: SIM118 (safetensors' handle is not a dict)
    assert dtypes == {"F16"}
    config = json.loads((folder / "config.json").read_text())
    assert f"minilm-l{config['num_hidden_layers']}-bbc-mlm" == name and config["vocab_size"] == 30522
    assert (folder / "tokenizer.json").exists() or (folder / "vocab.txt").exists()
    card = (folder / "README.md").read_text()
    assert "Apache-2.0" in card and "all-MiniLM-L6-v2" in card and "top-1" in card


@needs_weights
@pytest.mark.parametrize("name", FAMILY)
def test_loads_as_float32_with_tied_head(name):
    """Load time (under 2 s) is measured in benchmarks/glauber_speed.py, not in a timed test."""
    model, _ = load_bundled(name)
    assert next(model.parameters()).dtype == torch.float32
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


@needs_weights
@pytest.mark.parametrize("name", FAMILY)
def test_loads_offline_by_name_and_never_proposes_a_special_token(name):
    cond = load_offline(name)
    special = set(cond.tokenizer.all_special_ids) | set(range(1, 999))  # [PAD], [unusedN], [UNK], [CLS], ...
    assert not cond.allowed[sorted(special)].any()
    x0 = glauber.seed_passages(cond, 12, 4, seed=0).tokens
    run = glauber.glauber(cond, x0, 30, temperature=3.0, seed=0, record_every=30, progress=False)
    assert not set(run.final.unique().tolist()) & special


@needs_weights
@pytest.mark.parametrize("name", FAMILY)
def test_conditionals_match_the_models_own_full_logits_forward(name):
    """s_i(. ; x_-i) of the adapter (LM head at the masked row only) equals the full forward's logits there."""
    cond = load_offline(name)
    model, tokenizer = load_bundled(name)
    x = glauber.seed_passages(cond, 10, 3, seed=1).tokens
    sites = torch.tensor([0, 4, 9])
    ids = torch.cat([torch.full((3, 1), tokenizer.cls_token_id), x, torch.full((3, 1), tokenizer.sep_token_id)], 1)
    ids[torch.arange(3), sites + 1] = tokenizer.mask_token_id
    with torch.no_grad():
        full = model(input_ids=ids).logits[torch.arange(3), sites + 1]
    assert torch.allclose(cond.log_scores(x, sites).float(), full, atol=1e-4)


@needs_weights
@pytest.mark.parametrize("name", FAMILY)
def test_fill_mask_knows_news_english(name):
    """The default model fills every check; the family's shorter-trained members most of them."""
    model, tokenizer = load_bundled(name)
    misses = []
    for text, expected in FILL_MASK_CHECKS:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        position = int((ids[0] == tokenizer.mask_token_id).nonzero()[0])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, position]
        top5 = set(tokenizer.convert_ids_to_tokens(logits.topk(5).indices.tolist()))
        if not top5 & expected:
            misses.append(f"{text!r}: top-5 {sorted(top5)} misses {sorted(expected)}")
    allowed = 0 if name == FOLDER.name else len(FILL_MASK_CHECKS) // 3
    assert len(misses) <= allowed, misses


def test_masking_never_proposes_special_or_unused_tokens():
    from transformers import AutoTokenizer

    train = load_train_module()
    tokenizer = AutoTokenizer.from_pretrained(train.source_model_path())
    gen = torch.Generator().manual_seed(0)
    chunks = [torch.randint(train.FIRST_WORD_ID, len(tokenizer), (n,), generator=gen) for n in range(20, 60)]
    ids, attention = train.collate(chunks, tokenizer)
    content = train.content_mask(ids, tokenizer)
    assert int(content.sum()) == sum(len(c) for c in chunks)
    corrupted, chosen = train.mask_tokens(
        ids, content, tokenizer.mask_token_id, len(tokenizer), torch.Generator().manual_seed(1), prob=0.5
    )
    changed = corrupted != ids
    assert not (changed & ~chosen).any() and not (chosen & ~content).any()
    replaced = corrupted[changed & (corrupted != tokenizer.mask_token_id)]
    assert len(replaced) > 0 and (replaced >= train.FIRST_WORD_ID).all()
    assert (corrupted[chosen] == tokenizer.mask_token_id).float().mean().item() == pytest.approx(0.8, abs=0.05)
    again, _ = train.mask_tokens(
        ids, content, tokenizer.mask_token_id, len(tokenizer), torch.Generator().manual_seed(1), prob=0.5
    )
    assert torch.equal(again, corrupted)
