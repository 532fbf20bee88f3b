"""The session's autotuner on a TPU VM (a fake timer here, no jax): the model's winners are
timed beside the current kernel, and only a setting measured significantly faster is proposed."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.orchestration.events import Note
from maxkernel_tui.agents.roles.tunables import find_tunables
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import DIAGNOSIS, GOOD, Bench, events, kernel, kinds, plan

pytestmark = pytest.mark.asyncio


class RowsTimer:
    """Seconds per call from the source's BLOCK_ROWS, as a device would measure them."""

    clock = "device trace on a fake TPU"

    def __init__(self, seconds_by_rows: dict[int, float]) -> None:
        self.seconds_by_rows = seconds_by_rows
        self.timed: list[int] = []

    def time(self, source: str) -> list[float]:
        rows = find_tunables(source)["BLOCK_ROWS"]
        self.timed.append(rows)
        base = self.seconds_by_rows[rows]
        return [base * (1 + 0.01 * (i % 3)) for i in range(15)]


def provider() -> RoleProvider:
    return RoleProvider(
        {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )


async def test_a_setting_the_model_likes_but_the_device_finds_slower_is_not_proposed(
    bench: Bench,
) -> None:
    engine = bench.engine(provider(), max_iterations=1, tune_candidates=2)
    engine.timer = RowsTimer({256: 1e-3, 512: 2e-3})  # the model's favourite runs slower
    await engine.run()
    log = kinds(bench.store, engine.session_id)
    assert "note:i1/tune" in log and "evaluation:i1/tune/apply0" not in log
    (note,) = [e for e in events(bench.store, engine.session_id, Note) if "timed" in e.text]
    assert "the current kernel (measured: no setting significantly faster)" in note.text
    assert "BLOCK_ROWS 512: estimated speedup" in note.text and "measured 2.0" in note.text
    assert engine.timer.timed == [256, 512]


async def test_a_setting_the_device_finds_faster_is_proposed_and_evaluated(bench: Bench) -> None:
    engine = bench.engine(provider(), max_iterations=1, tune_candidates=2)
    engine.timer = RowsTimer({256: 2e-3, 512: 1e-3})
    outcome = await engine.run()
    assert "evaluation:i1/tune/apply0" in kinds(bench.store, engine.session_id)
    (note,) = [e for e in events(bench.store, engine.session_id, Note) if "timed" in e.text]
    assert "over the current kernel (measured)" in note.text
    assert outcome.best is not None and find_tunables(outcome.best.source)["BLOCK_ROWS"] == 512
