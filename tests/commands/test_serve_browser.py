"""`maxkernel-tui serve` in a real headless Chromium (Debian's, driven by Playwright): the page
loads with the token, the task picker is read from the tab, enter opens a task, F5 starts the
built-in agent and its plan appears, `a` approves it and the implementer's kernel is proposed,
`a` again and the kernel's evaluation runs; without the token the page and the WebSocket are
refused; neither the token nor a key ever reaches the tab; closing the tab mid-evaluation
leaves no process behind (the app, its fork server, its workers)."""

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.browser import (
    CHROMIUM,
    KEEP_TERMINAL,
    serve_env,
    start_serve,
    stop_serve,
    wait_for_screen,
)
from tests.support.processes import alive, children, descendants
from tests.support.waiting import wait_for

playwright = pytest.importorskip("playwright.sync_api")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]

SECRET = "AIza-served-tab-never-sees-this-key"

# what the page's own script does, to a URL without the token: "open" or "refused"
WEBSOCKET_TRY = """url => new Promise(done => {
  const socket = new WebSocket(url);
  socket.onopen = () => { socket.close(); done("open"); };
  socket.onerror = () => done("refused");
})"""


def handshake_status(base: str, path: str) -> int:
    """The status of a WebSocket upgrade of `path`, asked as a browser asks it."""
    request = urllib.request.Request(
        base + path,
        headers={
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_workbench_in_chromium_from_picker_to_approval(tmp_path, suite_cache):
    env = serve_env(tmp_path, suite_cache, GEMINI_API_KEY=SECRET)
    server, url = start_serve(env)
    base, token = url.rstrip("/").rsplit("/", 1)
    frames: list[str | bytes] = []
    try:
        # without the token: refused, the page, a script and the WebSocket's upgrade alike
        assert handshake_status(base, "/ws") == 403
        assert handshake_status(base, f"/{token[:-1]}x/ws") == 403
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(CHROMIUM))
            context = browser.new_context(viewport={"width": 1600, "height": 1000})
            context.add_init_script(KEEP_TERMINAL)
            page = context.new_page()
            for refused in ("/", f"/?token={token}", "/static/js/textual.js", f"/{token}x/"):
                assert page.goto(base + refused).status == 403, refused
            ws_base = base.replace("http://", "ws://")
            for refused in ("/ws", f"/ws?token={token}", f"/{token}x/ws"):
                assert page.evaluate(WEBSOCKET_TRY, ws_base + refused) == "refused", refused

            page.on(
                "websocket", lambda ws: ws.on("framereceived", lambda frame: frames.append(frame))
            )
            assert page.goto(url).status == 200
            wait_for_screen(page, "maxkernel-tui — 54 tasks", "12p_RMSNorm", timeout=120)
            page.focus(".xterm-helper-textarea")  # as a click on the terminal would
            for _ in range(11):
                page.keyboard.press("ArrowDown")
            wait_for_screen(page, "12p_RMSNorm  [norm]")
            page.keyboard.press("Enter")
            wait_for_screen(page, "─ Source", '1  """12p_RMSNorm', timeout=120)
            page.keyboard.press("F5")
            wait_for_screen(page, "planner proposes a plan", "# Plan:", timeout=240)
            page.keyboard.press("a")
            wait_for_screen(page, "implementer proposes a kernel", timeout=240)
            page.keyboard.press("a")  # the kernel approved: its evaluation runs in workers
            wait_for_screen(page, "i1/implement/test", timeout=240)

            (app,) = children(server.pid)
            environment = Path(f"/proc/{app}/environ").read_bytes()
            assert token.encode() not in environment
            processes = {app} | descendants(app)
            assert len(processes) > 2  # the app, its fork server and workers
            page.close()
            wait_for(
                lambda: not any(alive(pid) for pid in processes), 60, what=f"{processes} ended"
            )
            browser.close()
        assert frames, "the tab received no frame"
        for frame in frames:
            data = frame.encode() if isinstance(frame, str) else frame
            assert token.encode() not in data and SECRET.encode() not in data
    finally:
        status = stop_serve(server)
    assert status == 0


def open_workbench(driver, url: str):
    """A tab on the workbench of the task `serve` was given, its keys going to the app."""
    browser = driver.chromium.launch(executable_path=str(CHROMIUM))
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.add_init_script(KEEP_TERMINAL)
    page = context.new_page()
    page.goto(url)
    wait_for_screen(page, "─ Source", '1  """12p_RMSNorm', timeout=120)
    page.focus(".xterm-helper-textarea")
    return browser, page


def test_ctrl_q_in_the_tab_while_auto_runs_ends_its_app_and_the_page_says_so(tmp_path, suite_cache):
    server, url = start_serve(serve_env(tmp_path, suite_cache), "--task", "12p_RMSNorm")
    try:
        with playwright.sync_playwright() as driver:
            browser, page = open_workbench(driver, url)
            (app,) = children(server.pid)
            page.keyboard.press("F2")  # hands the session to Auto
            wait_for_screen(page, "─ AUTO ─", timeout=240)
            processes = {app} | descendants(app)
            page.keyboard.press("Control+q")
            page.wait_for_selector(".ended", state="visible", timeout=60_000)
            wait_for(
                lambda: not any(alive(pid) for pid in processes), 60, what=f"{processes} ended"
            )
            assert server.poll() is None  # the server goes on serving other tabs
            browser.close()
    finally:
        assert stop_serve(server) == 0


def test_the_search_screen_in_the_tab_and_stopping_the_server_ends_it_to_the_last_worker(
    tmp_path, suite_cache
):
    server, url = start_serve(serve_env(tmp_path, suite_cache), "--task", "12p_RMSNorm")
    try:
        with playwright.sync_playwright() as driver:
            browser, page = open_workbench(driver, url)
            page.keyboard.press("F3")  # a graph search from the source, on its own screen
            wait_for_screen(page, "search ─ 12p_RMSNorm ─ running", "─ Nodes", timeout=240)
            (app,) = children(server.pid)
            processes = {app} | descendants(app)
            assert stop_serve(server) == 0  # SIGTERM, as Ctrl-C: every tab's app ends first
            wait_for(
                lambda: not any(alive(pid) for pid in processes), 30, what=f"{processes} ended"
            )
            page.wait_for_selector(".ended", state="visible", timeout=60_000)
            browser.close()
    finally:
        server.kill()
