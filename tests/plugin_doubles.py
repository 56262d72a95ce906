"""Plugin entries for tests/test_plugins.py: a deliberately broken copy of the example plugin
and malformed entries (what a researcher's package may get wrong)."""

from __future__ import annotations

import dataclasses

import torch

from testbed.info import EstimatorInfo
from testbed.registry import get_estimator


def broken_copy() -> EstimatorInfo:
    """The example's estimator with its Neumann step 0.1% too long: the series then sums
    ``(I - 1.001 lambda H)^j``, a bias the Neumann error identity sees on every bilevel case.

    (An off-by-one in the number of terms is caught too since the identity rejects the cases
    whose Neumann error vanishes whatever N: tests/test_neumann_identity_power.py.)
    """
    from my_estimator.horner import ENTRY
    from my_estimator.horner import HornerNeumann

    from testbed.estimators.solvers import default_step_size

    @dataclasses.dataclass(frozen=True)
    class StepTooLong(HornerNeumann):
        def solve(self, hvp, rhs: torch.Tensor, problem: object) -> torch.Tensor:
            lam = self.step_size or default_step_size(problem, "StepTooLong")  # type: ignore
            return HornerNeumann(self.terms, 1.001 * lam).solve(hvp, rhs, problem)

    def make(**kw):
        est = ENTRY.make(**kw)
        solver = est.linear_solver
        return dataclasses.replace(est, linear_solver=StepTooLong(solver.terms, solver.step_size))

    return dataclasses.replace(ENTRY, name="my-horner-aid-broken", make=make)


# a name that a built-in holds
CLASH = dataclasses.replace(get_estimator("aid-cg"))
# a class that is not an Estimator
WRONG_CLASS = EstimatorInfo(
    name="not-an-estimator",
    cls=dict,
    paper="x",
    reference="x",
    supports=frozenset({"bilevel"}),
    make=dict,
)


def aggitd_one_more_step() -> EstimatorInfo:
    """AggITD running one inner step more than asked (``N + 1`` lower-level rounds): its
    iterate trajectory is one entry longer than the checks expect."""
    base = get_estimator("aggitd")

    def make(**kw):
        est = base.build(**kw)
        return dataclasses.replace(est, inner_steps=est.inner_steps + 1)

    return dataclasses.replace(
        base,
        name="aggitd-one-more-step",
        make=make,
        enrolled_claims=(
            "aggitd.lower.contraction",
            "aggitd.prop1.mean_identity",
            "aggitd.alg1.per_index_identity",
        ),
    )


AGGITD_ONE_MORE_STEP = aggitd_one_more_step()


def _divide_by_zero(self, *args, **kwargs):
    return 1 / 0


def raising(entry: str, method: str, class_name: str, **changes) -> EstimatorInfo:
    """Estimator ``entry`` whose ``method`` raises ZeroDivisionError (a plugin's bug at run
    time), as the class ``class_name``; ``changes`` to its entry (its name first)."""
    base = get_estimator(entry)
    parent = type(base.build())
    namespace = {method: _divide_by_zero, "__module__": __name__}
    cls = dataclasses.dataclass(frozen=True)(type(class_name, (parent,), namespace))

    def make(**kw):
        est = base.build(**kw)
        return cls(**{f.name: getattr(est, f.name) for f in dataclasses.fields(est)})

    return dataclasses.replace(base, cls=cls, make=make, **changes)


def divides_by_zero() -> EstimatorInfo:
    """AID-CG whose ``estimate`` raises ZeroDivisionError (its ``compute``), enrolled in the CG
    claim."""
    return raising(
        "aid-cg",
        "compute",
        "DividesByZero",
        name="divides-by-zero",
        enrolled_claims=("classical.cg.exact_after_dim_y",),
    )


DIVIDES_BY_ZERO = divides_by_zero()


def _check_divides_by_zero(*args, **kwargs):
    return 1 / 0


def zero_division_claims() -> list:
    """A plugin's claim whose check raises ZeroDivisionError (entry point group
    ``testbed.claims``)."""
    from theory_checks.registry import get_claim

    base = get_claim("classical.cg.exact_after_dim_y")
    return [
        dataclasses.replace(
            base,
            id="plugin.zero_division",
            check=_check_divides_by_zero,
            perturbation=None,
            positive_control=None,
        )
    ]


ZERO_DIVISION_CLAIMS = zero_division_claims()


def step_raises() -> EstimatorInfo:
    """FedNest whose ``step`` raises ZeroDivisionError (its ``advance``: a plugin algorithm's
    bug at run time)."""
    return raising(
        "fednest",
        "advance",
        "StepRaises",
        name="fednest-step-raises",
        no_claims_reason="test double",
    )


STEP_RAISES = step_raises()
