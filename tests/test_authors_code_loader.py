"""The authors'-code loader (:mod:`testbed.authors_code`) is the plugins' and the FedNest
benchmark's: no module of the testbed's packages imports it, so nothing from outside loads
unless an adapter or the benchmark asks; a missing checkout is one line saying how to name one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testbed.authors_code import FEDNEST, AuthorsCodeError, locate

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("testbed", "testbed_app", "theory_checks", "problems", "reports", "results_format")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_module_of_the_testbed_imports_the_loader():
    modules = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    assert len(modules) > 100  # the packages were found
    importing = [
        str(path.relative_to(ROOT))
        for path in modules
        if "testbed.authors_code" in imported_modules(path)
    ]
    assert importing == [], importing


def test_without_the_variable_the_error_is_one_line_saying_how(monkeypatch):
    monkeypatch.delenv(FEDNEST.env, raising=False)
    with pytest.raises(AuthorsCodeError) as raised:
        locate({"Client": "core.Client_hr:Client"}, FEDNEST)
    message = str(raised.value)
    assert "\n" not in message
    assert FEDNEST.env in message and "git clone https://github.com/ucr-optml/FedNest" in message
