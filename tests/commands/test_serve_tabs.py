"""One app process per tab: started with the server's environment (never the token), ended
with its whole process group when the tab closes, even when it does not quit; the server's
close ends every open tab. `maxkernel-tui serve`'s own arguments: loopback by default, another
address only with a warning, the task or session passed to every tab's app."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import ClientWebSocketResponse
from aiohttp.test_utils import TestClient, TestServer

from maxkernel_tui.cli import build_parser, main
from maxkernel_tui.commands import serve
from maxkernel_tui.services.web_server import WorkbenchServer
from tests.support.processes import alive, descendants
from tests.support.waiting import eventually

TOKEN = "t" * 43

# an app that never quits and leaves a child of its own behind, as a stuck app with a worker
STUBBORN = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "print('started', flush=True); time.sleep(600)"
)

# an app that quits when asked (any byte on its stdin) but leaves a child of its group behind
QUITS_LEAVING_A_CHILD = (
    "import subprocess, sys; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
    "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print('started', flush=True); sys.stdin.buffer.read(1)"
)


def environment_writer(path: Path) -> str:
    return (
        f"import os, time; open({str(path)!r}, 'w').write(repr(dict(os.environ))); time.sleep(600)"
    )


async def open_tab(
    server: WorkbenchServer, client: TestClient, children: int = 0
) -> tuple[ClientWebSocketResponse, set[int]]:
    """A tab's WebSocket; its app's pid and those of its `children`, once they run."""
    before = set(server.app_pids())
    socket = await client.ws_connect(f"/{TOKEN}/ws?width=100&height=30")
    started = await eventually(lambda: set(server.app_pids()) - before, 30, what="an app")
    (app,) = started
    await eventually(lambda: len(descendants(app)) >= children, 30, what="the app's child")
    return socket, {app} | descendants(app)


async def test_closing_the_tab_ends_an_app_that_does_not_quit_and_its_group():
    server = WorkbenchServer([sys.executable, "-c", STUBBORN], token=TOKEN, quit_grace_s=0.5)
    async with TestClient(TestServer(server.web_app())) as client:
        socket, pids = await open_tab(server, client, children=1)
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        await socket.close()
        await eventually(lambda: not any(alive(pid) for pid in pids), 30, what=f"{pids} ended")
        assert server.app_pids() == []


async def test_what_a_quitting_app_leaves_of_its_group_is_ended_with_it():
    server = WorkbenchServer([sys.executable, "-c", QUITS_LEAVING_A_CHILD], token=TOKEN)
    async with TestClient(TestServer(server.web_app())) as client:
        socket, pids = await open_tab(server, client, children=1)
        await socket.close()
        await eventually(lambda: not any(alive(pid) for pid in pids), 30, what=f"{pids} ended")


async def test_closing_the_server_ends_every_open_tab():
    server = WorkbenchServer([sys.executable, "-c", STUBBORN], token=TOKEN, quit_grace_s=0.5)
    async with TestClient(TestServer(server.web_app())) as client:
        _, first = await open_tab(server, client, children=1)
        _, second = await open_tab(server, client, children=1)
        assert first.isdisjoint(second)  # one app per tab
        await server.close()
        # the apps were waited for; their children were sent SIGKILL, which lands at once
        await eventually(lambda: not any(alive(pid) for pid in first | second), 10)


async def test_the_tab_app_gets_the_servers_environment_but_never_the_token(tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_DATA_DIR", str(tmp_path / "data"))
    written = tmp_path / "environ"
    server = WorkbenchServer(
        [sys.executable, "-c", environment_writer(written)], token=TOKEN, quit_grace_s=0.5
    )
    async with TestClient(TestServer(server.web_app())) as client:
        await open_tab(server, client)
        text = await eventually(lambda: written.exists() and written.read_text(), 30)
        await server.close()
    environment = eval(text)  # the repr of a dict of strings, written by the app above
    assert environment["MAXKERNEL_TUI_DATA_DIR"] == str(tmp_path / "data")  # same settings
    assert environment["TEXTUAL_DRIVER"].endswith("WebDriver")
    assert (environment["COLUMNS"], environment["ROWS"]) == ("100", "30")
    assert TOKEN not in text


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_serve_listens_on_loopback_by_default_and_passes_the_task_to_each_tab():
    args = parse("--task", "12p")
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    assert serve.app_command(args.task, None)[-2:] == ["--task", "12p"]
    assert serve.app_command(None, "abc123")[-2:] == ["--resume", "abc123"]
    assert serve.app_command(None, None)[1:] == ["-m", "maxkernel_tui.cli"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.1.2.3", True)]
    + [("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("tpu-vm", False)],
)
def test_only_loopback_addresses_count_as_loopback(host, loopback):
    assert serve.is_loopback(host) is loopback


def test_the_url_brackets_an_ipv6_address():
    assert serve.url("::1", 8000, "x") == "http://[::1]:8000/x/"
    assert serve.url("127.0.0.1", 0, "x") == "http://127.0.0.1:0/x/"


def test_another_address_is_served_only_with_a_warning(monkeypatch, capsys):
    served = []

    async def not_listening(server, host, port):
        served.append((host, port, server.app_argv))
        return 0

    monkeypatch.setattr(serve, "_serve", not_listening)
    assert serve.run(parse("--host", "0.0.0.0", "--port", "9000")) == 0
    warning = capsys.readouterr().err
    assert "warning: serving on 0.0.0.0" in warning and "ssh -L 9000:127.0.0.1:9000" in warning
    assert served[0][:2] == ("0.0.0.0", 9000)
    assert serve.run(parse()) == 0
    assert capsys.readouterr().err == ""


def test_an_unknown_task_or_both_task_and_session_is_an_error(capsys):
    assert main(["serve", "--task", "no_such_task_anywhere"]) == 2
    assert "error:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as both:
        main(["serve", "--task", "12p", "--resume", "x"])
    assert both.value.code == 2


def test_an_unknown_session_to_resume_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MAXKERNEL_TUI_DATA_DIR", str(tmp_path / "data"))
    assert main(["serve", "--resume", "nope"]) == 2
    assert "no sessions yet" in capsys.readouterr().err


def test_the_server_imports_neither_jax_nor_textual():
    code = (
        "import sys, maxkernel_tui.commands.serve, maxkernel_tui.services.web_server; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'textual')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
