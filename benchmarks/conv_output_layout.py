"""Where a convolution kernel's output should land in HBM: the layout XLA gives a (batch,
channels, 126, 126) f32 result, and what a Pallas kernel pays to write it.

For a 4-D f32 array whose two minor sizes are not multiples of (8, 128), XLA's TPU layout puts
the batch and channel axes minor ({1,0,3,2}: physically (height, width, batch, channels), tiles
of 8 images x 128 channels), so a kernel that writes NCHW blocks is followed by a transposing
copy of its whole output. A kernel that writes (height, width, batch, channels) and transposes
back gets a bitcast instead. `hlo` shows both from the v5e compile (no TPU needed); `time`
(on a TPU) times kernels that only read 18k's image and write its output in each layout, the
bytes of 18k at bench shapes, wall clock, median of --calls calls; `conv` (on a TPU) times
18k's convolution written pixels-major by the product's piece (pieces/conv_pixels.py) beside
XLA's, with its largest error against XLA at HIGHEST, and the layout copy before its kernel
alone.

    JAX_PLATFORMS=cpu python benchmarks/conv_output_layout.py hlo
    python benchmarks/conv_output_layout.py time [--calls 10]    # on a TPU
    python benchmarks/conv_output_layout.py conv [--calls 10]    # on a TPU
"""

from __future__ import annotations

import argparse
import functools
import os
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

IMAGE = (128, 64, 128, 128)  # 18k's input: batch, channels, height, width
BATCH, CHANNELS, OUT = 128, 128, 126  # its output: (128, 128, 126, 126)
PARAMS = pltpu.CompilerParams(dimension_semantics=("parallel",), vmem_limit_bytes=100 * 2**20)


def _fill(x_ref: Any, o_ref: Any) -> None:
    """Write the whole output block from one value of the input block (the input is read)."""
    o_ref[...] = jnp.broadcast_to(x_ref[0:1, 0:1, 0:1], o_ref.shape)


def nchw_blocks(plane: tuple[int, int]) -> Callable[[jax.Array], jax.Array]:
    """Per image: read its (64, 128, 128) block, write a (128, *plane) block of (128, 128,
    *plane)."""

    def run(x: jax.Array) -> jax.Array:
        return pl.pallas_call(
            _fill,
            out_shape=jax.ShapeDtypeStruct((BATCH, CHANNELS, *plane), jnp.float32),
            grid=(BATCH,),
            in_specs=[pl.BlockSpec((None, *IMAGE[1:]), lambda b: (b, 0, 0, 0))],
            out_specs=pl.BlockSpec((None, CHANNELS, *plane), lambda b: (b, 0, 0, 0)),
            compiler_params=PARAMS,
        )(x)

    return run


def pixels_major(rows_per_step: int = 2) -> Callable[[jax.Array], jax.Array]:
    """Write (126, 126, 128, 128) in blocks of `rows_per_step` output rows, reading two images
    per step (the whole input once over the grid), then transpose to (128, 128, 126, 126): a
    bitcast in XLA's layout for that shape."""

    def fill(x_ref: Any, o_ref: Any) -> None:
        o_ref[...] = jnp.broadcast_to(x_ref[0:1, 0:1, 0:1, 0:1].reshape(1, 1, 1), o_ref.shape)

    steps = OUT // rows_per_step
    image_blocks = IMAGE[0] // 2

    def run(x: jax.Array) -> jax.Array:
        out = pl.pallas_call(
            fill,
            out_shape=jax.ShapeDtypeStruct((OUT, OUT, BATCH, CHANNELS), jnp.float32),
            grid=(steps,),
            in_specs=[pl.BlockSpec((2, *IMAGE[1:]), lambda i: (i % image_blocks, 0, 0, 0))],
            out_specs=pl.BlockSpec((rows_per_step, OUT, BATCH, CHANNELS), lambda i: (i, 0, 0, 0)),
            compiler_params=PARAMS,
        )(x)
        return jnp.transpose(out, (2, 3, 0, 1))

    return run


