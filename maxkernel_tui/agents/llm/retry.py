"""When to try a model call again, and how long to wait first.

Exponential backoff with jitter (so that parallel sub-agents hit by the same 429 do not come
back in lockstep), unless the server said how long to wait: a `Retry-After` header (seconds or
an HTTP date) or Gemini's `google.rpc.RetryInfo` detail. Such a wait is honoured as given,
never shortened; one longer than `max_wait_s` ends the call instead of stalling a session.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

# Statuses worth another attempt: timeouts, rate limits, overloaded or failing servers.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4  # HTTP attempts per ask, the first included
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    jitter: float = 0.5  # a computed delay is reduced by up to this fraction, at random
    max_wait_s: float = 120.0  # longest server-requested wait we accept
    timeout_s: float = 300.0  # per attempt, from sending to the last chunk
    max_reasks: int = 2  # re-asks after malformed structured output

    def delay_s(self, retry: int, retry_after_s: float | None, rng: random.Random) -> float | None:
        """Seconds to wait before retry number `retry` (1 for the first); None: do not retry,
        the server asked for longer than `max_wait_s`."""
        if retry_after_s is not None:
            return max(0.0, retry_after_s) if retry_after_s <= self.max_wait_s else None
        delay = min(self.max_delay_s, self.base_delay_s * 2 ** (retry - 1))
        return delay * (1.0 - self.jitter * rng.random())


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from a Retry-After header value: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def retry_after_from(
    headers: Mapping[str, str] | None, body: Any = None, now: Callable[[], float] = time.time
) -> float | None:
    """The wait a server asked for, from the Retry-After header or a Google RetryInfo detail."""
    if headers is not None:
        seconds = parse_retry_after(headers.get("Retry-After") or headers.get("retry-after"), now)
        if seconds is not None:
            return seconds
    return _retry_info_delay(body)


def _retry_info_delay(body: Any) -> float | None:
    # Gemini puts {"@type": ".../google.rpc.RetryInfo", "retryDelay": "12s"} in error.details.
    if not isinstance(body, Mapping):
        return None
    error = body.get("error", body)
    details = error.get("details") if isinstance(error, Mapping) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = re.fullmatch(r"\s*([0-9.]+)s\s*", str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None
