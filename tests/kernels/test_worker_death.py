"""A worker killed without a word (the out-of-memory killer sends SIGKILL and the child writes
nothing) is reported with the likely cause, and with the kernel's own evidence when its
out-of-memory count rose while the worker ran."""

import json
import sys

import pytest

from maxkernel_tui.kernels import workers
from maxkernel_tui.kernels.workers import (
    READY,
    FailureKind,
    LineWorker,
    WorkerFailure,
    scrubbed_env,
)

# a worker that says it is ready, reads one request and is then SIGKILLed, as by the OOM killer
_KILLED_SILENTLY = (
    "import json, os, signal, sys\n"
    f"print({json.dumps(json.dumps(READY))}, flush=True)\n"
    "sys.stdin.readline()\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)


def test_a_silent_sigkill_names_the_out_of_memory_killer_as_the_likely_cause():
    worker = LineWorker([sys.executable, "-c", _KILLED_SILENTLY], scrubbed_env())
    try:
        with pytest.raises(WorkerFailure) as failure:
            worker.ask("describe this", timeout=60)
    finally:
        worker.close()
    assert failure.value.kind is FailureKind.DIED
    assert "killed by SIGKILL, not by a timeout of ours" in str(failure.value)
    assert "out-of-memory killer" in str(failure.value)


def test_a_rise_of_the_kernels_out_of_memory_count_is_given_as_evidence(monkeypatch):
    monkeypatch.setattr(workers, "oom_kills", lambda: 4)
    reason = workers._exit_reason(-9, oom_kills_before=3)
    assert reason.startswith("killed by SIGKILL from the kernel's out-of-memory killer")
    assert "/proc/vmstat oom_kill 3 -> 4" in reason
    assert workers._exit_reason(1) == "exit status 1"


@pytest.mark.slow  # a fork server (jax's import)
def test_a_sandboxed_worker_killed_by_sigkill_is_reported_as_such(tmp_path):
    """Inside the sandbox the worker is a child of the PID namespace's init; the process left
    outside ends as the worker did. Python cannot set a handler for SIGKILL: that process
    failed there, exit status 1 with its streams closed, and an out-of-memory kill read
    'worker died (exit status 1): no output' (MaxKernel's 2p and 3p describes)."""
    argv = workers.python_module_argv("tests.support.probe_worker")
    sandbox = workers.sandbox_policy(readable=(tmp_path,))
    worker = LineWorker(argv, workers.jax_worker_env(), sandbox=sandbox)
    try:
        assert "pid" in worker.ask("{}", timeout=60)  # it runs, confined
        with pytest.raises(WorkerFailure) as failure:
            worker.ask('{"kill": true}', timeout=60)
    finally:
        worker.close()
    assert failure.value.kind is FailureKind.DIED
    assert "killed by SIGKILL" in str(failure.value), str(failure.value)
