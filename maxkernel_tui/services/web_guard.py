"""What stands between the network and the served workbench: a token made at each start, one
aiohttp middleware that refuses every request whose path does not open with it, the headers
every response carries, and the static files' one folder. No Textual, no jax.

The token is the first segment of every path (`/<token>/`, `/<token>/ws`, `/<token>/static/…`),
so the page's relative URLs carry it without the page holding it, and the WebSocket's upgrade,
the scripts and the fonts are refused without it like the page is. It is compared in constant
time; a token anywhere else (a query, a header, a cookie) counts for nothing.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

TOKEN_BYTES = 32  # 256 random bits, 43 URL-safe characters
REFUSED = "forbidden: open the URL that `maxkernel-tui serve` printed, with its token\n"


# every response: the token in the page's URL never leaves in a Referer (the terminal's links
# open other sites), nothing is cached, no other site frames the page
SECURITY_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def path_token(request: web.Request) -> str:
    """The first segment of the request's path as it came (percent-encoded, never decoded)."""
    return request.rel_url.raw_path.split("/", 2)[1]


def token_middleware(token: str) -> Middleware:
    """Refuses (403) every request whose path does not open with `token`, before any handler:
    the page, the WebSocket's upgrade, static files, and paths no route knows alike."""
    expected = token.encode()

    @web.middleware
    async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not hmac.compare_digest(path_token(request).encode(), expected):
            raise web.HTTPForbidden(text=REFUSED)
        return await handler(request)

    return require_token


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """An `on_response_prepare` signal: refusals and the WebSocket's handshake included."""
    response.headers.update(SECURITY_HEADERS)


def same_origin(request: web.Request) -> bool:
    """Whether the browser's Origin (when it sends one) is the server the request reached: a
    page of another site never opens the tab's WebSocket, even holding the token."""
    origin = request.headers.get("Origin")
    return origin is None or origin.split("://", 1)[-1] == request.host


def static_file(root: Path, name: str) -> Path | None:
    """The file `name` names under `root`, or None when it is not a file there (`..`, links
    and absolute names that leave `root` included)."""
    if "\x00" in name:
        return None
    base = root.resolve()
    found = (base / name).resolve()
    return found if found.is_relative_to(base) and found.is_file() else None
