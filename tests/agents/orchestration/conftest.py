"""Sessions on 12p_RMSNorm with a real store, the real harness and profiler, and a provider
whose answers each test scripts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.orchestration.engine import LoopLimits
from maxkernel_tui.agents.orchestration.gates import AutoGate, Gate
from maxkernel_tui.agents.orchestration.session import OpenSession, open_session
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.store.db import Store

KERNELS = Path(__file__).parents[2] / "data" / "kernels" / "agent"
GOOD = (KERNELS / "rmsnorm_tunable.py").read_text()
BAD = (KERNELS / "rmsnorm_bad_block.py").read_text()


def plan(note: str = "") -> str:
    return (
        f"Row blocks of BLOCK_ROWS rows with the full hidden dimension. {note}\n\n"
        "## Tiling\nRows in blocks of 256, hidden 8192 whole.\n\n## Grid\n(rows // 256,), parallel.\n\n"
        "## Memory\nx block in VMEM, double-buffered: 2 x 256 x 8192 x 2 B.\n\n"
        "## Expected bound\nMemory: one read and one write of x.\n"
    )


def kernel(source: str) -> str:
    return f"Here is the kernel.\n```python\n{source}```\n"


DIAGNOSIS = "Memory-bound at the estimated share of roofline.\nNext: larger row blocks.\n"


@pytest.fixture
def settings(tmp_path: Path, suite_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(suite_cache))
    return Settings(provider="gemini", data_dir=tmp_path / "data", tpu_target="v5e")


@pytest.fixture
def store(settings: Settings) -> Store:
    with Store(settings.store_path) as opened:
        yield opened


@pytest.fixture
def rmsnorm():
    return load_task(builtin_suite_dir() / "12p_RMSNorm")


Opener = Callable[..., "OpenSession"]


@pytest.fixture
def open_on(store: Store, settings: Settings, rmsnorm):
    """Open (or resume) a session on 12p with a given provider, gate and limits."""
    opened: list[OpenSession] = []

    async def opener(
        provider: Provider,
        *,
        gate: Gate | None = None,
        mode: str = "auto",
        resume: str | None = None,
        **limits: int,
    ) -> OpenSession:
        chosen = gate or AutoGate()
        session = await open_session(
            store,
            settings,
            task=None if resume else rmsnorm,
            mode=mode,
            gates=lambda m: chosen if m == mode else AutoGate(),
            limits=LoopLimits(**{"max_iterations": 1, "tune_candidates": 0, **limits}),
            resume=resume,
            provider=provider,
        )
        opened.append(session)
        return session

    yield opener
    for session in opened:
        session.engine.tools.close()
