"""HGP's decentralized workloads on real data (problems/workloads/decentralized.py, influence.py,
personalization.py) and their experiments (testbed_app/experiments/hgp.py): the per-client
interface, the exact influence of the convex model, HGP against it, a few steps of each
experiment, exact resume, bad options."""

from __future__ import annotations

import dataclasses
import io
import math
from typing import Any

import numpy as np
import pytest
import torch

from problems import Batch
from problems import Problem
from problems.workloads.classifiers import build_classifier
from problems.workloads.decentralized import client_samples
from problems.workloads.personalization import PersonalizationProblem
from problems.workloads.splits import split_clients
from testbed.decentralized.influence_metrics import negative_influence_f1
from testbed.decentralized.influence_metrics import r_squared
from testbed.registry import get_estimator
from testbed_app.experiments.base import METRIC_KEYS
from testbed_app.experiments.hgp import HGPInfluenceExperiment
from testbed_app.experiments.hgp import HGPPersonalizationExperiment
from testbed_app.experiments.hgp import build_hgp_influence
from testbed_app.experiments.hgp import build_hgp_personalization
from tests._influence import DIGITS
from tests._influence import NETWORK
from tests._influence import experiment_config as _config
from tests._influence import influence_problem as _influence_problem


def _personalization_problem(mode: str) -> PersonalizationProblem:
    split = split_clients(DIGITS.train_y[:120], 3, "iid", seed=0)
    train, val = split.holdout(0.5, seed=0)
    net = build_classifier("logreg", DIGITS.input_shape, DIGITS.n_classes)
    data = [
        client_samples(
            DIGITS.train_x, DIGITS.train_y, part.indices, "t", dtype=torch.float64, device="cpu"
        )
        for part in (train, val)
    ]
    return PersonalizationProblem(
        net,
        data[0],
        data[1],
        mode=mode,  # type: ignore[arg-type]
        n_classes=10,
        learners=2,
        evaluation={"test": data[1]},
    )


# ------------------------------------------------------------------------------ interface


@pytest.mark.parametrize(
    "make",
    [
        lambda: _influence_problem(3, 8),
        lambda: _personalization_problem("pl"),
        lambda: _personalization_problem("mtl"),
    ],
    ids=["influence", "pl", "mtl"],
)
def test_problems_satisfy_the_per_client_interface(make: Any) -> None:
    problem = make()
    assert isinstance(problem, Problem)
    assert problem.dim_x == problem.n_clients * problem.dim_hyper
    n = problem.n_clients
    gen = torch.Generator().manual_seed(0)
    x = problem.initial_point()[0] + 0.1 * torch.randn(n, problem.dim_x, generator=gen)
    y = problem.initial_point()[1] + 0.1 * torch.randn(n, problem.dim_y, generator=gen)
    clients = torch.tensor([2, 0, 1, 2])
    xs, ys = x[clients], y[clients]
    stacked = problem.inner_loss(xs, ys, clients, None)
    # row-separability (problems/_base.py): row c is client clients[c] at its own iterate
    single = torch.cat(
        [
            problem.inner_loss(xs[c : c + 1], ys[c : c + 1], clients[c : c + 1], None)
            for c in range(4)
        ]
    )
    # Why 1e-12: the same float64 arithmetic on the same numbers, only batched differently
    torch.testing.assert_close(stacked, single, rtol=1e-12, atol=1e-12)
    # row c depends on row c only: perturbing row 0 leaves the others unchanged
    moved = ys.clone()
    moved[0] += 1.0
    changed = problem.inner_loss(xs, moved, clients, None)
    assert changed[0] != stacked[0]
    torch.testing.assert_close(changed[1:], stacked[1:], rtol=0.0, atol=0.0)
    # a minibatch holding each of the client's samples once is the full local loss
    size = int(problem.train.counts[0])
    assert bool((problem.train.counts == size).all())
    every = Batch(torch.arange(size).expand(4, -1).clone())
    torch.testing.assert_close(
        problem.inner_loss(xs, ys, clients, every), stacked, rtol=1e-12, atol=1e-12
    )
    batch = problem.sample_batch(np.random.default_rng(0), clients, 5)
    assert batch.indices.shape == (4, 5) and int(batch.indices.max()) < size
    assert problem.outer_loss(xs, ys, clients, None).shape == (4,)


