"""The order in which TPU generations are tried when a reference does not fit."""

import pytest

from maxkernel_tui.kernels.targets import fallback_chain


def test_fallback_goes_to_more_hbm_newest_first():
    assert [t.name for t in fallback_chain("v5e")] == ["v5e", "v6e", "v4", "v5p", "tpu7x"]
    assert [t.name for t in fallback_chain("v6e")] == ["v6e", "v5p", "tpu7x"]
    assert [t.name for t in fallback_chain("v5p")] == ["v5p", "tpu7x"]


def test_unknown_target_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown TPU target 'v9'; known: v5e, v6e, v4, v5p, tpu7x"):
        fallback_chain("v9")
