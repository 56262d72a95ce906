"""One settings value (theory_checks/settings.py): made by an entry point, passed down, put in
force by one function; no package sets torch's defaults anywhere else, and importing a registry
loads no plugin."""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

import pytest
import torch

from testbed_app.cli import build_parser
from testbed_app.run_settings import settings_of
from tests._python_runs import run_python
from theory_checks.profiles import PROFILES
from theory_checks.profiles import Profile
from theory_checks.settings import ExecutorSettings
from theory_checks.settings import RunSettings
from theory_checks.settings import use_settings

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("testbed", "testbed_app", "problems", "theory_checks", "results_format", "reports")
#: torch's process-wide defaults, which only the entry point's function may set
PROCESS_WIDE = {"set_default_dtype", "set_default_device"}
#: (file, function) allowed to call them: the one function every entry point calls
ALLOWED = {("theory_checks/settings.py", "use_settings")}


def _process_wide_calls(path: Path) -> list[tuple[str, int]]:
    """``(enclosing function or <module>, line)`` of each call to a name of
    :data:`PROCESS_WIDE` (``torch.set_default_dtype(...)``, or the name imported bare)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = child.name
            if isinstance(child, ast.Call):
                name = getattr(child.func, "attr", getattr(child.func, "id", None))
                if name in PROCESS_WIDE:
                    found.append((inner, child.lineno))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_only_the_entry_points_function_sets_torchs_defaults() -> None:
    calls = {
        (path.relative_to(ROOT).as_posix(), where, line)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for where, line in _process_wide_calls(path)
    }
    offenders = sorted(c for c in calls if (c[0], c[1]) not in ALLOWED)
    assert not offenders, f"torch's defaults set outside use_settings: {offenders}"
    assert {(c[0], c[1]) for c in calls} == ALLOWED  # the scan sees the one allowed place


def test_the_scan_finds_a_planted_call(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        textwrap.dedent("""
        import torch
        from torch import set_default_device
        torch.set_default_dtype(torch.float64)
        def helper():
            set_default_device("cpu")
        """)
    )
    assert _process_wide_calls(planted) == [("<module>", 4), ("helper", 6)]


def test_settings_are_one_frozen_value_with_a_profile_object() -> None:
    settings = RunSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.device = "cuda"  # type: ignore[misc]
    with pytest.raises(TypeError, match="must be a Profile"):
        RunSettings(profile="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dtype"):
        RunSettings(dtype="float16")
    with pytest.raises(ValueError, match="unknown executor"):
        ExecutorSettings("dask")


def test_use_settings_puts_dtype_and_threads_in_force() -> None:
    before = torch.get_num_threads()
    try:
        use_settings(RunSettings(dtype="float32", threads=1, plugins=False))
        assert torch.get_default_dtype() == torch.float32 and torch.get_num_threads() == 1
    finally:
        use_settings(RunSettings(threads=before, plugins=False))
    assert torch.get_default_dtype() == torch.float64


@pytest.mark.parametrize(
    ("argv", "threads", "jobs", "dtype"),
    [
        (["check", "--profile", "thorough", "--jobs", "2"], 1, 2, "float64"),
        (["verify", "aid-neumann", "--threads", "3"], 3, 1, "float64"),
        (["audit", "results"], None, 1, "float64"),
        (["run", "configs/", "--threads", "2", "--jobs", "3"], 2, 3, None),
    ],
)
def test_the_command_line_makes_the_settings(argv, threads, jobs, dtype, monkeypatch) -> None:
    """Threads: one per claim process, ``--threads`` when given, torch's own for a command
    that runs no claims; dtype: float64, but ``run``'s configs name theirs."""
    monkeypatch.setenv("TESTBED_PROFILE", "fast")
    settings = settings_of(build_parser().parse_args(argv))
    expected = PROFILES["thorough"] if "thorough" in argv else PROFILES["fast"]
    assert isinstance(settings.profile, Profile) and settings.profile == expected
    assert (settings.threads, settings.executor.jobs, settings.dtype) == (threads, jobs, dtype)
    assert settings.device == "cpu"


LOAD_ON_REQUEST = """
import importlib.metadata, sys
from testbed import plugins
entry = importlib.metadata.EntryPoint(name="never-there", value="no_such_module:ENTRY",
                                      group="testbed.estimators")
plugins.entry_points = lambda group: (entry,) if group == "testbed.estimators" else ()
from testbed import registry
from theory_checks import registry as claims
from theory_checks.settings import RunSettings, use_settings
print(len(plugins.problems()), len(claims.CLAIM_DB) == len(claims.BUILTIN_CLAIMS))
use_settings(RunSettings())
print(len(plugins.problems()), plugins.problems()[0].entry_point)
"""


def test_importing_a_registry_loads_no_plugin_putting_the_settings_in_force_does() -> None:
    """The registries hold the built-ins after import; the installed plugins (here one entry
    point that does not import) are loaded when the settings are put in force, and a broken one
    is left out with its reason as before."""
    done = run_python(LOAD_ON_REQUEST)
    assert done.stdout.split() == ["0", "True", "1", "never-there"], done.stderr
