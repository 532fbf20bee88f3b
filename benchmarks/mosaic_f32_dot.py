"""What an f32 matmul inside a Pallas TPU kernel computes, and what it costs, per precision.

The judge runs kernels in interpret mode on the CPU, where `jnp.dot` of f32 operands is exact
f32 whatever its `precision`. On a TPU, Mosaic chooses the MXU passes: this script measures, on
one GEMM at 41k's bench shapes, each way a kernel can write its matmul (f32 at Mosaic's default,
f32 at Precision.HIGHEST, bf16 operands, and a three-pass split of each f32 operand into bf16
high and low parts) against XLA's dot at DEFAULT, HIGH and HIGHEST: the time (median of
wall-clock runs after a warm-up) and the error of the first 256 rows against numpy in float64.
A way whose error equals the bf16 way's computes one bf16 pass.

    python benchmarks/mosaic_f32_dot.py [--small] [--interpret] [--out FILE.jsonl]

`--small --interpret` checks the script on a CPU (the errors then show the interpreter's exact
f32, not the TPU's passes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

BLOCK = 512
CHECK_ROWS = 256


def _split(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    high = a.astype(jnp.bfloat16)
    return high, (a - high.astype(jnp.float32)).astype(jnp.bfloat16)


def _product(way: str, x: jax.Array, w: jax.Array) -> jax.Array:
    dot = partial(jnp.dot, preferred_element_type=jnp.float32)
    if way == "f32 default":
        return dot(x, w)
    if way == "f32 HIGHEST":
        return dot(x, w, precision=jax.lax.Precision.HIGHEST)
    if way == "bf16":
        return dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16))
    if way == "bf16x3 split":
        x_high, x_low = _split(x)
        w_high, w_low = _split(w)
        return dot(x_high, w_high) + (dot(x_high, w_low) + dot(x_low, w_high))
    raise ValueError(way)


KERNEL_WAYS = ("f32 default", "f32 HIGHEST", "bf16", "bf16x3 split")
XLA_WAYS = {
    "XLA DEFAULT": jax.lax.Precision.DEFAULT,
    "XLA HIGH": jax.lax.Precision.HIGH,
    "XLA HIGHEST": jax.lax.Precision.HIGHEST,
}


def kernel_matmul(way: str, interpret: bool) -> Callable[[jax.Array, jax.Array], jax.Array]:
    def body(x_ref, w_ref, o_ref, acc_ref):  # type: ignore[no-untyped-def]
        @pl.when(pl.program_id(2) == 0)
        def _() -> None:
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += _product(way, x_ref[...], w_ref[...])

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _() -> None:
            o_ref[...] = acc_ref[...]

    def run(x: jax.Array, w: jax.Array) -> jax.Array:
        from jax.experimental.pallas import tpu as pltpu

        m, k = x.shape
        n = w.shape[1]
        return pl.pallas_call(
            body,
            grid=(m // BLOCK, n // BLOCK, k // BLOCK),
            in_specs=[
                pl.BlockSpec((BLOCK, BLOCK), lambda i, j, s: (i, s)),
                pl.BlockSpec((BLOCK, BLOCK), lambda i, j, s: (s, j)),
            ],
            out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j, s: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
            scratch_shapes=[pltpu.VMEM((BLOCK, BLOCK), jnp.float32)],
            interpret=interpret,
        )(x, w)

    return jax.jit(run)


def timed(fn: Callable[..., jax.Array], *args: jax.Array, runs: int) -> tuple[jax.Array, float]:
    out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return out, statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="1024 x 1024 x 1024")
    parser.add_argument("--interpret", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    m, k, n = (1024, 1024, 1024) if args.small else (4096, 8192, 8192)
    kx, kw = jax.random.split(jax.random.key(0))
    x = jax.random.uniform(kx, (m, k), jnp.float32)  # 41k's inputs: uniform rows, N(0, 0.02) W
    w = jax.random.normal(kw, (k, n), jnp.float32) * 0.02
    want = np.asarray(x[:CHECK_ROWS], np.float64) @ np.asarray(w, np.float64)
    scale = float(np.max(np.abs(want)))
    rows = []
    ways: dict[str, Callable[..., jax.Array]] = {
        way: kernel_matmul(way, args.interpret) for way in KERNEL_WAYS
    }
    for name, precision in XLA_WAYS.items():
        ways[name] = jax.jit(partial(jnp.matmul, precision=precision))
    for name, fn in ways.items():
        try:
            out, ms = timed(fn, x, w, runs=args.runs)
        except Exception as error:  # a way Mosaic refuses: say so, measure the rest
            rows.append({"way": name, "error": f"{type(error).__name__}: {error}"[:300]})
            print(rows[-1], flush=True)
            continue
        got = np.asarray(out[:CHECK_ROWS], np.float64)
        diff = float(np.max(np.abs(got - want)))
        rows.append(
            {
                "way": name,
                "ms": round(ms, 3),
                "max_abs_err": diff,
                "rel_to_max": diff / scale,
                "device": jax.devices()[0].device_kind,
                "shape": [m, k, n],
            }
        )
        print(rows[-1], flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)


if __name__ == "__main__":
    main()
