"""`maxkernel-tui doctor`: jax backend, TPU, libtpu, providers (configured, reachable), the
store."""

import http.server
import importlib.metadata
import json
import socket
import threading

import pytest

from maxkernel_tui.kernels.evaluation.timing.check import tpu_present

pytestmark = pytest.mark.slow  # every doctor run asks jax in a child process (seconds each)


def checks(done):
    report = json.loads(done.stdout)
    return report, {c["name"]: c for c in report["checks"]}


def test_doctor_here_no_tpu_libtpu_present_no_provider_exit_0(run_cli, tmp_path):
    report, by_name = checks(run_cli("doctor", "--json"))
    assert report["ok"] is True
    assert by_name["jax"]["status"] == "ok" and by_name["jax"]["data"]["backend"] in ("cpu", "tpu")
    assert by_name["TPU"]["data"]["present"] is tpu_present()
    paths = by_name["measured paths"]
    assert all(path["active"] is tpu_present() for path in paths["data"].values())
    if not tpu_present():
        assert paths["detail"].startswith("none active (no TPU): device timing, measured autotune")
    assert by_name["libtpu"]["data"]["version"] == importlib.metadata.version("libtpu")
    assert by_name["provider"]["data"] == {"chosen": "builtin", "configured": ["builtin"]}
    assert by_name["gemini"]["data"]["configured"] is False
    assert by_name["openai-compatible"]["data"]["configured"] is False
    store = by_name["session store"]["data"]
    assert store["opens"] is True and store["path"] == str(tmp_path / "data" / "sessions.db")
    text = run_cli("doctor").stdout
    if not tpu_present():
        assert "TPU                    not present" in text
    assert "gemini                 not configured" in text and text.rstrip().endswith(
        "the tool can run here"
    )


def test_a_key_is_reported_set_and_never_shown(run_cli):
    secret = "AIzaSyA1234567890abcdefghijklmnopqrstuv"
    done = run_cli("doctor", "--json", "--provider", "gemini", env={"GEMINI_API_KEY": secret})
    report, by_name = checks(done)
    assert report["ok"] and by_name["gemini"]["status"] == "ok"
    assert (
        by_name["gemini"]["data"]["GEMINI_API_KEY"] == "set"
        and secret not in done.stdout + done.stderr
    )


def test_the_chosen_provider_unconfigured_fails(run_cli):
    report, by_name = checks(
        run_cli("doctor", "--json", env={"MAXKERNEL_TUI_PROVIDER": "gemini"}, expect=1)
    )
    assert report["ok"] is False and by_name["gemini"]["status"] == "fail"
    _, by_name = checks(
        run_cli(
            "doctor",
            "--json",
            env={"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p"},
            expect=0,
        )
    )
    assert (
        by_name["gemini"]["status"] == "warn"
        and "GOOGLE_CLOUD_LOCATION not set" in by_name["gemini"]["detail"]
    )


@pytest.fixture
def local_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(b'{"data": []}')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_an_openai_compatible_server_is_probed(run_cli, local_server):
    _, by_name = checks(
        run_cli("doctor", "--json", "--provider", "openai", "--base-url", local_server)
    )
    assert (
        by_name["openai-compatible"]["status"] == "ok"
        and "HTTP 200" in by_name["openai-compatible"]["detail"]
    )
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    _, by_name = checks(
        run_cli("doctor", "--json", "--provider", "openai", "--base-url", closed, expect=1)
    )
    assert (
        by_name["openai-compatible"]["status"] == "fail"
        and "unreachable" in by_name["openai-compatible"]["detail"]
    )
    _, by_name = checks(
        run_cli("doctor", "--json", "--base-url", closed)
    )  # not the chosen one: a warning
    assert by_name["openai-compatible"]["status"] == "warn"


def test_a_store_that_does_not_open_fails(run_cli, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sessions.db").write_bytes(b"not a database" * 200)
    report, by_name = checks(run_cli("doctor", "--json", expect=1))
    assert by_name["session store"]["data"]["opens"] is False and not report["ok"]


def test_a_broken_config_file_fails(run_cli, tmp_path):
    (tmp_path / "config.toml").write_text("budget_tokens = 'many'\n")
    report, by_name = checks(run_cli("doctor", "--json", expect=1))
    assert not report["ok"] and by_name["settings"]["status"] == "fail"
    assert "budget_tokens from file" in by_name["settings"]["detail"]
