"""The precision XLA runs a reference at as written, and the precision the task's tolerance needs
(the fair baseline): read from the reference's jaxpr and found by emulating one bf16 MXU pass,
projected to production's contraction depth. An f32 GEMM shaped like the suite's 41k (K 8192 in
production) with a loose and a tight tolerance, written in tmp_path."""

import jax
import pytest

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.matmul_rounding import (
    tolerance_precision,
    written_precision,
)
from maxkernel_tui.kernels.loader import load_task

REFERENCE = '''"""x @ W + b, all f32, shaped like 41k (a task of these tests)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"rows": 4096, "depth": 8192, "cols": 8192},
    "check": {"rows": 64, "depth": 512, "cols": 256},
    "heldout": {"rows": 40, "depth": 384, "cols": 384},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w = jax.random.split(jax.random.key(seed))
    x = jax.random.uniform(key_x, (c["rows"], c["depth"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["depth"], c["cols"]), jnp.float32) * 0.02
    return (x, weight), ()


def computation(x, weight):
    return jnp.matmul(x, weight) + 1.0
'''


def _task(folder, tolerance, reference=REFERENCE):
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(reference)
    (folder / "kernel_task.yaml").write_text(
        f"task_id: {folder.name}\ndescription: a GEMM\natol: {tolerance}\nrtol: {tolerance}\n"
    )
    return load_task(folder)


def _needed(task):
    module = runtime.load_reference(task)
    specs, static = runtime.input_specs(task, module, task.configs[0])
    jaxpr = jax.make_jaxpr(lambda *d: module.computation(*d, *static))(*specs).jaxpr
    return written_precision(jaxpr), tolerance_precision(task, module, jaxpr)


@pytest.mark.slow  # compiles the reference on every numerics configuration
def test_one_pass_where_the_tolerance_allows_it_three_where_it_does_not(tmp_path):
    written, needed = _needed(_task(tmp_path / "loose", 5e-2))
    assert (written.passes, needed and needed.passes) == (1, 1)
    written, needed = _needed(_task(tmp_path / "tight", 1e-6))
    assert (written.passes, needed and needed.passes) == (1, 3)


@pytest.mark.slow  # compiles the reference on every numerics configuration
def test_a_reference_that_asks_for_highest_is_written_at_six_passes(tmp_path):
    highest = REFERENCE.replace(
        "jnp.matmul(x, weight)", "jnp.matmul(x, weight, precision=jax.lax.Precision.HIGHEST)"
    )
    written, needed = _needed(_task(tmp_path / "tight", 1e-6, highest))
    assert (written.passes, needed and needed.passes) == (6, 6)
    written, _ = _needed(
        _task(
            tmp_path / "plain",
            1e-6,
            REFERENCE.replace("jnp.matmul(x, weight)", "x.sum() + weight[:1]"),
        )
    )
    assert written.passes == 1  # no matmul: XLA's default


def test_bf16_operands_need_one_pass_however_tight_the_tolerance(tmp_path):
    # attention in its own bf16: one pass holds the operands exactly, so no emulation is needed
    # (the task's numerics configurations are never run: none is compiled here)
    bf16 = REFERENCE.replace(
        "return jnp.matmul(x, weight) + 1.0",
        "return jnp.matmul(x.astype(jnp.bfloat16), weight.astype(jnp.bfloat16)) + 1.0",
    )
    written, needed = _needed(_task(tmp_path / "tight", 1e-9, bf16))
    assert (written.passes, needed and needed.passes) == (1, 1)


@pytest.mark.slow  # emulates the reference on every numerics configuration
def test_values_rounded_to_bf16_but_held_in_f32_are_not_taken_for_bf16_operands(tmp_path):
    mixed = REFERENCE.replace(
        "return jnp.matmul(x, weight) + 1.0",
        "return jnp.matmul(x, weight.astype(jnp.bfloat16).astype(jnp.float32)) + 1.0",
    )
    _, needed = _needed(_task(tmp_path / "mixed", 1e-9, mixed))
    assert needed is not None and needed.passes == 3
