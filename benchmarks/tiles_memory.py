"""How much memory a sampled production run takes in TPU interpret mode, against its kernel's
operand and output bytes: the factor evaluation/tiles/memory.py plans with. A plain tiled GEMM
of ours (bf16, f32 accumulator) at three sizes, sampled like the harness samples a candidate.

    JAX_PLATFORMS=cpu python benchmarks/tiles_memory.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels import memory
from maxkernel_tui.kernels.evaluation.tiles import sampled_run as production_tiles

BLOCKS = (512, 1024, 1024)  # rows, depth, columns
SIZES = ((2048, 2048, 4096), (4096, 4096, 8192), (8192, 8192, 16384))  # m, k, n
MIB = 2**20


def _body(x_ref, w_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _write():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _gemm(x: jax.Array, w: jax.Array) -> jax.Array:
    (m, k), n = x.shape, w.shape[1]
    bm, bk, bn = BLOCKS
    return pl.pallas_call(
        _body,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, d: (i, d)),
            pl.BlockSpec((bk, bn), lambda i, j, d: (d, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, d: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
    )(x, w)


def _mapped_mib(field: str) -> int:
    mapped = memory.process_bytes(field)
    assert mapped is not None, f"no {field} in /proc/self/status"
    return mapped // MIB


def main() -> None:
    params = pltpu.InterpretParams(uninitialized_memory="nan")
    print("| m x k x n | operands + output | peak address space growth | factor | seconds |")
    print("|---|---:|---:|---:|---:|")
    for m, k, n in SIZES:
        x, w = jnp.ones((m, k), jnp.bfloat16), jnp.ones((k, n), jnp.bfloat16)
        before = _mapped_mib("VmSize")
        start = time.perf_counter()
        program, rng = jax.make_jaxpr(_gemm)(x, w), np.random.default_rng(0)
        production_tiles.run_sampled(program, [x, w], rng, random_blocks=1, params=params)
        seconds = time.perf_counter() - start
        # VmPeak only grows: each size is larger than the last, so its peak is its own
        growth = _mapped_mib("VmPeak") - before
        buffers = (m * k + k * n + m * n) * 2 / MIB
        print(
            f"| {m} x {k} x {n} | {buffers:.0f} MiB | {growth} MiB | {growth / buffers:.2f}x | "
            f"{seconds:.1f} |"
        )


if __name__ == "__main__":
    main()
