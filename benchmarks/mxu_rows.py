"""How long a Pallas matmul block takes on the TPU's MXU when few rows stream through each weight
tile, what a convolution's patch costs to assemble, and how fast the VPU and EUP run: the
figures the performance model's vector rates (perf/vector_rates.py), LANE_SHIFT_OPS
(perf/pallas_analysis.py) and MXU utilisation (perf/model.py) are held to.

Each case is a kernel whose grid repeats one step `steps` times on blocks resident in VMEM (their
block index never changes, so nothing is fetched after the first step); the step's time is the
difference of two wall times, at BASE_STEPS and at BASE_STEPS + EXTRA_STEPS steps, over
EXTRA_STEPS, which removes the dispatch and the first fetch. The step reads the program id, so
no step's work is the same value as another's and none can be hoisted out of the grid's loop.

Cases (`--cases`, default all):
- `dot:M,K,N`: (M, K) @ (K, N), bf16 operands, f32 result stored (the right operand is the one
  the MXU holds as weights when Mosaic lowers a plain dot, so M rows stream per weight tile);
- `dotT:K,P,M`: the pixels-major orientation, (K, P)ᵀ @ (K, M): P rows stream per weight tile;
- `copy:R,C`, `vpu:R,C,N`, `tanh:R,C,N`, `exp:R,C,N`, `mix:R,C,N`, `gelu:R,C`: a (R, C) f32
  block read, N multiply-adds, tanh, exp-and-halve or tanh-and-multiply-add applied, or
  jax.nn.gelu (tanh form), and stored: the VPU's and EUP's rates and how far they overlap;
- `conv:C,W,M,SPAN` (`patch:...`): one chunk of a 3x3 convolution as the built-in implicit GEMM
  writes it: nine lane-shifted slices of a (C, pixels) f32 image stacked into a (9C, SPAN)
  patch, cast to bf16, times (M, 9C) weights (`patch`: the patch stored instead of multiplied).

Run on a TPU: `python benchmarks/mxu_rows.py [--cases ...] > out.json`. On a CPU the kernels
run in interpret mode and the figures are meaningless (`--interpret` checks the script).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from wall_time import median_ms

from maxkernel_tui.kernels.targets import TARGETS

BASE_STEPS = 64
EXTRA_STEPS = 8192
PEAK_BF16_FLOPS = TARGETS["v5e"].peak_bf16_flops
DEFAULT_CASES = (
    # rows streamed per weight tile, K and N whole tiles
    *(f"dot:{m},128,2048" for m in (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512)),
    # the built-in convolution kernels' blocks (39k/46k, 25k, 33k, 18k/22k/34k) and two matmuls
    "dot:64,72,4096",
    "dot:24,216,1024",
    "dot:64,864,1152",
    "dot:128,576,1792",
    "dot:256,512,512",
    "dot:512,1024,512",
    # the same work pixels-major: the taps stationary, the pixels streamed
    "dotT:72,4096,64",
    "dotT:216,1024,24",
    "dotT:576,1792,128",
    # the implicit GEMM's chunk with its patch, and the patch alone
    "conv:8,256,64,4094",
    "patch:8,256,64,4094",
    "conv:64,128,128,1790",
    "patch:64,128,128,1790",
    # the vector units: N multiply-adds, N tanh, the tanh GELU of jax.nn.gelu, on a (R, C) f32
    # block (`copy`: the block read and stored)
    "copy:512,2048",
    "vpu:512,2048,8",
    "vpu:512,2048,40",
    "tanh:512,2048,4",
    "tanh:512,2048,12",
    "exp:512,2048,4",
    "exp:512,2048,12",
    "mix:512,2048,4",
    "mix:512,2048,12",
    "gelu:512,2048",
)


def _salt(like: jax.Array) -> jax.Array:
    """0 or 1 by the step's parity, in `like`'s dtype: the step's inputs differ from the last's."""
    return (pl.program_id(0) % 2).astype(like.dtype)


def _dot_kernel(a_ref: Any, b_ref: Any, o_ref: Any, *, transposed: bool) -> None:
    a = a_ref[...]
    a = a + _salt(a)
    contracting = ((0,), (0,)) if transposed else ((1,), (0,))
    o_ref[...] = jax.lax.dot_general(
        a, b_ref[...], (contracting, ((), ())), preferred_element_type=jnp.float32
    )


def _patch(image_ref: Any, width: int, span: int) -> jax.Array:
    views = [image_ref[:, pl.ds(dh * width + dw, span)] for dh in range(3) for dw in range(3)]
    patch = jnp.concatenate(views, axis=0)
    return (patch + _salt(patch)).astype(jnp.bfloat16)


def _conv_kernel(image_ref: Any, w_ref: Any, o_ref: Any, *, width: int, multiply: bool) -> None:
    patch = _patch(image_ref, width, o_ref.shape[1])
    if multiply:
        o_ref[...] = jnp.dot(w_ref[...], patch, preferred_element_type=jnp.float32)
    else:
        o_ref[...] = patch


def _vector_kernel(x_ref: Any, o_ref: Any, *, kind: str, count: int) -> None:
    value = x_ref[...]
    value = value + _salt(value)
    for _ in range(count):
        if kind == "vpu":
            value = value * 0.999 + 0.001
        elif kind == "tanh":
            value = jnp.tanh(value)
        elif kind == "exp":
            value = jnp.exp(value) * 0.5
        elif kind == "mix":  # one tanh and one multiply-add: the EUP's and VPU's overlap
            value = jnp.tanh(value) * 0.999 + 0.001
    if kind == "gelu":
        value = jax.nn.gelu(value, approximate=True)
    o_ref[...] = value


def _whole(shape: Sequence[int]) -> pl.BlockSpec:
    return pl.BlockSpec(tuple(shape), lambda i: (0,) * len(shape))


def _call(
    kernel: Callable[..., None],
    inputs: Sequence[jax.Array],
    out: jax.ShapeDtypeStruct,
    steps: int,
    interpret: bool,
) -> Callable[..., jax.Array]:
    return jax.jit(
        pl.pallas_call(
            kernel,
            grid=(steps,),
            in_specs=[_whole(x.shape) for x in inputs],
            out_specs=_whole(out.shape),
            out_shape=out,
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("arbitrary",), vmem_limit_bytes=100 * 2**20
            ),
            interpret=interpret,
        )
    )


def case(
    spec: str, steps: int, interpret: bool = False
) -> tuple[Callable[..., jax.Array], list[jax.Array], float]:
    """(kernel at `steps` grid steps, its inputs, MXU flops per step) of one case spec."""
    kind, _, numbers = spec.partition(":")
    sizes = [int(v) for v in numbers.split(",")]
    key = jax.random.key(0)
    if kind in ("dot", "dotT"):
        if kind == "dot":
            m, k, n = sizes
            a_shape, b_shape, out_shape = (m, k), (k, n), (m, n)
        else:
            k, p, m = sizes
            a_shape, b_shape, out_shape = (k, p), (k, m), (p, m)
        a = jax.random.normal(key, a_shape, jnp.bfloat16)
        b = jax.random.normal(key, b_shape, jnp.bfloat16)
        kernel = functools.partial(_dot_kernel, transposed=kind == "dotT")
        out = jax.ShapeDtypeStruct(out_shape, jnp.float32)
        flops = 2.0 * out_shape[0] * out_shape[1] * k
        return _call(kernel, [a, b], out, steps, interpret), [a, b], flops
    if kind in ("copy", "vpu", "tanh", "exp", "mix", "gelu"):
        rows, cols, count = (*sizes, 0)[:3]
        x = jax.random.uniform(key, (rows, cols), jnp.float32)
        kernel = functools.partial(_vector_kernel, kind=kind, count=count)
        out = jax.ShapeDtypeStruct((rows, cols), jnp.float32)
        return _call(kernel, [x], out, steps, interpret), [x], 0.0
    channels, width, m, span = sizes
    pixels = -(-(span + 2 * width + 2) // 128) * 128
    image = jax.random.uniform(key, (channels, pixels), jnp.float32)
    weights = jax.random.normal(key, (m, 9 * channels), jnp.bfloat16)
    multiply = kind == "conv"
    kernel = functools.partial(_conv_kernel, width=width, multiply=multiply)
    out = (
        jax.ShapeDtypeStruct((m, span), jnp.float32)
        if multiply
        else jax.ShapeDtypeStruct((9 * channels, span), jnp.bfloat16)
    )
    flops = 2.0 * m * span * 9 * channels if multiply else 0.0
    return _call(kernel, [image, weights], out, steps, interpret), [image, weights], flops


def measure(spec: str, calls: int, interpret: bool = False) -> dict[str, Any]:
    """One case's time per step (µs) and the share of the bf16 MXU peak it reaches (with
    `interpret`, one and two steps: a check of the kernels, not a timing)."""
    base, extra = (1, 1) if interpret else (BASE_STEPS, EXTRA_STEPS)
    times = []
    for steps in (base, base + extra):
        function, inputs, flops = case(spec, steps, interpret)
        times.append(median_ms(function, inputs, calls))
    step_s = (times[1] - times[0]) / 1e3 / extra
    row: dict[str, Any] = {"case": spec, "step_us": round(step_s * 1e6, 3)}
    if flops:
        row["mxu_share"] = round(flops / step_s / PEAK_BF16_FLOPS, 3) if step_s > 0 else None
    return row


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=list(DEFAULT_CASES))
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--interpret", action="store_true", help="check the kernels on a CPU")
    args = parser.parse_args(argv)
    rows = []
    for spec in args.cases:
        rows.append(measure(spec, args.calls, args.interpret))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"device": str(jax.devices()[0].device_kind), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
