"""A Pallas matmul with no custom_vjp: jax cannot differentiate its pallas_call, so it has no
backward (rejected where gradients are asked for)."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _block(size):
    return 128 if size % 128 == 0 else size


def _kernel(a_ref, b_ref, o_ref, *, contract):
    # f32 operands at HIGHEST (six MXU passes): Mosaic's default for them is one bf16 pass, and
    # a 1e-3 on sums of 2048 products near 1 needs more than three (bf16 ones take one exactly)
    wide = a_ref.dtype == jnp.float32
    o_ref[...] = jax.lax.dot_general(
        a_ref[...],
        b_ref[...],
        (contract, ((), ())),
        preferred_element_type=jnp.float32,
        precision=jax.lax.Precision.HIGHEST if wide else None,
    ).astype(o_ref.dtype)


def _contract(a, b, contract):
    """a and b contracted along contract = ((a's axis,), (b's axis,)): rows of the result from
    a's other axis, columns from b's; whole contracted axis per block."""
    (ka,), (kb,) = contract
    m, n = a.shape[1 - ka], b.shape[1 - kb]
    k = a.shape[ka]
    bm, bn = _block(m), _block(n)
    a_spec = (bm, k) if ka == 1 else (k, bm)
    b_spec = (k, bn) if kb == 0 else (bn, k)
    return pl.pallas_call(
        functools.partial(_kernel, contract=contract),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=(m // bm, n // bn),
        in_specs=[
            pl.BlockSpec(a_spec, (lambda i, j: (i, 0)) if ka == 1 else (lambda i, j: (0, i))),
            pl.BlockSpec(b_spec, (lambda i, j: (0, j)) if kb == 0 else (lambda i, j: (j, 0))),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
    )(a, b)


def computation(x, w):
    return _contract(x, w, ((1,), (0,)))
