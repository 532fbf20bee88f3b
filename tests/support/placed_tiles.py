"""A sampled run's decided elements laid out at the output's shape, for tests that compare them
with a whole run."""

from __future__ import annotations

import numpy as np

from maxkernel_tui.kernels.evaluation.tiles.sampled_run import Decided


def placed(decided: Decided) -> tuple[np.ndarray, np.ndarray]:
    """The decided elements as a mask of the output's shape, and the output with the decided
    values in place (NaN elsewhere)."""
    output = np.full(int(np.prod(decided.shape)), np.nan, decided.values.dtype)
    output[decided.indices] = decided.values
    return decided.mask(), output.reshape(decided.shape)
