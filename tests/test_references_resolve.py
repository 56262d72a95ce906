"""Every project name a docstring, the README or a documentation page refers to exists.

The code-structure review found docstrings pointing to ``testbed_app.experiments.base.*_SCHEMA``
after it had moved to ``results_format``; moving every claim into its result's module left
five more such references (a claim's notes naming ``theory_checks.fedmsa.exact.exact_run``).
This test reads the Sphinx cross-references of the packages' docstrings (``:func:`x.y```,
``:mod:`~x.y```, ...) and the backticked dotted names of the README and of the pages under
``docs/`` (where its long sections moved), and resolves each one that
starts with a project package: the module is imported and the attributes looked up.

The pages also name methods by their class alone (a backticked `Replicates.drawn_ahead`): a
page kept ``Replicates.served`` after the method was renamed. Each such ``Class.attribute``
whose class the project defines is looked up on that class (:func:`unresolved_short`).
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

CLASS_DEFINED = re.compile(r"^class ([A-Z]\w*)\b", re.MULTILINE)
SHORT = re.compile(r"`([A-Z]\w*)\.([A-Za-z_]\w*)(?:\(\))?`")


def _classes() -> dict[str, list[str]]:
    """Every top-level class of the project's packages: its name and the modules defining it."""
    found: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for match in CLASS_DEFINED.finditer(path.read_text(encoding="utf-8")):
                found.setdefault(match.group(1), []).append(module)
    return found


CLASSES = _classes()


def _short_references() -> dict[str, set[str]]:
    """Backticked `Class.attribute` names on the README and the pages under ``docs/`` (not the
    CHANGELOG, a history that names what was), for classes the project defines."""
    found: dict[str, set[str]] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for match in SHORT.finditer(page.read_text(encoding="utf-8")):
            if match.group(1) in CLASSES:
                name = f"{match.group(1)}.{match.group(2)}"
                found.setdefault(name, set()).add(str(page.relative_to(ROOT)))
    return found


def unresolved_short(name: str) -> str | None:
    """Why ``Class.attribute`` is an attribute of no project class of that name (a dataclass's
    or NamedTuple's field counts by its annotation), or None when it is one."""
    class_name, attribute = name.split(".")
    for module in CLASSES.get(class_name, []):
        cls = getattr(importlib.import_module(module), class_name, None)
        if cls is None:
            continue
        if hasattr(cls, attribute) or any(
            attribute in getattr(k, "__annotations__", {}) for k in cls.__mro__
        ):
            return None
    return f"no class {class_name} of the project has {attribute}"


SHORT_REFERENCES = _short_references()


def test_the_references_are_found():
    assert len(REFERENCES) > 150, len(REFERENCES)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_a_documented_name_exists(name):
    problem = unresolved(name)
    assert problem is None, f"{name} ({', '.join(sorted(REFERENCES[name]))}): {problem}"


def test_a_stale_name_is_reported():
    assert unresolved("theory_checks.fedmsa.exact.exact_run") is not None
    assert unresolved("theory_checks.fedmsa.moments.exact_run") is None


def test_the_short_references_are_found():
    assert len(SHORT_REFERENCES) > 15, len(SHORT_REFERENCES)


@pytest.mark.parametrize("name", sorted(SHORT_REFERENCES))
def test_a_method_named_by_its_class_exists(name):
    problem = unresolved_short(name)
    assert problem is None, f"{name} ({', '.join(sorted(SHORT_REFERENCES[name]))}): {problem}"


def test_a_stale_method_is_reported():
    assert unresolved_short("Replicates.served") is not None
    assert unresolved_short("Replicates.drawn_ahead") is None
