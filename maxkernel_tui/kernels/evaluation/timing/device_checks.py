"""What the timing worker does on a TPU besides timing: the candidate against the reference on
the device at production shapes (after every CPU check passed), and the model's estimate of the
candidate for the calibration record. Imports jax.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from maxkernel_tui.kernels.evaluation.compare import compare_arrays
from maxkernel_tui.kernels.perf.calibration import KernelFeatures, ModelPoint, generation_of
from maxkernel_tui.kernels.perf.model import estimate
from maxkernel_tui.kernels.perf.outside import outside_traffic
from maxkernel_tui.kernels.perf.pallas_analysis import analyze
from maxkernel_tui.kernels.report.reasons import DeviceNumerics
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.kernels.task import Tolerance


def device_numerics(
    candidate: Callable[..., Any],
    reference: Callable[..., Any],
    inputs: Sequence[Any],
    tolerance: Tolerance,
    config: str,
) -> DeviceNumerics:
    """Both programs on the same inputs on the device, output leaf by output leaf; the candidate
    runs first (it cannot find the reference's result in memory)."""
    got = jax.tree.leaves(jax.block_until_ready(candidate(*inputs)))
    want = jax.tree.leaves(jax.block_until_ready(reference(*inputs)))
    if len(got) != len(want):
        return DeviceNumerics(False, config, outputs=len(got), expected=len(want))
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        comparison = compare_arrays(np.asarray(g), np.asarray(w), tolerance)
        if not comparison.ok:
            return DeviceNumerics(False, config, index, comparison)
    return DeviceNumerics(True, config)


def model_point(
    computation: Callable[..., Any], specs: Sequence[Any], device_kind: str, io_bytes: int
) -> ModelPoint | None:
    """The model's estimate of the candidate for this device's generation; None when the
    generation is not in the model's table or the program has no Pallas kernel."""
    generation = generation_of(device_kind)
    if generation is None:
        return None
    traced = jax.make_jaxpr(computation)(*specs)
    kernels = analyze(traced)
    if not kernels:
        return None
    found = estimate(
        kernels, TARGETS[generation], io_bytes=io_bytes, outside=outside_traffic(traced)
    )
    features = KernelFeatures(
        bound=found.bound,
        steps=sum(k.steps for k in kernels),
        hbm_bytes=found.hbm_bytes,
        flops=found.flops,
        vmem_bytes=found.vmem_bytes,
    )
    return ModelPoint(generation, found.seconds, features)
