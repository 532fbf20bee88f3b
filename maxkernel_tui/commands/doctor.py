"""`maxkernel-tui doctor`: can the tool run here, and with what. No jax here.

jax is asked in a child process (what backend and devices it finds); versions come from the
installed distributions' metadata; a TPU is looked for as the evaluation harness does. Providers
are reported from the settings and the environment (keys as set / not set), and a configured
URL is probed with a short HTTP request that carries no credentials. With a Ray cluster chosen
(`--ray`, `[executor] ray`), the cluster is reported: nodes, resources, TPUs, authentication (Ray
is imported only then). Exit status 0 when the tool can run (settings valid, jax usable, the
store opens, the chosen provider configured, the chosen cluster usable).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from maxkernel_tui import __version__
from maxkernel_tui.config import (
    GEMINI_BASE_URL_VARIABLE,
    VERTEX_VARIABLES,
    ConfigError,
    Settings,
    add_settings_flags,
    mask_url,
    secret_status,
    settings_from_args,
)
from maxkernel_tui.kernels.sandbox.policy import opted_out
from maxkernel_tui.kernels.sandbox_layers import sandbox_layers
from maxkernel_tui.kernels.service.facts import measured_paths, tpu_present
from maxkernel_tui.kernels.workers import scrubbed_env
from maxkernel_tui.store import Store, StoreError
from maxkernel_tui.versions import installed_version


class Severity(StrEnum):
    """What a finding means for running the tool: FAIL stops it, WARN and INFO do not."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    INFO = "info"


OK, WARN, FAIL, INFO = tuple(Severity)
JAX_TIMEOUT_S = 120.0
PROBE_TIMEOUT_S = 3.0

_JAX_PROBE = """
import json
try:
    import jax
    devices = jax.devices()
    print(json.dumps({"jax": jax.__version__, "backend": jax.default_backend(),
                      "devices": [str(d) for d in devices][:8], "count": len(devices),
                      "device_kind": devices[0].device_kind if devices else None}))
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
"""


