"""The built-in agent's worker process: one step context per line in, one answer per line out.

    python -m maxkernel_tui.agents.builtin.worker

Imports jax (the drafting modules trace the reference and the kernels). The provider
(provider.py) starts it once, on its first step, and keeps it, so that drafts cached here serve
the steps that follow. Answers: a WorkerReply (reply.py) as JSON.
"""

from __future__ import annotations

import json
import sys

from maxkernel_tui.agents.builtin.answers import DraftCache, answer
from maxkernel_tui.agents.builtin.errors import BuiltinAgentError, CannotPlan
from maxkernel_tui.agents.builtin.reply import DRAFT_AHEAD, Failure, WorkerReply
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY


def respond(line: str, cache: DraftCache) -> WorkerReply:
    try:
        request = json.loads(line)
        if request.get("role") == DRAFT_AHEAD:  # drafts made now serve the steps to come
            cache.get(str(request["task_dir"]), str(request["target"]))
            return WorkerReply("")
        return WorkerReply(answer(StepContext.from_request(request), cache))
    except CannotPlan as reason:
        return WorkerReply(error=str(reason), failure=Failure.CANNOT_PLAN)
    except BuiltinAgentError as error:
        return WorkerReply(error=str(error), failure=Failure.NO_ANSWER)
    except Exception as error:
        first = (str(error).strip().splitlines() or [""])[0][:300]
        return WorkerReply(error=f"{type(error).__name__}: {first}", failure=Failure.INTERNAL)


def main() -> None:
    cache = DraftCache()
    reply(READY)  # jax came with this module's imports
    for line in sys.stdin:
        if line.strip():
            reply(respond(line, cache).to_json())


if __name__ == "__main__":
    main()
