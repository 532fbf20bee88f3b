"""What the sandbox adds to a worker's start: jax workers forked from the fork server, started
and closed one after another, unconfined and confined (the candidate worker's policy), side by
side in one run so that the machine's load falls on both alike.

    python benchmarks/sandbox_start.py [COUNT]

Prints the median and the 90th percentile of the time from the request to the worker's
`ready`, in milliseconds, measured here.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

from maxkernel_tui.kernels.workers import (
    LineWorker,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

WORKER = "maxkernel_tui.kernels.evaluation.judge.worker"


def _start_ms(sandboxed: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="mkt-bench-") as private:
        worker = LineWorker(
            python_module_argv(WORKER),
            dict(jax_worker_env(), TMPDIR=private),
            cwd=private,
            sandbox=sandbox_policy() if sandboxed else None,
        )
        started = time.perf_counter()
        worker.start()
        elapsed = time.perf_counter() - started
        worker.close()
    return elapsed * 1000


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    _start_ms(False)  # the fork server's own start (jax's import) is not a worker's
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(count):
        for sandboxed in (False, True):
            times[sandboxed].append(_start_ms(sandboxed))
    for sandboxed, label in ((False, "unconfined"), (True, "sandboxed")):
        samples = sorted(times[sandboxed])
        p90 = samples[int(0.9 * (len(samples) - 1))]
        print(
            f"{label:<11} worker start: median {statistics.median(samples):6.1f} ms, "
            f"p90 {p90:6.1f} ms over {count} (measured here, forked from the fork server)"
        )


if __name__ == "__main__":
    main()
