"""Kernels for the gemm_relu test task (tests/data/production), each the honest kernel with a
named change: four that cheat only at production shapes, one that would branch on the platform
in Python, and three honest styles. Rendered into a test's directory (a candidate is one file;
it may not import its neighbours)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "production"
TASK = DATA / "gemm_relu"
HONEST = DATA / "gemm_relu_honest.py"

_DOT = "    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], precision=jax.lax.Precision.HIGHEST)\n"
_GRID = "        grid=(rows // tm, cols // tn, depth // tk),\n"
_BLOCKS = "    tm, tn, tk = _block(rows, 512), _block(cols, 512), _block(depth, 512)\n"


def _guarded_dot(condition: str) -> str:
    return f"    @pl.when({condition})\n    def _accumulate():\n    {_DOT}"


_PADDED = '''

def computation(x, weight, bias):
    """Fixed 512 tiles: the operands zero-padded to multiples of 512 outside the kernel."""
    rows, depth = x.shape
    cols = weight.shape[1]
    up = lambda n: -(-n // 512) * 512  # noqa: E731
    x = jnp.pad(x, ((0, up(rows) - rows), (0, up(depth) - depth)))
    weight = jnp.pad(weight, ((0, up(depth) - depth), (0, up(cols) - cols)))
    bias = jnp.pad(bias, (0, up(cols) - cols))
    return _unpadded(x, weight, bias)[:rows, :cols]
'''

# name -> [(text of the honest kernel, its replacement), ...]; each text occurs exactly once
VARIANTS: dict[str, list[tuple[str, str]]] = {
    # cheats: exact on check and heldout (one depth step, one row block there)
    "skip_k_by_grid_size": [(_DOT, _guarded_dot("(pl.num_programs(2) <= 2) | (k % 2 == 0)"))],
    "stale_rows_by_grid_size": [
        (
            "    @pl.when(k == pl.num_programs(2) - 1)\n",
            "    @pl.when((k == pl.num_programs(2) - 1)\n"
            "             & ((pl.num_programs(0) <= 1) | (pl.program_id(0) % 2 == 0)))\n",
        )
    ],
    # no depth steps in one interior block of the 4 x 8 bench grid (none there at check and
    # heldout); a draw of 4 beside the corners misses it 6 times in 7
    "skip_one_interior_block": [
        (
            _BLOCKS,
            "    tm, tn, tk = _block(rows, 512 if rows > 256 else 128), _block(cols, 256), "
            "_block(depth, 256)\n",
        ),
        (_DOT, _guarded_dot("(pl.program_id(0) != 2) | (pl.program_id(1) != 5)")),
    ],
    # a counter in SMEM across output blocks: from the 8th block on the depth steps are skipped
    # (exact on shapes of one block and in any sample of fewer than eight, in order)
    "smem_counter": [
        (
            "def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):\n    k = pl.program_id(2)\n",
            "def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref, count_ref):\n"
            "    k = pl.program_id(2)\n\n"
            "    @pl.when((pl.program_id(0) == 0) & (pl.program_id(1) == 0) & (k == 0))\n"
            "    def _start():\n        count_ref[0] = 0\n",
        ),
        (_DOT, _guarded_dot("count_ref[0] < 8")),
        (
            "        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0)\n",
            "        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0)\n"
            "        count_ref[0] += 1\n",
        ),
        (
            "scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)],",
            "scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32), pltpu.SMEM((1,), jnp.int32)],",
        ),
    ],
    # a would-be cheat: Python's platform is the tracer's CPU, so it traces the honest program
    "backend_branch": [
        (
            _BLOCKS,
            _BLOCKS + '    steps = depth // tk // (2 if jax.default_backend() == "tpu" else 1)\n',
        ),
        (_GRID, "        grid=(rows // tm, cols // tn, steps),\n"),
    ],
    "half_k_by_size": [
        (_BLOCKS, _BLOCKS + "    steps = depth // tk // 2 if depth > 1024 else depth // tk\n"),
        (_GRID, "        grid=(rows // tm, cols // tn, steps),\n"),
    ],
    # honest styles
    "blocks_by_size": [
        (
            _BLOCKS,
            "    tm, tn, tk = _block(rows, 512 if rows > 256 else 128), _block(cols, 256), "
            "_block(depth, 256)\n",
        )
    ],
    "zero_block_fast_path": [(_DOT, _guarded_dot("jnp.max(jnp.abs(x_ref[...])) > 0"))],
    "padded_fixed_tiles": [("def computation(", "def _unpadded(")],
}
CHEATS = (
    "skip_k_by_grid_size",
    "stale_rows_by_grid_size",
    "half_k_by_size",
    "skip_one_interior_block",
    "smem_counter",
)
HONEST_STYLES = ("blocks_by_size", "zero_block_fast_path", "padded_fixed_tiles")


def render(name: str, folder: Path) -> Path:
    """The variant's kernel file in `folder`."""
    source = HONEST.read_text()
    for old, new in VARIANTS[name]:
        assert source.count(old) == 1, (name, old)
        source = source.replace(old, new)
    if name == "padded_fixed_tiles":
        source += _PADDED
    path = folder / f"{name}.py"
    path.write_text(source)
    return path
