"""MUTANT_DB: the catalogue of realistic bugs, gathered from each family's ``mutants.py``
(:mod:`theory_checks.mutation` runs them; ``testbed mutate`` is the command)."""

from __future__ import annotations

from testbed.names import shown
from theory_checks.aggitd import mutants as aggitd
from theory_checks.classical import mutants as classical
from theory_checks.fedmsa import mutants as fedmsa
from theory_checks.fednest import mutants as fednest
from theory_checks.hgp import mutants as hgp
from theory_checks.mutation import Mutant

MUTANT_DB: tuple[Mutant, ...] = (
    classical.MUTANTS + fednest.MUTANTS + aggitd.MUTANTS + fedmsa.MUTANTS + hgp.MUTANTS
)


def get_mutant(name: str) -> Mutant:
    for mutant in MUTANT_DB:
        if mutant.name == name:
            return mutant
    raise KeyError(
        f"no mutant {shown(name)} among the {len(MUTANT_DB)} of the catalogue "
        "(`testbed mutate --list` lists them)"
    )


def families() -> list[str]:
    """The families of the catalogue, in catalogue order."""
    return list(dict.fromkeys(m.family for m in MUTANT_DB))


__all__ = ["MUTANT_DB", "families", "get_mutant"]
