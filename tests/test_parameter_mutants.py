"""The generated parameter perturbations (:mod:`theory_checks.parameter_mutants`, issue 32):
every parameter of every registered entry is perturbed or listed with its reason, a perturbed
estimator records the true value and runs the wrong one, and the two parameters no claim saw
before (FedMSA's momentum rho, stochastic HGP's Push-Sum steps S) are pinned by the exact claims
added for them.

Whether every generated perturbation is killed or declared equivalent is a mutation run
(``testbed mutate --set generated``, ``tox -e mutate``); the slow test at the end runs it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import PerClientQuadratic
from problems import QuadraticBilevel
from testbed.registry import BUILTIN
from testbed.registry import get_estimator
from theory_checks.claim import Case
from theory_checks.fedmsa import lemma_b5
from theory_checks.fednest import updates
from theory_checks.hgp import alg1
from theory_checks.hgp import recursion
from theory_checks.mutation import KILLED
from theory_checks.mutation import as_expected
from theory_checks.mutation import run_mutant
from theory_checks.parameter_mutants import EQUIVALENTS
from theory_checks.parameter_mutants import FIRST
from theory_checks.parameter_mutants import GENERATED
from theory_checks.parameter_mutants import NOT_GENERATED
from theory_checks.parameter_mutants import OPEN
from theory_checks.parameter_mutants import killing_claims
from theory_checks.parameter_mutants import parameter_kind
from theory_checks.parameter_mutants import unknown_equivalents
from theory_checks.runner import get_profile

BY_NAME = {m.name: m for m in GENERATED}


def _builder(name: str):
    (make,) = BY_NAME[name].builds.values()
    return make


def test_every_parameter_of_every_entry_is_perturbed_or_listed_with_a_reason():
    listed = {(s.entry, s.keyword.split(".")[0]) for s in NOT_GENERATED}
    whole = {s.entry for s in NOT_GENERATED if s.keyword == "*"}
    for info in BUILTIN:
        if info.name in whole:
            assert not killing_claims(info.name), f"{info.name} has claims: generate its set"
            continue
        for keyword, default in info.defaults.items():
            generated = [m for m in GENERATED if m.name.startswith(f"param.{info.name}.{keyword}.")]
            assert generated or (info.name, keyword) in listed, (info.name, keyword)
            if parameter_kind(keyword, default) is not None and (info.name, keyword) not in {
                (s.entry, s.keyword) for s in NOT_GENERATED
            }:
                # both directions, or the one the entry rejects listed with its error
                labels = {m.name.rsplit(".", 1)[1] for m in generated} | {
                    s.keyword.split(".")[1]
                    for s in NOT_GENERATED
                    if s.entry == info.name and s.keyword.startswith(f"{keyword}.")
                }
                assert labels in ({"half", "double"}, {"plus1", "minus1"}), (info.name, keyword)
    assert all(s.reason for s in NOT_GENERATED)


def test_the_equivalents_tables_name_generated_mutants_with_an_argument():
    assert unknown_equivalents() == []
    assert all(len(reason) > 40 for reason in EQUIVALENTS.values())
    for name, reason in EQUIVALENTS.items():
        assert BY_NAME[name].equivalent == reason


def test_a_perturbed_estimator_records_the_true_value_and_runs_the_wrong_one():
    """AID's inner GD: recorded T = 5, run T + 1 = 6 (the estimate of T = 6 exactly)."""
    torch.set_default_dtype(torch.float64)
    problem = QuadraticBilevel.random(2, 2, 3, 5.0, seed=1)
    built = _builder("param.aid-neumann.inner_steps.plus1")(inner_steps=5)
    assert built.inner.steps == 5  # what a check reads back

    def value(estimator):
        return estimator.estimate(
            problem, torch.zeros(2), estimator.init(problem), np.random.default_rng(0)
        ).value

    wrong = get_estimator("aid-neumann").build(inner_steps=6)
    right = get_estimator("aid-neumann").build(inner_steps=5)
    assert torch.equal(value(built), value(wrong))
    assert not torch.allclose(value(built), value(right))


