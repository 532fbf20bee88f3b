"""What the device-timing benchmarks share (builtin_conv_timing.py, builtin_scan_timing.py,
grouped_timing.py): the median wall time of a jitted call after its compile, and a module loaded
from a file. Run on a TPU; on a CPU the figures are the interpreter's, not a kernel's."""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import jax


def median_ms(function: Callable[..., Any], args: Any, calls: int) -> float:
    """The median of `calls` timed calls, in milliseconds, after one call that compiles."""
    jax.block_until_ready(function(*args))  # compile and warm up
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        jax.block_until_ready(function(*args))
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def module_at(path: Path) -> ModuleType:
    """The Python file at `path`, imported under its stem."""
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
