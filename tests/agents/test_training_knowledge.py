"""What the LLM roles learn about training kernels: a task that judges gradients says so in the
harness rules of every role's prompt and adds the knowledge pack's `training` topic; the topic's
complete example is a custom_vjp whose forward and backward kernels match jax.vjp of plain jnp
in TPU interpret mode and compile for a TPU v5e."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.roles.prompts import build_request
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.kernels import aot
from tests.support.knowledge_pack import examples


def _context(gradients):
    return StepContext(task_dir="/nowhere", target="v5e", gradients=gradients)


@pytest.mark.parametrize("role", [Role.PLANNER, Role.IMPLEMENTER, Role.DEBUGGER])
def test_a_task_judging_gradients_asks_every_role_for_a_pallas_backward(role):
    trained = build_request(role, _context(("x", "scale"))).system
    assert "gradients of x, scale" in trained and "jax.custom_vjp" in trained
    assert "<!-- knowledge: training -->" in trained
    forward = build_request(role, _context(())).system
    assert "custom_vjp" not in forward and "<!-- knowledge: training -->" not in forward


def test_the_gradients_travel_with_the_request_to_the_builtin_agent():
    data = _context(("query", "key")).to_request(Role.IMPLEMENTER)
    assert StepContext.from_request(data).gradients == ("query", "key")


@pytest.mark.slow  # interpret mode and a TPU compile
def test_the_example_is_differentiable_through_its_own_kernels():
    module = types.ModuleType("silu_training")
    exec(compile(examples()["silu_training"], "<silu_training>", "exec"), module.__dict__)
    x = jax.random.normal(jax.random.key(0), (512, 256), jnp.float32)
    cotangent = jax.random.normal(jax.random.key(1), x.shape, jnp.float32)
    interpret = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
    with pltpu.force_tpu_interpret_mode(interpret):
        out, pullback = jax.vjp(module.computation, x)
        (grad,) = pullback(cotangent)
    expected, expected_pullback = jax.vjp(jax.nn.silu, x)
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(grad, expected_pullback(cotangent)[0], atol=1e-5, rtol=1e-5)

    def forward_and_backward(x, cotangent):
        out, pullback = jax.vjp(module.computation, x)
        return out, pullback(cotangent)

    spec = jax.ShapeDtypeStruct(x.shape, jnp.bfloat16)
    compiled = aot.compile_for_tpu(forward_and_backward, [spec, spec], aot.target_for("v5e"))
    assert compiled.as_text().count("tpu_custom_call") >= 2  # the forward's and the backward's
