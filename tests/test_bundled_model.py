"""The bundled masked LM in models/minilm-l4-bbc-mlm/ and its training script's masking."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
FOLDER = MODELS_DIR / "minilm-l4-bbc-mlm"
needs_weights = pytest.mark.skipif(
    not (FOLDER / "model.safetensors").exists(),
    reason=f"bundled weights missing from {FOLDER}; rebuild with `python models/train.py`",
)

# (text, acceptable words): one of them must be among the top-5 fillers of [MASK]. A model that has
# learned English news passes; a random or untrained head does not.
FILL_MASK_CHECKS = [
    ("the prime [MASK] said the plans would go ahead.", {"minister"}),
    ("prime minister tony [MASK] said on monday that the election would be fought on the economy.",
     {"blair"}),
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


@pytest.fixture(scope="module")
def bundled():
    """The bundled model (float32, eval mode) and its tokenizer."""
    from transformers import AutoTokenizer, BertForMaskedLM

    model = BertForMaskedLM.from_pretrained(FOLDER, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(FOLDER)


@needs_weights
def test_folder_has_fp16_weights_card_and_tokenizer():
    from safetensors import safe_open

    weights = FOLDER / "model.safetensors"
    assert weights.stat().st_size <= 50 * 2**20
    with safe_open(weights, framework="pt") as f:
        dtypes = {f.get_slice(name).get_dtype() for name in f.keys()}
    assert dtypes == {"F16"}
    config = json.loads((FOLDER / "config.json").read_text())
    assert config["num_hidden_layers"] == 4 and config["vocab_size"] == 30522
    assert (FOLDER / "tokenizer.json").exists() or (FOLDER / "vocab.txt").exists()
    card = (FOLDER / "README.md").read_text()
    assert "Apache-2.0" in card and "all-MiniLM-L6-v2" in card


@needs_weights
def test_loads_as_float32_with_tied_head():
    """Load time (under 2 s) is measured in benchmarks/glauber_speed.py, not in a timed test."""
    from transformers import BertForMaskedLM

    model = BertForMaskedLM.from_pretrained(FOLDER, dtype=torch.float32)
    assert next(model.parameters()).dtype == torch.float32
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


@needs_weights
@pytest.mark.parametrize(("text", "expected"), FILL_MASK_CHECKS)
def test_fill_mask_knows_news_english(bundled, text, expected):
    model, tokenizer = bundled
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    position = int((ids[0] == tokenizer.mask_token_id).nonzero()[0])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, position]
    top5 = set(tokenizer.convert_ids_to_tokens(logits.topk(5).indices.tolist()))
    assert top5 & expected, f"{text!r}: top-5 {sorted(top5)} misses {sorted(expected)}"


def test_masking_never_proposes_special_or_unused_tokens():
    from transformers import AutoTokenizer

    train = load_train_module()
    tokenizer = AutoTokenizer.from_pretrained(train.source_model_path())
    gen = torch.Generator().manual_seed(0)
    chunks = [torch.randint(train.FIRST_WORD_ID, len(tokenizer), (n,), generator=gen) for n in range(20, 60)]
    ids, attention = train.collate(chunks, tokenizer)
    content = train.content_mask(ids, tokenizer)
    assert int(content.sum()) == sum(len(c) for c in chunks)
    corrupted, chosen = train.mask_tokens(ids, content, tokenizer.mask_token_id, len(tokenizer),
                                          torch.Generator().manual_seed(1), prob=0.5)
    changed = corrupted != ids
    assert not (changed & ~chosen).any() and not (chosen & ~content).any()
    replaced = corrupted[changed & (corrupted != tokenizer.mask_token_id)]
    assert len(replaced) > 0 and (replaced >= train.FIRST_WORD_ID).all()
    assert (corrupted[chosen] == tokenizer.mask_token_id).float().mean().item() == pytest.approx(0.8, abs=0.05)
    again, _ = train.mask_tokens(ids, content, tokenizer.mask_token_id, len(tokenizer),
                                 torch.Generator().manual_seed(1), prob=0.5)
    assert torch.equal(again, corrupted)
