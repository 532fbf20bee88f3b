"""The built-in suite: all 50 JaxBench tasks, runnable on a CPU, compiled for TPU."""

import math

import jax
import numpy as np
import pytest

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.suite_sync import main as suite_sync_main
from tests.support.kernels import JAXBENCH_IDS

CATEGORIES = {"attention", "gemm", "moe", "norm", "loss", "ssm", "triangle", "kb-gemm", "kb-conv"}

# Production facts from the JaxBench task list: (inputs, static args, output).
PRODUCTION_FACTS = {
    "1p_Flash_Attention": (
        [((4, 64, 4096, 128), "bfloat16")] * 3,
        [],
        ((4, 64, 4096, 128), "bfloat16"),
    ),
    "7p_Ragged_Paged_Attention": (
        [
            ((4096, 64, 128), "bfloat16"),
            ((16384, 16, 16, 128), "bfloat16"),
            ((64,), "int32"),
            ((64, 256), "int32"),
            ((65,), "int32"),
            ((1,), "int32"),
        ],
        [128, 4096],
        ((4096, 64, 128), "bfloat16"),
    ),
    "8p_GEMM": (
        [((8192, 8192), "bfloat16"), ((8192, 28672), "bfloat16")],
        [],
        ((8192, 28672), "bfloat16"),
    ),
    "10p_Sparse_MoE": (
        [
            ((2, 4096, 4096), "bfloat16"),
            ((4096, 8), "bfloat16"),
            ((8, 4096, 14336), "bfloat16"),
            ((8, 4096, 14336), "bfloat16"),
            ((8, 14336, 4096), "bfloat16"),
        ],
        [2],
        ((2, 4096, 4096), "float32"),
    ),
    "13p_Cross_Entropy": (
        [((8192, 4096), "bfloat16"), ((4096, 128256), "bfloat16"), ((8192,), "int32")],
        [],
        ((), "float32"),
    ),
    "16p_Mamba2_SSD": (
        [((4, 64, 4096, 64), "bfloat16")] * 3 + [((4, 64, 4096), "float32")],
        [],
        ((4, 64, 4096, 64), "bfloat16"),
    ),
    "28k_ConvTranspose3d_LayerNorm_GELU_Scaling": (
        [
            ((32, 32, 16, 32, 32), "float32"),
            ((32, 64, 4, 4, 4), "float32"),
            ((64,), "float32"),
            ((64,), "float32"),
            ((64,), "float32"),
        ],
        [2, 1, 4, 1e-5, 1.0],
        ((32, 64, 32, 64, 64), "float32"),
    ),
    "40k_Gemm_GroupNorm_Min_BiasAdd": (None, None, ((1, 8192, 4096, 1), "float32")),
}


def test_suite_holds_exactly_the_50_jaxbench_tasks(suite_tasks):
    assert [t.task_id for t in suite_tasks] == JAXBENCH_IDS
    for task in suite_tasks:
        assert task.folder.name == task.task_id
        assert task.named_configs and set(task.configs) == {"bench", "check", "heldout"}
        assert task.category in CATEGORIES, task.task_id
        assert task.operation and task.description
        assert task.agent_visible_configs() == tuple(c for c in task.configs if c != "heldout")


@pytest.mark.slow  # runs all 50 references under jax
@pytest.mark.parametrize("task_id", JAXBENCH_IDS)
def test_reference_runs_on_check_and_matches_its_traced_shapes(suite_tasks, task_id):
    task = next(t for t in suite_tasks if t.task_id == task_id)
    module = runtime.load_reference(task)
    expected = jax.tree.leaves(runtime.output_specs(task, module, "check"))
    _, _, output = runtime.run_reference(task, module, "check", seed=1)
    leaves = jax.tree.leaves(output)
    assert [(o.shape, o.dtype) for o in leaves] == [(e.shape, e.dtype) for e in expected]
    for leaf in leaves:
        values = np.asarray(leaf, np.float32)
        assert np.isfinite(values).all(), f"{task_id}: non-finite reference output on check"
        assert values.size == 0 or np.ptp(values) > 0 or values.size == 1, (
            f"{task_id}: constant output"
        )


@pytest.mark.slow  # suite_descriptions: 50 tasks described in workers
def test_heldout_shapes_are_not_a_multiple_of_check(suite_descriptions):
    for task_id, description in suite_descriptions.items():
        check = description.configs["check"].inputs
        heldout = description.configs["heldout"].inputs
        ratios = [h / c for hs, cs in zip(heldout, check) for h, c in zip(hs.shape, cs.shape)]
        assert any(not float(r).is_integer() for r in ratios), (
            f"{task_id}: heldout is a multiple of check"
        )


@pytest.mark.slow  # suite_descriptions: 50 tasks described in workers
def test_production_shapes_come_from_eval_shape(suite_descriptions):
    for task_id, (inputs, static, output) in PRODUCTION_FACTS.items():
        bench = suite_descriptions[task_id].configs["bench"]
        if inputs is not None:
            assert [(tuple(s.shape), s.dtype) for s in bench.inputs] == inputs, task_id
            assert bench.static == static, task_id
        assert [(tuple(s.shape), s.dtype) for s in bench.outputs] == [output], task_id


def test_production_inputs_are_traced_not_allocated(suite_tasks):
    task = next(t for t in suite_tasks if t.task_id == "10p_Sparse_MoE")  # ~3 GB of weights
    specs, static = runtime.input_specs(task, runtime.load_reference(task), "bench")
    assert all(isinstance(s, jax.ShapeDtypeStruct) for s in specs)
    assert sum(math.prod(s.shape) * s.dtype.itemsize for s in specs) > 2.5e9 and static == (2,)


@pytest.mark.slow
def test_every_reference_compiles_ahead_of_time_for_tpu(suite_descriptions):
    for task_id, description in suite_descriptions.items():
        cost = description.cost
        assert cost.error is None, f"{task_id}: {cost.error}"
        assert cost.flops > 0 and cost.bytes_accessed > 0, task_id
        if cost.target != "v5e":  # only because v5e's HBM is too small, and the listing says so
            assert cost.did_not_fit[0].target == "v5e", task_id
            assert "HBM" in cost.did_not_fit[0].reason, task_id


@pytest.mark.slow  # suite_descriptions: 50 tasks described in workers
def test_gemm_cost_matches_the_formula(suite_descriptions):
    cost = suite_descriptions["8p_GEMM"].cost
    assert cost.target == "v5e"
    assert cost.flops == pytest.approx(2 * 8192 * 8192 * 28672, rel=0.01)
    assert cost.bytes_accessed == pytest.approx(2 * (8192 * 8192 + 2 * 8192 * 28672), rel=0.01)


def test_yaml_input_gen_code_is_generated_from_reference(capsys):
    assert suite_sync_main(["--check"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize(
    "task_id",
    ["7p_Ragged_Paged_Attention", "12p_RMSNorm", "28k_ConvTranspose3d_LayerNorm_GELU_Scaling"],
)
def test_yaml_get_inputs_gives_the_production_inputs(suite_tasks, task_id):
    import dataclasses

    task = next(t for t in suite_tasks if t.task_id == task_id)
    from_yaml = dataclasses.replace(task, inputs_from_yaml=True)
    module = runtime.load_reference(task)
    assert runtime.input_specs(from_yaml, module, "bench") == runtime.input_specs(
        task, module, "bench"
    )
