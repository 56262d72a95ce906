"""Mutants of the classical estimators (AID with Neumann, CG or fixed-point adjoints, ITD, the
closed form) and of the gradient-descent inner solver they share: realistic bugs that
``testbed mutate`` runs against the classical claims (:mod:`theory_checks.mutation`).

Each bug is a subclass of the real part (a solver, the estimator) with one mistake, recast from
the registry's build (:func:`~theory_checks.perturbed_variants.part_variant`,
:func:`~theory_checks.perturbed_variants.registry_variant`); nothing is patched at run time.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

import numpy as np
import torch

from testbed.calls import CallCounter
from testbed.estimators.base import Estimate
from testbed.estimators.base import InnerState
from testbed.estimators.classical import ExactHypergradient
from testbed.estimators.classical import ImplicitDifferentiation
from testbed.estimators.classical import IterativeDifferentiation
from testbed.estimators.fixed_point import FixedPoint
from testbed.estimators.global_oracles import GlobalOracles
from testbed.estimators.solvers import ConjugateGradient
from testbed.estimators.solvers import GradientDescent
from testbed.estimators.solvers import InnerRun
from testbed.estimators.solvers import Neumann
from testbed.estimators.solvers import default_step_size
from testbed.oracles import Oracles
from theory_checks.classical import cg
from theory_checks.classical import exact
from theory_checks.classical import gd
from theory_checks.classical import itd
from theory_checks.classical import neumann
from theory_checks.mutation import COUNT_WAYS
from theory_checks.mutation import STEP_WAYS
from theory_checks.mutation import Mutant
from theory_checks.mutation import MutantFamily
from theory_checks.mutation import declared_equivalents
from theory_checks.perturbed_variants import part_variants
from theory_checks.perturbed_variants import registry_variant

AID = ("aid-neumann", "aid-cg", "aid-fp")
IDENTITY = neumann.ERROR_IDENTITY.id
ITD_IDENTITY = itd.ERROR_IDENTITY.id
GD_RATE = gd.LINEAR_RATE.id
CG_EXACT = cg.EXACT_AFTER_DIM_Y.id

# --------------------------------------------------------------------------- linear solvers


@dataclasses.dataclass(frozen=True)
class ShiftedNeumann(Neumann):
    """The Neumann series with ``terms + shift`` terms (an off-by-one in the loop bound)."""

    shift: int = -1

    def solve(self, hvp: Any, rhs: torch.Tensor, problem: Any) -> torch.Tensor:
        return Neumann(max(self.terms + self.shift, 1), self.step_size).solve(hvp, rhs, problem)


@dataclasses.dataclass(frozen=True)
class ScaledStepNeumann(Neumann):
    """The Neumann series run with ``factor * lambda`` while lambda is reported."""

    factor: float = 2.0

    def solve(self, hvp: Any, rhs: torch.Tensor, problem: Any) -> torch.Tensor:
        lam = self.step_size or default_step_size(problem, "Neumann")
        return Neumann(self.terms, self.factor * lam).solve(hvp, rhs, problem)


@dataclasses.dataclass(frozen=True)
class UnscaledNeumann(Neumann):
    """``sum_j (I - lambda H)^j r`` without the leading lambda (a missing normalisation)."""

    def solve(self, hvp: Any, rhs: torch.Tensor, problem: Any) -> torch.Tensor:
        lam = self.step_size or default_step_size(problem, "Neumann")
        return super().solve(hvp, rhs, problem) / lam


@dataclasses.dataclass(frozen=True)
class ShiftedCG(ConjugateGradient):
    """Conjugate gradient with ``iterations + shift`` iterations."""

    shift: int = -1

    def solve(self, hvp: Any, rhs: torch.Tensor, problem: Any) -> torch.Tensor:
        count = max(self.iterations + self.shift, 0)
        if count == 0:
            return torch.zeros_like(rhs)
        return ConjugateGradient(count).solve(hvp, rhs, problem)


@dataclasses.dataclass(frozen=True)
class WrongCG(ConjugateGradient):
    """Conjugate gradient (Hestenes-Stiefel, as :class:`ConjugateGradient` runs it) whose update
    of the search direction and of ``r'r`` has one mistake (:meth:`next_search`)."""

    @abc.abstractmethod
    def next_search(
        self, residual: torch.Tensor, direction: torch.Tensor, rr: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(p_{k+1}, r'r kept)`` from the new residual, the direction and the ``r'r`` kept."""

    def solve(self, hvp: Any, rhs: torch.Tensor, problem: Any) -> torch.Tensor:
        v, residual = torch.zeros_like(rhs), rhs.clone()
        direction, rr = residual.clone(), residual @ residual
        for _ in range(self.iterations):
            if float(rr) == 0.0:
                break
            h_dir = hvp(direction)
            step = rr / (direction @ h_dir)
            v, residual = v + step * direction, residual - step * h_dir
            direction, rr = self.next_search(residual, direction, rr)
        return v


@dataclasses.dataclass(frozen=True)
class FlippedDirectionCG(WrongCG):
    """CG whose new search direction subtracts the old one (``r - beta p`` for ``r + beta p``)."""

    def next_search(
        self, residual: torch.Tensor, direction: torch.Tensor, rr: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rr_next = residual @ residual
        return residual - (rr_next / rr) * direction, rr_next  # the bug: - for +


@dataclasses.dataclass(frozen=True)
class StaleResidualCG(WrongCG):
    """CG that never updates ``r'r`` after the first iteration (a stale scalar)."""

    def next_search(
        self, residual: torch.Tensor, direction: torch.Tensor, rr: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return residual + ((residual @ residual) / rr) * direction, rr  # rr never moves on


@dataclasses.dataclass(frozen=True)
class ShiftedFixedPoint(FixedPoint):
    """The fixed-point adjoint with ``iterations + shift`` iterations."""

    shift: int = -1

    def solve(self, hvp: Any, rhs: torch.Tensor, problem: Any) -> torch.Tensor:
        return FixedPoint(max(self.iterations + self.shift, 1), self.step_size).solve(
            hvp, rhs, problem
        )


@dataclasses.dataclass(frozen=True)
class UnscaledRhsFixedPoint(FixedPoint):
    """``v <- v - lambda H v + r``: the right-hand side added without its step lambda."""

    def solve(self, hvp: Any, rhs: torch.Tensor, problem: Any) -> torch.Tensor:
        lam = self.step_size or default_step_size(problem, "FixedPoint")
        v = lam * rhs
        for _ in range(self.iterations - 1):
            v = v - lam * hvp(v) + rhs
        return v


# --------------------------------------------------------------------------- inner solver


@dataclasses.dataclass(frozen=True)
class ShiftedGD(GradientDescent):
    """Gradient descent that runs ``steps + shift`` steps while ``steps`` are asked for."""

    shift: int = -1

    def run(
        self, oracles: Any, x: torch.Tensor, y0: torch.Tensor, keep_trajectory: bool
    ) -> InnerRun:
        return GradientDescent(max(self.steps + self.shift, 0), self.step_size).run(
            oracles, x, y0, keep_trajectory
        )


@dataclasses.dataclass(frozen=True)
class ScaledStepGD(GradientDescent):
    """Gradient descent stepping ``factor * beta`` while beta is reported."""

    factor: float = 0.5

    def run(
        self, oracles: Any, x: torch.Tensor, y0: torch.Tensor, keep_trajectory: bool
    ) -> InnerRun:
        beta = self.step_size or default_step_size(oracles.problem, "GradientDescent")
        out = GradientDescent(self.steps, self.factor * beta).run(oracles, x, y0, keep_trajectory)
        return dataclasses.replace(out, step_size=beta)


# --------------------------------------------------------------------------- AID


@dataclasses.dataclass(frozen=True)
class FlippedIndirectAID(ImplicitDifferentiation):
    """AID adding the indirect term: ``grad_x f + J v`` for ``grad_x f - J v``."""

    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Any
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        value, aux = super().differentiate(oracles, x, run, problem)
        grad_x, _ = oracles.grad_outer(x, run.y)
        return 2.0 * grad_x - value, aux


@dataclasses.dataclass(frozen=True)
class StaleAID(ImplicitDifferentiation):
    """AID that differentiates at the warm start it was given (the state's y) instead of the
    inner solver's result (the solved iterate computed, then not used)."""

    def compute(
        self, problem: Any, x: torch.Tensor, state: InnerState, rng: np.random.Generator
    ) -> Estimate:
        counter = CallCounter()
        oracles = GlobalOracles(Oracles(problem, counter), rng, self.batch_size)
        run = self.inner.run(oracles, x, state.y, keep_trajectory=False)
        stale = InnerRun(state.y, [state.y], [], run.step_size)
        value, aux = self.differentiate(oracles, x, stale, problem)
        return Estimate(value, InnerState(run.y), counter.snapshot(), aux)


@dataclasses.dataclass(frozen=True)
class FirstClientAID(ImplicitDifferentiation):
    """AID whose ``grad_y f`` is client 0's instead of the clients' mean (a missing average)."""

    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Any
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        y = run.y
        grad_x, _ = oracles.grad_outer(x, y)
        _, per_client = oracles.oracles.grad_outer(x, y, oracles.clients, oracles.draw())
        adjoint = self.linear_solver.solve(lambda v: oracles.hvp(x, y, v), per_client[0], problem)
        return grad_x - oracles.jvp_xy(x, y, adjoint), {"y": y, "adjoint": adjoint}


# --------------------------------------------------------------------------- ITD


@dataclasses.dataclass(frozen=True)
class ShiftedITD(IterativeDifferentiation):
    """ITD that unrolls and differentiates ``T + shift`` steps when asked for T."""

    shift: int = 1

    def compute(self, problem: Any, x: torch.Tensor, state: Any, rng: Any) -> Estimate:
        inner = GradientDescent(max(self.inner.steps + self.shift, 0), self.inner.step_size)
        return IterativeDifferentiation(inner, self.batch_size).estimate(problem, x, state, rng)


@dataclasses.dataclass(frozen=True)
class ReverseStepITD(IterativeDifferentiation):
    """ITD whose reverse pass uses ``factor * beta`` (the step read from another place)."""

    factor: float = 2.0

    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Any
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        scaled = dataclasses.replace(run, step_size=self.factor * run.step_size)
        return super().differentiate(oracles, x, scaled, problem)


@dataclasses.dataclass(frozen=True)
class StaleReverseITD(IterativeDifferentiation):
    """ITD's reverse pass evaluated at the last iterate ``y_T`` for every t instead of ``y_t``
    (a stale iterate in the backward loop)."""

    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Any
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        stale = dataclasses.replace(run, trajectory=[run.y] * len(run.trajectory))
        return super().differentiate(oracles, x, stale, problem)


class _FirstHvpLost:
    """Oracles whose first Hessian-vector product is lost: zero, neither computed nor counted
    (everything else is the oracles' own)."""

    def __init__(self, oracles: GlobalOracles) -> None:
        self._oracles = oracles
        self._lost = False

    def hvp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, batch: Any = None) -> Any:
        if not self._lost:
            self._lost = True
            return torch.zeros_like(v)
        return self._oracles.hvp(x, y, v, batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._oracles, name)


@dataclasses.dataclass(frozen=True)
class LateAdjointITD(IterativeDifferentiation):
    """ITD whose adjoint is first updated one step late: the reverse pass's first adjoint update
    (at t = T - 1, the first Hessian-vector product it asks for) is lost."""

    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Any
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        lost: Any = _FirstHvpLost(oracles)
        return super().differentiate(lost, x, run, problem)


# --------------------------------------------------------------------------- closed form


@dataclasses.dataclass(frozen=True)
class PerClientExact(ExactHypergradient):
    """The closed form with each client's own adjoint ``mean_i J_i H_i^{-1} grad_y f_i`` instead
    of ``J H^{-1} grad_y f`` with averaged H and grad_y f (per-client instead of averaged)."""

    def compute(
        self, problem: Any, x: torch.Tensor, state: None, rng: np.random.Generator
    ) -> Estimate:
        y = problem.exact_inner_solution(x)
        oracles, clients = Oracles(problem), torch.arange(problem.n_clients)
        eye = torch.eye(problem.dim_y, dtype=torch.float64)
        rows = y.expand(problem.n_clients, -1)
        H = torch.stack([oracles.hvp_inner(x, rows, e.expand_as(rows), clients) for e in eye], 2)
        J = torch.stack([oracles.jvp_inner_xy(x, rows, e.expand_as(rows), clients) for e in eye], 2)
        gx, gy = oracles.grad_outer(x, rows, clients)
        adjoints = torch.linalg.solve(H, gy[..., None])[..., 0]
        value = (gx - torch.einsum("mij,mj->mi", J, adjoints)).mean(0)
        return Estimate(value, state, CallCounter().snapshot(), {})


# --------------------------------------------------------------------------- the catalogue


AID_NEUMANN = MutantFamily("AID-Neumann", first=(IDENTITY,))
GRADIENT_DESCENT = MutantFamily("gradient descent (AID, ITD)", first=(GD_RATE,))
AID_CG = MutantFamily("AID-CG", first=(CG_EXACT,))
AID_FP = MutantFamily("AID-FP", first=(IDENTITY,))
ITD = MutantFamily("ITD", first=(ITD_IDENTITY,))
EXACT_HYPERGRADIENT = MutantFamily("exact hypergradient", first=(exact.FINITE_DIFFERENCES.id,))

MUTANTS: tuple[Mutant, ...] = (
    AID_NEUMANN.mutant(
        "aid-neumann.terms_minus_one",
        "count",
        "the Neumann loop runs N - 1 terms when N are asked for",
        part_variants(("aid-neumann",), "linear_solver", ShiftedNeumann, shift=-1),
        cheap=True,
    ),
    AID_NEUMANN.mutant(
        "aid-neumann.terms_plus_one",
        "count",
        "the Neumann loop runs N + 1 terms (range(N) for range(N - 1))",
        part_variants(("aid-neumann",), "linear_solver", ShiftedNeumann, shift=1),
    ),
    AID_NEUMANN.mutant(
        "aid-neumann.step_doubled",
        "step",
        "the series runs with 2 lambda while lambda is reported",
        part_variants(("aid-neumann",), "linear_solver", ScaledStepNeumann, factor=2.0),
    ),
    AID_NEUMANN.mutant(
        "aid-neumann.step_halved",
        "step",
        "the series runs with lambda / 2 while lambda is reported",
        part_variants(("aid-neumann",), "linear_solver", ScaledStepNeumann, factor=0.5),
    ),
    AID_NEUMANN.mutant(
        "aid-neumann.missing_lambda",
        "normalisation",
        "the partial sum returned without its factor lambda",
        part_variants(("aid-neumann",), "linear_solver", UnscaledNeumann),
    ),
    AID_NEUMANN.mutant(
        "aid-neumann.indirect_sign_flipped",
        "correction",
        "the indirect term added: grad_x f + J v",
        {"aid-neumann": registry_variant("aid-neumann", FlippedIndirectAID)},
        cheap=True,
    ),
    AID_NEUMANN.mutant(
        "aid-neumann.stale_inner_iterate",
        "stale",
        "the adjoint and cross term evaluated at the warm start y_0, not the solved y_T",
        {"aid-neumann": registry_variant("aid-neumann", StaleAID)},
    ),
    AID_NEUMANN.mutant(
        "aid-neumann.first_client_gradient",
        "per_client",
        "grad_y f of client 0 instead of the clients' mean",
        {"aid-neumann": registry_variant("aid-neumann", FirstClientAID)},
    ),
    GRADIENT_DESCENT.mutant(
        "gd.steps_minus_one",
        "count",
        "the inner gradient descent runs T - 1 steps when T are asked for (every entry "
        "that runs it: AID-Neumann, AID-CG, AID-FP, ITD)",
        part_variants((*AID, "itd"), "inner", ShiftedGD, shift=-1),
        first=(ITD_IDENTITY,),
    ),
    GRADIENT_DESCENT.mutant(
        "gd.step_halved",
        "step",
        "the inner gradient descent steps beta / 2 while beta is reported",
        part_variants((*AID, "itd"), "inner", ScaledStepGD, factor=0.5),
    ),
    GRADIENT_DESCENT.mutant(
        "gd.step_doubled",
        "step",
        "the inner gradient descent steps 2 beta (= 2/L: no contraction on the top mode)",
        part_variants((*AID, "itd"), "inner", ScaledStepGD, factor=2.0),
    ),
    AID_CG.mutant(
        "aid-cg.iterations_minus_one",
        "count",
        "conjugate gradient runs dim_y - 1 iterations when dim_y are asked for",
        part_variants(("aid-cg",), "linear_solver", ShiftedCG, shift=-1),
        cheap=True,
    ),
    AID_CG.mutant(
        "aid-cg.iterations_plus_one",
        "count",
        "conjugate gradient runs dim_y + 1 iterations",
        part_variants(("aid-cg",), "linear_solver", ShiftedCG, shift=1),
        first=(),
        equivalent="in exact arithmetic CG's residual is zero after dim_y iterations and "
        "its loop stops; in float64 the extra iteration moves v by the round-off "
        "of the residual (about 1e-16 relative), far below the claim's "
        "kappa x 1e-10, and no claim counts AID-CG's Hessian-vector products",
    ),
    AID_CG.mutant(
        "aid-cg.direction_sign_flipped",
        "correction",
        "the new search direction subtracts the old one: r - beta p",
        part_variants(("aid-cg",), "linear_solver", FlippedDirectionCG),
    ),
    AID_CG.mutant(
        "aid-cg.stale_residual_norm",
        "stale",
        "r'r is never updated after the first iteration (beta = ||r_k||^2 / ||r_0||^2)",
        part_variants(("aid-cg",), "linear_solver", StaleResidualCG),
    ),
    AID_FP.mutant(
        "aid-fp.iterations_minus_one",
        "count",
        "the fixed-point adjoint runs K - 1 iterations",
        part_variants(("aid-fp",), "linear_solver", ShiftedFixedPoint, shift=-1),
    ),
    AID_FP.mutant(
        "aid-fp.rhs_without_step",
        "normalisation",
        "v <- v - lambda H v + r: the right-hand side added without lambda",
        part_variants(("aid-fp",), "linear_solver", UnscaledRhsFixedPoint),
    ),
    ITD.mutant(
        "itd.steps_plus_one",
        "count",
        "ITD unrolls and differentiates T + 1 steps when T are asked for",
        {"itd": registry_variant("itd", ShiftedITD, shift=1)},
        cheap=True,
    ),
    ITD.mutant(
        "itd.steps_minus_one",
        "count",
        "ITD unrolls and differentiates T - 1 steps",
        {"itd": registry_variant("itd", ShiftedITD, shift=-1)},
    ),
    ITD.mutant(
        "itd.reverse_step_doubled",
        "step",
        "the reverse pass uses 2 beta while the forward pass used beta",
        {"itd": registry_variant("itd", ReverseStepITD, factor=2.0)},
    ),
    ITD.mutant(
        "itd.adjoint_update_late",
        "count",
        "the reverse pass skips the adjoint update at its first step (t = T - 1)",
        {"itd": registry_variant("itd", LateAdjointITD)},
    ),
    ITD.mutant(
        "itd.reverse_pass_at_last_iterate",
        "stale",
        "the reverse pass evaluates its products at y_T for every t instead of y_t",
        {"itd": registry_variant("itd", StaleReverseITD)},
        first=(),
        equivalent="the products are grad^2_y g and grad^2_xy g, which are constant in y on "
        "every closed-form family (quadratic inner problems), so the reverse pass "
        "computes the same vectors at y_T as at y_t; the claims run ITD only on "
        "those families (the workloads, where the Hessians vary with y, carry no "
        "exact hypergradient to compare with)",
    ),
    EXACT_HYPERGRADIENT.mutant(
        "exact.per_client_adjoint",
        "per_client",
        "the closed form averages per-client hypergradients grad_x f_i - J_i H_i^{-1} "
        "grad_y f_i instead of using the averaged H and grad_y f",
        {"exact": registry_variant("exact", PerClientExact)},
    ),
)

#: Generated parameter perturbations (:mod:`theory_checks.parameter_mutants`) that no claim can
#: tell from the original, with the argument why no answer can change.
PARAMETER_EQUIVALENTS: dict[str, str] = {
    **declared_equivalents(
        lambda entry: (
            f"every claim of {entry} runs it on exact oracles (batch_size None, the entry's "
            "default; no classical check passes a batch): the batch size does not exist in any "
            "answer of its suite, and a minibatch claim would be the one to pin it"
        ),
        ("aid-cg", "aid-neumann", "aid-fp", "itd"),
        batch_size=COUNT_WAYS,
    ),
    **declared_equivalents(
        (
            "every claim of aid-neumann runs it with the exact inner solution (inner_steps None: "
            "the Neumann claims isolate the series), where GD's count and step do not exist; the "
            "same GradientDescent is pinned through aid-cg and aid-fp by classical.gd.linear_rate "
            "(its rate, its bound and the T steps it runs)"
        ),
        ("aid-neumann",),
        inner_steps=COUNT_WAYS,
        inner_step_size=STEP_WAYS,
    ),
    "param.aid-cg.cg_iterations.plus1": (
        "classical.cg.exact_after_dim_y runs dim_y iterations, after which CG has solved the "
        "dim_y x dim_y system exactly (its residual is zero up to round-off): one iteration "
        "more leaves the solution within the claim's 1e-10, and no other claim of aid-cg runs "
        "the linear solver; one iteration less is killed"
    ),
}
