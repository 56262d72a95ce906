"""Bad inputs to the Python API: each gets a clear error (or a correct result), never a raw
traceback from deep inside torch, a wrong-shaped "hypergradient" or a silently divergent one.

Cases: outer points x of the wrong shape, dtype, type or with NaN (every registered estimator),
step sizes outside the stability region (Neumann, GD, ITD, AID-FP, FedIHGP), runs whose
iterates diverge, and bad problem and split constructor arguments.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import PerClientQuadratic
from problems import ProblemError
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems import RiskAverse
from problems.logistic import PerClientLogistic
from problems.workloads.splits import SplitError
from problems.workloads.splits import split_clients
from testbed import DivergenceError
from testbed import GradientDescent
from testbed import ImplicitDifferentiation
from testbed import InputError
from testbed import IterativeDifferentiation
from testbed import Neumann
from testbed import run_algorithm
from testbed.estimators.fixed_point import FixedPoint
from testbed.federation.context import FederatedContext
from testbed.registry import get_estimator

# One small problem with dim_x = 2 (float64, CPU), and one with dim_x = 1.
P2 = QuadraticBilevel.random(3, 2, 3, condition_number=5.0, seed=0)
P1 = QuadraticBilevel.random(2, 1, 2, condition_number=4.0, seed=1)
L2 = P2.constants().L

# ------------------------------------------------------------------------------ x checks

BAD_X = {
    "shape (1,) on dim_x=2": (P2, torch.zeros(1, dtype=torch.float64), "got shape \\(1,\\)"),
    "shape (3,) on dim_x=1": (P1, torch.zeros(3, dtype=torch.float64), "got shape \\(3,\\)"),
    "shape (2, 2) (stacked rows)": (P2, torch.zeros(2, 2, dtype=torch.float64), "got shape"),
    "scalar tensor": (P2, torch.tensor(0.0, dtype=torch.float64), "got shape \\(\\)"),
    "float32 on a float64 problem": (
        P2,
        torch.zeros(2, dtype=torch.float32),
        "got dtype torch.float32",
    ),
    "int64 tensor": (P2, torch.zeros(2, dtype=torch.int64), "got dtype torch.int64"),
    "numpy array": (P2, np.zeros(2), "got a numpy.ndarray; convert it"),
    "python list": (P2, [0.0, 0.0], "got a builtins.list; convert it"),
    "None": (P2, None, "got a builtins.NoneType"),
    "NaN entry": (
        P2,
        torch.tensor([float("nan"), 0.0], dtype=torch.float64),
        "1 NaN or infinite entry",
    ),
    "inf entries": (
        P2,
        torch.full((2,), float("inf"), dtype=torch.float64),
        "2 NaN or infinite entries",
    ),
}

# every kind of estimator entry point: classical, federated (FedIHGP, AggITD), decentralized
ESTIMATORS = ("aid-neumann", "aid-cg", "itd", "exact", "fedihgp", "aggitd", "hgp")


@pytest.mark.parametrize("case", BAD_X, ids=list(BAD_X))
def test_estimators_refuse_a_bad_x_with_what_they_expected(case):
    problem, x, message = BAD_X[case]
    for name in ESTIMATORS:
        est = get_estimator(name).build()
        with pytest.raises(InputError, match=message) as info:
            est.estimate(problem, x, est.init(problem), np.random.default_rng(0))
        text = str(info.value)
        assert text.count("\n") == 0, text
        if "NaN" not in message:
            assert f"shape ({problem.dim_x},), dtype torch.float64" in text, (name, text)


def test_a_valid_x_still_gives_the_exact_numbers():
    """The checks only read: a valid x gives the hypergradient as before (to the bit, by
    comparing with the same computation without the checks: the hook ``compute``)."""
    x = torch.tensor([0.3, -0.2], dtype=torch.float64)
    est = ImplicitDifferentiation(GradientDescent(30), Neumann(20))
    out = est.estimate(P2, x, est.init(P2), np.random.default_rng(0))
    raw = est.compute(P2, x, est.init(P2), np.random.default_rng(0))
    assert torch.equal(out.value, raw.value) and out.value.shape == (2,)


def test_outer_algorithm_step_refuses_a_bad_state_x():
    alg = get_estimator("fednest").build()
    ctx = FederatedContext(P2, np.random.default_rng(0))
    state = alg.init(P2)
    with pytest.raises(InputError, match="FedNest state.x must be a torch.Tensor of shape"):
        alg.step(ctx, state._replace(x=torch.zeros(5, dtype=torch.float64)))
    with pytest.raises(InputError, match="the state must have an outer iterate x"):
        alg.step(ctx, {"x": 1})


# ------------------------------------------------------------------------------ divergence


@pytest.mark.parametrize(
    ("label", "make", "factor"),
    [
        (
            "Neumann 2.5/L",
            lambda s: ImplicitDifferentiation(GradientDescent(20), Neumann(20, s)),
            2.5,
        ),
        (
            "Neumann 10/L",
            lambda s: ImplicitDifferentiation(GradientDescent(20), Neumann(20, s)),
            10.0,
        ),
        (
            "Neumann exactly 2/L",
            lambda s: ImplicitDifferentiation(GradientDescent(20), Neumann(20, s)),
            2.0,
        ),
        (
            "GD 3/L (AID)",
            lambda s: ImplicitDifferentiation(GradientDescent(20, s), Neumann(20)),
            3.0,
        ),
        ("ITD 5/L", lambda s: IterativeDifferentiation(GradientDescent(20, s)), 5.0),
        (
            "fixed point 4/L",
            lambda s: ImplicitDifferentiation(GradientDescent(20), FixedPoint(20, s)),
            4.0,
        ),
        ("FedIHGP neumann 3/L", lambda s: get_estimator("fedihgp").build(neumann_step_size=s), 3.0),
    ],
)
def test_steps_outside_the_stability_region_are_refused_with_the_bound(label, make, factor):
    est = make(factor / L2)
    x = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(
        DivergenceError,
        match=r"outside the stability region \(0, 2/L\) = "
        rf"\(0, {2 / L2:.6g}\)",
    ):
        est.estimate(P2, x, est.init(P2), np.random.default_rng(0))


def test_a_step_just_inside_the_region_is_accepted():
    est = ImplicitDifferentiation(GradientDescent(200, 1.9 / L2), Neumann(200, 1.9 / L2))
    x = torch.zeros(2, dtype=torch.float64)
    out = est.estimate(P2, x, est.init(P2), np.random.default_rng(0))
    # why 1e-6: 200 steps at rate |1 - 1.9 mu/L| with kappa = 5 leave ~1e-9 of the start
    assert torch.allclose(out.value, P2.exact_hypergradient(x), atol=1e-6)


def test_a_diverging_series_without_known_constants_is_refused():
    """A problem without constants(): the Neumann series itself reports the growth."""

    class NoConstants:
        def __init__(self, inner):
            self._p = inner

        def __getattr__(self, name):
            if name in ("constants", "exact_hypergradient"):
                raise AttributeError(name)
            return getattr(self._p, name)

    problem = NoConstants(P2)
    est = ImplicitDifferentiation(GradientDescent(0, 0.1), Neumann(200, 10.0 / L2))
    x = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(DivergenceError, match="Neumann: the series diverged"):
        est.estimate(problem, x, est.init(problem), np.random.default_rng(0))


def test_run_algorithm_stops_with_diverged_at_step_k():
    problem = QuadraticMinimax.random(2, 2, 2, 4.0, seed=0)
    alg = get_estimator("fednest-minimax").build(outer_step_size=1e6)
    with pytest.raises(DivergenceError, match=r"diverged at step \d+"):
        run_algorithm(alg, problem, 200, np.random.default_rng(0))


# ------------------------------------------------------------------------------ problems


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_clients": 2.5}, "n_clients must be an integer >= 1, got 2.5"),
        ({"n_clients": "3"}, "n_clients must be an integer >= 1, got '3'"),
        ({"n_clients": True}, "n_clients must be an integer"),
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"seed": 1.5}, "seed must be an integer >= 0"),
        ({"condition_number": 1e300}, "condition number 1e\\+300 is above 1e\\+12"),
        ({"condition_number": "10"}, "condition number must be a number >= 1, got '10'"),
        ({"condition_number": 0.5}, "condition number must be a finite number >= 1"),
        ({"dim_x": 2.0}, "dim_x must be an integer, got 2.0"),
        ({"heterogeneity": "high"}, "must be a number >= 0, got 'high'"),
    ],
)
def test_problem_constructors_name_the_bad_argument(kwargs, message):
    args = {"n_clients": 3, "dim_x": 2, "dim_y": 3, "condition_number": 5.0, "seed": 0, **kwargs}
    with pytest.raises(ProblemError, match=message):
        QuadraticBilevel.random(**args)


LABELS = np.arange(200) % 10


@pytest.mark.parametrize(
    ("scheme", "kwargs", "message"),
    [
        ("dirichlet", {"alpha": "0.5"}, "alpha must be a number, got '0.5'"),
        ("shards", {"shards_per_client": 2.5}, "shards_per_client must be an integer >= 1"),
        ("iid", {"seed": -1}, "seed must be an integer >= 0"),
        ("dominant", {"dominant_fraction": "most"}, "dominant_fraction must be a number"),
        ("long_tail", {"imbalance_ratio": float("nan")}, "imbalance_ratio must lie in"),
    ],
)
def test_split_parameters_of_the_wrong_type_are_named(scheme, kwargs, message):
    with pytest.raises(SplitError, match=message):
        split_clients(LABELS, 4, scheme, **{"seed": 0, **kwargs})


def test_split_with_two_and_a_half_clients_is_an_error():
    with pytest.raises(SplitError, match="n_clients must be a positive integer, got 2.5"):
        split_clients(LABELS, 2.5, "iid", seed=0)


# ------------------------------------------------------------------------------ issue 23


def test_hgp_inner_steps_outside_the_stability_region_are_refused():
    """HGP with an SGP step of 1 or 100 on a problem whose bound 2/L is 0.5 returned
    hypergradients of 1e9-1e10 (relative error 7e10, then 1e89) without a word; on a complete
    graph SGP is gradient descent on the mean with that step, so 2/L bounds every graph."""
    problem = PerClientQuadratic.random(4, 2, 3, 4.0, 11, outer_coupling=0.5)
    bound = 2.0 / problem.constants().L
    x = problem.initial_point()[0]
    for step in (1.0, 100.0):
        est = get_estimator("hgp").build(inner_steps=50, inner_step_size=step)
        with pytest.raises(
            DivergenceError,
            match=r"inner.step_size \(StochasticGradientPush\)"
            rf" = {step:g} is outside the stability "
            rf"region \(0, 2/L\) = \(0, {bound:.6g}\)",
        ):
            est.estimate(problem, x, est.init(problem), np.random.default_rng(0))
    inside = get_estimator("hgp").build(inner_steps=50, inner_step_size=0.9 * bound)
    value = inside.estimate(problem, x, inside.init(problem), np.random.default_rng(0)).value
    assert bool(torch.isfinite(value).all()) and float(value.norm()) < 10.0


def test_fedmsa_inner_steps_outside_the_stability_region_are_refused():
    """FedMSA with inner step 10 reached ||x|| = 4.4e10 in 3 steps."""
    alg = get_estimator("fedmsa").build(inner_step_size=10.0)
    with pytest.raises(
        DivergenceError,
        match=r"FedMSA.inner_step_size \(beta\) = 10 is outside "
        rf"the stability region \(0, {2 / L2:.6g}\)",
    ):
        run_algorithm(alg, P2, 3, np.random.default_rng(0))
    records = run_algorithm(get_estimator("fedmsa").build(), P2, 3, np.random.default_rng(0))
    assert float(records[-1].x.norm()) < 1.0  # the default step 0.1 < 2/L runs as before
    # the multi-level form tracks z^n - f_n(z^(n-1)), of unit slope: beta < 2
    compositional = LinearCompositional.random(2, (2, 3), seed=0)
    with pytest.raises(DivergenceError, match=r"outside the stability region \(0, 2\)"):
        run_algorithm(
            get_estimator("fedmsa-mco").build(inner_step_size=2.5),
            compositional,
            1,
            np.random.default_rng(0),
        )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: LinearCompositional.random(2, 2.5, seed=0),
            r"dims must be a sequence of integers >= 1, got 2\.5",
        ),
        (
            lambda: LinearCompositional.random(2, (2.5, 3), seed=0),
            r"dims must be 2 or more integers >= 1, got \(2\.5, 3\)",
        ),
        (
            lambda: LinearCompositional.random(2, "23", seed=0),
            "dims must be a sequence of integers",
        ),
        (
            lambda: LinearCompositional.random(2, (2, 3), seed=0, hessian_heterogeneity="x"),
            "hessian_heterogeneity must be a number >= 0",
        ),
        (lambda: RiskAverse(dim=2.5), "dim must be an integer"),
        (lambda: RiskAverse(n_examples=-4), "dimensions must be >= 1"),
        (lambda: PerClientLogistic.random(dim=2.5), "dim must be an integer"),
        (lambda: PerClientLogistic.random(n_train="x"), "n_train must be an integer"),
        (
            lambda: PerClientLogistic.random(concentration=-1.0),
            "concentration must be a positive number",
        ),
    ],
    ids=[
        "LinearCompositional dims 2.5",
        "dims (2.5, 3) built dimension 2",
        "dims a string",
        "heterogeneity a string",
        "RiskAverse dim 2.5",
        "RiskAverse n_examples -4",
        "PerClientLogistic dim 2.5",
        "PerClientLogistic n_train 'x'",
        "PerClientLogistic concentration -1",
    ],
)
def test_every_problem_constructor_names_a_bad_argument(build, message):
    with pytest.raises(ProblemError, match=message) as info:
        build()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["fednest", "fbo-aggitd", "aid-neumann", "itd", "fedihgp"])
def test_estimators_without_an_inner_variable_refuse_risk_averse_in_one_line(name):
    """FedNest and AID on RiskAverse (FedMSA's multi-level problem) raised AttributeError
    'initial_point'; FedMSA's multi-level form runs on it."""
    problem = RiskAverse(n_clients=2, dim=3, n_examples=20, seed=0)
    info = get_estimator(name)
    with pytest.raises(
        InputError, match="needs a problem with an inner variable y .*fedmsa-mco"
    ) as caught:
        if info.role == "algorithm":
            run_algorithm(info.build(), problem, 1, np.random.default_rng(0))
        else:
            info.build().init(problem)
    assert "\n" not in str(caught.value)
    run_algorithm(get_estimator("fedmsa-mco").build(), problem, 1, np.random.default_rng(0))


@pytest.mark.parametrize("name", ESTIMATORS)
def test_a_foreign_state_a_missing_rng_or_problem_are_named(name):
    other = QuadraticBilevel.random(3, 2, 4, condition_number=5.0, seed=1)  # dim_y 4, not 3
    est = get_estimator(name).build()
    x, rng = torch.zeros(2, dtype=torch.float64), np.random.default_rng(0)
    with pytest.raises(InputError, match="rng must be a numpy.random.Generator"):
        est.estimate(P2, x, est.init(P2), None)
    with pytest.raises(
        InputError, match="problem must be a testbed problem .* got a builtins.NoneType"
    ):
        est.estimate(None, x, est.init(P2), rng)
    with pytest.raises(InputError, match="problem must be a testbed problem"):
        est.init(None)
    if est.init(other) is not None:  # the exact estimator keeps no state
        with pytest.raises(
            InputError,
            match="the state does not fit problem "
            rf"{P2.id}: .*make the state with init\(problem\)",
        ):
            est.estimate(P2, x, est.init(other), rng)


def test_run_algorithm_names_a_foreign_state_a_missing_rng_or_problem():
    other = QuadraticBilevel.random(3, 2, 4, condition_number=5.0, seed=1)
    for name in ("fednest", "fbo-aggitd", "fedmsa"):
        alg = get_estimator(name).build()
        with pytest.raises(InputError, match="rng must be a numpy.random.Generator"):
            run_algorithm(alg, P2, 1, None)
        with pytest.raises(InputError, match="problem must be a testbed problem"):
            run_algorithm(alg, None, 1, np.random.default_rng(0))
        with pytest.raises(InputError, match="the state does not fit problem"):
            run_algorithm(alg, P2, 1, np.random.default_rng(0), state=alg.init(other))


def test_an_unknown_name_of_100000_characters_is_echoed_in_a_bounded_line():
    """get_claim / get_estimator / get_mutant echoed the whole name (a 100 kB line)."""
    from testbed.registry import get_estimator
    from theory_checks.mutants import get_mutant
    from theory_checks.registry import get_claim

    long = "x" * 100_000
    for lookup in (get_claim, get_estimator, get_mutant):
        with pytest.raises(KeyError) as info:
            lookup(long)
        text = str(info.value.args[0])
        assert len(text) < 400 and "(100,000 characters)" in text, text


@pytest.mark.parametrize(
    ("build", "family"),
    [
        (
            lambda: QuadraticBilevel.random(1, 10**6, 10**6, 10.0, 0.3, seed=0),
            "QuadraticBilevel.random",
        ),
        (
            lambda: QuadraticBilevel.random(4, 10, 10, 10.0, 0.3, seed=0, n_samples=10**7),
            "QuadraticBilevel.random",
        ),
        (
            lambda: QuadraticMinimax.random(1, 10**5, 10**5, 10.0, 0.3, seed=0),
            "QuadraticMinimax.random",
        ),
        (lambda: LinearCompositional.random(2, [10**5, 10**5], 0), "LinearCompositional.random"),
        (lambda: PerClientLogistic.random(10**4, 1000, 10**4, 10**4), "PerClientLogistic.random"),
        (lambda: PerClientQuadratic.random(10**4, 10**3, 10**3, 10.0), "PerClientQuadratic.random"),
        (lambda: RiskAverse(n_clients=2, dim=10**5, n_examples=10**6), "RiskAverse"),
        (
            lambda: QuadraticMinimax.fednest_synthetic(n_clients=10**3, dim=10**4),
            "QuadraticMinimax.fednest",
        ),
    ],
    ids=[
        "bilevel 1e6 dims",
        "bilevel 1e7 samples",
        "minimax",
        "compositional",
        "logistic",
        "per-client quadratic",
        "risk averse",
        "fednest synthetic",
    ],
)
def test_a_problem_too_large_is_refused_before_allocating(build, family):
    """``QuadraticBilevel.random(1, 10**6, 10**6, ...)`` raised numpy's MemoryError ("7.28
    TiB"): every drawn family refuses sizes past its limit, named, before allocating."""
    with pytest.raises(
        ProblemError,
        match=rf"{family}.*float64 numbers .* above the limit of "
        r"134,217,728 \(1 GiB\)",
    ):
        build()
