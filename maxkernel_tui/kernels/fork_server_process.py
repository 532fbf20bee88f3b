"""The fork server of jax workers: it imports jax and the workers' modules once, then forks one
child per request, so that a worker starts in milliseconds instead of paying jax's import again
(about two CPU seconds each, several times per evaluation). Started by fork_server.py as

    python -m maxkernel_tui.kernels.worker_main maxkernel_tui.kernels.fork_server_process FD

FD is its end of a Unix SOCK_SEQPACKET socket, one JSON message per packet (fork_server.py's
types): first it is ready (or says why not, and ends); then per `ForkRequest`, which carries the
child's stdin, stdout and stderr as three file descriptors, the pid it forked; and whenever a
child ends, its exit code.

Forking is safe because nothing here starts a jax backend (the import itself starts none and no
thread): each child starts its own. The server refuses to serve if an import started one.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import tempfile

from maxkernel_tui.kernels.fork_server import ForkRequest, ServerEvent, ServerMessage
from maxkernel_tui.kernels.worker_main import settle

# What every jax worker imports; the workers' own modules bring the rest of this package.
PRELOAD = (
    "numpy",
    "jax",
    "jax.numpy",
    "jax.experimental.pallas",
    "jax.experimental.pallas.tpu",
    # what lowering a pallas_call in interpret mode imports on first use (0.17 s a worker)
    "jax._src.pallas.mosaic.interpret.interpret_pallas_call",
    "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call",
    "maxkernel_tui.kernels.evaluation.judge.worker",
    "maxkernel_tui.kernels.evaluation.reference.worker",
    "maxkernel_tui.kernels.evaluation.profiling.worker",
    "maxkernel_tui.kernels.describe",
    "maxkernel_tui.kernels.edge_worker",
    "maxkernel_tui.agents.builtin.worker",
)
_MAX_MESSAGE = 1 << 20  # a request carries the child's environment: kilobytes
_SET_BY_IMPORTS: dict[str, str] = {}
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def main() -> None:
    channel = socket.socket(fileno=int(sys.argv[1]))
    problem = _preload()
    if problem is not None:
        _send(channel, ServerMessage(ServerEvent.ERROR, error=problem))
        return
    _send(channel, ServerMessage(ServerEvent.READY))
    job = _serve(channel)
    if job is not None:  # this is a forked child: the server's loop is behind it
        sys.exit(_run(job))


def _preload() -> str | None:
    before = dict(os.environ)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as error:
            return f"cannot import {name}: {type(error).__name__}: {error}"
    from jax._src import xla_bridge  # private: the only record of started backends

    if getattr(xla_bridge, "_backends", None):
        return "an import started a jax backend, which a fork would copy half-working"
    # jax's import sets libtpu's variables (TPU_SKIP_MDS_QUERY: no metadata-server queries
    # off a TPU VM): every child keeps them.
    _SET_BY_IMPORTS.update({k: v for k, v in os.environ.items() if before.get(k) != v})
    return None


def _serve(channel: socket.socket) -> ForkRequest | None:
    """Fork children until the client goes away; returns, in a child only, what it runs."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up byte is what matters
    with selectors.DefaultSelector() as selector:
        selector.register(channel, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is wake_read:
                    os.read(wake_read, 4096)
                    _report_exits(channel)
                    continue
                message, fds, _, _ = socket.recv_fds(channel, _MAX_MESSAGE, 3)
                if not message:
                    return None  # the client closed its end
                request = ForkRequest.from_json(json.loads(message))
                settled_read, settled_write = os.pipe()
                server = os.getpid()
                pid = os.fork()
                if pid == 0:  # the selector closes as this returns
                    for fd in (wake_read, wake_write, settled_read):
                        os.close(fd)
                    _become_child(channel, request, fds, settled_write, server)
                    return request
                for fd in (*fds, settled_write):
                    os.close(fd)
                # Answer once the child leads its own session: the client may kill its group
                # from then on (an empty read: it died first).
                os.read(settled_read, 1)
                os.close(settled_read)
                _send(channel, ServerMessage(ServerEvent.FORKED, pid=pid))


def _report_exits(channel: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(
            channel,
            ServerMessage(ServerEvent.EXITED, pid=pid, code=os.waitstatus_to_exitcode(status)),
        )


def _become_child(
    channel: socket.socket, request: ForkRequest, fds: list[int], settled: int, server: int
) -> None:
    """What a fresh `Popen` of the worker would have been: its own session, pipes, directory
    and environment, and a guard that ends it when the server (its parent) is gone."""
    channel.close()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    os.write(settled, b"s")
    os.close(settled)
    for target, fd in zip((0, 1, 2), fds, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115  the process's own streams
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    os.environ.update(_SET_BY_IMPORTS)  # as the worker's own imports would set them
    tempfile.tempdir = None  # read TMPDIR again
    sys.path[0] = request.cwd  # as `python -m` puts the working directory first
    _die_with(server)
    settle(server)  # the sandbox, entered before anything of the request's module runs


def _die_with(server: int) -> None:
    """SIGKILL from the kernel when the server ends, even while this child runs native code
    that holds the GIL (where the guard thread cannot run). The server's single thread forked
    it, so the signal cannot come from a thread that merely ended."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # it ended before the request took effect
        os._exit(1)


def _run(job: ForkRequest) -> int:
    sys.argv = [job.module, *job.args]
    module = sys.modules.get(job.module)  # a preloaded worker: its main() is what -m runs
    entry = getattr(module, "main", None)
    if entry is None:
        runpy.run_module(job.module, run_name="__main__", alter_sys=True)
    else:
        entry()
    return 0


def _send(channel: socket.socket, message: ServerMessage) -> None:
    with contextlib.suppress(OSError):  # the client is gone; the loop sees its end closed next
        channel.send(json.dumps(message.to_json()).encode())


if __name__ == "__main__":
    main()
