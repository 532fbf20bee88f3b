"""Whether a recogniser's reading of the reference reproduces it: the reading, written in plain
jnp from what the recogniser found in the jaxpr, run beside the reference at check shapes and
compared within the task's tolerance. A recogniser writes a kernel only for a reading that
passes. Imports jax: this runs in the agent's worker process.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.task import Task


def reproduces_reference(reading: Callable[..., jax.Array], task: Task) -> bool:
    """`reading` of the reference's dynamic arguments matches its single-array result at check
    shapes (the first configuration when there is no check one)."""
    config = CHECK if CHECK in task.configs else task.configs[0]
    module = runtime.load_reference(task)
    dynamic, static = runtime.make_inputs(task, module, config, seed=0)
    expected = runtime.jitted_reference(module, len(dynamic), len(static))(*dynamic, *static)
    if not isinstance(expected, jax.Array):
        return False
    try:
        got = jax.jit(reading)(*dynamic)
    except (ValueError, TypeError):  # a reading whose shapes do not even line up
        return False
    tolerance = task.tolerance(config)
    return got.shape == expected.shape and bool(
        jnp.allclose(
            got.astype(jnp.float32),
            expected.astype(jnp.float32),
            atol=tolerance.atol,
            rtol=tolerance.rtol,
        )
    )
