"""The built-in agent's operand precision per matmul: bf16 operands where the task's tolerance
allows them, three bf16 passes or six (HIGHEST) where it does not, said with the reason, and the
speedup compared with XLA at the same number of MXU passes. The tasks are written here, in
tmp_path: an f32 GEMM + bias + ReLU shaped like the suite's 41k at bench shapes, with loose to
tight tolerances, and production as deep as 41k's (K 8192) or as shallow as the check shapes."""

import pytest

from maxkernel_tui.agents.builtin.autotune import estimate_source
from maxkernel_tui.agents.builtin.draft import plan_task
from maxkernel_tui.agents.builtin.operand_precision import operand_words
from maxkernel_tui.agents.builtin.precision import bf16_share, choose_precisions
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from tests.support.f32_gemm_task import gemm_relu_reference, write_task


@pytest.mark.slow
def test_bf16_operands_where_the_tolerance_allows_three_passes_or_six_where_it_does_not(tmp_path):
    loose, tight = write_task(tmp_path / "loose", 5e-2), write_task(tmp_path / "tight", 1e-4)

    cheap = choose_precisions(loose, 1, [False])
    assert cheap.per_matmul == ("bf16",) and cheap.xla.passes == 1
    assert "check, heldout" in cheap.why and "stay within" in cheap.why
    assert "at production's contraction depth (K 8192, 33,554,432 outputs)" in cheap.why
    exact = choose_precisions(tight, 1, [False])
    assert exact.per_matmul == ("bf16x3",) and exact.xla.passes == 3
    assert "leave the task's tolerance" in exact.why and "outside tolerance" in exact.why
    # tighter than three bf16 passes reach (they drop the low parts' product): f32 at HIGHEST
    tightest = choose_precisions(write_task(tmp_path / "tightest", 1e-6), 1, [False])
    assert tightest.per_matmul == ("highest",) and tightest.xla.passes == 6
    assert "with three bf16 passes" in tightest.why, tightest.why

    # The kernel says so and casts its blocks; at 41k's bench shapes and 1024-wide blocks the
    # model puts it level with XLA's one bf16 pass (the issue asks for >= 0.9x).
    (plan,) = plan_task(loose, choose_precision=True)
    source = plan.render(Tunables(1024, 1024, 1024))
    assert ".astype(jnp.bfloat16)" in source and "Matmul operands: bf16." in source
    rows, depth, cols = 4096, 8192, 8192
    xla = ReferenceCost(2.0 * rows * depth * cols, 4.0 * (rows * depth + depth * cols))
    found = estimate_source(source, loose, reference_cost=xla, tolerance_precision=cheap.xla)
    assert found.speedup is not None and found.speedup >= 0.9
    assert "default precision" in found.reference_precision


SHALLOW = gemm_relu_reference({"rows": 4096, "depth": 512, "cols": 8192})


@pytest.mark.slow
def test_bf16_operands_that_pass_the_small_shapes_keep_f32_where_production_s_depth_would_not(
    tmp_path,
):
    """41k's own case: 1e-2 holds at K 512 with bf16 operands (about 25% of it) and not at
    production's K 8192 (measured there at 111%); with production as shallow as the check
    shapes the same tolerance keeps bf16."""
    deep = choose_precisions(write_task(tmp_path / "deep", 1e-2), 1, [False])
    assert deep.per_matmul == ("bf16x3",)
    assert "projected to" in deep.why and "at production's K 8192" in deep.why
    assert "outside tolerance" not in deep.why  # every small shape passed with bf16
    shallow = choose_precisions(write_task(tmp_path / "shallow", 1e-2, SHALLOW), 1, [False])
    assert shallow.per_matmul == ("bf16",), shallow.why
    assert "(K 512, 33,554,432 outputs)" in shallow.why


