"""Installed versions of distributions, read from their metadata (nothing is imported)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def installed_version(*distributions: str) -> str | None:
    """The version of the first of `distributions` that is installed, or None."""
    for name in distributions:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None
