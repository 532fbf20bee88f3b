"""The built-in agent's grouped-matmul and routed-MoE kernels timed on a TPU at bench shapes,
against XLA's reference and, where the task folder has one, the expert (expert.py). Wall clock
around `block_until_ready`, inputs on the device, median of --calls calls after one warm-up.
Measured only: on a machine without a TPU it says so and stops. Imports jax and the task
folders' own files only (no maxkernel_tui), so that it runs on a bare TPU machine; the kernels
come from `builtin_agent_coverage.py --no-eval --kernels DIR`.

    python benchmarks/grouped_timing.py --kernels DIR [--tasks 10p_Sparse_MoE 11p_Megablox_GMM]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
from wall_time import median_ms, module_at

SUITE = Path(__file__).resolve().parents[1] / "maxkernel_tui" / "kernels" / "suite"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=Path, required=True)
    parser.add_argument("--tasks", nargs="*", default=["10p_Sparse_MoE", "11p_Megablox_GMM"])
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    if jax.default_backend() != "tpu":
        raise SystemExit("no TPU here: timings on this machine would not be meaningful")
    print(
        "| task | kernel (measured) | XLA reference (measured) | expert (measured) | max abs diff |"
    )
    print("|---|---|---|---|---|")
    for name in args.tasks:
        reference = module_at(SUITE / name / "reference.py")
        dynamic, static = reference.get_inputs("bench")
        dynamic = jax.device_put(tuple(dynamic))
        timed, outputs = {}, {}
        for label, path in (
            ("kernel", args.kernels / f"{name}.py"),
            ("reference", SUITE / name / "reference.py"),
            ("expert", SUITE / name / "expert.py"),
        ):
            if not path.exists():
                continue
            computation = module_at(path).computation
            jitted = jax.jit(lambda *d, c=computation, s=static: c(*d, *s))
            timed[label] = median_ms(jitted, dynamic, args.calls)
            outputs[label] = jitted(*dynamic).astype(jax.numpy.float32)
        cells = [f"{timed[k]:.3f} ms" if k in timed else "-" for k in ("kernel", "reference")]
        expert = f"{timed['expert']:.3f} ms" if "expert" in timed else "-"
        diff = float(jax.numpy.max(jax.numpy.abs(outputs["kernel"] - outputs["reference"])))
        print(f"| {name} | {' | '.join(cells)} | {expert} | {diff:.3g} |", flush=True)


if __name__ == "__main__":
    main()
