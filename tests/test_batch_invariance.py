"""A chain does not depend on its batch, bit for bit (MaskedLMConditionals' fixed-shape blocks and checked larger
blocks): scores, Glauber chains, coupled pairs and one coupling-grid temperature, alone and inside larger batches of
other starts and seeds."""

import copy

import pytest
import torch

import glauber_core as glauber
from chapters.phase.protocol import coupling_grid


@pytest.fixture(scope="module")
def bundled():
    return glauber.load_mlm(device="cpu")


def random_states(cond, count: int, n: int, seed: int) -> torch.Tensor:
    ids = cond.allowed.cpu().nonzero().squeeze(1)
    return ids[torch.randint(len(ids), (count, n), generator=torch.Generator().manual_seed(seed))]


def test_a_rows_scores_are_bit_identical_alone_and_inside_batches_of_other_rows(bundled):
    """The bundled model, which without blocks moves a row's last bits with the batch size (8 against 16 or more on
    this machine's kernels): 8 rows alone, then as the head of batches of 9, 64 and 256 whose other rows hold other
    states and sites, and at the tail of a block."""
    x = random_states(bundled, 256, 24, seed=0)
    sites = torch.randint(24, (256,), generator=torch.Generator().manual_seed(1))
    alone = bundled.log_scores(x[:8], sites[:8])
    for batch in (9, 64, 256):
        assert torch.equal(bundled.log_scores(x[:batch], sites[:batch])[:8], alone), batch
    tail = bundled.log_scores(torch.cat([x[100:110], x[:8]]), torch.cat([sites[100:110], sites[:8]]))
    assert torch.equal(tail[10:], alone)


def test_block_size_is_a_setting_and_rejects_a_bad_value(tiny_model_dirs):
    assert glauber.BLOCK_SIZES["cpu"] >= 1 and glauber.BLOCK_SIZES["cuda"] >= glauber.BLOCK_SIZES["cpu"]
    tiny = glauber.load_mlm(tiny_model_dirs["bert"], device="cpu")
    assert tiny.block_size == glauber.BLOCK_SIZES["cpu"]
    x = random_states(tiny, 5, 6, seed=2)
    sites = torch.tensor([0, 1, 2, 3, 4])
    reference = tiny.log_scores(x, sites)
    model, tokenizer = tiny.model, tiny.tokenizer
    for size in (1, 2, 7):  # every size gives the same values to fp32 rounding, and the requested shape
        other = glauber.MaskedLMConditionals(model, tokenizer, device="cpu", block_size=size)
        assert other.log_scores(x, sites).shape == reference.shape
        torch.testing.assert_close(other.log_scores(x, sites), reference, rtol=1e-5, atol=1e-5)
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="block_size"):
            glauber.MaskedLMConditionals(model, tokenizer, device="cpu", block_size=bad)


def test_larger_blocks_are_a_setting_and_reject_a_bad_value(tiny_model_dirs):
    tiny = glauber.load_mlm(tiny_model_dirs["bert"], device="cpu")
    assert tiny.larger_blocks == glauber.LARGER_BLOCKS["cpu"]
    model, tokenizer = tiny.model, tiny.tokenizer
    assert glauber.MaskedLMConditionals(model, tokenizer, device="cpu", larger_blocks=()).larger_blocks == ()
    assert glauber.MaskedLMConditionals(model, tokenizer, device="cpu", larger_blocks=[96, 32]).larger_blocks == (
        32,
        96,
    )
    for bad in ((0,), (-16,), (2.5,)):
        with pytest.raises(ValueError, match="larger block"):
            glauber.MaskedLMConditionals(model, tokenizer, device="cpu", larger_blocks=bad)


def calls_made(cond) -> list[int]:
    """The sizes of the model calls ``cond`` makes from now on (its ``_block_scores`` wrapped, in place)."""
    sizes, score = [], cond._block_scores
    cond._block_scores = lambda tokens, positions, size: sizes.append(size) or score(tokens, positions, size)
    return sizes


def test_a_batch_goes_in_checked_larger_blocks_then_blocks_with_the_blocks_bits(bundled):
    """100 rows: a checked block of 64, then blocks of 16 (the last padded); the scores are those of blocks of 16
    alone, bit for bit. Whether 64 passes its check is this machine's; either way the bits must be the blocks'."""
    x = random_states(bundled, 100, 24, seed=20)
    sites = torch.randint(24, (100,), generator=torch.Generator().manual_seed(21))
    blocks_only = copy.copy(bundled)
    blocks_only.larger_blocks = ()
    cond = copy.copy(bundled)
    cond._block_checks = {}
    larger = cond.checked_blocks(24, 100)
    sizes = calls_made(cond)
    scores = cond.log_scores(x, sites)
    assert sizes == (larger + [16] * 3 if larger == [64] else [16] * 7)
    assert torch.equal(scores, blocks_only.log_scores(x, sites))
    assert cond.checked_blocks(24, 63) == [] and cond.checked_blocks(24, 1000) == larger
    odd = copy.copy(bundled)  # a size that is no multiple of the block: the check still compares the same rows
    odd.larger_blocks, odd._block_checks = (40,), {}
    assert torch.equal(odd.log_scores(x, sites), scores)


