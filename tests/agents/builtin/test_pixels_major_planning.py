"""A plain 2-D convolution is written pixels-major (pixels_major.py, pieces/conv_pixels.py)
where its epilogue is element-wise on per-channel values and scalars, nothing reads its output
again and its images fill the lanes: written in three styles (KernelBench's bias, ReLU and
bias; explicit dimension numbers with a GELU and a (1, C, 1, 1) bias; a rectangular kernel with
a clip), each accepted by the real harness; refused, each by its own guard, for an instance
norm, a per-image scale, a residual tile, a broadcast spelled with a block's shape, a batch
norm reading the output again and a batch that leaves lanes empty. The NCHW plan stays a
candidate and the model chooses."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin.draft import plan_task
from maxkernel_tui.agents.builtin.pixels_major import PixelsMajorConvStage
from maxkernel_tui.agents.builtin.planner import plan_program
from maxkernel_tui.agents.builtin.program import Probe, trace_program
from maxkernel_tui.agents.builtin.stages import ConvStage
from maxkernel_tui.kernels.loader import load_task
from tests.support.judged import judged_draft
from tests.support.task_folders import write_plain_source


def _inputs(
    batch: int,
    channels: int = 16,
    out: int = 32,
    taps: tuple[int, int] = (3, 3),
    fifth: str = "",
) -> str:
    more = f", jax.random.normal(k4, {fifth}, dtype=dtype)]" if fifth else "]"
    return f"""
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.float32):
        n, c, o = {batch}, {channels}, {out}
        k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
        x = jax.random.uniform(k1, (n, c, 10, 12), dtype=dtype)
        w = jax.random.normal(k2, (o, c, {taps[0]}, {taps[1]}), dtype=dtype) * 0.1
        b = jax.random.normal(k3, (o,), dtype=dtype) * 0.1
        extra = jax.random.normal(k4, (o, 1, 1), dtype=dtype) * 0.1
        return [x, w, b, extra{more}, []

"""


WRITTEN = {
    # KernelBench's 18k: conv, its bias, ReLU, then a (C, 1, 1) bias
    "bias_relu_bias": (
        _inputs(128),
        """
    def computation(x, w, b, extra):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")
        y = jnp.maximum(y + b[None, :, None, None], 0.0)
        return y + extra
    """,
    ),
    # explicit dimension numbers, a GELU, a scalar and a (1, C, 1, 1) bias
    "dimension_numbers_gelu": (
        _inputs(128, channels=8, out=16),
        """
    def computation(x, w, b, extra):
        y = jax.lax.conv_general_dilated(
            x, w, window_strides=(1, 1), padding="VALID",
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )
        return jax.nn.gelu(y * 0.5 + b.reshape(1, -1, 1, 1)) - extra[None]
    """,
    ),
    # a rectangular kernel, a clip and a bias broadcast by reshape
    "rectangular_clip": (
        _inputs(256, channels=3, out=8, taps=(3, 5)),
        """
    def computation(x, w, b, extra):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID") + b.reshape(-1, 1, 1)
        return jnp.clip(y, -1.0, 1.0) * extra
    """,
    ),
}
KEPT_NCHW = {
    # statistics over each image's pixels: a reduction in the epilogue
    "instance_norm": (
        _inputs(128),
        """
    def computation(x, w, b, extra):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID") + b[None, :, None, None]
        m = y.mean(axis=(2, 3), keepdims=True)
        return (y - m) * extra
    """,
    ),
    # one value per image and channel: no place in (pixels * batch, channels) chunks
    "per_image_scale": (
        _inputs(128, fifth="(n, o, 1, 1)"),
        """
    def computation(x, w, b, extra, s):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")
        return y * s + extra
    """,
    ),
    # a tile of the output's shape read from HBM (NCHW: XLA would copy it)
    "residual_tile": (
        _inputs(128, fifth="(n, o, 8, 10)"),
        """
    def computation(x, w, b, extra, r):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")
        return y + jnp.tanh(r + b[None, :, None, None])
    """,
    ),
    # a batch norm: a later stage reads the convolution's output again
    "read_again": (
        _inputs(128),
        """
    def computation(x, w, b, extra):
        y = jnp.maximum(jax.lax.conv_general_dilated(x, w, (1, 1), "VALID"), 0.0)
        mean = y.mean(axis=(0, 2, 3), keepdims=True)
        return (y - mean) * extra
    """,
    ),
    # a broadcast the epilogue spells with a block's shape, which is NCHW-oriented
    "broadcast_to_tile": (
        _inputs(128),
        """
    def computation(x, w, b, extra):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")
        return y * jnp.broadcast_to(b.reshape(1, -1, 1, 1), y.shape)
    """,
    ),
    # eight images: the (channels, batch) tiles would be mostly empty lanes
    "small_batch": (_inputs(8), WRITTEN["bias_relu_bias"][1]),
}


def _folder(root: Path, style: str) -> Path:
    inputs, computation = {**WRITTEN, **KEPT_NCHW}[style]
    return write_plain_source(root, f"conv_{style}", 1e-2, inputs + computation)


def _conv_stage(root: Path, style: str) -> ConvStage:
    plan = plan_program(trace_program(load_task(_folder(root, style)), Probe.EVERY))
    (stage,) = [s for s in plan.stages if isinstance(s, ConvStage)]
    return stage


@pytest.mark.parametrize("style", list(WRITTEN))
def test_an_element_wise_epilogue_on_channels_is_written_pixels_major(tmp_path, style):
    stage = _conv_stage(tmp_path, style)
    assert isinstance(stage, PixelsMajorConvStage)
    assert stage.family == "convolution written pixels-major + element-wise epilogue"


@pytest.mark.parametrize("style", list(KEPT_NCHW))
def test_the_convolution_stays_nchw_where_its_pixels_are_needed_so(tmp_path, style):
    assert type(_conv_stage(tmp_path, style)) is ConvStage


def test_the_nchw_plan_stays_a_candidate_and_the_file_calls_the_pixels_major_piece(tmp_path):
    plans = plan_task(load_task(_folder(tmp_path, "bias_relu_bias")))
    assert [p.family for p in plans] == [
        "convolution written pixels-major + element-wise epilogue",
        "convolution (implicit GEMM) + epilogue",
    ]
    source = plans[0].render(plans[0].start)
    assert "stage1_out = _pixels_major_conv_stage(x, w, " in source
    assert "batched=" not in source.split("def computation")[1]  # per channel, never per image


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
@pytest.mark.parametrize("style", list(WRITTEN))
def test_each_style_is_accepted_by_the_harness(harness, tmp_path, style):
    report = judged_draft(
        harness,
        load_task(_folder(tmp_path, style)),
        tmp_path,
        must_contain="_pixels_major_conv_stage(x, w, ",
    )
    assert report.verdict == "accepted", report.failure
