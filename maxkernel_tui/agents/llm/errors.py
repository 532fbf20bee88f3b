"""What can go wrong in a model call, classified so that the client knows whether to retry.

Messages never hold credentials: providers pass error text through `redact` with the secrets
they know before raising.
"""

from __future__ import annotations

from collections.abc import Iterable


class LLMError(Exception):
    """Base of every error of the LLM layer."""


class ProviderConfigError(LLMError):
    """A provider cannot be built or used as configured (missing key, unknown name, ...)."""


class ProviderError(LLMError):
    """A call failed at the provider or on the wire."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s  # what the server asked for, if it did


class StreamBroken(ProviderError):
    """The answer stopped before the model finished (connection cut, truncated event)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class RetriesExhausted(ProviderError):
    """Every allowed attempt failed; `last` is the final attempt's error."""

    def __init__(self, message: str, last: ProviderError) -> None:
        super().__init__(message, status=last.status, retryable=False)
        self.last = last


class MalformedOutput(LLMError):
    """The answer is complete but unusable: JSON that does not parse or match the schema, a
    function call the provider itself calls malformed. The client re-asks with this message."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class ReplayMismatch(LLMError):
    """A replayed session asked for something the transcript does not hold."""


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every secret (at least 8 characters, shorter is no secret) replaced."""
    for secret in secrets:
        if secret and len(secret) >= 8:
            text = text.replace(secret, "***")
    return text
