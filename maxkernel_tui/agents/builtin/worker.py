"""The built-in agent's worker process: one step context per line in, one answer per line out.

    python -m maxkernel_tui.agents.builtin.worker

Imports jax (the drafting modules trace the reference and the kernels). The provider
(provider.py) starts it once, on its first step, and keeps it, so that drafts cached here serve
the steps that follow. Answers: {"text": ...}, or {"error": ..., "kind": "cannot_plan" |
"no_answer" | "internal"}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from maxkernel_tui.agents.builtin.answers import DraftCache, answer
from maxkernel_tui.agents.builtin.errors import BuiltinAgentError, CannotPlan
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.kernels.workers import READY


def respond(line: str, cache: DraftCache) -> dict[str, Any]:
    try:
        return {"text": answer(StepContext.from_request(json.loads(line)), cache)}
    except CannotPlan as reason:
        return {"error": str(reason), "kind": "cannot_plan"}
    except BuiltinAgentError as error:
        return {"error": str(error), "kind": "no_answer"}
    except Exception as error:
        first = (str(error).strip().splitlines() or [""])[0][:300]
        return {"error": f"{type(error).__name__}: {first}", "kind": "internal"}


def main() -> None:
    cache = DraftCache()
    print(json.dumps(READY), flush=True)  # jax came with this module's imports
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(respond(line, cache)), flush=True)


if __name__ == "__main__":
    main()