@dataclass
class Finding:
    name: str
    status: Severity
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "doctor",
        help="check jax, the TPU, libtpu, the providers and the store",
        description="Report the jax backend (asked in a child process), whether a TPU is "
        "present, the libtpu version, which LLM providers are configured and reachable, and where "
        "the session store is and whether it opens. Exit 0 when the tool can run here.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_settings_flags(parser)
    parser.add_argument(
        "--ray-insecure",
        action="store_true",
        help="report a Ray cluster that runs without token authentication instead of refusing it",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    findings = [
        Finding(
            "maxkernel-tui",
            INFO,
            f"{__version__} on Python {platform.python_version()} ({sys.executable})",
        )
    ]
    settings: Settings | None
    try:
        settings = settings_from_args(args)
    except ConfigError as error:
        settings = None
        findings.append(Finding("settings", FAIL, str(error)))
    else:
        source = "read" if settings.config_file.is_file() else "not present, defaults used"
        warnings = "".join(f"; {w}" for w in settings.warnings)
        findings.append(
            Finding(
                "settings",
                WARN if settings.warnings else OK,
                f"{settings.config_file} ({source}){warnings}",
            )
        )
    findings += [check_jax(), check_sandbox(), check_tpu(), check_measured_paths(), check_libtpu()]
    if settings is not None:
        findings += check_providers(settings)
        findings.append(check_store(settings))
        findings.append(check_ray(settings.ray, args.ray_insecure))
    can_run = not any(f.status == FAIL for f in findings)
    if args.json:
        print(json.dumps({"ok": can_run, "checks": [asdict(f) for f in findings]}, indent=1))
    else:
        marks = {OK: "✓", WARN: "!", FAIL: "✗", INFO: "·"}
        for finding in findings:
            print(f"{marks[finding.status]} {finding.name:<22} {finding.detail}")
        print(
            "the tool can run here" if can_run else "the tool cannot run as configured: see ✗ above"
        )
    return 0 if can_run else 1


def check_jax() -> Finding:
    version = installed_version("jax")
    if version is None:
        return Finding(
            "jax", FAIL, "not installed: kernels cannot be traced, compiled or evaluated"
        )
    env = scrubbed_env(
        **{k: v for k, v in os.environ.items() if k.startswith(("JAX_", "XLA_", "TPU_"))}
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", _JAX_PROBE],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=JAX_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return Finding("jax", FAIL, f"{version}: no answer from jax within {JAX_TIMEOUT_S:.0f} s")
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Finding(
            "jax", FAIL, f"{version}: the probe process failed (exit {done.returncode}): {tail}"
        )
    if "error" in answer:
        return Finding("jax", FAIL, f"{version}: {answer['error']}", answer)
    devices = f"{answer['count']} device(s), {answer['device_kind']}"
    return Finding("jax", OK, f"{answer['jax']}, backend {answer['backend']}: {devices}", answer)


def check_sandbox() -> Finding:
    """The sandbox layers a worker gets here, from a probe worker that enters them."""
    layers = sandbox_layers()
    if layers.error is not None:
        return Finding("sandbox", FAIL, f"the probe failed: {layers.error}")
    data = {"active": layers.active, "missing": layers.missing, "opted_out": opted_out()}
    if not layers.lacking:
        return Finding(
            "sandbox", OK, "untrusted code runs confined: " + ", ".join(layers.active), data
        )
    lacking = "; ".join(f"{name}: {layers.missing[name]}" for name in layers.lacking)
    if opted_out():
        return Finding(
            "sandbox", WARN, f"untrusted code runs WITHOUT {lacking} (sandbox = off)", data
        )
    return Finding(
        "sandbox",
        FAIL,
        f'untrusted code is refused: missing {lacking}; `--sandbox off` (or sandbox = "off" '
        "in the config file) runs it anyway, and every report says so",
        data,
    )


def check_tpu() -> Finding:
    if tpu_present():
        return Finding("TPU", OK, "present: timings are measured on it", {"present": True})
    return Finding(
        "TPU",
        INFO,
        "not present: TPU compiles ahead of time with libtpu, numerics in interpret "
        "mode, no timings",
        {"present": False},
    )


def check_measured_paths() -> Finding:
    """Which measured paths (device timing, measured autotune, ...) run here; none without a TPU."""
    paths = measured_paths(tpu_present())
    active = [p.name for p in paths if p.active]
    detail = (
        f"active: {', '.join(active)}"
        if active
        else "none active (no TPU): " + ", ".join(p.name for p in paths) + " need one"
    )
    data = {p.name: {"active": p.active, "detail": p.detail} for p in paths}
    return Finding("measured paths", INFO, detail, data)


def check_libtpu() -> Finding:
    version = installed_version("libtpu", "libtpu-nightly")
    if version is None:
        return Finding(
            "libtpu",
            WARN,
            "not installed: no TPU lowering or ahead-of-time compile checks",
            {"version": None},
        )
    return Finding(
        "libtpu",
        OK,
        f"{version} (TPU ahead-of-time compiles for v4, v5e, v5p, v6e)",
        {"version": version},
    )


def probe(url: str) -> tuple[bool, str]:
    """Does anything answer HTTP at `url`? Any status counts (401 and 404 too); no credentials
    sent."""
    request = urllib.request.Request(
        url, method="GET", headers={"User-Agent": f"maxkernel-tui/{__version__}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as answer:
            return True, f"HTTP {answer.status}"
    except urllib.error.HTTPError as error:
        return True, f"HTTP {error.code}"
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return False, f"unreachable: {reason}"


def check_providers(settings: Settings) -> list[Finding]:
    """One finding per provider; the chosen one failing to be configured or reachable is a
    failure."""
    secrets, chosen = secret_status(), settings.provider
    model = f", model {settings.model}" if settings.model else ""
    replay = " (plays a recorded transcript)" if chosen == "replay" else ""
    builtin = Finding(
        "builtin", OK, "the offline agent: always available, no network", {"configured": True}
    )
    providers = [
        _gemini_finding(os.environ, secrets, chosen),
        _openai_finding(settings, secrets, chosen),
        builtin,
    ]
    configured = [f.name for f in providers if f.data.get("configured")]
    summary = Finding(
        "provider",
        INFO,
        f"chosen: {chosen} (from {settings.source('provider')}){model}{replay}",
        {"chosen": chosen, "configured": configured},
    )
    return [summary, *providers]


def _severity(name: str, chosen: str) -> Severity:
    """A provider's problem fails the check when it is the chosen one, else warns."""
    return FAIL if name == chosen else WARN


def _gemini_finding(env: Mapping[str, str], secrets: dict[str, str], chosen: str) -> Finding:
    """Gemini: an API key, or Vertex AI (project and location); a base URL is probed."""
    keys = [name for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY") if secrets[name] == "set"]
    vertex = env.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true", "yes")
    missing_vertex = [v for v in VERTEX_VARIABLES[1:] if not env.get(v)]
    gemini_ok, ways = False, []
    if keys:
        gemini_ok, ways = True, [f"API key in {' and '.join(keys)} (set)"]
    if vertex and not missing_vertex:
        gemini_ok = True
        project, location = env.get("GOOGLE_CLOUD_PROJECT"), env.get("GOOGLE_CLOUD_LOCATION")
        ways.append(f"Vertex AI, project {project} in {location}")
    gemini = Finding(
        "gemini",
        OK if gemini_ok else INFO,
        "; ".join(ways)
        or "not configured (GEMINI_API_KEY / GOOGLE_API_KEY not set, Vertex AI not set up)",
        {"configured": gemini_ok, **secrets, "vertex": vertex},
    )
    if vertex and missing_vertex:
        gemini.status = _severity("gemini", chosen)
        gemini.detail = f"Vertex AI chosen but {', '.join(missing_vertex)} not set"
    elif not gemini_ok and chosen == "gemini":
        gemini.status = FAIL
    url = env.get(GEMINI_BASE_URL_VARIABLE)
    if url and (gemini_ok or chosen == "gemini"):
        reachable, how = probe(url)
        gemini.detail += f"; endpoint {mask_url(url)}: {how}"
        gemini.data["reachable"] = reachable
        if not reachable:
            gemini.status = _severity("gemini", chosen)
    return gemini


def _openai_finding(settings: Settings, secrets: dict[str, str], chosen: str) -> Finding:
    """OpenAI-compatible: a base URL (vLLM, Ollama, llama.cpp on the VM), probed at /models."""
    if not settings.base_url:
        return Finding(
            "openai-compatible",
            FAIL if chosen == "openai" else INFO,
            "not configured (no base_url: set MAXKERNEL_TUI_BASE_URL or base_url in the "
            "config file)",
            {"configured": False},
        )
    reachable, how = probe(settings.base_url + "/models")
    base_url = mask_url(settings.base_url)
    detail = (
        f"{base_url} (from {settings.source('base_url')}): {how}; "
        f"OPENAI_API_KEY {secrets.get('OPENAI_API_KEY')}"
    )
    return Finding(
        "openai-compatible",
        OK if reachable else _severity("openai", chosen),
        detail,
        {"configured": True, "reachable": reachable, "base_url": base_url},
    )


def check_store(settings: Settings) -> Finding:
    path = settings.store_path
    try:
        with Store(path) as store:
            count = len(store.list_sessions())
            version = store.schema_version
    except StoreError as error:
        return Finding("session store", FAIL, str(error), {"path": str(path), "opens": False})
    return Finding(
        "session store",
        OK,
        f"{path} (opens; schema v{version}; {count} session(s))",
        {"path": str(path), "opens": True, "sessions": count, "schema_version": version},
    )


def check_ray(address: str | None, insecure: bool) -> Finding:
    """The chosen Ray cluster: nodes, CPUs, TPUs, auth, and where the token is read from (never
    the token). Ray is imported only when a cluster is chosen."""
    if address is None:
        return Finding("ray cluster", INFO, "not used: evaluations run on this machine (--ray)")
    try:
        from maxkernel_tui.kernels.executors import ray_cluster
    except ImportError as error:
        return Finding(
            "ray cluster", FAIL, f"Ray is not installed ({error}): pip install 'maxkernel-tui[ray]'"
        )
    from maxkernel_tui.kernels.executors.errors import ClusterError

    try:
        facts = ray_cluster.connect(address, insecure=insecure)
    except ClusterError as error:
        return Finding("ray cluster", FAIL, str(error), {"address": address})
    try:
        nodes = [
            {
                "node": n.node_id[:8],
                "address": n.address,
                "alive": n.alive,
                "head": n.head,
                "cpus": n.cpus,
                "tpus": n.tpus,
                "resources": n.resources,
            }
            for n in facts.nodes
        ]
    finally:
        ray_cluster.disconnect()
    source = ray_cluster.token_source() or "none"
    status = OK if facts.alive else FAIL
    detail = f"{facts.describe()}; token read from {source}"
    return Finding(
        "ray cluster", status, detail, {"address": address, "auth": facts.auth, "nodes": nodes}
    )
