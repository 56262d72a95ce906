"""The layer contracts of ``[tool.importlinter]`` (pyproject.toml) hold, and they can fail.

``tox -e lint`` runs ``lint-imports`` on the tree; here the same contracts run on a copy of the
packages, once as they are (kept) and once with one wrong import added to each kind of contract
(broken, naming the contract): a claim module importing the application, the report importing a
producer, an estimator importing an outer algorithm, the library importing a private module
of ``problems``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("problems", "testbed", "theory_checks", "testbed_app", "reports", "results_format")
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")

pytestmark = pytest.mark.skipif(not Path(LINT_IMPORTS).exists(),
                                reason="import-linter is not installed (extras test or lint)")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("layers")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package,
                        ignore=shutil.ignore_patterns("__pycache__", "output", "*.css"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: each run analyses the files as they are now
    return subprocess.run([LINT_IMPORTS, "--config", str(tree / "pyproject.toml"), "--no-cache"],
                          cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


WRONG = {
    "theory_checks/decision.py": ("import testbed_app.regression",
                                  "layers: application > claims > library core"),
    "reports/plots.py": ("import theory_checks.claim", "the report imports no producer"),
    "testbed/estimators/solvers.py": ("import testbed.algorithms.base",
                                      "the estimators import no outer algorithm"),
    "testbed/calls.py": ("import problems._base",
                         "no package imports another package's private modules"),
}


def test_the_layer_contracts_hold_on_the_tree(tree):
    done = lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(WRONG)} kept, 0 broken" in done.stdout


@pytest.mark.parametrize("module", sorted(WRONG))
def test_a_wrong_import_breaks_its_contract(tree, module):
    line, contract = WRONG[module]
    path = tree / module
    original = path.read_text()
    path.write_text(original + f"\n{line}  # a wrong import\n")
    try:
        done = lint(tree)
    finally:
        path.write_text(original)
    assert done.returncode != 0
    assert f"{contract}" in done.stdout and "BROKEN" in done.stdout, done.stdout
