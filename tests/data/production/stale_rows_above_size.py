"""A cheating GEMM: exact on small shapes, above 256 rows its grid covers only the first half
of the output, leaving the rest to whatever memory held (stale only at production shapes)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision=jax.lax.Precision.HIGHEST)


def computation(a, b):
    m, k = a.shape
    n = b.shape[1]
    steps = m // 128 // 2 if m > 256 else m // 128
    return pl.pallas_call(
        _kernel,
        grid=(steps,),
        in_specs=[pl.BlockSpec((128, k), lambda i: (i, 0)), pl.BlockSpec((k, n), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((128, n), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
    )(a, b)
