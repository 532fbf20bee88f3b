"""Connecting to a Ray cluster, on the user's terms: token authentication on (a cluster without
it is refused unless the user says `insecure`), the token read the way Ray reads it (never by
us, never stored or printed), the cluster's nodes and resources described. `local` starts a
private single-machine cluster with token auth. Imports Ray (only when the Ray executor is
chosen); no jax, no agents."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import ray

from maxkernel_tui.kernels.executors.errors import ClusterError

LOCAL = "local"  # `--ray local`: a private cluster on this machine
NAMESPACE = "maxkernel-tui"
PROBE_TIMEOUT_S = 60.0
TPU_RESOURCE = "TPU"  # what Ray reports on a TPU VM (and what `ray start --resources` can add)
INSECURE_MEANING = (
    "anyone who can reach the cluster's ports can run code on every node, and read the kernels "
    "and tasks sent there"
)

# Run in a child with authentication off, so that the answer is the cluster's own: a cluster
# with token auth refuses the call; one without answers it.
_PROBE = """
import json, sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_keys(
        b"", namespace=None, timeout=float(sys.argv[2]))
    print(json.dumps({"open": True}))
except Exception as error:
    print(json.dumps({"open": False, "error": f"{type(error).__name__}: {error}"}))
"""


class Auth(StrEnum):
    TOKEN = "token"
    NONE = "none"  # accepted only with insecure


@dataclass(frozen=True)
class NodeFacts:
    node_id: str
    address: str
    alive: bool
    resources: dict[str, float]
    head: bool

    @property
    def cpus(self) -> int:
        return int(self.resources.get("CPU", 0))

    @property
    def tpus(self) -> int:
        return int(self.resources.get(TPU_RESOURCE, 0))


@dataclass(frozen=True)
class ClusterFacts:
    address: str
    auth: Auth
    ray_version: str
    nodes: tuple[NodeFacts, ...]

    @property
    def alive(self) -> tuple[NodeFacts, ...]:
        return tuple(n for n in self.nodes if n.alive)

    def describe(self) -> str:
        """One line: nodes, CPUs, TPUs, auth (never the token)."""
        alive = self.alive
        cpus = sum(n.cpus for n in alive)
        tpus = sum(n.tpus for n in alive)
        auth = "token auth on" if self.auth == Auth.TOKEN else "NO AUTH (--ray-insecure)"
        return (
            f"Ray {self.ray_version} at {self.address}: {len(alive)} node(s) alive, {cpus} CPU, "
            f"{tpus} TPU chip(s), {auth}"
        )


def token_source(env: dict[str, str] | None = None) -> str:
    """Where Ray will read the token from, in its own order (the token itself is never read)."""
    env = dict(os.environ) if env is None else env
    if env.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if env.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH ({env['RAY_AUTH_TOKEN_PATH']})"
    default = Path(env.get("HOME", str(Path.home()))) / ".ray" / "auth_token"
    return str(default) if default.is_file() else ""


def probe_auth(address: str, timeout: float = PROBE_TIMEOUT_S) -> Auth:
    """Whether the cluster at `address` requires a token; ClusterError when it is unreachable."""
    _check_listening(address)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["RAY_AUTH_MODE"] = "disabled"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, address, str(min(timeout, 10.0))],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"the Ray cluster at {address} did not answer in {timeout:.0f} s"
        ) from None
    lines = done.stdout.strip().splitlines()
    answer = json.loads(lines[-1]) if lines else {"open": False, "error": done.stderr[-300:]}
    if answer["open"]:
        return Auth.NONE
    error = str(answer.get("error", ""))
    if "UNAUTHENTICATED" in error.upper() or "authenticat" in error.lower():
        return Auth.TOKEN
    raise ClusterError(f"cannot reach the Ray cluster at {address}: {error.strip()[:300]}")


def _check_listening(address: str, timeout: float = 3.0) -> None:
    """A quick TCP connect, so that an unreachable head is said at once (Ray retries ~40 s)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(
            f"a Ray address is HOST:PORT of the head node (or `local`), not {address!r}"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {error}") from None


def connect(address: str, *, insecure: bool = False) -> ClusterFacts:
    """This process connected to the cluster at `address` (host:port of its head), or to a new
    private one for `local`; raises ClusterError before connecting to a cluster without token
    auth (unless `insecure`), or without a token to give it."""
    if ray.is_initialized():
        return describe(address, Auth.TOKEN if _token_mode() else Auth.NONE)
    if address == LOCAL:
        _use_token_auth()  # Ray generates the private cluster's token
        ray.init(
            namespace=NAMESPACE,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        _ray_messages_to_stderr()
        return describe(address, Auth.TOKEN)
    auth = probe_auth(address)
    if auth == Auth.NONE and not insecure:
        raise ClusterError(
            f"the Ray cluster at {address} runs without token authentication: refused. Start it "
            "with RAY_AUTH_MODE=token on every node (see `maxkernel-tui doctor --ray`), or pass "
            f"--ray-insecure to connect anyway: {INSECURE_MEANING}"
        )
    if auth == Auth.TOKEN:
        if not token_source():
            raise ClusterError(
                f"the Ray cluster at {address} requires a token and none is set here: set "
                "RAY_AUTH_TOKEN_PATH (a file holding it) or RAY_AUTH_TOKEN, or put it in "
                "~/.ray/auth_token (as `ray get-auth-token` prints it on the head)"
            )
        _use_token_auth()
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError) as error:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {error}") from None
    _ray_messages_to_stderr()
    return describe(address, auth)


def _ray_messages_to_stderr() -> None:
    """What Ray itself prints in the driver (a node's raylet dying, say) goes to stderr: stdout
    is the command's own (JSON lines with --json)."""
    from ray._private import worker

    shown = worker.print_to_stdstream
    if getattr(shown, "to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        shown(dict(data, is_err=True), ignore_prefix)

    to_stderr.to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def describe(address: str, auth: Auth) -> ClusterFacts:
    """The connected cluster's nodes and resources."""
    listed: Callable[[], list[dict[str, Any]]] = ray.nodes  # untyped in Ray
    nodes = tuple(
        NodeFacts(
            node_id=n["NodeID"],
            address=n.get("NodeManagerAddress", ""),
            alive=bool(n.get("Alive")),
            resources={k: float(v) for k, v in (n.get("Resources") or {}).items()},
            head=any(k.startswith("node:__internal_head__") for k in n.get("Resources") or {}),
        )
        for n in listed()
    )
    return ClusterFacts(address, auth, ray.__version__, nodes)


def disconnect() -> None:
    """Leave the cluster (a private `local` one stops with it)."""
    if ray.is_initialized():
        ray.shutdown()


def _use_token_auth() -> None:
    """Token mode for this process as Ray itself turns it on (its configuration is cached at
    import: it is read again)."""
    from ray._raylet import Config  # type: ignore[attr-defined]

    os.environ["RAY_AUTH_MODE"] = "token"
    Config.initialize("")


def _token_mode() -> bool:
    return os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
