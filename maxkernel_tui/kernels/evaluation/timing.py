"""The timing check: only on a real TPU, in a fresh process. No jax here.

On a machine without a TPU the check is skipped and says why: TPU interpret mode on a CPU is
a simulator, so its times say nothing about the kernel on a TPU. On a TPU, the candidate and
the XLA reference are timed interleaved; the speedup is a ratio of medians with a bootstrap
95% interval, and it counts as a win only when the whole interval is above 1.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

from maxkernel_tui.kernels.evaluation.expert_figures import EXPERT_SPEEDUP
from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingRequest
from maxkernel_tui.kernels.evaluation.report import PASS, SKIP, SPEEDUP, Check, Timing
from maxkernel_tui.kernels.evaluation.stats import median_estimate, speedup
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.workers import (
    LineWorker,
    WorkerFailure,
    python_module_argv,
    scrubbed_env,
)

REPEATS = 50
WARMUPS = 5


def tpu_present() -> bool:
    """A TPU VM exposes its chips as /dev/accel* (v4, v5e, v5p, v6e) or /dev/vfio/* devices."""
    if os.environ.get("MAXKERNEL_TUI_NO_TPU"):
        return False
    return bool(glob.glob("/dev/accel*")) or bool(glob.glob("/dev/vfio/[0-9]*"))


def timing_check(kernel: Path, task: Task, timeout: float) -> tuple[Check, list[Timing]]:
    if not tpu_present():
        return Check(
            "timing",
            SKIP,
            "not measured: no TPU on this machine; times in TPU interpret mode on a "
            "CPU are a simulator's, not the kernel's, so none are shown",
        ), []
    expert = None if task.expert_path is None else str(task.expert_path)
    request = TimingRequest(
        str(kernel), str(task.folder), task.configs[0], REPEATS, WARMUPS, expert
    )
    worker = LineWorker(
        python_module_argv("maxkernel_tui.kernels.evaluation.timing_worker"), scrubbed_env()
    )
    try:
        answer = TimingAnswer.from_json(worker.ask(json.dumps(request.to_json()), timeout))
    except WorkerFailure as failure:
        return Check("timing", SKIP, f"not measured: the timing process failed: {failure}"), []
    finally:
        worker.close()
    return summarize_timing(answer)


def summarize_timing(answer: TimingAnswer) -> tuple[Check, list[Timing]]:
    """Medians, intervals and the speedup over the XLA reference, each labelled with its device."""
    if answer.platform != "tpu":
        return Check(
            "timing", SKIP, f"not shown: measured on {answer.platform}, which is not a TPU"
        ), []
    where = f"{answer.device} ({answer.platform})"
    candidate, reference = answer.samples.candidate, answer.samples.reference
    expert = answer.samples.expert
    timings = []
    programs = [("kernel", candidate), ("XLA reference", reference)]
    for what, samples in programs + ([("expert", expert)] if expert else []):
        estimate = median_estimate(samples)
        timings.append(
            Timing(
                what=what,
                kind="measured",
                device=where,
                median_s=estimate.median,
                ci95=(estimate.low, estimate.high),
                samples=len(samples),
                label=f"{what}: median {estimate.median * 1e3:.3f} ms (95% CI "
                f"{estimate.low * 1e3:.3f}-{estimate.high * 1e3:.3f} ms), measured wall time "
                f"around block_until_ready on {where}",
            )
        )
    gain = speedup(reference, candidate)
    timings.append(
        Timing(
            what=SPEEDUP,
            kind="measured",
            device=where,
            ratio=gain.ratio,
            ci95=(gain.low, gain.high),
            significant=gain.significant_win,
            label=f"speedup over the XLA reference {gain.describe()}, measured on {where}",
        )
    )
    versus_expert = "the task has no expert Pallas kernel"
    if expert:
        against = speedup(expert, candidate)
        versus_expert = f"{EXPERT_SPEEDUP} {against.describe()}"
        timings.append(
            Timing(
                what=EXPERT_SPEEDUP,
                kind="measured",
                device=where,
                ratio=against.ratio,
                ci95=(against.low, against.high),
                significant=against.significant_win,
                label=f"{versus_expert}, measured on {where} (interleaved)",
            )
        )
    return Check(
        "timing", PASS, f"speedup over the XLA reference {gain.describe()}; {versus_expert}"
    ), timings
