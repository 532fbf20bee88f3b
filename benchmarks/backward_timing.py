"""Times a training kernel's forward and backward (jax.vjp of its `computation`, a custom_vjp
whose backward is Pallas) against XLA's jax.vjp of the reference, on the device jax finds.
Needs jax only (run where the tool is not installed, e.g. a TPU VM):

    python benchmarks/backward_timing.py TASK_DIR KERNEL.py x,w [--config bench]

Prints the median device-synchronised wall time of each (measured, on the named device) and
their ratio; without a TPU it measures nothing and says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jax


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _inputs(reference: ModuleType, config: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    try:
        return reference.get_inputs(config)  # type: ignore[no-any-return]
    except TypeError:  # MaxKernel's plain format: production inputs only
        return reference.get_inputs()  # type: ignore[no-any-return]


def _timed(function: Any, args: tuple[Any, ...], repeats: int) -> float:
    jax.block_until_ready(function(*args))  # compile
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function(*args))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _training_step(computation: Any, static: tuple[Any, ...], at: list[int]) -> Any:
    def step(dynamic: tuple[Any, ...], cotangent: Any) -> Any:
        def of_chosen(*chosen: Any) -> Any:
            args = list(dynamic)
            for position, value in zip(at, chosen, strict=True):
                args[position] = value
            return computation(*args, *static)

        output, pullback = jax.vjp(of_chosen, *(dynamic[p] for p in at))
        return output, pullback(cotangent)

    return jax.jit(step)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task", type=Path)
    parser.add_argument("kernel", type=Path)
    parser.add_argument("gradients", help="NAME[,NAME]: computation's parameters")
    parser.add_argument("--config", default="bench")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    reference = _module(args.task / "reference.py", "reference")
    kernel = _module(args.kernel, "kernel")
    dynamic, static = _inputs(reference, args.config)
    names = list(reference.computation.__code__.co_varnames)
    at = [names.index(n) for n in args.gradients.split(",")]
    output = jax.eval_shape(lambda *d: reference.computation(*d, *static), *dynamic)
    cotangent = jax.tree.map(
        lambda o: jax.random.normal(jax.random.key(1), o.shape, o.dtype), output
    )
    if jax.devices()[0].platform != "tpu":
        print("not measured: no TPU here (Pallas TPU kernels run only in interpret mode)")
        return
    device = jax.devices()[0].device_kind
    inputs = (dynamic, cotangent)
    ours = _timed(_training_step(kernel.computation, static, at), inputs, args.repeats)
    xla = _timed(_training_step(reference.computation, static, at), inputs, args.repeats)
    print(
        f"{args.task.name} forward+backward (gradients of {args.gradients}) on {device}, "
        f"measured (median of {args.repeats}, wall time around block_until_ready): "
        f"kernel {ours * 1e3:.3f} ms, XLA's jax.vjp {xla * 1e3:.3f} ms, {xla / ours:.2f}x"
    )


if __name__ == "__main__":
    main()
