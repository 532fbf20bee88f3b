"""Worker that measures a task's own rounding: how far the reference, run in its inputs'
dtypes, lands from the same function run on those inputs in f32. Imports jax.

    python -m maxkernel_tui.kernels.rounding_worker

reads one task folder per line on stdin and answers one JSON line per folder (a
`RoundingSpread`, kernels/importers/calibration.py): for each candidate tolerance, the largest
share of it the reference's own rounding uses, at the derived configurations and two seeds.
A 16-bit reference whose intermediates are rounded (a bf16 matmul result before an exponential)
can disagree with any other valid evaluation order by more than a default tolerance; this is
what `tasks import` measures before it settles on one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.importers.calibration import SEEDS, TOLERANCE_LADDER, RoundingSpread
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY


def rounding_spread(folder: Path) -> RoundingSpread:
    try:
        task = load_task(folder)
        module = runtime.load_reference(task)
        configs = [c for c in (CHECK, HELDOUT) if c in task.configs] or [task.configs[0]]
        used = dict.fromkeys(TOLERANCE_LADDER, 0.0)
        for config in configs:
            for seed in SEEDS:
                dynamic, static = runtime.make_inputs(task, module, config, seed)
                run = runtime.jitted_reference(module, len(dynamic), len(static))
                with jax.default_matmul_precision("highest"):  # as the harness's reference
                    written = run(*dynamic, *static)
                    widened = run(*[_in_f32(a) for a in dynamic], *static)
                for tolerance in TOLERANCE_LADDER:
                    share = _share(written, widened, tolerance)
                    used[tolerance] = max(used[tolerance], share)
    except TaskError as error:
        return RoundingSpread(error=str(error))
    except Exception as error:  # a reference that only runs in its own dtypes
        return RoundingSpread(error=f"the reference does not run in f32: {error}".splitlines()[0])
    return RoundingSpread(used=used, configs=tuple(configs))


def _in_f32(value: Any) -> Any:
    if isinstance(value, jax.Array) and jnp.issubdtype(value.dtype, jnp.floating):
        return value.astype(jnp.float32) if value.dtype.itemsize < 4 else value
    return value


def _share(written: Any, widened: Any, tolerance: float) -> float:
    """The largest |written - widened| / (atol + rtol·|widened|) over every output leaf."""
    worst = 0.0
    for a, b in zip(jax.tree.leaves(written), jax.tree.leaves(widened), strict=True):
        got = np.asarray(jnp.asarray(a, jnp.float32), np.float64)
        want = np.asarray(jnp.asarray(b, jnp.float32), np.float64)
        finite = np.isfinite(got) & np.isfinite(want)
        error = np.abs(got - want)[finite]
        allowed = tolerance + tolerance * np.abs(want[finite])
        worst = max(worst, float((error / allowed).max(initial=0.0)))
    return worst


def main() -> None:
    reply(READY)
    for line in sys.stdin:
        if line.strip():
            reply(rounding_spread(Path(line.strip())).to_json())


if __name__ == "__main__":
    main()
