"""The authors'-code loader is a package of its own, outside the library core
(``integrations/authors_checkout``, module :mod:`testbed_authors_checkout`): the adapters of the
FedNest, HGP and FedMSA authors' code declare it as a dependency and the FedNest benchmark imports
it, while no module of the testbed's packages holds it or imports it, so nothing from outside
loads, and no stand-in enters ``sys.modules``, unless an adapter or the benchmark asks. A missing
checkout is one line saying how to name one; the module's docstring example runs here (the
doctests of ``tests/test_doctests.py`` cover the testbed's packages only).
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import io
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("testbed", "testbed_app", "theory_checks", "problems", "reports", "results_format")
LOADER = "testbed_authors_checkout"
LOADER_PACKAGE = ROOT / "integrations" / "authors_checkout"
ADAPTERS = ("fednest_authors", "hgp_authors", "fedmsa_authors")
INSTALLED = importlib.util.find_spec(LOADER) is not None
needs_loader = pytest.mark.skipif(
    not INSTALLED,
    reason="integrations/authors_checkout is not installed (tox installs it; by hand: "
    "pip install --no-deps -e integrations/authors_checkout)",
)


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


def core_modules() -> list[Path]:
    modules = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    assert len(modules) > 100  # the packages were found
    return modules


def test_the_loader_is_not_in_the_library_core():
    assert not (ROOT / "testbed" / "authors_code.py").exists()
    assert importlib.util.find_spec("testbed.authors_code") is None
    # nor under another name: no module of the core defines its entry points
    defining = [
        str(path.relative_to(ROOT))
        for path in core_modules()
        if {"import_authors_code", "their_output_silenced"}
        & {
            node.name
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef)
        }
    ]
    assert defining == [], defining
    assert (LOADER_PACKAGE / f"{LOADER}.py").is_file()


def test_no_module_of_the_testbed_imports_the_loader():
    importing = [
        str(path.relative_to(ROOT))
        for path in core_modules()
        if any(name.partition(".")[0] == LOADER for name in imported_modules(path))
    ]
    assert importing == [], importing


def test_the_loader_imports_only_the_standard_library_and_the_adapters_declare_it():
    imported = {
        name.partition(".")[0] for name in imported_modules(LOADER_PACKAGE / f"{LOADER}.py")
    }
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}
    project = tomllib.loads((LOADER_PACKAGE / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["dependencies"] == []
    name = project["project"]["name"]
    for adapter in ADAPTERS:
        pyproject = ROOT / "integrations" / adapter / "pyproject.toml"
        declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
        assert name in declared, adapter


@needs_loader
def test_without_the_variable_the_error_is_one_line_saying_how(monkeypatch):
    loader = importlib.import_module(LOADER)
    monkeypatch.delenv(loader.FEDNEST.env, raising=False)
    with pytest.raises(loader.AuthorsCodeError) as raised:
        loader.locate({"Client": "core.Client_hr:Client"}, loader.FEDNEST)
    message = str(raised.value)
    assert "\n" not in message
    assert loader.FEDNEST.env in message
    assert "git clone https://github.com/ucr-optml/FedNest" in message


@needs_loader
def test_the_docstring_example_runs():
    tests = doctest.DocTestFinder().find(importlib.import_module(LOADER))
    assert sum(len(test.examples) for test in tests) > 0
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()
