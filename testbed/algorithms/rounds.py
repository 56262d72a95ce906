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
from typing import Any

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
        self.terms()  # a malformed text fails where it is written

    def terms(self) -> tuple[tuple[int, tuple[str, ...]], ...]:
        """The text read as ``(coefficient, symbols)`` per term: ``"2T + M S + 3"`` is
        ``((2, ("T",)), (1, ("M", "S")), (3, ()))``."""
        out = []
        for term in self.text.split(" + "):
            coefficient, symbols = 1, []
            for factor in term.split():
                match = _FACTOR.match(factor)
                if match is None or not (match.group(1) or match.group(2)):
                    raise ValueError(f"rounds formula {self.text!r}: cannot read {factor!r}")
                coefficient *= int(match.group(1) or 1)
                symbols += [match.group(2)] if match.group(2) else []
            out.append((coefficient, tuple(symbols)))
        return tuple(out)

    def symbols(self) -> frozenset[str]:
        """Every symbol the text uses."""
        return frozenset(s for _, symbols in self.terms() for s in symbols)

    def value(self, **drawn: int) -> int | None:
        """The formula at ``parameters`` and the ``drawn`` values (e.g. ``**{"N'": 3}``), or
        ``None`` when a symbol has no value (a per-iteration draw not given)."""
        values = {**self.parameters, **drawn}
        terms = self.terms()
        if any(s not in values for _, symbols in terms for s in symbols):
            return None
        return sum(c * math.prod(int(values[s]) for s in symbols) for c, symbols in terms)

    def at_iteration(self, state: Any) -> int | None:
        """The formula at one iteration: its fixed value, or at the ``N'`` the iteration drew
        (read from the state's ``truncation_index``; FedNest's random truncation)."""
        fixed = self.value()
        if fixed is not None:
            return fixed
        index = getattr(state, "truncation_index", None)
        return None if index is None else self.value(**{"N'": int(index)})


__all__ = ["RoundsFormula"]
