"""The convolution stage of the kernels the built-in agent writes: a plain 2-D convolution (NCHW
image, OIHW kernel, stride 1, no padding) as an implicit GEMM, one parameterised kernel and
wrapper. Per image and block of output channels, one matmul per row of taps on a lane-shifted
view of the image's column-shifted copies stacked along its channels, summed in f32; the
epilogue, translated from the reference's jaxpr, comes in as a function of that sum and the
stage's other refs. Trace-time `if`s choose the operand precision.

render.py copies these functions into each kernel file unchanged (with blocks.py's helpers,
rowwise.py's block roles and the file's BLOCK_* tunables) and calls `_conv_stage` with the
stage's parameters; tests call them directly in interpret mode. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _fit_rows,
    _pick_block,
)
from maxkernel_tui.agents.builtin.pieces.rowwise import _rowwise_block

# Preferred block of output channels: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512


def _conv_kernel(image_ref, taps_ref, *refs, epilogue, taps_h, row_len, operands, tm, tn):
    """The convolution of one image for a block of output channels: for each row of taps dh, its
    (tm, taps_w * channels) weights times the image's column-shifted copies (taps_w * channels
    rows) seen at the row's lane offset, summed in f32; then `epilogue(acc, *refs)`. One matmul
    per row of taps, not per tap: a contraction taps_w times deeper fills more of the MXU's
    width (64 channels fill half of it). `operands`: "bf16" casts f32 operands to bf16 (one MXU
    pass), "highest" asks for full f32 passes, None keeps their dtype at the default precision."""
    precision = jax.lax.Precision.HIGHEST if operands == "highest" else None
    acc = jnp.zeros((tm, tn), jnp.float32)
    for dh in range(taps_h):  # unrolled while tracing: taps_h matmuls
        weights = taps_ref[dh]
        view = image_ref[:, pl.ds(dh * row_len, tn)]
        if operands == "bf16":
            weights, view = weights.astype(jnp.bfloat16), view.astype(jnp.bfloat16)
        acc += jnp.dot(weights, view, preferred_element_type=jnp.float32, precision=precision)
    epilogue(acc, *refs)


def _image_block(b, i, j):
    """The whole image b: its column-shifted copies of every channel, every pixel."""
    return b, 0, 0


def _taps_block(b, i, j):
    """Every row of taps' weights of out-channel block i."""
    return 0, i, 0


def _image_role_block(role, batched, tm, tn):
    """The BlockSpec of an epilogue operand or a result on the (image, out-channel block, pixel
    block) grid: rowwise.py's block by role, with the image's axis in front when `batched`."""
    shape, index = _rowwise_block(role, tm, tn)

    def per_image(b, i, j):
        """The block of image b."""
        return (b, *index(i, j))

    def all_images(b, i, j):
        """The same block for every image."""
        return index(i, j)

    return pl.BlockSpec((None, *shape), per_image) if batched else pl.BlockSpec(shape, all_images)


def _conv_stage(
    image,
    kernel,
    *others,
    roles,
    outputs,
    batched,
    epilogue,
    operands=None,
    row_align=8,
    temporaries=2,
):
    """One convolution stage: image (batch, channels, height, width) with kernel (out channels,
    channels, taps_h, taps_w) into (batch, out channels, out pixels), then
    `epilogue(acc, *other_refs, *out_refs, tm=, tn=)`. roles: the role of each of `others`
    (rows are output channels, columns output pixels); outputs: (role, dtype) of each result;
    batched: whether each of `others` and of the outputs has the image axis. `temporaries`: f32
    (tm, pixels) values besides the blocks (the sum and a tap's view at least), for the VMEM
    estimate."""
    batch, channels, height, width = image.shape
    rows, _, taps_h, taps_w = kernel.shape
    out_height, out_width = height - taps_h + 1, width - taps_w + 1
    cols = out_height * out_width
    # XLA lays out taps_w column-shifted copies of the image, rows of pixels flattened: tap
    # (dh, dw) of output pixel p is then pixel p + dh * out_width of copy dw, a lane offset.
    # The copies are stacked along the channels (row dw * channels + c), and each row of taps'
    # weights along its columns in the same order, so one row of taps is one matmul.
    shifted = jnp.stack([image[:, :, :, dw : dw + out_width] for dw in range(taps_w)], axis=1)
    shifted = shifted.reshape(batch, taps_w * channels, height * out_width)
    taps = jnp.transpose(kernel, (2, 0, 3, 1)).reshape(taps_h, rows, taps_w * channels)
    tm = _pick_block(rows, BLOCK_ROWS, row_align)
    tn = cols  # whole images: the taps reach across rows of pixels

    def footprint(tm):
        # Two buffers per pipelined block, plus the sum and the epilogue's f32 temporaries.
        blocks = _block_bytes(taps_w * channels, height * out_width, image.dtype)
        blocks += _block_bytes(taps_h * tm, taps_w * channels, kernel.dtype)
        blocks += sum(
            _block_bytes(*_rowwise_block(role, tm, tn)[0], array.dtype)
            for role, array in zip(roles, others)
        )
        blocks += sum(_block_bytes(*_rowwise_block(role, tm, tn)[0], d) for role, d in outputs)
        return 2 * blocks + temporaries * _block_bytes(tm, tn, jnp.float32)

    tm = _fit_rows(rows, tm, row_align, footprint)
    sizes = {"tile": (rows, cols), "row": (rows, 1), "col": (1, cols), "scalar": (1, 1)}
    in_flags, out_flags = batched[: len(others)], batched[len(others) :]
    kernel_fn = functools.partial(
        _conv_kernel,
        epilogue=functools.partial(epilogue, tm=tm, tn=tn),
        taps_h=taps_h,
        row_len=out_width,
        operands=operands,
        tm=tm,
        tn=tn,
    )
    results = pl.pallas_call(
        kernel_fn,
        out_shape=[
            jax.ShapeDtypeStruct((batch, *sizes[role]) if flag else sizes[role], dtype)
            for (role, dtype), flag in zip(outputs, out_flags)
        ],
        grid=(batch, rows // tm, cols // tn),
        in_specs=[
            pl.BlockSpec((None, taps_w * channels, height * out_width), _image_block),
            pl.BlockSpec((taps_h, tm, taps_w * channels), _taps_block),
            *(_image_role_block(role, flag, tm, tn) for role, flag in zip(roles, in_flags)),
        ],
        out_specs=[
            _image_role_block(role, flag, tm, tn) for (role, _), flag in zip(outputs, out_flags)
        ],
        compiler_params=_compiler_params(("parallel", "parallel", "parallel"), footprint(tm)),
    )(shifted, taps, *others)
    return results[0] if len(results) == 1 else results
