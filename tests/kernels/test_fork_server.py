"""Jax workers are forked from a fork server that has imported jax already: each one looks like
a fresh `Popen` of its module (own session, directory, environment, limits, exit status), one
server serves an environment, and a dead server takes its children with it and is replaced."""

import os
import signal

import pytest

from maxkernel_tui.kernels import fork_server
from maxkernel_tui.kernels.workers import (
    Limits,
    LineWorker,
    WorkerFailure,
    jax_worker_env,
    python_module_argv,
    scrubbed_env,
)
from tests.support.processes import alive
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow  # the server imports jax (two seconds of CPU)

PROBE = python_module_argv("tests.support.probe_worker")


def _probe(env: dict[str, str], **options) -> tuple[LineWorker, dict]:
    worker = LineWorker(PROBE, env, **options)
    return worker, worker.ask("{}", 60)


def test_a_jax_worker_is_forked_from_the_server_of_its_environment(tmp_path):
    first, seen = _probe(
        dict(jax_worker_env(), TMPDIR=str(tmp_path)),
        cwd=str(tmp_path),
        limits=Limits(memory_bytes=3 * 2**30),
    )
    second, again = _probe(jax_worker_env())
    try:
        assert seen["jax_already_imported"] and seen["parent"] != os.getpid()
        assert again["parent"] == seen["parent"]  # one server for the environment
        assert seen["session_leader"]  # its group is killed alone on a timeout
        assert seen["cwd"] == str(tmp_path) and seen["tmp"] == str(tmp_path)
        assert seen["memory_limit"] == 3 * 2**30
        assert seen["env"]["JAX_PLATFORMS"] == "cpu"
        # what jax's import sets for libtpu (no metadata-server queries) stays
        assert seen["env"]["TPU_SKIP_MDS_QUERY"] == "1"
        assert again["tmp"] != str(tmp_path)
    finally:
        first.close()
        second.close()


def test_a_worker_outside_the_cpu_jax_environment_is_started_afresh():
    worker, seen = _probe(scrubbed_env())
    worker.close()
    assert seen["parent"] == os.getpid() and not seen["jax_already_imported"]


def test_a_forked_worker_reports_its_exit_like_a_started_one():
    worker = LineWorker(PROBE, jax_worker_env())
    try:
        worker.send('{"exit": 3}')
        with pytest.raises(WorkerFailure, match=r"worker died \(exit status 3\)"):
            worker.receive(60)
        worker.send('{"kill": true}')  # a restarted worker, forked again
        with pytest.raises(WorkerFailure, match="killed by SIGKILL"):
            worker.receive(60)
    finally:
        worker.close()


def test_a_dead_server_takes_its_workers_along_and_is_replaced():
    env = dict(jax_worker_env(), MAXKERNEL_TUI_PROBE_SERVER="own")  # not the other tests'
    worker, seen = _probe(env)
    server = seen["parent"]
    try:
        os.kill(server, signal.SIGKILL)
        wait_for(lambda: not alive(seen["pid"]), 10, what="its worker to notice and end")
        # and the client to have read the server's end (its reader thread; slower under load)
        wait_for(lambda: worker._proc.poll() is not None, 10, what="the client to see it")
        again = worker.ask("{}", 60)  # the ended worker restarts: from a new server
        assert again["pid"] != seen["pid"]
        assert again["parent"] not in (server, os.getpid()) and again["jax_already_imported"]
    finally:
        worker.close()


def test_a_worker_holding_the_gil_still_ends_with_its_server():
    env = dict(jax_worker_env(), MAXKERNEL_TUI_PROBE_SERVER="gil")  # a server of its own
    worker, seen = _probe(env)
    try:
        assert worker.ask('{"hold_gil": 120}', 60) == {"holding": True}
        os.kill(seen["parent"], signal.SIGKILL)  # its guard thread cannot run now
        wait_for(lambda: not alive(seen["pid"]), 10, what="the kernel's SIGKILL on the worker")
    finally:
        worker.close()


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # jax may be imported here
def test_a_process_forked_from_a_client_does_not_use_its_servers():
    worker, _ = _probe(jax_worker_env())
    worker.close()
    assert fork_server._servers  # this process has one
    child = os.fork()
    if child == 0:
        os._exit(0 if not fork_server._servers else 1)  # forgotten in the child
    assert os.waitpid(child, 0)[1] == 0
    assert fork_server._servers  # and kept here


def test_exit_does_not_wait_for_a_server_still_importing_jax(tmp_path):
    """ctrl+q while the workbench's first workers start: closing the servers takes no lock a
    starting server holds, so the app quits without waiting for jax's import."""
    import threading
    import time

    env = dict(jax_worker_env(), MAXKERNEL_TUI_PROBE_KEY=str(tmp_path))  # a server of its own
    started: list[fork_server.ForkServer | None] = []
    thread = threading.Thread(target=lambda: started.append(fork_server._server_for(env)))
    thread.start()
    wait_for(lambda: fork_server._starting, timeout=10, what="the server's start began")
    began = time.monotonic()
    fork_server._close_servers()
    assert time.monotonic() - began < 1.0
    thread.join(fork_server.START_TIMEOUT_S)
    assert started and started[0] is not None
    started[0].close()
