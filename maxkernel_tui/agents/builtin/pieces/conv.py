"""The convolution stage of the kernels the built-in agent writes: a plain 2-D convolution (NCHW
image, OIHW kernel, stride 1, no padding) as an implicit GEMM, one parameterised kernel and
wrapper. The image is read from HBM once, its pixels flattened (in VMEM where its rows are
whole lane tiles, else by XLA's copy); the taps are formed in VMEM. Tap (dh, dw) of output
pixel (oh, ow) is input pixel (oh + dh) * width + ow + dw: for a chunk of output rows laid out
`width` pixels a row, every tap is one lane-shifted slice of the image block, so the chunk's
patch is the taps' slices stacked along the channels, and one matmul (out channels, taps *
channels) @ (taps * channels, pixels) computes the chunk, summed in f32. Each output row's
first out_width pixels go to the sum (the rest of a row of `width` pixels reaches past the
image's right edge); the epilogue, translated from the reference's jaxpr, then runs on the
whole image's sum in blocks of rows (`sub`), so its f32 temporaries stay small while every
pixel of a row is in one block. Trace-time `if`s choose the operand precision. A volume (NCDHW
x OIDHW) whose epilogue needs the whole image (a group norm's statistics over every plane)
runs here too: its planes lie side by side on the lanes (flattened as an image's rows are),
and each output plane is a 2-D convolution of the taps_d planes it reads, unrolled plane by
plane into the image's sum.

render.py copies these functions into each kernel file unchanged (with blocks.py's helpers,
rowwise.py's block roles and the file's BLOCK_* tunables) and calls `_conv_stage` with the
stage's parameters; tests call them directly in interpret mode. Imports jax.
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
    _pick_block,
)
from maxkernel_tui.agents.builtin.pieces.rowwise import _rowwise_block

# Preferred block of output channels: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512


def _conv_kernel(
    image_ref,
    taps_ref,
    *refs,
    epilogue,
    sliced,
    geometry,
    planes,
    chunk_rows,
    stacked,
    operands,
    sub,
    flatten,
    patches,
):
    """The convolution of one image for a block of output channels, then its epilogue.
    image_ref: (channels, depth, height, width) as the image lies in HBM, depth 1 for a 2-D
    image, when `flatten`; else (channels, depth * height * width), flattened by XLA. taps_ref:
    (tm, taps_d * taps_h * taps_w * channels), taps in (dd, dh, dw) order; refs: the epilogue's
    operands, its outputs, the f32 sum (tm, out voxels) and, when `flatten`, the image's pixels
    flattened here (channels filled to a sublane tile), then when `patches`, every input
    plane's stacked taps (planes, taps_h * taps_w * channels, out plane span). planes: (taps_d,
    out_depth, height * width). `sliced`: whether each of the epilogue's refs has a row per output
    channel (its blocks of `sub` rows are views of it)."""
    *epilogue_refs, acc_ref = refs[: len(refs) - flatten - patches]
    flat_ref = refs[-1 - patches] if flatten else image_ref
    patches_ref = refs[-1] if patches else None
    if flatten:
        _flatten_image(image_ref, flat_ref)
    taps_d, out_depth, plane_pixels = planes
    _, _, _, out_height, out_width = geometry
    if patches_ref is not None:  # a volume's planes' taps formed once, read taps_d times
        _plane_patches(flat_ref, patches_ref, geometry, plane_pixels)
        _convolve_patches(patches_ref, taps_ref, acc_ref, geometry, taps_d, operands)
    for d in range(0 if patches_ref is not None else out_depth):  # unrolled: static offsets
        _convolve_planes(
            [flat_ref] * taps_d,
            taps_ref,
            acc_ref,
            geometry,
            chunk_rows,
            stacked,
            operands,
            starts=[(d + dd) * plane_pixels for dd in range(taps_d)],
            at=d * out_height * out_width,
        )
    _epilogue_in_blocks(acc_ref, epilogue_refs, epilogue, sliced, sub)


def _flatten_image(image_ref, flat_ref):
    """flat_ref (filled channels, depth * height * width) = image_ref (channels, depth, height,
    width), row by row, the channels past the image's zero. In VMEM: flattening in HBM is a
    copy XLA makes of the whole image (its rows are tiled in sublanes there)."""
    channels, depth, height, width = image_ref.shape
    if flat_ref.shape[0] > channels:
        flat_ref[channels:, :] = jnp.zeros(
            (flat_ref.shape[0] - channels, flat_ref.shape[1]), flat_ref.dtype
        )
    for p in range(depth):  # unrolled while tracing: static lane offsets
        for h in range(height):
            flat_ref[:channels, pl.ds((p * height + h) * width, width)] = image_ref[:, p, h, :]


def _plane_patches(flat_ref, patches_ref, geometry, plane_pixels):
    """patches_ref[p] = the taps of input plane p stacked along the channels (taps in (dh, dw)
    order), through the plane's last output pixel, in the patches' dtype (cast once)."""
    taps_h, taps_w, width, out_height, out_width = geometry
    span = (out_height - 1) * width + out_width
    for p in range(patches_ref.shape[0]):  # unrolled while tracing: static lane offsets
        views = [
            flat_ref[:, pl.ds(p * plane_pixels + dh * width + dw, span)]
            for dh in range(taps_h)
            for dw in range(taps_w)
        ]
        patches_ref[p] = jnp.concatenate(views, axis=0).astype(patches_ref.dtype)


def _convolve_patches(patches_ref, taps_ref, acc_ref, geometry, taps_d, operands):
    """acc_ref (tm, out voxels) = output plane d the sum over dd of the weights of plane tap dd
    times patches_ref[d + dd]: each input plane's taps were formed once for every output plane
    that reads it."""
    _, _, width, out_height, out_width = geometry
    depth = patches_ref.shape[1]
    weights = taps_ref[...]
    if operands == "bf16":
        weights = weights.astype(jnp.bfloat16)
    per_plane = [weights[:, dd * depth : (dd + 1) * depth] for dd in range(taps_d)]
    for d in range(patches_ref.shape[0] - taps_d + 1):  # unrolled: static lane offsets
        part = sum(_mxu_dot(per_plane[dd], patches_ref[d + dd], operands) for dd in range(taps_d))
        _store_rows(acc_ref, part, d * out_height * out_width, 0, out_height, width, out_width)


def _store_rows(acc_ref, part, at, first, count, width, out_width):
    """The `count` output rows of `part` (laid out `width` pixels a row) to acc_ref, the first
    out_width pixels of each, from output row `first` of the plane starting at lane `at`."""
    if out_width == width:  # no column is cut: the rows are already contiguous
        acc_ref[:, pl.ds(at + first * out_width, part.shape[1])] = part
        return
    for row in range(count):
        acc_ref[:, pl.ds(at + (first + row) * out_width, out_width)] = part[
            :, row * width : row * width + out_width
        ]


def _convolve_planes(
    planes, taps_ref, acc_ref, geometry, chunk_rows, stacked, operands, starts=None, at=0
):
    """acc_ref (tm, out pixels) = the taps of `planes` (each (channels, height * width): one
    image, or the input planes one output plane of a volume reads, in depth order) times
    taps_ref (tm, planes * taps_h * taps_w * channels), taps in (plane, dh, dw) order.
    `starts`: the lane where each plane begins in its ref (a whole volume's planes side by
    side; default 0); `at`: the lane of acc_ref where the output plane begins.
    `stacked`: the taps' slices stack along the channels (the channels fill whole sublane
    tiles), so each chunk of `chunk_rows` output rows is one matmul; else one matmul per tap.
    `operands`: how the matmuls take f32 operands (blocks._mxu_dot; "bf16" casts the weights
    once)."""
    taps_h, taps_w, width, out_height, out_width = geometry
    channels = planes[0].shape[0]
    starts = starts or [0] * len(planes)
    weights = taps_ref[...]
    if operands == "bf16":
        weights = weights.astype(jnp.bfloat16)
    for first in range(0, out_height, chunk_rows):  # unrolled while tracing: static lane offsets
        count = min(chunk_rows, out_height - first)
        span = (count - 1) * width + out_width  # through the chunk's last output pixel
        views = [
            plane[:, pl.ds(start + (first + dh) * width + dw, span)]
            for plane, start in zip(planes, starts)
            for dh in range(taps_h)
            for dw in range(taps_w)
        ]
        if stacked:
            part = _mxu_dot(weights, jnp.concatenate(views, axis=0), operands)
        else:
            part = sum(
                _mxu_dot(weights[:, t * channels : (t + 1) * channels], view, operands)
                for t, view in enumerate(views)
            )
        _store_rows(acc_ref, part, at, first, count, width, out_width)


def _epilogue_in_blocks(acc_ref, epilogue_refs, epilogue, sliced, sub):
    """The epilogue on blocks of `sub` rows of the finished sum; `sliced`: whether each of its
    refs has a row per output channel (a block of it is a view)."""
    for start in range(0, acc_ref.shape[0], sub):
        rows = pl.ds(start, sub)
        views = [ref.at[rows] if flag else ref for ref, flag in zip(epilogue_refs, sliced)]
        epilogue(acc_ref[rows, :], *views, tm=sub)


def _image_block(b, i):
    """The whole image b: every channel, every pixel."""
    return b, 0, 0


def _image_planes_block(b, i):
    """The whole image b as it lies in HBM: every channel, plane, row and column."""
    return b, 0, 0, 0, 0


def _taps_block(b, i):
    """Every tap's weights of out-channel block i."""
    return i, 0


