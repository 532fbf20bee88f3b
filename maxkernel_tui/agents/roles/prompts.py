"""The requests each sub-agent sends: a system prompt (its job, the harness rules, our Pallas/TPU
knowledge for that role) and one user message with exactly the context the role needs.

`Request.context` carries the same context as data for the built-in offline agent.
"""

from __future__ import annotations

import json

from maxkernel_tui.agents.knowledge import TOPICS, TRAINING_FAMILY, for_role, role_topics
from maxkernel_tui.agents.llm.types import Message, Request, Speaker, ToolSpec
from maxkernel_tui.agents.roles.context import NOTHING_ELSE, StepContext
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.edge_configs import MAX_SCALE, check_params
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import TaskError

PLANNER, IMPLEMENTER, DEBUGGER, PROFILER, EXPLAINER, TESTER = (
    Role.PLANNER,
    Role.IMPLEMENTER,
    Role.DEBUGGER,
    Role.PROFILER,
    Role.EXPLAINER,
    Role.TESTER,
)

_JOBS: dict[str, str] = {
    PLANNER: (
        "You are the planner of a team that writes Pallas kernels for TPUs. From the task, the "
        "current kernel and its latest evaluation and profile, write the plan for the next "
        "kernel: tiling and block shapes, the grid and its dimension semantics, BlockSpecs and "
        "memory spaces, pipelining, and the bound you expect (memory or compute) with the "
        "arithmetic that says why. Answer in Markdown with the sections `## Tiling`, `## Grid`, "
        "`## Memory` and `## Expected bound`."
    ),
    IMPLEMENTER: (
        "You are the implementer of a team that writes Pallas kernels for TPUs. Write the "
        "complete kernel file that carries out the approved plan. Answer with exactly one "
        "```python block."
    ),
    DEBUGGER: (
        "You are the debugger of a team that writes Pallas kernels for TPUs. The kernel below "
        "failed a check of the evaluation harness. Find the cause and answer with the corrected "
        "complete kernel file in exactly one ```python block, preceded by one sentence naming the "
        "cause."
    ),
    PROFILER: (
        "You are the profiler of a team that writes Pallas kernels for TPUs. Read the profile "
        "summary (every figure says whether it was estimated or measured, and for which TPU) and "
        "diagnose what limits the kernel. Say whether its matmuls run more or fewer MXU passes "
        "than the task's tolerance needs (the harness compares with the reference at full f32; "
        "bf16 operands, and f32 ones at Mosaic's default precision, take one pass; f32 split into "
        "bf16 high and low parts three; Precision.HIGHEST six) and how its "
        "tiling compares with the expert kernel's for the task family (knowledge pack, "
        "`experts`). End with one line `Next: ...` naming the single most promising change."
    ),
    TESTER: (
        "You are the tester of a team that writes Pallas kernels for TPUs. The immutable harness "
        "measures every kernel; you never write measurement code. Propose at most 3 extra input "
        "configurations (edge cases) on which the harness will also check the kernel's numerics: "
        "sizes where kernels like the one below break, e.g. ragged or non-power-of-two sizes, "
        "sizes smaller than one block, sizes the kernel's block does not divide. Use exactly the "
        "keys of the check configuration, positive ints at most "
        f"{MAX_SCALE}x the check values; keep a size a multiple of 128 or of 8 where the check "
        "shapes have one in their last two dims (TPU tiles), or the proposal is rejected. "
        'Answer with one JSON object: {"configs": [{"name": '
        '"edge_...", "params": {...}, "why": "..."}]}.'
    ),
    EXPLAINER: (
        "You answer a kernel engineer's questions about the session below: the task, the plan, "
        "the kernel, its evaluation and profile. Be concrete and short; say when a figure is an "
        "estimate."
    ),
}

TURNED_DOWN_SHOWN = 3  # turned-down proposals quoted in a prompt, the latest


def _rules(entry_point: str) -> str:
    """The harness's rules, naming the task's entry point (`computation`, JAXBench's
    `workload`)."""
    return (
        "Rules of the harness (the kernel runs in a sandbox without files, network, processes "
        "or the environment; one breaking these rules is rejected): the file is self-contained "
        f"and defines `{entry_point}` with the reference's signature (its arrays and Python "
        "values in the reference's order); it imports only jax, jax.numpy, "
        "jax.experimental.pallas (as pl), jax.experimental.pallas.tpu (as pltpu), functools, "
        "math and numpy; the heavy work runs inside `pl.pallas_call`; never pass `interpret=`; "
        "no host callbacks and no branching on the platform. Declare the tunable "
        "parameters in one place: a comment line `# Tunables` followed directly by module-level "
        "lines `NAME = <int>`; use those names in the code."
    )


