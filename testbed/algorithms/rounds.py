"""A paper's communication formula, written once: the text as printed, evaluated from it.

Each outer algorithm states its rounds per outer iteration as a :class:`RoundsFormula` (its
``rounds_formula()``); :meth:`~testbed.algorithms.base.OuterAlgorithm.rounds_per_iteration`, the
communication table (``testbed_app.communication``) and the communication claims all read that
one object, and the ledger measures the rounds independently. The value is computed *from the
text*, so what the table prints is what is checked.

Text grammar: terms joined by ``" + "``; a term is an integer, or an optional integer coefficient
followed by one or more space-separated symbols (``"2T"``, ``"N'"``, ``"M S"``); a symbol is an
upper-case letter with an optional prime.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping

_FACTOR = re.compile(r"^(\d*)([A-Z]'?)?$")


@dataclasses.dataclass(frozen=True)
class RoundsFormula:
    """Rounds (or gossip steps) per outer iteration as a paper states them.

    Attributes:
        text: the formula as printed, e.g. ``"2T + N + 3"``.
        parameters: the algorithm's values of the symbols (``{"T": 5, "N": 10}``).
        source: where the paper states it.
        unit: ``"rounds"`` (server aggregations) or ``"gossip steps"`` (decentralized).
        note: what the reader must know (a drawn symbol, an erratum).
    """

    text: str
    parameters: Mapping[str, int]
    source: str
    unit: str = "rounds"
    note: str = ""

    def __post_init__(self) -> None:
        self.symbols()  # parse once: a malformed text fails where it is written

    def symbols(self) -> frozenset[str]:
        """Every symbol the text uses."""
        names: set[str] = set()
        for term in self.text.split(" + "):
            for factor in term.split():
                match = _FACTOR.match(factor)
                if match is None or not (match.group(1) or match.group(2)):
                    raise ValueError(f"rounds formula {self.text!r}: cannot read {factor!r}")
                if match.group(2):
                    names.add(match.group(2))
        return frozenset(names)

    def value(self, **drawn: int) -> int | None:
        """The formula at ``parameters`` and the ``drawn`` values (e.g. ``**{"N'": 3}``), or
        ``None`` when a symbol has no value (a per-iteration draw not given)."""
        values = {**self.parameters, **drawn}
        if not self.symbols() <= set(values):
            return None
        total = 0
        for term in self.text.split(" + "):
            factors = []
            for factor in term.split():
                match = _FACTOR.match(factor)
                assert match is not None
                coefficient, symbol = match.group(1), match.group(2)
                factors.append(int(coefficient) if coefficient else 1)
                if symbol:
                    factors.append(int(values[symbol]))
            total += math.prod(factors)
        return total


__all__ = ["RoundsFormula"]