def test_a_step_left_to_the_problem_is_resolved_then_perturbed():
    """AID-Neumann's lambda = None (1/L from the problem): the perturbed run steps 1/(2L),
    exactly the estimate of lambda = 1/(2L) given, while the built object records None."""
    torch.set_default_dtype(torch.float64)
    problem = QuadraticBilevel.random(2, 2, 3, 5.0, seed=1)
    built = _builder("param.aid-neumann.neumann_step_size.half")(inner_steps=None)
    assert built.linear_solver.step_size is None
    given = get_estimator("aid-neumann").build(
        inner_steps=None, neumann_step_size=0.5 / float(problem.constants().L)
    )

    def value(estimator):
        return estimator.estimate(
            problem, torch.zeros(2), estimator.init(problem), np.random.default_rng(0)
        ).value

    assert torch.equal(value(built), value(given))


def test_a_step_a_check_reads_back_is_the_recorded_one():
    """FedIHGP's ``steps(problem)`` asked by a check reports the recorded beta = 1/L (a
    reporting method), while its run steps 1/(2L)."""
    built = _builder("param.fedihgp.inner_step_size.half")()
    problem = QuadraticBilevel.random(2, 2, 3, 5.0, seed=1)
    assert built.steps(problem) == get_estimator("fedihgp").build().steps(problem)


def _fedmsa_case() -> Case:
    # additive noise only (hessian_noise = 0): the claim's hypothesis
    problem = QuadraticBilevel.random(2, 1, 1, 2.0, seed=3, n_samples=3, gradient_noise=1.0)
    return Case(problem, {"seed": 0, "momentum": 0.5, "rounds": 4})


def test_fedmsa_halved_momentum_is_killed_by_lemma_b5():
    """Issue 32: FedMSA with rho halved passed all 12 FedMSA "holds"; the exact second moment
    of the momentum error (Lemma B.5) sees it."""
    claim, case = lemma_b5.ERROR_SECOND_MOMENT, _fedmsa_case()
    assert "fedmsa.lemma_b5.error_second_moment" in killing_claims("fedmsa")
    right = lemma_b5.check_error_second_moment(claim, case, get_estimator("fedmsa").build)
    assert right.passed and right.measured <= 1e-12
    wrong = lemma_b5.check_error_second_moment(claim, case, _builder("param.fedmsa.momentum.half"))
    assert not wrong.passed and wrong.measured > 1e-2


def test_stochastic_hgp_pushsum_one_step_short_is_killed_by_alg1():
    """Issue 32: stochastic HGP running S - 1 Push-Sum steps passed all 4 of its claims; the
    exact Push-Sum operator (Algorithm 1) sees it."""
    claim = alg1.PUSHSUM_OPERATOR
    assert claim.id in killing_claims("hgp-stochastic")
    case = Case(
        PerClientQuadratic.random(4, 1, 1, seed=2),
        {"point_seed": 0, "graph_family": "random_directed", "graph_seed": 7, "pushsum_steps": 5},
    )
    right = alg1.check_pushsum_operator(claim, case, get_estimator("hgp-stochastic").build)
    assert right.passed
    wrong = alg1.check_pushsum_operator(
        claim, case, _builder("param.hgp-stochastic.pushsum_steps.minus1")
    )
    assert not wrong.passed and wrong.measured > 1e-3


def _iteration_case() -> Case:
    problem = QuadraticBilevel.random(
        3, 2, 2, 3.0, seed=4, hessian_heterogeneity=0.5, gradient_heterogeneity=1.0
    )
    return Case(
        problem,
        {
            "point_seed": 1,
            "inner_steps": 2,
            "neumann_terms": 3,
            "local_steps": (2, 3, 4),
            "beta_factor": 0.5,
            "alpha_factor": 0.5,
        },
    )


@pytest.mark.parametrize(
    ("claim", "entry", "mutants"),
    [
        (updates.FEDNEST_ITERATION, "fednest", ("param.fednest.outer_step_size.half",)),
        (
            updates.LFEDNEST_ITERATION,
            "lfednest",
            (
                "param.lfednest.inner_step_size.half",
                "param.lfednest.outer_step_size.half",
                "param.lfednest.local_steps.minus1",
            ),
        ),
    ],
)
def test_fednest_and_lfednest_survivors_are_killed_by_one_printed_iteration(claim, entry, mutants):
    """Issue 32: a halved FedNest alpha, a halved LFedNest beta or alpha and one LFedNest local
    step fewer passed every claim of their entries; one iteration against Algs. 1-4 (LFedNest:
    App. A) sees each."""
    case = _iteration_case()
    assert claim.id in killing_claims(entry)
    right = claim.check(claim, case, get_estimator(entry).build)
    assert right.passed and right.measured <= 1e-12
    for name in mutants:
        wrong = claim.check(claim, case, _builder(name))
        assert not wrong.passed and wrong.measured > 1e-3, name


