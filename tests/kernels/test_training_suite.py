"""The built-in training tasks: a group of their own beside the 50 JAXBench tasks, each asking
for the gradients of named parameters, with check, heldout and production configurations and
gradient tolerances of their own; their references run and differentiate on a CPU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maxkernel_tui.agents.builtin.training_estimate import forward_and_backward
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.description import TaskDescription
from maxkernel_tui.kernels.listing import TRAINING_GROUP, format_task, task_group
from maxkernel_tui.kernels.loader import builtin_suite_dir, builtin_task_dirs, load_tasks
from maxkernel_tui.services.tasks import is_builtin, resolve_task
from tests.support.kernels import JAXBENCH_IDS, TRAINING_IDS

GRADIENTS = {
    "1t_RMSNorm_Training": ("x", "scale"),
    "2t_GEMM_GELU_Training": ("x", "w"),
    "3t_Softmax_Cross_Entropy_Training": ("logits",),
    "4t_Causal_Flash_Attention_Training": ("query", "key", "value"),
}


def test_the_training_group_is_apart_from_the_50(training_tasks):
    assert [t.task_id for t in load_tasks(builtin_suite_dir())[0]] == JAXBENCH_IDS
    assert [t.task_id for t in training_tasks] == TRAINING_IDS
    assert builtin_task_dirs()[0] == builtin_suite_dir()
    for task in training_tasks:
        assert task.gradients == GRADIENTS[task.task_id]
        assert task.category == "training" and task_group(task) == TRAINING_GROUP
        assert set(task.configs) == {"bench", "check", "heldout"}
        # gradients are judged looser than outputs at every configuration (a yaml may give
        # one tolerance per configuration), and the description says why
        for config in task.configs:
            assert task.gradient_tolerance(config).atol >= task.tolerance(config).atol / 100
        assert "measured" in task.description
        assert is_builtin(task.folder)


def test_an_id_or_its_number_finds_a_training_task():
    assert resolve_task("2t").task_id == "2t_GEMM_GELU_Training"
    assert (
        resolve_task("4t_Causal_Flash_Attention_Training").gradients
        == GRADIENTS["4t_Causal_Flash_Attention_Training"]
    )
    assert resolve_task("12p").task_id == "12p_RMSNorm"  # the 50 are found first, as before


def test_the_listing_names_the_judged_gradients(training_tasks):
    described = TaskDescription(task_id="1t_RMSNorm_Training", error="not described here")
    text = format_task(training_tasks[0], described)
    assert "gradients judged: x, scale (forward and backward)" in text


@pytest.mark.slow  # runs the references and their gradients under jax
@pytest.mark.parametrize("config", ["check", "heldout"])
def test_references_differentiate_on_a_cpu(training_tasks, config):
    for task in training_tasks:
        module = runtime.load_reference(task)
        dynamic, static = runtime.make_inputs(task, module, config, seed=2)
        names = module.computation.__code__.co_varnames
        wanted = [names.index(name) for name in task.gradients]
        program = forward_and_backward(module.computation, static, wanted)
        shape = jax.eval_shape(lambda *d, m=module, s=static: m.computation(*d, *s), *dynamic)
        _, grads = program(*dynamic, jnp.ones(shape.shape, shape.dtype))
        for name, grad in zip(task.gradients, grads, strict=True):
            values = np.asarray(grad, np.float32)
            assert np.isfinite(values).all() and np.ptp(values) > 0, (task.task_id, name)
