"""Copies of MaxKernel's and JAXBench's own task folders through the real workers: an expert with
fixed tiles is judged on derived sizes its tiles divide, a tiling that misses production is
still rejected, and derived configurations that a broadcast ties across sizes validate."""

import pytest

from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import ACCEPTED, REJECTED
from tests.support.maxkernel_dataset import write_jaxbench_tiled_gemm, write_maxkernel

# jax worker processes, TPU compiles and interpret-mode runs: about a minute
pytestmark = pytest.mark.slow


def test_a_jaxbench_expert_with_fixed_tiles_is_accepted_and_a_tiling_that_misses_is_not(
    tmp_path,
):
    expert = load_task(
        write_jaxbench_tiled_gemm(tmp_path / "a", (1024, 4096, 2048), (256, 512, 512))
    )
    # 384-row tiles leave rows 768 to 1023 of production unwritten
    missing = load_task(
        write_jaxbench_tiled_gemm(tmp_path / "b", (1024, 4096, 2048), (384, 512, 512))
    )
    with Harness() as harness:
        accepted = harness.evaluate(
            KernelSource.read(expert.expert_path), expert, EvalOptions(seeds=1)
        )
        rejected = harness.evaluate(
            KernelSource.read(missing.expert_path), missing, EvalOptions(seeds=1)
        )
    assert accepted.verdict == ACCEPTED, accepted.failure
    assert any("numerics: check, derived: M=1024 K=2048 N=2048" in x for x in accepted.inputs)
    assert rejected.verdict == REJECTED


def test_a_broadcast_across_sizes_of_different_values_stays_whole_when_derived(tmp_path):
    """28k: LayerNorm weights of out_channels (64) broadcast over the last axis of the
    transposed conv's output (2 x W = 64); the static plan halved W with the other sizes of 32
    and kept out_channels: 'Incompatible shapes for broadcasting: (32, 64, 16, 32, 32), (64,)'."""
    task = load_task(
        write_maxkernel(tmp_path / "tasks", "28k_ConvTranspose3d_LayerNorm_GELU_Scaling")
    )
    described = describe_tasks([task], tmp_path / "cache", with_cost=False, workers=1)
    description = described[task.task_id]
    assert description.error is None, description.error
    assert list(description.configs) == ["bench", CHECK, HELDOUT]
    assert description.configs[CHECK].reference_seconds is not None  # it ran
    for config in (CHECK, HELDOUT):
        output = description.configs[config].outputs[0].shape
        assert output[1] == output[-1], (config, output)  # out_channels = 2 x W


def test_gqa_and_groupnorm_copies_validate_their_derived_configurations(tmp_path):
    """2p's check was 4 x 128 x 2048^2 logits (its describe worker died), 40k kept production
    only: both now run their reference on check in the describe worker."""
    ids = ("2p_GQA_Attention", "40k_Gemm_GroupNorm_Min_BiasAdd")
    tasks = [load_task(write_maxkernel(tmp_path / "tasks", task_id)) for task_id in ids]
    described = describe_tasks(tasks, tmp_path / "cache", with_cost=False, workers=2)
    for task in tasks:
        description = described[task.task_id]
        assert description.error is None, description.error
        assert list(description.configs) == ["bench", CHECK, HELDOUT]
        assert description.configs[CHECK].reference_seconds is not None
        assert description.configs[HELDOUT].inputs != description.configs[CHECK].inputs


@pytest.mark.heavy  # an expert evaluation at 8192^3: 25 s to 2 min here, by load
def test_a_jaxbench_expert_with_fixed_tiles_is_accepted_at_a_large_production(tmp_path):
    """M = K = N = 8192: `M, K, N = CONFIG['M'], ...` read as a shape halved every size to 128
    until none could move: nothing was derived, numerics ran at production on the fixed inputs
    alone (at N = 28672, check 128^3 left its outputs NaN). Now 2048^3, fresh seeds."""
    task = load_task(write_jaxbench_tiled_gemm(tmp_path, (8192, 8192, 8192), (256, 512, 512)))
    with Harness() as harness:
        report = harness.evaluate(KernelSource.read(task.expert_path), task, EvalOptions(seeds=1))
    assert report.verdict == ACCEPTED, report.failure
    assert any("numerics: check, derived: M=2048 K=2048 N=2048" in x for x in report.inputs)
