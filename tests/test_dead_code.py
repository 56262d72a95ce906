"""No dead names: vulture (a static finder of unused code) reports nothing in the packages.

Every module of the repository counts as a user (the tests, the integrations, the benchmarks and
the example plugin may be a name's only caller); only names defined in the packages are reported.
Names read where vulture cannot see (templates, format strings, a plugin's claims file) are in
``tests/vulture_whitelist.py``, each group with where it is read; the framework's own hooks are
ignored by name below. 60% is vulture's lowest confidence: it reports unused functions, classes,
methods, properties and attributes as well as imports and unreachable code.
"""

from __future__ import annotations

from pathlib import Path

import vulture

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("testbed", "testbed_app", "problems", "theory_checks", "reports", "results_format")
USERS = ("tests", "integrations", "benchmarks", "examples", "conftest.py")
#: hooks that a framework calls by name: torch modules' ``forward``, a module's ``__getattr__`` /
#: ``__dir__`` (PEP 562), ``__exit__``'s ``*exc``, numpy's ``flags.writeable``
FRAMEWORK_NAMES = ["forward", "__getattr__", "__dir__", "exc", "writeable"]
MIN_CONFIDENCE = 60


def test_no_unused_names_in_the_packages() -> None:
    finder = vulture.Vulture(ignore_names=FRAMEWORK_NAMES)
    finder.scavenge([str(ROOT / p) for p in (*PACKAGES, *USERS)])
    package_dirs = tuple(ROOT / p for p in PACKAGES)
    unused = [
        item
        for item in finder.get_unused_code(min_confidence=MIN_CONFIDENCE)
        if Path(item.filename).resolve().is_relative_to(package_dirs[0].parent)
        and any(Path(item.filename).resolve().is_relative_to(d) for d in package_dirs)
        and not Path(item.filename).name.startswith("test_")
    ]
    assert not unused, "\n".join(item.get_report() for item in unused)
