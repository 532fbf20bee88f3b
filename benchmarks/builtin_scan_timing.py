"""The built-in agent's decayed-scan kernels (15p RetNet retention, 16p Mamba-2 SSD) timed on a
TPU against XLA's reference at bench shapes. Wall clock around `block_until_ready`, inputs on
the device, median of --calls calls after one warm-up call. A reference XLA cannot run there
(16p's (4, 64, 4096, 4096) f32 intermediates are 16 GiB each, beyond a v5e's HBM) is reported
as such. Measured only: on a machine without a TPU it says so and stops.

Self-contained (jax and numpy only), so that it runs where the project is not installed: the
kernels are the files benchmarks/builtin_agent_coverage.py --kernels DIR writes.

    python benchmarks/builtin_scan_timing.py KERNELS_DIR [--tasks 15p 16p] [--calls 10]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
from wall_time import median_ms, module_at

SUITE = Path(__file__).resolve().parents[1] / "maxkernel_tui" / "kernels" / "suite"


def bound(computation: Callable[..., Any], static: Any) -> Callable[..., Any]:
    """The computation of its dynamic arguments, jitted, its static ones bound."""
    return jax.jit(lambda *dynamic: computation(*dynamic, *static))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", type=Path)
    parser.add_argument("--tasks", nargs="*", default=["15p", "16p"])
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    if jax.default_backend() != "tpu":
        raise SystemExit("no TPU here: timings on this machine would not be meaningful")
    print("| task | kernel (measured) | XLA reference (measured) | speedup |")
    print("|---|---|---|---|")
    for prefix in args.tasks:
        folder = next(SUITE.glob(f"{prefix}_*"))
        reference = module_at(folder / "reference.py")
        kernel = module_at(args.kernels / f"{folder.name}.py")
        dynamic, static = reference.get_inputs("bench", 0)
        dynamic = jax.device_put(dynamic)
        ours = median_ms(bound(kernel.computation, static), dynamic, args.calls)
        try:
            xla = median_ms(bound(reference.computation, static), dynamic, args.calls)
            cells = f"{xla:.3f} ms | {xla / ours:.2f}x"
        except Exception as error:  # XLA's reference does not fit: say why, in one line
            cells = f"does not run: {type(error).__name__}: {str(error).splitlines()[0][:120]} | -"
        print(f"| {folder.name} | {ours:.3f} ms | {cells} |", flush=True)


if __name__ == "__main__":
    main()
