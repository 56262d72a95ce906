"""Planted bugs in a TOML file: the one-line bugs a plugin plants in its adapter's calls, each
with the claims that must catch it (the library adapters of ``integrations/``).

Each is the size of bug a translation layer makes in a library's call: one field of a registry
entry's build changed, a count one short or a step doubled. The file holds a table per bug,
named as the module that loads it exports it:

.. code-block:: toml

    [SHORT_CG]
    name = "CG one iteration short"
    description = "solve_cg(maxiter=dim_y - 1)"
    entry = "torchopt-implicit-cg"
    field = "cg_iterations"
    change = "one fewer"            # max(value - 1, at_least); or "doubled": 2 value
    at_least = 1
    caught_by = ["classical.cg.exact_after_dim_y"]

:func:`load_planted_bugs` reads them into :class:`~theory_checks.claim.Perturbation` objects
built by :func:`~theory_checks.perturbed_variants.field_variant`, which a claims file names as
any other perturbation; ``integrations/test_library_adapters.py`` runs each against the claims
of its ``caught_by``. Unknown keys, changes and a missing key are errors naming the file and
the bug.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import field_variant

#: How a bug changes its field: ``change(value, at_least)``.
CHANGES: dict[str, Callable[[Any, Any], Any]] = {
    "one fewer": lambda value, at_least: max(value - 1, at_least),
    "doubled": lambda value, at_least: 2 * value,
}
_KEYS = {"name", "description", "entry", "field", "change", "at_least", "caught_by"}
_REQUIRED = _KEYS - {"at_least"}


class PlantedBugError(ValueError):
    """A planted-bugs file that cannot be read: says which file and bug."""


@dataclasses.dataclass(frozen=True)
class PlantedBug:
    """One planted bug: the perturbation that builds it and the claims that must catch it."""

    perturbation: Perturbation
    caught_by: tuple[str, ...]


def _rule(change: str, field: str, at_least: Any) -> Callable[[Any], Any]:
    """The wrong value of ``field`` from the built estimator."""
    return lambda estimator: CHANGES[change](getattr(estimator, field), at_least)


def planted_bug(table: dict[str, Any]) -> PlantedBug:
    """The bug one table of the file describes (see the module docstring)."""
    unknown, missing = set(table) - _KEYS, _REQUIRED - set(table)
    if unknown or missing:
        raise ValueError(f"unknown key(s) {sorted(unknown)}, missing {sorted(missing)}")
    if table["change"] not in CHANGES:
        raise ValueError(f"change {table['change']!r} is not one of {sorted(CHANGES)}")
    field = table["field"]
    rule = _rule(table["change"], field, table.get("at_least"))
    return PlantedBug(
        Perturbation(
            table["name"], table["description"], field_variant(table["entry"], **{field: rule})
        ),
        tuple(table["caught_by"]),
    )


def load_planted_bugs(path: Path) -> dict[str, PlantedBug]:
    """The planted bugs of the file ``path``, by their names in it."""
    bugs = {}
    for bug, table in tomllib.loads(path.read_text(encoding="utf-8")).items():
        try:
            bugs[bug] = planted_bug(table)
        except ValueError as error:
            raise PlantedBugError(f"{path}: planted bug {bug}: {error}") from error
    return bugs


__all__ = ["CHANGES", "PlantedBug", "PlantedBugError", "load_planted_bugs", "planted_bug"]
