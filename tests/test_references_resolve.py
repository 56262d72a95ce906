"""Every project name a docstring, the README or a documentation page refers to exists.

The code-structure review found docstrings pointing to ``testbed_app.experiments.base.*_SCHEMA``
after it had moved to ``results_format``; moving every claim into its result's module left
five more such references (a claim's notes naming ``theory_checks.fedmsa.exact.exact_run``).
This test reads the Sphinx cross-references of the packages' docstrings (``:func:`x.y```,
``:mod:`~x.y```, ...) and the backticked dotted names of the README and of the pages under
``docs/`` (where its long sections moved), and resolves each one that
starts with a project package: the module is imported and the attributes looked up.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("theory_checks", "testbed_app", "testbed", "results_format", "reports", "problems")
_DOTTED = "(?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+"
ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|exc|obj):`~?(" + _DOTTED + ")`")
BACKTICKED = re.compile("`(" + _DOTTED + r")(?:\(\))?`")
# Names that are not Python objects although they read like ones.
NOT_OBJECTS = {
    "testbed.claims",  # the entry point group of plugins' claims
}


def _references() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for match in ROLE.finditer(path.read_text(encoding="utf-8")):
                found.setdefault(match.group(1), set()).add(str(path.relative_to(ROOT)))
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for match in BACKTICKED.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(match.group(1), set()).add(str(page.relative_to(ROOT)))
    return {name: places for name, places in found.items() if name not in NOT_OBJECTS}


def unresolved(name: str) -> str | None:
    """Why ``name`` (``package.module.attr...``) does not resolve, or None when it does. A
    module that needs an optional dependency absent here counts as found when its file is."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            target = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and not error.name.startswith(PACKAGES):
                return None if importlib.util.find_spec(module_name) else f"no {module_name}"
            continue
        break
    else:
        return f"no module {parts[0]}"
    for attribute in parts[split:]:
        if not hasattr(target, attribute):
            return f"{'.'.join(parts[:split])} has no {attribute}"
        target = getattr(target, attribute)
    return None


REFERENCES = _references()


def test_the_references_are_found():
    assert len(REFERENCES) > 150, len(REFERENCES)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_a_documented_name_exists(name):
    problem = unresolved(name)
    assert problem is None, f"{name} ({', '.join(sorted(REFERENCES[name]))}): {problem}"


def test_a_stale_name_is_reported():
    assert unresolved("theory_checks.fedmsa.exact.exact_run") is not None
    assert unresolved("theory_checks.fedmsa.moments.exact_run") is None
