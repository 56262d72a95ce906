"""The import contracts of ``[tool.importlinter]`` (pyproject.toml) hold, and each can fail.

``tox -e lint`` runs ``lint-imports`` on the tree; here the same contracts run on a copy of the
packages, once as they are (kept) and once with one planted violation of each kind (one run:
each contract must be broken and name its own violation in its section): a claim module
importing the application, the report importing a producer, an
estimator importing an outer algorithm, the library importing a private module of
``problems``, and, for the "no reach-ins" contract (tests/import_rules.py), a module-level import
loop, another module's private name, a module patched from outside and an unlisted import in a
function. The rules themselves are also tried on small packages made in ``tmp_path``, and the
tests are held to the private-name rule as well.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import import_rules

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("problems", "testbed", "theory_checks", "testbed_app", "reports", "results_format")
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
REACH_INS = "no reach-ins"

needs_import_linter = pytest.mark.skipif(
    not Path(LINT_IMPORTS).exists(), reason="import-linter is not installed (extras test or lint)"
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("layers")
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            copy / package,
            ignore=shutil.ignore_patterns("__pycache__", "output", "*.css"),
        )
    (copy / "tests").mkdir()
    for name in ("__init__.py", "import_rules.py"):  # the contract type "reach_ins"
        shutil.copy(ROOT / "tests" / name, copy / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: each run analyses the files as they are now; a wide terminal: no line of the
    # report is wrapped
    return subprocess.run(
        [LINT_IMPORTS, "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=300,
    )


#: Planted violations: {file: text appended (a new file when absent)}, the contract it breaks
#: and what the contract's report must name.
PLANTED: dict[str, tuple[dict[str, str], str, str]] = {
    "claims import the application": (
        {"theory_checks/decision.py": "import testbed_app.regression"},
        "layers: application > claims > library core",
        "theory_checks.decision",
    ),
    "the report imports a producer": (
        {"reports/plots.py": "import theory_checks.claim"},
        "the report imports no producer",
        "reports.plots",
    ),
    "an estimator imports an algorithm": (
        {"testbed/estimators/solvers.py": "import testbed.algorithms.base"},
        "the estimators import no outer algorithm",
        "testbed.estimators.solvers",
    ),
    "a private module of problems": (
        {"testbed/calls.py": "import problems._base"},
        "no package imports another package's private modules",
        "problems._base",
    ),
    "a module-level import loop": (
        {
            "testbed/planted_a.py": "import testbed.planted_b",
            "testbed/planted_b.py": "from testbed import planted_a",
        },
        REACH_INS,
        "import loop: testbed.planted_a",
    ),
    "another module's private name": (
        {"reports/plots.py": "from reports.results_reading import _planted"},
        REACH_INS,
        "private name: reports.plots",
    ),
    "another module patched at run time": (
        {"testbed_app/regression.py": "import reports.build\nreports.build.build_report = print"},
        REACH_INS,
        "patching: testbed_app.regression",
    ),
    "an unlisted import in a function": (
        {"results_format/paths.py": "def planted():\n    from results_format import verdicts"},
        REACH_INS,
        "local import: results_format.paths",
    ),
}


@needs_import_linter
def test_the_contracts_hold_on_the_tree(tree):
    done = lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    contracts = {contract for _, contract, _ in PLANTED.values()}
    assert f"{len(contracts)} kept, 0 broken" in done.stdout, done.stdout


def _planted(tree: Path, files: dict[str, str]) -> dict[Path, str | None]:
    """Append each text to its file (a new file when absent); the originals, to restore."""
    originals: dict[Path, str | None] = {}
    for relative, text in files.items():
        path = tree / relative
        originals.setdefault(path, path.read_text() if path.exists() else None)
        path.write_text(
            path.read_text() + f"\n{text}  # planted\n" if path.exists() else f"{text}  # planted\n"
        )
    return originals


def _restore(originals: dict[Path, str | None]) -> None:
    for path, original in originals.items():
        if original is None:
            path.unlink()
        else:
            path.write_text(original)


def broken_contracts(stdout: str) -> dict[str, str]:
    """Each broken contract's name -> what lint-imports reports under it (a heading is a line
    underlined by as many dashes)."""
    _, _, broken = stdout.partition("Broken contracts")
    lines = broken.splitlines()
    headings = [
        i
        for i in range(len(lines) - 1)
        if lines[i].strip() and lines[i + 1].strip() == "-" * len(lines[i].strip())
    ]
    return {
        lines[i].strip(): "\n".join(lines[i + 2 : end])
        for i, end in zip(headings, [*headings[1:], len(lines)], strict=True)
    }


@pytest.fixture(scope="module")
def planted_report(tree) -> tuple[int, dict[str, str], str]:
    """lint-imports on the tree with every violation of PLANTED in it (one run: each contract's
    section names its own violation); the tree is restored afterwards."""
    files: dict[str, str] = {}
    for plants, _, _ in PLANTED.values():
        for relative, text in plants.items():
            files[relative] = f"{files[relative]}\n{text}" if relative in files else text
    originals = _planted(tree, files)
    try:
        done = lint(tree)
    finally:
        _restore(originals)
    return done.returncode, broken_contracts(done.stdout), done.stdout


@needs_import_linter
@pytest.mark.parametrize("violation", sorted(PLANTED))
def test_a_planted_violation_breaks_its_contract(planted_report, violation):
    returncode, broken, stdout = planted_report
    _, contract, named = PLANTED[violation]
    assert returncode != 0
    sections = [text for name, text in broken.items() if name.startswith(contract)]
    assert sections and named in sections[0], stdout


STALE = {  # an entry of the reach-ins contract's lists that matches nothing, what it says
    "allowed_local_imports": (
        "testbed.calls -> testbed.oracles",
        "allowed local import no longer made",
    ),
    "ignore": (
        "private name: testbed.calls: testbed.oracles._gone",
        "ignored finding no longer found",
    ),
}


@needs_import_linter
def test_a_list_entry_that_matches_nothing_breaks_the_contract(tree):
    """The allowances and the ignored findings only shrink: an entry left behind is reported."""
    config = tree / "pyproject.toml"
    original = config.read_text()
    changed = original
    for option, (entry, _) in STALE.items():
        assert f"{option} = [\n" in changed
        changed = changed.replace(f"{option} = [\n", f'{option} = [\n    "{entry}",\n', 1)
    config.write_text(changed)
    try:
        done = lint(tree)
    finally:
        config.write_text(original)
    assert done.returncode != 0
    section = next(
        text for name, text in broken_contracts(done.stdout).items() if name.startswith(REACH_INS)
    )
    for entry, says in STALE.values():
        assert f"{says} (remove it from the list): {entry}" in section, done.stdout


# --- the rules on packages made here ------------------------------------------------------


def _package(root: Path, name: str, files: dict[str, str]) -> None:
    for relative, text in {"__init__.py": "", **files}.items():
        path = root / name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def rules_on(tmp_path: Path, monkeypatch) -> Callable[..., list[tuple[str, str, str]]]:
    """``rules_on(files, allowed=())``: the findings of the rules on a fresh package made of
    ``files`` (``PKG`` standing for its name, in the files, in ``allowed`` and in the findings),
    each as ``(rule, module, text)``."""
    name = f"planted_{tmp_path.name.replace('-', '_')}"  # a fresh package name per test
    monkeypatch.syspath_prepend(str(tmp_path))

    def found(
        files: dict[str, str], allowed: tuple[tuple[str, str], ...] = ()
    ) -> list[tuple[str, str, str]]:
        _package(tmp_path, name, {k: v.replace("PKG", name) for k, v in files.items()})
        read = import_rules.read_modules(import_rules.find_modules([name]))
        findings = import_rules.findings(
            read,
            [name],
            allowed_local_imports=[
                (a.replace("PKG", name), b.replace("PKG", name)) for a, b in allowed
            ],
        )
        return [
            (f.rule, f.module.replace(name, "PKG"), f.text.replace(name, "PKG")) for f in findings
        ]

    return found


def test_a_clean_package_has_no_findings(rules_on):
    assert (
        rules_on(
            {
                "a.py": "from PKG import b\nfrom PKG.b import public\n",
                "b.py": "def public():\n    return _mine()\n\n\ndef _mine():\n    return 1\n",
                # a private module used by its own package: allowed, as import-linter's private
                # modules
                "c/__init__.py": "from PKG.c._impl import thing\n",
                "c/_impl.py": "thing = 1\n",
            },
        )
        == []
    )


def test_a_loop_at_module_level_is_found_and_one_through_a_function_is_not(rules_on):
    found = rules_on(
        {
            "a.py": "import PKG.b\n",
            "b.py": "from PKG import c\n",
            "c.py": "from PKG.a import *\n",
            # d -> e at module level, e -> d in a function (listed): no module-level loop
            "d.py": "import PKG.e\n",
            "e.py": "def late():\n    import PKG.d\n",
            # a type-only import closes no loop at run time
            "f.py": "import PKG.g\n",
            "g.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import PKG.f\n",
        },
        allowed=(("PKG.e", "PKG.d"),),
    )
    assert [(rule, text) for rule, _, text in found] == [
        ("import loop", "PKG.a -> PKG.b -> PKG.c -> PKG.a")
    ]


def test_private_names_of_another_module_are_found(rules_on):
    found = rules_on(
        {
            "a.py": "_x = 1\n__all__ = ['y']\ny = 2\n",
            "b.py": "from PKG.a import _x, y, __all__\n",
            "c.py": "from PKG import a\nprint(a._x)\n",
            "d.py": "from . import a as alias\nalias._x\n",
            "e/__init__.py": "",
            "e/_hidden.py": "",
            "f.py": "import PKG.e._hidden\n",
        },
    )
    # b, c and d each reach a._x; f imports the private module e._hidden
    assert found == [
        *(("private name", f"PKG.{module}", "PKG.a._x") for module in "bcd"),
        ("private name", "PKG.f", "private module PKG.e._hidden"),
    ]


def test_patching_another_module_is_found(rules_on):
    found = rules_on(
        {
            "a.py": "def f():\n    return 1\n",
            "b.py": "import PKG.a\nPKG.a.f = print\n",
            "c.py": "from PKG import a\ndef swap():\n    setattr(a, 'f', print)\n",
            "d.py": "from PKG import a\ndel a.f\n",
            # reading an attribute, or changing an object's attribute, is no patching
            "e.py": "from PKG import a\nimport types\nx = a.f\nobj = types.SimpleNamespace()\n"
            "obj.f = a.f\n",
        },
    )
    assert found == [
        ("patching", f"PKG.{module}", f"PKG.a.f changed from PKG.{module}") for module in "bcd"
    ]


def test_local_imports_are_found_unless_listed(rules_on):
    found = rules_on(
        {
            "a.py": "",
            "b.py": "def f():\n    from PKG import a\n",
            "c.py": "class C:\n    def m(self):\n        import PKG.a\n",
            "d.py": "def optional():\n    import PKG.a\n",
            # a third-party or standard-library import in a function is not the rule's business
            "e.py": "def g():\n    import json\n",
        },
        allowed=(("PKG.d", "PKG.a"),),
    )
    assert found == [
        ("local import", f"PKG.{module}", f"PKG.{module} -> PKG.a in a function") for module in "bc"
    ]


def test_the_covered_list_decides_what_is_held(tmp_path, monkeypatch):
    name = f"planted_{tmp_path.name.replace('-', '_')}"
    _package(
        tmp_path,
        name,
        {
            "a.py": "_x = 1\n",
            "old/__init__.py": "",
            "old/b.py": f"from {name}.a import _x\n",
            "c.py": f"from {name}.a import _x\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    read = import_rules.read_modules(import_rules.find_modules([name]))
    held = import_rules.findings(read, [name], excluded=[f"{name}.old"])
    assert [f.module for f in held] == [f"{name}.c"]
    assert len(import_rules.findings(read, [name])) == 2


def test_an_allowance_no_longer_used_is_reported(tmp_path, monkeypatch):
    name = f"planted_{tmp_path.name.replace('-', '_')}"
    _package(tmp_path, name, {"a.py": ""})
    monkeypatch.syspath_prepend(str(tmp_path))
    read = import_rules.read_modules(import_rules.find_modules([name]))
    assert import_rules.unused_allowances(read, [(f"{name}.a", "x")]) == [f"{name}.a -> x"]
    with pytest.raises(ValueError, match="importer -> imported"):
        import_rules.parse_allowance("no arrow")


# --- the tests themselves -------------------------------------------------------------------


def test_no_test_module_imports_another_modules_private_names():
    """The private-name rule holds for the tests too: what one test module shares with another
    has a public name in a helper module (tests/_claim_files.py, tests/_segmented_runs.py, ...),
    and a test reaches the project through its public names. A test of a package's private
    module (tests/test_problems_shared.py: problems._spectra) may import that module."""
    modules = import_rules.find_modules([*PACKAGES, "tests"])
    read = import_rules.read_modules(modules, [m for m in modules if m.split(".")[0] == "tests"])
    found = [
        f"{name}:{line}: {source}.{private}"
        for name, module in sorted(read.items())
        for source, private, line in module.private_names
    ]
    assert found == []
