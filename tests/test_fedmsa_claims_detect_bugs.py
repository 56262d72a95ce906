"""Every FedMSA claim carries what shows its check can say both verdicts.

The perturbations and positive controls are claim data (each in its result's module,
theory_checks/fedmsa/<subject>.py; the wrong estimators in theory_checks/fedmsa/perturbations.py);
``theory_checks/test_claims.py`` runs them (``test_perturbation_is_caught``,
``test_positive_control_holds``). Here: every FedMSA claim has them, the perturbations are
realistic single mistakes of the registered algorithm, and the two refutations the testbed keeps
save a counterexample that rebuilds the failing problem exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from problems import from_spec
from testbed.algorithms.fedmsa import FedMSA
from testbed.registry import get_estimator
from theory_checks import fedmsa
from theory_checks.claim import Case
from theory_checks.fedmsa import moments as fedmsa_moments
from theory_checks.fedmsa import perturbations as perturbed
from theory_checks.fedmsa import scaling
from theory_checks.fedmsa.rate import perturbations as rate
from theory_checks.runner import Profile
from theory_checks.runner import run_claim
from theory_checks.runner import write_claim_result

CLAIMS = {c.id: c for c in fedmsa.CLAIMS}
PROFILE = Profile("thorough", max_examples=5)


@pytest.mark.parametrize("claim_id", sorted(CLAIMS))
def test_every_fedmsa_claim_can_say_both(claim_id):
    claim = CLAIMS[claim_id]
    if claim.expected == "holds":
        assert claim.perturbation is not None and claim.perturbation.description
    else:
        assert claim.positive_control is not None
        claim.positive_control()  # rebuilt from its spec (known_case)


def test_perturbed_algorithms_differ_from_the_registered_one_by_one_mistake():
    """Each builder returns the registered FedMSA's fields; only the class or the maps differ."""
    kw = {
        "outer_step_size": 0.1,
        "inner_step_size": 0.2,
        "momentum": 0.3,
        "local_steps": 2,
        "participation": 1,
        "batch_size": 1,
    }
    reference = get_estimator("fedmsa").build(**kw)
    shared = (
        "fresh_sample_at_old_point",
        "indirect_term_on_w",
        "one_client_global",
        "stateful_client",
        "extra_local_step",
        "ignores_k",
        "ascent_on_z",
    )
    builders = {
        **{name: getattr(perturbed, name) for name in shared},
        "adopt_first": scaling.adopt_first,
        "weight_decay": rate.weight_decay,
    }
    for name, build in builders.items():
        alg = build(**kw)
        assert isinstance(alg, FedMSA)
        for field in (
            "outer_step_size",
            "inner_step_size",
            "momentum",
            "local_steps",
            "batch_size",
        ):
            assert getattr(alg, field) == getattr(reference, field), (name, field)


def test_weight_decay_moves_the_fixed_point_by_the_decay():
    """The R-rate perturbation is the bug it says: h + decay x, nothing else."""
    problem = QuadraticBilevel.random(
        2, 2, 2, 2.0, seed=1, hessian_heterogeneity=0.2, gradient_heterogeneity=1.0
    )
    kw = {
        "outer_step_size": 0.1,
        "inner_step_size": 0.1,
        "momentum": 0.5,
        "local_steps": 1,
        "participation": 1,
        "batch_size": None,
    }
    good, bad = get_estimator("fedmsa").build(**kw), rate.weight_decay(**kw)
    x = torch.tensor([0.3, -0.7], dtype=torch.float64)

    def ctx():
        return fedmsa_moments.scripted_round_context(problem, None, 0)

    state = good.step(ctx(), good.state_at(problem, x))
    new_good = good.step(ctx(), state)
    new_bad = bad.step(ctx(), state)
    torch.testing.assert_close(new_bad.h - new_good.h, bad.decay * state.x, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "claim_id", ["fedmsa.mco.paper_fixed_point_stationary", "fedmsa.lemma_b1.contraction"]
)
def test_refuted_claims_save_a_counterexample(claim_id, tmp_path):
    claim = CLAIMS[claim_id]
    result = run_claim(claim, PROFILE)
    assert result.verdict == "fails as stated" and claim.expected == "fails"
    write_claim_result(result, tmp_path, PROFILE)
    with np.load(tmp_path / "counterexamples" / f"{claim_id}.npz") as arrays:
        rebuilt = from_spec(result.counterexample.spec)
        for key, value in rebuilt.to_arrays().items():
            np.testing.assert_array_equal(arrays[key], value)
    again = claim.check(
        claim, Case(rebuilt, result.counterexample.params), get_estimator(claim.estimators[0]).build
    )
    assert not again.passed
