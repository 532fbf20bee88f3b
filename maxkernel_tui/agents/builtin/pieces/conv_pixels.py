"""A plain 2-D convolution (NCHW image, OIHW kernel, stride 1, no padding) written pixels-major,
the layout XLA gives its result: physically (out height, out width, batch, out channels), tiles
of images by out channels, so the transpose back to NCHW is a bitcast where an NCHW-writing
kernel is followed by a copy of its whole output (benchmarks/results/conv_output_layout.md).

The image is laid out first as (height, width, channels, batch), as XLA does for its own
convolution, by a kernel of its own where the shapes allow (`_pixels_first`; on a v5e, 18k's
image in 1.28 ms where XLA's transposing copy takes 1.58 ms: benchmarks/results/
conv_relayout_kernel.md), else by XLA: one pixel of every image is a (channels, batch) tile, so
every tap of an output pixel is a whole tile read at a static offset, the taps of a pixel stack
along the sublanes without moving a lane, and one matmul that contracts that stack's rows,
(taps * channels, pixels * batch) against (taps * channels, out channels), gives the chunk's
(pixels * batch, out channels) sum directly in the output's layout. Blocks of output rows and
columns read their input rows and columns with the taps' overlap (element-indexed blocks). The
epilogue, translated from the reference's jaxpr, runs on each chunk's sum, whose rows are whole
(every out channel): its per-channel operands are (1, out channels) columns, what it makes per
pixel (tm, 1) rows.

render.py copies these functions into each kernel file unchanged (with blocks.py's helpers) and
calls `_pixels_major_conv_stage` with the stage's parameters; tests call them directly in
interpret mode. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import (
    VMEM_BUDGET,
    _block_bytes,
    _compiler_params,
    _mxu_dot,
)


def _pixels_major_kernel(
    image_ref, taps_ref, *refs, epilogue, outputs, taps, rows, cols, chunk, operands
):
    """A block of `rows` output rows by `cols` output columns of every image. image_ref:
    (rows + taps_h - 1, cols + taps_w - 1, channels, batch); taps_ref: (taps_h * taps_w *
    channels, out channels), taps in (dh, dw, channel) order; refs: the epilogue's operands,
    then its `outputs` refs, each (rows, cols * batch, out channels)."""
    operand_refs, out_refs = refs[: len(refs) - outputs], refs[len(refs) - outputs :]
    taps_h, taps_w = taps
    batch = image_ref.shape[3]
    weights = taps_ref[...]
    if operands == "bf16":
        weights = weights.astype(jnp.bfloat16)

    def one_row(row, carry):
        for first in range(0, cols, chunk):  # unrolled while tracing: static offsets
            count = min(chunk, cols - first)
            # each pixel's taps stacked on the sublanes, the chunk's pixels side by side
            patch = jnp.concatenate(
                [
                    jnp.concatenate(
                        [
                            image_ref[row + dh, first + pixel + dw]
                            for dh in range(taps_h)
                            for dw in range(taps_w)
                        ],
                        axis=0,
                    )
                    for pixel in range(count)
                ],
                axis=1,
            )
            total = _mxu_dot(patch, weights, operands, contracting=((0,), (0,)))
            views = [ref.at[row, pl.ds(first * batch, count * batch)] for ref in out_refs]
            epilogue(total, *operand_refs, *views, tm=count * batch)
        return carry

    jax.lax.fori_loop(0, rows, one_row, 0)


def _whole_block(i, j):
    """The same whole block at every step (the taps, a per-channel column, a scalar)."""
    return 0, 0


def _pixels_major_conv_stage(
    image,
    kernel,
    *others,
    roles,
    outputs,
    epilogue,
    operands=None,
    temporaries=2,
    chunk_rows=512,
):
    """One convolution stage written pixels-major: image (batch, channels, height, width) with
    kernel (out channels, channels, taps_h, taps_w) into (out height * out width * batch, out
    channels), then `epilogue(total, *other_refs, *out_refs, tm=, tn=)` on each chunk of those
    rows, every out channel. roles: of each of `others`, "col" (one value per out channel, (1,
    out channels)) or "scalar"; outputs: (role, dtype) of each result, a "tile" or a "row" (one
    value per row: per pixel of each image).
    `temporaries`: f32 tiles the epilogue makes, for the VMEM estimate; a chunk spans about
    `chunk_rows` of the matmul's rows (pixels * batch)."""
    if any(role not in ("col", "scalar") for role in roles) or any(
        role not in ("tile", "row") for role, _ in outputs
    ):
        raise ValueError(f"a pixels-major convolution's operands {roles}, results {outputs}")
    # bf16 operands: cast where the image is laid out, half the bytes to write and read again
    dtype = jnp.bfloat16 if operands == "bf16" else image.dtype
    sublanes = 8 * max(1, 4 // jnp.dtype(dtype).itemsize)
    if image.shape[1] % sublanes:  # zero channels fill the taps' last sublane tile
        fill = ((0, 0), (0, -image.shape[1] % sublanes), (0, 0), (0, 0))
        image, kernel = jnp.pad(image, fill), jnp.pad(kernel, fill)
    batch, channels, height, width = image.shape
    out_channels, _, taps_h, taps_w = kernel.shape
    out_height, out_width = height - taps_h + 1, width - taps_w + 1
    pixels_first = _pixels_first(image, dtype)  # (height, width, channels, batch)
    taps = jnp.transpose(kernel, (2, 3, 1, 0)).reshape(taps_h * taps_w * channels, out_channels)
    chunk = max(1, min(out_width, chunk_rows // batch))
    width = {"tile": out_channels, "row": 1}  # of each kind of result

    def footprint(rows, cols):
        # Two buffers per pipelined block; one chunk's patch, sum and epilogue temporaries.
        pixel = _block_bytes(channels, batch, dtype)
        blocks = (rows + taps_h - 1) * (cols + taps_w - 1) * pixel
        blocks += _block_bytes(taps.shape[0], out_channels, taps.dtype)
        blocks += sum(
            _block_bytes(rows * cols * batch, width[role], dtype) for role, dtype in outputs
        )
        patch = _block_bytes(taps.shape[0], min(chunk, cols) * batch, dtype)
        work = (1 + temporaries) * _block_bytes(min(chunk, cols) * batch, out_channels, jnp.float32)
        return 2 * blocks + patch + work

    rows, cols = _fit_pixel_block(out_height, out_width, batch, footprint)
    kernel_fn = functools.partial(
        _pixels_major_kernel,
        epilogue=functools.partial(epilogue, tn=out_channels),
        outputs=len(outputs),
        taps=(taps_h, taps_w),
        rows=rows,
        cols=cols,
        chunk=min(chunk, cols),
        operands=operands,
    )
    element = pl.Element
    results = pl.pallas_call(
        kernel_fn,
        out_shape=[
            jax.ShapeDtypeStruct((out_height, out_width * batch, width[role]), dtype)
            for role, dtype in outputs
        ],
        grid=(out_height // rows, out_width // cols),
        in_specs=[
            pl.BlockSpec(
                (
                    element(rows + taps_h - 1),
                    element(cols + taps_w - 1),
                    element(channels),
                    element(batch),
                ),
                lambda i, j: (i * rows, j * cols, 0, 0),
            ),
            pl.BlockSpec(taps.shape, _whole_block),
            *(pl.BlockSpec(a.shape, _whole_block) for a in others),
        ],
        out_specs=[
            pl.BlockSpec((rows, cols * batch, width[role]), lambda i, j: (i, j, 0))
            for role, _ in outputs
        ],
        compiler_params=_compiler_params(("parallel", "parallel"), footprint(rows, cols)),
    )(pixels_first, taps, *others)
    shaped = [r.reshape(out_height * out_width * batch, r.shape[-1]) for r in results]
    return shaped[0] if len(shaped) == 1 else shaped


def _pixels_first(image, dtype, rows=8):
    """image (batch, channels, height, width) laid out (height, width, channels, batch) in
    `dtype`: by `_pixels_first_kernel` where the batch and the width are whole lane tiles, the
    height whole sublane tiles and a block fits VMEM; else by XLA's transpose (a copy of its
    own, the cast fused into it)."""
    batch, channels, height, width = image.shape
    sublanes = 8 * max(1, 4 // jnp.dtype(dtype).itemsize)

    def footprint(group):  # two buffers of each block, and the transposed planes
        read = _block_bytes(batch * group * rows, width, image.dtype)
        written = rows * width * _block_bytes(group, batch, dtype)
        return 2 * (read + written) + _block_bytes(group * width, batch, jnp.float32)

    groups = [
        g
        for g in (32, 16, 8)
        if g % sublanes == 0 and channels % g == 0 and footprint(g) <= VMEM_BUDGET
    ]
    if batch % 128 or width % 128 or height % rows or not groups:
        return jnp.transpose(image.astype(dtype), (2, 3, 1, 0))
    group = groups[0]
    return pl.pallas_call(
        functools.partial(_pixels_first_kernel, group=group, rows=rows),
        out_shape=jax.ShapeDtypeStruct((height, width, channels, batch), dtype),
        grid=(height // rows, channels // group),
        in_specs=[pl.BlockSpec((batch, group, rows, width), lambda i, j: (0, j, i, 0))],
        out_specs=pl.BlockSpec((rows, width, group, batch), lambda i, j: (i, 0, j, 0)),
        scratch_shapes=[pltpu.VMEM((group * width, batch), jnp.float32)],
        compiler_params=_compiler_params(("parallel", "parallel"), footprint(group)),
    )(image)


def _pixels_first_kernel(image_ref, out_ref, planes_ref, *, group, rows):
    """One block: image_ref (batch, group channels, rows, width) into out_ref (rows, width,
    group, batch). Per row and channel, the (batch, width) plane (each image's row lies in a
    tile of its own: a sublane-strided load) is transposed into planes_ref's rows channel *
    width + w; each pixel's (channels, batch) tile is then a strided load of every width-th of
    those rows."""
    width = image_ref.shape[3]
    for row in range(rows):  # unrolled while tracing: static offsets
        for channel in range(group):
            plane = image_ref[:, channel, row, :].astype(jnp.float32)
            planes_ref[channel * width : (channel + 1) * width, :] = plane.T

        def one_pixel(pixel, carry, row=row):
            tile = planes_ref[pl.ds(pixel, group, stride=width), :]
            out_ref[row, pixel] = tile.astype(out_ref.dtype)
            return carry

        jax.lax.fori_loop(0, width, one_pixel, 0, unroll=8)


def _fit_pixel_block(out_height, out_width, batch, footprint, preferred=16):
    """(rows, cols): divisors of the output's height and width, at most `preferred` each, the
    larger halved first until the footprint fits VMEM_BUDGET. A block of columns holds a whole
    number of sublane tiles of pixels * batch rows unless it is the whole width."""

    def divisors(size, fits):
        return [d for d in range(1, size + 1) if size % d == 0 and fits(d)]

    row_options = divisors(out_height, lambda d: True)
    col_options = divisors(out_width, lambda d: d == out_width or d * batch % 8 == 0)
    rows = max(d for d in row_options if d <= preferred)
    cols = max((d for d in col_options if d <= preferred), default=min(col_options))
    while footprint(rows, cols) > VMEM_BUDGET:
        smaller_rows = max((d for d in row_options if d < rows), default=rows)
        smaller_cols = max((d for d in col_options if d < cols), default=cols)
        if rows >= cols and smaller_rows < rows:
            rows = smaller_rows
        elif smaller_cols < cols:
            cols = smaller_cols
        elif smaller_rows < rows:
            rows = smaller_rows
        else:
            break
    return rows, cols
