"""Jax workers forked from a fork server (fork_server_process.py) instead of started afresh, so
that each one does not import jax again. No jax here.

One server per worker environment (the scrubbed CPU environment of jax workers, told apart by
everything but the variables read after start-up), started on first use and kept for the life
of this process. A forked child behaves like a `Popen` of `python -m worker_main MODULE`: its own
session and pipes, the environment and directory asked for, limits applied by pid. Where no
server can be had, the caller starts the worker itself (`forked_child` returns None).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import IO

from maxkernel_tui.codec import JsonData
from maxkernel_tui.kernels.sandbox.policy import POLICY_VARIABLE

SERVER_MODULE = "maxkernel_tui.kernels.fork_server_process"
WORKER_MAIN = "maxkernel_tui.kernels.worker_main"
START_TIMEOUT_S = 180.0  # the server's imports, on a loaded machine
_ANSWER_TIMEOUT_S = 60.0
_MAX_MESSAGE = 1 << 16
# Read by the workers when they use them, not by their imports: a server serves any value.
# TPU_LOG_DIR: libtpu's, read when a compile first loads it (a sandboxed worker's own directory).
_LATE_VARIABLES = frozenset({"TMPDIR", "MAXKERNEL_TUI_CACHE_DIR", "TPU_LOG_DIR", POLICY_VARIABLE})


@dataclass(frozen=True)
class ForkRequest(JsonData):
    """A child to fork: `python -m MODULE ARGS` in `cwd` with exactly `env`."""

    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str


class ServerEvent(StrEnum):
    READY = "ready"
    ERROR = "error"  # it could not start
    FORKED = "forked"
    EXITED = "exited"


@dataclass(frozen=True)
class ServerMessage(JsonData):
    """What the server says: it is `ready` (or could not be: `error`), it `forked` child `pid`,
    or child `pid` ended (`exited`) with `code` (negative: the signal that ended it)."""

    kind: ServerEvent
    pid: int = 0
    code: int = 0
    error: str = ""


class ForkServerError(Exception):
    """The server could not start, or stopped answering."""


class ForkedChild:
    """A worker process forked by a server: the part of `Popen` that LineWorker uses."""

    def __init__(self, server: ForkServer, pid: int, stdin: int, stdout: int) -> None:
        self.pid = pid
        self.stdin: IO[bytes] = os.fdopen(stdin, "wb")
        self.stdout: IO[bytes] = os.fdopen(stdout, "rb", buffering=0)
        self._server = server
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.wait_exit(self.pid, timeout)
        return self.returncode


class ForkServer:
    """One server process and the thread that reads its messages."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  closed by close()
        with theirs:
            self._process = subprocess.Popen(
                [sys.executable, "-m", WORKER_MAIN, SERVER_MODULE, str(theirs.fileno())],
                env=env,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                start_new_session=True,
            )
        self._channel = ours
        self._answers: queue.Queue[ServerMessage] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._children: set[int] = set()
        self._changed = threading.Condition()
        self._spawning = threading.Lock()
        self.alive = True
        threading.Thread(target=self._read, name="fork-server", daemon=True).start()
        greeting = self._answer(START_TIMEOUT_S)
        if greeting.kind != ServerEvent.READY:
            self.close()
            raise ForkServerError(greeting.error)

    def spawn(
        self, module: str, args: Sequence[str], env: dict[str, str], cwd: str, stderr: int
    ) -> ForkedChild:
        """A child running `module` with `args`; its stdin and stdout are pipes to this process,
        its stderr the file descriptor `stderr`."""
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        request = ForkRequest(module, list(args), env, cwd)
        try:
            with self._spawning:
                socket.send_fds(
                    self._channel,
                    [json.dumps(request.to_json()).encode()],
                    [stdin_read, stdout_write, stderr],
                )
                answer = self._answer(_ANSWER_TIMEOUT_S)
            if answer.kind != ServerEvent.FORKED:
                raise ForkServerError(answer.error)
        except (OSError, ForkServerError):
            self.alive = False  # no more children from it; those it forked go on
            for fd in (stdin_write, stdout_read):
                os.close(fd)
            raise
        finally:
            for fd in (stdin_read, stdout_write):
                os.close(fd)
        with self._changed:
            self._children.add(answer.pid)
        return ForkedChild(self, answer.pid, stdin_write, stdout_read)

    def exit_code(self, pid: int) -> int | None:
        """The child's exit code once it has ended (taken: ForkedChild keeps it), else None."""
        return self.wait_exit(pid, 0) if pid in self._exits else None

    def wait_exit(self, pid: int, timeout: float | None) -> int:
        with self._changed:
            if not self._changed.wait_for(lambda: pid in self._exits, timeout):
                raise subprocess.TimeoutExpired(f"forked worker {pid}", timeout or 0)
            self._children.discard(pid)
            return self._exits.pop(pid)

    def close(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):
            self._channel.shutdown(socket.SHUT_RDWR)
        self._process.kill()  # the kernel then kills its children (PR_SET_PDEATHSIG)
        self._process.wait()
        self._channel.close()
        self._stderr.close()

    def _answer(self, timeout: float) -> ServerMessage:
        try:
            return self._answers.get(timeout=timeout)
        except queue.Empty:
            raise ForkServerError(f"the fork server did not answer in {timeout:.0f} s") from None

    def _read(self) -> None:
        while True:
            try:
                data = self._channel.recv(_MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            message = ServerMessage.from_json(json.loads(data))
            if message.kind == ServerEvent.EXITED:
                with self._changed:
                    self._exits[message.pid] = message.code
                    self._changed.notify_all()
            else:
                self._answers.put(message)
        # The server is gone, and with it (PR_SET_PDEATHSIG) every child it forked.
        self.alive = False
        self._answers.put(
            ServerMessage(ServerEvent.ERROR, error=f"the fork server ended: {self._stderr_tail()}")
        )
        with self._changed:
            for pid in self._children:
                self._exits.setdefault(pid, -9)
            self._changed.notify_all()

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            lines = self._stderr.read().decode(errors="replace").strip().splitlines()
            return " | ".join(lines[-3:]) or "no output"
        return "no output"


_Key = tuple[tuple[str, str], ...]
_servers: dict[_Key, ForkServer] = {}
_refused: set[_Key] = set()
_starting: dict[_Key, threading.Event] = {}  # set once the server of that key is up or refused
_lock = threading.Lock()  # never held while a server starts (jax's import): exit waits on it


def forked_child(
    argv: Sequence[str], env: dict[str, str], cwd: str | None, stderr: int
) -> ForkedChild | None:
    """The worker `argv` (a `python -m worker_main MODULE ...` line) forked from the server of
    its environment; None when it is not a CPU jax worker or its server cannot be had."""
    if (
        len(argv) < 4
        or argv[:3] != [sys.executable, "-m", WORKER_MAIN]
        or env.get("JAX_PLATFORMS") != "cpu"
    ):
        return None
    server = _server_for(env)
    if server is None:
        return None
    try:
        return server.spawn(argv[3], argv[4:], env, cwd or os.getcwd(), stderr)
    except (OSError, ForkServerError):
        return None  # the caller starts the worker itself; a new server is started next time


def _server_for(env: dict[str, str]) -> ForkServer | None:
    """The running server of `env`'s key, started by the first caller that needs it (the
    others wait for that start rather than starting their own)."""
    key = tuple(sorted((k, v) for k, v in env.items() if k not in _LATE_VARIABLES))
    with _lock:
        server = _servers.get(key)
        if server is not None and server.alive:
            return server
        if key in _refused:
            return None
        started = _starting.get(key)
        starter = started is None
        if starter:
            started = _starting[key] = threading.Event()
    assert started is not None
    if not starter:
        started.wait(START_TIMEOUT_S)
        with _lock:
            server = _servers.get(key)
            return server if server is not None and server.alive else None
    try:
        server = ForkServer({k: v for k, v in key})
    except (OSError, ForkServerError):
        server = None
    with _lock:
        if server is None:
            _refused.add(key)  # e.g. an import that starts a backend: no fork for this env
        else:
            _servers[key] = server
        del _starting[key]
    started.set()
    return server


def _forget_servers() -> None:
    """In a process forked from this one without an exec: the servers and their sockets are the
    parent's, to be neither used nor closed here."""
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    _servers.clear()
    _refused.clear()
    _starting.clear()


os.register_at_fork(after_in_child=_forget_servers)


@atexit.register
def _close_servers() -> None:
    with _lock:
        for server in _servers.values():
            server.close()
        _servers.clear()
