"""JAXBench-native task folders whose expert `optimized.py` is written the way JAXBench's own
experts are (jax's Pallas TPU ops copied into the file, then CONFIG / TUNED_PARAMS /
create_inputs / workload / benchmark): a frozen dataclass of block sizes that fills its defaults
in `__post_init__` with `object.__setattr__`, a pytree kernel object with `__call__` and a
`manual_sharding_spec(sharding: jax.sharding.NamedSharding)` that builds
`jax.sharding.PartitionSpec`s, an options object read as `self.config`; one variant returns
float32 where the baseline returns bfloat16 (as JAXBench's MLA expert does). Small shapes, so the
whole evaluation runs in seconds on a CPU."""

from __future__ import annotations

import textwrap
from pathlib import Path

BASELINE = """
    \"\"\"Scaled matrix product, as JAXBench writes a baseline.\"\"\"
    import jax
    import jax.numpy as jnp

    CONFIG = {
        'name': 'scaled_matmul',
        'model': 'test-model',
        'operator': 'matmul',
        'M': 256,
        'K': 512,
        'N': 256,
    }


    def create_inputs(dtype=jnp.bfloat16):
        key = jax.random.PRNGKey(42)
        k1, k2 = jax.random.split(key)
        x = jax.random.normal(k1, (CONFIG['M'], CONFIG['K']), dtype=dtype)
        w = jax.random.normal(k2, (CONFIG['K'], CONFIG['N']), dtype=dtype) * 0.02
        return x, w


    def workload(x, w):
        return jnp.dot(x, w) * 0.5


    def benchmark(num_iters=5):
        import time
        x, w = create_inputs()
        start = time.perf_counter()
        workload(x, w).block_until_ready()
        return time.perf_counter() - start


    if __name__ == '__main__':
        print(benchmark())
    """

EXPERT = """
    \"\"\"Scaled matmul TPU kernel, in the style of jax's Pallas ops.\"\"\"
    from __future__ import annotations

    import dataclasses
    import functools

    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl


    @dataclasses.dataclass(frozen=True, slots=True)
    class BlockSizes:
      block_m: int
      block_n: int | None = None

      def __post_init__(self):
        if self.block_n is None:
          object.__setattr__(self, "block_n", self.block_m)


    @dataclasses.dataclass(frozen=True)
    class Options:
      scale: float = 0.5


    def _kernel(x_ref, w_ref, o_ref, *, scale):
      acc = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
      o_ref[...] = (acc * scale).astype(o_ref.dtype)


    @jax.tree_util.register_pytree_node_class
    class ScaledMatmulKernel:

      def __init__(self, block_sizes: BlockSizes, config: Options):
        self.block_sizes = block_sizes
        self.config = config

      def __call__(self, x, w):
        m, n = x.shape[0], w.shape[1]
        bm, bn = min(self.block_sizes.block_m, m), min(self.block_sizes.block_n, n)
        return pl.pallas_call(
            functools.partial(_kernel, scale=self.config.scale),
            grid=(m // bm, n // bn),
            in_specs=[
                pl.BlockSpec((bm, x.shape[1]), lambda i, j: (i, 0)),
                pl.BlockSpec((w.shape[0], bn), lambda i, j: (0, j)),
            ],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n), @OUT_DTYPE@),
        )(x, w)

      def manual_sharding_spec(self, sharding: jax.sharding.NamedSharding):
        \"\"\"A shard_map partition spec for the kernel's operands.\"\"\"
        spec = sharding.spec
        return jax.sharding.PartitionSpec(spec[0], None)

      def tree_flatten(self):
        return (), (self.block_sizes, self.config)

      @classmethod
      def tree_unflatten(cls, aux, children):
        del children
        return cls(*aux)


    CONFIG = {'name': 'pallas_scaled_matmul', 'M': 256, 'K': 512, 'N': 256}
    TUNED_PARAMS = {'block_m': 128}


    def create_inputs(dtype=jnp.bfloat16):
        key = jax.random.PRNGKey(42)
        k1, k2 = jax.random.split(key)
        x = jax.random.normal(k1, (CONFIG['M'], CONFIG['K']), dtype=dtype)
        w = jax.random.normal(k2, (CONFIG['K'], CONFIG['N']), dtype=dtype) * 0.02
        return x, w


    def workload(x, w):
        kernel = ScaledMatmulKernel(BlockSizes(block_m=TUNED_PARAMS['block_m']), Options())
        return kernel(x, w)


    def benchmark(num_warmup=2, num_iters=5):
        import time
        inputs = create_inputs()
        out = jax.jit(workload)(*inputs)
        start = time.perf_counter()
        out.block_until_ready()
        return time.perf_counter() - start


    if __name__ == '__main__':
        print(benchmark())
    """


def expert_source(out_dtype: str = "x.dtype") -> str:
    """The expert file; `out_dtype` is its output's dtype expression (`jnp.float32`: the
    MLA expert's widening)."""
    return textwrap.dedent(EXPERT).lstrip().replace("@OUT_DTYPE@", out_dtype)


def write_task(root: Path, out_dtype: str = "x.dtype") -> Path:
    """A JAXBench-native folder: baseline.py and this expert as optimized.py."""
    folder = root / "9p_Scaled_Matmul"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "baseline.py").write_text(textwrap.dedent(BASELINE).lstrip())
    (folder / "optimized.py").write_text(expert_source(out_dtype))
    return folder


PLAIN_REFERENCE = """
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.bfloat16):
        m = 256
        k = 512
        n = 256
        k1, k2 = jax.random.split(jax.random.key(0))
        x = jax.random.normal(k1, (m, k), dtype=dtype)
        w = jax.random.normal(k2, (k, n), dtype=dtype) * 0.02
        return [x, w], []


    def computation(x, w):
        return jnp.dot(x, w) * 0.5
    """

PLAIN_YAML = """task_id: 9k_Scaled_Matmul
description: Scaled matrix product in bfloat16.
input_gen_code: ""
atol: 1e-2
rtol: 1e-2
"""


def write_plain_task(root: Path) -> Path:
    """The same task in MaxKernel's plain format (our own contract: the reference's types)."""
    folder = root / "9k_Scaled_Matmul"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel_task.yaml").write_text(PLAIN_YAML)
    (folder / "reference.py").write_text(textwrap.dedent(PLAIN_REFERENCE).lstrip())
    return folder


def plain_candidate(out_dtype: str = "x.dtype") -> str:
    """The expert's kernel as a candidate for the plain task (entry point `computation`)."""
    return expert_source(out_dtype).replace("workload", "computation")