def test_fedihgp_parameters_are_pinned_by_one_printed_estimate():
    """FedIHGP with N - 1 terms was killed only by a guard (a claim asking for N' = N - 1);
    its FedInn count, local steps and step were declared equivalent (its claims built it with
    T = 0). One estimate against Algs. 3-4 and eq. (13a) measures each."""
    claim, case = updates.FEDIHGP_CALL, _iteration_case()
    assert claim.id in killing_claims("fedihgp")
    right = claim.check(claim, case, get_estimator("fedihgp").build)
    assert right.passed and right.measured <= 1e-12
    for name in (
        "param.fedihgp.neumann_terms.minus1",
        "param.fedihgp.neumann_terms.plus1",
        "param.fedihgp.inner_steps.plus1",
        "param.fedihgp.inner_steps.minus1",
        "param.fedihgp.local_steps.plus1",
        "param.fedihgp.local_steps.minus1",
        "param.fedihgp.inner_step_size.half",
        "param.fedihgp.inner_step_size.double",
    ):
        wrong = claim.check(claim, case, _builder(name))
        # one local step more at beta / tau_i moves y^+ little (8e-4 here): 1e6 x the 1e-10
        assert not wrong.passed and wrong.measured > 1e-4, name


def test_static_hgp_one_iteration_more_or_less_is_killed_by_the_recursion():
    """Issue 32: hgp-static running M + 1 or M - 1 iterations passed its claims; eq. (10) with
    W^S after exactly M iterations sees both."""
    claim = recursion.STATIC_ITERATES
    assert claim.id in killing_claims("hgp-static")
    case = Case(
        PerClientQuadratic.random(4, 2, 2, seed=2),
        {
            "point_seed": 0,
            "graph_family": "static_undirected",
            "graph_seed": 3,
            "pushsum_steps": 2,
            "neumann_terms": 4,
            "eta_factor": 0.8,
        },
    )
    right = recursion.check_static_iterates(claim, case, get_estimator("hgp-static").build)
    assert right.passed and right.measured <= 1e-12
    for way in ("plus1", "minus1"):
        wrong = recursion.check_static_iterates(
            claim, case, _builder(f"param.hgp-static.neumann_terms.{way}")
        )
        assert not wrong.passed and wrong.measured > 1e-4, way


def test_fedihgp_minus_one_term_is_killed_by_a_measurement_not_a_guard():
    """The generated FedIHGP N - 1 runs its printed-estimate claim first: killed by the
    measured gap, not by the error a claim asking for N' = N - 1 raises."""
    record = run_mutant(BY_NAME["param.fedihgp.neumann_terms.minus1"], get_profile("fast"))
    assert record["killed_by"] == ["fednest.updates.fedihgp_call"]
    assert record["runs"][0]["verdict"] == "fails as stated" and record["runs"][0]["error"] is None
    for entry, claims in FIRST.items():
        assert set(claims) <= set(killing_claims(entry)), entry


def test_the_open_survivors_are_generated_and_not_declared_equivalent():
    assert set(OPEN) <= set(BY_NAME) and not set(OPEN) & set(EQUIVALENTS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "mutant",
    [
        pytest.param(m, marks=pytest.mark.xfail(reason=OPEN[m.name], strict=True))
        if m.name in OPEN
        else m
        for m in GENERATED
    ],
    ids=[m.name for m in GENERATED],
)
def test_generated_perturbation_is_killed_or_equivalent(mutant):
    """The generated set on the fast profile (``tox -e mutate`` runs it as one command); the
    :data:`~theory_checks.parameter_mutants.OPEN` survivors are expected to survive."""
    record = run_mutant(mutant, get_profile("fast"))
    assert as_expected(record), (
        f"{mutant.name}: {record['status']}"
        + (f" by {record['killed_by']}" if record["status"] == KILLED else "")
        + "; runs: "
        + "; ".join(f"{r['claim']}: {r['verdict']}" for r in record["runs"])
    )
