"""What every library adapter (torchopt, betty, higher) must show, one table for the three: the
verdicts of the installed version are the ones recorded for it (``expected_verdicts.toml``), each
planted one-line bug in the adapter's calls (``testbed_<library>/planted_bugs.toml``, loaded by
``testbed_<library>.perturbations``) is caught by the claims it names, and a missing library
gives one line saying how to install it. An adapter that is not installed is skipped. Each
adapter's own findings are tested in its ``tests/`` folder."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from testbed_app.library_verdicts import verdict_changes
from theory_checks.profiles import get_profile
from theory_checks.registry import get_claim
from theory_checks.runner import run_claim

HERE = Path(__file__).resolve().parent

#: adapter folder -> (its distribution, the module it imports, an entry that needs it)
LIBRARIES = {
    "torchopt": ("torchopt", "torchopt", "torchopt-implicit-cg"),
    "betty": ("betty-ml", "betty", "betty-cg"),
    "higher": ("higher", "higher", "higher-unrolled"),
}

#: (adapter, claim, planted bug), from each adapter's ``planted_bugs.toml`` (read as text: the
#: adapter need not be installed to list its tests)
PLANTED = [
    (adapter, claim_id, bug)
    for adapter in LIBRARIES
    for bug, table in tomllib.loads(
        (HERE / adapter / f"testbed_{adapter}" / "planted_bugs.toml").read_text()
    ).items()
    for claim_id in table["caught_by"]
]


def adapter_module(adapter: str, module: str = "") -> object:
    """``testbed_<adapter>[.module]``, the test skipped when the adapter is not installed."""
    return pytest.importorskip(f"testbed_{adapter}{'.' + module if module else ''}")


@pytest.mark.parametrize("adapter", LIBRARIES)
def test_every_verdict_is_the_one_recorded_for_the_installed_library(adapter, tmp_path):
    adapter_module(adapter)
    record = HERE / adapter / "expected_verdicts.toml"
    reference, changes = verdict_changes(record, version(LIBRARIES[adapter][0]), tmp_path)
    assert not changes, "\n".join(changes)


@pytest.mark.parametrize(
    "adapter, claim_id, bug", PLANTED, ids=[f"{a}-{b}-{c}" for a, c, b in PLANTED]
)
def test_a_one_line_bug_in_the_adapters_call_is_caught(adapter, claim_id, bug):
    planted = adapter_module(adapter, "perturbations").PLANTED[bug].perturbation
    result = run_claim(get_claim(claim_id), get_profile("fast"), make=planted.build)
    assert result.verdict == "fails as stated", (planted.name, result.verdict)


@pytest.mark.parametrize("adapter", LIBRARIES)
def test_a_missing_library_gives_one_line_saying_how_to_install_it(adapter, tmp_path):
    adapter_module(adapter)
    module, entry = LIBRARIES[adapter][1:]
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from testbed_app.cli import main\n"
        f"sys.exit(main(['verify', {entry!r}, '--quiet', '--no-report', '--results',"
        f" {str(tmp_path)!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'hypergradient-testbed[{adapter}]'" in lines[0]
