"""Each FedMSA claim check fails on a deliberately wrong algorithm (the checks can fail).

A perturbed builder replaces the registry's; the runner must return "fails as stated" with a
counterexample that is saved as data rebuilding the failing problem. For the two claims the
testbed refutes (expected "fails"), the unperturbed check must also pass on instances where the
paper's statement is true, so that the refutation is not an artefact of the check.
"""

from __future__ import annotations

import dataclasses

import pytest

from problems import LinearCompositional, QuadraticBilevel
from testbed._algorithms.fedmsa import FedMSA
from testbed._algorithms.fedmsa_maps import BilevelMaps, CompositionalMaps, repeat_batch
from testbed.registry import get_estimator
from tests._replay import assert_perturbation_detected
from theory_checks import fedmsa_rates
from theory_checks.claim import Case
from theory_checks.registry import CLAIM_DB, get_claim
from theory_checks.runner import Profile, run_claim, write_claim_result

PROFILE = Profile("perturbation", max_examples=5)


@dataclasses.dataclass(frozen=True)
class _FlippedIndirect(BilevelMaps):
    """P^m = grad_x f + grad^2_xw g v: the sign of the indirect term is wrong."""

    def evaluate(self, oracles, x, Z, clients, batches):
        p, s = super().evaluate(oracles, x, Z, clients, batches)
        dy = oracles.problem.dim_y
        Jv = oracles.jvp_inner_xy(x, Z[:, :dy], Z[:, dy:], clients, batches[1])
        return p + 2 * Jv, s


@dataclasses.dataclass(frozen=True)
class _FreshSampleAtOldPoint(BilevelMaps):
    """Uses a different sample at the second stacked point (breaks the shared-sample rule)."""

    def evaluate(self, oracles, x, Z, clients, batches):
        C = int(clients.shape[0]) // 2
        if C == 0 or batches[0] is None:
            return super().evaluate(oracles, x, Z, clients, batches)
        shifted = [None if b is None else repeat_batch(b, 1) for b in batches]
        for b in shifted:
            b.indices[C:] = (b.indices[C:] + 1) % oracles.problem.n_samples
        return super().evaluate(oracles, x, Z, clients, shifted)


@dataclasses.dataclass(frozen=True)
class _AlwaysPaper(CompositionalMaps):
    """Claims the "exact" semantics but evaluates the average of products."""

    def exact_map(self, problem, x, Z):
        return CompositionalMaps("paper").exact_map(problem, x, Z)


@dataclasses.dataclass(frozen=True)
class _BiasedDirection(FedMSA):
    """A server-side bias: h_r + 0.5 (as from a stale or mis-scaled correction). Why 0.5: the
    floor it leaves (~ bias^2) must lie above the criterion the correct algorithm reaches
    within the R grid; a bias of 0.05 went unnoticed on the drawn problems of the seed-only
    draws (theory_checks._determinism), whose gradients are larger."""

    def global_directions(self, ctx, points, prev, h_prev, q_prev, rho):
        h, q = super().global_directions(ctx, points, prev, h_prev, q_prev, rho)
        return h + 0.5, q


@dataclasses.dataclass(frozen=True)
class _HalfAdoption(FedMSA):
    """The server averages the client's model with its own instead of adopting it (line 12)."""

    def step(self, ctx, state):
        new = super().step(ctx, state)
        return dataclasses.replace(new, x=0.5 * (new.x + state.x), Z=0.5 * (new.Z + state.Z))


@dataclasses.dataclass(frozen=True)
class _IgnoresK(FedMSA):
    """Runs one local step whatever K is."""

    def step(self, ctx, state):
        return FedMSA.step(dataclasses.replace(self, local_steps=1), ctx, state)


@dataclasses.dataclass(frozen=True)
class _AscentOnZ(FedMSA):
    """z <- z + beta q: the sign of the Z-update is wrong."""

    def _betas(self, problem):
        return -super()._betas(problem)