CONV_REFERENCE = '''"""relu(conv3x3(x, W) + b), f32 NCHW x OIHW (a task of the precision tests)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 16, "channels": 16, "out_channels": 64, "size": 128},
    "check": {"batch": 2, "channels": 16, "out_channels": 64, "size": 16},
    "heldout": {"batch": 3, "channels": 16, "out_channels": 32, "size": 24},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(key_x, (c["batch"], c["channels"], c["size"], c["size"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["out_channels"], c["channels"], 3, 3), jnp.float32) * 0.1
    bias = jax.random.normal(key_b, (c["out_channels"],), jnp.float32) * 0.1
    return (x, weight, bias), ()


def computation(x, weight, bias):
    y = jax.lax.conv_general_dilated(
        x, weight, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jax.nn.relu(y + bias[None, :, None, None])
'''


@pytest.mark.slow  # the reference on every numerics shape, for two tolerances: ~25 s here
def test_a_convolution_gets_bf16_taps_where_the_tolerance_allows_and_f32_where_not(tmp_path):
    for name, tolerance, chosen, passes in (
        ("loose", 1e-2, "bf16", 1),
        ("tight", 1e-4, "bf16x3", 3),
        ("tightest", 1e-6, "highest", 6),
    ):
        task = write_task(tmp_path / name, tolerance, CONV_REFERENCE)
        (plan,) = plan_task(task, choose_precision=True)
        assert plan.family == "convolution (implicit GEMM) + epilogue"
        assert plan.precision is not None and plan.precision.per_matmul == (chosen,), name
        assert plan.precision.xla.passes == passes  # XLA's convolution at the same passes
        source = plan.render(plan.start)
        # the conv module carries both branches; the call says which one runs
        assert f"operands={chosen!r}" in source
        assert f"Matmul operands: {operand_words((chosen,))}." in source


def test_the_measured_bf16_share_grows_with_the_contraction_depth_it_is_measured_at(tmp_path):
    # a plain GEMM's error grows with its depth, its tolerance does not: measured at a depth of
    # 2048 it must use more of the tolerance than at check's 512; against a tolerance of 1e-6
    # the same rounding uses it many times over, so what is measured is the rounding
    task = write_task(tmp_path / "gemm", 5e-2)
    shallow = bf16_share(task, "bench", {"rows": 64, "depth": 512, "cols": 256}, matmuls=1)
    deep = bf16_share(task, "bench", {"rows": 64, "depth": 2048, "cols": 256}, matmuls=1)
    assert 0 < shallow < deep < 1
    tight = write_task(tmp_path / "tight", 1e-6)
    assert bf16_share(tight, "bench", {"rows": 64, "depth": 512, "cols": 256}, matmuls=1) > 10


BF16_HIGHEST = """\
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"m": 512, "k": 1024, "n": 768},
    "check": {"m": 128, "k": 256, "n": 384},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    k_a, k_b = jax.random.split(jax.random.key(seed))
    a = jax.random.normal(k_a, (c["m"], c["k"]), jnp.bfloat16)
    b = jax.random.normal(k_b, (c["k"], c["n"]), jnp.bfloat16)
    return (a, b), ()


def computation(a, b):
    return jnp.maximum(jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST), 0)
"""


def test_bf16_operands_are_not_asked_for_highest_even_where_the_reference_asks(tmp_path):
    """A product of bf16 values is exact in one pass, and Mosaic refuses bf16 operands at
    Precision.HIGHEST: the kernel keeps the default where the reference's operands are bf16."""
    folder = tmp_path / "bf16_highest"
    folder.mkdir()
    (folder / "reference.py").write_text(BF16_HIGHEST)
    (folder / "kernel_task.yaml").write_text(
        "task_id: bf16_highest\ndescription: bf16 GEMM at HIGHEST + ReLU\ncategory: gemm\n"
        "operation: matmul + relu\natol: 0.05\nrtol: 0.05\n"
    )
    (plan, *_) = plan_task(load_task(folder))
    source = plan.render(plan.start)
    assert "_matmul_stage(" in source and "operands='highest'" not in source
