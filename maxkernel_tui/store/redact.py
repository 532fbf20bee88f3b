"""Keep credentials out of the store: everything written passes through here first.

Three nets: a mapping key that names a credential (`api_key`, `token`, `secret`, `password`,
`Authorization`, ...) has its value replaced; any string that contains a well-known key shape
(Google `AIza...`, OpenAI `sk-...`, GitHub, AWS, Slack, Hugging Face, bearer tokens, JWTs,
PEM private keys) has that part replaced; and the literal values of credential variables in
this process's environment (of any shape, e.g. a local server's key) are replaced wherever
they appear. Counts such as `prompt_tokens` or `max_tokens` are not credentials and are kept.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"

# Words that make a mapping key a credential wherever they appear in it.
_SECRET_WORDS = {
    "secret",
    "secrets",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "authorization",
    "apikey",
    "cookie",
    "privatekey",
    "bearer",
}
# Words that make it a credential when they end it: `token`, `api_key`, `key` (not `tokens`).
_SECRET_LAST_WORDS = {"key", "token", "auth", "pat"}

_SHAPES = re.compile(
    "|".join(
        (
            r"AIza[0-9A-Za-z_\-]{30,}",  # Google API key
            r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic and compatible
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
            r"\bxox[abposr]-[0-9A-Za-z\-]{10,}",  # Slack
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bya29\.[0-9A-Za-z_\-]{20,}",  # Google OAuth access token
            r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JWT
            r"(?i:\bbearer\s+)[A-Za-z0-9._~+/\-]{16,}=*",  # an Authorization header's value
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
        )
    )
)

# Every shape above contains one of these literally (or "bearer" in any case).
_MARKERS = (
    "AIza",
    "sk-",
    "gho_",
    "ghp_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "AKIA",
    "ASIA",
    "xox",
    "hf_",
    "ya29.",
    "eyJ",
    "PRIVATE KEY-----",
)

_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
# Environment variables whose values are never stored, whatever they look like.
_ENV_SECRET = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|^(GEMINI|GOOGLE|OPENAI)_API_KEY$",
    re.IGNORECASE,
)
_MIN_ENV_SECRET = 8  # shorter values would redact ordinary words


def is_secret_name(name: str) -> bool:
    """Does a mapping key name a credential? `api_key`, `apiKey`, `x-goog-api-key`,
    `access_token`, `password`, `key`: yes. `prompt_tokens`, `max_tokens`, `tokenizer`: no."""
    return _secret_kind(name) is not None


def _secret_kind(name: str) -> str | None:
    """ "strong" for names that only credentials have; "weak" for a plain `key` (`sort_key`,
    a key press), whose short values are kept; None otherwise."""
    words = [w.lower() for w in _WORD_SPLIT.split(name) if w]
    if not words:
        return None
    joined = "".join(words)
    if any(w in _SECRET_WORDS for w in words) or joined.endswith(
        ("apikey", "accesstoken", "privatekey")
    ):
        return "strong"
    if words[-1] in _SECRET_LAST_WORDS:
        return "weak" if words[-1] == "key" else "strong"
    return None


def _environment_secrets() -> list[str]:
    values = {
        v for k, v in os.environ.items() if _ENV_SECRET.search(k) and len(v) >= _MIN_ENV_SECRET
    }
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, env_secrets: list[str] | None = None) -> str:
    """`text` with key shapes and this environment's credential values replaced."""
    for secret in _environment_secrets() if env_secrets is None else env_secrets:
        text = text.replace(secret, REDACTED)
    if not any(marker in text for marker in _MARKERS) and "bearer" not in text.lower():
        return text  # no shape can match: skip the slow scan (long sources, big payloads)
    return _SHAPES.sub(REDACTED, text)


def redact(value: Any, env_secrets: list[str] | None = None) -> Any:
    """A copy of a JSON-like value with credentials replaced (see the module docstring)."""
    secrets = _environment_secrets() if env_secrets is None else env_secrets
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, Mapping):
        return {
            k: (
                REDACTED
                if isinstance(k, str) and _holds_secret(_secret_kind(k), v)
                else redact(v, secrets)
            )
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


_WEAK_MIN = 8  # a plain `key` holding fewer characters is a key press or a label, not a credential


def _holds_secret(kind: str | None, value: Any) -> bool:
    """Numbers, booleans and empty values under a credential's name say nothing secret
    (`api_key_set: true`); strings and structures are replaced whole."""
    if (
        kind is None
        or value is None
        or isinstance(value, (bool, int, float))
        or value in ("", [], {})
    ):
        return False
    return kind == "strong" or not isinstance(value, str) or len(value) >= _WEAK_MIN
