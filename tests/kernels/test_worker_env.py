"""What a jax worker's environment carries: jax's persistent compilation cache, and nothing of
the caller's secrets; and that a second worker finds the first one's compiles there."""

import json

import pytest

from maxkernel_tui.kernels.evaluation.protocol import ReferenceAnswer, ReferenceRequest
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
from maxkernel_tui.kernels.workers import (
    XLA_CACHE_BYTES,
    LineWorker,
    device_worker_env,
    jax_worker_env,
    python_module_argv,
)

REFERENCE_WORKER = "maxkernel_tui.kernels.evaluation.reference.worker"


def test_workers_share_a_bounded_compilation_cache_under_the_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("MAXKERNEL_TUI_XLA_CACHE", raising=False)
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MKT_TEST_API_KEY", "secret")
    env = jax_worker_env()
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "xla")
    assert env["JAX_COMPILATION_CACHE_MAX_SIZE"] == str(XLA_CACHE_BYTES)
    assert "MKT_TEST_API_KEY" not in env and env["JAX_PLATFORMS"] == "cpu"


def test_a_worker_on_the_tpu_keeps_its_platform_and_shares_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MAXKERNEL_TUI_XLA_CACHE", str(tmp_path / "xla"))
    env = device_worker_env()
    assert "JAX_PLATFORMS" not in env  # jax picks the TPU
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "xla")


@pytest.mark.parametrize(
    ("chosen", "expected"), [("off", None), ("/elsewhere/xla", "/elsewhere/xla")]
)
def test_the_compilation_cache_can_be_moved_or_turned_off(monkeypatch, chosen, expected):
    monkeypatch.setenv("MAXKERNEL_TUI_XLA_CACHE", chosen)
    assert jax_worker_env().get("JAX_COMPILATION_CACHE_DIR") == expected


@pytest.mark.slow  # two reference worker processes, one after the other
def test_a_second_worker_reads_the_compiles_of_the_first_from_the_cache(monkeypatch, tmp_path):
    """jax stamps an entry's `-atime` file on every read (the cache is bounded, so it keeps
    access times): each entry the first worker wrote is stamped again by the second."""
    cache = tmp_path / "xla"
    monkeypatch.setenv("MAXKERNEL_TUI_XLA_CACHE", str(cache))
    task = find_task("8p", load_tasks(builtin_suite_dir())[0])
    request = json.dumps(
        ReferenceRequest(str(task.folder), [("check", 3)], str(tmp_path)).to_json()
    )
    stamps: list[dict[str, bytes]] = []
    for _ in range(2):
        worker = LineWorker(python_module_argv(REFERENCE_WORKER), jax_worker_env())
        try:
            answer = ReferenceAnswer.from_json(worker.ask(request, 300))
        finally:
            worker.close()
        assert answer.error is None and answer.runs[0].files, answer
        stamps.append({p.name: p.read_bytes() for p in cache.glob("*-atime")})
    assert stamps[0], "the first worker cached no compile"
    unread = [name for name, stamp in stamps[0].items() if stamps[1][name] == stamp]
    assert unread == [], unread
