"""The registries drive everything, so they must be complete and consistent."""

import pytest

import testbed
from testbed.algorithms.base import OuterAlgorithm
from testbed.estimators.base import Estimator
from testbed.registry import ESTIMATOR_DB
from testbed.registry import get_estimator
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import claims_of


def _concrete_subclasses(cls):
    for sub in cls.__subclasses__():
        if not getattr(sub, "__abstractmethods__", None):
            yield sub
        yield from _concrete_subclasses(sub)


def test_every_estimator_and_algorithm_class_is_registered():
    registered = {info.cls for info in ESTIMATOR_DB}
    for base in (Estimator, OuterAlgorithm):
        missing = [
            c.__name__
            for c in _concrete_subclasses(base)
            if c not in registered
            # deliberately wrong estimators: test doubles, the claims' perturbations (in
            # a paper's perturbations.py or in the result module that uses them) and the
            # mutation catalogue (theory_checks/<family>/mutants.py)
            and not c.__module__.startswith(("tests.", "theory_checks."))
        ]
        assert not missing, f"classes not in ESTIMATOR_DB: {missing}"


def test_every_entry_has_claims_or_a_reason():
    for info in ESTIMATOR_DB:
        assert claims_of(info.name) or info.no_claims_reason, (
            f"{info.name} has no claims and no reason"
        )


def test_registry_is_sorted_and_names_are_unique():
    names = [info.name for info in ESTIMATOR_DB]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert all(name == name.lower() for name in names)


def test_each_claim_estimator_link_is_written_once_and_resolves():
    """A claim names the estimators it is about; an entry enrolls only in claims that do not
    name it (a variant added later), so no link is written on both sides."""
    claims = {c.id: c for c in CLAIM_DB}
    for claim in CLAIM_DB:
        for name in claim.estimators:
            get_estimator(name)  # raises for an unknown name
    for info in ESTIMATOR_DB:
        for claim_id in info.enrolled_claims:
            assert claim_id in claims, f"{info.name} enrolls in unknown claim {claim_id}"
            assert info.name not in claims[claim_id].estimators, (
                f"{info.name} enrolls in {claim_id}, which already names it"
            )
    assert [c.id for c in claims_of("aid-fp")] == sorted(get_estimator("aid-fp").enrolled_claims)


def test_unknown_estimator_and_parameter_are_clear_errors():
    with pytest.raises(KeyError, match="no estimator named 'nope'"):
        get_estimator("nope")
    with pytest.raises(ValueError, match="has no parameter"):
        get_estimator("itd").build(neumann_terms=3)


def test_defaults_build_an_estimator_or_algorithm():
    for info in ESTIMATOR_DB:
        expected = testbed.Estimator if info.role == "estimator" else OuterAlgorithm
        assert isinstance(info.build(), expected), info.name
