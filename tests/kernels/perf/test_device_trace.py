"""Device time out of profiler traces: per-run times and the DMA share from event lists written
here (and each op's share of them), and per-run device times read back from a real CPU trace
of XLA computations."""

import json

import pytest

from maxkernel_tui.kernels.perf.analysis import Trace, TraceEvent
from maxkernel_tui.kernels.perf.device_trace import DeviceEvent, dma_share, op_seconds, run_seconds

TPU = "/device:TPU:0"
MODULE = "jit_mkt_candidate"


def op(name, start_us, length_us, *, plane=TPU, line="XLA Ops", module=MODULE, run=None):
    return DeviceEvent(plane, line, name, start_us * 1e3, length_us * 1e3, module, run)


def test_each_run_is_the_span_of_its_events_in_the_order_the_runs_started():
    events = [
        op("fusion", 200, 30, run=2),
        op("dot", 230, 20, run=2),
        op("fusion", 0, 40, run=1),
        op("dot", 40, 60, run=1),
        op("copy", 500, 5, module="jit_mkt_reference", run=3),
    ]
    assert run_seconds(events, MODULE) == pytest.approx([100e-6, 50e-6])
    assert run_seconds(events, "jit_mkt_reference") == pytest.approx([5e-6])


def test_host_events_of_the_module_are_dispatch_and_do_not_count_when_a_device_plane_exists():
    host = op("PjitFunction", 0, 900, plane="/host:CPU", run=1)
    device = op("fusion", 100, 300, run=1)
    assert run_seconds([host, device], MODULE) == pytest.approx([300e-6])
    assert run_seconds([host], MODULE) == pytest.approx([900e-6])  # a CPU trace: host is all


def test_on_a_tpu_plane_each_module_event_is_one_run_whatever_the_ops_carry():
    events = [
        op("jit_mkt_candidate(4)", 0, 80, line="XLA Modules"),
        op("fusion", 10, 30, run=7),  # inside the module event's span; never a run of its own
        op("jit_mkt_candidate(4)", 300, 70, line="XLA Modules", run=8),
        op("fusion", 310, 20),
    ]
    assert run_seconds(events, MODULE) == pytest.approx([80e-6, 70e-6])


def test_the_dma_share_is_the_wait_events_over_the_kernels_device_time_and_is_labelled():
    events = [
        op("jit_mkt_candidate", 0, 100, line="XLA Modules", run=1),
        op("SyncWait", 10, 20, run=1),
        op("dma-wait.2", 50, 10, run=1),
        op("mosaic kernel", 0, 100, run=1),
        op("PjitFunction", 0, 500, plane="/host:CPU", run=1),  # host time never counts
    ]
    share = dma_share(events, MODULE)
    assert share is not None and share.runs == 1
    assert share.dma_wait == pytest.approx(0.3) and share.compute == pytest.approx(0.7)
    assert share.device_seconds == pytest.approx(100e-6)
    assert "DMA wait 30%, compute 70%" in share.describe()
    assert "(measured, device trace)" in share.describe()
    assert dma_share([e for e in events if e.plane != TPU]) is None  # no TPU plane: no share
    trace = Trace("/t", "bench", "measured on TPU (device trace)", 0.1, [TraceEvent("k", 1)], share)
    assert Trace.from_json(json.loads(json.dumps(trace.to_json()))) == trace


@pytest.mark.slow  # jax in this process, two compiles and a profiler trace (~3 s)
def test_a_real_cpu_trace_gives_each_program_one_device_time_per_call():
    import jax
    import jax.numpy as jnp

    from maxkernel_tui.kernels.evaluation.protocol import DEVICE_TRACE, WALL_CLOCK
    from maxkernel_tui.kernels.evaluation.timing.clock import (
        named_jit,
        time_interleaved,
    )

    small = [jnp.ones((64, 64)) * s for s in (1.0, 2.0)]
    big = [jnp.ones((512, 512)) * s for s in (1.0, 2.0)]
    programs = {
        "small": named_jit("small", lambda x, y: jnp.tanh(x @ x)),
        "big": named_jit("big", lambda x, y: jnp.tanh(y @ y)),
    }
    inputs = [(small[i], big[i]) for i in range(2)]
    timed = time_interleaved(programs, inputs, repeats=6, warmups=1, clock=DEVICE_TRACE)
    assert timed.clock == DEVICE_TRACE and timed.note == ""
    assert [len(timed.samples[name]) for name in programs] == [6, 6]
    assert all(s > 0 for samples in timed.samples.values() for s in samples)
    median = {name: sorted(samples)[3] for name, samples in timed.samples.items()}
    assert median["big"] > 4 * median["small"]  # 512 times the flops: the trace tells them apart
    # Programs the trace cannot name fall back to the wall clock, and say why.
    anonymous = {"small": jax.jit(lambda x, y: x @ x)}
    fallback = time_interleaved(anonymous, inputs, repeats=2, warmups=1, clock=DEVICE_TRACE)
    assert fallback.clock == WALL_CLOCK and "wrong number of runs (small 0 of 2)" in fallback.note
    assert len(fallback.samples["small"]) == 2


def test_each_op_is_its_device_time_per_run_whether_or_not_it_names_the_module():
    events = [
        op("jit_mkt_candidate(1)", 0, 100, line="XLA Modules"),
        op("%copy = bf16[8,128]", 0, 60, module=None),  # a TPU op event need not say its module
        op("%fusion = f32[8,128]", 60, 40),
        op("jit_mkt_candidate(2)", 200, 120, line="XLA Modules"),
        op("%copy = bf16[8,128]", 200, 80, module=None),
        op("%fusion = f32[8,128]", 280, 40),
        op("%other = f32[1]", 500, 900, module=None),  # outside every run: another program's
        op("%copy = bf16[8,128]", 0, 999, plane="/host:CPU", module=None),  # host: not device
    ]
    runs, per_op = op_seconds(events, MODULE)
    assert runs == 2
    assert list(per_op) == ["%copy = bf16[8,128]", "%fusion = f32[8,128]"]  # largest first
    assert per_op["%copy = bf16[8,128]"] == pytest.approx(70e-6)
    assert per_op["%fusion = f32[8,128]"] == pytest.approx(40e-6)
    assert op_seconds(events, "jit_mkt_reference") == (0, {})
