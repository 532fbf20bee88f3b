"""A provider in this process that answers each sub-agent from its own queue of texts, for engine
tests that do not need HTTP. It records every request, so a test can read the prompts."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import AsyncGenerator, Iterable, Mapping

from maxkernel_tui.agents.llm.errors import ProviderError
from maxkernel_tui.agents.llm.types import Finish, Request, TextDelta, TokenCount

NO_EDGE_CASES = '{"configs": []}'


class RoleProvider:
    name = "roles"
    model = "fake-model"

    def __init__(self, answers: Mapping[str, Iterable[str]]) -> None:
        self.answers = defaultdict(deque, {role: deque(texts) for role, texts in answers.items()})
        self.requests: list[Request] = []

    async def aclose(self) -> None:
        return None

    async def stream(
        self, request: Request
    ) -> AsyncGenerator[TextDelta | TokenCount | Finish, None]:
        self.requests.append(request)
        role = (request.context or {}).get("role", "?")
        if role == "tester" and not self.answers[role]:
            self.answers[role].append(
                NO_EDGE_CASES
            )  # tests about other steps need not script the tester
        if not self.answers[role]:
            raise ProviderError(f"no scripted answer left for {role}")
        text = self.answers[role].popleft()
        for start in range(0, len(text), 200):
            yield TextDelta(text[start : start + 200])
        yield TokenCount(prompt_tokens=100, completion_tokens=len(text) // 4)
        yield Finish("stop")

    def prompts(self, role: str) -> list[str]:
        return [
            r.messages[-1].content for r in self.requests if (r.context or {}).get("role") == role
        ]
