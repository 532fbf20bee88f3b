"""No worker process outlives the command that started it: SIGTERM and SIGHUP stop `eval` and
`profile` like Ctrl-C (their workers are killed with their groups), and a worker whose parent is
killed outright (SIGKILL) ends by itself."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import alive, children, cpu_seconds, descendants
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow  # each run starts jax worker processes

KERNELS = Path(__file__).parent / "data" / "kernels"
KERNEL = KERNELS / "honest" / "12p_RMSNorm.py"
HANGS = KERNELS / "cheats" / "hangs.py"  # its worker spins until the evaluation's timeout


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "maxkernel_tui.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def workers_of(command: subprocess.Popen) -> set[int]:
    """Wait until a worker of the command is at work (a process its fork server forked, two
    levels below it, that has used CPU of its own), and return every process below the
    command."""
    wait_for(
        lambda: any(
            cpu_seconds(p) > 0.5 for child in children(command.pid) for p in descendants(child)
        ),
        timeout=120,
        interval=0.05,
        what="a worker process at work",
    )
    return descendants(command.pid)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("command", ["eval", "profile"])
def test_a_signalled_command_leaves_no_process_behind(command, signum):
    running = start(command, str(KERNEL), "--task", "12p")
    workers = workers_of(running)
    running.send_signal(signum)
    assert running.wait(timeout=60) == 130
    wait_for(lambda: not any(alive(p) for p in workers), timeout=10, what="its workers to end")


def test_a_worker_ends_by_itself_when_its_command_is_killed():
    # A busy worker reads no requests, so it cannot notice the end of its input: it must notice
    # that its parent is gone (the timeout would stop it only after 600 s).
    running = start("eval", str(HANGS), "--task", "12p", "--timeout", "600")
    workers = workers_of(running)
    os.kill(running.pid, signal.SIGKILL)
    running.wait(timeout=10)
    wait_for(lambda: not any(alive(p) for p in workers), timeout=10, what="orphaned workers to end")
