"""`maxkernel-tui serve` started as a user starts it, and what a real Chromium tab shows of it.

The page draws the terminal on a canvas (xterm.js's WebGL renderer), so its text is not in the
DOM: an init script, run before textual.js, keeps the page's xterm Terminal when textual.js
stores it, and the test reads the Terminal's buffer, what the canvas draws from."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for

CHROMIUM = Path("/usr/bin/chromium")
URL = re.compile(r"http://\S+/")

# textual.js assigns `this.terminal = new Terminal(...)`: a setter on Object.prototype sees it
KEEP_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, enumerable: true,
                                             configurable: true});
    if (value && value.buffer && value.buffer.active) { window.__terminal = value; }
  },
});
"""

READ_SCREEN = """() => {
  const terminal = window.__terminal;
  if (!terminal) { return ""; }
  const buffer = terminal.buffer.active, lines = [];
  for (let y = 0; y < terminal.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
}"""


def serve_env(tmp_path: Path, cache: Path, **extra: str) -> dict[str, str]:
    """An environment like a user's with an empty home, the files in `tmp_path`, no keys."""
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "JAX_PLATFORMS": "cpu",
        "MAXKERNEL_TUI_CACHE_DIR": str(cache),
        "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
        "MAXKERNEL_TUI_XLA_CACHE": os.environ.get("MAXKERNEL_TUI_XLA_CACHE", str(cache / "xla")),
        **extra,
    }


def start_serve(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], str]:
    """`maxkernel-tui serve --port 0 ARGS` and the URL it printed."""
    server = subprocess.Popen(
        [sys.executable, "-m", "maxkernel_tui.cli", "serve", "--port", "0", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    for line in server.stdout:
        if found := URL.search(line):
            return server, found.group(0)
    server.wait(10)
    raise AssertionError(f"serve printed no URL (exit status {server.returncode})")


def stop_serve(server: subprocess.Popen[str]) -> int:
    server.terminate()
    return server.wait(60)


def screen_text(page: Any) -> str:
    return str(page.evaluate(READ_SCREEN))


def wait_for_screen(page: Any, *needles: str, timeout: float = 60.0) -> str:
    """The first screen the tab shows with every one of `needles`; a miss shows the last."""
    last = [""]

    def whole() -> str | None:
        last[0] = screen_text(page)
        return last[0] if all(needle in last[0] for needle in needles) else None

    try:
        return wait_for(whole, timeout)
    except AssertionError:
        raise AssertionError(f"no screen with all of {needles}; last screen:\n{last[0]}") from None
