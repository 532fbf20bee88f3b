"""`run_requests` with a stop event: the children are killed at once and nothing more is
answered. The children here are tiny Python processes (no jax), so this is a fast test."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from maxkernel_tui.kernels.workers import READY, run_requests

# A worker that says it is ready, writes its pid to the file it is asked about, then hangs.
HANGING_WORKER = f"""
import os, sys, time
print({json.dumps(json.dumps(READY))}, flush=True)
for line in sys.stdin:
    open(line.strip(), "w").write(str(os.getpid()))
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_setting_stop_kills_the_workers_and_leaves_unanswered_requests_out(tmp_path: Path):
    requests = [str(tmp_path / f"request{i}") for i in range(3)]
    stop = threading.Event()
    answers: dict[str, dict] = {}
    started = time.monotonic()

    def serve() -> None:
        answers.update(
            run_requests(
                requests,
                [sys.executable, "-c", HANGING_WORKER],
                workers=1,
                timeout=600,
                env=dict(os.environ),
                stop=stop,
            )
        )

    thread = threading.Thread(target=serve)
    thread.start()
    deadline = time.monotonic() + 30
    while not Path(requests[0]).exists() or not Path(requests[0]).read_text():
        assert time.monotonic() < deadline, "the worker never took the first request"
        time.sleep(0.02)
    pid = int(Path(requests[0]).read_text())
    stop.set()
    thread.join(10)
    assert not thread.is_alive(), "run_requests did not return after stop was set"
    assert time.monotonic() - started < 30
    assert answers == {}
    assert not _alive(pid)
    assert not any(Path(r).exists() for r in requests[1:])
