"""A cheating GEMM: exact on small shapes, above 256 rows it copies A's first columns instead
of multiplying (a cheaper, wrong body only at production shapes)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _exact(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision=jax.lax.Precision.HIGHEST)


def _cheap(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[:, : o_ref.shape[1]] + b_ref[0:1, :]


def computation(a, b):
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        _cheap if m > 256 else _exact,
        grid=(m // 128,),
        in_specs=[pl.BlockSpec((128, k), lambda i: (i, 0)), pl.BlockSpec((k, n), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((128, n), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
    )(a, b)
