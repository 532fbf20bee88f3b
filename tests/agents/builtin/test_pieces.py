"""The fixed kernel pieces as real code: the helpers every generated file carries, and the
online-softmax steps of the attention kernel, run on NumPy blocks against a plain softmax."""

from __future__ import annotations

import numpy as np
import pytest

from maxkernel_tui.agents.builtin import source_parts
from maxkernel_tui.agents.builtin.pieces import attention, blocks, groups


@pytest.mark.parametrize(
    ("size", "preferred", "align", "block"),
    [(4096, 512, 8, 512), (384, 256, 128, 128), (100, 64, 8, 100), (24, 512, 8, 24)],
)
def test_pick_block_is_the_largest_aligned_divisor(size, preferred, align, block):
    assert blocks._pick_block(size, preferred, align) == block


def test_block_bytes_pads_to_whole_tiles():
    assert blocks._block_bytes(8, 128, np.float32) == 8 * 128 * 4
    assert blocks._block_bytes(1, 1, np.float32) == 8 * 128 * 4
    assert blocks._block_bytes(9, 130, np.float32) == 16 * 256 * 4
    assert blocks._block_bytes(1, 128, np.dtype("bfloat16")) == 16 * 128 * 2


def test_compiler_params_ask_for_vmem_only_over_the_default():
    small = blocks._compiler_params(("parallel",), blocks.DEFAULT_SCOPED_VMEM)
    large = blocks._compiler_params(("parallel",), 40 * 2**20)
    assert small.vmem_limit_bytes is None
    assert large.vmem_limit_bytes == 80 * 2**20
    huge = blocks._compiler_params(("parallel",), 90 * 2**20)
    assert huge.vmem_limit_bytes == blocks.VMEM_LIMIT_CAP


def test_fit_blocks_shrinks_depth_first_then_rows():
    def footprint(tm, tk):
        return tm * tk * 1024

    tm, tk = blocks._fit_blocks(4096, 4096, 1024, 2048, 8, footprint)
    assert footprint(tm, tk) <= blocks.VMEM_BUDGET
    assert tk == 256 and tm == 128


def test_fit_rows_stops_when_rows_cannot_shrink():
    assert blocks._fit_rows(4096, 1024, 8, lambda tm: tm * 2**20) == 32
    assert blocks._fit_rows(12, 12, 8, lambda tm: blocks.VMEM_BUDGET + 1) == 12


def test_group_totals_sums_each_group_of_adjacent_columns():
    tile = np.arange(4 * 256, dtype=np.float32).reshape(4, 256)
    expected = np.repeat(tile.reshape(4, 64, 4).sum(axis=2), 4, axis=1)
    np.testing.assert_allclose(np.asarray(groups._group_totals(tile, 4)), expected, rtol=1e-6)


def test_group_totals_keep_f32_accuracy_from_three_bf16_parts():
    # Full 24-bit mantissas over a wide range: one or two bf16 parts would lose digits.
    rng = np.random.default_rng(0)
    tile = (rng.standard_normal((8, 256)) * np.exp(rng.uniform(-8, 8, (8, 256)))).astype(np.float32)
    expected = np.repeat(tile.astype(np.float64).reshape(8, 16, 16).sum(axis=2), 16, axis=1)
    got = np.asarray(groups._group_totals(tile, 16), np.float64)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-6 * np.abs(tile).max())


@pytest.mark.parametrize("causal", [False, True])
def test_online_softmax_over_key_blocks_matches_a_plain_softmax(causal):
    rng = np.random.default_rng(0)
    seq, dim, block = 32, 16, 8
    q, k, v = (rng.standard_normal((seq, dim)).astype(np.float32) for _ in range(3))
    logits = q @ k.T
    if causal:
        logits = np.where(np.tril(np.ones((seq, seq), bool)), logits, -np.inf)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected = weights / weights.sum(axis=1, keepdims=True) @ v
    out = np.zeros((seq, dim), np.float32)
    for qi in range(seq // block):
        rows = slice(qi * block, (qi + 1) * block)
        max_ref, sum_ref = np.empty((block, 1), np.float32), np.empty((block, 1), np.float32)
        acc_ref = np.empty((block, dim), np.float32)
        attention._start_statistics(max_ref, sum_ref, acc_ref)
        last = attention._last_kv_block(qi, block, block) if causal else seq // block - 1
        for kj in range(int(last) + 1):
            cols = slice(kj * block, (kj + 1) * block)
            block_logits = attention._block_logits(q[rows], k[cols])
            if causal:
                block_logits = attention._causal_mask(block_logits, qi, kj, block, block, -np.inf)
            attention._online_softmax_step(block_logits, max_ref, sum_ref, acc_ref, v[cols])
        attention._finish_output(out[rows], acc_ref, sum_ref)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_a_file_carries_each_function_of_its_pieces_once_common_helpers_first():
    texts = source_parts.functions_source(
        source_parts.ROWWISE_STAGE, source_parts.CONV_STAGE, source_parts.ROWWISE_STAGE
    )
    names = [text.split("(", 1)[0].removeprefix("def ") for text in texts]
    assert names[:3] == ["_pick_block", "_block_bytes", "_compiler_params"]
    assert len(names) == len(set(names))  # rowwise.py's roles, shared by the conv, once
    assert names.index("_rowwise_block") < names.index("_image_role_block")
    assert names[-3:] == ["_conv_stage", "_fit_conv_rows", "_chunking"]
    assert "_fit_rows" in names and "_fit_blocks" not in names


def test_the_copied_functions_are_the_pieces_source():
    namespace: dict[str, object] = {}
    exec(  # the text a generated file carries defines the same working helper
        "import jax.numpy as jnp\n" + "\n".join(source_parts.functions_source()), namespace
    )
    assert namespace["_pick_block"](4096, 512, 8) == 512  # type: ignore[operator]
    assert source_parts.VMEM_CONSTANTS.startswith("# Scoped VMEM")
    assert "piece" not in source_parts.VMEM_CONSTANTS
