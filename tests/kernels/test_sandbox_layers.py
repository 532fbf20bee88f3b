"""Each sandbox layer on its own, in a forked child of the test process (no jax): seccomp
refuses what it names, Landlock confines writes and reads, and a machine that lacks layers
refuses untrusted code unless the user opted out."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from maxkernel_tui.kernels.sandbox import landlock, seccomp
from maxkernel_tui.kernels.sandbox.policy import (
    OPT_OUT_VARIABLE,
    REQUIRED_LAYERS,
    SandboxPolicy,
)
from maxkernel_tui.kernels.sandbox_layers import sandbox_layers
from maxkernel_tui.kernels.workers import python_module_argv, scrubbed_env


@pytest.fixture(autouse=True)
def _forks_without_jax_threads_in_the_way() -> None:
    """The bodies touch no jax: the fork warning of a process that imported it does not apply."""
    warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)


def _in_child(body: Callable[[], int]) -> int:
    """Run `body` in a forked child; its return value is the child's exit code."""
    pid = os.fork()
    if pid == 0:
        try:
            code = body()
        except BaseException:
            code = 99
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_seccomp_refuses_starting_a_program_and_opening_a_socket():
    def body() -> int:
        seccomp.set_no_new_privs()
        seccomp.install()
        import socket

        try:
            socket.socket()
        except PermissionError:
            pass
        else:
            return 1
        try:
            os.execv("/bin/true", ["true"])
        except PermissionError:
            return 0
        return 2

    assert _in_child(body) == 0


def test_seccomp_leaves_threads_and_forks_working():
    def body() -> int:
        seccomp.set_no_new_privs()
        seccomp.install()
        import threading

        done = []
        thread = threading.Thread(target=lambda: done.append(1))
        thread.start()
        thread.join()
        child = os.fork()
        if child == 0:
            os._exit(7)
        return 0 if done and os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 7 else 1

    assert _in_child(body) == 0


def test_a_machine_without_a_seccomp_table_gets_a_clear_error():
    with pytest.raises(seccomp.SeccompError, match="no seccomp filter for riscv64"):
        seccomp.program("riscv64")


@pytest.mark.skipif(landlock.abi_version() < 1, reason="no Landlock in this kernel")
def test_landlock_writes_only_beneath_the_writable_and_reads_only_the_readable(tmp_path):
    writable, readable, hidden = tmp_path / "w", tmp_path / "r", tmp_path / "h"
    for folder in (writable, readable, hidden):
        folder.mkdir()
        (folder / "file").write_text("x")
    system = [
        p for p in ("/usr", "/lib", "/lib64", sys.prefix, sys.base_prefix) if Path(p).exists()
    ]

    def body() -> int:
        seccomp.set_no_new_privs()
        landlock.restrict([*system, str(readable)], [str(writable)])
        (writable / "new").write_text("ok")
        (readable / "file").read_text()
        for attempt in (
            lambda: (readable / "new").write_text("no"),
            lambda: (hidden / "file").read_text(),
            lambda: (tmp_path / "beside").write_text("no"),
        ):
            try:
                attempt()
            except PermissionError as error:
                assert error.errno == errno.EACCES
            else:
                return 1
        return 0

    assert _in_child(body) == 0
    assert (writable / "new").exists() and not (tmp_path / "beside").exists()


def test_this_machine_gives_every_required_layer():
    layers = sandbox_layers()
    assert layers.error is None
    assert {str(layer) for layer in REQUIRED_LAYERS} <= set(layers.active), layers.missing


def _nested(tmp_path: Path, **env: str) -> dict:
    """The nested worker's answer: it runs confined, then tries to confine itself again."""
    policy = SandboxPolicy(writable=(str(tmp_path),))
    done = subprocess.run(
        python_module_argv("tests.support.nested_sandbox"),
        env=dict(scrubbed_env(), **policy.to_env(), **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_missing_layer_refuses_untrusted_code_unless_the_user_opted_out(tmp_path):
    refused = _nested(tmp_path)
    assert "user namespace" in refused["refused"] and "unshare" in refused["refused"]
    ran = _nested(tmp_path, **{OPT_OUT_VARIABLE: "off"})
    assert ran["ran"] and "pid namespace" in ran["missing"]


@pytest.mark.slow  # a fork server (jax's import)
def test_sandboxed_workers_of_different_directories_share_one_fork_server(tmp_path):
    from maxkernel_tui.kernels import fork_server
    from maxkernel_tui.kernels.workers import LineWorker, jax_worker_env, sandbox_policy

    def alive() -> set[int]:  # servers other tests of this process started stay up
        return {id(s) for s in fork_server._servers.values() if s.alive}

    before = alive()
    argv = python_module_argv("tests.support.probe_worker")
    workers = [
        LineWorker(argv, jax_worker_env(), sandbox=sandbox_policy(readable=(tmp_path,)))
        for _ in range(2)
    ]
    try:
        answers = [worker.ask("{}", 60) for worker in workers]
    finally:
        for worker in workers:
            worker.close()
    assert answers[0]["cwd"] != answers[1]["cwd"]  # each in its own private directory
    assert len(alive() - before) <= 1  # one server for both, or one already up for both
