"""A closed-form family built from its arrays after one edit, and the one-line error it must
raise (tests/test_compositional.py, tests/test_minimax.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from problems import ProblemError


def assert_edit_refused(
    family: type, arrays: dict[str, Any], edit: Callable[[dict[str, Any]], object], message: str
) -> None:
    """``family(**arrays)`` after ``edit(arrays)`` raises a :class:`~problems.ProblemError` that
    names the family first and then says ``message`` (a regular expression)."""
    edit(arrays)
    with pytest.raises(ProblemError, match=rf"{family.__name__}: .*{message}"):
        family(**arrays)
