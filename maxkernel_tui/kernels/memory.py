"""What memory the machine has free and what this process has mapped, read from /proc (Linux);
None where a figure cannot be read. No jax."""

from __future__ import annotations

from pathlib import Path


def available_bytes() -> int | None:
    """The machine's MemAvailable."""
    kib = _field_kib(Path("/proc/meminfo"), "MemAvailable")
    return None if kib is None else kib * 1024


def process_bytes(field: str) -> int | None:
    """A figure of this process's /proc/self/status in bytes: VmSize (mapped now), VmPeak..."""
    kib = _field_kib(Path("/proc/self/status"), field)
    return None if kib is None else kib * 1024


def _field_kib(path: Path, field: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
