"""The workbench served to a browser (`maxkernel-tui serve`): one app process per tab. No
Textual, no jax.

Each browser tab opens a WebSocket; each WebSocket starts its own `maxkernel-tui` process under
Textual's web driver (textual-serve's AppService carries its frames out and the keys in), with
the serving process's environment, so the same settings, store and sandbox as in the terminal.
The app runs in a session of its own; when the tab closes, the app is asked to quit (its exit
handlers stop its workers) and, past a grace period, its process group is killed. What reaches
the page is the terminal's frames and textual-serve's scripts: no setting, key or token (the
page finds the WebSocket from its own URL). web_guard.py refuses requests without the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

import textual_serve
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from maxkernel_tui.services.web_guard import (
    add_security_headers,
    new_token,
    same_origin,
    static_file,
    token_middleware,
)

STATIC_ROOT = Path(textual_serve.__file__).parent / "static"  # xterm.js, its CSS, the font
QUIT_GRACE_S = 10.0  # a quitting app stops its workers first; then its group is killed
TERM_GRACE_S = 3.0
HEARTBEAT_S = 15.0  # a tab whose browser went away without closing is noticed within this
MAX_CELLS = 1000  # the largest width or height a tab may ask for


class BrowserMessage(StrEnum):
    """What textual-serve's page sends on the WebSocket, as `[type, data]`."""

    STDIN = "stdin"
    RESIZE = "resize"
    PING = "ping"
    BLUR = "blur"
    FOCUS = "focus"


PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>maxkernel-tui</title>
<link rel="stylesheet" href="static/css/xterm.css">
<style>
@font-face { font-family: "Roboto Mono";
  src: url("static/fonts/RobotoMono-VariableFont_wght.ttf"); }
