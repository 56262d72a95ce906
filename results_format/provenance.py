"""Provenance of a results file: the commit and the package versions it was produced with.

Every producer that records where its numbers come from (the claim runner's ``metadata.json``,
an experiment's ``metadata.json``, a benchmark's ``machine`` block) takes them from here, so the
record has one shape: ``{"git_commit": str, "versions": {"python": str, "numpy": str, ...}}``.
The versions are the installed distributions' (:mod:`importlib.metadata`), read without
importing the packages, so this module stays standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

#: The packages whose versions a results file records, in the order they are written.
PACKAGES: tuple[str, ...] = ("numpy", "scipy", "torch", "sympy", "hypothesis")


@functools.cache
def git_commit() -> str:
    """The checkout's ``HEAD`` commit, or ``"unknown"`` outside a git checkout (read once per
    process: every claim record names it)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """``{"python": ..., <package>: <its installed version>, ...}`` for ``packages``."""
    return {
        "python": platform.python_version(),
        **{name: metadata.version(name) for name in packages},
    }


def provenance() -> dict[str, Any]:
    """``{"git_commit": ..., "versions": ...}``: spread into a metadata record
    (``{"experiment": ..., **provenance(), "seed": ...}``)."""
    return {"git_commit": git_commit(), "versions": package_versions()}


__all__ = ["PACKAGES", "git_commit", "package_versions", "provenance"]