def _gradient_rules(entry_point: str, gradients: tuple[str, ...]) -> str | None:
    """For a training task: what the harness judges beyond the forward output."""
    if not gradients:
        return None
    return (
        f"This task judges gradients too: the harness calls `jax.vjp({entry_point}, ...)` with "
        f"random cotangents and compares the gradients of {', '.join(gradients)} with the "
        f"reference's. Make `{entry_point}` a `jax.custom_vjp` whose forward saves what the "
        "backward needs and whose backward's heavy work is `pl.pallas_call`s too (a backward in "
        "plain jnp is rejected); see the knowledge topic `training`."
    )


def _sections(role: Role, ctx: StepContext) -> list[tuple[str, str | None]]:
    sections: dict[str, tuple[str, ...]] = {
        PLANNER: ("task", "kernel", "evaluation", "profile", "diagnosis", "feedback", "turned"),
        IMPLEMENTER: ("task", "plan", "kernel", "feedback", "turned"),
        DEBUGGER: ("task", "plan", "kernel", "failure", "attempts", "feedback", "turned"),
        PROFILER: ("task", "kernel", "profile", "feedback"),
        EXPLAINER: ("task", "plan", "kernel", "evaluation", "profile", "feedback", "question"),
        TESTER: ("task", "check", "kernel", "feedback"),
    }
    shown = sections[role]
    parts = {
        "task": ("Task", ctx.task_facts),
        "plan": ("Approved plan", ctx.plan),
        "kernel": (
            "Current kernel (kernel.py)",
            f"```python\n{ctx.kernel}```" if ctx.kernel else None,
        ),
        "evaluation": ("Latest evaluation", ctx.evaluation),
        "profile": ("Profile summary", ctx.profile_text),
        "diagnosis": ("Profiler's diagnosis", ctx.diagnosis),
        "failure": (
            "Failed check",
            str(ctx.failure) if ctx.failure else None,
        ),
        "attempts": ("Earlier fixes that also failed", "\n\n".join(ctx.previous_attempts) or None),
        "feedback": ("The engineer says", "\n".join(f"- {f}" for f in ctx.feedback) or None),
        "turned": (
            "Turned down at this step (propose something different that answers why; with "
            f"nothing different to offer, begin your answer with `{NOTHING_ELSE}` and say why)",
            _turned_down(ctx),
        ),
        "question": ("Question", ctx.question),
        "check": (
            "Check configuration (CONFIGS['check'])",
            _check_params(ctx) if role == TESTER else None,
        ),
    }
    return [parts[name] for name in shown]


def _turned_down(ctx: StepContext) -> str | None:
    """The step's turned-down proposals, the latest few in full, each with why."""
    shown = ctx.turned_down[-TURNED_DOWN_SHOWN:]
    parts = [f"{n}. why: {t.reason}\n```\n{t.content.strip()}\n```" for n, t in enumerate(shown, 1)]
    return "\n\n".join(parts) or None


def _check_params(ctx: StepContext) -> str | None:
    try:
        params = check_params(load_task(ctx.task_dir, cache=cache_dir()))
    except TaskError:
        return None
    return None if params is None else json.dumps(params)


def _tools_note(role: Role, tools: tuple[ToolSpec, ...]) -> str | None:
    """How the role may use its tools, and the knowledge topics its prompt leaves out."""
    if not tools:
        return None
    names = [t.name for t in tools]
    note = (
        f"You may call tools before you answer ({', '.join(names)}): look an API up rather than "
        "guess it, and run your draft through `lower` or `check` rather than propose a kernel "
        "that does not lower. Tool calls per step are limited. Your final answer, without tool "
        "calls, is in the format asked above."
    )
    if "knowledge" in names:
        shown = set(role_topics(role))
        others = [f"{name} ({what})" for name, what in TOPICS.items() if name not in shown]
        note += " More of the knowledge pack by `knowledge(topic)`: " + "; ".join(others) + "."
    return note


def build_request(
    role: Role,
    ctx: StepContext,
    *,
    model: str | None = None,
    max_tokens: int = 8192,
    tools: tuple[ToolSpec, ...] = (),
) -> Request:
    parts = [
        _JOBS[role],
        _rules(ctx.entry_point),
        _gradient_rules(ctx.entry_point, ctx.gradients),
        f"Target TPU: {ctx.target}.",
        for_role(role, TRAINING_FAMILY if ctx.gradients else None),
    ]
    system = "\n\n".join(part for part in (*parts, _tools_note(role, tools)) if part)
    body = [f"## {title}\n{text}" for title, text in _sections(role, ctx) if text]
    return Request(
        messages=(Message(Speaker.USER, "\n\n".join(body)),),
        system=system,
        tools=tools,
        model=model,
        max_tokens=max_tokens,
        context=ctx.to_request(role),
    )
