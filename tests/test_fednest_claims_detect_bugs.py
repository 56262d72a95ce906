"""Every FedNest claim check can fail: a deliberately wrong estimator or algorithm makes it fail.

For the "holds" claims a perturbed builder replaces the registry's and the runner must return
"fails as stated" with a counterexample that is saved, rebuilds and replays. For the claims the
testbed refutes (expected "fails"), the original fails on the registry's own estimator with a
saved counterexample, and its corrected claim holds beside it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from testbed._algorithms.fednest import FedNest
from testbed._estimators.fednest import FedIHGP, IHGPResult
from testbed._federation.context import FederatedContext
from testbed.registry import get_estimator
from tests._replay import assert_perturbation_detected, assert_saved_and_replays
from theory_checks import fednest_rates
from theory_checks.registry import CLAIM_DB, get_claim
from theory_checks.runner import Profile, run_claim

PROFILE = Profile("perturbation", max_examples=5)


# ------------------------------------------------------------------------------- FedIHGP bugs


@dataclasses.dataclass(frozen=True)
class ScaledIHGP(FedIHGP):
    """FedIHGP whose scale is (N + 1)/l instead of N/l (an off-by-one in eq. (13b))."""

    def ihgp(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor,
             truncation_index: int | None = None) -> IHGPResult:
        out = super().ihgp(ctx, x, y, truncation_index)
        factor = (self.neumann_terms + 1) / self.neumann_terms
        return out._replace(p=factor * out.p, path=tuple(factor * q for q in out.path))


@dataclasses.dataclass(frozen=True)
class SqrtScaledIHGP(FedIHGP):
    """FedIHGP scaled by sqrt(N)/l: unbiased-looking for small N, variance no longer ~N."""

    def ihgp(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor,
             truncation_index: int | None = None) -> IHGPResult:
        out = super().ihgp(ctx, x, y, truncation_index)
        factor = self.neumann_terms ** -0.5
        return out._replace(p=factor * out.p, path=tuple(factor * q for q in out.path))


@dataclasses.dataclass(frozen=True)
class AllClientsIHGP(FedIHGP):
    """FedIHGP that ignores the sampled subset S_0 and always averages every client."""

    def ihgp(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor,
             truncation_index: int | None = None) -> IHGPResult:
        ctx.participants()  # the subset is drawn, then ignored
        full = FederatedContext(ctx.problem, ctx.rng)
        return super().ihgp(full, x, y, truncation_index)


def _ihgp(cls: type) -> Any:
    def make(**kw: Any) -> FedIHGP:
        return cls(**{**get_estimator("fedihgp").defaults, **kw})

    return make


# ------------------------------------------------------------------------------- FedNest bugs


def _algorithm(name: str, cls: type = FedNest, **fixed: Any) -> Any:
    info = get_estimator(name)

    def make(**kw: Any) -> FedNest:
        base = info.build(**kw)
        return cls(**{**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
                      **fixed})

    return make


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
    """FedInn with 0.9 beta (a step-size bug)."""

    def inner_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.inner_update(self, ctx, x, y, steps._replace(inner=0.9 * steps.inner))


@dataclasses.dataclass(frozen=True)
class DampedOuter(FedNest):
    """FedOut with 0.9 alpha (a step-size bug)."""

    def outer_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.outer_update(self, ctx, x, y, steps._replace(outer=0.9 * steps.outer))


@dataclasses.dataclass(frozen=True)
class BiasedDirection(FedNest):
    """FedOut whose broadcast direction is off by 0.1%."""

    def outer_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        x_plus, h, result = FedNest.outer_update(self, ctx, x, y, steps)
        return x_plus, 1.001 * h, result


@dataclasses.dataclass(frozen=True)
class NoIndirectTerm(FedNest):
    """FedOut that drops the indirect (Neumann) part of the hypergradient."""

    def outer_update(self, ctx, x, y, steps):  # type: ignore[no-untyped-def]
        return FedNest.outer_update(dataclasses.replace(self, outer_method="minimax"),
                                    ctx, x, y, steps)

    def check_problem(self, problem):  # type: ignore[no-untyped-def]
        FedNest.check_problem(dataclasses.replace(self, outer_method="svrg"), problem)


@dataclasses.dataclass(frozen=True)
class ExtraRound(FedNest):
    """An outer iteration with one aggregation more than the algorithm declares."""

    def step(self, ctx, state):  # type: ignore[no-untyped-def]
        new = FedNest.step(self, ctx, state)
        clients = ctx.participants()
        ctx.aggregate(new.x.expand(int(clients.shape[0]), -1), clients)
        return new._replace(rounds=new.rounds + 1)


PERTURBATIONS: dict[str, Any] = {
    "fednest.lemma22.inverse_hessian_identity": _ihgp(ScaledIHGP),
    "fednest.lemma22.inverse_hessian_bound": _ihgp(ScaledIHGP),
    "fednest.lemma22.averaged_bias": _ihgp(ScaledIHGP),
    "fednest.ihgp.variance_exact": _ihgp(ScaledIHGP),
    "fednest.ihgp.variance_linear_in_n": _ihgp(SqrtScaledIHGP),
    "fednest.ihgp.client_sampling_variance": _ihgp(AllClientsIHGP),
    "fednest.compositional.single_term_unbiased": _ihgp(ScaledIHGP),
    "fednest.fedinn.linear_rate": _algorithm("fednest", NoControlVariateInner),
    "fednest.fedinn.tau_exponent": _algorithm("fednest", OneLocalStepInner),
    "fednest.fedavg.biased_fixed_point": _algorithm("fednest-sgd", inner_method="svrg"),
    "fednest.compositional.one_call_exact": _algorithm("fednest", DampedInner),
    "fednest.minimax.synthetic_linear_rate": _algorithm("fednest-minimax", DampedOuter),
    "fednest.minimax.averaged_indirect_zero": _algorithm("fednest-minimax", BiasedDirection),
    "fednest.thm31.stationarity_floor": _algorithm("fednest", NoIndirectTerm),
    "fednest.rounds.fednest": _algorithm("fednest", ExtraRound),
    "fednest.rounds.lfednest": _algorithm("lfednest", ExtraRound),
    "fednest.rounds.fednest_sgd": _algorithm("fednest-sgd", ExtraRound),
    "fednest.rounds.lfednest_svrg": _algorithm("lfednest-svrg", ExtraRound),
    "fednest.rounds.fednest_minimax": _algorithm("fednest-minimax", ExtraRound),
    "fednest.rounds.random_truncation": _algorithm("fednest", ExtraRound),
}

# refuted statement -> the corrected claim checked beside it
REFUTED = {
    "fednest.lemma22.per_client_bias": "fednest.lemma22.averaged_bias",
    "fednest.lemma22.paper_constant": "fednest.lemma22.averaged_bias",
    "fednest.minimax.per_client_indirect_zero": "fednest.minimax.averaged_indirect_zero",
    "fednest.compositional.paper_indirect_form": "fednest.compositional.single_term_unbiased",
    "fednest.rounds.paper_count_random": "fednest.rounds.random_truncation",
}


def test_every_fednest_claim_is_covered():
    # theory_checks/fednest_rates.py's claims are covered by tests/test_fednest_rates.py
    ids = {c.id for c in CLAIM_DB if c.paper == "FedNest"} - {c.id for c in fednest_rates.CLAIMS}
    assert ids == set(PERTURBATIONS) | set(REFUTED)
    for claim_id in REFUTED:
        assert get_claim(claim_id).expected == "fails"
    for claim_id in PERTURBATIONS:
        assert get_claim(claim_id).expected == "holds"


@pytest.mark.parametrize("claim_id", sorted(PERTURBATIONS))
def test_perturbed_estimator_fails_the_check(claim_id, tmp_path):
    claim = get_claim(claim_id)
    assert_perturbation_detected(claim, PERTURBATIONS[claim_id], tmp_path, PROFILE)


@pytest.mark.parametrize("claim_id", sorted(REFUTED))
def test_refuted_claim_fails_and_its_correction_holds(claim_id, tmp_path):
    claim = get_claim(claim_id)
    result = run_claim(claim, PROFILE)
    assert result.verdict == "fails as stated"
    assert_saved_and_replays(result, get_estimator(claim.estimators[0]).build, tmp_path,
                             PROFILE)
    corrected = get_claim(REFUTED[claim_id])
    assert corrected.corrects in REFUTED
    assert run_claim(corrected, PROFILE).verdict == "holds once corrected"
