"""Training candidates that must be rejected, made from the built-in agent's own kernels: a
causal flash attention whose dk/dv kernel drops the rowsum(dO * O) term from dS (forward, dq
and dv right, dk wrong), and an RMSNorm whose forward is a Pallas kernel but whose backward is
plain jnp (XLA does the backward's work). For the evaluation's gradient checks."""

from __future__ import annotations

from maxkernel_tui.agents.builtin.draft import plan_task
from maxkernel_tui.kernels.loader import builtin_training_dir, find_task, load_tasks

_DK_TERM = "p, ds = _backward_block(refs, d_ref[...], qi, kj, masked, **blocks)"
_DK_DROPPED = "p, ds = _backward_block(refs, 0.0, qi, kj, masked, **blocks)  # D dropped: dk wrong"
_PALLAS_BACKWARD = """        dx, dscale = _rms_backward(
            x.reshape(-1, hidden), scale.reshape(1, hidden), r, dy.reshape(-1, hidden)
        )"""
_XLA_BACKWARD = """        def plain(x, scale):  # the backward's work done by XLA, not by a kernel
            x32 = x.astype(jnp.float32)
            normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
            rounded = normed.astype(x.dtype).astype(jnp.float32)
            return (rounded * scale.astype(jnp.float32)).astype(x.dtype)

        dx, dscale = jax.vjp(plain, x, scale)[1](dy)"""


def builtin_training_source(task_id: str) -> str:
    """The built-in agent's kernel file for a training task, at its pieces' default blocks."""
    plan = plan_task(find_task(task_id, load_tasks(builtin_training_dir())[0]))[0]
    return plan.render(plan.start)


def wrong_dk_source() -> str:
    """4t's kernel with one term dropped from dS in the dk/dv kernel only."""
    source = builtin_training_source("4t")
    dkv = source.index("def _flash_dkv_kernel")
    assert source.count(_DK_TERM, dkv) == 1, "the dk/dv kernel changed: update this cheat"
    return source[:dkv] + source[dkv:].replace(_DK_TERM, _DK_DROPPED)


def xla_backward_source() -> str:
    """1t's kernel with its backward done by jax.vjp of plain jnp around the Pallas forward."""
    source = builtin_training_source("1t")
    assert source.count(_PALLAS_BACKWARD) == 1, "the RMSNorm wrapper changed: update this cheat"
    return source.replace(_PALLAS_BACKWARD, _XLA_BACKWARD)
