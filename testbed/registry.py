"""The estimator registry: one entry per estimator variant, read by tests, checks and reports.

Adding a variant is one file (the estimator, or a configuration of an existing one) plus one
``EstimatorInfo`` entry here. Every concrete :class:`~testbed.Estimator` subclass must appear in
``ESTIMATOR_DB`` and every entry must name its claims (ids of :mod:`theory_checks` claims) or say
why it has none; ``tests/test_registry.py`` enforces both.
"""

from __future__ import annotations

from typing import Any

from testbed.entries import aggitd, fedmsa, fednest, hgp
from testbed.estimators.classical import (
    ExactHypergradient,
    ImplicitDifferentiation,
    IterativeDifferentiation,
)
from testbed.estimators.fixed_point import FixedPoint
from testbed.estimators.solvers import (
    ConjugateGradient,
    ExactInnerSolution,
    GradientDescent,
    Neumann,
)
from testbed.info import ALL_KINDS, EstimatorInfo


def _aid(inner: Any, linear: Any, batch_size: int | None) -> ImplicitDifferentiation:
    return ImplicitDifferentiation(inner=inner, linear_solver=linear, batch_size=batch_size)


def _inner(inner_steps: int | None, inner_step_size: float | None) -> Any:
    return ExactInnerSolution() if inner_steps is None else GradientDescent(
        inner_steps, inner_step_size)


CLASSICAL: list[EstimatorInfo] = [
    EstimatorInfo(
        name="aid-cg",
        cls=ImplicitDifferentiation,
        paper="Classical",
        reference="Grazzi et al. 2020, AID-CG (Sec. 2.2); Pedregosa 2016",
        supports=ALL_KINDS,
        make=lambda inner_steps, inner_step_size, cg_iterations, batch_size: _aid(
            _inner(inner_steps, inner_step_size), ConjugateGradient(cg_iterations), batch_size),
        defaults={"inner_steps": 100, "inner_step_size": None, "cg_iterations": 10,
                  "batch_size": None},
        claims=("classical.cg.exact_after_dim_y", "classical.gd.linear_rate"),
    ),
    EstimatorInfo(
        name="aid-neumann",
        cls=ImplicitDifferentiation,
        paper="Classical",
        reference="Ghadimi & Wang 2018, eq. (3.3); FedNest eq. (9b) with deterministic N",
        supports=ALL_KINDS,
        make=lambda inner_steps, inner_step_size, neumann_terms, neumann_step_size, batch_size:
            _aid(_inner(inner_steps, inner_step_size),
                 Neumann(neumann_terms, neumann_step_size), batch_size),
        defaults={"inner_steps": 100, "inner_step_size": None, "neumann_terms": 20,
                  "neumann_step_size": None, "batch_size": None},
        claims=(
            "classical.neumann.error_identity",
            "classical.neumann.error_bound",
            "classical.neumann.decay_rate",
            "classical.gd.linear_rate",
        ),
    ),
    EstimatorInfo(
        name="aid-fp",
        cls=ImplicitDifferentiation,
        paper="Classical",
        reference="Grazzi et al. 2020, AID-FP (Sec. 2.2); the README's example variant",
        supports=ALL_KINDS,
        make=lambda inner_steps, inner_step_size, neumann_terms, neumann_step_size, batch_size:
            _aid(_inner(inner_steps, inner_step_size),
                 FixedPoint(neumann_terms, neumann_step_size), batch_size),
        defaults={"inner_steps": 100, "inner_step_size": None, "neumann_terms": 20,
                  "neumann_step_size": None, "batch_size": None},
        claims=(
            "classical.gd.linear_rate",
            "classical.neumann.decay_rate",
            "classical.neumann.error_bound",
            "classical.neumann.error_identity",
        ),
    ),
    EstimatorInfo(
        name="exact",
        cls=ExactHypergradient,
        paper="Classical",
        reference="Implicit function theorem; FedNest Lemma 2.1 (eq. 8)",
        supports=ALL_KINDS,
        make=lambda: ExactHypergradient(),
        claims=("classical.exact.finite_differences",),
        closed_form_only=True,
    ),
    EstimatorInfo(
        name="itd",
        cls=IterativeDifferentiation,
        paper="Classical",
        reference="Franceschi et al. 2017; Grazzi et al. 2020, ITD (Sec. 2.1); AggITD eq. (3)",
        supports=ALL_KINDS,
        make=lambda inner_steps, inner_step_size, batch_size: IterativeDifferentiation(
            GradientDescent(inner_steps, inner_step_size), batch_size),
        defaults={"inner_steps": 100, "inner_step_size": None, "batch_size": None},
        claims=("classical.gd.linear_rate", "classical.itd.error_bound",
                "classical.itd.error_identity"),
    ),
]


ESTIMATOR_DB: list[EstimatorInfo] = sorted(
    CLASSICAL + aggitd.ENTRIES + fedmsa.ENTRIES + fednest.ENTRIES + hgp.ENTRIES,
    key=lambda info: info.name,
)


def get_estimator(name: str) -> EstimatorInfo:
    for info in ESTIMATOR_DB:
        if info.name == name:
            return info
    known = ", ".join(info.name for info in ESTIMATOR_DB)
    raise KeyError(f"no estimator named {name!r}; registered: {known}")
