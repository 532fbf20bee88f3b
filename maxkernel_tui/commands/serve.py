"""`maxkernel-tui serve`: the workbench in a browser tab, one app process per tab, behind a
token made at each start (services/web_server.py, services/web_guard.py). No jax here.

It listens on 127.0.0.1 unless told otherwise: the app runs code and spends the user's money,
so from another machine the way in is an SSH port-forward. Another address is served only with
a warning. `--task` and `--resume` are checked here (an unknown one is an error, exit 2) and
passed to every tab's app.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import signal
import sys
from typing import Any

from maxkernel_tui.config import add_settings_flags, load_settings
from maxkernel_tui.services.web_server import WorkbenchServer

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
EXPOSED_WARNING = (
    "warning: serving on {host}, not only this machine's loopback: anyone who can reach this "
    "port and learns the URL can run code here and spend your API budget, and the token travels "
    "unencrypted (plain HTTP). Prefer the default 127.0.0.1 with an SSH port-forward "
    "(ssh -L {port}:127.0.0.1:{port} this-host)."
)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "serve",
        help="serve the workbench to a browser (127.0.0.1, token in the URL)",
        description="Serve the workbench to a browser: each tab runs its own app, with the same "
        "settings, store and sandbox as in the terminal. Listens on 127.0.0.1 by default; the "
        "printed URL holds a token made at this start, and every request without it is refused. "
        "From a laptop: ssh -L 8000:127.0.0.1:8000 tpu-vm, then open the URL. "
        "Ctrl-C stops the server and every tab's app.",
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"the address to listen on (default {DEFAULT_HOST}; any other is served with a "
        "warning: the token then crosses the network unencrypted)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port to listen on (default {DEFAULT_PORT}; 0: any free port)",
    )
    opened = parser.add_mutually_exclusive_group()
    opened.add_argument(
        "--task", metavar="ID|DIR", help="every tab opens the workbench on this task"
    )
    opened.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="SESSION",
        help="every tab reopens this session: an id or a unique prefix of one (default: the "
        "most recent session)",
    )
    add_settings_flags(parser, ("sandbox",))
    parser.set_defaults(run=run)


def app_command(task: str | None, session: str | None) -> list[str]:
    """One tab's app: this interpreter's `maxkernel-tui`, opened as asked."""
    command = [sys.executable, "-m", "maxkernel_tui.cli"]
    if task:
        command += ["--task", task]
    if session is not None:
        command += ["--resume", session]
    return command


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def url(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/{token}/"


def run(args: argparse.Namespace) -> int:
    session = None
    if args.task:
        from maxkernel_tui.services.tasks import resolve_task

        resolve_task(args.task)  # an unknown task is an error here, not in every tab
    if args.resume is not None:
        from maxkernel_tui.services.sessions import resolve_session

        session = resolve_session(args.resume, load_settings().store_path).id
    if not is_loopback(args.host):
        print(EXPOSED_WARNING.format(host=args.host, port=args.port), file=sys.stderr)
    server = WorkbenchServer(app_command(args.task, session))
    try:
        return asyncio.run(_serve(server, args.host, args.port))
    except OSError as error:  # the port is taken, the address is not this machine's
        print(f"error: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 2


async def _serve(server: WorkbenchServer, host: str, port: int) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    try:
        port = await server.start(host, port)
        print(f"serving the workbench at {url(host, port, server.token)}", flush=True)
        print("each browser tab runs its own app; Ctrl-C stops them all", flush=True)
        await stop.wait()
    finally:
        await server.close()
    return 0
