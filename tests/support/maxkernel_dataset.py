"""Copies, in our own words, of task folders as MaxKernel's adapted dataset and JAXBench's native
benchmark write them, at their real production shapes (../shared/jaxbench-tasks.md): the ways
of writing sizes that derived configurations stumbled on.

- `2p_GQA_Attention`: a dict of sizes inside get_inputs unpacked into locals
  (`B, S = CONFIG['batch'], CONFIG['seq_len']`), BSHD layout, kv heads repeated 16 times;
- `3p_MLA_Attention`: a module-level dict of sizes read through an alias (`C = CONFIG`) and
  unpacked into locals (`B, S, E = C['batch'], ...`), the head sizes as static args;
- `28k_ConvTranspose3d_LayerNorm_GELU_Scaling` (kept whole in tests/data/issue40/conv_transpose3d):
  a LayerNorm of `out_channels` weights over the last spatial axis (64 = 2 x 32 after the
  stride-2 transposed conv: the sizes meet only in that broadcast);
- `40k_Gemm_GroupNorm_Min_BiasAdd`: sizes unpacked from one tuple in get_inputs, the group
  count (512) written again as a literal in the reference;
- `8p_GEMM_Tiled` (JAXBench native): `CONFIG` sizes unpacked in create_inputs, and an expert
  `optimized.py` whose tiles are fixed in `TUNED_PARAMS` (or a kernel whose tiles do not divide
  production, the attack side).
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from tests.support.paths import ISSUE40_TASKS

_YAML = (
    'task_id: {task_id}\ndescription: {task_id}\ninput_gen_code: ""\natol: {atol}\nrtol: {rtol}\n'
)

MAXKERNEL = {
    "2p_GQA_Attention": (
        (0.05, 0.05),
        """
        import jax
        import jax.numpy as jnp


        def get_inputs():
            CONFIG = {
                'name': 'llama3_405b_gqa',
                'batch': 4,
                'seq_len': 4096,
                'num_query_heads': 128,
                'num_kv_heads': 8,
                'head_dim': 128,
            }
            k1, k2, k3 = jax.random.split(jax.random.PRNGKey(42), 3)
            B, S = CONFIG['batch'], CONFIG['seq_len']
            Hq, Hkv, D = CONFIG['num_query_heads'], CONFIG['num_kv_heads'], CONFIG['head_dim']
            query = jax.random.normal(k1, (B, S, Hq, D), dtype=jnp.bfloat16)
            key_t = jax.random.normal(k2, (B, S, Hkv, D), dtype=jnp.bfloat16)
            value = jax.random.normal(k3, (B, S, Hkv, D), dtype=jnp.bfloat16)
            return [query, key_t, value], []


        def computation(query, key, value):
            B, S, Hq, D = query.shape
            G = Hq // key.shape[2]
            key = jnp.repeat(key[:, :, :, None, :], G, axis=3).reshape(B, S, Hq, D)
            value = jnp.repeat(value[:, :, :, None, :], G, axis=3).reshape(B, S, Hq, D)
            q, k, v = (t.transpose(0, 2, 1, 3) for t in (query, key, value))
            logits = jnp.einsum('bhqd,bhkd->bhqk', q, k) * (D ** -0.5)
            logits = jnp.where(jnp.tril(jnp.ones((S, S))), logits, -1e9)
            out = jnp.einsum('bhqk,bhkd->bhqd', jax.nn.softmax(logits, axis=-1), v)
            return out.transpose(0, 2, 1, 3)
        """,
    ),
    "3p_MLA_Attention": (
        (0.05, 0.01),
        """
        import jax
        import jax.numpy as jnp

        CONFIG = {
            'name': 'deepseek_v3_mla',
            'batch': 4,
            'seq_len': 2048,
            'emb_dim': 7168,
            'num_heads': 128,
            'q_lora_rank': 1536,
            'kv_lora_rank': 512,
            'qk_nope_head_dim': 128,
            'qk_rope_head_dim': 64,
            'v_head_dim': 128,
            'rope_theta': 10000,
        }


        def _rope(x, theta):
            s, half = x.shape[1], x.shape[-1] // 2
            freqs = 1.0 / (theta ** (jnp.arange(half, dtype=jnp.float32) * 2 / x.shape[-1]))
            angles = jnp.arange(s, dtype=jnp.float32)[:, None] * freqs[None, :]
            cos = jnp.cos(angles).astype(x.dtype)[None, :, None, :]
            sin = jnp.sin(angles).astype(x.dtype)[None, :, None, :]
            a, b = x[..., :half], x[..., half:]
            return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


        def get_inputs():
            C = CONFIG
            B, S, E = C['batch'], C['seq_len'], C['emb_dim']
            H = C['num_heads']
            ql, kvl = C['q_lora_rank'], C['kv_lora_rank']
            nope, rope, vd = C['qk_nope_head_dim'], C['qk_rope_head_dim'], C['v_head_dim']
            keys = jax.random.split(jax.random.PRNGKey(42), 7)
            dt = jnp.bfloat16
            x = jax.random.normal(keys[0], (B, S, E), dt)
            q_down = jax.random.normal(keys[1], (E, ql), dt) * 0.02
            q_up = jax.random.normal(keys[2], (ql, H * (nope + rope)), dt) * 0.02
            kv_down = jax.random.normal(keys[3], (E, kvl + rope), dt) * 0.02
            k_up = jax.random.normal(keys[4], (kvl, H * nope), dt) * 0.02
            v_up = jax.random.normal(keys[5], (kvl, H * vd), dt) * 0.02
            o_proj = jax.random.normal(keys[6], (H * vd, E), dt) * 0.02
            static = [H, nope, rope, vd, kvl, C['rope_theta']]
            return [x, q_down, q_up, kv_down, k_up, v_up, o_proj], static


        def computation(x, q_down, q_up, kv_down, k_up, v_up, o_proj, H, nope, rope, vd, kvl,
                        theta):
            B, S, E = x.shape
            q = ((x @ q_down) @ q_up).reshape(B, S, H, nope + rope)
            kv = x @ kv_down
            c, k_rope = kv[..., :kvl], kv[..., kvl:]
            k_nope = (c @ k_up).reshape(B, S, H, nope)
            v = (c @ v_up).reshape(B, S, H, vd)
            k_rope = jnp.broadcast_to(k_rope[:, :, None, :], (B, S, H, rope))
            q_full = jnp.concatenate([q[..., :nope], _rope(q[..., nope:], theta)], axis=-1)
            k_full = jnp.concatenate([k_nope, _rope(k_rope, theta)], axis=-1)
            logits = jnp.einsum('bqhd,bkhd->bhqk', q_full, k_full) * ((nope + rope) ** -0.5)
            logits = jnp.where(jnp.tril(jnp.ones((S, S), dtype=bool)), logits, -1e9)
            out = jnp.einsum('bhqk,bkhd->bqhd', jax.nn.softmax(logits, axis=-1), v)
            return out.reshape(B, S, H * vd) @ o_proj
        """,
    ),
    "40k_Gemm_GroupNorm_Min_BiasAdd": (
        (0.01, 0.01),
        """
        import jax
        import jax.numpy as jnp


        def get_inputs():
            batch_size, in_features, out_features, num_groups = 4096, 8192, 8192, 512
            key = jax.random.key(0)
            k1, k2, k3, k4 = jax.random.split(key, 4)
            x = jax.random.uniform(k1, (batch_size, in_features), dtype=jnp.float32)
            weight = jax.random.normal(k2, (out_features, in_features), dtype=jnp.float32) * 0.02
            linear_bias = jax.random.normal(k3, (out_features,), dtype=jnp.float32) * 0.02
            gn_weight = jnp.ones(out_features, dtype=jnp.float32)
            gn_bias = jnp.zeros(out_features, dtype=jnp.float32)
            bias = jax.random.normal(k4, (1, out_features, 1, 1), dtype=jnp.float32) * 0.02
            return [x, weight, linear_bias, gn_weight, gn_bias, bias], []


        def computation(x, weight, linear_bias, gn_weight, gn_bias, bias):
            num_groups = 512
            y = jnp.matmul(x, weight.T) + linear_bias
            n, c = y.shape
            g = y.reshape(n, num_groups, c // num_groups)
            mean = jnp.mean(g, axis=2, keepdims=True)
            var = jnp.var(g, axis=2, keepdims=True)
            y = ((g - mean) / jnp.sqrt(var + 1e-5)).reshape(n, c) * gn_weight + gn_bias
            m = jnp.min(y, axis=1, keepdims=True).reshape(1, 1, n, 1)
            return m + bias
        """,
    ),
}


# MaxKernel's adapted folders kept whole among issue 40's task folders
ADAPTED_FOLDERS = {
    "28k_ConvTranspose3d_LayerNorm_GELU_Scaling": ISSUE40_TASKS / "conv_transpose3d",
}


def write_maxkernel(root: Path, task_id: str) -> Path:
    """One of MAXKERNEL's folders under `root`, in the plain adapted format."""
    folder = root / task_id
    if task_id in ADAPTED_FOLDERS:
        shutil.copytree(ADAPTED_FOLDERS[task_id] / task_id, folder)
        return folder
    (atol, rtol), source = MAXKERNEL[task_id]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel_task.yaml").write_text(_YAML.format(task_id=task_id, atol=atol, rtol=rtol))
    (folder / "reference.py").write_text(textwrap.dedent(source).lstrip())
    return folder


_GEMM_BASELINE = """
    \"\"\"Dense bf16 GEMM, as JAXBench writes a baseline: sizes unpacked from CONFIG.\"\"\"
    import jax
    import jax.numpy as jnp

    CONFIG = {{
        'name': 'gemm_tiled',
        'model': 'test-model',
        'operator': 'dense_matmul',
        'M': {M},
        'K': {K},
        'N': {N},
    }}


    def create_inputs(dtype=jnp.bfloat16):
        key = jax.random.PRNGKey(42)
        k1, k2 = jax.random.split(key, 2)
        M, K, N = CONFIG['M'], CONFIG['K'], CONFIG['N']
        A = jax.random.normal(k1, (M, K), dtype=dtype)
        B = jax.random.normal(k2, (K, N), dtype=dtype) * 0.02
        return A, B


    def workload(A, B):
        return jnp.dot(A, B)


    def get_flops():
        return 2 * CONFIG['M'] * CONFIG['K'] * CONFIG['N']
    """

# A tiled matmul with its tiles fixed in TUNED_PARAMS, as JAXBench's experts fix them (the grid
# is the size over the tile: a tile that does not divide a size leaves rows unwritten)
_GEMM_EXPERT = """
    import functools

    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    CONFIG = {{'name': 'gemm_tiled', 'M': {M}, 'K': {K}, 'N': {N}}}
    TUNED_PARAMS = {{'block_shape': [{bm}, {bn}], 'block_k': {bk}}}


    def _kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


    @functools.partial(jax.jit, static_argnames=['block_shape', 'block_k'])
    def matmul(x, y, *, block_shape, block_k):
        bm, bn = block_shape
        return pl.pallas_call(
            _kernel,
            out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=0,
                in_specs=[
                    pl.BlockSpec((bm, block_k), lambda i, j, k: (i, k)),
                    pl.BlockSpec((block_k, bn), lambda i, j, k: (k, j)),
                ],
                out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
                grid=(x.shape[0] // bm, y.shape[1] // bn, x.shape[1] // block_k),
                scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
            ),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=('parallel', 'parallel', 'arbitrary')),
        )(x, y)


    def workload(A, B):
        params = TUNED_PARAMS
        return matmul(A, B, block_shape=tuple(params['block_shape']), block_k=params['block_k'])
    """


def write_jaxbench_tiled_gemm(
    root: Path,
    sizes: tuple[int, int, int],
    tiles: tuple[int, int, int],
    task_id: str = "8p_GEMM_Tiled",
) -> Path:
    """A JAXBench native GEMM folder at production (M, K, N) with an expert `optimized.py`
    whose tiles (block_m, block_n, block_k) are fixed."""
    (m, k, n), (bm, bn, bk) = sizes, tiles
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    baseline = _GEMM_BASELINE.format(M=m, K=k, N=n)
    (folder / "baseline.py").write_text(textwrap.dedent(baseline).lstrip())
    expert = _GEMM_EXPERT.format(M=m, K=k, N=n, bm=bm, bn=bn, bk=bk)
    (folder / "optimized.py").write_text(textwrap.dedent(expert).lstrip())
    return folder
