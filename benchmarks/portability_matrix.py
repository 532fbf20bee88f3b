"""The evidence card's portability matrix of one kernel, and what it costs to make: the 8p GEMM
tuned for v6e (tests/data/kernels/portability/8p_GEMM_tuned_v6e.py: 1024x2048 output tiles, k in
steps of 1024) compiled with libtpu for every TPU generation at production shapes and estimated
by the performance model on each, through the real harness on this machine. Writes
benchmarks/results/portability_matrix.md.

    python benchmarks/portability_matrix.py
"""

from __future__ import annotations

import pathlib
import tempfile
import time

from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.service.portability import portability
from maxkernel_tui.kernels.service.service import EvaluationService, KernelSource
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from maxkernel_tui.services.evidence import CardSubject, report_card

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL = ROOT / "tests" / "data" / "kernels" / "portability" / "8p_GEMM_tuned_v6e.py"
RESULTS = ROOT / "benchmarks" / "results" / "portability_matrix.md"


def main() -> None:
    task = load_task(builtin_suite_dir() / "8p_GEMM")
    with tempfile.TemporaryDirectory() as traces:
        setup = EvaluationSetup.local(EvalOptions(target="v6e", seeds=1))
        service = EvaluationService(setup, task, pathlib.Path(traces))
        started = time.perf_counter()
        try:
            rows = portability(service, KernelSource.read(KERNEL), pathlib.Path(traces))
        finally:
            service.close()
        seconds = time.perf_counter() - started
    card = report_card(CardSubject.VERSION, KERNEL.name, task.task_id, None, None)
    markdown = card.with_portability(rows).to_markdown()
    matrix = markdown.split("### Portability")[1].split("### Measured")[0]
    text = (
        f"# Portability matrix: {KERNEL.name} on {task.task_id}\n\n"
        f"`python benchmarks/portability_matrix.py`: {seconds:.1f} s for five libtpu compiles "
        "(one probe per generation, each in a fresh sandboxed candidate process) and one "
        "estimate-only profile, on this machine (no TPU).\n\n### Portability" + matrix
    )
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
