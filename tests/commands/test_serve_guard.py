"""The served workbench refuses every request that does not open its path with the token: the
page, the WebSocket's upgrade, the static files and paths no route knows; a token in a query,
a header or a cookie counts for nothing; static names never leave the static folder; nothing
the page receives holds the token or a key. No app process is started here (the WebSocket's
app is `false`, never reached without the token)."""

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from maxkernel_tui.services.web_guard import REFUSED, SECURITY_HEADERS, static_file
from maxkernel_tui.services.web_server import STATIC_ROOT, WorkbenchServer

TOKEN = "k" * 43
SECRET = "AIza-not-a-real-key-but-secret"


@pytest.fixture
async def client(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    server = WorkbenchServer(["false"], token=TOKEN)
    async with TestClient(TestServer(server.web_app())) as client:
        yield client


def wrong_tokens() -> list[str]:
    return [
        "",
        "k" * 42 + "j",  # one character off
        "k" * 42,  # a prefix
        "k" * 44,  # one character more
        "K" * 43,  # another case
        "%6B" * 43,  # the token, percent-encoded
        "..",
    ]


async def test_the_page_and_its_files_load_with_the_token(client):
    page = await client.get(f"/{TOKEN}/")
    assert page.status == 200
    assert "textual-terminal" in await page.text()
    for name in ("js/textual.js", "css/xterm.css", "fonts/RobotoMono-VariableFont_wght.ttf"):
        assert (await client.get(f"/{TOKEN}/static/{name}")).status == 200, name
    bare = await client.get(f"/{TOKEN}", allow_redirects=False)
    assert bare.status == 302 and bare.headers["Location"] == f"/{TOKEN}/"


@pytest.mark.parametrize(
    "path", ["/", "/ws", "/static/js/textual.js", "/favicon.ico", "/download/x", "//", "/?"]
)
async def test_paths_without_the_token_are_refused(client, path):
    response = await client.get(path, allow_redirects=False)
    assert response.status == 403
    assert await response.text() == REFUSED


@pytest.mark.parametrize("wrong", wrong_tokens())
@pytest.mark.parametrize("rest", ["", "ws", "static/js/textual.js"])
async def test_a_wrong_token_is_refused(client, wrong, rest):
    url = URL(f"{client.make_url('/')}{wrong}/{rest}", encoded=True)
    response = await client.session.get(url, allow_redirects=False)
    assert response.status == 403


async def test_the_token_anywhere_but_the_path_counts_for_nothing(client):
    tries = [
        client.get("/", params={"token": TOKEN}),
        client.get(f"/?{TOKEN}"),
        client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}),
        client.get("/", headers={"Cookie": f"token={TOKEN}"}),
        client.get(f"/static/{TOKEN}/js/textual.js"),
        client.get(f"/x/{TOKEN}/"),
    ]
    for attempt in tries:
        assert (await attempt).status == 403


async def test_other_methods_without_the_token_are_refused_before_routing(client):
    for method in ("POST", "PUT", "DELETE", "OPTIONS", "HEAD"):
        assert (await client.request(method, "/ws")).status == 403
    assert (await client.post(f"/{TOKEN}/")).status == 405


@pytest.mark.parametrize("token", ["", "k" * 42 + "j"])
async def test_a_websocket_without_the_token_is_refused_at_the_upgrade(client, token):
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect(f"/{token}/ws" if token else "/ws")
    assert refused.value.status == 403


async def test_a_websocket_from_another_sites_page_is_refused(client):
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect(f"/{TOKEN}/ws", headers={"Origin": "http://evil.example"})
    assert refused.value.status == 403


@pytest.mark.parametrize(
    "raw",
    [
        "static/../../../../../../etc/passwd",
        "static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "static/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        "static/%2e%2e/server.py",
        "static/%2e%2e%2fserver.py",
        "static/..%5cserver.py",
        "static//etc/passwd",
        "static/%2fetc%2fpasswd",
        "static/js/%00",
        "static/",
    ],
)
async def test_static_names_never_leave_the_static_folder(client, raw):
    for prefix in (TOKEN, "k" * 42 + "j"):
        url = URL(f"{client.make_url('/')}{prefix}/{raw}", encoded=True)
        response = await client.session.get(url, allow_redirects=False)
        body = await response.read()
        assert response.status in (403, 404), (prefix, raw, response.status)
        assert b"root:" not in body and b"class Server" not in body


def test_static_file_resolves_inside_its_root_only(tmp_path):
    (tmp_path / "inside.js").write_text("x")
    (tmp_path / "link.js").symlink_to("/etc/passwd")
    assert static_file(tmp_path, "inside.js") == tmp_path / "inside.js"
    for name in ("../inside.js", "link.js", "/etc/passwd", "", "inside.js\x00"):
        assert static_file(tmp_path, name) is None, name
    assert static_file(STATIC_ROOT, "js/textual.js") is not None


async def test_what_the_page_receives_holds_no_token_or_key_and_every_response_the_headers(
    client,
):
    responses = [
        await client.get(f"/{TOKEN}/"),
        await client.get(f"/{TOKEN}/static/js/textual.js"),
        await client.get(f"/{TOKEN}/static/css/xterm.css"),
        await client.get("/"),
    ]
    for response in responses:
        body = await response.read()
        assert TOKEN.encode() not in body and SECRET.encode() not in body
        for name, value in SECURITY_HEADERS.items():
            assert response.headers.get(name) == value, (response.url, name)
        assert "Set-Cookie" not in response.headers
