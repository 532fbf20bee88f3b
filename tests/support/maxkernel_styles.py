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


# Families whose independent sizes coincide in production beside sizes the reference ties:
# tracing it must hold the former apart at heldout and keep the latter together. `ties`: the
# family's sizes that must stay equal (by the names of the named style), `apart`: pairs of
# equal production sizes the reference leaves free of each other.
@dataclass(frozen=True)
class TiedFamily:
    family: Family
    ties: tuple[tuple[str, ...], ...]
    apart: tuple[tuple[str, str], ...]


TIE_FAMILIES = {
    # m = n: the bias is added along n, the rows are m
    "gemm_bias_m_eq_n": TiedFamily(
        Family(
            {"batch": 2048, "d_in": 1024, "d_out": 2048},
            """
            k1, k2, k3 = jax.random.split({key}, 3)
            x = jax.random.uniform(k1, ({batch}, {d_in}), dtype=dtype)
            w = jax.random.normal(k2, ({d_in}, {d_out}), dtype=dtype) * 0.02
            b = jax.random.normal(k3, ({d_out},), dtype=dtype) * 0.02
            return [x, w, b], []
            """,
            """
            def computation(x, w, b):
                return jax.nn.relu(x @ w + b)
            """,
            1e-2,
        ),
        ties=(),
        apart=(("batch", "d_out"),),
    ),
    # a GEMM with a row sum whose contraction depth equals its width (MaxKernel's 36k: in = out)
    "gemm_rowsum_in_eq_out": TiedFamily(
        Family(
            {"batch": 512, "d_in": 2048, "d_out": 2048},
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
        ties=(),
        apart=(("d_in", "d_out"),),
    ),
    # cross attention: the query and key lengths coincide, and so do the two head dims
    "attention_equal_lens": TiedFamily(
        Family(
            {"batch": 4, "q_len": 1024, "kv_len": 1024, "head_dim": 128, "v_dim": 128},
            """
            k1, k2, k3 = jax.random.split({key}, 3)
            q = jax.random.normal(k1, ({batch}, {q_len}, {head_dim}), dtype=dtype)
            k = jax.random.normal(k2, ({batch}, {kv_len}, {head_dim}), dtype=dtype)
            v = jax.random.normal(k3, ({batch}, {kv_len}, {v_dim}), dtype=dtype)
            return [q, k, v], []
            """,
            """
            def computation(q, k, v):
                scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(q.shape[-1])
                return jnp.einsum("bqk,bkv->bqv", jax.nn.softmax(scores, axis=-1), v)
            """,
            1e-2,
        ),
        ties=(),
        apart=(("q_len", "kv_len"), ("head_dim", "v_dim")),
    ),
    # a group norm of `groups` groups over channels that equal the batch
    "groupnorm_batch_eq_channels": TiedFamily(
        Family(
            {"batch": 512, "channels": 512, "groups": 32},
            """
            k1, k2 = jax.random.split({key})
            x = jax.random.normal(k1, ({batch}, {channels}), dtype=dtype)
            gamma = jax.random.normal(k2, ({channels},), dtype=dtype) * 0.1 + 1.0
            return [x, gamma], [{groups}]
            """,
            """
            def computation(x, gamma, groups):
                n, c = x.shape
                g = x.reshape(n, groups, c // groups)
                mean = g.mean(axis=-1, keepdims=True)
                var = ((g - mean) ** 2).mean(axis=-1, keepdims=True)
                return ((g - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(n, c) * gamma
            """,
            1e-2,
        ),
        ties=(),
        apart=(("batch", "channels"),),
    ),
    # equal sizes tied only through a reshape: x's rows are reshaped to the scale's length
    "reshape_tied": TiedFamily(
        Family(
            {"rows": 1024, "cols": 1024, "scale_rows": 1024},
            """
            k1, k2 = jax.random.split({key})
            x = jax.random.normal(k1, ({rows}, {cols}), dtype=dtype)
            s = jax.random.normal(k2, ({scale_rows},), dtype=dtype)
            return [x, s], []
            """,
            """
            def computation(x, s):
                return x.reshape(s.shape[0], x.shape[1]) * 2.0 + jnp.sum(s)
            """,
            1e-2,
        ),
        ties=(("rows", "scale_rows"),),
        apart=(("rows", "cols"),),
    ),
}


def _family(name: str) -> Family:
    return FAMILIES[name] if name in FAMILIES else TIE_FAMILIES[name].family


def family_source(family: str, style: str) -> str:
    """reference.py of `family` with its sizes written in `style`."""
    spec = _family(family)
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
    tol = _family(family).tolerance
    (folder / "kernel_task.yaml").write_text(
        f"task_id: {task_id}\ndescription: Kernel task for {task_id}\n"
        f'input_gen_code: ""\natol: {tol}\nrtol: {tol}\n'
    )
    (folder / "reference.py").write_text(family_source(family, style))
    return folder
