"""A graph search in a process of its own, on fake tools (no jax): what a user watching a search
started by `maxkernel-tui search` in another terminal sees. It prints the search's session id,
waits for a line on stdin, then runs the search and exits.

    python -m tests.support.search_elsewhere STORE SESSIONS_DIR
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from maxkernel_tui.store.db import Store
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import Bench, variant


def main(store_path: str, root: str) -> None:
    with Store(Path(store_path)) as store:
        provider = RoleProvider({"implementer": [variant(r) for r in (256, 512)]})
        search = Bench(store, Path(root)).search(provider, algorithm="beam", width=1, depth=1)
        print(search.base.session_id, flush=True)
        sys.stdin.readline()  # the watcher is ready
        asyncio.run(search.run())


if __name__ == "__main__":
    main(*sys.argv[1:3])
