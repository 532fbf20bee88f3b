"""Task folders read in place, in each of MaxKernel's ways of writing sizes (named integers; a
dict of sizes read inside get_inputs, with string entries; bare literals in the calls; a
module-level dict with fixed keys), across families whose sizes coincide in production (a GEMM
+ bias with m = n, a GEMM + row sum whose depth equals its width, cross attention with equal
lengths and head dims, a group norm whose channels equal its batch, sizes tied only through a
reshape): describing traces the reference, so the independent sizes get different held-out
values, the tied ones (contracted, broadcast, reshaped, divided by the group count) stay equal,
and the derived configurations validate (check run, heldout traced). Described in this process
(the test imports jax)."""

import pytest

from maxkernel_tui.kernels import describe
from maxkernel_tui.kernels.config_names import HELDOUT
from maxkernel_tui.kernels.loader import load_task, with_groups
from tests.support.maxkernel_styles import STYLES, TIE_FAMILIES, write_styled

pytestmark = pytest.mark.slow  # jax in this process; 20 folders traced, about 40 s here

CASES = [(family, style) for family in TIE_FAMILIES for style in STYLES]
# where each family's sizes sit in its held-out inputs: size -> (input, axis)
AXES = {
    "gemm_bias_m_eq_n": {"batch": (0, 0), "d_in": (0, 1), "d_out": (1, 1)},
    "gemm_rowsum_in_eq_out": {"batch": (0, 0), "d_in": (0, 1), "d_out": (1, 1)},
    "attention_equal_lens": {
        "q_len": (0, 1),
        "head_dim": (0, 2),
        "kv_len": (1, 1),
        "v_dim": (2, 2),
    },
    "groupnorm_batch_eq_channels": {"batch": (0, 0), "channels": (0, 1)},
    "reshape_tied": {"rows": (0, 0), "cols": (0, 1), "scale_rows": (1, 0)},
}
# the axes each family's ties hold equal: a contraction's sides, a bias and its columns
HELD_EQUAL = {
    "gemm_bias_m_eq_n": [((0, 1), (1, 0)), ((1, 1), (2, 0))],
    "gemm_rowsum_in_eq_out": [((0, 1), (1, 0)), ((1, 1), (2, 0))],
    "attention_equal_lens": [((0, 2), (1, 2)), ((1, 1), (2, 1))],
    "groupnorm_batch_eq_channels": [((0, 1), (1, 0))],
    "reshape_tied": [((0, 0), (1, 0))],
}


@pytest.mark.parametrize(("family", "style"), CASES)
def test_coinciding_independent_sizes_part_at_heldout_and_tied_ones_stay_tied(
    tmp_path, family, style
):
    folder = write_styled(tmp_path, family, style)
    described = describe.describe_folder(folder, with_cost=False)
    assert described.error is None, described.error
    assert described.configs["check"].reference_seconds is not None  # check ran: it validates
    held = [spec.shape for spec in described.configs[HELDOUT].inputs]
    axis = AXES[family]

    def size(name: str) -> int:
        where, dim = axis[name]
        return held[where][dim]

    for first, second in TIE_FAMILIES[family].apart:
        assert size(first) != size(second), (first, second, held)
    for first, second in TIE_FAMILIES[family].ties:
        assert size(first) == size(second), (first, second, held)
    for (a, i), (b, j) in HELD_EQUAL[family]:
        assert held[a][i] == held[b][j], held
    if family == "groupnorm_batch_eq_channels":
        groups = described.configs[HELDOUT].static[0]
        assert size("channels") % groups == 0
    # what loading the folder plans with the groups describing answered is what was traced
    static = load_task(folder, traced_ties=False)
    planned = with_groups(static, tuple(tuple(g) for g in described.tie_groups))
    assert planned.derivation.sizes[HELDOUT] != static.derivation.sizes[HELDOUT]
