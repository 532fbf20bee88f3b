"""`jax_api` against the installed jax, in its worker process: the symbols a Pallas kernel is
written with answer with their real signatures; names that leave jax, or its private parts, do
not; and the worker holds no credentials."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from maxkernel_tui.agents.tools.jax_api import JaxApi, LookupFailed

pytestmark = pytest.mark.slow  # a jax worker


@pytest.fixture(scope="module")
def api() -> Iterator[JaxApi]:
    looked = JaxApi()
    yield looked
    looked.close()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pl.pallas_call", ["(function)", "out_shape", "grid_spec", "compiler_params"]),
        ("pl.BlockSpec", ["(class)", "block_shape", "index_map", "memory_space"]),
        ("pltpu.VMEM", ["MemorySpace value", "SMEM", "defined in: jax/"]),
        ("pltpu.CompilerParams", ["(class)", "dimension_semantics", "vmem_limit_bytes"]),
        # the long spelling of a name an agent reads in jax's own kernels
        ("jax.experimental.pallas.tpu.PrefetchScalarGridSpec", ["num_scalar_prefetch"]),
    ],
)
def test_pallas_symbols_answer_from_the_installed_jax(
    api: JaxApi, name: str, expected: list[str]
) -> None:
    text = asyncio.run(api.lookup(name))
    assert text.startswith(f"{name} = ") and f"in jax {version('jax')}" in text
    for fragment in expected:
        assert fragment in text, (fragment, text)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("os.system", "not a jax module"),
        ("pl._core", "private names"),
        ("jnp.ndarray.__class__", "private names"),
        ("lax.np", "no 'np'|not defined in jax"),  # numpy re-exported inside jax
        ("pl.Blockspec", "did you mean BlockSpec"),
        ("pl.BlockSpec; import os", "not a dotted Python name"),
    ],
)
def test_names_outside_jax_s_api_are_refused_with_the_reason(
    api: JaxApi, name: str, why: str
) -> None:
    with pytest.raises(LookupFailed) as refused:
        asyncio.run(api.lookup(name))
    assert any(part in str(refused.value) for part in why.split("|")), str(refused.value)


def test_the_lookup_worker_has_no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-lookup-test-secret")
    looked = JaxApi()
    try:
        asyncio.run(looked.lookup("pl.BlockSpec"))
        worker = looked._worker
        assert worker is not None and worker._proc is not None
        environ = Path(f"/proc/{worker._proc.pid}/environ").read_bytes()
    finally:
        looked.close()
    assert b"AIza-lookup-test-secret" not in environ and b"GEMINI_API_KEY" not in environ
