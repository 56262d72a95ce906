"""Perturbations of the classical estimators: the smallest bug each classical claim must catch."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from testbed import ConjugateGradient, GradientDescent, IterativeDifferentiation, Neumann, Oracles
from testbed.estimators.classical import ExactHypergradient, ImplicitDifferentiation
from testbed.registry import get_estimator
from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import registry_variant


def _short_cg(**kw: Any) -> Any:
    est = get_estimator("aid-cg").build(**kw)
    return dataclasses.replace(
        est, linear_solver=ConjugateGradient(max(est.linear_solver.iterations - 1, 0)))


def _slow_gd(**kw: Any) -> Any:
    est = get_estimator("aid-neumann").build(**kw)
    inner = est.inner
    return dataclasses.replace(est, inner=GradientDescent(inner.steps, 0.8 * inner.step_size))


@dataclasses.dataclass(frozen=True)
class _OneStepShort(IterativeDifferentiation):
    """ITD that runs and differentiates one inner step fewer than asked (an off-by-one)."""

    def estimate(self, problem: Any, x: Any, state: Any, rng: Any) -> Any:
        short = IterativeDifferentiation(GradientDescent(max(self.inner.steps - 1, 0),
                                                         self.inner.step_size))
        return short.estimate(problem, x, state, rng)


_itd_one_step_short = registry_variant("itd", _OneStepShort)


@dataclasses.dataclass(frozen=True)
class _Detached(IterativeDifferentiation):
    """ITD whose inner iterate is detached from x: only the direct part grad_x f(x, y_T)."""

    def estimate(self, problem: Any, x: Any, state: Any, rng: Any) -> Any:
        out = super().estimate(problem, x, state, rng)
        clients = torch.arange(problem.n_clients)
        direct = Oracles(problem).grad_outer(x, out.aux["y"], clients)[0].mean(0)
        return out._replace(value=direct)


_itd_detached = registry_variant("itd", _Detached)


@dataclasses.dataclass(frozen=True)
class _Biased(ExactHypergradient):
    def estimate(self, problem: Any, x: Any, state: Any, rng: Any) -> Any:
        out = super().estimate(problem, x, state, rng)
        return out._replace(value=out.value * (1 + 1e-4))


def _biased_exact(**kw: Any) -> Any:
    return _Biased()


def _neumann_wrong_step(**kw: Any) -> Any:
    est = get_estimator("aid-neumann").build(**kw)
    lam = est.linear_solver.step_size
    return ImplicitDifferentiation(est.inner, Neumann(est.linear_solver.terms, 0.9 * lam),
                                   est.batch_size)


NEUMANN_STEP = Perturbation(
    "Neumann step 0.9 lambda",
    "the series runs with 0.9 of the step it reports (a mis-set step size): its error decays "
    "like (1 - 0.9 lambda mu)^N, a 10% slower rate, and the partial sum is no longer the "
    "identity's; a 10% error in a step is the size of a wrong constant in a step rule",
    _neumann_wrong_step)
SHORT_CG = Perturbation(
    "CG one iteration short", "dim_y - 1 conjugate-gradient iterations instead of dim_y (an "
    "off-by-one in the iteration count): not exact on the slowest Krylov direction", _short_cg)
SLOW_GD = Perturbation(
    "GD step 0.8/L", "the inner solver runs with 0.8 of the step 1/L: the rate becomes "
    "1 - 0.8 mu/L, a 20% slower contraction than claimed", _slow_gd)
ITD_ONE_STEP_SHORT = Perturbation(
    "ITD one step short", "ITD runs and differentiates T - 1 inner steps when asked for T (an "
    "off-by-one in the unrolled loop)", _itd_one_step_short)
ITD_DETACHED = Perturbation(
    "ITD with the inner iterate detached", "the unrolled iterate is detached from x (a missing "
    "requires_grad / a stop-gradient): ITD returns grad_x f(x, y_T) without the indirect term, "
    "whose error does not decay with T", _itd_detached)
BIASED_EXACT = Perturbation(
    "1e-4 relative bias", "the closed form scaled by 1 + 1e-4 (a wrong constant far below any "
    "visible effect on an optimisation run, but 100x the finite-difference tolerance)",
    _biased_exact)
