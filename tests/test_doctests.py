"""The examples in the docstrings run in the default test run (doctest), so they cannot rot.

Every module of the packages whose source holds an example (``>>> ``) is found by reading the
files, not by a hand-kept list, so a new example is run without any other edit.
"""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("problems", "reports", "results_format", "testbed", "testbed_app", "theory_checks")


def modules_with_examples() -> list[str]:
    """The dotted names of the packages' modules whose source holds a ``>>> `` example."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name.startswith("test_") or ">>> " not in path.read_text(encoding="utf-8"):
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


MODULES = modules_with_examples()


def test_the_examples_are_found() -> None:
    # the five modules that held examples before the doctests ran, and the new ones since
    assert {
        "testbed.estimators.aggitd",
        "testbed.estimators.classical",
        "testbed.estimators.fixed_point",
        "problems.quadratic_bilevel",
        "results_format.layout",
    } <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str) -> None:
    tests = doctest.DocTestFinder().find(importlib.import_module(module))
    examples = sum(len(test.examples) for test in tests)
    assert examples > 0, f"{module}: '>>> ' in its source but no docstring example found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, f"{module}:\n{report.getvalue()}"
