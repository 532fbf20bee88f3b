"""The timing check: only on a real TPU, in a fresh process. No jax here.

On a machine without a TPU the check is skipped and says why: TPU interpret mode on a CPU is
a simulator, so its times say nothing about the kernel on a TPU. On a TPU, the candidate and
the XLA reference are timed interleaved, each call's device time read from a profiler trace
(device_clock.py; the wall clock only as a labelled fallback), after the candidate matched the
reference on the device; the speedup is a ratio of medians with a bootstrap 95% interval, and it
counts as a win only when the whole interval is above 1. Each measured timing also appends a
calibration record (device_timer.py).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from maxkernel_tui.kernels.evaluation.protocol import WALL_CLOCK, TimingAnswer
from maxkernel_tui.kernels.evaluation.timing.device_timer import (
    record_timing,
    run_timing_worker,
)
from maxkernel_tui.kernels.evaluation.timing.stats import Speedup, median_estimate, speedup
from maxkernel_tui.kernels.report.basis import SPEEDUP, Basis
from maxkernel_tui.kernels.report.checks import FAIL, PASS, SKIP, Check, Timing
from maxkernel_tui.kernels.report.expert import EXPERT_SPEEDUP
from maxkernel_tui.kernels.report.reasons import Reason, Said, Timed
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.report.words import clock_words
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.workers import FailureKind, WorkerFailure

REPEATS = 50
WARMUPS = 5


def tpu_present() -> bool:
    """A TPU VM exposes its chips as /dev/accel* (v4, v5e, v5p, v6e) or /dev/vfio/* devices."""
    if os.environ.get("MAXKERNEL_TUI_NO_TPU"):
        return False
    return bool(glob.glob("/dev/accel*")) or bool(glob.glob("/dev/vfio/[0-9]*"))


def timing_check(
    program: Path,
    kernel: str,
    task: Task,
    timeout: float,
    calibration_file: Path | None = None,
) -> tuple[Check, list[Timing]]:
    """The carried `program` of the kernel named `kernel` timed beside the XLA reference on this
    machine's TPU; a skipped check with no TPU."""
    if not tpu_present():
        return Check(CheckName.TIMING, SKIP, Reason.NO_TPU), []
    try:
        answer = run_timing_worker(program, task, timeout, REPEATS, WARMUPS, task.expert_path)
    except WorkerFailure as failure:
        busy = failure.kind == FailureKind.BUSY
        why = Reason.TIMING_BUSY if busy else Reason.TIMING_FAILED
        return Check(CheckName.TIMING, SKIP, why, Said(str(failure))), []
    record_timing(answer, kernel, task.task_id, calibration_file)
    return summarize_timing(answer)


def summarize_timing(answer: TimingAnswer) -> tuple[Check, list[Timing]]:
    """Medians, intervals and the speedup over the XLA reference, each labelled with its device."""
    if answer.platform != "tpu":
        return Check(CheckName.TIMING, SKIP, Reason.TIMING_NOT_ON_TPU, Said(answer.platform)), []
    if answer.numerics is not None and not answer.numerics.ok:
        return Check(CheckName.TIMING, FAIL, Reason.WRONG_ON_DEVICE, answer.numerics), []
    where = f"{answer.device} ({answer.platform})"
    device_clock = answer.clock != WALL_CLOCK
    clock = clock_words(device_clock, answer.clock_note)
    candidate, reference = answer.samples.candidate, answer.samples.reference
    expert = answer.samples.expert
    timings = []
    programs = [("kernel", candidate), ("XLA reference", reference)]
    # a training kernel: its backward program (forward and backward) against XLA's jax.vjp
    scope = (
        f" (forward and backward, gradients of {', '.join(answer.gradients)}, against XLA's "
        "jax.vjp of the reference)"
        if answer.gradients
        else ""
    )
    for what, samples in programs + ([("expert", expert)] if expert else []):
        estimate = median_estimate(samples)
        timings.append(
            Timing(
                what=what,
                kind=Basis.MEASURED,
                device=where,
                median_s=estimate.median,
                ci95=(estimate.low, estimate.high),
                samples=len(samples),
                label=f"{what}{scope}: median {estimate.median * 1e3:.3f} ms (95% CI "
                f"{estimate.low * 1e3:.3f}-{estimate.high * 1e3:.3f} ms), measured {clock} "
                f"on {where}",
            )
        )
    gain = speedup(reference, candidate)
    # the device runs the reference as written; XLA at the tolerance's MXU passes is estimated
    label = f"{SPEEDUP} as written{scope} {gain.describe()}, measured ({clock}) on {where}"
    timings.append(_speedup_timing(SPEEDUP, gain, where, label))
    against: Speedup | None = None
    if expert:
        against = speedup(expert, candidate)
        label = (
            f"{EXPERT_SPEEDUP} {against.describe()}, measured ({clock}) on {where} (interleaved)"
        )
        timings.append(_speedup_timing(EXPERT_SPEEDUP, against, where, label))
    expert_figures = against.figures if against else None
    timed = Timed(gain.figures, device_clock, expert_figures, answer.numerics, answer.clock_note)
    why = Reason.SPEEDUP_SIGNIFICANT if gain.significant_win else Reason.SPEEDUP_NOT_SIGNIFICANT
    return Check(
        CheckName.TIMING,
        PASS,
        why,
        timed,
        # the device compared the kernel with the reference at the timed (production) shapes
        production_shapes=answer.numerics is not None,
    ), timings


def _speedup_timing(what: str, gain: Speedup, where: str, label: str) -> Timing:
    return Timing(
        what=what,
        kind=Basis.MEASURED,
        device=where,
        ratio=gain.ratio,
        ci95=(gain.low, gain.high),
        significant=gain.significant_win,
        label=label,
    )
