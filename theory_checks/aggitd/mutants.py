"""Mutants of AggITD (Xiao & Ji, ICML 2023, Alg. 1) and FBO-AggITD (Alg. 3 with One-Round-Lower
and One-Round-Upper): realistic bugs that ``testbed mutate`` runs against the AggITD claims
(:mod:`theory_checks.mutation`).

A bug in the estimator AggITD lives in FBO-AggITD too (its ``estimator`` property builds one),
so each estimator bug is built for both entries: the estimator recast as the mutated subclass,
and FBO-AggITD whose ``estimator`` is that subclass. The perturbation classes of
:mod:`theory_checks.aggitd.perturbations` that are one of these bugs are reused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from testbed.algorithms.aggitd import AggITDState
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.aggitd import one_round_upper
from testbed.estimators.aggitd import AggITD
from testbed.estimators.base import InnerState
from testbed.federation.context import FederatedContext
from theory_checks.aggitd import alg1
from theory_checks.aggitd import comm
from theory_checks.aggitd import errata
from theory_checks.aggitd import lemma3
from theory_checks.aggitd import lower
from theory_checks.aggitd import perturbations as perturb
from theory_checks.aggitd import prop1
from theory_checks.aggitd import scaling
from theory_checks.mutation import COUNT_WAYS
from theory_checks.mutation import STEP_WAYS
from theory_checks.mutation import Mutant
from theory_checks.mutation import MutantFamily
from theory_checks.mutation import declared_equivalents
from theory_checks.perturbed_variants import recast
from theory_checks.perturbed_variants import registry_variant

IDENTITY = alg1.PER_INDEX_IDENTITY.id
MEAN_IDENTITY = prop1.MEAN_IDENTITY.id


@dataclasses.dataclass(frozen=True)
class ExtraLowerStep(AggITD):
    """AggITD that runs N + 1 lower-level rounds (and N + 2 HessIV terms) while N is reported
    (``range(N + 2)`` for ``range(N + 1)``)."""

    def estimate_in(
        self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        return AggITD.estimate_in(
            dataclasses.replace(self, inner_steps=self.inner_steps + 1), ctx, x, state
        )


@dataclasses.dataclass(frozen=True)
class ShortIndexDraw(AggITD):
    """AggITD drawing Q from ``0..N - 1`` (``rng.integers(0, N)``) instead of ``0..N`` while
    keeping the weight ``lambda (N + 1)``."""

    def estimate_in(
        self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        if self.expectation or self.index is not None or self.inner_steps == 0:
            return super().estimate_in(ctx, x, state)
        q = int(ctx.rng.integers(0, self.inner_steps))
        return AggITD.estimate_in(dataclasses.replace(self, index=q), ctx, x, state)


@dataclasses.dataclass(frozen=True)
class StaleUpperPoint(FBOAggITD):
    """FBO-AggITD whose One-Round-Upper runs at the iteration's starting ``y_k`` instead of
    the ``y_{k+1}`` AggITD's lower rounds just computed."""

    def advance(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        h, inner, aux = self.estimator.estimate_in(ctx, state.x, InnerState(state.y))
        x_next = one_round_upper(
            ctx, state.x, state.y, h, aux["clients"], self.local_steps, self.outer_step_size or 0.01
        )
        return AggITDState(x_next, inner.y, h, aux["index"])


@dataclasses.dataclass(frozen=True)
class UncorrectedUpper(FBOAggITD):
    """One-Round-Upper without its SVRG correction: each client's local steps follow the
    broadcast h alone (``h_{i,nu} = h~``, the direct-part correction dropped)."""

    def advance(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        h, inner, aux = self.estimator.estimate_in(ctx, state.x, InnerState(state.y))
        clients = aux["clients"]
        # tau_i steps of alpha / tau_i along h~: x - alpha h~ on every client, averaged
        alpha = self.outer_step_size or 0.01
        x_next = ctx.aggregate((state.x - alpha * h).expand(int(clients.shape[0]), -1), clients)
        return AggITDState(x_next, inner.y, h, aux["index"])


@dataclasses.dataclass(frozen=True)
class WithEstimator(FBOAggITD):
    """FBO-AggITD whose AggITD is ``estimator_class`` (a mutated subclass, with ``fixed``)."""

    estimator_class: type = AggITD
    estimator_fixed: tuple[tuple[str, Any], ...] = ()

    @property
    def estimator(self) -> AggITD:
        return recast(super().estimator, self.estimator_class, **dict(self.estimator_fixed))


def _both(cls: type, **fixed: Any) -> dict[str, Callable[..., Any]]:
    """The AggITD bug ``cls`` in the estimator entry and inside FBO-AggITD."""
    return {
        "aggitd": registry_variant("aggitd", cls, **fixed),
        "fbo-aggitd": registry_variant(
            "fbo-aggitd", WithEstimator, estimator_class=cls, estimator_fixed=tuple(fixed.items())
        ),
    }


def _fbo(cls: type, **fixed: Any) -> dict[str, Callable[..., Any]]:
    return {"fbo-aggitd": registry_variant("fbo-aggitd", cls, **fixed)}


#: AggITD whose One-Round-Lower drops its FedSVRG control variate (the FedAvg lower level of the
#: SGD variant) while reporting the SVRG one.
UNCORRECTED_LOWER = registry_variant("aggitd", AggITD, lower_solver="sgd")


#: The two steps of AggITD a bug scales (:class:`~theory_checks.aggitd.perturbations.ScaledSteps`,
#: its ``<step>_factor``): the step's name, where it is taken, its symbol.
STEPS = (("neumann", "the HessIV recursion", "lambda"), ("inner", "One-Round-Lower", "beta"))
#: How each is scaled: the mutant's name, the factor, the step it then takes (of the symbol).
SCALINGS = (("halved", 0.5, "{0} / 2 while {0} is reported"), ("doubled", 2.0, "2 {0}"))

AGGITD = MutantFamily("AggITD", first=(IDENTITY,))
FBO_AGGITD = MutantFamily("FBO-AggITD", first=(errata.DH_THEOREM2_CONSTANT.id,))

MUTANTS: tuple[Mutant, ...] = (
    AGGITD.mutant(
        "aggitd.weight_lambda_n",
        "normalisation",
        "the importance weight lambda N instead of lambda (N + 1) (N + 1 indices, weight N)",
        _both(perturb.ScaledIndirect, weight="n"),
        cheap=True,
    ),
    AGGITD.mutant(
        "aggitd.weight_forgotten",
        "normalisation",
        "the importance weight forgotten: p = lambda z^N (a missing (N + 1))",
        _both(perturb.ScaledIndirect, weight="none"),
    ),
    *(
        AGGITD.mutant(
            f"aggitd.{step}_step_{way}",
            "step",
            f"{where} steps {wrong.format(size)}",
            _both(perturb.ScaledSteps, **{f"{step}_factor": factor}),
        )
        for step, where, size in STEPS
        for way, factor, wrong in SCALINGS
    ),
    AGGITD.mutant(
        "aggitd.indirect_sign_flipped",
        "correction",
        "h = grad_x F + J p: the indirect part added",
        _both(perturb.ScaledIndirect, factor=-1.0),
    ),
    AGGITD.mutant(
        "aggitd.extra_lower_round",
        "count",
        "N + 1 lower-level rounds (and HessIV terms) while N is reported",
        _both(ExtraLowerStep),
    ),
    AGGITD.mutant(
        "aggitd.index_draw_short",
        "count",
        "Q drawn from 0..N - 1 (rng.integers(0, N)) with the weight lambda (N + 1)",
        _both(ShortIndexDraw),
        first=(MEAN_IDENTITY,),
    ),
    AGGITD.mutant(
        "aggitd.sum_over_m",
        "normalisation",
        "the server divides the clients' hypergradient sum by M instead of |S|",
        _both(perturb.MeanOverAllClients),
        first=(scaling.PARTICIPATION.id,),
    ),
    AGGITD.mutant(
        "aggitd.lower_correction_dropped",
        "correction",
        "One-Round-Lower without its FedSVRG control variate (FedAvg local steps)",
        {"aggitd": UNCORRECTED_LOWER},
        first=(IDENTITY, lower.CONTRACTION.id),
    ),
    FBO_AGGITD.mutant(
        "fbo-aggitd.upper_missing_1_over_tau",
        "normalisation",
        "One-Round-Upper's local step alpha, not alpha / tau_i",
        _fbo(perturb.UnscaledUpper),
    ),
    FBO_AGGITD.mutant(
        "fbo-aggitd.upper_step_times_tau",
        "step",
        "One-Round-Upper's alpha / tau_i read as alpha tau_i",
        _fbo(perturb.UnscaledUpper, outer_step_factor="tau"),
        first=(lemma3.DRIFT_BOUND.id,),
    ),
    FBO_AGGITD.mutant(
        "fbo-aggitd.update_divided_by_m",
        "normalisation",
        "the server divides the summed x-updates by M instead of |S|",
        _fbo(perturb.DividesByM),
        first=(scaling.PARTICIPATION_ALGORITHM.id,),
    ),
    FBO_AGGITD.mutant(
        "fbo-aggitd.upper_correction_dropped",
        "correction",
        "One-Round-Upper's local steps follow h~ alone (its SVRG correction dropped)",
        _fbo(UncorrectedUpper),
    ),
    FBO_AGGITD.mutant(
        "fbo-aggitd.stale_upper_point",
        "stale",
        "One-Round-Upper runs at y_k instead of the y_{k+1} of the lower rounds",
        _fbo(StaleUpperPoint),
        first=(),
        equivalent="One-Round-Upper uses y only in its correction grad_x F_i(x_nu, y) - "
        "grad_x F_i(x, y) (h~ is computed at y_{k+1} by AggITD), which on every "
        "closed-form family (F quadratic in (x, y), coupled bilinearly) equals "
        "grad^2_xx F_i (x_nu - x) whatever y; no claim runs FBO-AggITD on an "
        "outer objective with a non-bilinear x-y coupling",
    ),
    FBO_AGGITD.mutant(
        "fbo-aggitd.extra_round",
        "count",
        "y aggregated once more per iteration in a round of its own",
        {"fbo-aggitd": comm.EXTRA_ROUND.build, "fbo-aggitd-sgd": comm.EXTRA_ROUND_SGD.build},
        first=(comm.ROUNDS_PER_ITERATION.id,),
        cheap=True,
    ),
)

#: Generated parameter perturbations (:mod:`theory_checks.parameter_mutants`) that no claim can
#: tell from the original, with the argument why no answer can change.
PARAMETER_EQUIVALENTS: dict[str, str] = {
    **declared_equivalents(
        (
            "every claim of aggitd computes the estimator on exact oracles (batch_size None, the "
            "entry's default; no aggitd check passes a batch): the batch size does not exist in "
            "any answer of its suite"
        ),
        ("aggitd",),
        batch_size=COUNT_WAYS,
    ),
    **declared_equivalents(
        (
            'the entry\'s one "holds" claim (aggitd.comm.sgd_rounds_per_iteration) counts the '
            "communication rounds of an iteration, N + 3, which no step size or local-step count "
            "changes; the same FBO-AggITD code is pinned on fbo-aggitd (steps by "
            "aggitd.thm1.rate_in_K, aggitd.cor1.floor_kept and aggitd.errata.dh_theorem2_constant)"
        ),
        ("fbo-aggitd-sgd",),
        local_steps=("plus1",),
        inner_step_size=STEP_WAYS,
        outer_step_size=STEP_WAYS,
        neumann_step_size=STEP_WAYS,
    ),
}
