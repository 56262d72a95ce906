"""The FedMSA stochastic-rate, rho and scaling checks of theory_checks/fedmsa_rates.py can fail.

Each claim the testbed expects to hold fails with a saved, replayable counterexample when the
registry's FedMSA is replaced by a deliberately wrong one; the refuted rho statement holds for
an algorithm under which it is true (a batch that grows like R).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from problems import QuadraticBilevel
from testbed._algorithms.fedmsa import FedMSA
from testbed.registry import get_estimator
from tests._replay import assert_perturbation_detected
from theory_checks import fedmsa_rates
from theory_checks.fedmsa_rates import fixed_point, sub_problem
from theory_checks.registry import get_claim
from theory_checks.runner import Profile, run_claim

PROFILE = Profile("perturbation", max_examples=5)


class _Only:
    """A view of a federated context in which the named client calls see fewer clients."""

    def __init__(self, ctx, first_global: bool = False, first_local: bool = False):
        self._ctx = ctx
        self._first_global, self._first_local = first_global, first_local

    def all_clients(self):
        clients = self._ctx.all_clients()
        return clients[:1] if self._first_global else clients

    def participants(self):
        clients = self._ctx.participants()
        return clients[:1] if self._first_local else clients

    def __getattr__(self, name):
        return getattr(self._ctx, name)


@dataclasses.dataclass(frozen=True)
class _OneClientGlobal(FedMSA):
    """The global step (5) uses client 0's maps only (no average over the M clients)."""

    def global_directions(self, ctx, points, prev, h_prev, q_prev, rho):
        return super().global_directions(_Only(ctx, first_global=True), points[:1],
                                         None if prev is None else prev[:1], h_prev, q_prev,
                                         rho)


@dataclasses.dataclass(frozen=True)
class _AdoptFirst(FedMSA):
    """The server adopts the first sampled client's model instead of averaging the S models."""

    def step(self, ctx, state):
        return super().step(_Only(ctx, first_local=True), state)


@dataclasses.dataclass(frozen=True)
class _BiasedDirection(FedMSA):
    """A constant server-side bias on h_r (a stale or mis-scaled correction)."""

    def global_directions(self, ctx, points, prev, h_prev, q_prev, rho):
        h, q = super().global_directions(ctx, points, prev, h_prev, q_prev, rho)
        return h + 0.5, q


@dataclasses.dataclass(frozen=True)
class _BatchGrowsWithR(FedMSA):
    """Batch ``b / rho`` = ``b R`` at rho = 1/R: the noise of every round shrinks like 1/R."""

    def __post_init__(self):
        if self.batch_size is not None and self.momentum > 0:
            object.__setattr__(self, "batch_size", round(self.batch_size / self.momentum))
        super().__post_init__()


def _with(cls):
    def make(**kw):
        alg = get_estimator("fedmsa").build(**kw)
        return cls(**{f.name: getattr(alg, f.name) for f in dataclasses.fields(alg)})

    return make


PERTURBATIONS = {
    "fedmsa.rate.M_stochastic": _with(_OneClientGlobal),
    "fedmsa.rate.tau_stochastic": _with(_OneClientGlobal),
    "fedmsa.rho.proof_choice": _with(_BiasedDirection),
    "fedmsa.scaling.participation": _with(_AdoptFirst),
}
CORRECTED_BUILDERS = {"fedmsa.rho.as_stated": _with(_BatchGrowsWithR)}
SLOW = {"fedmsa.rate.M_stochastic", "fedmsa.rate.tau_stochastic", "fedmsa.rho.proof_choice"}


def test_every_new_fedmsa_claim_is_covered():
    assert {c.id for c in fedmsa_rates.CLAIMS} == set(PERTURBATIONS) | set(CORRECTED_BUILDERS)
    assert all(get_claim(c).expected == "fails" for c in CORRECTED_BUILDERS)
    assert all(get_claim(c).expected == "holds" for c in PERTURBATIONS)


@pytest.mark.parametrize("claim_id", [
    pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in sorted(PERTURBATIONS)])
def test_perturbed_algorithm_fails_the_check(claim_id, tmp_path):
    claim = get_claim(claim_id)
    assert_perturbation_detected(claim, PERTURBATIONS[claim_id], tmp_path, PROFILE)


@pytest.mark.slow
def test_refuted_rho_statement_holds_when_the_batch_grows_like_R():
    result = run_claim(get_claim("fedmsa.rho.as_stated"), PROFILE,
                       make=CORRECTED_BUILDERS["fedmsa.rho.as_stated"])
    assert result.verdict == "holds" and result.cases


def test_fixed_point_zeroes_both_maps():
    from theory_checks.fedmsa import mean_maps

    p = QuadraticBilevel.random(3, 2, 2, 2.0, seed=1, hessian_heterogeneity=0.3,
                                gradient_heterogeneity=1.0)
    x, Z = fixed_point(p)
    P, S = mean_maps(p, x[None], Z[None])
    assert float(P.norm() + S.norm()) < 1e-10 * (1.0 + float(x.norm() + Z.norm()))
    torch.testing.assert_close(x, p.outer_minimizer(), rtol=1e-9, atol=1e-12)


def test_sub_problem_keeps_the_first_clients():
    p = QuadraticBilevel.random(4, 2, 2, 2.0, seed=0, n_samples=3, gradient_noise=1.0)
    sub = sub_problem(p, 2)
    assert sub.n_clients == 2 and sub.n_samples == 3
    torch.testing.assert_close(sub.A, p.A[:2])
    torch.testing.assert_close(sub.b_samples, p.b_samples[:2])