def test_influence_problem_is_eq12_at_unit_weights() -> None:
    """At lambda = 1, g_i is the plain mean cross entropy + wd/2 ||y||^2 (eq. 12)."""
    problem = _influence_problem(2, 6)
    x, y = problem.initial_point()
    clients = torch.arange(2)
    inputs, labels, _ = problem.train.full(clients)
    logits = torch.stack([problem.net.apply(y, inputs[i]) for i in range(2)])
    expected = (
        torch.nn.functional.cross_entropy(
            logits.reshape(-1, 10), labels.reshape(-1), reduction="none"
        )
        .reshape(2, -1)
        .mean(1)
    )
    expected = expected + 0.5 * problem.weight_decay * float(y @ y)
    got = problem.inner_loss(x.expand(2, -1), y.expand(2, -1), clients, None)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ exact answers


def test_closed_form_hessian_equals_autodiff() -> None:
    problem = _influence_problem(2, 6)
    gen = torch.Generator().manual_seed(1)
    x = problem.initial_point()[0] * (0.5 + torch.rand(problem.dim_x, generator=gen))
    y = 0.3 * torch.randn(problem.dim_y, generator=gen)
    auto = torch.func.jacrev(torch.func.jacrev(lambda v: problem.total_inner(x, v)))(y)
    # Why 1e-12: two exact formulas for the same matrix; they differ by float64 round-off
    # in sums of a few dozen O(1) terms
    torch.testing.assert_close(problem.inner_hessian(x, y), auto, rtol=1e-12, atol=1e-12)


def test_exact_influence_equals_finite_differences_of_retraining() -> None:
    """GlobalGrad (HGP Sec. 3.3) against central differences of ``F(lambda) = sum_i f_i(y*)``."""
    problem = _influence_problem(2, 6)
    x = problem.initial_point()[0]
    exact = problem.exact_global_grad(x)
    step = 1e-4
    for client, sample in [(0, 0), (1, 3), (0, 5)]:
        e = torch.zeros_like(x)
        e[client * problem.dim_hyper + sample] = step
        plus, minus = x + e, x - e
        fd = (
            problem.total_outer(plus, problem.exact_inner_solution(plus))
            - problem.total_outer(minus, problem.exact_inner_solution(minus))
        ) / (2 * step)
        # Why 1e-6: central differences err by O(step^2) = 1e-8 times F's third derivative,
        # and Newton's ~1e-15 solve error divided by the step adds ~1e-11
        assert float(fd) == pytest.approx(float(exact[client, sample]), rel=1e-6, abs=1e-10)


def test_hgp_influence_equals_the_exact_influence() -> None:
    """HGP (Alg. 2, Push-Sum on the fully connected graph, exact inner solution) on the convex
    workload: the error is exactly ``J_i H_bar^{-1} (I - eta H_bar)^M c_bar`` (notes D2), and it
    is below the bound ``max_i ||J_i a||`` ... computed from the problem's own spectrum."""
    problem = _influence_problem(3, 5)
    x = problem.initial_point()[0]
    y_star = problem.exact_inner_solution(x)
    n = problem.n_clients
    h_bar = problem.inner_hessian(x, y_star) / n
    eig = torch.linalg.eigvalsh(h_bar)
    eta = 1.0 / float(eig.max())
    rho = 1.0 - eta * float(eig.min())
    # Why this M: rho^M <= 1e-9, so the truncation is far below the influences' spread
    M = math.ceil(math.log(1e-9) / math.log(rho))
    est = get_estimator("hgp").build(
        neumann_terms=M, pushsum_steps=1, neumann_step_size=eta, graph_family="fully_connected"
    )
    out = est.run(problem, x, est.init(problem), np.random.default_rng(0), track_consensus=False)
    v = out.trajectory[-1, 0]
    exact = problem.exact_global_grad(x, y_star)
    c_bar = torch.func.grad(lambda w: problem.total_outer(x, w))(y_star) / n
    power = torch.linalg.matrix_power(torch.eye(problem.dim_y) - eta * h_bar, M)
    a = torch.linalg.solve(h_bar, power @ c_bar)
    xs = x.expand(n, -1).clone().requires_grad_(True)
    ys = y_star.expand(n, -1).clone().requires_grad_(True)
    (gy,) = torch.autograd.grad(
        problem.inner_loss(xs, ys, torch.arange(n), None).sum(), (ys,), create_graph=True
    )
    (ja,) = torch.autograd.grad((gy * a).sum(), (xs,))
    identity = ja.reshape(n, n, -1)[torch.arange(n), torch.arange(n)]  # J_i a, own blocks
    scale = float(exact.norm())
    # Why 1e-9: v and the identity are the same finite sums evaluated two ways; M ~ 1e3 steps
    # of float64 round-off on O(1) numbers stay below 1e-12 relative
    assert float((v - exact - identity).norm()) <= 1e-9 * scale
    # the bound ||J_i|| ||H_bar^{-1}|| rho^M ||c_bar|| with ||J_i||_F (>= spectral norm)
    jac = torch.func.jacrev(
        lambda lam: torch.func.grad(lambda w: problem.total_inner(lam, w))(y_star)
    )(x)  # (dy, dx)
    bound = float(jac.norm()) * rho**M * float(c_bar.norm()) / float(eig.min())
    assert float((v - exact).norm()) <= bound + 1e-12 * scale
    assert r_squared(exact.flatten().numpy(), v.flatten().numpy()) > 1 - 1e-12


