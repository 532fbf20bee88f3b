"""A snapshot of everything the built-in agent writes, to check a refactor changes none of it.

    JAX_PLATFORMS=cpu python benchmarks/builtin_kernels_snapshot.py OUT_DIR [--tasks 12p 41k ...]

For every built-in task and the out-of-suite tasks in tests/agents/builtin/tasks/, writes under
OUT_DIR/<task_id>/ every kernel the agent can offer (the autotuned drafts, then the untuned and
halved fallbacks a debugger tries: `answers._draft`), the planner's Markdown and the explainer's
answer, or `cannot_plan.txt` with the reason. Run it before and after a change and compare with
`diff -r BEFORE AFTER`: the kernels must stay byte-for-byte identical. Imports jax (tracing).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from maxkernel_tui.agents.builtin.answers import _draft, _explanation, plan_markdown
from maxkernel_tui.agents.builtin.autotune import DEFAULT_TARGET
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.task import Task

OWN_TASKS = Path(__file__).resolve().parents[1] / "tests" / "agents" / "builtin" / "tasks"


def task_dirs() -> list[Path]:
    """The suite's task folders, then the built-in agent's own test tasks."""
    suite = sorted(p for p in builtin_suite_dir().iterdir() if (p / "kernel_task.yaml").exists())
    return suite + sorted(p for p in OWN_TASKS.iterdir() if p.is_dir())


def snapshot(task: Task, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    try:
        drafts = _draft(task, DEFAULT_TARGET)
    except CannotPlan as error:
        (out / "cannot_plan.txt").write_text(f"{error}\n")
        return
    for i, candidate in enumerate(drafts.candidates):
        (out / f"candidate_{i}.py").write_text(candidate.source)
        (out / f"candidate_{i}.txt").write_text(f"{candidate.family}\n{candidate.how}\n")
    step = StepContext.from_request(
        {"role": "planner", "task_dir": str(task.folder), "target": DEFAULT_TARGET}
    )
    (out / "plan.md").write_text(plan_markdown(drafts, step))
    (out / "explain.md").write_text(_explanation(drafts, step))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tasks", nargs="*", help="task id prefixes (default: all)")
    args = parser.parse_args()
    for folder in task_dirs():
        if args.tasks and not any(folder.name.startswith(t) for t in args.tasks):
            continue
        task = load_task(folder)
        snapshot(task, args.out / folder.name)
        print(folder.name, flush=True, file=sys.stderr)


if __name__ == "__main__":
    main()