def _with(cls=FedMSA, maps=None, entry="fedmsa"):
    def make(**kw):
        alg = get_estimator(entry).build(**kw)
        fields = {f.name: getattr(alg, f.name) for f in dataclasses.fields(alg)}
        if maps is not None:
            fields["maps"] = maps
        return cls(**fields)

    return make


PERTURBATIONS = {
    "fedmsa.local.first_step_is_global_direction": _with(maps=_FreshSampleAtOldPoint()),
    "fedmsa.local.deterministic_telescoping": _with(maps=_FlippedIndirect()),
    "fedmsa.tau_zero.equals_centralised_msa": _with(_HalfAdoption),
    "fedmsa.blo.fixed_point_is_hypergradient": _with(maps=_FlippedIndirect()),
    "fedmsa.mco.paper_fixed_point_stationary": _with(maps=_AlwaysPaper(), entry="fedmsa-mco"),
    "fedmsa.mco.exact_semantics_fixed_point_stationary": _with(maps=_AlwaysPaper(),
                                                               entry="fedmsa-mco"),
    "fedmsa.lemma_b1.contraction": _with(_AscentOnZ),
    "fedmsa.lemma_b1.contraction_corrected": _with(_AscentOnZ),
    "fedmsa.rate.R_deterministic": _with(_BiasedDirection),
    "fedmsa.rate.K_at_tau_zero": _with(_IgnoresK),
}


def test_every_fedmsa_claim_has_a_perturbation():
    # theory_checks/fedmsa_rates.py's claims are covered by tests/test_fedmsa_rates.py
    new = {c.id for c in fedmsa_rates.CLAIMS}
    assert {c.id for c in CLAIM_DB if c.id.startswith("fedmsa.")} - new == set(PERTURBATIONS)


@pytest.mark.parametrize("claim_id", sorted(PERTURBATIONS))
def test_perturbed_algorithm_fails_the_check(claim_id, tmp_path):
    claim = get_claim(claim_id)
    assert_perturbation_detected(claim, PERTURBATIONS[claim_id], tmp_path, PROFILE)


def test_refuted_mco_claim_holds_without_jacobian_heterogeneity():
    claim = get_claim("fedmsa.mco.paper_fixed_point_stationary")
    problem = LinearCompositional.random(4, [2, 3, 3], 3, jacobian_heterogeneity=0.0,
                                         value_heterogeneity=2.0)
    make = get_estimator("fedmsa-mco").build
    assert claim.check(claim, Case(problem, {"seed": 0, "semantics": "paper"}), make).passed
    biased = LinearCompositional.random(4, [2, 3, 3], 3, jacobian_heterogeneity=0.3,
                                        value_heterogeneity=2.0)
    assert not claim.check(claim, Case(biased, {"seed": 0, "semantics": "paper"}), make).passed


def test_refuted_lemma_b1_holds_at_small_curvature_and_fails_at_large():
    claim = get_claim("fedmsa.lemma_b1.contraction")
    make = get_estimator("fedmsa").build
    small = QuadraticBilevel.random(1, 1, 1, 1.0, seed=0, gradient_heterogeneity=1.0, mu=0.5)
    large = QuadraticBilevel.random(1, 1, 2, 2.0, seed=0, gradient_heterogeneity=1.0, mu=4.0)
    assert claim.check(claim, Case(small, {"seed": 0}), make).passed
    assert not claim.check(claim, Case(large, {"seed": 0}), make).passed


@pytest.mark.parametrize("claim_id", ["fedmsa.mco.paper_fixed_point_stationary",
                                      "fedmsa.lemma_b1.contraction"])
def test_refuted_claims_save_a_counterexample(claim_id, tmp_path):
    claim = get_claim(claim_id)
    result = run_claim(claim, PROFILE)
    assert result.verdict == "fails as stated" and claim.expected == "fails"
    write_claim_result(result, tmp_path, PROFILE)
    assert (tmp_path / "counterexamples" / f"{claim_id}.npz").exists()