def pixels_major_conv(x: jax.Array, w: jax.Array, bias: jax.Array) -> jax.Array:
    """relu(conv(x, w) + bias) by the product's pixels-major piece (pieces/conv_pixels.py), with
    bf16 taps as the built-in agent chooses for 18k."""
    from maxkernel_tui.agents.builtin.pieces.conv_pixels import _pixels_major_conv_stage

    def epilogue(total: Any, bias_ref: Any, out_ref: Any, *, tm: int, tn: int) -> None:
        out_ref[...] = jnp.maximum(total + bias_ref[...], 0.0)

    out = _pixels_major_conv_stage(
        x,
        w,
        bias.reshape(CHANNELS, 1),
        roles=("row",),
        outputs=(("tile", jnp.float32),),
        epilogue=epilogue,
        operands="bf16",
    )
    return out.reshape(BATCH, CHANNELS, OUT, OUT)


def image_layout(x: jax.Array, w: jax.Array, bias: jax.Array) -> jax.Array:
    """The copy alone that lays the image out (height, width, channels, batch) in bf16 before
    the piece's kernel reads it (XLA's own convolution makes the same one)."""
    return jnp.transpose(x, (2, 3, 1, 0)).astype(jnp.bfloat16)


def xla_conv(x: jax.Array, w: jax.Array, bias: jax.Array, precision: Any = None) -> jax.Array:
    """The same convolution by XLA (default precision: one bf16 pass)."""
    y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", precision=precision)
    return jnp.maximum(y + bias[None, :, None, None], 0.0)


def conv(calls: int) -> None:
    """The product's pixels-major convolution, and the copy before its kernel, against XLA on
    the TPU this runs on."""
    from wall_time import median_ms

    keys = jax.random.split(jax.random.key(0), 3)
    x = jax.random.uniform(keys[0], IMAGE)
    w = jax.random.normal(keys[1], (CHANNELS, IMAGE[1], 3, 3)) * 0.02
    bias = jax.random.normal(keys[2], (CHANNELS,)) * 0.02
    exact = jax.jit(functools.partial(xla_conv, precision=jax.lax.Precision.HIGHEST))(x, w, bias)
    for name, program in (("XLA", xla_conv), ("pixels-major piece", pixels_major_conv)):
        function = jax.jit(program)
        error = float(jnp.max(jnp.abs(function(x, w, bias) - exact)))
        print(
            f"{name:24s} {median_ms(function, (x, w, bias), calls):.2f} ms, max |err| {error:.1e}"
        )
    layout = median_ms(jax.jit(image_layout), (x, w, bias), calls)
    print(f"{'its image layout alone':24s} {layout:.2f} ms")


VARIANTS = {
    "nchw 126x126": nchw_blocks((OUT, OUT)),
    "nchw 126x128": nchw_blocks((OUT, 128)),
    "nchw 128x126": nchw_blocks((128, OUT)),
    "nchw 128x128 (aligned, not 18k's shape)": nchw_blocks((128, 128)),
    "pixels-major, transposed back": pixels_major(),
}

# `ROOT %copy.7 = f32[128,128,126,126]{1,0,3,2:T(8,128)} copy(%x)`: the root's layout and op
_ROOT = re.compile(r"ROOT %\S+ = \w+\[[\d,]*\](\{[^}]*\}) ([\w-]+)\(")


def hlo() -> None:
    """What follows each kernel in the optimised v5e program: a copy or a bitcast."""
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from maxkernel_tui.kernels import aot

    spec = jax.ShapeDtypeStruct(IMAGE, jnp.float32)
    for name, variant in VARIANTS.items():
        compiled = aot.compile_for_tpu(variant, [spec], aot.target_for("v5e"))
        match = _ROOT.search(compiled.as_text())
        root = f"{match.group(2)} into layout {match.group(1)}" if match else "?"
        print(f"{name:42s} result: {root}")


def time(calls: int) -> None:
    """Wall time of each variant on the TPU this runs on."""
    from wall_time import median_ms

    x = jax.random.uniform(jax.random.key(0), IMAGE)
    for name, variant in VARIANTS.items():
        print(f"{name:42s} {median_ms(jax.jit(variant), (x,), calls):.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("hlo", "time", "conv"))
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    if args.what == "hlo":
        hlo()
    elif args.what == "time":
        time(args.calls)
    else:
        conv(args.calls)


if __name__ == "__main__":
    main()
