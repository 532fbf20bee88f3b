"""Where a transposed 3-D convolution kernel's time goes on a TPU (28k's shapes): the built-in
agent's whole kernel file (the convolution with its fused LayerNorm and GELU epilogue) beside
the convolution stage alone, its plane copied out as it is (one and three bf16 passes): the
difference is the epilogue's. Wall clock around `block_until_ready`, inputs on the device,
median of --calls after a compiling call. Measured only: on a machine without a TPU it says so
and stops.

    python benchmarks/transposed_conv_parts.py KERNEL.py [--calls 10]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
from wall_time import median_ms, module_at

from maxkernel_tui.agents.builtin.pieces import conv_transposed
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks


def _copy(acc, out_ref, *, tm, tn):
    out_ref[...] = acc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernel", type=Path)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    if jax.default_backend() != "tpu":
        raise SystemExit("no TPU here: these are device timings, not taken on a CPU")
    tasks, _ = load_tasks(builtin_suite_dir())
    task = find_task("28k", tasks)
    reference = runtime.load_reference(task)
    dynamic, static = runtime.make_inputs(task, reference, task.configs[0])
    kernel_file = module_at(args.kernel)
    x, weight = dynamic[0], dynamic[1]
    taps = jnp.transpose(jnp.flip(weight, (2, 3, 4)), (1, 0, 2, 3, 4))
    geometry = {"dilation": (2, 2, 2), "padding": ((2, 2),) * 3}

    def stage(operands):
        return jax.jit(
            lambda x, taps: conv_transposed._transposed_volume_conv_stage(
                x,
                taps,
                roles=(),
                outputs=(("tile", jnp.float32),),
                batched=(True,),
                epilogue=_copy,
                operands=operands,
                **geometry,
            )
        )

    whole = jax.jit(lambda *d: kernel_file.computation(*d, *static))
    print(f"whole kernel file: {median_ms(whole, dynamic, args.calls):.3f} ms", flush=True)
    for operands in ("bf16", "bf16x3"):
        ms = median_ms(stage(operands), (x, taps), args.calls)
        print(f"convolution stage, plane copied out, {operands}: {ms:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
