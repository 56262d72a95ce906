"""The wheel carries every package of the source tree.

An explicit package list in pyproject.toml once left out ``theory_checks.aggitd.thm1`` (AggITD's
Theorem 1 became a package): the tests, which import the source tree, passed, while the installed
testbed had no ``aggitd.thm1.rate_in_K`` and ``tox -e mutate`` (the installed wheel) found two
mutants that only that claim kills alive. The packages setuptools puts in the wheel, read from
pyproject.toml's own configuration, must be every directory with an ``__init__.py`` under the
project's top-level packages.
"""

from __future__ import annotations

import fnmatch
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


def data_files_on_disk() -> set[tuple[str, str]]:
    """``(package, path inside it)`` of every file under the top-level packages that is not
    Python source: what the installed testbed reads besides its modules (templates, the
    regression baseline, the Flower App's configuration)."""
    found = set()
    for top in TOP_LEVEL:
        for path in (REPO / top).rglob("*"):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            package = path.parent
            while not (package / "__init__.py").exists():
                package = package.parent
            found.add((".".join(package.relative_to(REPO).parts), str(path.relative_to(package))))
    return found


def declared_data(package_data: dict[str, list[str]]) -> set[tuple[str, str]]:
    """The files of :func:`data_files_on_disk` that ``[tool.setuptools.package-data]``'s
    patterns put in the wheel."""
    return {
        (package, inside)
        for package, inside in data_files_on_disk()
        if any(fnmatch.fnmatch(inside, pattern) for pattern in package_data.get(package, ()))
    }


def test_the_wheel_carries_every_data_file_on_disk() -> None:
    # the same kind of defect as a package left out: a template or baseline the source tree
    # reads but the installed testbed would lack
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = data_files_on_disk()
    assert ("reports", "baselines/regress.json") in on_disk
    assert declared_data(config["package-data"]) == on_disk


def test_a_data_pattern_that_misses_a_file_is_caught() -> None:
    package_data = {"reports": ["*.css", "*.js", "templates/*.j2"]}  # no baselines/*.json
    assert ("reports", "baselines/regress.json") not in declared_data(package_data)
