"""Registry entries for the classical (centralised) estimators: exact, AID (CG, Neumann, FP), ITD.

AID is one class with two strategy fields, ``ImplicitDifferentiation(inner=...,
linear_solver=...)``; an entry's ``make`` assembles those solver objects from flat keywords.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from testbed.defaults import NEUMANN_TERMS
from testbed.estimators.classical import ExactHypergradient
from testbed.estimators.classical import ImplicitDifferentiation
from testbed.estimators.classical import IterativeDifferentiation
from testbed.estimators.fixed_point import FixedPoint
from testbed.estimators.solvers import ConjugateGradient
from testbed.estimators.solvers import ExactInnerSolution
from testbed.estimators.solvers import GradientDescent
from testbed.estimators.solvers import InnerSolver
from testbed.estimators.solvers import LinearSolver
from testbed.estimators.solvers import Neumann
from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo
from testbed.info import field_defaults

# batch_size is the classes' field; the solver objects are assembled by each make from flat
# keywords (inner_steps -> GradientDescent, or ExactInnerSolution when None; cg_iterations ->
# ConjugateGradient; neumann_terms -> Neumann or FixedPoint). The solvers' counts are required
# fields without a default to read, so the entries state those keywords' defaults, once, here;
# the step sizes are the solvers' own defaults.
_PARTS = ("inner", "linear_solver")
_INNER = {"inner_steps": 100, **field_defaults(GradientDescent, step_size="inner_step_size")}
_SERIES = {"neumann_terms": NEUMANN_TERMS, **field_defaults(Neumann, step_size="neumann_step_size")}

_entry = functools.partial(EstimatorInfo, paper="Classical", supports=ALL_KINDS)


def _inner(inner_steps: int | None, inner_step_size: float | None) -> InnerSolver:
    return (
        ExactInnerSolution()
        if inner_steps is None
        else GradientDescent(inner_steps, inner_step_size)
    )


def _aid(
    name: str,
    reference: str,
    linear_solver: Callable[..., LinearSolver],
    keywords: dict[str, Any],
    enrolled_claims: tuple[str, ...] = (),
) -> EstimatorInfo:
    """An AID entry: its make assembles the inner solver from ``inner_steps`` /
    ``inner_step_size`` and ``linear_solver`` from the entry's ``keywords``."""

    def make(
        inner_steps: int | None,
        inner_step_size: float | None,
        batch_size: int | None,
        **solver: Any,
    ) -> ImplicitDifferentiation:
        return ImplicitDifferentiation(
            inner=_inner(inner_steps, inner_step_size),
            linear_solver=linear_solver(**solver),
            batch_size=batch_size,
        )

    return _entry(
        name=name,
        cls=ImplicitDifferentiation,
        reference=reference,
        make=make,
        settings={**_INNER, **keywords},
        fixed=_PARTS,
        enrolled_claims=enrolled_claims,
    )


def _series(solver: type[Neumann] | type[FixedPoint]) -> Callable[..., LinearSolver]:
    """``solver(neumann_terms, neumann_step_size)``: the Neumann sum or its fixed-point form."""
    return lambda neumann_terms, neumann_step_size: solver(neumann_terms, neumann_step_size)


ENTRIES: list[EstimatorInfo] = [
    _aid(
        "aid-cg",
        "Grazzi et al. 2020, AID-CG (Sec. 2.2); Pedregosa 2016",
        lambda cg_iterations: ConjugateGradient(cg_iterations),
        {"cg_iterations": 10},
    ),
    _aid(
        "aid-neumann",
        "Ghadimi & Wang 2018, eq. (3.3); FedNest eq. (9b) with deterministic N",
        _series(Neumann),
        _SERIES,
    ),
    # The example variant of docs/variants.md: it enrolls in the claims of the estimator it varies,
    # which name only aid-neumann (a variant needs no edit to any claim).
    _aid(
        "aid-fp",
        "Grazzi et al. 2020, AID-FP (Sec. 2.2); the example variant of docs/variants.md",
        _series(FixedPoint),
        _SERIES,
        enrolled_claims=(
            "classical.gd.linear_rate",
            "classical.neumann.decay_rate",
            "classical.neumann.error_bound",
            "classical.neumann.error_identity",
        ),
    ),
    _entry(
        name="exact",
        cls=ExactHypergradient,
        reference="Implicit function theorem; FedNest Lemma 2.1 (eq. 8)",
        make=ExactHypergradient,
        closed_form_only=True,
    ),
    _entry(
        name="itd",
        cls=IterativeDifferentiation,
        reference="Franceschi et al. 2017; Grazzi et al. 2020, ITD (Sec. 2.1); AggITD eq. (3)",
        make=lambda inner_steps, inner_step_size, batch_size: IterativeDifferentiation(
            GradientDescent(inner_steps, inner_step_size), batch_size
        ),
        settings=dict(_INNER),
        fixed=("inner",),
    ),
]
