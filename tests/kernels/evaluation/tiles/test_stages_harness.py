"""A two-stage pipeline through the whole harness: a matmul kernel, then a row-wise softmax
kernel. A matmul wrong at production only in one block off the corners of its grid (chosen by
program ids) that the softmax's sample reads is rejected at production tiles; before the
pullback no final element was decided and it was accepted. The honest pipeline is verified at
production shapes."""

import textwrap

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import ACCEPTED, REJECTED, TILES, VERIFIED_AT_PRODUCTION
from maxkernel_tui.kernels.report.reasons import Reason

# jax worker processes, TPU compiles, sampled production tiles in interpret mode
pytestmark = pytest.mark.slow

# (M, K, N): 32 row blocks of 128 at bench, 1 and 2 below
CONFIGS = {"bench": (4096, 512, 512), "check": (128, 256, 512), "heldout": (256, 256, 512)}

_REFERENCE = """
    import jax
    import jax.numpy as jnp

    CONFIGS = {configs!r}


    def get_inputs(config="bench", seed=0):
        m, k, n = CONFIGS[config]
        key_a, key_b = jax.random.split(jax.random.key(seed))
        a = jax.random.normal(key_a, (m, k), jnp.float32)
        b = jax.random.normal(key_b, (k, n), jnp.float32) * 0.05
        return (a, b), ()


    def computation(a, b):
        return jax.nn.softmax(jnp.dot(a, b, precision="highest"), axis=-1)
    """

_YAML = """task_id: 8k_Matmul_Softmax_Stages
description: A matmul then a row-wise softmax.
input_gen_code: ""
atol: 1e-4
rtol: 1e-3
"""

_CANDIDATE = """
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    B = 128


    def _matmul_kernel(x_ref, w_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _zero():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(
            x_ref[...], w_ref[...], preferred_element_type=jnp.float32, precision="highest"
        )

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _write():
            last = pl.num_programs(0) - 1  # the softmax always samples the last rows
            wrong = (pl.program_id(0) == last) & (pl.program_id(1) == 1) & (last > 1)
            o_ref[...] = acc_ref[...] + jnp.where(wrong, {error}, 0.0)


    def _softmax_kernel(y_ref, o_ref):
        y = y_ref[...]
        e = jnp.exp(y - y.max(axis=1, keepdims=True))
        o_ref[...] = e / e.sum(axis=1, keepdims=True)


    def computation(a, b):
        m, k = a.shape
        n = b.shape[1]
        y = pl.pallas_call(
            _matmul_kernel,
            grid=(m // B, n // B, k // B),
            in_specs=[
                pl.BlockSpec((B, B), lambda i, j, d: (i, d)),
                pl.BlockSpec((B, B), lambda i, j, d: (d, j)),
            ],
            out_specs=pl.BlockSpec((B, B), lambda i, j, d: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
            scratch_shapes=[pltpu.VMEM((B, B), jnp.float32)],
        )(a, b)
        return pl.pallas_call(
            _softmax_kernel,
            grid=(m // B,),
            in_specs=[pl.BlockSpec((B, n), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((B, n), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        )(y)
    """


def test_a_pipeline_wrong_in_a_first_stage_block_the_second_reads_is_rejected(tmp_path):
    folder = tmp_path / "tasks" / "8k_Matmul_Softmax_Stages"
    folder.mkdir(parents=True)
    (folder / "kernel_task.yaml").write_text(_YAML)
    reference = textwrap.dedent(_REFERENCE.format(configs=CONFIGS)).lstrip()
    (folder / "reference.py").write_text(reference)
    task = load_task(folder)
    honest, wrong = tmp_path / "honest.py", tmp_path / "wrong.py"
    honest.write_text(textwrap.dedent(_CANDIDATE.format(error="0.0")).lstrip())
    wrong.write_text(textwrap.dedent(_CANDIDATE.format(error="1.0")).lstrip())
    options = EvalOptions(seeds=1, tile_blocks=1)
    with Harness() as harness:
        honest_report = harness.evaluate(KernelSource.read(honest), task, options)
        wrong_report = harness.evaluate(KernelSource.read(wrong), task, options)
    assert honest_report.verdict == ACCEPTED, honest_report.failure
    assert honest_report.scope == VERIFIED_AT_PRODUCTION, honest_report.evidence
    assert wrong_report.verdict == REJECTED, wrong_report.evidence
    failure = wrong_report.failure
    assert failure is not None and failure.name == TILES, wrong_report.evidence
    assert failure.reason == Reason.TILES_OUTSIDE_TOLERANCE, failure
