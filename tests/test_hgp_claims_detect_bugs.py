"""Each HGP claim check that is expected to hold fails on a deliberately wrong estimator.

A perturbed builder replaces the registry's; the runner must then return "fails as stated" with
a counterexample that is saved as data and replays (as tests/test_claims_detect_bugs.py does for
the classical claims). Claims expected to fail (the errata) already produce counterexamples in
theory_checks/test_claims.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from problems import from_spec
from testbed._decentralized.hgp import HyperGradientPush
from testbed._decentralized.pushsum import push_sum
from testbed.registry import get_estimator
from tests._replay import assert_perturbation_detected
from theory_checks.claim import Case
from theory_checks.registry import CLAIM_DB, get_claim
from theory_checks.runner import Profile, run_claim, write_claim_result

PROFILE = Profile("perturbation", max_examples=5)
WIDE = Profile("perturbation", max_examples=20)
NEEDS_WIDER_SEARCH = {"hgp.lemma2.geometric_consensus"}


@dataclasses.dataclass(frozen=True)
class _NoDebias(HyperGradientPush):
    """Push-Sum without the de-bias division (u_bar = z instead of z / omega)."""

    def _average(self, u, w, time, graph, gledger, sledger):
        if self.averaging != "pushsum":
            return super()._average(u, w, time, graph, gledger, sledger)
        mixings = graph.mixing(time, self.pushsum_steps)
        result = push_sum(u, mixings, gledger)
        return result.z, w, time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class _Biased(HyperGradientPush):
    """Adds 1e-3 (times the scale of v^(0)) to every v^(m): a small systematic error."""

    def run(self, problem, x, state, rng, replicas=1, track_consensus=True):
        out = super().run(problem, x, state, rng, replicas, track_consensus)
        bias = 1e-3 * (1.0 + float(out.trajectory[0].abs().max()))
        return out._replace(trajectory=out.trajectory + bias)


@dataclasses.dataclass(frozen=True)
class _HalfSampler(HyperGradientPush):
    """Stochastic form whose minibatches come only from the first half of each sample set."""

    def run(self, problem, x, state, rng, replicas=1, track_consensus=True):
        original = problem.sample_batch

        def biased(rng_, clients, size):
            batch = original(rng_, clients, size)
            return type(batch)(batch.indices % max(1, problem.n_samples // 2))

        object.__setattr__(problem, "sample_batch", biased)
        try:
            return super().run(problem, x, state, rng, replicas, track_consensus)
        finally:
            object.__delattr__(problem, "sample_batch")


@dataclasses.dataclass(frozen=True)
class _ExtraNoise(HyperGradientPush):
    """Stochastic runs carry extra noise that ignores b and eta (e.g. an unscaled sample)."""

    amplitude = 10.0

    def run(self, problem, x, state, rng, replicas=1, track_consensus=True):
        out = super().run(problem, x, state, rng, replicas, track_consensus)
        if self.batch_size is None:
            return out
        noise = torch.as_tensor(rng.standard_normal(tuple(out.trajectory.shape[1:])))
        size = self.amplitude * (1.0 + float(out.trajectory[0].abs().max()))
        trajectory = out.trajectory.clone()
        trajectory[-1] += size * noise
        return out._replace(trajectory=trajectory)


@dataclasses.dataclass(frozen=True)
class _HugeNoise(_ExtraNoise):
    amplitude = 1000.0


@dataclasses.dataclass(frozen=True)
class _Leaky(HyperGradientPush):
    """Also gossips the hyperparameter-sized v (which must never leave a client)."""

    def run(self, problem, x, state, rng, replicas=1, track_consensus=True):
        out = super().run(problem, x, state, rng, replicas, track_consensus)
        if out.graph_ledger is not None:
            graph = self.graph(problem.n_clients)
            out.graph_ledger.gossip(out.trajectory[-1, 0], graph.mixing(0, 1))
        return out


@dataclasses.dataclass(frozen=True)
class _Flipped(HyperGradientPush):
    """Wrong sign of the indirect (Neumann) part: v = e + (e - v)."""

    def run(self, problem, x, state, rng, replicas=1, track_consensus=True):
        out = super().run(problem, x, state, rng, replicas, track_consensus)
        e = out.trajectory[0]
        return out._replace(trajectory=2 * e - out.trajectory)


def _swap(name, cls, **fixed):
    def make(**kw):
        est = get_estimator(name).build(**kw)
        if hasattr(est, "estimator"):  # the personalization algorithm
            inner = est.estimator
            return dataclasses.replace(est, estimator=cls(**{
                f.name: getattr(inner, f.name) for f in dataclasses.fields(inner)}))
        values = {f.name: getattr(est, f.name) for f in dataclasses.fields(est)}
        return cls(**{**values, **fixed})

    return make


def _biased_global(**kw):
    from testbed._decentralized.hgp import DecentralizedGradient

    @dataclasses.dataclass(frozen=True)
    class Biased(DecentralizedGradient):
        def per_client(self, problem, x):
            return super().per_client(problem, x) * (1 + 1e-4)

    return Biased("global")


PERTURBATIONS = {
    "hgp.lemma1.eta_invariance": _swap("hgp-exact-averaging", _Biased),
    "hgp.exact_averaging.error_identity": _swap("hgp-exact-averaging", _Biased),
    "hgp.lemma2.geometric_consensus": _swap("hgp", _NoDebias),
    "hgp.corollary1.explicit_bound": _swap("hgp", _Biased),
    "hgp.theorem1.rate_in_m": _swap("hgp-exact-averaging", _Biased),
    "hgp.theorem1.rate_in_s": _swap("hgp-static", _Biased),
    "hgp.theorem2.corrected": _swap("hgp-exact-averaging", _Flipped),
    "hgp.stochastic.unbiased": _swap("hgp-stochastic", _HalfSampler),
    "hgp.noise.sqrt_eta": _swap("hgp-stochastic", _ExtraNoise),
    "hgp.theorem1.high_probability_bound": _swap("hgp-stochastic", _HugeNoise),
    "hgp.negative_control.not_strongly_connected": _swap("hgp", HyperGradientPush,
                                                         averaging="exact"),
    "hgp.taxonomy.closed_forms": _biased_global,
    "hgp.communication.vector_messages": _swap("hgp", _Leaky),
    "hgp.influence.r2": _swap("hgp", _Flipped),
    "hgp.personalization.gain": _swap("hgp-personalization", _Flipped),
}
SLOW = {"hgp.noise.sqrt_eta",
        "hgp.theorem1.high_probability_bound", "hgp.personalization.gain",
        "hgp.negative_control.not_strongly_connected", "hgp.influence.r2",
        "hgp.theorem1.rate_in_s", "hgp.lemma1.eta_invariance"}


def test_every_holding_claim_has_a_perturbation():
    assert {c.id for c in CLAIM_DB if c.paper == "HGP" and c.expected == "holds"} == set(
        PERTURBATIONS)


@pytest.mark.parametrize("claim_id", [
    pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in sorted(PERTURBATIONS)])
def test_perturbed_estimator_fails_the_check(claim_id, tmp_path):
    claim = get_claim(claim_id)
    # Why a wider search for the consensus claim: dropping Push-Sum's de-bias weights is
    # invisible on graphs whose weights are doubly stochastic, so it takes more draws to reach
    # a directed graph where it shows.
    profile = WIDE if claim_id in NEEDS_WIDER_SEARCH else PROFILE
    assert_perturbation_detected(claim, PERTURBATIONS[claim_id], tmp_path, profile)


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
