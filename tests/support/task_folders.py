"""Task folders written for these tests: MaxKernel's plain style (sizes as local integers,
fixed keys, `get_inputs(dtype=jnp.float32)` returning `[dynamic], [static]`) and JAXBench's
native style (`CONFIG`, `create_inputs`, `workload`, `get_flops`, an `optimized.py` with a
`benchmark()` helper and a `__main__` block), across families."""

from __future__ import annotations

import textwrap
from pathlib import Path

_YAML = """task_id: {task_id}
description: Kernel task for {task_id}
input_gen_code: ""
atol: {tol}
rtol: {tol}
"""

PLAIN = {
    "41k_Gemm_Add_ReLU": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            batch_size = 256
            in_features = 512
            out_features = 256
            key = jax.random.key(0)
            k1, k2 = jax.random.split(key)
            x = jax.random.normal(k1, (batch_size, in_features), dtype=dtype)
            w = jax.random.normal(k2, (in_features, out_features), dtype=dtype) * 0.05
            b = jax.random.normal(jax.random.key(0xBADC0DE), (out_features,), dtype=dtype)
            return [x, w, b], []


        def computation(x, w, b):
            return jax.nn.relu(x @ w + b)
        """,
    "12p_RMSNorm": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            batch = 4
            seq = 1024
            hidden = 4096
            x = jax.random.normal(jax.random.key(0), (batch, seq, hidden), dtype=dtype)
            scale = jax.random.normal(jax.random.key(1), (hidden,), dtype=dtype) * 0.1 + 1.0
            return [x, scale], [1e-5]


        def computation(x, scale, eps):
            r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
            return x * r * scale
        """,
    "1p_Attention_Static": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            batch, heads = 2, 4
            seq_len = 2048
            head_dim = 128
            k1, k2, k3 = jax.random.split(jax.random.key(42), 3)
            q = jax.random.normal(k1, (batch, heads, seq_len, head_dim), dtype=dtype)
            k = jax.random.normal(k2, (batch, heads, seq_len, head_dim), dtype=dtype)
            v = jax.random.normal(k3, (batch, heads, seq_len, head_dim), dtype=dtype)
            return [q, k, v], [seq_len, head_dim]


        def computation(q, k, v, seq_len, head_dim):
            s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(float(head_dim))
            mask = jnp.tril(jnp.ones((seq_len, seq_len), bool))
            s = jnp.where(mask, s, -1e30)
            return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)
        """,
    "6p_Paged_Gather": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            num_pages = 512
            page_size = 16
            context = 8192
            head_dim = 128
            q = jax.random.normal(jax.random.key(0), (head_dim,), dtype=dtype)
            shape = (num_pages, page_size, head_dim)
            pages = jax.random.normal(jax.random.key(1), shape, dtype=dtype)
            table = jax.random.permutation(jax.random.key(2), num_pages)
            return [q, pages, table], [context]


        def computation(q, pages, table, context):
            kv = pages[table].reshape(context, pages.shape[-1])
            return jax.nn.softmax(kv @ q) @ kv
        """,
    "18k_Conv2D_ReLU": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            batch = 128
            in_channels = 3
            out_channels = 16
            height = width = 32
            kernel_size = 3
            x_shape = (batch, in_channels, height, width)
            w_shape = (out_channels, in_channels, kernel_size, kernel_size)
            x = jax.random.normal(jax.random.key(0), x_shape, dtype=dtype)
            w = jax.random.normal(jax.random.key(1), w_shape, dtype=dtype)
            return [x, w], []


        def computation(x, w):
            y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")
            return jax.nn.relu(y)
        """,
}

JAXBENCH_BASELINE = """
    \"\"\"GEMM with a bias, as JAXBench writes a baseline.\"\"\"
    import jax
    import jax.numpy as jnp

    CONFIG = {
        'name': 'gemm_bias',
        'model': 'test-model',
        'operator': 'gemm',
        'M': 1024,
        'K': 4096,
        'N': 2048,
    }


    def create_inputs(dtype=jnp.bfloat16):
        key = jax.random.PRNGKey(42)
        k1, k2 = jax.random.split(key)
        x = jax.random.normal(k1, (CONFIG['M'], CONFIG['K']), dtype=dtype)
        w = jax.random.normal(k2, (CONFIG['K'], CONFIG['N']), dtype=dtype) * 0.02
        return x, w


    def workload(x, w):
        return jnp.dot(x, w).reshape(CONFIG['M'], CONFIG['N'])


    def get_flops():
        return 2 * CONFIG['M'] * CONFIG['K'] * CONFIG['N']


    def benchmark(num_warmup=2, num_iters=5):
        import time
        x, w = create_inputs()
        start = time.perf_counter()
        for _ in range(num_iters):
            workload(x, w).block_until_ready()
        return (time.perf_counter() - start) / num_iters


    if __name__ == '__main__':
        print(benchmark())
    """

JAXBENCH_EXPERT = """
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    CONFIG = {'name': 'gemm_bias', 'M': 1024, 'K': 4096, 'N': 2048}
    TUNED_PARAMS = {'block_m': 256, 'block_n': 512}


    def _kernel(x_ref, w_ref, o_ref):
        o_ref[...] = jnp.dot(
            x_ref[...], w_ref[...], preferred_element_type=jnp.float32
        ).astype(o_ref.dtype)


    def workload(x, w):
        bm, bn = TUNED_PARAMS['block_m'], TUNED_PARAMS['block_n']
        m, n = CONFIG['M'], CONFIG['N']
        return pl.pallas_call(
            _kernel,
            grid=(m // bm, n // bn),
            in_specs=[
                pl.BlockSpec((bm, x.shape[1]), lambda i, j: (i, 0)),
                pl.BlockSpec((w.shape[0], bn), lambda i, j: (0, j)),
            ],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        )(x, w)


    def benchmark(num_iters=5):
        import time
        start = time.perf_counter()
        return time.perf_counter() - start


    if __name__ == '__main__':
        print(benchmark())
    """


# JAXBench's native RMSNorm, its sequence as long as its model width (4096 = 4096): which of the
# two the reference ties to the scale only tracing tells (traced_ties.py).
JAXBENCH_RMSNORM = """
    \"\"\"RMSNorm, as JAXBench writes a baseline.\"\"\"
    import jax
    import jax.numpy as jnp

    CONFIG = {
        'name': 'rmsnorm',
        'model': 'test-model',
        'operator': 'rmsnorm',
        'batch': 4,
        'seq_len': 4096,
        'emb_dim': 4096,
        'eps': 1e-6,
    }


    def create_inputs(dtype=jnp.float32):
        key = jax.random.PRNGKey(42)
        k1, k2 = jax.random.split(key)
        shape = (CONFIG['batch'], CONFIG['seq_len'], CONFIG['emb_dim'])
        x = jax.random.normal(k1, shape, dtype=dtype)
        scale = 1.0 + 0.1 * jax.random.normal(k2, (CONFIG['emb_dim'],), dtype=dtype)
        return x, scale


    def workload(x, scale):
        variance = jnp.mean(x * x, axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(variance + CONFIG['eps']) * scale


    def get_flops():
        return 4 * CONFIG['batch'] * CONFIG['seq_len'] * CONFIG['emb_dim']


    if __name__ == '__main__':
        print(workload(*create_inputs()).shape)
    """

# At its production sizes, as MaxKernel's dataset writes it: describing it compiles a GEMM of
# 4096 x 8192 x 8192 for the TPU, the built-in agent checks its precision at 2048 (the
# workbench's slowest start; tests that only need the style use PLAIN's small sizes).
PLAIN_AT_PRODUCTION = {
    "36k_Matmul_Sigmoid_Sum": """
        import jax
        import jax.numpy as jnp


        def get_inputs(dtype=jnp.float32):
            batch_size = 4096
            in_features = 8192
            out_features = 8192
            key = jax.random.key(0)
            k1, k2, k3 = jax.random.split(key, 3)
            x = jax.random.uniform(k1, (batch_size, in_features), dtype=dtype)
            weight = jax.random.normal(k2, (in_features, out_features), dtype=dtype) * 0.02
            bias = jax.random.normal(k3, (out_features,), dtype=dtype) * 0.02
            return [x, weight, bias], []


        def computation(x, weight, bias):
            y = jnp.matmul(x, weight) + bias
            return jnp.sum(jax.nn.sigmoid(y), axis=1, keepdims=True)
    """,
}


def write_plain(root: Path, task_id: str, tol: float = 1e-3) -> Path:
    return write_plain_source(root, task_id, tol, {**PLAIN, **PLAIN_AT_PRODUCTION}[task_id])


def write_plain_source(root: Path, task_id: str, tol: float, source: str) -> Path:
    """A plain folder of `task_id` whose reference.py is `source` (dedented)."""
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel_task.yaml").write_text(_YAML.format(task_id=task_id, tol=tol))
    (folder / "reference.py").write_text(textwrap.dedent(source).lstrip())
    return folder


def write_jaxbench(root: Path, task_id: str = "8p_GEMM_Bias", expert: bool = True) -> Path:
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "baseline.py").write_text(textwrap.dedent(JAXBENCH_BASELINE).lstrip())
    if expert:
        (folder / "optimized.py").write_text(textwrap.dedent(JAXBENCH_EXPERT).lstrip())
    return folder


def write_jaxbench_rmsnorm(root: Path, task_id: str = "12p_RMSNorm") -> Path:
    """A JAXBench-native folder (no expert) whose production sizes coincide."""
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "baseline.py").write_text(textwrap.dedent(JAXBENCH_RMSNORM).lstrip())
    return folder


def move_inputs_to_yaml(folder: Path) -> None:
    """The plain format's other spelling: get_inputs in the yaml's input_gen_code only (its sizes
    are then not derived: the task keeps its production inputs)."""
    source = (folder / "reference.py").read_text()
    get_inputs, computation = source.split("\n\ndef computation")
    (folder / "reference.py").write_text("import jax\n\ndef computation" + computation)
    meta = (folder / "kernel_task.yaml").read_text().replace('input_gen_code: ""\n', "")
    code = "\n".join("  " + line for line in get_inputs.splitlines())
    (folder / "kernel_task.yaml").write_text(meta + "input_gen_code: |\n" + code + "\n")


# Small copies of tasks PLAIN_AT_PRODUCTION holds at production sizes, in the same style: the
# structure (a matmul whose epilogue reduces its rows) without the production cost.
PLAIN_SMALL = {
    "36k_Matmul_Sigmoid_Sum": PLAIN_AT_PRODUCTION["36k_Matmul_Sigmoid_Sum"]
    .replace("batch_size = 4096", "batch_size = 256")
    .replace("in_features = 8192", "in_features = 512")
    .replace("out_features = 8192", "out_features = 384"),
}


def write_plain_small(root: Path, task_id: str, tol: float = 1e-3) -> Path:
    """A plain folder of `task_id` at small sizes (PLAIN_SMALL)."""
    return write_plain_source(root, task_id, tol, PLAIN_SMALL[task_id])
