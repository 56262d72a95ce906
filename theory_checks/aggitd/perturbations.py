"""Wrong AggITD estimators and FBO-AggITD algorithms that several AggITD results' perturbations or
the mutants (:mod:`theory_checks.aggitd.mutants`) build, and the perturbation several results
share (:data:`IMPORTANCE_WEIGHT_N`); a perturbation one result uses is defined in its module.

Each is a subclass of the real estimator or algorithm with one realistic mistake (an off-by-one
in the importance weight, a step off by a constant, a local step whose 1/tau is forgotten or
inverted or applied twice, a divisor M for |S|). :func:`estimator_variant` and
:func:`algorithm_variant` make the builders the perturbations run.

On the quadratic families the indirect part of AggITD's estimate, ``-J p``, is linear in
``p = lambda (N+1) z^N``, so a bug that scales ``p`` by a constant ``c`` (a wrong importance
weight) is reproduced exactly by :class:`ScaledIndirect`: ``direct + c (h - direct)``, whether
``h`` is one draw of Q or the exact mean over Q (expectation mode), because the mean over Q of
the wrong estimator is the same scaling of the mean."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from testbed.algorithms.aggitd import AggITDState
from testbed.algorithms.aggitd import FBOAggITD
from testbed.estimators.aggitd import AggITD
from testbed.estimators.base import InnerState
from testbed.federation.context import FederatedContext
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt
from testbed.oracles import Oracles
from theory_checks.claim import Perturbation

# --------------------------------------------------------------------------- estimator bugs


@dataclasses.dataclass(frozen=True)
class ScaledIndirect(AggITD):
    """AggITD whose indirect part ``-J p`` is multiplied by ``weight(N) * factor``.

    ``weight="n"``: ``N / (N + 1)`` (the importance weight ``lambda N`` instead of
    ``lambda (N + 1)``: N + 1 indices, weight N); ``weight="none"``: ``1 / (N + 1)`` (the weight
    forgotten, ``p = lambda z^N``); ``weight="exact"``: 1 (only ``factor``).
    """

    weight: str = "exact"
    factor: float = 1.0

    def estimate_in(
        self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        value, new_state, aux = super().estimate_in(ctx, x, state)
        n = self.inner_steps
        scale = self.factor * {"exact": 1.0, "n": n / (n + 1), "none": 1.0 / (n + 1)}[self.weight]
        direct = Oracles(ctx.problem).grad_outer(x, aux["y"], aux["clients"])[0].mean(0)
        return direct + scale * (value - direct), new_state, aux


@dataclasses.dataclass(frozen=True)
class ScaledSteps(AggITD):
    """AggITD whose One-Round-Lower steps ``inner_factor * beta`` and whose HessIV recursion
    steps ``neumann_factor * lambda`` while beta and lambda are reported."""

    inner_factor: float = 1.0
    neumann_factor: float = 1.0

    def step_sizes(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().step_sizes(problem)
        return self.inner_factor * beta, self.neumann_factor * lam


@dataclasses.dataclass(frozen=True)
class MeanOverAllClients(AggITD):
    """AggITD whose server divides the clients' hypergradient sum by M instead of |S|."""

    def estimate_in(
        self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        value, new_state, aux = super().estimate_in(ctx, x, state)
        return value * aux["clients"].shape[0] / ctx.problem.n_clients, new_state, aux


# --------------------------------------------------------------------------- algorithm bugs


@dataclasses.dataclass(frozen=True)
class UnscaledUpper(FBOAggITD):
    """One-Round-Upper with local step ``alpha`` (``outer_step_factor="one"``: Alg. 4's
    ``1 / tau_i`` forgotten), ``alpha tau`` (``"tau"``: ``alpha / tau_i`` misread as
    ``alpha tau_i``) or ``alpha / tau^2`` (``"over_tau"``: the ``1 / tau_i`` applied by the
    caller and again by the local loop) instead of ``alpha / tau_i``."""

    outer_step_factor: str = "one"

    def advance(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        h, inner, aux = self.estimator.estimate_in(ctx, state.x, InnerState(state.y))
        y = inner.y
        tau = self.local_steps if isinstance(self.local_steps, int) else max(self.local_steps)
        factor = {"tau": tau, "over_tau": 1.0 / tau}.get(self.outer_step_factor, 1)
        alpha = (self.outer_step_size or 0.01) * factor

        # the real One-Round-Upper's client work (testbed.algorithms.aggitd.one_round_upper)
        # with the wrong step: alpha' for every local step, or alpha' / tau_i ("over_tau")
        work = LocalIterates(
            state.x,
            OuterGradientXAt(y),
            self.local_steps,
            alpha,
            global_direction=h,
            scale_by_steps=self.outer_step_factor == "over_tau",
        )
        (local,) = ctx.run_clients(work, aux["clients"]).uploads
        x_next = ctx.aggregate(local, aux["clients"], "x")
        return AggITDState(x_next, y, h, aux["index"])


@dataclasses.dataclass(frozen=True)
class DividesByM(FBOAggITD):
    """The server divides the clients' summed x-update by M instead of |S|."""

    def advance(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        new = super().advance(ctx, state)
        share = int(ctx.participants().shape[0]) / ctx.problem.n_clients
        return new._replace(x=state.x + share * (new.x - state.x))


# --------------------------------------------------------------------------- builders


def estimator_variant(cls: type, **extra: Any) -> Any:
    """The builder of an AggITD perturbation: ``cls`` (a subclass of AggITD) with the fields
    ``extra`` fixed."""

    def make(**kw: Any) -> Any:
        return cls(**{**kw, **extra})

    return make


def algorithm_variant(cls: type, lower_solver: str = "svrg", **extra: Any) -> Any:
    """The builder of an FBO-AggITD perturbation: ``cls`` (a subclass of FBOAggITD) with the
    lower solver ``lower_solver`` and the fields ``extra`` fixed."""

    def make(**kw: Any) -> Any:
        return cls(lower_solver=lower_solver, **{**kw, **extra})

    return make


# --------------------------------------------------------------------------- shared perturbations


IMPORTANCE_WEIGHT_N = Perturbation(
    "importance weight lambda N instead of lambda (N + 1)",
    "an off-by-one in the weight of the uniformly drawn index Q in 0..N (N + 1 values, weight "
    "N): the indirect part is scaled by N / (N + 1), 1/2 at N = 1 and 0 at N = 0",
    estimator_variant(ScaledIndirect, weight="n"),
)
