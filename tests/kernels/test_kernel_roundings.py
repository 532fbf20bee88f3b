"""A kernel is judged on the roundings it writes. Mosaic keeps a round trip through bf16
(`xhat.astype(bf16).astype(f32)`); XLA on the CPU, by default, drops it where it fuses
(excess precision), so 1t's RMSNorm backward summed unrounded rows in interpret mode, 364% of
its dscale tolerance off the reference at production. The judge's worker runs with excess
precision off (workers.kernel_worker_env); the reference's keep XLA's default, as XLA computes
it on a TPU. Each case runs in its own python process, as a worker does, once in the judge's
environment and once in the reference's."""

import json
import subprocess
import sys

import pytest

from maxkernel_tui.kernels.workers import EXACT_ROUNDING_FLAG, jax_worker_env, kernel_worker_env

# An RMSNorm backward's row block: dscale from the bf16-rounded rows, dx from the f32 ones.
# Prints how far the kernel's sum is from the sum of rounded rows, and from the unrounded one.
PROBE = """
import json
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

def kernel(x_ref, r_ref, dy_ref, dx_ref, dscale_ref):
    xhat = x_ref[...].astype(jnp.float32) * r_ref[...]
    dy = dy_ref[...].astype(jnp.float32)
    rounded = xhat.astype(dx_ref.dtype).astype(jnp.float32)
    dscale_ref[...] = jnp.sum(dy * rounded, axis=0, keepdims=True)
    mean = jnp.mean(dy * xhat, axis=1, keepdims=True)
    dx_ref[...] = (r_ref[...] * (dy - xhat * mean)).astype(dx_ref.dtype)

kx, kd = jax.random.split(jax.random.key(3))
x = jax.random.normal(kx, (128, 512), jnp.float32).astype(jnp.bfloat16)
dy = jax.random.normal(kd, (128, 512), jnp.float32).astype(jnp.bfloat16)
r = jax.lax.rsqrt(jnp.mean(x.astype(jnp.float32) ** 2, axis=1, keepdims=True) + 1e-5)
with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
    _, dscale = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct((128, 512), jnp.bfloat16),
        jax.ShapeDtypeStruct((1, 512), jnp.float32)))(x, r, dy)
x64, dy64 = np.asarray(x, np.float64), np.asarray(dy, np.float64)
xhat = np.asarray(x.astype(jnp.float32) * r)
rounded = np.asarray(jnp.asarray(xhat).astype(jnp.bfloat16), np.float64)
got = np.asarray(dscale, np.float64)[0]
print(json.dumps({
    "from_rounded": float(np.abs(got - (dy64 * rounded).sum(0)).max()),
    "from_unrounded": float(np.abs(got - (dy64 * xhat).sum(0)).max()),
}))
"""


def _probe(env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_kernel_in_the_judges_environment_sums_the_rows_it_rounded():
    env = kernel_worker_env()
    assert env["XLA_FLAGS"] == EXACT_ROUNDING_FLAG
    exact = _probe(env)
    assert exact["from_rounded"] < 1e-3 < exact["from_unrounded"]
    # XLA's default, the reference's workers' environment, drops the rounding: what the judge
    # would otherwise have computed
    reference_env = jax_worker_env()
    assert "XLA_FLAGS" not in reference_env
    default = _probe(reference_env)
    assert default["from_unrounded"] < 1e-3 < default["from_rounded"]
