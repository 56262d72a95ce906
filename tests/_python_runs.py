"""Python code run in a fresh interpreter, for what one process cannot show: which modules an
import pulls in, what a process started with other settings draws or loads."""

from __future__ import annotations

import subprocess
import sys
from typing import Any


def run_python(code: str, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS`` with this interpreter, its output captured as text; ``options``
    go to :func:`subprocess.run` (``cwd``, ``env``). An exit status other than 0 raises
    :class:`subprocess.CalledProcessError`."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, **options
    )