def test_a_larger_block_that_moves_a_rows_bits_is_never_used(bundled):
    """A model whose calls of 64 rows round differently from calls of 16 (simulated: 1e-6 added to a call of 64):
    the check refuses 64, and a batch of 64 goes in blocks of 16, whose scores it returns unchanged."""
    cond = copy.copy(bundled)
    cond._block_checks = {}
    score = cond._block_scores
    cond._block_scores = lambda tokens, positions, size: score(tokens, positions, size) + (1e-6 if size == 64 else 0)
    assert cond.checked_blocks(24, 64) == []
    x = random_states(bundled, 64, 24, seed=22)
    sites = torch.randint(24, (64,), generator=torch.Generator().manual_seed(23))
    sizes = calls_made(cond)
    blocks_only = copy.copy(bundled)
    blocks_only.larger_blocks = ()
    assert torch.equal(cond.log_scores(x, sites), blocks_only.log_scores(x, sites)) and sizes == [16] * 4


def test_score_dtype_is_bf16_under_cuda_autocast_else_the_models(bundled):
    """The rounding the scores carry (section 7's PL-gap floor): fp32 on the CPU, bf16 when the encoder runs under
    CUDA autocast (the device is only relabelled here: the property reads the settings, no forward runs)."""
    assert bundled.score_dtype == torch.float32
    on_gpu = copy.copy(bundled)
    on_gpu.device, on_gpu.autocast = torch.device("cuda"), True
    assert on_gpu.score_dtype == torch.bfloat16
    on_gpu.autocast = False
    assert on_gpu.score_dtype == torch.float32


@pytest.fixture(scope="module")
def tiny_blocked(tiny_model_dirs):
    """The tiny BERT (the bundled word-piece vocabulary, 30,522 ids) in its default blocks (16 rows, and checked
    calls of 64); its rows, too, move in their last bits with the batch size when computed unblocked."""
    return glauber.load_mlm(tiny_model_dirs["bert"], device="cpu")


def test_eight_chains_are_identical_alone_and_inside_batches_of_64_and_256_over_500_steps(tiny_blocked):
    """The issue's must-hold: 8 chains, token for token at every step, alone and as part of batches of 64 and 256
    whose other chains have other starts and other seeds."""
    x0 = random_states(tiny_blocked, 256, 16, seed=3)
    seeds = glauber.chain_seeds(11, 256)
    alone = glauber.glauber(tiny_blocked, x0[:8], 500, seed=seeds[:8], progress=False)
    for batch in (64, 256):
        inside = glauber.glauber(tiny_blocked, x0[:batch], 500, seed=seeds[:batch], progress=False)
        assert torch.equal(inside.tokens[:8], alone.tokens), batch
        assert torch.equal(inside.new_tokens[:8], alone.new_tokens) and torch.equal(inside.sites[:8], alone.sites)
        assert torch.equal(inside.log_probs[:8], alone.log_probs)
    assert (alone.new_tokens != alone.old_tokens).float().mean() > 0.9  # the chains move: the test compares motion


def test_coupled_pairs_are_identical_alone_and_inside_a_batch_whose_active_set_shrinks(tiny_blocked):
    """coupling_times drops met pairs, so the batch the model sees shrinks step by step: pair times and the pairs'
    fates are those of each pair alone."""
    x0, y0 = random_states(tiny_blocked, 70, 4, seed=4), random_states(tiny_blocked, 70, 4, seed=5)
    y0[::3] = x0[::3]
    y0[1::3, 1:] = x0[1::3, 1:]  # one site apart: these pairs meet early, and the batch shrinks
    seeds = glauber.chain_seeds(7, 70)
    together = glauber.coupling_times(tiny_blocked, x0, y0, 60, 3.0, seed=seeds, progress=False)
    alone = torch.cat(
        [
            glauber.coupling_times(
                tiny_blocked, x0[p : p + 1], y0[p : p + 1], 60, 3.0, seed=seeds[p : p + 1], progress=False
            )
            for p in range(0, 70, 9)
        ]
    )
    assert torch.equal(together[::9], alone)
    assert (together == 0).sum() >= 20 and (together > 0).any()


def test_one_coupling_grid_temperature_alone_and_inside_a_grid_is_identical(tiny_blocked):
    x0, y0 = random_states(tiny_blocked, 6, 3, seed=8), random_states(tiny_blocked, 6, 3, seed=9)
    grid = coupling_grid(tiny_blocked, x0, y0, [0.5, 2.0, 8.0], 40, seed=1, progress=False)
    alone = coupling_grid(tiny_blocked, x0, y0, [2.0], 40, seed=1, progress=False)
    assert grid[grid.temperature == 2.0].time.tolist() == alone.time.tolist()


def test_tempered_and_window_chains_are_those_of_each_temperature_and_window_alone(tiny_blocked):
    """TemperedConditionals (many temperatures, one batch) and WindowConditionals (free sites in a frozen context)
    keep the property: a row's chain equals the run at its temperature, or in its window, alone."""
    x0 = random_states(tiny_blocked, 12, 8, seed=10)
    temperatures = [0.5] * 4 + [1.0] * 4 + [2.0] * 4
    seeds = glauber.chain_seeds(3, 12)
    tempered = glauber.glauber(
        glauber.TemperedConditionals(tiny_blocked, temperatures), x0, 50, seed=seeds, progress=False
    )
    for k, tau in enumerate((0.5, 1.0, 2.0)):
        rows = slice(4 * k, 4 * k + 4)
        single = glauber.glauber(tiny_blocked, x0[rows], 50, tau, seed=seeds[rows], progress=False)
        assert torch.equal(tempered.tokens[rows], single.tokens), tau
    window = glauber.WindowConditionals(tiny_blocked, x0[0], [1, 4, 6])
    starts = random_states(tiny_blocked, 40, 3, seed=12)
    batch = glauber.glauber(window, starts, 50, seed=list(range(40)), progress=False)
    single = glauber.glauber(window, starts[5:6], 50, seed=[5], progress=False)
    assert torch.equal(batch.tokens[5:6], single.tokens)
