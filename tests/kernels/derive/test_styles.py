"""Task folders written in each of MaxKernel's ways of writing sizes (named integers; a dict of
sizes read by subscript with string entries beside the sizes and a bare size for a shape;
literals inside the calls; a module-level dict of sizes, as JAXBench's CONFIG), across families
(GEMM + epilogue, a GEMM with a row sum whose sizes all coincide, attention with 24 heads, a
conv whose every size is small, a GroupNorm of 48 groups): each derives `check` and `heldout`,
and sizes that must stay tied stay tied. Read statically here (no jax); test_styles_e2e.py
validates them in the describe worker."""

import pytest

from maxkernel_tui.kernels.config_names import BENCH, CHECK, HELDOUT
from maxkernel_tui.kernels.derive.sites import LITERAL_FROM
from maxkernel_tui.kernels.loader import load_task
from tests.support.maxkernel_styles import FAMILIES, STYLES, family_source, write_styled

CASES = [(family, style) for family in FAMILIES for style in STYLES]


def _sizes(family: str, style: str, config: str, tmp_path) -> dict[str, int]:
    """The derived sizes by the family's own names, whatever the style called them."""
    task = load_task(write_styled(tmp_path, family, style))
    assert task.derived, task.derivation.fallback
    derived = task.derivation.sizes[config]
    production = FAMILIES[family].sizes
    if style != "literal":
        return {name: derived[name] for name in production}
    return {name: derived.get(f"dim_{value}", value) for name, value in production.items()}


@pytest.mark.parametrize(("family", "style"), CASES)
def test_each_style_of_each_family_derives_check_and_heldout_marked_derived(
    tmp_path, family, style
):
    task = load_task(write_styled(tmp_path, family, style))
    assert task.configs == (BENCH, CHECK, HELDOUT) and task.source_format == "plain"
    sizes = task.derivation.sizes
    assert sizes[CHECK] != sizes[BENCH] and sizes[HELDOUT] != sizes[CHECK]
    assert task.derivation.keys >= 1  # the fixed key is made fresh by the seed


@pytest.mark.parametrize("style", STYLES)
def test_the_styles_of_one_family_derive_the_same_sizes(tmp_path, style):
    for family, spec in FAMILIES.items():
        if style == "literal" and min(spec.sizes.values()) < LITERAL_FROM:
            continue  # a literal batch of 2 is structure, not a size: the budget halves another
        for config in (CHECK, HELDOUT):
            named = _sizes(family, "named", config, tmp_path / "named")
            assert _sizes(family, style, config, tmp_path / style) == named, (family, config)


@pytest.mark.parametrize("style", STYLES)
def test_a_contraction_keeps_its_two_sides_equal_where_every_size_coincides(tmp_path, style):
    for config in (CHECK, HELDOUT):
        sizes = _sizes("gemm_rowsum_equal_sizes", style, config, tmp_path)
        assert sizes["batch"] == sizes["d_in"] == sizes["d_out"]


@pytest.mark.parametrize("style", STYLES)
def test_head_and_group_counts_keep_dividing_their_sizes(tmp_path, style):
    for config in (CHECK, HELDOUT):
        attention = _sizes("attention_heads", style, config, tmp_path / "a")
        assert attention["hidden"] % attention["heads"] == 0 and attention["heads"] == 24
        norm = _sizes("gemm_groupnorm", style, config, tmp_path / "n")
        assert norm["features"] % 48 == 0


def test_a_dict_of_sizes_keeps_its_strings_and_reads_a_bare_size_as_a_shape(tmp_path):
    source = family_source("gemm_epilogue", "dict")
    assert "'name': 'gemm_epilogue'" in source and "(k3, CONFIG['d_out']," in source
    task = load_task(write_styled(tmp_path, "gemm_epilogue", "dict"))
    assert [s.kind for s in task.derivation.sites] == ["entry"] * 3
    assert task.derivation.sizes[CHECK] == {"batch": 2048, "d_in": 2048, "d_out": 2048}


def test_a_conv_of_small_sizes_is_checked_at_a_batch_that_fits(tmp_path):
    """Every size of it is small enough to keep, yet its activation is 256 MiB in f32: left as
    it was, describing the task validated production sizes and grew held-out past them."""
    sizes = _sizes("conv_bias_relu", "named", CHECK, tmp_path)
    assert sizes["batch"] * sizes["c_in"] * sizes["height"] * sizes["width"] <= 2**23
    assert sizes["height"] == 128 and sizes["c_out"] == 128
