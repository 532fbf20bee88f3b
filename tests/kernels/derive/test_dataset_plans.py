"""Derived configurations of copies of MaxKernel's and JAXBench's own task folders at their real
production shapes, read statically (no jax): the sizes are found where those files write them,
and an expert's fixed tiles still divide the derived sizes."""

import ast

import pytest

from maxkernel_tui.kernels.config_names import BENCH, CHECK, HELDOUT
from maxkernel_tui.kernels.derive.rules import MAX_CHECK_ELEMENTS
from maxkernel_tui.kernels.derive.sites import find_sites
from maxkernel_tui.kernels.loader import load_task
from tests.support.maxkernel_dataset import write_jaxbench_tiled_gemm, write_maxkernel

# (M, K, N) in production and the expert's (block_m, block_n, block_k): the style of the test
# folders (256 x 512 tiles), and JAXBench's 8p (1024 x 2048 tiles, 1024 deep)
TILED = [
    ((1024, 4096, 2048), (256, 512, 512)),
    ((8192, 8192, 8192), (256, 512, 512)),
    ((8192, 8192, 28672), (1024, 2048, 1024)),
]


@pytest.mark.parametrize(("sizes", "tiles"), TILED)
def test_a_jaxbench_gemm_keeps_sizes_its_experts_fixed_tiles_divide(tmp_path, sizes, tiles):
    """`M, K, N = CONFIG['M'], ...` was read as a 3-D shape of 8192^3 elements (and `(M, K)`
    as no shape at all): halved to fit, check came out at M = K = N = 128, below the tiles."""
    task = load_task(write_jaxbench_tiled_gemm(tmp_path, sizes, tiles), traced_ties=False)
    bm, bn, bk = tiles
    for config in (CHECK, HELDOUT):
        s = task.derivation.sizes[config]
        assert s["M"] % bm == 0 and s["N"] % bn == 0 and s["K"] % bk == 0, (config, s)
    assert task.derivation.sizes[CHECK] != task.derivation.sizes[BENCH]


def test_mla_sizes_in_a_module_level_dict_read_through_an_alias_are_derived(tmp_path):
    """3p: `C = CONFIG` then `B, S, E = C['batch'], ...`: the sizes live outside get_inputs."""
    task = load_task(write_maxkernel(tmp_path, "3p_MLA_Attention"), traced_ties=False)
    assert task.derived, task.derivation.fallback
    check = task.derivation.sizes[CHECK]
    assert check["emb_dim"] < 7168 and check["emb_dim"] % 1024 == 0
    assert check["num_heads"] == 128 and check["qk_rope_head_dim"] == 64
    assert task.derivation.sizes[HELDOUT] != check


def test_gqa_sizes_unpacked_from_a_dict_keep_its_check_within_the_budget(tmp_path):
    """2p: `B, S = CONFIG['batch'], CONFIG['seq_len']` was read as a shape of 4 x 4096 (and
    `(B, S, Hq, D)` as none), so check kept batch 4 and 2048 positions: 4 x 128 x 2048^2 logits,
    more memory than the describe worker had (it died with no output)."""
    task = load_task(write_maxkernel(tmp_path, "2p_GQA_Attention"), traced_ties=False)
    check = task.derivation.sizes[CHECK]
    query = check["batch"] * check["seq_len"] * check["num_query_heads"] * check["head_dim"]
    assert query <= MAX_CHECK_ELEMENTS // 2, check
    assert check["num_query_heads"] % check["num_kv_heads"] == 0 and check["head_dim"] == 128


def test_a_group_count_unpacked_beside_the_features_leaves_the_features_room_to_move(tmp_path):
    """40k: `batch_size, in_features, out_features, num_groups = 4096, 8192, 8192, 512` was read
    as a shape of 4096 x 8192 x 8192 x 512 elements, halved to 512 groups of 512 features,
    pinned by the reference's literal 512: no held-out move was left."""
    task = load_task(write_maxkernel(tmp_path, "40k_Gemm_GroupNorm_Min_BiasAdd"), traced_ties=False)
    assert task.derived, task.derivation.fallback
    for config in (CHECK, HELDOUT):
        sizes = task.derivation.sizes[config]
        assert sizes["num_groups"] == 512 and sizes["out_features"] % 512 == 0
        assert sizes["out_features"] > 512
    assert task.derivation.sizes[HELDOUT] != task.derivation.sizes[CHECK]


SIZES_AS_STATIC_ARGS = """
import jax
import jax.numpy as jnp


def get_inputs():
    c = {"batch": 4, "q_heads": 64, "kv_heads": 8, "seq": 4096, "head_dim": 128}
    batch, seq, head_dim = c["batch"], c["seq"], c["head_dim"]
    kq, kk, kv = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(kq, (batch, c["q_heads"], seq, head_dim), jnp.bfloat16)
    kv_shape = (batch, c["kv_heads"], seq, head_dim)
    k = jax.random.normal(kk, kv_shape, jnp.bfloat16)
    v = jax.random.normal(kv, kv_shape, jnp.bfloat16)
    return (q, k, v), (seq, c["q_heads"], c["kv_heads"], head_dim)


def computation(q, k, v, S, H_q, H_kv, D):
    return q
"""


def test_sizes_returned_as_static_args_are_no_shape(tmp_path):
    """4p returns (seq, q_heads, kv_heads, head_dim) as static args: read as a shape of 268M
    elements, it was halved until seq was 128, below any attention kernel's tiles."""
    folder = tmp_path / "4p_Sparse_Attention"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text(
        'task_id: 4p_Sparse_Attention\ndescription: x\ninput_gen_code: ""\n'
    )
    (folder / "reference.py").write_text(SIZES_AS_STATIC_ARGS)
    task = load_task(folder, traced_ties=False)
    for config in (CHECK, HELDOUT):
        assert task.derivation.sizes[config]["seq"] % 512 == 0, task.derivation.sizes[config]
    assert task.derivation.sizes[CHECK]["seq"] >= 512


def test_held_out_sizes_move_a_shape_not_a_constant_passed_beside_them(tmp_path):
    """3p's rope theta (10000, a static arg) moved alone at heldout: the same shapes as check."""
    task = load_task(write_maxkernel(tmp_path, "3p_MLA_Attention"), traced_ties=False)
    check, heldout = task.derivation.sizes[CHECK], task.derivation.sizes[HELDOUT]
    moved = {name for name in check if check[name] != heldout[name]}
    assert moved - {"rope_theta"}, moved


def test_module_level_sizes_read_through_local_names_are_shapes(tmp_path):
    """3p's sizes as module-level constants, unpacked into short local names in get_inputs:
    `(B, S, E)` is a shape of those sizes (it bounds what check may hold)."""
    folder = write_maxkernel(tmp_path, "3p_MLA_Attention")
    source = (folder / "reference.py").read_text()
    constants = "BATCH, SEQ_LEN, EMB_DIM = 4, 2048, 7168\n\n\ndef get_inputs():\n"
    source = source.replace("def get_inputs():\n", constants).replace(
        "B, S, E = C['batch'], C['seq_len'], C['emb_dim']", "B, S, E = BATCH, SEQ_LEN, EMB_DIM"
    )
    sites = find_sites(ast.parse(source), "get_inputs")
    assert ("BATCH", "SEQ_LEN", "EMB_DIM") in sites.shapes
    assert ("EMB_DIM", "q_lora_rank") in sites.shapes
