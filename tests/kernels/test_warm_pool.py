"""The warm pool of single-use workers, with a small Python child in place of a jax worker: a
job waits for the worker already starting instead of starting a second, and a pool of size 0
starts only what is taken."""

import sys
from pathlib import Path

from maxkernel_tui.kernels.workers import WarmPool
from tests.support.waiting import wait_for

# Says it is ready, writes a line per start to the file named by argv[1], answers one request.
CHILD = (
    "import json, sys, time; time.sleep(0.3); open(sys.argv[1], 'a').write('started\\n'); "
    "print(json.dumps({'ready': True}), flush=True); sys.stdin.readline(); "
    "print(json.dumps({'ok': True}), flush=True)"
)


def _starts(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_job_taken_at_once_waits_for_the_worker_already_starting(tmp_path):
    log = tmp_path / "starts.log"
    pool = WarmPool([sys.executable, "-c", CHILD, str(log)], {}, size=1)
    try:
        worker, _ = pool.take()  # before the first start has finished
        # the one started ahead; the spare's child logs 0.3 s after its start, not yet
        assert _starts(log) == 1
        assert worker.ask("{}", 30) == {"ok": True}
        worker.close()
        wait_for(lambda: _starts(log) == 2, 30, what="the spare for the next job")
    finally:
        pool.close()
    assert _starts(log) == 2  # the first worker and one spare, never a third


def test_a_pool_of_size_zero_starts_only_the_worker_it_hands_out(tmp_path):
    log = tmp_path / "starts.log"
    pool = WarmPool([sys.executable, "-c", CHILD, str(log)], {}, size=0)
    try:
        assert _starts(log) == 0
        worker, _ = pool.take()
        assert worker.ask("{}", 30) == {"ok": True}
        worker.close()
    finally:
        pool.close()
    assert _starts(log) == 1
