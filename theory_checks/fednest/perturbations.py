"""Perturbations of FedNest's estimators and algorithms: the smallest bug each FedNest claim that
holds must catch (Tarzanagh et al., ICML 2022; notation of :mod:`theory_checks.fednest`).

Each wrong estimator is a subclass of the real one with one realistic mistake: an off-by-one in
FedIHGP's scale ``N / l`` (eq. (13b)), a mis-set step (``0.9 beta``, ``0.9 alpha``, ``0.9 / l``),
a dropped drift correction, an ignored client subset, one aggregation round too many, a 0.1%
bias on the broadcast direction. The descriptions say why each is the smallest bug that matters
for its check (the check's tolerance or effect size).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from testbed.algorithms.fednest import FedNest
from testbed.estimators.fednest import FedIHGP, IHGPResult
from testbed.federation.context import FederatedContext
from testbed.registry import get_estimator
from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import registry_variant

# ------------------------------------------------------------------------------- FedIHGP bugs


@dataclasses.dataclass(frozen=True)
class ScaledIHGP(FedIHGP):
    """FedIHGP whose scale is ``(N + 1)/l`` instead of ``N/l`` (an off-by-one in eq. (13b):
    ``N'`` counted on ``{0..N}``)."""

    def ihgp(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor,
             truncation_index: int | None = None) -> IHGPResult:
        out = super().ihgp(ctx, x, y, truncation_index)
        factor = (self.neumann_terms + 1) / self.neumann_terms
        return out._replace(p=factor * out.p, path=tuple(factor * q for q in out.path))


@dataclasses.dataclass(frozen=True)
class SqrtScaledIHGP(FedIHGP):
    """FedIHGP scaled by ``sqrt(N)/l`` instead of ``N/l`` (a "variance-normalised" weight)."""

    def ihgp(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor,
             truncation_index: int | None = None) -> IHGPResult:
        out = super().ihgp(ctx, x, y, truncation_index)
        factor = self.neumann_terms ** -0.5
        return out._replace(p=factor * out.p, path=tuple(factor * q for q in out.path))


@dataclasses.dataclass(frozen=True)
class AllClientsIHGP(FedIHGP):
    """FedIHGP that draws the subset ``S_0`` and then averages every client anyway."""

    def ihgp(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor,
             truncation_index: int | None = None) -> IHGPResult:
        ctx.participants()  # the subset is drawn, then ignored
        full = FederatedContext(ctx.problem, ctx.rng)
        return super().ihgp(full, x, y, truncation_index)


class _FirstSubsetContext:
    """Wraps a context so that every ``participants()`` after the first returns the first draw."""

    def __init__(self, ctx: FederatedContext) -> None:
        self._ctx: FederatedContext = ctx
        self._first: torch.Tensor | None = None

    def participants(self) -> torch.Tensor:
        if self._first is None:
            self._first = self._ctx.participants()
        return self._first

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


@dataclasses.dataclass(frozen=True)
class SameSubsetIHGP(FedIHGP):
    """FedIHGP that reuses ``S_0`` for every Hessian round instead of drawing ``S_n`` afresh."""

    def ihgp(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor,
             truncation_index: int | None = None) -> IHGPResult:
        return super().ihgp(_FirstSubsetContext(ctx), x, y,  # type: ignore[arg-type]
                            truncation_index)


@dataclasses.dataclass(frozen=True)
class HalvedLipschitzIHGP(FedIHGP):
    """FedIHGP run with the Neumann step ``2/l`` it is not given: ``l`` read as the Lipschitz
    constant of ``g/2`` (the 1/2-convention slip of Sec. 3.2, where ``l_{g,1} = 1`` is used for
    ``g = 1/2 ||y - r(x)||^2``)."""

    def steps(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().steps(problem)
        return beta, 2.0 * lam


def _ihgp(cls: type) -> Callable[..., FedIHGP]:
    def make(**kw: Any) -> FedIHGP:
        return cls(**{**get_estimator("fedihgp").defaults, **kw})

    return make


# ------------------------------------------------------------------------------- FedNest bugs


def _algorithm(name: str, cls: type = FedNest, **fixed: Any) -> Callable[..., FedNest]:
    """Builder of registry entry ``name`` as ``cls`` (same fields), with ``fixed`` overrides."""
    return registry_variant(name, cls, **fixed)


@dataclasses.dataclass(frozen=True)
class NoControlVariateInner(FedNest):
    """FedInn without the drift correction (a FedAvg inner step passed off as FedInn)."""

    def inner_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.inner_update(dataclasses.replace(self, inner_method="sgd"),
                                    ctx, x, y, steps)


@dataclasses.dataclass(frozen=True)
class OneLocalStepInner(FedNest):
    """FedInn that runs a single local step whatever tau is."""

    def inner_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.inner_update(dataclasses.replace(self, local_steps=1), ctx, x, y, steps)


@dataclasses.dataclass(frozen=True)
class DampedInner(FedNest):
    """FedInn with ``0.9 beta`` (a step-size bug)."""

    def inner_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.inner_update(self, ctx, x, y, steps._replace(inner=0.9 * steps.inner))


@dataclasses.dataclass(frozen=True)
class DampedOuter(FedNest):
    """FedOut with ``0.9 alpha`` (a step-size bug)."""

    def outer_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.outer_update(self, ctx, x, y, steps._replace(outer=0.9 * steps.outer))


@dataclasses.dataclass(frozen=True)
class DampedNeumann(FedNest):
    """FedOut whose Neumann series (FedIHGP, or LFedOut's local one) uses ``0.9 / l`` instead of
    the ``1 / l`` the algorithm reports (a mis-set step size)."""

    def outer_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.outer_update(self, ctx, x, y, steps._replace(neumann=0.9 * steps.neumann))


@dataclasses.dataclass(frozen=True)
class BiasedDirection(FedNest):
    """FedOut whose broadcast direction is off by 0.1%."""

    def outer_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        x_plus, h, result = FedNest.outer_update(self, ctx, x, y, steps)
        return x_plus, 1.001 * h, result


@dataclasses.dataclass(frozen=True)
class ExtraRound(FedNest):
    """An outer iteration with one aggregation more than the algorithm declares."""

    def step(self, ctx, state):  # type: ignore[no-untyped-def]
        new = FedNest.step(self, ctx, state)
        clients = ctx.participants()
        ctx.aggregate(new.x.expand(int(clients.shape[0]), -1), clients)
        return new._replace(rounds=new.rounds + 1)


# Why 0.25: a floor dim_x DRIFT^2 >= 0.0625 exceeds 3 Q(K_1) on every drawn case, so the K-rate
# check refutes it; a 0.1 drift (floor 0.01) hides under the K^{-1/2} term (DRIFTING_OUTER).
DRIFT = 0.25


@dataclasses.dataclass(frozen=True)
class DriftingOuter(FedNest):
    """FedOut whose broadcast step carries a constant offset ``alpha * DRIFT`` in every
    coordinate (an uncorrected client drift): the iteration still contracts, but to a point where
    ``grad f = -DRIFT``, so ``(1/K) sum ||grad f(x_k)||^2`` levels off at ``dim_x DRIFT^2``
    instead of decaying like ``K^{-1/2}``."""

    def outer_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        x_plus, h, result = FedNest.outer_update(self, ctx, x, y, steps)
        return x_plus - DRIFT * steps.outer, h, result


# ------------------------------------------------------------------------------- the perturbations

IHGP_SCALE_OFF_BY_ONE = Perturbation(
    "FedIHGP scale (N + 1)/l",
    "p_0 scaled by (N + 1)/l instead of N/l (N' counted on {0..N}): E[H_hat] is off by the "
    "factor 1 + 1/N, a relative error >= 1/40 on the drawn N <= 40, eight decades above the "
    "identities' 1e-10 tolerance; for the bounds it moves ||H^{-1} - E[H_hat]|| towards "
    "||H^{-1}|| / N, over the bound once the bias term is small.",
    _ihgp(ScaledIHGP),
)

IHGP_SQRT_SCALE = Perturbation(
    "FedIHGP scale sqrt(N)/l",
    "p_0 scaled by sqrt(N)/l instead of N/l (a 'variance-normalised' weight): Var(p_{N'}) grows "
    "like N^0 instead of N^1. The check resolves exponent errors of its derived deviation "
    "(2 kappa - 1)/N_min + 0.02 (<= 0.26); a wrong normalisation of the randomized "
    "truncation is the bug that changes the N-law at all (a wrong constant does not).",
    _ihgp(SqrtScaledIHGP),
)

IHGP_IGNORES_SUBSET = Perturbation(
    "FedIHGP ignores S_0",
    "the subset S_0 is drawn but every client is averaged: the sampling variance "
    "(m - s)/(s (m - 1)) sigma_v^2 is 0 for every s < m, the smallest departure from the "
    "participation the estimator reports.",
    _ihgp(AllClientsIHGP),
)

IHGP_SAME_SUBSET = Perturbation(
    "FedIHGP reuses S_0 for every Hessian round",
    "S_1..S_{N'} equal S_0 instead of fresh draws: the mean is unchanged (each S_n is still "
    "uniform) but the rounds' Hessian samples are correlated, so Var(p) moves by a share of the "
    "client-sampling term, far above the enumeration's 1e-10.",
    _ihgp(SameSubsetIHGP),
)

IHGP_HALVED_LIPSCHITZ = Perturbation(
    "FedIHGP Neumann step 2/l",
    "the Neumann step is 2/l instead of 1/l (l read as the Lipschitz constant of g/2, the "
    "1/2-convention slip of Sec. 3.2): the sample factors I - 2 H_s / l reach norm ~1, so "
    "E||H^{-1} - H_hat|| grows like (2/l) N instead of staying under 2/mu_s; the check "
    "resolves an excess of half its bound (ABS_ERROR_EFFECT), which a smaller step error "
    "(factors still contracting) does not reach.",
    _ihgp(HalvedLipschitzIHGP),
)

INNER_NO_DRIFT_CORRECTION = Perturbation(
    "FedInn without its control variate",
    "a FedAvg inner step passed off as FedInn: under Hessian heterogeneity the per-call map is "
    "no longer I - P H_bar and the fixed point moves off y*, both checked at 1e-10.",
    _algorithm("fednest", NoControlVariateInner),
)

INNER_ONE_LOCAL_STEP = Perturbation(
    "FedInn runs one local step",
    "tau is ignored (one local step per call): the per-call progress no longer changes with "
    "tau, while the derived exponent does; the smallest bug in the tau loop that changes the "
    "law (an exponent error far above the 1e-6 tolerance).",
    _algorithm("fednest", OneLocalStepInner),
)

FEDAVG_SECRETLY_CORRECTED = Perturbation(
    "LFedInn with FedInn's drift correction",
    "the FedAvg baseline runs the SVRG correction: its fixed point is y* (bias at round-off, "
    "below the 1e-6 floor the check asks for), so the reported FedAvg drift is not measured.",
    _algorithm("fednest-sgd", inner_method="svrg"),
)

INNER_STEP_0_9 = Perturbation(
    "FedInn step 0.9 beta",
    "the local step is 0.9 beta: one call contracts by (1 - 0.9 beta)^tau instead of "
    "(1 - beta)^tau, and beta = 1 no longer solves in one call; a 10% step error is a "
    "mis-set constant, eight decades above the 1e-10 identity.",
    _algorithm("fednest", DampedInner),
)

OUTER_STEP_0_9 = Perturbation(
    "FedOut step 0.9 alpha",
    "the outer step is 0.9 alpha: the per-iteration rate moves from rho(T_x T_y^T) by O(10%) "
    "of 1 - rho, far above the 1e-6 tolerance; a mis-set constant.",
    _algorithm("fednest-minimax", DampedOuter),
)

DIRECTION_BIAS_1E_3 = Perturbation(
    "FedOut direction off by 0.1%",
    "the broadcast direction is 1.001 h: a 1e-3 relative bias, seven decades above the 1e-10 "
    "identity h = grad phi(x) (Danskin).",
    _algorithm("fednest-minimax", BiasedDirection),
)

NEUMANN_STEP_0_9 = Perturbation(
    "FedIHGP Neumann step 0.9/l",
    "FedIHGP runs with 0.9/l while the algorithm reports 1/l (a mis-set step constant): the "
    "stationarity floor decays like (1 - 0.9 mu/l)^N, a slope 10% shallower than "
    "log(1 - mu/l), twice the check's 5% tolerance.",
    _algorithm("fednest", DampedNeumann),
)

FLOOR_NEUMANN_STEP = Perturbation(
    "FedIHGP Neumann step 0.9/l",
    "FedIHGP runs with 0.9/l while the algorithm reports 1/l (a mis-set step constant): the "
    "floor ||grad f(x_N)||^2 carries (1 - 0.9 mu/l)^{2(N+1)} instead of (1 - mu/l)^{2(N+1)}, "
    "over b_N^2 where the bound is tight (small kappa: at kappa = 1 the exact series solves in "
    "one term, floor 0 against 1e-4 with the bug; kappa = 1.25, N = 5: 7e-8 against b_N^2 = "
    "3e-8); the bound's slack hides it at larger kappa, so the check needs a case near the "
    "bound to catch it.",
    _algorithm("fednest", DampedNeumann),
)

LOCAL_NEUMANN_STEP_0_9 = Perturbation(
    "LFedOut local Neumann step 0.9/l",
    "the local Neumann series uses 0.9/l: LFedNest's direction differs from its notes-2.7 "
    "formula by O(10%) of the indirect term, far above the 1e-10 identity.",
    _algorithm("lfednest", DampedNeumann),
)


def _one_hessian_round_too_many(**kw: Any) -> FedNest:
    """FedNest on the deterministic truncation (the official code's schedule) with N + 1 Hessian
    rounds where the case asks for N."""
    return get_estimator("fednest").build(**{**kw, "truncation": "deterministic",
                                              "neumann_terms": int(kw["neumann_terms"]) + 1})


ROUNDS_OVER_BUDGET = Perturbation(
    "one Hessian round too many (deterministic truncation)",
    "FedIHGP's loop runs N + 1 Hessian rounds on the deterministic schedule (an off-by-one in N): "
    "2T + N + 4 rounds per iteration, one over the 2T + N + 3 budget. An off-by-one on the "
    "random schedule (2T + N' + 4 <= 2T + N + 3) stays within the budget, which has one round "
    "of slack; fednest.rounds.random_truncation's exact count catches that one.",
    _one_hessian_round_too_many,
)


def extra_round(name: str) -> Perturbation:
    """One aggregation more per outer iteration than ``name`` declares: the smallest count bug."""
    return Perturbation(
        "one extra aggregation round",
        "each outer iteration aggregates once more than its Table 2 formula (an off-by-one in "
        "the round count, the smallest possible error of an exact count).",
        _algorithm(name, ExtraRound),
    )


DRIFTING_OUTER = {
    name: Perturbation(
        f"FedOut drift {DRIFT} alpha",
        f"the outer step carries a constant offset {DRIFT} alpha (an uncorrected client drift): "
        f"Q(K) levels off at dim_x {DRIFT}^2 = {DRIFT**2:g}, a floor (exponent 0 at large K). Why "
        f"{DRIFT}: the check refutes a floor F once the exponent of Q + F over K_1..16 K_1 "
        "passes -1/4 by its half-width, i.e. F > ~1.2 Q(K_1); Q(K_1) is 0.008-0.02 on the "
        "drawn cases, so F = 0.0625 (> 3 Q(K_1)) is caught on each, while a 0.1 drift (F = "
        "0.01) hides under the K^{-1/2} term of the minimax case on the affordable horizons.",
        _algorithm(name, DriftingOuter), slow=True, profile="thorough")
    for name in ("fednest", "fednest-minimax")
}
