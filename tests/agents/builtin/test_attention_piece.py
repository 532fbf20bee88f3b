"""The flash-attention module (pieces/attention.py) run directly in TPU interpret mode at small
shapes, against a plain jnp softmax attention: no scale or mask; a causal mask with a scale and
grouped key heads in the (batch, seq, heads, dim) layout; a bias shared across the batch on
bf16 inputs whose reference rounds its logits; a per-head bias under the causal mask with query
and key blocks of different lengths; every head dimension from 64 to 384, causal or not; the
1p kernel the agent writes, at a head dimension of 384 its check shapes do not have."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.pieces import attention
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.perf.pallas_analysis import analyze

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine
SEQ, DIM = 256, 32


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 128: two query and two key blocks, one below, on and above the diagonal."""
    monkeypatch.setattr(attention, "BLOCK_Q", 128)
    monkeypatch.setattr(attention, "BLOCK_KV", 128)


def _random(*shape, dtype=jnp.float32, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(attention._flash_attention(*args, **kwargs))


def _reference(q, k, v, bias=None, *, scale=None, causal=False, mask_value=-jnp.inf, rounds=None):
    """softmax(mask(scale * Q K^T + bias)) V on (batch, heads, seq, dim), key heads repeated."""

    def rounded(logits):
        return logits if rounds is None else logits.astype(rounds).astype(jnp.float32)

    group = q.shape[1] // k.shape[1]
    k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
    logits = rounded(jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32))
    if scale is not None:
        logits = rounded(logits * scale)
    if bias is not None:
        logits = rounded(logits + bias.astype(jnp.float32))
    if causal:
        logits = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), logits, mask_value)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, v.astype(jnp.float32))


def test_plain_attention_over_several_query_and_key_blocks():
    q, k, v = (_random(1, 2, SEQ, DIM, seed=s) for s in range(3))
    got = _run(q, k, v, out_dtype=jnp.float32)
    np.testing.assert_allclose(got, _reference(q, k, v), rtol=1e-4, atol=1e-4)


def test_a_causal_mask_with_a_scale_and_grouped_key_heads_in_seq_first_layout():
    q = _random(1, SEQ, 4, DIM)  # (batch, seq, heads, dim): four query heads
    k, v = _random(1, SEQ, 2, DIM, seed=1), _random(1, SEQ, 2, DIM, seed=2)  # two key heads
    got = _run(
        q, k, v, out_dtype=jnp.float32, scale=0.125, causal=True, mask_value=-1e9, seq_first=True
    )
    heads_first = [jnp.swapaxes(t, 1, 2) for t in (q, k, v)]
    want = _reference(*heads_first, scale=0.125, causal=True, mask_value=-1e9)
    assert got.shape == q.shape
    np.testing.assert_allclose(got, jnp.swapaxes(want, 1, 2), rtol=1e-4, atol=1e-4)


def test_a_bias_shared_across_the_batch_on_bf16_inputs_with_rounded_logits():
    q, k, v = (_random(2, 2, SEQ, DIM, dtype=jnp.bfloat16, seed=s) for s in range(3))
    bias = _random(1, 2, SEQ, SEQ, seed=3)  # batch axis of 1: every batch entry reads it
    got = _run(q, k, v, bias, out_dtype=jnp.bfloat16, scale=0.5, logits_dtype=jnp.bfloat16)
    want = _reference(q, k, v, bias, scale=0.5, rounds=jnp.bfloat16)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=2e-2, atol=2e-2)


def test_a_per_head_bias_under_the_causal_mask_with_shorter_query_blocks(monkeypatch):
    monkeypatch.setattr(attention, "BLOCK_Q", 64)  # four query blocks per key block of 128
    q, k, v = (_random(1, 3, SEQ, DIM, seed=s) for s in range(3))
    bias = _random(3, SEQ, SEQ, seed=4)  # (heads, seq, seq)
    got = _run(q, k, v, bias, out_dtype=jnp.float32, causal=True)
    want = _reference(q, k, v, bias[None], causal=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128, 192, 256, 384])
def test_every_head_dimension_on_bf16_with_the_scale_rounded_as_the_reference_rounds_it(
    head_dim, causal
):
    q, k, v = (_random(1, 1, SEQ, head_dim, dtype=jnp.bfloat16, seed=s) for s in range(3))
    scale = head_dim**-0.5  # the kernel rounds it to bf16, as bf16 logits times a float do
    got = _run(
        q, k, v, out_dtype=jnp.bfloat16, scale=scale, causal=causal, logits_dtype=jnp.bfloat16
    )
    rounded_scale = float(jnp.asarray(scale, jnp.bfloat16))
    want = _reference(q, k, v, scale=rounded_scale, causal=causal, rounds=jnp.bfloat16)
    np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=2e-2, atol=2e-2)


def test_the_1p_kernel_reads_its_scale_from_the_head_dimension(suite_tasks):
    """The tester's edge case on 1p: head dimension 384 where bench and check have 128. A scale
    written as the constant 1/sqrt(128) left two thirds of the output out of tolerance."""
    task = find_task("1p", suite_tasks)
    namespace: dict = {}
    exec(draft_kernel(task, tune=False).source, namespace)
    reference: dict = {}
    exec(task.reference_path.read_text(), reference)
    reference["CONFIGS"]["edge"] = {"batch": 1, "heads": 2, "seq": SEQ, "head_dim": 384}
    (q, k, v), _ = reference["get_inputs"]("edge", 1)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = jax.jit(namespace["computation"])(q, k, v)
    want = jax.jit(reference["computation"])(q, k, v)
    tolerance = task.tolerance("check")
    np.testing.assert_allclose(
        got.astype(jnp.float32),
        want.astype(jnp.float32),
        atol=tolerance.atol,
        rtol=tolerance.rtol,
    )


def test_causal_blocks_above_the_diagonal_are_neither_fetched_nor_computed():
    """Four query blocks of 128 and four key blocks: of the 16 steps, K is fetched 9 times (the 6
    above the diagonal re-use the block before; query block 0's clamped steps and query block 1's
    first both read key block 0), the model counts the matmuls of 10 steps, and the result
    matches jnp over the longer sequence."""
    seq = 4 * 128
    q, k, v = (_random(1, 1, seq, DIM, seed=s) for s in range(3))
    spec = jax.ShapeDtypeStruct(q.shape, q.dtype)
    jaxpr = jax.make_jaxpr(
        lambda q, k, v: attention._flash_attention(q, k, v, out_dtype=jnp.float32, causal=True)
    )(spec, spec, spec)
    (kernel,) = analyze(jaxpr)
    assert kernel.steps == 16
    assert next(b for b in kernel.blocks if b.role == "input 1").fetches == 9
    block_flops = 2 * (2.0 * 128 * 128 * DIM)  # Q K^T and P V of one block pair
    assert kernel.mxu_flops_per_step == block_flops * 10 / 16
    got = _run(q, k, v, out_dtype=jnp.float32, causal=True)
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32)
    logits = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), logits, -jnp.inf)
    want = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(logits, axis=-1), v)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
