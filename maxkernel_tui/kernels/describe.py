"""Worker that describes tasks: shapes per configuration and the reference's XLA cost.

Imports jax; run it as a separate process (the catalog does; its process answers once jax is
imported):
    python -m maxkernel_tui.kernels.describe [--no-cost] [--target v5e]
reads one task folder per line on stdin and answers one JSON line per folder on stdout (a
`TaskDescription`, kernels/description.py).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from maxkernel_tui.kernels import memory
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.aot import OutOfHbm, compile_with_fallback
from maxkernel_tui.kernels.catalog import FORMAT_VERSION
from maxkernel_tui.kernels.config_names import BENCH, CHECK, HELDOUT
from maxkernel_tui.kernels.description import (
    ConfigShapes,
    DidNotFit,
    TaskDescription,
    TensorSpec,
    XlaCost,
)
from maxkernel_tui.kernels.loader import load_task, with_groups
from maxkernel_tui.kernels.perf.pallas_analysis import transcendental_elements
from maxkernel_tui.kernels.targets import DEFAULT_TARGET
from maxkernel_tui.kernels.task import Task, TaskError, TaskFormat
from maxkernel_tui.kernels.tie_probe import scaled_groups, tie_groups
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY
from maxkernel_tui.versions import installed_version

# a derived configuration runs only where it needs at most this share of the available memory
MEMORY_SHARE = 0.5


def describe_folder(
    folder: Path, with_cost: bool, target: str = DEFAULT_TARGET, with_ties: bool = False
) -> TaskDescription:
    """Everything a listing needs about one task; errors are reported, never raised."""
    found = TaskDescription(str(folder), FORMAT_VERSION)
    try:
        task = load_task(folder, traced_ties=False)  # the static plan: tracing refines it here
        found = replace(found, task_id=task.task_id)
        module = runtime.load_reference(task)
        if task.derivation is not None and task.derived and task.derivation.coinciding():
            task, module, ties = _apart_where_untied(task, module)
        else:
            ties = tie_groups(task, module) if with_ties else []
        names = runtime.config_names(task, module)
        configs = {name: _config_shapes(task, module, name) for name in names}
        flops = _declared_flops(task, module)
    except TaskError as error:
        return replace(found, error=str(error))
    cost = _bench_cost(task, module, next(iter(configs)), target) if with_cost else None
    return replace(found, configs=configs, cost=cost, declared_flops=flops, tie_groups=ties)


def _apart_where_untied(task: Task, module: Any) -> tuple[Task, Any, list[list[str]]]:
    """A derived task whose sizes coincide in production (m = n = 4096), planned so that the
    held-out configuration moves apart the sizes its reference does not tie, and sizes of
    different values that its static plan pulled apart scale together (tie_probe.py),
    with its reference loaded for that plan and the groups it was planned with; the static plan
    (every size of a value moves with the others, no groups) where tracing splits nothing or
    the held-out sizes it gives do not trace."""
    groups = [tuple(group) for group in tie_groups(task, module)]
    scaled = [tuple(group) for group in scaled_groups(task, module)]
    bound = {name for group in scaled for name in group}
    groups = [group for group in groups if not bound & set(group)] + scaled
    apart = with_groups(task, tuple(groups))
    assert apart.derivation is not None and task.derivation is not None
    if apart.derivation.sizes == task.derivation.sizes:
        return task, module, []
    try:
        reloaded = runtime.load_reference(apart)
        runtime.io_specs(apart, reloaded, HELDOUT)
    except TaskError:
        return task, module, []
    return apart, reloaded, [list(group) for group in groups]


def _config_shapes(task: Any, module: Any, config: str) -> ConfigShapes:
    """Shapes by tracing (no allocation); the derived `check` is also run, the held-out one is
    traced only: tracing is what catches sizes pulled apart (a contraction, a reshape by a
    group count), and running held-out sizes would cost a describe as much as a heldout
    evaluation (it was half the time of describing 50 tasks)."""
    specs, static, outputs = runtime.io_specs(task, module, config)
    timed = _validate(task, module, config, specs, static) if _runs(task, config) else None
    return ConfigShapes(
        [_spec(s) for s in specs],
        list(static),
        [_spec(s) for s in outputs],
        reference_seconds=timed[1] if timed else None,
        inputs_seconds=timed[0] if timed else None,
    )


def _runs(task: Any, config: str) -> bool:
    return bool(task.derived) and config == CHECK


def _validate(
    task: Any, module: Any, config: str, specs: tuple[Any, ...], static: tuple[Any, ...]
) -> tuple[float, float]:
    """A derived configuration is usable when the reference runs on it with finite outputs:
    (seconds to make the inputs, seconds of the reference's compile and first run). It is
    compiled first, and not run where XLA's memory analysis says it would not fit this
    machine's available memory: the worker says so instead of being killed without a word."""
    started = time.perf_counter()
    jitted: Any = runtime.jitted_reference(module, len(specs), len(static))  # a jax.jit
    try:
        compiled = jitted.lower(*specs, *static).compile()
    except Exception as error:
        raise TaskError(
            task.reference_path, f"computation does not compile on {config!r}: {error}"
        ) from None
    _refuse_beyond_memory(task, config, compiled.memory_analysis(), specs)
    compile_seconds = time.perf_counter() - started
    start = time.perf_counter()
    dynamic, _ = runtime.make_inputs(task, module, config, seed=0)
    jax.block_until_ready(dynamic)
    made = time.perf_counter()
    try:
        output = jax.block_until_ready(compiled(*dynamic))
    except Exception as error:
        raise TaskError(task.reference_path, f"computation fails on {config!r}: {error}") from None
    ran = time.perf_counter() - made + compile_seconds
    timed = (round(made - start, 3), round(ran, 3))
    for leaf in jax.tree.leaves(output):
        if jnp.issubdtype(leaf.dtype, jnp.inexact) and not bool(jnp.isfinite(leaf).all()):
            raise TaskError(
                task.reference_path,
                f"the derived {config!r} configuration gives non-finite reference outputs",
            )
    return timed


def _refuse_beyond_memory(task: Any, config: str, analysis: Any, specs: tuple[Any, ...]) -> None:
    inputs = sum(math.prod(s.shape) * jnp.dtype(s.dtype).itemsize for s in specs)
    needed = inputs + (
        analysis.output_size_in_bytes + analysis.temp_size_in_bytes if analysis else 0
    )
    available = memory.available_bytes()
    if available is not None and needed > MEMORY_SHARE * available:
        raise TaskError(
            task.reference_path,
            f"the derived {config!r} configuration was not run: it needs about "
            f"{_amount(needed)} (inputs {_amount(inputs)}, outputs and XLA temporaries "
            f"{_amount(needed - inputs)}, from XLA's memory analysis on this CPU) and this "
            f"machine has {_amount(available)} available",
        )


def _amount(size: float) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"


def _declared_flops(task: Any, module: Any) -> float | None:
    """JAXBench's get_flops(), evaluated at production sizes."""
    get_flops = getattr(module, "get_flops", None)
    if task.source_format != TaskFormat.JAXBENCH or not callable(get_flops):
        return None
    runtime.input_specs(task, module, BENCH)  # sets the production sizes on the module
    try:
        return float(get_flops())
    except Exception as error:
        raise TaskError(task.reference_path, f"get_flops() fails: {error}") from None


def _bench_cost(task: Any, module: Any, config: str, target: str) -> XlaCost:
    """XLA's cost analysis of the reference compiled ahead of time for a TPU."""
    specs, static = runtime.input_specs(task, module, config)

    def reference(*dynamic: Any) -> Any:
        return module.computation(*dynamic, *static)

    try:
        report = compile_with_fallback(reference, specs, target)
    except OutOfHbm as error:
        return XlaCost(error=str(error))
    except Exception as error:  # a compiler error is a finding to show, not a crash
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return XlaCost(error=f"TPU compile failed: {first_line[:400]}")
    return XlaCost(
        config=config,
        target=report.target,
        compile_seconds=round(report.compile_seconds, 3),
        flops=report.flops,
        bytes_accessed=report.bytes_accessed,
        optimal_seconds=report.optimal_seconds,
        did_not_fit=[DidNotFit(name, reason) for name, reason in report.did_not_fit],
        libtpu=installed_version("libtpu"),
        transcendentals=transcendental_elements(jax.make_jaxpr(reference)(*specs)),
        relayouts=list(report.relayouts),
    )


def _spec(struct: Any) -> TensorSpec:
    return TensorSpec(list(struct.shape), str(struct.dtype))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-cost", action="store_true", help="skip the TPU compile")
    parser.add_argument("--target", default=DEFAULT_TARGET)
    parser.add_argument(
        "--ties", action="store_true", help="trace which equal sizes the reference ties"
    )
    args = parser.parse_args(argv)
    reply(READY)  # jax came with this module's imports
    for line in sys.stdin:
        folder = line.strip()
        if folder:
            answer = describe_folder(
                Path(folder), with_cost=not args.no_cost, target=args.target, with_ties=args.ties
            )
            reply(answer.to_json())


if __name__ == "__main__":
    main()
