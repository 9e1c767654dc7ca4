"""Chapter 1's offline causal control: the de-quantised SmolLM2 copy in the user cache (a file of its own, so
that pytest-xdist can start its half-minute GGUF load beside the other long files rather than after them)."""

import pytest
import torch

from chapters import incompatibility as ch


@pytest.mark.notebook  # loads SmolLM2-135M from its GGUF (about 30 s): with the notebook runs, not in test-fast
def test_causal_control_cached_copy_gives_the_ggufs_numbers(tmp_path, monkeypatch):
    """ch.causal_control(""): the first call de-quantises the GGUF and stores a copy in the user cache, the
    second reads the copy; both give the same tokens and the same log-probabilities of a rectangle's states."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = ch.causal_control()
    assert (tmp_path / "glauber-mlm" / "smollm2-135m-fp32" / "config.json").is_file()
    assert not list((tmp_path / "glauber-mlm").glob("*.partial"))
    second = ch.causal_control()
    text = "The government said on Monday that the new budget would be announced next week."
    assert first.encode(text).tolist() == second.encode(text).tolist()
    tokens = first.encode(text)[None]
    assert torch.equal(first.log_joint(tokens), second.log_joint(tokens))
