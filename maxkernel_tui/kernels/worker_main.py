"""The entry point of every worker process: `python -m maxkernel_tui.kernels.worker_main MODULE
[ARGS]` runs MODULE as `__main__` after starting a guard that ends the worker, and its whole
process group, as soon as its parent is gone. No jax here (MODULE brings its own).

A worker lives in a session of its own (so a timeout can kill its group), which also means that
no signal of the parent's reaches it: a command killed by SIGTERM, SIGHUP (a dropped SSH session)
or SIGKILL would leave its workers computing, re-parented to init, for as long as their task
takes. The guard notices the new parent within `POLL_S` and kills the group.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import threading
import time

from maxkernel_tui.kernels.sandbox.confine import SandboxUnavailable, confine
from maxkernel_tui.kernels.sandbox.policy import Layer, SandboxPolicy

POLL_S = 0.25


def guard_parent(parent: int, poll_s: float = POLL_S) -> threading.Thread:
    """A daemon thread that kills this process's group once its parent is no longer `parent`."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="parent-guard", daemon=True)
    thread.start()
    return thread


def settle(parent: int) -> None:
    """Confine this worker by the sandbox policy in its environment (kernels/sandbox), if it
    has one, and end it once `parent` is gone: the process left outside the PID namespace
    watches, else a guard thread. A worker whose sandbox cannot be had says why on its first
    line (where the caller waits for `ready`) and ends."""
    policy = SandboxPolicy.from_env()
    if policy is None:
        guard_parent(parent)
        return
    try:
        state = confine(policy, parent_alive=lambda: os.getppid() == parent)
    except SandboxUnavailable as error:
        print(json.dumps({"error": f"untrusted code refused: {error}"}), flush=True)
        os._exit(3)
    if Layer.PID_NAMESPACE not in state.active:
        guard_parent(parent)


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m maxkernel_tui.kernels.worker_main MODULE [ARGS]")
    module, args = sys.argv[1], sys.argv[2:]
    settle(os.getppid())
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
