"""Which sandbox layers a worker gets on this machine, learnt from a probe worker that enters
them (kernels/sandbox/probe.py); for `doctor`. No jax here."""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass, field

from maxkernel_tui.kernels.sandbox.policy import OPT_OUT_VARIABLE, REQUIRED_LAYERS, SandboxPolicy
from maxkernel_tui.kernels.workers import python_module_argv, scrubbed_env

PROBE_MODULE = "maxkernel_tui.kernels.sandbox.probe"
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SandboxLayers:
    active: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # the probe itself failed

    @property
    def lacking(self) -> list[str]:
        """The required layers that are missing."""
        return [name for name in self.missing if name in {str(layer) for layer in REQUIRED_LAYERS}]


def sandbox_layers() -> SandboxLayers:
    """The layers a sandboxed worker enters here (the probe runs opted out, so that it reports
    what is missing instead of refusing to start)."""
    with tempfile.TemporaryDirectory(prefix="mkt-sandbox-probe-") as private:
        policy = SandboxPolicy(writable=(private,))
        env = dict(scrubbed_env(), **policy.to_env(), **{OPT_OUT_VARIABLE: "off"})
        try:
            done = subprocess.run(
                python_module_argv(PROBE_MODULE),
                env=env,
                cwd=private,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return SandboxLayers(error=f"no answer in {PROBE_TIMEOUT_S:.0f} s")
    try:
        said = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = " | ".join(done.stderr.strip().splitlines()[-3:]) or "no output"
        return SandboxLayers(error=f"exit {done.returncode}: {tail}")
    return SandboxLayers(active=said["active"], missing=said["missing"])
