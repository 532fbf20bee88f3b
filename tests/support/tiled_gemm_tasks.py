"""A tiled GEMM whose fixed tiles are larger than the sizes a task derives for `check` and
`heldout`: JAXBench's native folder (write_jaxbench_tiled_gemm), the same GEMM as a task of
this project's own format with those sizes declared, and the expert's kernel as a candidate
for either (both entry points), honest or wrong at every size."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.maxkernel_dataset import write_jaxbench_tiled_gemm

_DECLARED_REFERENCE = """
    import jax
    import jax.numpy as jnp

    CONFIGS = {configs!r}


    def get_inputs(config="bench", seed=0):
        m, k, n = CONFIGS[config]
        key_a, key_b = jax.random.split(jax.random.key(seed))
        a = jax.random.normal(key_a, (m, k), jnp.bfloat16)
        b = jax.random.normal(key_b, (k, n), jnp.bfloat16) * {scale}
        return (a, b), ()


    def computation(a, b):
        return jnp.dot(a, b)
    """

_DECLARED_YAML = """task_id: {task_id}
description: Dense bf16 GEMM with declared check and held-out sizes.
input_gen_code: ""
atol: 1e-2
rtol: 1e-2
"""

# what a kernel that is wrong at every size writes instead of its accumulator
_HONEST_STORE = "o_ref[...] = acc_ref[...].astype(o_ref.dtype)"
_WRONG_STORE = "o_ref[...] = (acc_ref[...] + 1.0).astype(o_ref.dtype)"
# a tiling that refuses sizes its blocks do not divide, as jax's splash attention raises
_BLOCKS = "    bm, bn = block_shape\n"
_REFUSING_BLOCKS = _BLOCKS + (
    "    if x.shape[0] % bm or y.shape[1] % bn:\n"
    "        raise ValueError(f'{x.shape[0]}x{y.shape[1]} does not tile by {bm}x{bn}')\n"
)


def write_declared_gemm(
    root: Path,
    configs: dict[str, tuple[int, int, int]],
    task_id: str = "8k_GEMM_Declared",
    scale: float = 0.02,
) -> Path:
    """A task of this project's own format whose `bench`, `check` and `heldout` (M, K, N) are
    declared in its reference (nothing derived); `scale`: of the second operand's values."""
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel_task.yaml").write_text(_DECLARED_YAML.format(task_id=task_id))
    source = _DECLARED_REFERENCE.format(configs=configs, scale=scale)
    (folder / "reference.py").write_text(textwrap.dedent(source).lstrip())
    return folder


def write_tiled_candidate(
    path: Path,
    sizes: tuple[int, int, int],
    tiles: tuple[int, int, int],
    *,
    wrong: bool = False,
    refusing: bool = False,
) -> Path:
    """The expert of write_jaxbench_tiled_gemm as a candidate file at `path`, with JAXBench's
    entry point `workload` and this project's `computation`; `wrong` adds 1 to every output,
    `refusing` raises while traced at sizes its blocks do not divide."""
    folder = write_jaxbench_tiled_gemm(path.parent / f".{path.stem}-task", sizes, tiles)
    source = (folder / "optimized.py").read_text()
    assert _HONEST_STORE in source and _BLOCKS in source
    if wrong:
        source = source.replace(_HONEST_STORE, _WRONG_STORE)
    if refusing:
        source = source.replace(_BLOCKS, _REFUSING_BLOCKS)
    source += "\n\ndef computation(a, b):\n    return workload(a, b)\n"
    path.write_text(source)
    return path
