"""theory_checks has no import loop, no reach-in and one way for the profile to travel.

The profile reaches a check as an argument only: no context variable, no ``$TESTBED_PROFILE``
read below the entry points, no ambient ``fast_profile()`` (a case strategy that called one
imported the runner and closed the loop ``runner -> registry -> fedmsa -> cases -> runner``);
and no module imports another's ``_private`` names. These tests read the source (``ast``) and
the import graph (grimp, which import-linter uses), so a new reach-in, loop or ambient read fails
here with its file and line. The loops are found by :func:`tests.import_rules.strongly_connected`,
the same function the import-linter contract uses.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

from tests import import_rules
from tests._python_runs import run_python

PACKAGE = Path(__file__).resolve().parents[1] / "theory_checks"
PROJECT = ("theory_checks", "testbed", "testbed_app", "problems", "reports", "results_format")

# What may read the environment: the default profile of an entry point (the command line and a
# test session pass its result down; nothing below them reads it).
ENVIRONMENT_READERS = {("profiles.py", "get_profile")}
# Entry points of a test session (pytest modules shipped inside the package): they may ask for
# the session's default profile, get_profile() without a name.
TEST_ENTRY_POINTS = {"test_claims.py", "test_mutants.py"}
# Names of an ambient profile: a check that calls one reads no argument.
AMBIENT = {"fast_profile", "active_profile", "running_on", "ContextVar"}


def _modules(package: Path) -> list[Path]:
    return sorted(package.rglob("*.py"))


def _enclosing_functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node's innermost enclosing function name ("" at module level)."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            )
            owner[child] = inner
            visit(child, inner)

    visit(tree, "")
    return owner


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.parent.name}/{path.name}:{getattr(node, 'lineno', 0)}"


def _walk(package: Path) -> Iterator[tuple[Path, ast.AST, str]]:
    """Every node of every module of ``package``: its file, the node and the name of its
    innermost enclosing function ("" at module level)."""
    for path in _modules(package):
        tree = ast.parse(path.read_text())
        owner = _enclosing_functions(tree)
        for node in ast.walk(tree):
            yield path, node, owner.get(node, "")


def ambient_profile_reads(package: Path = PACKAGE) -> list[str]:
    """Reads of the environment, of a context variable or of the ambient profile."""
    found = []
    for path, node, function in _walk(package):
        text = ""
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
            text = f"os.{node.attr}"
        elif isinstance(node, ast.Name) and node.id in AMBIENT:
            text = node.id
        elif isinstance(node, ast.alias) and node.name.split(".")[-1] in AMBIENT:
            text = f"import {node.name}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "get_profile"
            and not node.args
            and path.name not in TEST_ENTRY_POINTS
        ):
            text = "get_profile() (the environment's default)"
        if text and (path.name, function) not in ENVIRONMENT_READERS:
            found.append(f"{_where(path, node)} {text}")
    return found


def private_imports(package: Path = PACKAGE) -> list[str]:
    """``from x import _name`` or ``import x._module`` of a project module, within the package
    (a module's own private names are not imported, so every hit crosses modules)."""
    found = []
    for path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                level, module = node.level, node.module or ""
                dotted = [*module.split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                level, dotted = 0, [p for a in node.names for p in a.name.split(".")]
            else:
                continue
            if level == 0 and dotted[0] not in PROJECT:
                continue
            private = [p for p in dotted if p.startswith("_") and not p.startswith("__")]
            if private:
                found.append(f"{_where(path, node)} {', '.join(private)}")
    return found


def private_references(folder: Path = PACKAGE.parent / "integrations") -> list[str]:
    """References of a claims file (``"package.module:name"``) to a ``_private`` name: the
    claims file imports it by string, from another module. The testbed's own claims are Python
    (tests/test_claim_layout.py); the claims files left are the plugins' of integrations/."""
    found = []
    for toml in sorted(folder.rglob("*.toml")):
        for number, line in enumerate(toml.read_text().split("\n"), 1):
            for reference in re.findall(r"\"(\w[\w.]*):([\w.]+)\"", line):
                if any(
                    part.startswith("_")
                    for part in (*reference[0].split("."), *reference[1].split("."))
                ):
                    found.append(f"{toml.parent.name}/{toml.name}:{number} {':'.join(reference)}")
    return found


def local_project_imports(package: Path = PACKAGE) -> list[str]:
    """Imports of project modules inside a function (module-level is the rule)."""
    found = []
    for path, node, function in _walk(package):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and function:
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if getattr(node, "level", 0) or (module or "").split(".")[0] in PROJECT:
                found.append(f"{_where(path, node)} {module}")
    return found


def import_cycles() -> list[list[str]]:
    """Strongly connected components (of more than one module) of theory_checks' import graph:
    every import, function-local ones included (its claims are Python, so every reference from
    a claim to code is an import)."""
    graph = grimp.build_graph("theory_checks", exclude_type_checking_imports=True)
    edges = {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("theory_checks")}
        for m in graph.modules
    }
    return import_rules.strongly_connected(edges)


def test_no_check_reads_the_environment_or_an_ambient_profile():
    assert ambient_profile_reads() == []


def test_theory_checks_has_no_import_loop():
    assert import_cycles() == []


def test_the_profile_closes_no_loop_through_the_runner():
    # the review's loop: runner -> registry -> fedmsa -> cases -> runner (fast_profile)
    assert not [c for c in import_cycles() if "theory_checks.runner" in c]


def test_no_module_imports_another_modules_private_names():
    assert private_imports() == []


def test_no_claims_file_names_a_private_name():
    # a claims file names code by string ("module:name"), which no import rule sees
    assert private_references() == []


def test_project_modules_are_imported_at_module_level():
    # a function-local import hides a loop from the module-level graph; no optional dependency
    # of theory_checks needs one (Ray and Flower are testbed_app's)
    assert local_project_imports() == []


PLANTED = """\
from theory_checks.profiles import fast_profile
from theory_checks.fedmsa.common import _hidden
import os
SIZE = 4 if os.environ.get("TESTBED_PROFILE") == "fast" else 8


def draw():
    from theory_checks.runner import run_claim
    return run_claim
"""


@pytest.mark.parametrize("finder", [ambient_profile_reads, private_imports, local_project_imports])
def test_the_scans_find_a_planted_violation(tmp_path, finder):
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "sizes.py").write_text(PLANTED)
    assert len(finder(tmp_path / "planted")) >= 1
    assert all("planted/sizes.py" in line for line in finder(tmp_path / "planted"))