def _image_role_block(role, batched, tm, tn):
    """The BlockSpec of an epilogue operand or a result on the (image, out-channel block) grid:
    rowwise.py's block by role (every pixel), with the image's axis in front when `batched`."""
    shape, index = _rowwise_block(role, tm, tn)

    def per_image(b, i):
        """The block of image b."""
        return (b, *index(i, 0))

    def all_images(b, i):
        """The same block for every image."""
        return index(i, 0)

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
    full_rows=False,
    chunk_pixels=4096,
    patch_bytes=4 * 2**20,
):
    """One convolution stage: image (batch, channels, height, width) with kernel (out channels,
    channels, taps_h, taps_w) into (batch, out channels, out pixels), or a volume (batch,
    channels, depth, height, width) with (out channels, channels, taps_d, taps_h, taps_w) into
    (batch, out channels, out voxels), then
    `epilogue(acc, *other_refs, *out_refs, tm=, tn=)` on blocks of rows of every pixel. roles:
    the role of each of `others` (rows are output channels, columns output pixels); outputs:
    (role, dtype) of each result; batched: whether each of `others` and of the outputs has the
    image axis. `temporaries`: f32 (rows, pixels) values the epilogue makes, for the VMEM
    estimate. `full_rows`: the epilogue reduces over every output channel, so one block (and
    one epilogue block) holds them all. A chunk of output rows spans at most `chunk_pixels`
    pixels and its patch (every tap's slice) at most `patch_bytes`: wide enough to fill the
    MXU's columns, small enough to stay a VMEM temporary."""
    if image.ndim == 4:  # an image: a volume of one plane
        image, kernel = image[:, :, None], kernel[:, :, None]
    sublanes = 8 * max(1, 4 // jnp.dtype(image.dtype).itemsize)
    batch, image_channels, planes, height, width = image.shape
    # Too few channels to stack the taps: zero channels fill a tile.
    channels = max(image_channels, sublanes)
    fill = ((0, 0), (0, channels - image_channels), (0, 0), (0, 0), (0, 0))
    kernel = jnp.pad(kernel, fill)
    # Rows of whole lane tiles are flattened (and the channels filled) in VMEM, a row a whole
    # number of vregs stored aligned; XLA's flattening copies the image in HBM (its rows lie
    # in sublanes there: 39k 4.36 -> 3.74 ms on a v5e). Narrower rows XLA flattens: a VMEM
    # copy per row of 32 lanes measured slower than its copy (25k 1.80 -> 2.03 ms).
    flatten = width % 128 == 0
    if flatten:
        whole = (None, image_channels, planes, height, width)
        image_spec = pl.BlockSpec(whole, _image_planes_block)
        # each channel's planes are tiled on their own: rows padded per plane
        image_block = image_channels * planes * _block_bytes(height, width, image.dtype)
        flat_block = _block_bytes(channels, planes * height * width, image.dtype)
    else:
        image = jnp.pad(image, fill).reshape(batch, channels, planes * height * width)
        image_spec = pl.BlockSpec((None, channels, planes * height * width), _image_block)
        image_block = _block_bytes(channels, planes * height * width, image.dtype)
        flat_block = 0
    rows, _, taps_d, taps_h, taps_w = kernel.shape
    out_depth, out_height, out_width = planes - taps_d + 1, height - taps_h + 1, width - taps_w + 1
    cols = out_depth * out_height * out_width
    depth = taps_d * taps_h * taps_w * channels
    # The taps' weights in (dd, dh, dw, channel) order, the order of the patch's rows.
    taps = jnp.transpose(kernel, (0, 2, 3, 4, 1)).reshape(rows, depth)
    stacked, chunk_rows, span = _chunking(
        image.dtype,
        channels,
        depth,
        width,
        out_height,
        out_width,
        operands,
        chunk_pixels,
        patch_bytes,
    )
    # A volume whose planes are one chunk each: every input plane's taps are formed once, for
    # the taps_d output planes that read it (not once per reader), where they fit 4 patches.
    plane_depth = taps_h * taps_w * channels
    patch_dtype = jnp.bfloat16 if operands == "bf16" else image.dtype
    patches_block = planes * _block_bytes(plane_depth, span, patch_dtype)
    one_chunk = stacked and chunk_rows >= out_height
    patches = taps_d > 1 and one_chunk and patches_block <= 4 * patch_bytes
    tm = _pick_block(rows, BLOCK_ROWS, row_align)
    others_outputs = [
        *((role, array.dtype) for role, array in zip(roles, others)),
        *outputs,
    ]

    def footprint(tm, sub):
        # Two buffers per pipelined block; the sum, one chunk's patch and product, and the
        # epilogue's f32 temporaries on a block of `sub` rows.
        blocks = image_block + _block_bytes(tm, depth, kernel.dtype)
        blocks += sum(
            _block_bytes(*_rowwise_block(role, tm, cols)[0], dtype)
            for role, dtype in others_outputs
        )
        chunk = _block_bytes(depth, span, image.dtype) + _block_bytes(tm, span, jnp.float32)
        work = temporaries * _block_bytes(sub, cols, jnp.float32)
        scratch = _block_bytes(tm, cols, jnp.float32) + flat_block + patches * patches_block
        return 2 * blocks + scratch + chunk + work

    tm, sub = (rows, rows) if full_rows else _fit_conv_rows(rows, tm, row_align, footprint)
    sizes = {"tile": (rows, cols), "row": (rows, 1), "col": (1, cols), "scalar": (1, 1)}
    in_flags, out_flags = batched[: len(others)], batched[len(others) :]
    kernel_fn = functools.partial(
        _conv_kernel,
        epilogue=functools.partial(epilogue, tn=cols),
        sliced=tuple(role in ("tile", "row") for role, _ in others_outputs),
        geometry=(taps_h, taps_w, width, out_height, out_width),
        planes=(taps_d, out_depth, height * width),
        chunk_rows=chunk_rows,
        stacked=stacked,
        operands=operands,
        sub=sub,
        flatten=flatten,
        patches=patches,
    )
    results = pl.pallas_call(
        kernel_fn,
        out_shape=[
            jax.ShapeDtypeStruct((batch, *sizes[role]) if flag else sizes[role], dtype)
            for (role, dtype), flag in zip(outputs, out_flags)
        ],
        grid=(batch, rows // tm),
        in_specs=[
            image_spec,
            pl.BlockSpec((tm, depth), _taps_block),
            *(_image_role_block(role, flag, tm, cols) for role, flag in zip(roles, in_flags)),
        ],
        out_specs=[
            _image_role_block(role, flag, tm, cols) for (role, _), flag in zip(outputs, out_flags)
        ],
        scratch_shapes=[
            pltpu.VMEM((tm, cols), jnp.float32),
            *([pltpu.VMEM((channels, planes * height * width), image.dtype)] if flatten else []),
            *([pltpu.VMEM((planes, plane_depth, span), patch_dtype)] if patches else []),
        ],
        # A quarter more than the blocks and named temporaries: the compiler's own (each tap's
        # product, the epilogue's intermediates) took 18.4 MiB where these came to 15.4 (25k).
        compiler_params=_compiler_params(("parallel", "parallel"), footprint(tm, sub) * 5 // 4),
    )(image, taps, *others)
    return results[0] if len(results) == 1 else results


def _fit_conv_rows(rows, tm, row_align, footprint):
    """(tm, sub): the epilogue's block of rows shrinks first (only its temporaries scale with
    it), then the block of output channels, until the footprint fits."""
    sub = tm
    while footprint(tm, sub) > VMEM_BUDGET:
        smaller_sub = _pick_block(tm, sub // 2, row_align)
        smaller_tm = _pick_block(rows, tm // 2, row_align)
        if smaller_sub < sub:
            sub = smaller_sub
        elif smaller_tm < tm:
            tm = sub = smaller_tm
        else:
            break
    return tm, sub


def _chunking(
    dtype, channels, depth, width, out_height, out_width, operands, chunk_pixels, patch_bytes
):
    """(stacked, chunk_rows, span): whether the taps' slices stack into one matmul (the
    channels fill whole sublane tiles), how many output rows a chunk takes (at most
    `chunk_pixels` pixels, its patch of `depth` rows at most `patch_bytes`), and the lanes a
    chunk spans."""
    itemsize = jnp.dtype(dtype).itemsize
    stacked = channels % (8 * max(1, 4 // itemsize)) == 0
    row_bytes = depth * width * max(itemsize, 2 if operands == "bf16" else itemsize)
    chunk_rows = max(1, min(out_height, chunk_pixels // width, patch_bytes // row_bytes))
    span = (min(chunk_rows, out_height) - 1) * width + out_width
    return stacked, chunk_rows, span
