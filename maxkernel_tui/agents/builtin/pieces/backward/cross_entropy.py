"""Softmax cross-entropy over a vocabulary, forward and backward as Pallas TPU kernels, joined by
a custom_vjp.

Forward: grid (row blocks, vocabulary blocks), the vocabulary innermost and 'arbitrary': a
running max and sum of exponentials per row (online log-sum-exp, f32 VMEM scratch) and the
logit at the row's label picked as its block passes; at the last block each row's loss
lse - logit[label], and its lse saved for the backward. Backward, one pass, every block
independent: dlogits = (exp(logits - lse) - onehot(label)) * dloss, with dloss the row's
cotangent (1/rows of the loss's for a mean). Imports jax.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _pick_block,
)

# Preferred rows and vocabulary columns per block: the generated file defines its own.
BLOCK_ROWS = 256
BLOCK_COLS = 2048


def _xent_blocks(rows, vocab, dtype):
    """Row and vocabulary blocks: divisors of the sizes, aligned to the vreg tiles."""
    row_align = 8 * max(1, 4 // jnp.dtype(dtype).itemsize)
    return _pick_block(rows, BLOCK_ROWS, row_align), _pick_block(vocab, BLOCK_COLS, 128)


def _label_hits(logits, labels_ref, block):
    """Where each row's label falls in this vocabulary block (a block's column offset)."""
    cols = block * logits.shape[1] + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
    return cols == labels_ref[...]


def _xent_forward_kernel(logits_ref, labels_ref, loss_ref, lse_ref, max_ref, sum_ref, pick_ref):
    """One row block, one vocabulary block: fold it into the running max, sum and pick."""
    block = pl.program_id(1)

    @pl.when(block == 0)
    def _start():
        max_ref[...] = jnp.full_like(max_ref, -jnp.inf)
        sum_ref[...] = jnp.zeros_like(sum_ref)
        pick_ref[...] = jnp.zeros_like(pick_ref)

    logits = logits_ref[...].astype(jnp.float32)
    previous = max_ref[...]
    current = jnp.maximum(previous, jnp.max(logits, axis=1, keepdims=True))
    sum_ref[...] = sum_ref[...] * jnp.exp(previous - current) + jnp.sum(
        jnp.exp(logits - current), axis=1, keepdims=True
    )
    max_ref[...] = current
    hits = _label_hits(logits, labels_ref, block)
    pick_ref[...] += jnp.sum(jnp.where(hits, logits, 0.0), axis=1, keepdims=True)

    @pl.when(block == pl.num_programs(1) - 1)
    def _finish():
        lse = max_ref[...] + jnp.log(sum_ref[...])
        lse_ref[...] = lse
        loss_ref[...] = lse - pick_ref[...]


def _xent_backward_kernel(logits_ref, labels_ref, lse_ref, dloss_ref, dlogits_ref):
    """One block: (softmax - onehot) times each row's cotangent."""
    logits = logits_ref[...].astype(jnp.float32)
    probs = jnp.exp(logits - lse_ref[...])
    hits = _label_hits(logits, labels_ref, pl.program_id(1))
    grad = (probs - jnp.where(hits, 1.0, 0.0)) * dloss_ref[...]
    dlogits_ref[...] = grad.astype(dlogits_ref.dtype)


def _row_vector_spec(block_rows):
    """One value per row of a row block, for every vocabulary block."""
    return pl.BlockSpec((block_rows, 1), lambda i, j: (i, 0))


def _xent_forward(logits, labels2):
    """logits (rows, vocab), labels2 (rows, 1) int32 -> each row's loss and lse, (rows, 1) f32."""
    rows, vocab = logits.shape
    tr, tv = _xent_blocks(rows, vocab, logits.dtype)
    footprint = 2 * _block_bytes(tr, tv, logits.dtype) + 4 * _block_bytes(tr, tv, jnp.float32)
    row_value = jax.ShapeDtypeStruct((rows, 1), jnp.float32)
    return pl.pallas_call(
        _xent_forward_kernel,
        out_shape=(row_value, row_value),
        grid=(rows // tr, vocab // tv),
        in_specs=[pl.BlockSpec((tr, tv), lambda i, j: (i, j)), _row_vector_spec(tr)],
        out_specs=(_row_vector_spec(tr), _row_vector_spec(tr)),
        scratch_shapes=[pltpu.VMEM((tr, 1), jnp.float32) for _ in range(3)],
        compiler_params=_compiler_params(("parallel", "arbitrary"), footprint),
    )(logits, labels2)


def _xent_backward(logits, labels2, lse, dloss):
    """The gradient of the logits, in their dtype, from each row's lse and cotangent."""
    rows, vocab = logits.shape
    tr, tv = _xent_blocks(rows, vocab, logits.dtype)
    footprint = 4 * _block_bytes(tr, tv, logits.dtype) + 4 * _block_bytes(tr, tv, jnp.float32)
    return pl.pallas_call(
        _xent_backward_kernel,
        out_shape=jax.ShapeDtypeStruct((rows, vocab), logits.dtype),
        grid=(rows // tr, vocab // tv),
        in_specs=[
            pl.BlockSpec((tr, tv), lambda i, j: (i, j)),
            _row_vector_spec(tr),
            _row_vector_spec(tr),
            _row_vector_spec(tr),
        ],
        out_specs=pl.BlockSpec((tr, tv), lambda i, j: (i, j)),
        compiler_params=_compiler_params(("parallel", "parallel"), footprint),
    )(logits, labels2, lse, dloss)


def _cross_entropy_training(logits, labels, *, reduction):
    """Cross-entropy of logits (rows, vocab) at int labels (rows,): each row's loss
    (`reduction` "none"), their mean or their sum; differentiable in the logits through the
    kernels above (the labels get no gradient)."""
    rows = logits.shape[0]

    def reduce(loss):
        if reduction == "mean":
            return jnp.mean(loss)
        return jnp.sum(loss) if reduction == "sum" else loss

    @jax.custom_vjp
    def cross_entropy(logits, labels):
        return reduce(_xent_forward(logits, labels.reshape(rows, 1))[0][:, 0])

    def forward(logits, labels):
        loss, lse = _xent_forward(logits, labels.reshape(rows, 1))
        return reduce(loss[:, 0]), (logits, labels, lse)

    def backward(saved, dout):
        logits, labels, lse = saved
        per_row = {"mean": dout / rows, "sum": dout}.get(reduction, dout)
        dloss = jnp.broadcast_to(per_row, (rows,)).astype(jnp.float32).reshape(rows, 1)
        return _xent_backward(logits, labels.reshape(rows, 1), lse, dloss), None

    cross_entropy.defvjp(forward, backward)
    return cross_entropy(logits, labels)
