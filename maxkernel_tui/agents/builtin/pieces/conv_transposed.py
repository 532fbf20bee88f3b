"""The transposed 3-D convolution stage of the kernels the built-in agent writes: a convolution
of a volume dilated by a stride (`lhs_dilation`, what a ConvTranspose3d is), padded, with a
kernel of taps (NCDHW image, OIDHW taps), as an implicit GEMM without the dilation's zeros.

Along an axis dilated by s, output o = s * m + r (its phase r) meets only every s-th tap: taps
t0(r), t0(r) + s, ... of input m + shift(r), m + shift(r) + 1, ... So each phase of each axis is
a plain stride-1 convolution of the (padded) input with a slice of the taps, and a stride-2
transposed convolution in 3-D is eight such convolutions of 2 x 2 x 2 taps, where the dilated
form multiplies 4 x 4 x 4 taps, seven eighths of them by zeros.

Per image, block of output channels and per-phase depth index m, the kernel computes every
depth phase's output plane (s_d * m + r): the input planes it reads come from a ring in VMEM (one
new plane per step, as conv_volume.py's), each height and width phase is a matmul per chunk of
rows over lane-shifted slices of the planes (conv.py's taps), and the width phases of a row are
interleaved in VMEM (lane gathers: Mosaic refuses a store strided along the lanes) into the
plane's f32 sum: at stride 2 with input rows laid out an output row apart, a whole vreg of
output at a time (four gathers and selects), else row by row. The epilogue, translated
from the reference's jaxpr, runs on each finished plane (conv_volume.py's per-plane epilogue),
whose copy to HBM overlaps the next step.

render.py copies these functions into each kernel file unchanged (with conv.py's,
conv_volume.py's, blocks.py's and rowwise.py's helpers and the file's BLOCK_* tunables) and
calls `_transposed_volume_conv_stage`; tests call them directly in interpret mode. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _mxu_dot,
    _pick_block,
)
from maxkernel_tui.agents.builtin.pieces.conv import _chunking, _epilogue_in_blocks, _fit_conv_rows
from maxkernel_tui.agents.builtin.pieces.conv_volume import _volume_in_specs
from maxkernel_tui.agents.builtin.pieces.rowwise import _rowwise_block

# Preferred block of output channels: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512


def _axis_phases(size, dilation, padding, taps):
    """One axis of a convolution of an input of `size` dilated by `dilation` and padded by
    `padding` (low, high), with `taps` taps: (per-phase outputs, input padding (low, high),
    phases), each phase (first tap, tap count, first padded input read by output 0). Output
    s * m + r of phase r reads taps first + s * u of padded input m + read + u."""
    low, high = padding
    out = (size - 1) * dilation + 1 + low + high - taps + 1
    assert out % dilation == 0, "every phase of an axis must have as many outputs"
    per_phase = out // dilation
    phases = []
    for r in range(dilation):
        first = (low - r) % dilation
        count = -(-(taps - first) // dilation)
        assert count > 0, "a phase no tap reaches"
        phases.append((first, count, (r + first - low) // dilation))
    pad_low = max(0, -min(read for _, _, read in phases))
    needed = max(per_phase - 1 + count - 1 + read for _, count, read in phases) + 1
    pad_high = max(0, needed - size)
    return (
        per_phase,
        (pad_low, pad_high),
        tuple((first, count, read + pad_low) for first, count, read in phases),
    )


def _phase_taps(kernel, depth_phases, height_phases, width_phases):
    """The taps' weights of every (depth, height, width) phase in that order, each phase's in
    (dd, dh, dw, channel) order, side by side: (out channels, total)."""
    parts = []
    for first_d, count_d, _ in depth_phases:
        for first_h, count_h, _ in height_phases:
            for first_w, count_w, _ in width_phases:
                step_d, step_h, step_w = len(depth_phases), len(height_phases), len(width_phases)
                part = kernel[
                    :,
                    :,
                    first_d : first_d + step_d * count_d : step_d,
                    first_h : first_h + step_h * count_h : step_h,
                    first_w : first_w + step_w * count_w : step_w,
                ]
                parts.append(jnp.transpose(part, (0, 2, 3, 4, 1)).reshape(kernel.shape[0], -1))
    return jnp.concatenate(parts, axis=1)


def _interleaved(pieces):
    """One output row from its width phases' pieces (each (tm, per-phase width)): output x =
    s * q + c is piece c's q-th. A lane gather per segment of at most 128 output lanes (within
    one vreg; Mosaic refuses a store strided along the lanes, and a stack with a trailing axis
    of s pads every element to a vreg row)."""
    if len(pieces) == 1:
        return pieces[0]
    phases, (rows, width) = len(pieces), pieces[0].shape
    line = phases * width
    take = width if line <= 128 or 128 % phases else 128 // phases  # of each piece a segment
    parts = []
    for start in range(0, width, take):
        size = min(take, width - start)
        joined = jnp.concatenate([piece[:, start : start + size] for piece in pieces], axis=1)
        lane = jax.lax.broadcasted_iota(jnp.int32, (rows, phases * size), 1)
        order = (lane % phases) * size + lane // phases
        parts.append(jnp.take_along_axis(joined, order, axis=1))
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)


def _interleaved_blocks(parts, acc_ref, first, count, line):
    """Output rows 2 * first .. 2 * (first + count) - 1 of a stride-2 plane into acc_ref, from the
    products parts[b][c] (tm, count * line) of height phase b and width phase c, input row p at
    lanes (p - first) * line (its first line // 2 lanes are outputs). 128 output lanes at a time,
    whole vregs: each block's lanes of one phase come from one 128-lane block of its product, by
    a lane gather, and the four phases are selected by lane."""
    rows = parts[0][0].shape[0]
    lane = jax.lax.broadcasted_iota(jnp.int32, (rows, 128), 1)
    for block in range(2 * count * line // 128):
        position = block * 128 + lane  # within the chunk's output rows
        y, x = position // line, position % line
        source = (y // 2) * line + x // 2  # within a product
        out = None
        for b in range(2):
            for c in range(2):
                # the product block that holds every lane of this phase here (one, by geometry;
                # none where the block is one output row of the other height phase)
                lanes = range(block * 128, (block + 1) * 128)
                first_lane = next(
                    (k for k in lanes if ((k // line) % 2, (k % line) % 2) == (b, c)), None
                )
                if first_lane is None:
                    continue
                held = ((first_lane // line) // 2 * line + (first_lane % line) // 2) // 128
                values = jnp.take_along_axis(
                    parts[b][c][:, held * 128 : (held + 1) * 128], source % 128, axis=1
                )
                chosen = jnp.logical_and(y % 2 == b, x % 2 == c)
                out = values if out is None else jnp.where(chosen, values, out)
        acc_ref[:, pl.ds(2 * first * line + block * 128, 128)] = out


def _transposed_plane(planes, taps_ref, acc_ref, column, phases, geometry, chunk_rows, operands):
    """acc_ref (tm, out pixels of one plane) = one depth phase's output plane: `planes` are the
    padded input planes its taps read (each (channels, height * width)), `column` the first of
    its weights in taps_ref; phases: (height phases, width phases), each (count, first read)."""
    height_phases, width_phases = phases
    # padded input width; per-phase output sizes; whether the rows are laid out a plane's row
    # apart (`width` = line) for whole-vreg interleaving (_interleaved_blocks)
    width, out_height, out_width, aligned = geometry
    line = out_width * len(width_phases)  # one row of the output plane
    channels = planes[0].shape[0]
    weights = []
    for count_h, _ in height_phases:
        for count_w, _ in width_phases:
            size = len(planes) * count_h * count_w * channels
            block = taps_ref[:, pl.ds(column, size)]
            weights.append(block.astype(jnp.bfloat16) if operands == "bf16" else block)
            column += size
    for first in range(0, out_height, chunk_rows):  # unrolled while tracing: static lane offsets
        count = min(chunk_rows, out_height - first)
        span = count * width if aligned else (count - 1) * width + out_width
        products = []
        for b, (count_h, read_h) in enumerate(height_phases):
            parts = []
            for c, (count_w, read_w) in enumerate(width_phases):
                views = [
                    plane[:, pl.ds((first + read_h + dh) * width + read_w + dw, span)]
                    for plane in planes
                    for dh in range(count_h)
                    for dw in range(count_w)
                ]
                patch = jnp.concatenate(views, axis=0)
                parts.append(_mxu_dot(weights[b * len(width_phases) + c], patch, operands))
            products.append(parts)
            if aligned:
                continue
            for row in range(count):
                y = (first + row) * len(height_phases) + b
                pieces = [part[:, row * width : row * width + out_width] for part in parts]
                acc_ref[:, pl.ds(y * line, line)] = _interleaved(pieces)
        if aligned:
            _interleaved_blocks(products, acc_ref, first, count, line)
    return column


def _transposed_volume_kernel(
    image_hbm,
    taps_ref,
    *refs,
    results,
    epilogue,
    sliced,
    phases,
    window,
    geometry,
    chunk_rows,
    operands,
    sub,
):
    """Every depth phase's output plane of per-phase depth index pl.program_id(2), image
    pl.program_id(0), out-channel block pl.program_id(1), then their epilogue. image_hbm:
    (batch, channels, padded depth, padded height * width), left in HBM; refs: the epilogue's
    operands, the `results` (batch, out channels, out depth, plane pixels) left in HBM, the f32
    sum of one plane, the ring of window + 1 input planes (plane p in slot p modulo window + 1)
    and its DMA semaphores, two slots per result (each a plane per depth phase) and theirs.
    phases: (depth, height, width) phases, each (count, first read); window: (first plane, the
    planes one step reads)."""
    others = refs[: len(refs) - 2 * results - 4]
    out_hbm = refs[len(others) : len(others) + results]
    acc_ref, ring, copied = refs[len(others) + results : len(others) + results + 3]
    *out_slots, written = refs[len(others) + results + 3 :]
    b, i, m = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    depth_phases, *plane_phases = phases
    base, span = window
    slots, last, tm = span + 1, pl.num_programs(2) - 1, acc_ref.shape[0]
    steps = len(depth_phases)

    def read(plane):
        slot = jax.lax.rem(plane, slots)
        return pltpu.make_async_copy(image_hbm.at[b, :, plane], ring.at[slot], copied.at[slot])

    def write(k, step, phase):
        slot = jax.lax.rem(step, 2)
        target = out_hbm[k].at[b, pl.ds(i * tm, tm), step * steps + phase]
        source = out_slots[k].at[slot, phase]
        return pltpu.make_async_copy(source, target, written.at[k, slot, phase])

    @pl.when(m == 0)
    def _():
        for plane in range(span):
            read(base + plane).start()

    @pl.when(m < last)
    def _():
        read(m + base + span).start()  # the next step's new plane, into the slot m - 1 left

    @pl.when(m == 0)
    def _():
        for plane in range(span - 1):
            read(base + plane).wait()

    read(m + base + span - 1).wait()

    @pl.when(m >= 2)
    def _():
        for k in range(results):
            for phase in range(steps):
                write(k, m - 2, phase).wait()  # the slot this step's planes go to is free again

    slot, column = jax.lax.rem(m, 2), 0
    for phase, (count_d, read_d) in enumerate(depth_phases):
        planes = [ring.at[jax.lax.rem(m + base + read_d + dd, slots)] for dd in range(count_d)]
        column = _transposed_plane(
            planes, taps_ref, acc_ref, column, plane_phases, geometry, chunk_rows, operands
        )
        targets = [out_slots[k].at[slot, phase] for k in range(results)]
        _epilogue_in_blocks(acc_ref, [*others, *targets], epilogue, sliced, sub)
        for k in range(results):
            write(k, m, phase).start()

    @pl.when(m == last)
    def _():
        for k in range(results):
            for phase in range(steps):
                write(k, m, phase).wait()

    @pl.when(jnp.logical_and(m == last, m >= 1))
    def _():
        for k in range(results):
            for phase in range(steps):
                write(k, m - 1, phase).wait()


def _transposed_volume_conv_stage(
    image,
    kernel,
    *others,
    roles,
    outputs,
    batched,
    epilogue,
    dilation,
    padding,
    operands=None,
    row_align=8,
    temporaries=2,
    chunk_pixels=4096,
    patch_bytes=4 * 2**20,
):
    """One transposed convolution stage: image (batch, channels, depth, height, width) dilated
    by `dilation` (per axis), padded by `padding` ((low, high) per axis), convolved with kernel
    (out channels, channels, taps_d, taps_h, taps_w) into (batch, out channels, out voxels),
    then `epilogue(acc, *other_refs, *out_refs, tm=, tn=)` on blocks of rows of one output
    plane. The other parameters: as conv_volume.py's `_volume_conv_stage`."""
    sublanes = 8 * max(1, 4 // jnp.dtype(image.dtype).itemsize)
    if image.shape[1] < sublanes:  # too few channels to stack the taps: zero channels fill a tile
        fill = ((0, 0), (0, sublanes - image.shape[1]), (0, 0), (0, 0), (0, 0))
        image, kernel = jnp.pad(image, fill), jnp.pad(kernel, fill)
    batch, channels, *sizes = image.shape
    rows, _, *taps = kernel.shape
    axes = [_axis_phases(*axis) for axis in zip(sizes, dilation, padding, taps)]
    (out_d, pad_d, depth_phases), (out_h, pad_h, height_phases), (out_w, pad_w, width_phases) = axes
    line = out_w * len(width_phases)
    padded_width = sizes[2] + sum(pad_w)
    # Stride 2 in height and width, an output row of 128 lanes, a whole number of them, or a
    # part of 128 (and whole 128-lane blocks per plane), and input rows that fit in one: input
    # rows laid out `line` lanes apart, so the phases interleave a vreg at a time (more MXU
    # columns, far fewer unaligned lane moves than row by row).
    aligned = (
        tuple(dilation[1:]) == (2, 2)
        and (128 % line == 0 or line % 128 == 0)
        and padded_width <= line
        and 2 * out_h * line % 128 == 0
    )
    if aligned:  # one more row: the last row's taps read past its end
        pad_h, pad_w = (pad_h[0], pad_h[1] + 1), (pad_w[0], pad_w[1] + line - padded_width)
    image = jnp.pad(image, ((0, 0), (0, 0), pad_d, pad_h, pad_w))
    _, _, planes_in, height, width = image.shape
    weights = _phase_taps(kernel, depth_phases, height_phases, width_phases)
    base = min(read for _, _, read in depth_phases)
    span = max(read + count for _, count, read in depth_phases) - base
    cols = out_h * len(height_phases) * out_w * len(width_phases)  # one output plane
    largest = max(c for _, c, _ in depth_phases) * max(c for _, c, _ in height_phases)
    largest *= max(c for _, c, _ in width_phases) * channels
    stacked, chunk_rows, span_lanes = _chunking(
        image.dtype, channels, largest, width, out_h, out_w, operands, chunk_pixels, patch_bytes
    )
    assert stacked, "channels fill whole sublane tiles once filled"
    if aligned:  # a chunk's output rows fill whole 128-lane blocks
        rows_per_block = max(1, 64 // line)
        chunk_rows = max(rows_per_block, chunk_rows // rows_per_block * rows_per_block)
        span_lanes = chunk_rows * width
    phase_count = len(depth_phases)

    def footprint(tm, sub):
        # Two buffers per pipelined block and per result's planes; the ring of input planes, a
        # plane's sum, one chunk's patch and its width phases' products, the epilogue's
        # temporaries on `sub` rows.
        blocks = _block_bytes(tm, weights.shape[1], kernel.dtype)
        blocks += sum(
            _block_bytes(*_rowwise_block(role, tm, cols)[0], array.dtype)
            for role, array in zip(roles, others)
        )
        blocks += sum(phase_count * _block_bytes(tm, cols, dtype) for _, dtype in outputs)
        chunk = _block_bytes(largest, span_lanes, image.dtype)
        products = len(width_phases) * (len(height_phases) if aligned else 1)
        chunk += (1 + products) * _block_bytes(tm, span_lanes, jnp.float32)
        work = temporaries * _block_bytes(sub, cols, jnp.float32)
        ring = (span + 1) * _block_bytes(channels, height * width, image.dtype)
        return 2 * blocks + ring + _block_bytes(tm, cols, jnp.float32) + chunk + work

    tm, sub = _fit_conv_rows(rows, _pick_block(rows, BLOCK_ROWS, row_align), row_align, footprint)
    kernel_fn = functools.partial(
        _transposed_volume_kernel,
        results=len(outputs),
        epilogue=functools.partial(epilogue, tn=cols),
        sliced=(*(role == "row" for role in roles), *(True for _ in outputs)),
        phases=tuple(
            tuple((count, read - (base if axis == 0 else 0)) for _, count, read in phases)
            for axis, phases in enumerate((depth_phases, height_phases, width_phases))
        ),
        window=(base, span),
        geometry=(width, out_h, out_w, aligned),
        chunk_rows=chunk_rows,
        operands=operands,
        sub=sub,
    )
    results = pl.pallas_call(
        kernel_fn,
        out_shape=[
            jax.ShapeDtypeStruct((batch, rows, out_d * phase_count, cols), dtype)
            for _, dtype in outputs
        ],
        grid=(batch, rows // tm, out_d),
        in_specs=_volume_in_specs(weights.shape[1], tm, roles, batched[: len(others)], cols),
        out_specs=[pl.BlockSpec(memory_space=pl.ANY) for _ in outputs],
        scratch_shapes=[
            pltpu.VMEM((tm, cols), jnp.float32),
            pltpu.VMEM((span + 1, channels, height * width), image.dtype),
            pltpu.SemaphoreType.DMA((span + 1,)),
            *(pltpu.VMEM((2, phase_count, tm, cols), dtype) for _, dtype in outputs),
            pltpu.SemaphoreType.DMA((len(outputs), 2, phase_count)),
        ],
        # Per-phase depth indices in order on one core: each step prefetches the next's plane.
        compiler_params=_compiler_params(("parallel", "parallel", "arbitrary"), footprint(tm, sub)),
    )(image.reshape(batch, channels, planes_in, height * width), weights, *others)
    results = [r.reshape(batch, rows, -1) for r in results]
    return results[0] if len(results) == 1 else results