def test_r_squared_and_f1() -> None:
    actual = np.array([1.0, -2.0, 3.0, -1.0])
    assert r_squared(actual, actual) == 1.0
    assert r_squared(actual, np.full(4, actual.mean())) == 0.0
    assert math.isnan(r_squared(np.ones(3), np.ones(3)))
    assert negative_influence_f1(actual, actual) == 1.0
    # one of two negatives found, one false alarm: tp 1, fp 1, fn 1 -> 2/4
    assert negative_influence_f1(actual, np.array([-1.0, -2.0, 3.0, 1.0])) == 0.5


# ------------------------------------------------------------------------------ experiments


def _resumed_rows(make: Any, steps: int, split: int) -> tuple[list[Any], list[Any], Any]:
    straight = make()
    rows = [straight.step() for _ in range(steps)]
    first = make()
    resumed = [first.step() for _ in range(split)]
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    second = make()
    second.load_state_dict(torch.load(buffer, weights_only=False))
    resumed += [second.step() for _ in range(steps - split)]
    return rows, resumed, second


def _same_rows(a: list[dict[str, float]], b: list[dict[str, float]]) -> bool:
    return all(
        set(r) == set(s) and all((math.isnan(r[k]) and math.isnan(s[k])) or r[k] == s[k] for k in r)
        for r, s in zip(a, b, strict=True)
    )


def test_personalization_steps_metrics_and_resume() -> None:
    config = _config("hgp_personalization")
    rows, resumed, _ = _resumed_rows(lambda: build_hgp_personalization(config), 3, 1)
    assert _same_rows(rows, resumed)
    for row in rows:
        assert set(METRIC_KEYS) <= set(row)
        for method in ("hgp_pl", "hgp_mtl", "sgp"):
            assert 0.0 <= row[f"{method}_test_accuracy"] <= 1.0
    # step 1: lambda = 0 makes PL's mask 1, and HGP-PL's SGP run is SGP's (same seed, graphs)
    assert rows[0]["hgp_pl_test_accuracy"] == rows[0]["sgp_test_accuracy"]
    assert rows[0]["hgp_pl_test_loss"] == rows[0]["sgp_test_loss"]
    # gossip steps: T per SGP retraining, plus M S per HGP estimate (Alg. 2)
    T, M, S = 4, 3, 2
    for k, row in enumerate(rows, start=1):
        assert row["sgp_rounds"] == k * T
        assert row["hgp_pl_rounds"] == row["hgp_mtl_rounds"] == k * (T + M * S)
        assert row["rounds"] == row["hgp_pl_rounds"]
        assert row["floats_sent"] > row["sgp_floats_sent"] > 0


def test_personalization_lambda_moves_only_for_hgp() -> None:
    experiment = build_hgp_personalization(_config("hgp_personalization"))
    assert isinstance(experiment, HGPPersonalizationExperiment)
    experiment.step()
    moved = {run.name: float(run.lam.detach().abs().max()) for run in experiment.runs}
    assert moved["sgp"] == 0.0
    # Adam's first step moves every coordinate with a nonzero gradient by ~lr
    assert moved["hgp-pl"] > 0.0 and moved["hgp-mtl"] > 0.0


