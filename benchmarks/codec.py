"""Cost of the worker protocols' lines through the codec (maxkernel_tui/codec.py): encoding to a
JSON line and decoding it back, per object, for the lines the harness reads most (a check, a
numerics run) and the larger answers (a profile, a task's description). Runs on whichever tree
is imported, so the same script measures the hand-written methods before the codec:

    python benchmarks/codec.py
    PYTHONPATH=/path/to/an/older/tree python benchmarks/codec.py
"""

from __future__ import annotations

import json
import timeit
from collections.abc import Callable
from typing import Any

from maxkernel_tui.kernels.description import ConfigShapes, TaskDescription, TensorSpec, XlaCost
from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, event_from_json, event_to_json
from maxkernel_tui.kernels.perf.analysis import (
    Block,
    KernelAnalysis,
    MemorySpace,
    ProfileAnswer,
    ReferenceCost,
    Trace,
    TraceEvent,
)
from maxkernel_tui.kernels.report.checks import PASS, Check
from maxkernel_tui.kernels.report.reasons import Reason, WorkShare

BLOCK = Block("input 0", [128, 256], [1024, 256], "bfloat16", MemorySpace.VMEM, 65536, 8)
KERNEL = KernelAnalysis(
    "k", [8, 4], ["parallel", "arbitrary"], [BLOCK] * 4, 0, 1 << 20, None, 1 << 24, 32,
    1e6, 0.0, 2e3, 0.0, [[128, 256, 128]],
)  # fmt: skip
LINES: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]] = {}


def _line(name: str, obj: Any, write: Callable[[Any], Any], read: Callable[[Any], Any]) -> None:
    LINES[name] = (lambda: json.dumps(write(obj)), lambda line: read(json.loads(line)))


_line(
    "check event",
    Check("trace", PASS, Reason.PALLAS_HOLDS_THE_WORK, WorkShare(1, 0.0, 0.0, "1 output"), 0.5),
    event_to_json,
    event_from_json,
)
_line(
    "numerics run event",
    NumericsRun("check", 7, files=[f"/w/c-{i}.npy" for i in range(3)], races=False, seconds=0.2),
    event_to_json,
    event_from_json,
)
_line(
    "profile answer (2 kernels)",
    ProfileAnswer(
        "bench",
        [KERNEL, KERNEL],
        {"v5e": ReferenceCost(1e9, 2e6, 1e-3), "v6e": ReferenceCost(error="did not fit")},
        1 << 20,
        Trace("/t", "bench", "measured", 0.5, [TraceEvent(f"e{i}", 0.1) for i in range(10)]),
    ),
    lambda obj: obj.to_json(),
    ProfileAnswer.from_json,
)
_line(
    "task description (4 configs)",
    TaskDescription(
        "/s/12p",
        3,
        "12p",
        {
            name: ConfigShapes(
                [TensorSpec([1024, 512], "bf16")] * 3, [1, 2], [TensorSpec([8], "f32")]
            )
            for name in ("bench", "check", "heldout", "edge")
        },
        XlaCost("bench", "v5e", 1.5, 1e9, 2e6, 1e-3),
    ),
    lambda obj: obj.to_json(),
    TaskDescription.from_json,
)


def per_call_us(call: Callable[[], Any]) -> float:
    timer = timeit.Timer(call)
    number, _ = timer.autorange()
    return min(timer.repeat(5, number)) / number * 1e6


def main() -> None:
    print("| line | bytes | encode + dumps (µs) | loads + decode (µs) |")
    print("|---|---:|---:|---:|")
    for name, (write, read) in LINES.items():
        line = write()
        print(
            f"| {name} | {len(line)} | {per_call_us(write):.1f} | "
            f"{per_call_us(lambda: read(line)):.1f} |"  # noqa: B023 (called at once)
        )


if __name__ == "__main__":
    main()
