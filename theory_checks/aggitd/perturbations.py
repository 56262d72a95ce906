"""Perturbations of AggITD and FBO-AggITD: the smallest bug each AggITD claim must catch.

Each is a subclass of the real estimator or algorithm with one realistic mistake (an off-by-one
in the importance weight, a step stored in float32 or off by a constant, a local step whose
1/tau is forgotten or inverted, a step schedule applied twice, an extra round, a divisor M for
|S|), or a builder that passes a parameter wrongly. The claims of
:mod:`theory_checks.aggitd` and :mod:`theory_checks.aggitd.rates` name them in their
``perturbation``; the description says why the bug is the smallest that matters for that check.

On the quadratic families the indirect part of AggITD's estimate, ``-J p``, is linear in
``p = lambda (N+1) z^N``, so a bug that scales ``p`` by a constant ``c`` (a wrong importance
weight) is reproduced exactly by :class:`ScaledIndirect`: ``direct + c (h - direct)``, whether
``h`` is one draw of Q or the exact mean over Q (expectation mode), because the mean over Q of
the wrong estimator is the same scaling of the mean.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from testbed.algorithms.aggitd import AggITDState, FBOAggITD
from testbed.estimators.aggitd import AggITD
from testbed.estimators.base import InnerState
from testbed.federation.context import FederatedContext
from testbed.federation.local import local_round
from testbed.oracles import Oracles
from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import recast

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

    def estimate_in(self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
                    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        value, new_state, aux = super().estimate_in(ctx, x, state)
        n = self.inner_steps
        scale = self.factor * {"exact": 1.0, "n": n / (n + 1), "none": 1.0 / (n + 1)}[
            self.weight]
        direct = Oracles(ctx.problem).grad_outer(x, aux["y"], aux["clients"])[0].mean(0)
        return direct + scale * (value - direct), new_state, aux


@dataclasses.dataclass(frozen=True)
class Float32Neumann(AggITD):
    """AggITD whose Neumann step lambda is stored in float32 (a dtype slip on a float64 run)."""

    def step_sizes(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().step_sizes(problem)
        return beta, float(np.float32(lam))


@dataclasses.dataclass(frozen=True)
class ScaledNeumannStep(AggITD):
    """AggITD that runs the HessIV recursion with ``factor * lambda`` instead of lambda."""

    factor: float = 0.9

    def step_sizes(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().step_sizes(problem)
        return beta, self.factor * lam


@dataclasses.dataclass(frozen=True)
class MeanOverAllClients(AggITD):
    """AggITD whose server divides the clients' hypergradient sum by M instead of |S|."""

    def estimate_in(self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
                    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        value, new_state, aux = super().estimate_in(ctx, x, state)
        return value * aux["clients"].shape[0] / ctx.problem.n_clients, new_state, aux


def _estimator(cls: type, **extra: Any) -> Any:
    def make(**kw: Any) -> Any:
        return cls(**{**kw, **extra})

    return make


def _inner_step_per_call(**kw: Any) -> AggITD:
    """The inner step beta read as a budget for the whole call and split over its N rounds:
    ``beta / N`` per One-Round-Lower."""
    return AggITD(**{**kw, "inner_step_size": kw["inner_step_size"] / max(kw["inner_steps"], 1)})


# --------------------------------------------------------------------------- algorithm bugs


@dataclasses.dataclass(frozen=True)
class ExtraRound(FBOAggITD):
    """FBO-AggITD that aggregates ``y`` in a round of its own once per iteration."""

    def step(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        new = super().step(ctx, state)
        clients = ctx.all_clients()
        ctx.aggregate(new.y.expand(int(clients.shape[0]), -1), clients)
        return new


@dataclasses.dataclass(frozen=True)
class UnscaledUpper(FBOAggITD):
    """One-Round-Upper with local step ``alpha`` (``outer_step_factor="one"``: Alg. 4's
    ``1 / tau_i`` forgotten), ``alpha tau`` (``"tau"``: ``alpha / tau_i`` misread as
    ``alpha tau_i``) or ``alpha / tau^2`` (``"over_tau"``: the ``1 / tau_i`` applied by the
    caller and again by the local loop) instead of ``alpha / tau_i``."""

    outer_step_factor: str = "one"

    def step(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        h, inner, aux = self.estimator.estimate_in(ctx, state.x, InnerState(state.y))
        y = inner.y
        tau = self.local_steps if isinstance(self.local_steps, int) else max(self.local_steps)
        factor = {"tau": tau, "over_tau": 1.0 / tau}.get(self.outer_step_factor, 1)
        alpha = (self.outer_step_size or 0.01) * factor

        def direct(points: torch.Tensor, active: torch.Tensor, batch: Any) -> torch.Tensor:
            return ctx.oracles.grad_outer(points, y, active, batch)[0]

        x_next = local_round(ctx, state.x, aux["clients"], direct, self.local_steps, alpha,
                             global_direction=h,
                             scale_by_steps=self.outer_step_factor == "over_tau")
        return AggITDState(x_next, y, h, aux["index"])


@dataclasses.dataclass(frozen=True)
class DividesByM(FBOAggITD):
    """The server divides the clients' summed x-update by M instead of |S|."""

    def step(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        new = super().step(ctx, state)
        share = int(ctx.participants().shape[0]) / ctx.problem.n_clients
        return new._replace(x=state.x + share * (new.x - state.x))


@dataclasses.dataclass(frozen=True)
class FlippedIndirect(FBOAggITD):
    """FBO-AggITD whose AggITD adds the indirect part ``J p`` instead of subtracting it."""

    @property
    def estimator(self) -> AggITD:
        base = super().estimator
        return recast(base, ScaledIndirect, factor=-1.0)


def _algorithm(cls: type, lower_solver: str = "svrg", **extra: Any) -> Any:
    def make(**kw: Any) -> Any:
        return cls(lower_solver=lower_solver, **{**kw, **extra})

    return make


@dataclasses.dataclass(frozen=True)
class DecayingOuterStep(FBOAggITD):
    """FBO-AggITD that decays the outer step it is given over the run, ``alpha / (k + 1)`` at
    iteration k: the textbook SGD schedule applied on top of Theorem 1's step
    ``alpha_bar / sqrt(K)``, which is constant over a run of K iterations."""

    def step(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        k = ctx.calls().comm_rounds // self.rounds_per_iteration()  # iterations done so far
        alpha = (self.outer_step_size or 0.01) / (k + 1)
        return FBOAggITD.step(dataclasses.replace(self, outer_step_size=alpha), ctx, state)


OUTER_STEP_DECAYED = Perturbation(
    "outer step decayed per iteration (alpha / (k + 1))",
    "the step alpha_bar / sqrt(K), which Theorem 1 keeps constant over a run of K iterations, is "
    "also decayed per iteration (the SGD schedule 1/(k + 1) applied on top): the summed step "
    "alpha_bar ln(K) / sqrt(K) shrinks with K, so A(K) stops decaying (secant exponent about 0, "
    "0.4 above the edge). A constant factor on the step (2x) leaves the exponent at -1/2 and is "
    "not a bug of the rate; the milder 1/sqrt(k + 1) decay moves the exponent to about -0.3, "
    "0.1 above the edge, which more than the claim's ~30 replicates per case would resolve",
    _algorithm(DecayingOuterStep), slow=True)


# --------------------------------------------------------------------------- the perturbations

NEUMANN_STEP_FLOAT32 = Perturbation(
    "lambda stored in float32",
    "the Neumann step lambda is rounded to float32 (a dtype slip on a float64 run): a relative "
    "error ~3e-8 in every factor (I - lambda H) and in the weight lambda (N + 1), about 100x the "
    "identity's 1e-10 tolerance; the smallest realistic error that a float64 identity must see "
    "(it is invisible when lambda happens to be a float32 number, e.g. lambda = 1)",
    _estimator(Float32Neumann))
IMPORTANCE_WEIGHT_N = Perturbation(
    "importance weight lambda N instead of lambda (N + 1)",
    "an off-by-one in the weight of the uniformly drawn index Q in 0..N (N + 1 values, weight "
    "N): the indirect part is scaled by N / (N + 1), 1/2 at N = 1 and 0 at N = 0",
    _estimator(ScaledIndirect, weight="n"))
INDIRECT_SCALED_1E3 = Perturbation(
    "indirect part 1 + 1e-3",
    "the HessIV term scaled by 1 + 1e-3 (a wrong constant in the weight, e.g. lambda rounded "
    "to three digits): on these one-dimensional cases the corrected bound is an equality, so any "
    "upward error violates it; 1e-3 is 1e7 times the check's 1e-10 round-off tolerance",
    _estimator(ScaledIndirect, factor=1.0 + 1e-3))
INNER_STEP_PER_CALL = Perturbation(
    "inner step beta / N",
    "the inner step beta read as a budget for the whole call and split over its N = 30 "
    "One-Round-Lower rounds. Why this large: (14)'s rate 1 - beta mu / 2 is 4x slower than "
    "deterministic FedSVRG's (1 - beta mu)^2, so a step reduced less than 4x is no violation; "
    "on heterogeneous cases the floor 25 beta^2 sigma^2 hides even a 30x slowdown, so the bug "
    "shows on cases without client heterogeneity (one client, as hypothesis draws first)",
    _inner_step_per_call)
EXTRA_ROUND = Perturbation(
    "one extra round per iteration",
    "y is aggregated once more in a round of its own (an off-by-one in the round count: "
    "2N + 4 instead of 2N + 3)", _algorithm(ExtraRound))
EXTRA_ROUND_SGD = Perturbation(
    "one extra round per iteration",
    "y is aggregated once more in a round of its own (an off-by-one in the round count: "
    "N + 4 instead of N + 3)", _algorithm(ExtraRound, "sgd"))
INDIRECT_SIGN_FLIPPED = Perturbation(
    "indirect part added instead of subtracted",
    "a sign slip in h = grad_x f - J p: the limit's bias is about twice the indirect part "
    "instead of its truncation error. Why not smaller: the floor term is loose by >= 100x on "
    "every drawn case (limit / floor <= 0.008), and its (L_g M / mu)^2 (3 + alpha / 6) "
    "factor exceeds the whole indirect part, so a missing weight (N + 1) or even the indirect "
    "part dropped altogether (limit / floor <= 0.73) stays inside it; only a bias larger than "
    "the indirect part can break the claim",
    _algorithm(FlippedIndirect))
NEUMANN_STEP_09 = Perturbation(
    "Neumann step 0.9 lambda",
    "the HessIV recursion runs with 0.9 of the step it is given: the bias decays like "
    "(1 - 0.9 lambda mu)^N, a rate 10% off, twice the check's 5% tolerance (a wrong constant in "
    "a step rule)", _estimator(ScaledNeumannStep, factor=0.9))
UPPER_STEP_UNSCALED = Perturbation(
    "One-Round-Upper step alpha, not alpha / tau",
    "Alg. 4's local step alpha_i = alpha / tau_i without the 1/tau_i: tau local steps of "
    "alpha move x by tau alpha, so the drift grows like tau^2 (the scaling that makes every "
    "bound tau-free is the one forgotten)", _algorithm(UnscaledUpper))
UPPER_STEP_SCALED_TWICE = Perturbation(
    "One-Round-Upper step alpha / tau^2",
    "Alg. 4's 1/tau_i applied twice (the caller passes alpha / tau_i and the local loop divides "
    "by tau_i again): tau local steps move x by alpha / tau, so the progress over a horizon of "
    "K = 1/(alpha mu_h) iterations falls tau-fold and the average stationarity grows with tau "
    "(exponent ~0.3). Why not the forgotten 1/tau_i (alpha per local step): a larger step only "
    "speeds the descent at Theorem 1's tiny alpha, so the stationarity falls with tau, which "
    "the one-sided statement allows; it is caught by aggitd.scaling.tau_invariance and "
    "aggitd.lemma3.drift_bound",
    _algorithm(UnscaledUpper, outer_step_factor="over_tau"))
MEAN_OVER_ALL_CLIENTS = Perturbation(
    "hypergradient sum divided by M, not |S|",
    "the server averages the sampled clients' sum over all M clients: the estimate is scaled "
    "by S / M, so its variance over subsets no longer follows (M - S) / (S (M - 1))",
    _estimator(MeanOverAllClients))
UPDATE_DIVIDED_BY_M = Perturbation(
    "x-update divided by M, not |S|",
    "the server averages the sampled clients' x-updates over all M clients: x_1 - x is scaled "
    "by S / M, so its variance over subsets no longer follows (M - S) / (S (M - 1))",
    _algorithm(DividesByM))
UPPER_STEP_INVERTED = Perturbation(
    "One-Round-Upper step alpha tau, not alpha / tau",
    "Alg. 4's alpha_i = alpha / tau_i misread as alpha tau_i: the drift grows like tau^4 (256x "
    "at tau = 4). Why not the forgotten 1/tau (tau^2, 16-64x): Lemma 3's bound is loose by "
    "140x to 10^4 on the drawn cases (its 3 sigma_h^2 term alone exceeds the measured drift), "
    "so a drift error below ~100x is no violation",
    _algorithm(UnscaledUpper, outer_step_factor="tau"))
UPPER_STEP_NOT_ALG4 = Perturbation(
    "One-Round-Upper step alpha, not alpha / tau",
    "Alg. 4's local step alpha_i = alpha / tau_i without the 1/tau_i. The check replays Alg. 4 "
    "from the run's h and y+ and requires the recorded upload to match to 1e-10, so the "
    "directions it measures are Alg. 4's; a local loop that is not Alg. 4 is caught there. The "
    "D_h bound itself is loose by 12x to 70x on the drawn cases, so a step error that only "
    "inflates ||h_{i,nu}||^2 by less than that would not break it",
    _algorithm(UnscaledUpper))
