"""The wheel carries every package of the source tree.

An explicit package list in pyproject.toml once left out ``theory_checks.aggitd.thm1`` (AggITD's
Theorem 1 became a package): the tests, which import the source tree, passed, while the installed
testbed had no ``aggitd.thm1.rate_in_K`` and ``tox -e mutate`` (the installed wheel) found two
mutants that only that claim kills alive. The packages setuptools puts in the wheel, read from
pyproject.toml's own configuration, must be every directory with an ``__init__.py`` under the
project's top-level packages.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

REPO = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("testbed", "testbed_app", "problems", "theory_checks", "reports", "results_format")


def declared_packages(setuptools_config: dict) -> set[str]:
    """The packages a ``[tool.setuptools]`` table puts in the wheel: its explicit ``packages``
    list, or what its ``packages.find`` patterns find in the repository."""
    packages = setuptools_config.get("packages")
    if isinstance(packages, list):
        return set(packages)
    find = (packages or {}).get("find", {})
    return set(find_packages(where=str(REPO), include=find.get("include", ("*",))))


def packages_on_disk() -> set[str]:
    return {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in TOP_LEVEL
        for init in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_the_wheel_carries_every_package_on_disk() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = packages_on_disk()
    assert "theory_checks.aggitd.thm1" in on_disk
    assert declared_packages(config) == on_disk


def test_a_list_that_leaves_a_package_out_is_caught() -> None:
    # the configuration that shipped AggITD's Theorem 1 without its package
    on_disk = packages_on_disk()
    left_out = {"packages": sorted(on_disk - {"theory_checks.aggitd.thm1"})}
    assert declared_packages(left_out) != on_disk
