"""Measured autotuning: the model orders and prunes the settings, a timer measures the few left,
and the measured best is proposed only when it is significantly faster; every figure says
whether it is estimated or measured."""

import pytest

from maxkernel_tui.agents.builtin.autotune import autotune
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.agents.roles.tunables import find_tunables
from maxkernel_tui.kernels.evaluation.timing.measured_choice import measure_best

MATMUL_SIZE = {128: 48, 256: 256, 512: 320, 1024: 384}  # per block_rows: small blocks are fast


class XlaTimer:
    """Times, on the CPU backend, an XLA matmul whose size the source's block_rows picks: small
    blocks are made fast here, whatever the model thinks of them."""

    clock = "wall clock on the CPU backend (XLA computations standing in for the TPU)"

    def __init__(self):
        self.timed = []

    def time(self, source):
        import jax.numpy as jnp

        from maxkernel_tui.kernels.evaluation.protocol import WALL_CLOCK
        from maxkernel_tui.kernels.evaluation.timing.clock import named_jit, time_interleaved

        rows = find_tunables(source)["BLOCK_ROWS"]
        self.timed.append(rows)
        size = MATMUL_SIZE[rows]
        inputs = [(jnp.full((size, size), s),) for s in (1.0, 2.0)]
        program = named_jit(f"rows{rows}", lambda x: jnp.tanh(x @ x))
        timed = time_interleaved({"k": program}, inputs, repeats=15, warmups=2, clock=WALL_CLOCK)
        return timed.samples["k"]


@pytest.mark.slow  # traces 41k's plan at bench shapes for 4 settings and times 4 XLA programs
def test_with_a_timer_the_measured_best_of_the_models_few_is_proposed(suite_tasks):
    from maxkernel_tui.agents.builtin.draft import plan_task
    from maxkernel_tui.kernels.loader import find_task

    task = find_task("41k", suite_tasks)
    plan = plan_task(task)[0]
    timer = XlaTimer()
    result = autotune(plan.render, task, plan.start, ("block_rows",), timer=timer)
    measurement = result.measurement
    assert result.basis == "measured" and measurement is not None
    by_model = sorted((t for t in result.trials if t.estimate), key=lambda t: t.estimate.seconds)
    assert [t.setting["block_rows"] for t in measurement.trials] == [
        t.tunables.block_rows for t in by_model if t.estimate.fits_vmem
    ][:4]  # timed in the model's order
    assert sorted(timer.timed) == sorted(t.setting["block_rows"] for t in measurement.trials)
    assert result.best.block_rows == 128 and result.estimate.seconds > 0
    lines = result.lines()
    assert all("estimated" in line and "measured" in line for line in lines[:-1])
    assert lines[-1].startswith("chosen: block_cols")
    assert "block_rows 128" in lines[-1] and "(measured)" in lines[-1]
    assert "measured" in result.chosen_by and timer.clock in result.chosen_by


class FixedTimer:
    clock = "a fixed list"

    def time(self, source):
        if "broken" in source:
            raise RuntimeError("Mosaic failed to compile\nmore detail")
        return [1e-3, 1.01e-3, 0.99e-3] * 5


def test_the_models_pick_stays_when_nothing_is_significantly_faster_and_failures_are_said():
    ranked = [({"rows": r}, f"estimated {r} us") for r in (256, 512, 1024)]
    render = {256: "ok", 512: "broken", 1024: "ok"}
    found = measure_best(ranked, lambda setting: render[setting["rows"]], FixedTimer())
    assert found.best == {"rows": 256} and found.gain is None
    lines = found.lines()
    assert "not measured: Mosaic failed to compile" in lines[1]
    assert lines[-1].endswith("the model's pick (measured: no setting significantly faster)")
    none_ran = measure_best([({"rows": 512}, "?")], lambda setting: "broken", FixedTimer())
    assert none_ran.best is None
    assert none_ran.lines()[-1] == "chosen: the model's pick (estimated): no setting could be timed"


def test_without_a_timer_the_autotune_figure_says_estimated():
    from maxkernel_tui.agents.builtin.autotune import TuneResult
    from maxkernel_tui.kernels.perf.model import Estimate

    found = Estimate("v5e", "estimated", 1e-3, "memory", 1e-3, 0, 0, 1, 0, 0, 1, True, *[None] * 4)
    result = TuneResult(Tunables(), found, [])
    assert result.basis == "estimated"
    assert result.lines() == [
        "chosen by the v5e performance model: 1.000 ms (estimated); not measured"
    ]
    assert result.chosen_by == "the v5e performance model (estimated)"
