"""The reference at production shapes is computed whole only where its largest value fits in the
memory there is (evaluation/reference/worker.py): unchecked, attention's score matrix had the
machine's OOM killer end the reference process (1p: 33 GiB). In-process jax, tracing only."""

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.kernels.evaluation.reference import worker as reference_worker
from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory

MIB = 2**20


def _attention(q, k, v):
    scores = jnp.einsum("bqd,bkd->bqk", q, k)  # the largest value: batch x seq x seq floats
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, axis=-1), v)


def test_a_reference_whose_largest_value_does_not_fit_is_refused_with_its_size(monkeypatch):
    spec = jax.ShapeDtypeStruct((8, 2048, 64), jnp.float32)  # scores: 8 x 2048 x 2048 x 4 B
    traced = jax.make_jaxpr(jax.jit(_attention))(spec, spec, spec)  # inside a call, as usual
    inputs = [np.zeros((1, 1), np.float32)]
    assert reference_worker._largest_value(traced.jaxpr)[0] == 128 * MIB
    monkeypatch.setattr(tiles_memory, "memory_room", lambda: 200 * MIB)
    problem = reference_worker._memory_problem(traced, inputs[0].nbytes) or ""
    assert "needs about 0.3 GiB" in problem and "float32[8, 2048, 2048]" in problem
    monkeypatch.setattr(tiles_memory, "memory_room", lambda: 300 * MIB)
    assert reference_worker._memory_problem(traced, inputs[0].nbytes) is None