def test_influence_steps_metrics_and_resume() -> None:
    config = _config(
        "hgp_influence",
        algorithm={
            "neumann_terms": 60,
            "pushsum_steps": 4,
            "neumann_step_size": 1.0,
            "inner_steps": 60,
            "inner_step_size": 0.5,
        },
    )
    rows, resumed, finished = _resumed_rows(lambda: build_hgp_influence(config), 3, 2)
    assert _same_rows(rows, resumed)
    assert [r["n_retrained"] for r in rows] == [0.0, 2.0, 4.0]
    for row in rows:
        assert set(METRIC_KEYS) <= set(row)
        assert {"r2", "f1", "r2_exact", "hgp_relative_error"} <= set(row)
    assert math.isnan(rows[0]["r2"]) and not math.isnan(rows[-1]["r2"])
    # 60 SGP steps and M = 60: HGP is close to the exact influence but not exact
    assert 0.0 < rows[0]["hgp_relative_error"] < 1.0
    with pytest.raises(RuntimeError, match="complete"):
        finished.step()


def test_influence_on_a_network_retrains_by_gradient_descent() -> None:
    # caps far below what stationarity needs: this checks the plumbing, and that a cap that
    # stops a run is recorded as "not reached"
    config = _config(
        "hgp_influence",
        workload=NETWORK,
        run={"steps": 2},
    )
    experiment = build_hgp_influence(config)
    assert isinstance(experiment, HGPInfluenceExperiment)
    rows = [experiment.step() for _ in range(2)]
    assert math.isnan(rows[0]["r2_exact"])  # no exact influence for a network
    assert rows[1]["n_retrained"] == 2.0 and rows[1]["n_jitter"] == 1.0
    assert rows[0]["train_stationary"] == 0.0 and rows[0]["train_refine_steps"] == 5.0
    assert rows[1]["retrain_reached"] == 0.0 and rows[1]["retrain_steps_max"] == 3.0
    assert rows[0]["control_steps"] == 3.0
    # an MLP at a barely trained point: the averaged Hessian is indefinite, so HGP is damped by
    # |lambda_min| + 1/(eta M) and the Neumann step stays inside the stable range
    assert rows[0]["hessian_lambda_min"] < 0.0
    assert rows[0]["damping"] == pytest.approx(
        -rows[0]["hessian_lambda_min"] + rows[0]["damping_margin"], rel=1e-12
    )
    assert rows[0]["neumann_eta_lambda"] < 2.0


@pytest.mark.parametrize(
    ("kind", "changes", "match"),
    [
        ("hgp_personalization", {"workload": {"colour": 1}}, "no option"),
        ("hgp_personalization", {"workload": {"methods": ["hgp-pl", "fedavg"]}}, "methods"),
        ("hgp_personalization", {"workload": {"outer_data": "test"}}, "outer_data"),
        ("hgp_personalization", {"workload": {"test_fraction": 1.5}}, "test_fraction"),
        ("hgp_personalization", {"workload": {"pl_hyper_lr": -1.0}}, "pl_hyper_lr"),
        ("hgp_personalization", {"algorithm": {"inner_steps": None}}, "inner_steps"),
        ("hgp_influence", {"workload": {"top_k": 0}}, "top_k"),
        ("hgp_influence", {"run": {"steps": 9}}, "steps"),
        ("hgp_influence", {"workload": {"weight_decay": 0.0}}, "weight_decay"),
        ("hgp_influence", {"workload": {"retrain_step_size": "fast"}}, "retrain_step_size"),
        ("hgp_influence", {"workload": {"momentum": 1.0}}, "momentum"),
        ("hgp_influence", {"workload": {"jitter_count": -1}}, "jitter_count"),
        ("hgp_influence", {"workload": {"damping_margin": -0.1}}, "damping_margin"),
        ("hgp_influence", {"workload": {"train_grad_tol": 0.0}}, "train_grad_tol"),
        ("hgp_influence", {"algorithm": {"name": "aid-neumann"}}, "no parameter|not an HGP"),
    ],
)
def test_bad_options_raise(kind: str, changes: dict[str, Any], match: str) -> None:
    builder = build_hgp_personalization if kind == "hgp_personalization" else build_hgp_influence
    config = _config(kind, **changes)
    if changes.get("algorithm", {}).get("name") == "aid-neumann":
        config = dataclasses.replace(config, algorithm={"name": "aid-neumann"})
    with pytest.raises((ValueError, KeyError), match=match):
        builder(config)


def test_builders_declare_their_options() -> None:
    assert "methods" in build_hgp_personalization.OPTIONS
    assert "top_k" in build_hgp_influence.OPTIONS
    assert not build_hgp_personalization.OPTIONS & {"kind", "model"}
