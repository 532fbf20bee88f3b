"""The copies XLA makes around a candidate's kernels, and the model's time for them: a wrapper
that transposes, casts, pads or re-tiles its operands pays HBM traffic the kernels' own analysis
cannot see, and the copies into another layout (a transpose, a re-tiling reshape) read at the
pace measured on a v5e; views that leave the tiled layout alone are free. Kernels are traced,
never run."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from maxkernel_tui.kernels.perf.model import estimate
from maxkernel_tui.kernels.perf.outside import OutsideTraffic, outside_traffic
from maxkernel_tui.kernels.perf.pallas_analysis import analyze
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.perf.xla_model import RELAYOUT_READ_SHARES, XLA_EFFICIENCY
from maxkernel_tui.kernels.targets import TARGETS

F32 = 4


def _copy_body(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def kernel(x):
    return pl.pallas_call(_copy_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _traffic(function, *shapes, dtype=jnp.float32) -> OutsideTraffic:
    specs = [jax.ShapeDtypeStruct(s, dtype) for s in shapes]
    return outside_traffic(jax.make_jaxpr(function)(*specs))


def test_a_kernel_on_its_inputs_as_they_are_costs_nothing_outside() -> None:
    assert _traffic(kernel, (256, 512)) == OutsideTraffic()


def test_a_transpose_before_the_kernel_is_written_and_read_once() -> None:
    found = _traffic(lambda x: kernel(x.T), (256, 512))
    assert found.copies == 1 and found.bytes == 2 * 256 * 512 * F32
    assert found.largest == "transpose to f32[512,256]"
    assert found.relayout_read == found.relayout_written == 256 * 512 * F32


def test_a_cast_or_a_pad_is_a_copy_but_not_into_another_layout() -> None:
    for wrapper in (lambda x: x.astype(jnp.bfloat16), lambda x: jnp.pad(x, ((0, 8), (0, 0)))):
        found = _traffic(lambda x, w=wrapper: kernel(w(x)), (256, 512))
        assert found.copies == 1 and found.bytes > 0
        assert found.relayout_read == found.relayout_written == 0
    # a cast fused into a transpose is one copy into another layout, the cast's bytes written
    found = _traffic(lambda x: kernel(x.T.astype(jnp.bfloat16)), (256, 512))
    assert (found.relayout_read, found.relayout_written) == (256 * 512 * F32, 256 * 512 * 2)


@pytest.mark.parametrize(
    ("before", "after", "free"),
    [
        ((4, 64, 256), (256, 256), True),  # major dimensions merged: a bitcast
        ((4, 8, 16, 128), (32, 16, 128), True),  # the two minor ones untouched
        ((64, 16, 128), (64 * 16, 128), True),  # sublanes merged in whole tiles
        ((64, 12, 128), (64 * 12, 128), False),  # 12 rows: not whole tiles of 8
        ((8, 128, 128), (8, 128 * 128), False),  # NCHW pixels merged into lanes: re-tiled
        ((8, 126, 126), (8, 126 * 126), False),  # a convolution's output flattened
    ],
)
def test_a_reshape_is_free_only_where_the_tiled_layout_stays(before, after, free) -> None:
    found = _traffic(lambda x: kernel(x.reshape(after)), before)
    assert (found.copies == 0) is free
    assert (found.relayout_read == 0) is free  # a re-tiling reshape is a copy into another layout


@pytest.mark.parametrize(
    ("before", "after", "free"),
    [
        ((64, 16, 8, 128), (64, 128, 128), True),  # 6p's pages: (page, head) rows of 8: a bitcast
        ((64, 12, 128), (64 * 12, 128), False),  # 12 rows: not whole tiles, whatever the width
    ],
)
def test_narrow_types_are_tiled_by_eight_rows_in_hbm_too(before, after, free) -> None:
    # compiled with libtpu for a v5e, bf16[16384,16,8,128] is laid out T(8,128)(2,1) and the
    # built-in 6p's reshape of its pages into (16384, 128, 128) is a bitcast, not a copy
    found = _traffic(lambda x: kernel(x.reshape(after)), before, dtype=jnp.bfloat16)
    assert (found.copies == 0) is free


def test_the_result_re_tiled_after_the_kernel_is_counted_too() -> None:
    found = _traffic(lambda x: kernel(x).reshape(8, 128, 128), (8, 128 * 128))
    assert found.copies == 1 and found.bytes == 2 * 8 * 128 * 128 * F32


@pytest.mark.parametrize(
    ("written", "permutation", "free"),
    [
        ((14, 14, 128, 128), (2, 3, 0, 1), True),  # pixels-major into NCHW that would pad
        ((14, 14 * 128, 128), (2, 3, 0, 1), True),  # the same through a view first
        ((16, 16, 128, 128), (1, 0, 2, 3), False),  # a result that tiles exactly: XLA keeps it
        ((14, 14, 128, 126), (2, 3, 0, 1), False),  # the kernel's own output pads
    ],
)
def test_a_result_transposed_from_a_kernel_is_a_bitcast_where_only_xla_layout_avoids_padding(
    written, permutation, free
) -> None:
    def program(x):
        out = kernel(x)
        if out.ndim == 3:
            out = out.reshape(14, 14, 128, 128)
        return jnp.transpose(out, permutation)

    found = _traffic(program, written)
    assert (found.copies == 0) is free
    # the same transpose feeding another kernel is a copy: only a result's layout is XLA's
    feeding = _traffic(lambda x: kernel(program(x)), written)
    assert feeding.copies == 1


def test_a_kernel_wrapped_in_jit_and_a_cast_inside_the_wrapper_are_seen() -> None:
    @jax.jit
    def wrapped(x):
        return kernel(x.astype(jnp.bfloat16))

    found = _traffic(wrapped, (256, 512))
    # reads f32, writes bf16
    assert found.copies == 1 and found.bytes == 256 * 512 * (F32 + 2)


@pytest.mark.parametrize(
    ("index", "free"),
    [
        ((slice(None), slice(None), None), True),  # a unit plane axis: the minor two untouched
        ((None,), True),  # a unit axis in front
        ((slice(None), slice(None), slice(None), slice(None), None), False),  # lanes become rows
        ((slice(None), slice(None), slice(None), None), False),  # rows become whole tiles
    ],
)
def test_x_indexed_with_none_is_a_reshape_free_only_where_the_tiles_stay(index, free) -> None:
    # jnp writes x[:, :, None] as a broadcast_in_dim that adds unit axes: XLA's reshape
    found = _traffic(lambda x: kernel(x[index]), (4, 8, 16, 128))
    assert (found.copies == 0) is free
    if not free:
        assert found.largest.startswith("broadcast_in_dim")


def test_a_slice_reads_what_it_keeps_and_a_broadcast_writes_what_it_makes() -> None:
    sliced = _traffic(lambda x: kernel(x[:64]), (1024, 512))
    assert sliced.bytes == 2 * 64 * 512 * F32
    spread = _traffic(lambda b: kernel(jnp.broadcast_to(b, (256, 512))), (1, 512))
    assert spread.bytes == 256 * 512 * F32 + 512 * F32


def test_a_reduction_in_the_wrapper_reads_its_source_whole() -> None:
    found = _traffic(lambda x: kernel(jnp.sum(x, axis=0, keepdims=True)), (1024, 512))
    assert found.bytes == 1024 * 512 * F32 + 512 * F32


@pytest.mark.parametrize("generation", ["v5e", "v6e"])
def test_the_model_adds_the_copies_to_the_kernels_time_and_says_so(generation) -> None:
    spec = jax.ShapeDtypeStruct((2048, 2048), jnp.float32)
    target = TARGETS[generation]
    plain = jax.make_jaxpr(kernel)(spec)
    relaid = jax.make_jaxpr(lambda x: kernel(x.T))(spec)
    cast = jax.make_jaxpr(lambda x: kernel(x.astype(jnp.bfloat16)))(spec)
    before = estimate(analyze(plain), target, outside=outside_traffic(plain))
    after = estimate(analyze(relaid), target, outside=outside_traffic(relaid))
    cast_after = estimate(analyze(cast), target, outside=outside_traffic(cast))
    size = 2048 * 2048 * F32
    roofline_s = 2 * size / target.hbm_bandwidth / XLA_EFFICIENCY
    # a transpose reads at the share measured on a v5e; a generation not measured keeps the
    # roofline, as does a copy that keeps the layout everywhere
    share = RELAYOUT_READ_SHARES.get(generation)
    copy_s = roofline_s if share is None else size / (share * target.hbm_bandwidth)
    assert before.outside is None and before.outside_seconds is None
    assert after.outside_seconds == pytest.approx(copy_s)
    assert after.seconds == pytest.approx(before.seconds + copy_s)
    assert after.hbm_bytes == before.hbm_bytes + 2 * 2048 * 2048 * F32
    cast_s = 1.5 * size / target.hbm_bandwidth / XLA_EFFICIENCY  # f32 read, bf16 written
    assert cast_after.outside_seconds == pytest.approx(cast_s)
    summary = ProfileSummary("t", "kernel.py", "bench", analyze(relaid), [after], {}, {})
    text = summary.to_text()
    assert "outside the kernels: 0.0336 GB moved by XLA outside the kernels in 1 copy" in text


def test_an_estimate_stored_before_the_copies_were_counted_reads_back() -> None:
    spec = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    traced = jax.make_jaxpr(functools.partial(kernel))(spec)
    stored = estimate(analyze(traced), TARGETS["v5e"]).to_json()
    stored.pop("outside", None)
    stored.pop("outside_seconds", None)
    again = type(estimate(analyze(traced), TARGETS["v5e"])).from_json(stored)
    assert again.outside is None and again.outside_seconds is None


def test_a_relayout_hidden_in_control_flow_is_counted_and_a_loop_of_kernels_is_not() -> None:
    def hidden(x, flag):
        relaid = jax.lax.cond(flag > 0, lambda v: v.T, lambda v: v.T * 2, x)
        return kernel(relaid)

    specs = (jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))
    found = outside_traffic(jax.make_jaxpr(hidden)(*specs))
    assert found.copies == 1 and found.bytes >= 2 * 256 * 512 * F32

    def looped(x):
        return jax.lax.fori_loop(0, 3, lambda i, v: kernel(v), x)

    assert _traffic(looped, (256, 512)) == OutsideTraffic()
