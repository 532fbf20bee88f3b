"""The TPU's turn: one holder at a time, across threads and processes; a waiter past its timeout
is told which process holds it, and gets its turn once the holder lets go."""

import os
import subprocess
import sys
import threading

import pytest

from maxkernel_tui.kernels.device_lock import device_turn
from maxkernel_tui.kernels.workers import FailureKind, WorkerFailure

HOLD = """
import sys
from maxkernel_tui.kernels.device_lock import device_turn
with device_turn(timeout=5):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _take_turn(timeout: float) -> None:
    with device_turn(timeout):
        pass


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path))


def test_a_second_thread_waits_for_the_turn_and_is_told_who_holds_it():
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with device_turn(timeout=5):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    with pytest.raises(WorkerFailure, match=rf"in use for 0 s by process {os.getpid()}") as busy:
        _take_turn(timeout=0.3)
    assert busy.value.kind is FailureKind.BUSY
    release.set()
    with device_turn(timeout=10):  # the holder let go: this one's turn
        thread.join(10)
        assert not thread.is_alive()


def test_another_process_holding_the_tpu_is_named_and_then_waited_for():
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(WorkerFailure, match=f"by process {child.pid}"):
            _take_turn(timeout=0.3)
        child.stdin.write("done\n")
        child.stdin.flush()
        with device_turn(timeout=10):  # waits until the child has let go
            assert child.wait(10) == 0
    finally:
        child.kill()
        child.wait()
