"""12p RMSNorm checked against a float64 NumPy formulation."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # runs the references under jax on their check shapes


def test_12p_rmsnorm_matches_numpy(reference):
    _, (x, scale), (eps,), out = reference("12p_RMSNorm")
    x64 = np.asarray(x, np.float64)
    normed = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + eps)
    expected = normed * np.asarray(scale, np.float64)
    np.testing.assert_allclose(np.asarray(out, np.float64), expected, atol=0.02, rtol=0.02)
    assert out.dtype.name == "bfloat16"
