"""HGP claims can say both "holds" and "fails".

The perturbations (the smallest bug each claim must catch) live in the module of their result
(``theory_checks/hgp/<result>.py``; those several results share in
:mod:`theory_checks.hgp.perturbations`) and are attached to the claims; the generic
``theory_checks/test_claims.py::test_perturbation_is_caught`` runs them and
``test_positive_control_holds`` runs the controls of the errata. This file checks that every HGP
claim has one or the other, that the realistic perturbations replaced the huge ones, and that
an erratum's saved counterexample replays.
"""

from __future__ import annotations

import json

import numpy as np
import torch

from problems import PerClientQuadratic
from problems import from_spec
from testbed.registry import get_estimator
from theory_checks.claim import Case
from theory_checks.hgp import perturbations as perturb
from theory_checks.hgp.common import noise_moments
from theory_checks.hgp.common import point
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import get_claim
from theory_checks.runner import Profile
from theory_checks.runner import run_claim
from theory_checks.runner import write_claim_result

PROFILE = Profile("thorough", max_examples=5)
HGP = [c for c in CLAIM_DB if c.paper == "HGP"]


def test_every_holding_claim_has_a_perturbation_and_every_erratum_a_control():
    for claim in HGP:
        if claim.expected == "holds":
            assert claim.perturbation is not None, claim.id
            assert claim.perturbation.description, claim.id
        else:
            assert claim.positive_control is not None, claim.id


def test_monte_carlo_claims_are_statistical_and_the_rest_deterministic():
    statistical = {c.id for c in HGP if c.statistical}
    assert statistical == {
        "hgp.stochastic.unbiased",
        "hgp.theorem1.noise_exponent_b",
        "hgp.noise.sqrt_eta",
        "hgp.theorem1.high_probability_bound",
    }


def test_half_batch_doubles_the_exact_variance():
    """The b/2 perturbation is the factor-2 variance bug its description says: the exact
    variance at b // 2 over the one at b is >= 2 (1/b term doubled, higher terms more)."""
    p = PerClientQuadratic.random(
        3, 2, 2, 2.0, 5, hessian_heterogeneity=0.2, n_samples=16, hessian_noise=0.3, cross_noise=0.5
    )
    x = point(p, 1)
    est = get_estimator("hgp-stochastic").build(neumann_terms=30, pushsum_steps=3, batch_size=4)
    ratio = (
        noise_moments(p, x, est, batch_size=2).variance[-1] / noise_moments(p, x, est).variance[-1]
    )
    assert 2.0 <= ratio <= 2.5


def test_half_sampler_bias_is_what_the_description_says():
    """The half-sampler's exact bias (noise_moments on the first N/2 samples) is >= 0.375 of
    the noise sd on some coordinate: the size the unbiasedness check decides as "fails"."""
    p = PerClientQuadratic.random(2, 1, 1, 1.0, 0, n_samples=16, hessian_noise=0.3, cross_noise=0.5)
    x = point(p, 0)
    est = get_estimator("hgp-stochastic").build(neumann_terms=20, pushsum_steps=2, batch_size=1)
    full = noise_moments(p, x, est)
    half = noise_moments(p, x, est, sample_indices=np.arange(8))
    assert float(np.max(np.abs(half.mean[-1] - full.mean[-1]) / full.coordinate_sd)) >= 0.375
    # and the view draws only from the first half
    view = perturb.HalfSampleView(p)
    batch = view.sample_batch(np.random.default_rng(0), torch.arange(2), 200)
    assert int(batch.indices.max()) == 7


def test_errata_counterexamples_replay(tmp_path):
    """The saved counterexample of an erratum rebuilds and fails again with the real estimator."""
    claim = get_claim("hgp.theorem2.as_stated")
    result = run_claim(claim, PROFILE)
    assert result.verdict == "fails as stated"
    write_claim_result(result, tmp_path, PROFILE)
    saved = json.loads((tmp_path / "counterexamples" / f"{claim.id}.json").read_text())
    make = get_estimator(claim.estimators[0]).build
    assert not claim.check(claim, Case(from_spec(saved["spec"]), saved["params"]), make).passed
    assert torch.get_default_dtype() == torch.float64