body { margin: 0; background: #0c181f; }
.ended { display: none; color: #eee; font: 16px monospace; padding: 2em; }
body.-closed .ended { display: block; }
body.-closed .textual-terminal { display: none; }
</style>
<script src="static/js/textual.js"></script>
</head>
<body>
<div class="ended">The app in this tab has ended. Reload the page to start a new one.</div>
<div id="terminal" class="textual-terminal" data-font-size="16"></div>
<script>
// the WebSocket beside this page, from its own URL: the page itself holds no token
const here = new URL("ws", location.href);
here.protocol = location.protocol === "https:" ? "wss:" : "ws:";
here.search = "";
document.getElementById("terminal").dataset.sessionWebsocketUrl = here.href;
</script>
</body>
</html>
"""


class TabApp(AppService):
    """One tab's app process: `argv` run directly (no shell), in a session of its own so that
    its group can be killed by id when it does not quit."""

    def __init__(
        self, argv: Sequence[str], socket: web.WebSocketResponse, quit_grace_s: float
    ) -> None:
        async def close() -> None:
            await socket.close()

        super().__init__(
            " ".join(argv),
            write_bytes=socket.send_bytes,
            write_str=socket.send_str,
            close=close,
            download_manager=DownloadManager(),  # the app delivers no files
        )
        self.argv = tuple(argv)
        self.quit_grace_s = quit_grace_s

    async def _open_app_process(
        self, width: int = 80, height: int = 24
    ) -> asyncio.subprocess.Process:
        self._process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width, height),
            start_new_session=True,
        )
        self._stdin = self._process.stdin
        return self._process

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def end(self) -> None:
        """Ask the app to quit; past `quit_grace_s` its group is terminated, then killed; what
        is left of the group after the app (a child of its own that outlived it) is killed
        too. (Workers in sessions of their own end with the app: kernels/worker_main.py.)"""
        # not quitting, or its stdin already closed: the group is ended below
        with contextlib.suppress(TimeoutError, ConnectionError, RuntimeError):
            await asyncio.wait_for(self.stop(), self.quit_grace_s)
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), TERM_GRACE_S)
        # a group's id is not reused while a member lives (POSIX), so this reaches the app's
        # group only, or nothing once it is empty
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()


def _signal_group(group: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


class WorkbenchServer:
    """The served workbench: a page, its static files and one app per WebSocket, behind
    `token`. `app_argv` is the command line of one tab's app."""

    def __init__(
        self,
        app_argv: Sequence[str],
        token: str | None = None,
        quit_grace_s: float = QUIT_GRACE_S,
    ) -> None:
        self.app_argv = tuple(app_argv)
        self.token = token or new_token()
        self.quit_grace_s = quit_grace_s
        self._tabs: set[TabApp] = set()
        self._ending: set[asyncio.Task[None]] = set()
        self._runner: web.AppRunner | None = None

    def web_app(self) -> web.Application:
        app = web.Application(middlewares=[token_middleware(self.token)])
        app.on_response_prepare.append(add_security_headers)
        app.add_routes(
            [
                web.get("/{token}", self._to_page),
                web.get("/{token}/", self._page),
                web.get("/{token}/ws", self._tab),
                web.get("/{token}/static/{name:.+}", self._static),
            ]
        )
        return app

    async def start(self, host: str, port: int) -> int:
        """Listen on `host`:`port` (0: any free port); the port listened on."""
        self._runner = web.AppRunner(self.web_app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        return int(self._runner.addresses[0][1])

    async def close(self) -> None:
        """End every tab's app (and so its workers), then stop listening."""
        await asyncio.gather(*(self._end(tab) for tab in list(self._tabs)), *self._ending)
        if self._runner is not None:
            await self._runner.cleanup()

    def app_pids(self) -> list[int]:
        """The open tabs' app processes."""
        return [pid for tab in self._tabs if (pid := tab.pid) is not None]

    async def _to_page(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"/{request.match_info['token']}/")

    async def _page(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=PAGE, content_type="text/html")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        found = static_file(STATIC_ROOT, request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        return web.FileResponse(found)

    async def _tab(self, request: web.Request) -> web.StreamResponse:
        if not same_origin(request):
            raise web.HTTPForbidden(text="forbidden: another site's page\n")
        socket = web.WebSocketResponse(heartbeat=HEARTBEAT_S)
        await socket.prepare(request)
        tab = TabApp(self.app_argv, socket, self.quit_grace_s)
        self._tabs.add(tab)
        try:
            await tab.start(_cells(request, "width", 80), _cells(request, "height", 24))
            await _relay(socket, tab)
        finally:
            await self._end(tab)
            await socket.close()
        return socket

    async def _end(self, tab: TabApp) -> None:
        """End `tab`'s app to the last process, even when the tab's handler is cancelled (aiohttp
        cancels it when the browser drops the connection) while it waits."""
        self._tabs.discard(tab)
        ending = asyncio.ensure_future(tab.end())
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)
        await asyncio.shield(ending)


def _cells(request: web.Request, name: str, default: int) -> int:
    try:
        return max(1, min(MAX_CELLS, int(request.query.get(name, default))))
    except ValueError:
        return default


async def _relay(socket: web.WebSocketResponse, tab: TabApp) -> None:
    """The page's keys, sizes and pings to the app, until the tab closes; what does not parse
    as one of the page's messages is dropped."""
    async for message in socket:
        if message.type != WSMsgType.TEXT:
            continue
        parsed = _browser_message(message.data)
        if parsed is None:
            continue
        kind, data = parsed
        if kind is BrowserMessage.STDIN and isinstance(data, str):
            await tab.send_bytes(data.encode())
        elif kind is BrowserMessage.RESIZE and isinstance(data, dict):
            width, height = data.get("width"), data.get("height")
            if isinstance(width, int) and isinstance(height, int):
                await tab.set_terminal_size(
                    max(1, min(MAX_CELLS, width)), max(1, min(MAX_CELLS, height))
                )
        elif kind is BrowserMessage.PING:
            await socket.send_json(["pong", data])
        elif kind is BrowserMessage.BLUR:
            await tab.blur()
        elif kind is BrowserMessage.FOCUS:
            await tab.focus()


def _browser_message(text: str) -> tuple[BrowserMessage, object] | None:
    """`[type]` or `[type, data]` from the page, or None when it is neither."""
    try:
        envelope = json.loads(text)
    except ValueError:
        return None
    if not isinstance(envelope, list) or not 1 <= len(envelope) <= 2:
        return None
    try:
        kind = BrowserMessage(envelope[0])
    except (ValueError, TypeError):
        return None
    return kind, envelope[1] if len(envelope) == 2 else None
