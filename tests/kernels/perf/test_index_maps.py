"""Index maps evaluated with NumPy give XLA's block indices at every grid step, compile nothing,
and hand what they do not model back to XLA."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from maxkernel_tui.kernels.perf import index_maps
from maxkernel_tui.kernels.perf.index_maps import block_indices

GRID = (3, 4, 5)
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

MODELLED = {
    "identity": lambda i, j, k: (i, k),
    "constant": lambda i, j, k: (0, j),
    "none": lambda i, j, k: (),
    "floor division and modulo of negatives": lambda i, j, k: ((i - 3) // 2, (k - 7) % 3),
    "truncating division and remainder": lambda i, j, k: (lax.div(i - 2, 2), lax.rem(k - 3, 2)),
    "min, max and clamp": lambda i, j, k: (
        jnp.minimum(i, j),
        jnp.maximum(j, 2),
        lax.clamp(1, k, 3),
    ),
    "where on comparisons": lambda i, j, k: (jnp.where((i > j) & (k != 2), i, j * 2),),
    "power and negation": lambda i, j, k: (-(i**2) + j, abs(k - 4)),
    "int32 wraps": lambda i, j, k: (i * 2**30 + k,),
    "boolean as index": lambda i, j, k: (
        (i == j).astype(jnp.int32) + (~(k > 1)).astype(jnp.int32),
    ),
    "sign": lambda i, j, k: (jnp.sign(j - 2) + 1,),
}
NOT_MODELLED = {
    "through floats": lambda i, j, k: (jnp.floor(i / 2).astype(jnp.int32), j),
    "integer division by zero": lambda i, j, k: (lax.div(k, j),),
    "an array": lambda i, j, k: (jnp.sum(jnp.arange(4) * i),),
}


def closed(index_map):
    return jax.make_jaxpr(index_map)(*[jnp.int32(0)] * len(GRID))


def grid_points() -> np.ndarray:
    steps = int(np.prod(GRID))
    return np.stack(np.unravel_index(np.arange(steps), GRID), axis=-1).astype(np.int32)


@contextlib.contextmanager
def compiles():
    seen: list[str] = []

    def heard(event: str, duration: float, **kwargs) -> None:
        if event == COMPILE_EVENT:
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(heard)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(heard)


@pytest.mark.parametrize("name", MODELLED)
def test_numpy_gives_xlas_block_indices_without_compiling(name):
    jaxpr, points = closed(MODELLED[name]), grid_points()
    with compiles() as seen:
        found = block_indices(jaxpr, points)
    assert not seen
    expected = index_maps._with_xla(jaxpr, points)
    assert found.dtype == expected.dtype == np.int32
    assert found.shape == expected.shape == (len(points), len(jaxpr.jaxpr.outvars))
    np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize("name", NOT_MODELLED)
def test_what_numpy_does_not_model_goes_to_xla(name):
    jaxpr, points = closed(NOT_MODELLED[name]), grid_points()
    with pytest.raises(index_maps._NotPlainIntegers):
        index_maps._with_numpy(jaxpr, points)
    with compiles() as seen:
        found = block_indices(jaxpr, points)
    assert seen  # XLA evaluated it (and the listener hears compiles)
    np.testing.assert_array_equal(found, index_maps._with_xla(jaxpr, points))
