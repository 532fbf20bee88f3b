"""The 3-D convolution family recognised by dataflow on folders in other styles than the
suite's: MaxKernel's adapted style (production sizes only, in a dict at module level, softplus
as jax.nn.softplus) and a task of our own (the per-channel shift first among the arguments and
the volume last, an uneven (2, 3, 3) kernel, swish and a clamp); 25k's group norm and mean in
the adapted style (jnp.var, the mean of an image) and an instance norm of our own (the volume
between its scale and filters, 4 input channels). A 3-D convolution whose epilogue reduces
across output planes runs on whole images (conv.py's piece), and is refused with the reason
when a whole image does not fit VMEM. Planning is fast; each kernel the agent writes is then
judged by the real harness (slow)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import CannotPlan, draft_kernel
from maxkernel_tui.agents.builtin.draft import plan_task
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task

FOLDERS = Path(__file__).parents[2] / "data" / "issue40" / "conv3d"
PER_PLANE = ["33k_Conv3d_Mish_Tanh", "volume_swish_clamp"]
WHOLE_VOLUME = ["25k_Conv3d_GroupNorm_Mean", "volume_instance_norm"]
NAMES = PER_PLANE + WHOLE_VOLUME


@pytest.mark.parametrize("folder", NAMES)
def test_each_folder_is_planned_as_one_3d_convolution_with_its_epilogue_fused(folder):
    plans = plan_task(load_task(FOLDERS / folder))
    assert {plan.family for plan in plans} == {"3-D convolution (implicit GEMM) + epilogue"}
    source = plans[0].render(plans[0].start)
    assert source.count("pl.pallas_call(") == 1  # the epilogue runs in the convolution's kernel
    if folder in PER_PLANE:  # one output plane a step, the planes copied in by the kernel
        assert "_volume_conv_stage(" in source and "make_async_copy" in source
    else:  # a whole image a step: its statistics span every plane
        assert "_conv_stage(" in source and "_volume_conv_stage(" not in source


REDUCING = """\
    import jax
    import jax.numpy as jnp

    CONFIGS = {
        "bench": {"n": 2, "c": 8, "k": 16, "d": 6, "h": 10, "w": 12},
        "check": {"n": 1, "c": 4, "k": 8, "d": 5, "h": 8, "w": 9},
        "heldout": {"n": 2, "c": 4, "k": 8, "d": 4, "h": 6, "w": 10},
    }


    def get_inputs(config="bench", seed=0):
        c = CONFIGS[config]
        k_x, k_w = jax.random.split(jax.random.key(seed))
        x = jax.random.normal(k_x, (c["n"], c["c"], c["d"], c["h"], c["w"]), jnp.float32)
        w = jax.random.normal(k_w, (c["k"], c["c"], 3, 3, 3), jnp.float32)
        return (x, w), ()


    def computation(x, w):
        y = jax.lax.conv_general_dilated(
            x, w, (1, 1, 1), "VALID", dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
        mean = jnp.mean(y, axis=(2, 3, 4), keepdims=True)
        return y - mean
"""


def _reducing_task(tmp_path, bench):
    folder = tmp_path / "volume_instance_centre"
    folder.mkdir()
    (folder / "reference.py").write_text(textwrap.dedent(REDUCING).replace(BENCH, bench))
    (folder / "kernel_task.yaml").write_text(
        "task_id: volume_instance_centre\ndescription: conv3d less its per-channel mean\n"
        "category: conv3d\noperation: conv3d + instance centring\natol: 0.01\nrtol: 0.01\n"
    )
    return load_task(folder)


BENCH = '"bench": {"n": 2, "c": 8, "k": 16, "d": 6, "h": 10, "w": 12}'


def test_an_epilogue_reducing_over_every_voxel_of_a_channel_runs_on_whole_images(tmp_path):
    (plan, *_) = plan_task(_reducing_task(tmp_path, BENCH))
    source = plan.render(plan.start)
    assert "_conv_stage(" in source and "_volume_conv_stage(" not in source


def test_a_whole_image_over_the_vmem_budget_is_refused_with_the_reason(tmp_path):
    # 8 channels of 62 x 126 x 126 voxels: 31 MiB of f32 sum, 126 MiB with its temporaries
    large = '"bench": {"n": 2, "c": 8, "k": 16, "d": 64, "h": 128, "w": 128}'
    with pytest.raises(CannotPlan, match=r"needs a whole image in VMEM: .* over 48 MiB"):
        plan_task(_reducing_task(tmp_path, large))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
@pytest.mark.parametrize(
    "folder",
    # the adapted 33k and 25k evaluate at their production sizes for minutes: `-m coverage`
    [
        pytest.param(name, marks=pytest.mark.coverage) if name.startswith(("33k", "25k")) else name
        for name in NAMES
    ],
)
def test_each_folder_kernel_is_accepted_by_the_harness(folder, tmp_path):
    task = load_task(FOLDERS / folder)
    draft = draft_kernel(task, tune=False)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(draft.source)
    with Harness() as harness:
        report = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=1))
    assert report.verdict == "accepted", report.failure
