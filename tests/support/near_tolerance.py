"""A bf16 GEMM whose accumulator is kept in bf16 between depth steps of 1024: within a small
share of the tolerance where the depth is one step (a bf16 rounding of an f32 sum, as the
reference's), one bf16 rounding more per further step, so its error grows with depth. On
write_declared_gemm's task (atol = rtol = 1e-2, the second operand scaled by 0.019) at
M = N = 2048, K = 4096 (four steps), 32 of the 4M elements are outside the tolerance, by up to
46% (measured: an emulation in jax on this machine), and a sample of 8 output blocks of 256
mostly meets none of them: a kernel out of tolerance only at production depth, and near it."""

from __future__ import annotations

from pathlib import Path

from tests.support.tiled_gemm_tasks import write_declared_gemm

CONFIGS = {
    "bench": (2048, 4096, 2048),  # four depth steps: out of tolerance on a few elements
    "check": (256, 1024, 256),  # one depth step
    "heldout": (128, 1024, 384),
}

SOURCE = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 128, 128, 1024


def _kernel(a_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    partial = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    acc_ref[...] = (acc_ref[...].astype(jnp.float32) + partial).astype(acc_ref.dtype)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def computation(a, b):
    m, depth = a.shape
    n = b.shape[1]
    bk = min(BK, depth)
    return pl.pallas_call(
        _kernel,
        grid=(m // BM, n // BN, depth // bk),
        in_specs=[
            pl.BlockSpec((BM, bk), lambda i, j, k: (i, k)),
            pl.BlockSpec((bk, BN), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.bfloat16)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(a, b)
"""


def write_task(root: Path) -> Path:
    return write_declared_gemm(root, CONFIGS, task_id="9k_GEMM_Near_Tolerance", scale=0.019)


def write_kernel(path: Path) -> Path:
    path.write_text(SOURCE.lstrip())
    return path
