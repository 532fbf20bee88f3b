"""XLA's time for each measured reference, estimated with and without its copies into another
layout timed at their measured pace (perf/xla_model.relayout_seconds), beside the time measured
on a TPU v5e (benchmarks/results/measured_v5e.jsonl, device trace, XLA as the reference is
written). The copies are read from the reference compiled for v5e here (no TPU needed).

    JAX_PLATFORMS=cpu python benchmarks/xla_relayouts.py [--tasks 18k 34k ...] \
        [--md benchmarks/results/xla_relayouts.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.measured_v5e import JSONL, geomean, read_records
from maxkernel_tui.agents.builtin.autotune import reference_cost
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
from maxkernel_tui.kernels.perf.xla_model import xla_seconds
from maxkernel_tui.kernels.targets import TARGETS


def rows(task_ids: Sequence[str] | None) -> list[tuple[str, float, float, float, float]]:
    """(task, relayout GB read, measured ms, estimated ms without, with the copies' pace)."""
    tasks, _ = load_tasks(builtin_suite_dir())
    target = TARGETS["v5e"]
    found = []
    for task_id, record in sorted(read_records(JSONL).items()):
        if task_ids and not any(task_id.startswith(t) for t in task_ids):
            continue
        measured = record.get("xla_written_ms")
        cost = reference_cost(find_task(task_id, tasks), "v5e")
        if measured is None or cost is None or cost.relayouts is None:
            continue
        with_copies = xla_seconds(cost, target)
        without = xla_seconds(dataclasses.replace(cost, relayouts=None), target)
        if with_copies is None or without is None:
            continue
        read = cost.relayouts[0] / 1e9
        found.append((task_id, read, measured, without * 1e3, with_copies * 1e3))
        print(
            f"{task_id:48s} {read:6.3f} GB  {measured:8.3f}  {without * 1e3:8.3f}  "
            f"{with_copies * 1e3:8.3f}",
            flush=True,
        )
    return found


def table(found: list[tuple[str, float, float, float, float]]) -> str:
    lines = [
        "# XLA's time for the measured references on a v5e, estimated with its copies into another "
        "layout at the HBM roofline and at their measured pace, against the time measured\n",
        "`JAX_PLATFORMS=cpu python benchmarks/xla_relayouts.py --md "
        "benchmarks/results/xla_relayouts.md` (XLA as the reference is written; measured: "
        "benchmarks/results/measured_v5e.jsonl, device trace).\n",
        "| task | relayout copies read (GB) | XLA measured (ms) | est. at the roofline | "
        "measured / est. | est. at their pace | measured / est. |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, read, measured, without, with_copies in found:
        lines.append(
            f"| {task} | {read:.3f} | {measured:.3f} | {without:.3f} | {measured / without:.2f}x "
            f"| {with_copies:.3f} | {measured / with_copies:.2f}x |"
        )
    before = geomean(m / w for _, _, m, w, _ in found)
    after = geomean(m / c for _, _, m, _, c in found)
    if before and after:
        lines.append(
            f"\nGeomean of measured / estimated: {before:.3f}x -> {after:.3f}x "
            f"over {len(found)} references."
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--md", type=Path, default=None)
    args = parser.parse_args(argv)
    text = table(rows(args.tasks))
    print(text)
    if args.md:
        args.md.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
