"""A Ray cluster of several nodes on this machine, started with Ray's own CLI (`ray start
--block`, one process group per node) on 127.0.0.1 only, with token authentication on (a token
generated into the cluster's own directory, which is also its HOME: the user's ~/.ray is never
read or written), and stopped by those process groups: never `ray stop`, which stops every Ray
process of the machine. For the tests and the throughput benchmark. No Ray import, no jax."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 180.0
START_ATTEMPTS = 3
STOP_GRACE_S = 3.0  # then SIGKILL: the nodes are throwaway, their temp dir goes with them
# A loaded machine starts a node's agents and workers slowly: Ray's defaults give up too soon.
_PATIENT = {"RAY_agent_register_timeout_ms": "120000", "RAY_worker_register_timeout_seconds": "180"}
# Ray's own `ray` entry point, with the loopback address left as it is given.
_WORKER_CLI = (
    "import sys, ray._private.services as services; "
    "services.resolve_ip_for_localhost = lambda host: host; "
    "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; sys.exit(main())"
)
_STARTED = "Ray runtime started"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class CliNode:
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def group(self) -> int:
        return self.process.pid  # start_new_session: its pid is its process group

    def raylet_pid(self) -> int | None:
        """The pid of this node's raylet (killing it kills the node)."""
        return next((pid for pid, name in _group_processes(self.group) if name == "raylet"), None)


@dataclass
class CliCluster:
    """`nodes` nodes of `cpus` CPUs each under `root` (keep it short: Ray's socket paths live
    there); `auth=False` starts one without token authentication (to test that it is refused)."""

    root: Path
    nodes: int = 2
    cpus: int = 1
    auth: bool = True
    system_config: str = ""  # JSON for `ray start --system-config` (e.g. faster health checks)
    port: int = field(default_factory=free_port)
    started: list[CliNode] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def token_path(self) -> Path:
        return self.root / "auth_token"

    def driver_env(self) -> dict[str, str]:
        """What a driver of this cluster needs in its environment (the token by path only)."""
        env = {
            "HOME": str(self.root / "home"),
            # Ray swaps 127.0.0.1 for this host's interface address unless told it is alone
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "token" if self.auth else "disabled",
        }
        if self.auth:
            env["RAY_AUTH_TOKEN_PATH"] = str(self.token_path)
        return env

    def start(self, base_env: dict[str, str] | None = None) -> CliCluster:
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        if self.auth and not self.token_path.exists():
            self.token_path.write_text(secrets.token_hex(32))
            self.token_path.chmod(0o600)
        env = dict(os.environ if base_env is None else base_env, **self.driver_env())
        env.update(_PATIENT)
        try:
            for index in range(self.nodes):
                self._start_node_retried(index, env)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End every process of the nodes this cluster started, by their process groups."""
        _kill_groups(list(reversed(self.started)))
        self.started = []

    def __enter__(self) -> CliCluster:
        return self.start(
            {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}
        )

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_node_retried(self, index: int, env: dict[str, str]) -> None:
        """Start a node, once more if it fails: on a loaded machine a raylet gives up when its
        agents take over Ray's fixed 15 s to start."""
        for attempt in range(START_ATTEMPTS):
            try:
                self._start_node(index, env)
                return
            except RuntimeError:
                _kill_groups([self.started.pop()])
                if attempt == START_ATTEMPTS - 1:
                    raise

    def _start_node(self, index: int, env: dict[str, str]) -> None:
        ray = str(Path(sys.executable).with_name("ray"))
        # The head keeps 127.0.0.1 as told under RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (see
        # driver_env); a worker node may not start under that setting, so its CLI runs with
        # Ray's swap of the loopback address for this host's interface address turned off.
        cli = [ray] if index == 0 else [sys.executable, "-c", _WORKER_CLI]
        argv = [*cli, "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}"]
        argv += [
            f"--temp-dir={self.root / 't'}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            "--disable-usage-stats",
            "--include-log-monitor=false",  # it only streams logs to drivers, which take none
        ]
        if index == 0:
            argv += [
                "--head",
                f"--port={self.port}",
                f"--ray-client-server-port={free_port()}",
                f"--dashboard-port={free_port()}",
                "--include-dashboard=false",
            ]
            if self.system_config:
                argv.append(f"--system-config={self.system_config}")
        else:
            argv.append(f"--address={self.address}")
            env = dict(env, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1")
        log = self.root / f"node{index}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        node = CliNode(process, log)
        self.started.append(node)  # stopped with the others even when it fails to start
        deadline = time.monotonic() + START_TIMEOUT_S
        while _STARTED not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ray start of node {index} failed:\n{tail}")
            time.sleep(0.2)


def _kill_groups(nodes: list[CliNode]) -> None:
    """SIGTERM to every node's process group at once (`ray start --block` begins stopping its
    processes), a short grace, then SIGKILL to whatever is left. Ray's own graceful stop takes
    over 20 s per node; these are throwaway nodes whose temp dir goes with them."""
    for node in nodes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.group, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(_group_alive(n.group) for n in nodes):
        time.sleep(0.1)
    for node in nodes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.process.wait(timeout=5)


def _group_alive(group: int) -> bool:
    return bool(_group_processes(group))


def _group_processes(group: int) -> list[tuple[int, str]]:
    """(pid, name) of the live processes of a process group, read from /proc (zombies left to
    init do not count)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            name = text[text.index("(") + 1 : text.rindex(")")]
            state, _ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
            if int(pgrp) == group and state != "Z":
                found.append((int(stat.parent.name), name))
    return found
