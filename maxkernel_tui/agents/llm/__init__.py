"""The LLM layer: one async streaming interface over every provider, made resilient.

- `types`: requests, chunks, usage, responses; `errors`, `events`: what can happen
- `provider`: the interface; `gemini`, `openai_compat`, `replay` (+ `transcript`): providers
- `client`: budget, timeout, retries, broken streams, re-asks; `retry`, `structured`: its rules
- `registry`: a network provider from settings (`agents.providers` adds the built-in agent;
  this package never imports it)

The cheap modules only; a provider module is imported when one is built. No jax.
"""

from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.errors import (
    LLMError,
    MalformedOutput,
    ProviderConfigError,
    ProviderError,
    RetriesExhausted,
    StreamBroken,
)
from maxkernel_tui.agents.llm.retry import RetryPolicy
from maxkernel_tui.agents.llm.types import (
    Discarded,
    Done,
    Message,
    Request,
    Response,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolSpec,
    Usage,
    UsageChunk,
)

__all__ = [
    "Discarded",
    "Done",
    "LLMClient",
    "LLMError",
    "MalformedOutput",
    "Message",
    "ProviderConfigError",
    "ProviderError",
    "Request",
    "Response",
    "RetriesExhausted",
    "RetryPolicy",
    "StreamBroken",
    "TextDelta",
    "ToolCall",
    "ToolCallChunk",
    "ToolSpec",
    "Usage",
    "UsageChunk",
]
