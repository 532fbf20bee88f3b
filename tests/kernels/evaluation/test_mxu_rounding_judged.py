"""A kernel is judged on the MXU passes it runs on a TPU, not on the CPU's exact f32: f32
operands at Mosaic's default precision are one bf16 pass there, so on a task whose tolerance
needs more, such a kernel is rejected, while the same kernel taking three bf16 passes (its
operands split into high and low parts) or Precision.HIGHEST is accepted. Before, the judge's
interpreter multiplied those operands in exact f32 and accepted all three."""

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.report.reasons import Reason
from tests.support.f32_gemm_task import gemm_relu_reference, write_task

# one bf16 pass leaves 1e-4 at these depths
REFERENCE = gemm_relu_reference({"rows": 256, "depth": 1024, "cols": 256})

# One block holds everything: the product is the only thing that differs between the kernels.
KERNEL = '''"""relu(x @ W + b) in one Pallas block: {what}."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _product(x, w):
{product}


def _kernel(x_ref, w_ref, b_ref, o_ref):
    o_ref[...] = jnp.maximum(_product(x_ref[...], w_ref[...]) + b_ref[...], 0.0)


def computation(x, weight, bias):
    return pl.pallas_call(
        _kernel, out_shape=jax.ShapeDtypeStruct((x.shape[0], weight.shape[1]), x.dtype)
    )(x, weight, bias.reshape(1, -1))
'''

PRODUCTS = {
    "f32 at Mosaic's default": ("    return jnp.dot(x, w, preferred_element_type=jnp.float32)"),
    "three bf16 passes": """\
    x_high, w_high = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
    x_low = (x - x_high.astype(jnp.float32)).astype(jnp.bfloat16)
    w_low = (w - w_high.astype(jnp.float32)).astype(jnp.bfloat16)
    dot = lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)
    return (dot(x_low, w_high) + dot(x_high, w_low)) + dot(x_high, w_high)""",
    "f32 at HIGHEST": (
        "    return jnp.dot(x, w, preferred_element_type=jnp.float32,"
        " precision=jax.lax.Precision.HIGHEST)"
    ),
}


def test_a_kernel_is_judged_on_the_passes_its_matmul_takes_on_a_tpu(tmp_path):
    task = write_task(tmp_path / "gemm_tight", 1e-4, REFERENCE)
    verdicts = {}
    with Harness() as harness:
        for what, product in PRODUCTS.items():
            kernel = tmp_path / f"{what.split()[0]}_{len(verdicts)}.py"
            kernel.write_text(KERNEL.format(what=what, product=product))
            verdicts[what] = harness.evaluate(
                KernelSource.read(kernel), task, EvalOptions(seeds=1, tile_blocks=None)
            )
    one_pass = verdicts["f32 at Mosaic's default"]
    assert one_pass.verdict == "rejected"
    numerics = next(c for c in one_pass.checks if c.name == "numerics")
    assert numerics.status == "fail" and numerics.reason == Reason.OUTSIDE_TOLERANCE
    for what in ("three bf16 passes", "f32 at HIGHEST"):
        assert verdicts[what].verdict == "accepted", (what, verdicts[what].failure)
