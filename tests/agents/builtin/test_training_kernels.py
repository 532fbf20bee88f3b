"""The kernels the built-in agent writes for the training tasks: each generated file's forward
and jax.vjp gradients match the task's reference at check shapes (run here, in TPU interpret
mode: the file is our own), its forward and backward compile for a TPU v5e at production
shapes, and a task asking for gradients of a family without a backward piece is answered in
words, without a crash."""

from __future__ import annotations

import shutil
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.draft import plan_task
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.training_estimate import forward_and_backward
from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import (
    builtin_suite_dir,
    builtin_training_dir,
    find_task,
    load_task,
    load_tasks,
)

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode and TPU compiles: seconds to a minute each
TRAINING = load_tasks(builtin_training_dir())[0]


def _generated(task):
    plan = plan_task(task)[0]
    module = types.ModuleType("generated_training_kernel")
    exec(compile(plan.render(plan.start), "<generated>", "exec"), module.__dict__)
    return plan, module


def _grad_tolerance(task):
    """The check configuration's gradient tolerance (a yaml may give one per configuration)."""
    tolerance = task.gradient_tolerance("check")
    return tolerance.atol, tolerance.rtol


def _vjp(function, dynamic, static, wanted, seed):
    """Outputs and the gradients of `wanted` (positions) for a random cotangent."""
    shape = jax.eval_shape(lambda *d: function(*d, *static), *dynamic)
    cotangent = jax.random.normal(jax.random.key(seed), shape.shape, jnp.float32)
    program = forward_and_backward(function, static, wanted)
    return program(*dynamic, cotangent.astype(shape.dtype))


@pytest.mark.parametrize("task", TRAINING, ids=lambda t: t.task_id)
def test_generated_kernel_matches_the_references_gradients_at_check_shapes(task):
    _, module = _generated(task)
    reference = runtime.load_reference(task)
    dynamic, static = runtime.make_inputs(task, reference, "check", seed=1)
    wanted = [reference.computation.__code__.co_varnames.index(n) for n in task.gradients]
    expected, expected_grads = _vjp(reference.computation, dynamic, static, wanted, seed=7)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got, got_grads = _vjp(module.computation, dynamic, static, wanted, seed=7)
    tolerance = task.tolerance("check")
    np.testing.assert_allclose(
        np.asarray(got, np.float32),
        np.asarray(expected, np.float32),
        atol=tolerance.atol,
        rtol=tolerance.rtol,
    )
    atol, rtol = _grad_tolerance(task)
    for name, grad, reference_grad in zip(task.gradients, got_grads, expected_grads, strict=True):
        assert grad.dtype == reference_grad.dtype, name
        np.testing.assert_allclose(
            np.asarray(grad, np.float32),
            np.asarray(reference_grad, np.float32),
            atol=atol,
            rtol=rtol,
            err_msg=f"gradient of {name}",
        )


@pytest.mark.parametrize("task", TRAINING, ids=lambda t: t.task_id)
def test_generated_forward_and_backward_compile_for_tpu_at_production_shapes(task):
    _, module = _generated(task)
    reference = runtime.load_reference(task)
    specs, static = runtime.input_specs(task, reference, "bench")
    wanted = [reference.computation.__code__.co_varnames.index(n) for n in task.gradients]

    shape = jax.eval_shape(lambda *d: module.computation(*d, *static), *specs)
    program = forward_and_backward(module.computation, static, wanted)
    compiled = aot.compile_for_tpu(program, [*specs, shape], aot.target_for("v5e"))
    kernels = compiled.as_text().count("tpu_custom_call")
    assert kernels >= 2, f"forward and backward kernels expected, found {kernels}"


def test_the_agent_recognises_the_family_and_says_its_plan():
    families = {task.task_id: plan_task(task)[0].family for task in TRAINING}
    assert families == {
        "1t_RMSNorm_Training": "RMSNorm forward + backward (custom_vjp)",
        "2t_GEMM_GELU_Training": "matmul + GELU forward + backward (custom_vjp)",
        "3t_Softmax_Cross_Entropy_Training": "softmax cross-entropy forward + backward "
        "(custom_vjp)",
        "4t_Causal_Flash_Attention_Training": "flash attention forward + backward (custom_vjp)",
    }


def test_a_family_without_a_backward_piece_is_refused_in_words(tmp_path):
    folder = tmp_path / "gemm_grads"
    shutil.copytree(builtin_suite_dir() / "41k_Gemm_Add_ReLU", folder)
    meta = yaml.safe_load((folder / "kernel_task.yaml").read_text())
    task = load_task(folder)
    reference = runtime.load_reference(task)
    names = reference.computation.__code__.co_varnames[: reference.computation.__code__.co_argcount]
    meta.update(gradients=[names[0]])
    (folder / "kernel_task.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(CannotPlan, match="the built-in agent cannot write the backward"):
        plan_task(load_task(folder))


def test_the_agent_reads_the_reference_not_the_name(tmp_path):
    folder = tmp_path / "op_91c2"
    shutil.copytree(find_task("1t", TRAINING).folder, folder)
    meta = yaml.safe_load((folder / "kernel_task.yaml").read_text())
    meta.update(task_id="op_91c2", description="an operation", category="custom")
    (folder / "kernel_task.yaml").write_text(yaml.safe_dump(meta))
    assert plan_task(load_task(folder))[0].family.startswith("RMSNorm")
