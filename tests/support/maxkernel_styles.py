"""Task folders in each of MaxKernel's ways of writing sizes, across families.

One family is written once, with `{name}` where a size goes; a style renders it:
- `named`: local integers (`batch = 4096`, then `(batch, d_in)`), keys from `jax.random.key(0)`;
- `dict`: a dict of sizes inside get_inputs with string entries beside the sizes, read by
  subscript (`CONFIG['batch']`), a bare size where a shape goes, keys from `PRNGKey(42)`;
- `literal`: the production values written inside the calls (`(4096, 8192)`), keys from
  `jax.random.key(0xBADC0DE)`;
- `module_dict`: a module-level dict of sizes (as JAXBench's `CONFIG`) read by subscript in
  get_inputs, keys from `jax.random.PRNGKey(7)`.
Every style fixes its keys, as MaxKernel's dataset does.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

STYLES = ("named", "dict", "literal", "module_dict")
_KEYS = {
    "named": "jax.random.key(0)",
    "dict": "jax.random.PRNGKey(42)",
    "literal": "jax.random.key(0xBADC0DE)",
    "module_dict": "jax.random.PRNGKey(7)",
}


@dataclass(frozen=True)
class Family:
    sizes: dict[str, int]  # production sizes, in the order they are declared
    inputs: str  # get_inputs' body after the sizes, with {size} and {key} placeholders
    computation: str
    tolerance: float = 1e-3


FAMILIES = {
    "gemm_epilogue": Family(
        {"batch": 4096, "d_in": 8192, "d_out": 2048},
        """
        k1, k2, k3 = jax.random.split({key}, 3)
        x = jax.random.uniform(k1, ({batch}, {d_in}), dtype=dtype)
        w = jax.random.normal(k2, ({d_in}, {d_out}), dtype=dtype) * 0.02
        b = jax.random.normal(k3, {d_out}, dtype=dtype) * 0.02
        return [x, w, b], []
        """,
        """
        def computation(x, w, b):
            return jax.nn.gelu(x @ w + b) * 2.0
        """,
        1e-2,
    ),
    # every size coincides in production: a matmul, a sigmoid and a row sum
    "gemm_rowsum_equal_sizes": Family(
        {"batch": 4096, "d_in": 4096, "d_out": 4096},
        """
        k1, k2, k3 = jax.random.split({key}, 3)
        x = jax.random.uniform(k1, ({batch}, {d_in}), dtype=dtype)
        w = jax.random.normal(k2, ({d_in}, {d_out}), dtype=dtype) * 0.02
        b = jax.random.normal(k3, ({d_out},), dtype=dtype) * 0.02
        return [x, w, b], []
        """,
        """
        def computation(x, w, b):
            return jnp.sum(jax.nn.sigmoid(x @ w + b), axis=1, keepdims=True)
        """,
        1e-2,
    ),
    # 24 heads of 128 in a 3072-wide hidden: the head count divides the width
    "attention_heads": Family(
        {"batch": 2, "seq": 2048, "hidden": 3072, "heads": 24},
        """
        k1, k2, k3 = jax.random.split({key}, 3)
        q = jax.random.normal(k1, ({batch}, {seq}, {hidden}), dtype=dtype)
        k = jax.random.normal(k2, ({batch}, {seq}, {hidden}), dtype=dtype)
        v = jax.random.normal(k3, ({batch}, {seq}, {hidden}), dtype=dtype)
        return [q, k, v], [{heads}]
        """,
        """
        def computation(q, k, v, heads):
            b, s, h = q.shape
            split = lambda t: t.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)
            scores = jnp.einsum("bhqd,bhkd->bhqk", split(q), split(k)) / jnp.sqrt(h // heads)
            mask = jnp.tril(jnp.ones((s, s), bool))
            p = jax.nn.softmax(jnp.where(mask, scores, -1e30), axis=-1)
            out = jnp.einsum("bhqk,bhkd->bhqd", p, split(v))
            return out.transpose(0, 2, 1, 3).reshape(b, s, h)
        """,
        1e-2,
    ),
    # every size small enough to keep, yet a 256 MiB activation: check must shrink it
    "conv_bias_relu": Family(
        {"batch": 64, "c_in": 64, "c_out": 128, "height": 128, "width": 128},
        """
        k1, k2, k3 = jax.random.split({key}, 3)
        x = jax.random.uniform(k1, ({batch}, {c_in}, {height}, {width}), dtype=dtype)
        w = jax.random.normal(k2, ({c_out}, {c_in}, 3, 3), dtype=dtype) * 0.02
        b = jax.random.normal(k3, ({c_out}, 1, 1), dtype=dtype) * 0.02
        return [x, w, b], []
        """,
        """
        def computation(x, w, b):
            y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")
            return jax.nn.relu(y + b)
        """,
        1e-2,
    ),
    # GroupNorm with 48 groups written in the reference as a literal, over 3072 features
    "gemm_groupnorm": Family(
        {"batch": 1024, "d_in": 4096, "features": 3072},
        """
        k1, k2 = jax.random.split({key})
        x = jax.random.uniform(k1, ({batch}, {d_in}), dtype=dtype)
        w = jax.random.normal(k2, ({d_in}, {features}), dtype=dtype) * 0.02
        gamma = jnp.ones(({features},), dtype=dtype)
        return [x, w, gamma], []
        """,
        """
        def computation(x, w, gamma):
            y = x @ w
            n, c = y.shape
            g = y.reshape(n, 48, c // 48)
            mean = g.mean(axis=-1, keepdims=True)
            var = ((g - mean) ** 2).mean(axis=-1, keepdims=True)
            return ((g - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(n, c) * gamma
        """,
        1e-2,
    ),
}


def family_source(family: str, style: str) -> str:
    """reference.py of `family` with its sizes written in `style`."""
    spec = FAMILIES[family]
    if style == "named":
        head = [f"{name} = {value}" for name, value in spec.sizes.items()]
        refs = {name: name for name in spec.sizes}
    elif style == "dict":
        entries = ", ".join(f"'{name}': {value}" for name, value in spec.sizes.items())
        head = [f"CONFIG = {{'name': '{family}', 'model': 'test-model', {entries}}}"]
        refs = {name: f"CONFIG['{name}']" for name in spec.sizes}
    elif style == "literal":
        head = []
        refs = {name: str(value) for name, value in spec.sizes.items()}
    elif style == "module_dict":
        entries = ", ".join(f"'{name}': {value}" for name, value in spec.sizes.items())
        head = []
        refs = {name: f"SIZES['{name}']" for name in spec.sizes}
    else:
        raise ValueError(style)
    body = textwrap.dedent(spec.inputs).strip().format(key=_KEYS[style], **refs)
    lines = ["def get_inputs(dtype=jnp.float32):"]
    lines += ["    " + line for line in [*head, *body.splitlines()]]
    module_sizes = f"SIZES = {{{entries}}}\n\n" if style == "module_dict" else ""
    return (
        "import jax\nimport jax.numpy as jnp\n\n"
        + module_sizes
        + "\n"
        + "\n".join(lines)
        + "\n\n\n"
        + textwrap.dedent(spec.computation).strip()
        + "\n"
    )


def write_styled(root: Path, family: str, style: str) -> Path:
    """A plain task folder `<family>_<style>` under `root`."""
    task_id = f"{family}_{style}"
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    tol = FAMILIES[family].tolerance
    (folder / "kernel_task.yaml").write_text(
        f"task_id: {task_id}\ndescription: Kernel task for {task_id}\n"
        f'input_gen_code: ""\natol: {tol}\nrtol: {tol}\n'
    )
    (folder / "reference.py").write_text(family_source(family, style))
    return folder
