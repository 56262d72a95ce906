"""A paper's assumptions and conditions as predicates on a case, and the readings of a statement.

A refutation is a statement about someone's published work: it is worth recording only on a case
that satisfies every assumption and condition of the paper, with the constants computed as the
paper defines them, and only when the statement fails under every reasonable reading. This
module gives both as data a claim declares, so that a refutation says exactly which readings it
covers: the readings a claim declares, each checked on the same cases (a claim that declares
none is read one way, and its verdict says nothing of other readings):

- :class:`Hypothesis`: one assumption or condition (FedNest's A1 with its joint Lipschitz
  constant, a step-size cap, ``N >= ...``, an initial batch ``b_0``). Its ``margin`` is the
  relative slack on a case, ``>= 0`` inside, ``< 0`` outside (:func:`at_most`,
  :func:`at_least`). The runner evaluates every hypothesis of a claim before it measures a
  case: a case outside one is rejected with its reason, neither a pass nor a counterexample,
  and hypothesis's shrinking then stays inside (a rejected draw cannot be a shrink target).
  Every measured case records its margins, so a refutation lists them.
- :class:`Reading`: one reasonable reading of a statement ("requires 2T + N + 3 rounds" read as
  exactly or as at most). A claim with readings is checked under each (the reading's parameters
  join every case's); it "fails as stated" only when every reading fails, and otherwise its
  verdict says which readings hold. A reading may declare the outcome the testbed has
  established under it (``expected``): a run where it differs is not as expected, so a reading
  that stops failing (or holding) is a regression even when the claim's verdict is unchanged.

- :class:`AddedParameter`: a parameter the testbed adds to the paper's setting, which the paper
  leaves open (HGP's ridge ``mu`` in eq. (12)), declared with the values the claim's cases use
  and the values measured beside every run's verdict, so the verdict says how it depends on it.

The constants a hypothesis and a check use come from one module per paper
(``theory_checks/<paper>/constants.py``), so a check and the assumptions it is judged against
can never use two definitions of one constant.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

#: A hypothesis's margin on a case: ``>= 0`` inside, ``< 0`` outside. Takes the case (a
#: :class:`theory_checks.claim.Case`: ``problem`` and ``params``).
MarginFn = Callable[[Any], float]


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """An assumption or condition of a paper, checked on every case of the claims that declare
    it.

    Attributes:
        name: short name, as the paper has it ("A1", "Thm 1 step cap").
        statement: the condition in plain-text math, with the constant's definition
            ("l_{g,1} >= max_i ||grad^2 g_i(z)||, z = (x, y) jointly").
        reference: where the paper states it ("Tarzanagh et al. 2022, Assumption A1").
        margin: the relative slack on a case (:data:`MarginFn`): ``>= 0`` inside.
    """

    name: str
    statement: str
    reference: str
    margin: MarginFn

    def evaluate(self, case: Any) -> HypothesisMargin:
        value = float(self.margin(case))
        if math.isnan(value):
            raise ValueError(f"hypothesis {self.name}: margin evaluated to NaN")
        return HypothesisMargin(self.name, self.statement, self.reference, value)


@dataclasses.dataclass(frozen=True)
class HypothesisMargin:
    """A hypothesis evaluated on one case: ``margin >= 0`` means the case satisfies it."""

    name: str
    statement: str
    reference: str
    margin: float

    @property
    def holds(self) -> bool:
        return self.margin >= 0.0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"holds": self.holds}


def at_most(value: float, cap: float) -> float:
    """Margin of ``value <= cap``: ``(cap - value) / |cap|`` (the relative room left)."""
    scale = abs(cap) if cap != 0.0 else 1.0
    return (cap - value) / scale


def at_least(value: float, floor: float) -> float:
    """Margin of ``value >= floor``: ``(value - floor) / |floor|``."""
    scale = abs(floor) if floor != 0.0 else 1.0
    return (value - floor) / scale


def margins(hypotheses: Sequence[Hypothesis], case: Any) -> list[HypothesisMargin]:
    """Every hypothesis evaluated on ``case``, in the claim's order."""
    return [h.evaluate(case) for h in hypotheses]


def violated(found: Sequence[HypothesisMargin]) -> list[HypothesisMargin]:
    return [m for m in found if not m.holds]


#: How the reason of a case rejected for a hypothesis begins (results files count them).
OUTSIDE_PREFIX = "outside the paper's hypotheses: "


def rejection_reason(found: Sequence[HypothesisMargin]) -> str:
    """The reason a case outside some hypotheses is rejected, naming each with its margin."""
    return OUTSIDE_PREFIX + "; ".join(
        f"{m.name} ({m.statement}) margin {m.margin:.3g}" for m in violated(found)
    )


@dataclasses.dataclass(frozen=True)
class Reading:
    """One reasonable reading of a claim's statement.

    Attributes:
        name: short name ("exactly", "at most (a budget)").
        statement: the statement under this reading.
        params: parameters added to every case's (the check reads them, e.g.
            ``{"reading": "at_most"}``).
        expected: what the testbed has established under this reading ("holds" or "fails");
            ``None``: only the claim's verdict is expected.
    """

    name: str
    statement: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    expected: str | None = None

    def __post_init__(self) -> None:
        if self.expected not in (None, "holds", "fails"):
            raise ValueError(
                f"reading {self.name!r}: expected must be 'holds' or 'fails', got {self.expected!r}"
            )


@dataclasses.dataclass(frozen=True)
class AddedParameter:
    """A parameter the testbed adds to a paper's setting (the paper leaves it open), on which
    a verdict may depend. Every run of the claim measures its check at each of ``values``
    (:func:`theory_checks.controls.run_added_parameters`) and records the outcome at each beside
    the verdict (``testbed check``, the results file, the report; ``testbed list --claim``
    shows the declaration).

    Attributes:
        name: short name ("ridge mu").
        statement: what the testbed adds and why, with where the value comes from.
        checked: the values the claim's own cases use.
        values: the values measured beside the verdict on the case ``at`` builds.
        at: the case (a :class:`theory_checks.claim.Case`) with the parameter at a value.
        shown: keys of the measurement's ``details`` recorded and shown with each outcome
            (the spread a median hides, say).
    """

    name: str
    statement: str
    checked: tuple[float, ...]
    values: tuple[float, ...]
    at: Callable[[float], Any]
    shown: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"added parameter {self.name!r}: no value to measure")


__all__ = [
    "OUTSIDE_PREFIX",
    "AddedParameter",
    "Hypothesis",
    "HypothesisMargin",
    "MarginFn",
    "Reading",
    "at_least",
    "at_most",
    "margins",
    "rejection_reason",
    "violated",
]
