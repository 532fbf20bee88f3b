"""Which task folders of a directory the built-in agent solves: the coverage script's table
(benchmarks/builtin_agent_coverage.py) over any folder of task folders, such as the field's own
formats (MaxKernel's adapted folders with sizes in dicts, JAXBench's native folders, ours).

    JAX_PLATFORMS=cpu python benchmarks/folder_coverage.py DIR [--no-eval] [--kernels OUT]

For every task folder directly under DIR: the kernel the agent writes (or why it cannot plan
one), the real harness's verdict on it (like `maxkernel-tui eval KERNEL --task FOLDER --seeds
2`; with --no-eval, planned and estimated only) and the performance model's estimate on TPU v5e
against XLA (estimates, never measurements). Folders that fail to load are listed with their
error. Prints the table; exits 1 when a task is not planned, or (with evaluation) not accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.builtin_agent_coverage import cover, table  # noqa: E402
from maxkernel_tui.kernels.evaluation.harness import Harness  # noqa: E402
from maxkernel_tui.kernels.loader import load_tasks  # noqa: E402
from maxkernel_tui.services.tasks import traced_task  # noqa: E402

NOT_EVALUATED = "not evaluated"
NOT_PLANNED = "not planned"
UNTRACED = "does not trace at its check shapes"
ACCEPTED = "accepted"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a directory of task folders")
    parser.add_argument("--kernels", type=Path, help="keep the generated kernels in this folder")
    parser.add_argument(
        "--no-eval", action="store_true", help="plan and estimate only (no harness verdict)"
    )
    args = parser.parse_args()
    tasks, errors = load_tasks(args.folder)
    for error in errors:
        print(f"not loaded: {error}", flush=True)
    kernels = args.kernels or Path(tempfile.mkdtemp(prefix="folder-coverage-"))
    kernels.mkdir(parents=True, exist_ok=True)
    rows = []
    with contextlib.ExitStack() as stack:
        harness = None if args.no_eval else stack.enter_context(Harness())
        for task in tasks:
            row = cover(task, harness, kernels, {})
            if row.verdict == NOT_PLANNED and UNTRACED in row.reason:
                # its derived check shapes part sizes the reference ties (a broadcast across two
                # of them): described first, as `eval` does, they part where it allows
                row = cover(traced_task(task), harness, kernels, {})
            rows.append(row)
            print(f"{row.task:55s} {row.verdict:12s} {row.seconds:6.1f}s {row.family}", flush=True)
    print(table(rows))
    wanted = {NOT_EVALUATED, ACCEPTED} if args.no_eval else {ACCEPTED}
    short = [r.task for r in rows if r.verdict not in wanted]
    print(f"{len(rows) - len(short)} of {len(rows)} {'planned' if args.no_eval else 'accepted'}")
    sys.exit(1 if short or errors else 0)


if __name__ == "__main__":
    main()
