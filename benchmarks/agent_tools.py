"""Latency of the agents' tools (agents/tools) as a sub-agent sees them, on 12p RMSNorm with an
honest kernel (tests/data/kernels/agent/rmsnorm_tunable.py) and the v5e target: from the call
to its result, through `Toolbox.run` with the real harness, profiler and jax lookup worker.
Each tool is called `SAMPLES` times in turn; the first call of a kind pays its worker's start
(shown apart). Writes benchmarks/results/agent_tools.md.

    python benchmarks/agent_tools.py
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import statistics
import tempfile
import time

from maxkernel_tui.agents.llm.types import ToolCall
from maxkernel_tui.agents.orchestration.tools import build_tools
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.tools.runner import Toolbox
from maxkernel_tui.agents.tools.specs import ToolName
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL = (ROOT / "tests" / "data" / "kernels" / "agent" / "rmsnorm_tunable.py").read_text()
RESULTS = ROOT / "benchmarks" / "results" / "agent_tools.md"
SAMPLES = 3
CALLS: dict[str, tuple[str, dict[str, object]]] = {
    "knowledge(blockspec)": ("knowledge", {"topic": "blockspec"}),
    "jax_api(pl.BlockSpec)": ("jax_api", {"name": "pl.BlockSpec"}),
    "jax_api(another name each time)": ("jax_api", {"name": "pltpu.CompilerParams"}),
    "lower(bench, compile=false)": ("lower", {"source": KERNEL, "compile": False}),
    "lower(bench)": ("lower", {"source": KERNEL}),
    "check(check)": ("check", {"source": KERNEL}),
    "profile_summary() (estimate)": ("profile_summary", {}),
}
NAMES = ["pltpu.CompilerParams", "pl.pallas_call", "pltpu.VMEM", "pl.when"]


async def measure() -> dict[str, list[float]]:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    task = load_task(builtin_suite_dir() / "12p_RMSNorm")
    work = pathlib.Path(tempfile.mkdtemp(prefix="agent-tools-"))
    tools = build_tools(EvaluationSetup.local(EvalOptions(target="v5e")), task, work / "traces")
    box = Toolbox(task, "v5e", work / "tools", prober=tools, profiler=tools)
    ctx = StepContext(task_dir=str(task.folder), target="v5e", kernel=KERNEL)
    offered = tuple(ToolName)
    times: dict[str, list[float]] = {label: [] for label in CALLS}
    try:
        for sample in range(SAMPLES + 1):  # sample 0: the first call of each kind
            for label, (name, arguments) in CALLS.items():
                if label.startswith("jax_api(another"):
                    arguments = {"name": NAMES[sample % len(NAMES)]}
                started = time.perf_counter()
                result = await box.run(ToolCall(label, name, dict(arguments)), offered, ctx)
                times[label].append(time.perf_counter() - started)
                assert result.ok and "failed at" not in result.text, (label, result.text)
    finally:
        tools.close()
        box.close()
    return times


def main() -> None:
    times = asyncio.run(measure())
    lines = [
        "# Agent tool latency (12p RMSNorm, v5e target, this machine's CPU)",
        "",
        "`python benchmarks/agent_tools.py`: seconds from a sub-agent's call to its result "
        "(`Toolbox.run`), measured here; the first call of each kind includes its worker's "
        f"start; later: median of {SAMPLES}. No TPU: `lower` compiles with libtpu ahead of "
        "time, `check` runs in TPU interpret mode.",
        "",
        "| tool call | first call (s) | later calls, median (s) |",
        "|---|---|---|",
    ]
    for label, seconds in times.items():
        lines.append(f"| {label} | {seconds[0]:.2f} | {statistics.median(seconds[1:]):.3f} |")
    text = "\n".join(lines) + "\n"
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
