"""Does the beam search find speed? A 6-evaluation beam search (width 2, 2 branches, depth 3) from
the built-in agent's seed on multi-stage tasks (a matmul, then row-wise stages), every kernel
judged by the real harness (interpret-mode numerics at check shapes, TPU lowering and compile)
and scored by the performance model (or by TPU timing where the machine has a TPU: the score's
kind says which). Prints each node (strategy, score and its kind, the model's share of roofline
and bound) and the seed's score against the best, or why the search stopped.

    python benchmarks/beam_search.py [--tasks 36k_Matmul_Sigmoid_Sum ...] [--max-evals 6]
        [--target v5e] [--data DIR]

Each task gets its own session in DIR (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from maxkernel_tui.agents.builtin.provider import BuiltinProvider  # noqa: E402
from maxkernel_tui.agents.search.config import SearchConfig  # noqa: E402
from maxkernel_tui.agents.search.graph import ROOT, Node  # noqa: E402
from maxkernel_tui.agents.search.launch import open_search  # noqa: E402
from maxkernel_tui.agents.search.runner import SearchOutcome  # noqa: E402
from maxkernel_tui.config import Settings  # noqa: E402
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task  # noqa: E402
from maxkernel_tui.store.db import Store  # noqa: E402

TASKS = ("36k_Matmul_Sigmoid_Sum", "50k_Matmul_GELU_Softmax")


def config(max_evals: int) -> SearchConfig:
    return SearchConfig(algorithm="beam", width=2, branches=2, depth=3, max_evals=max_evals)


async def search(
    task_id: str, data: Path, max_evals: int, target: str
) -> tuple[SearchOutcome, Node]:
    """The search's outcome and its root (the seed's node), each node printed."""
    settings = Settings(provider="builtin", data_dir=data / task_id, tpu_target=target)
    with Store(settings.store_path) as store:
        opened = await open_search(
            store,
            settings,
            task=load_task(builtin_suite_dir() / task_id),
            config=config(max_evals),
            provider=BuiltinProvider(),
        )
        try:
            outcome = await opened.search.run()
        finally:
            await opened.aclose()
            opened.session.tools.close()
        for node in opened.search.graph.in_order():
            score = "-" if node.score is None else f"{node.score:.4f}x ({node.score_kind})"
            parent = f" <- #{node.parents[0].removeprefix('n')}" if node.parents else ""
            print(f"  #{node.number} {node.status:8} {node.strategy}{parent}: {score}")
            if node.detail:
                print(f"      {node.detail}")
        return outcome, opened.search.graph[ROOT]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--max-evals", type=int, default=6)
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--data", type=Path)
    args = parser.parse_args()
    data = args.data or Path(tempfile.mkdtemp(prefix="beam-"))
    for task_id in args.tasks:
        print(f"{task_id}: beam, width 2, 2 branches, depth 3, {args.max_evals} evaluations")
        start = time.perf_counter()
        outcome, seed = asyncio.run(search(task_id, data, args.max_evals, args.target))
        print(
            f"  ended: {outcome.reason}; {outcome.evaluations} evaluations, "
            f"{time.perf_counter() - start:.0f} s"
        )
        best = outcome.best
        if best is not None and seed.score and best.score:
            print(
                f"  seed {seed.score:.4f}x -> best #{best.number} {best.score:.4f}x "
                f"({best.score / seed.score - 1:+.2%}; {best.score_kind})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