def test_the_reference_scan_finds_a_planted_private_reference(tmp_path):
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "claims.toml").write_text(
        '[[claim]]\nstrategy = {call = "theory_checks.fedmsa.rate:_rate_families"}\n'
    )
    assert private_references(tmp_path / "planted") == [
        "planted/claims.toml:2 theory_checks.fedmsa.rate:_rate_families"
    ]


def test_the_loop_finder_finds_the_reviewed_loop():
    # the loop a case strategy reading the runner's profile made: runner -> registry -> fedmsa
    # -> (claims file) cases -> runner
    edges = {
        "runner": {"registry", "claim"},
        "registry": {"fedmsa"},
        "fedmsa": {"cases"},
        "cases": {"runner", "claim"},
        "claim": set(),
    }
    assert import_rules.strongly_connected(edges) == [["cases", "fedmsa", "registry", "runner"]]
    assert import_rules.strongly_connected({**edges, "cases": {"claim"}}) == []


PLUGIN_USING_THE_RUNNER = """\
from theory_checks.calibration import calibrate_claim
from theory_checks.claim_results import case_summary
from theory_checks.mutation import run_mutant
from theory_checks.runner import run_claim
CLAIMS = ()
"""

LOAD_THE_REGISTRY = """\
import importlib.metadata, sys
sys.path.insert(0, sys.argv[1])
from testbed import plugins
entry = importlib.metadata.EntryPoint(name="runner-user", value="runner_user:CLAIMS",
                                      group="testbed.claims")
plugins.entry_points = lambda group: (entry,) if group == "testbed.claims" else ()
from theory_checks import registry
from theory_checks.settings import load_plugins
load_plugins()
print([problem.reason for problem in registry.claim_plugin_problems()])
"""


def test_a_claims_plugin_may_import_the_runner_while_the_registry_loads_it(tmp_path):
    # the claims plugins load when a run's settings are put in force (load_plugins); the
    # modules that import the registry at module level (runner, claim_results, calibration,
    # mutation) must work from a plugin imported then

    (tmp_path / "runner_user.py").write_text(PLUGIN_USING_THE_RUNNER)
    done = run_python(LOAD_THE_REGISTRY, str(tmp_path))
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
