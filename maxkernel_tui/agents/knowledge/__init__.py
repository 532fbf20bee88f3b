"""Our Pallas/TPU knowledge pack: short Markdown topics that go into the sub-agents' prompts.

Each topic is a file beside this module, read through importlib.resources so that the pack
works from an installed wheel as well as from a checkout. The complete examples and quoted
error messages in the topics are checked against the installed jax by
tests/agents/test_knowledge.py, so the pack cannot drift from the API silently.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib import resources

from maxkernel_tui.agents.roles.role import Role

# Topic name -> one line saying what it covers (also shown to agents that pick topics).
TOPICS: dict[str, str] = {
    "harness": (
        "what a candidate file must look like: computation(), allowed imports, no interpret=, "
        "tunables"
    ),
    "memory": "HBM, VMEM, SMEM and semaphores; pltpu.MemorySpace, pl.ANY, scratch shapes",
    "blockspec": (
        "BlockSpec index maps, the (8, 128) rule and dtype packing, grid order, dimension semantics"
    ),
    "tiling": (
        "VMEM budgets and peak numbers per TPU generation, footprint arithmetic, block size choice"
    ),
    "matmul": "MXU shapes, precision and preferred_element_type, the pl.when accumulator pattern",
    "rowwise": "memory-bound row kernels (norms, softmax, losses) with a runnable RMSNorm",
    "pipelining": (
        "double buffering by BlockSpec, pl.Buffered, emit_pipeline, manual DMA with semaphores"
    ),
    "scalar_prefetch": (
        "PrefetchScalarGridSpec: data-dependent block indices, gathers, grouped matmuls"
    ),
    "attention": "flash attention: online softmax, causal block skipping, GQA and decode variants",
    "errors": "real lowering and compile error messages and how to fix each",
    "experts": (
        "what precision a task's reference implies; the expert kernels' tilings per task family"
    ),
    "training": (
        "tasks that judge gradients: jax.custom_vjp with a Pallas forward and backward, residuals"
    ),
}

# What each sub-agent reads by default: the planner reasons about costs and layout, the
# implementer writes code, the debugger maps an error to a fix, the profiler and autotuner
# reason about budgets and overlap, the explainer answers the engineer's questions, the tester
# reads evaluation reports.
ROLE_TOPICS: dict[Role, tuple[str, ...]] = {
    Role.PLANNER: ("tiling", "blockspec", "memory", "matmul", "pipelining", "experts"),
    Role.IMPLEMENTER: ("harness", "blockspec", "memory", "matmul", "rowwise"),
    Role.DEBUGGER: ("errors", "harness", "blockspec", "memory"),
    Role.PROFILER: ("tiling", "pipelining", "matmul", "experts"),
    Role.AUTOTUNER: ("harness", "tiling", "blockspec"),
    Role.EXPLAINER: ("memory", "blockspec", "tiling", "pipelining"),
    Role.TESTER: ("harness", "errors"),
}

# The family whose topics a task that judges gradients adds (prompts.py), whatever its category.
TRAINING_FAMILY = "training"

# Extra topics for a task family (the `category` of a suite task), added after the role's.
FAMILY_TOPICS: dict[str, tuple[str, ...]] = {
    "attention": ("attention", "scalar_prefetch"),
    "moe": ("scalar_prefetch", "matmul"),
    "gemm": ("matmul",),
    "kb-gemm": ("matmul", "rowwise"),
    "kb-conv": ("matmul",),
    "norm": ("rowwise",),
    "loss": ("rowwise",),
    "ssm": ("matmul", "rowwise"),
    "triangle": ("matmul",),
    # tasks that judge gradients (any category): custom_vjp, and the row-wise patterns
    TRAINING_FAMILY: ("training", "rowwise"),
}


def topic(name: str) -> str:
    """The Markdown text of one topic."""
    if name not in TOPICS:
        raise KeyError(f"unknown knowledge topic {name!r}; known: {', '.join(TOPICS)}")
    return _read(name)


@functools.cache
def _read(name: str) -> str:
    # Topics never change while the process runs; prompts ask for them on every step.
    return (resources.files(__package__) / f"{name}.md").read_text(encoding="utf-8")


def pack(names: Iterable[str]) -> str:
    """The named topics, each once, in the given order, under a heading naming the topic."""
    chosen = list(dict.fromkeys(names))
    sections = [f"<!-- knowledge: {name} -->\n{topic(name).strip()}\n" for name in chosen]
    return "\n".join(sections)


def role_topics(role: Role, family: str | None = None) -> list[str]:
    """The topic names `for_role` would pack: the role's defaults, then the family's extras."""
    if role not in ROLE_TOPICS:
        raise KeyError(
            f"no knowledge selection for role {role!r}; known roles: {', '.join(ROLE_TOPICS)}"
        )
    extras = FAMILY_TOPICS.get(family, ()) if family else ()
    return list(dict.fromkeys((*ROLE_TOPICS[role], *extras)))


def for_role(role: Role, family: str | None = None) -> str:
    """The knowledge a sub-agent in `role` gets in its prompt, optionally widened for the task's
    family (e.g. "attention" adds the online-softmax topic). Unknown families add nothing."""
    return pack(role_topics(role, family))
