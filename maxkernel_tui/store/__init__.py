"""The SQLite session store: sessions, the append-only event log, kernel versions with their
parents, evaluation and profile reports, LLM calls and search nodes. One file in WAL mode; an
event is committed before anything shows it, and a process killed at any moment leaves the file
consistent, with no event lost or doubled.

Stdlib only (no jax, no Textual): the UI, the agents and the CLI all use it. API keys are never
stored: every payload, report and message is redacted on its way in (`store.redact`).
"""

from typing import TYPE_CHECKING, Any

from maxkernel_tui.store.redact import REDACTED, is_secret_name, redact, redact_text
from maxkernel_tui.store.rows import (
    ACTIVE,
    AUTO,
    DONE,
    FAILED,
    GRAPH,
    HITL,
    MODES,
    STOPPED,
    Evaluation,
    Event,
    KernelVersion,
    LlmCall,
    Profile,
    SearchNode,
    Session,
    SessionSummary,
    StoreError,
)
from maxkernel_tui.store.schema import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from maxkernel_tui.store.db import Store, default_store_path, open_store, schema_of

# The database module (and sqlite3) loads on first use: the workbench's first frame reads rows'
# vocabularies (Mode) and never the database.
_DATABASE_NAMES = ("Store", "default_store_path", "open_store", "schema_of")


def __getattr__(name: str) -> Any:
    if name in _DATABASE_NAMES:
        from maxkernel_tui.store import db

        return getattr(db, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ACTIVE",
    "AUTO",
    "DONE",
    "FAILED",
    "GRAPH",
    "HITL",
    "MIGRATIONS",
    "MODES",
    "REDACTED",
    "SCHEMA_VERSION",
    "STOPPED",
    "Evaluation",
    "Event",
    "KernelVersion",
    "LlmCall",
    "Profile",
    "SearchNode",
    "Session",
    "SessionSummary",
    "Store",
    "StoreError",
    "default_store_path",
    "is_secret_name",
    "open_store",
    "redact",
    "redact_text",
    "schema_of",
]
