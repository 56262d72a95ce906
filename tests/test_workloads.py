"""MLP/CNN workloads: the Problem contract, exact hypergradients in float64, and the registered
algorithms running unchanged on them in float32.

Every workload here is tiny (digits, a few clients, an MLP with a handful of hidden units) so the
file stays within a few seconds; the tolerances are explained where they are used.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import Problem
from problems.workloads import build_workload
from problems.workloads import load_dataset
from problems.workloads import workload_options
from problems.workloads.models import ModelError
from problems.workloads.models import build_network
from problems.workloads.models import mlp
from problems.workloads.registry import WorkloadError
from testbed.algorithms.base import run_algorithm
from testbed.estimators.base import InnerState
from testbed.estimators.fednest import FedIHGP
from testbed.oracles import Oracles
from testbed.registry import get_estimator
from tests._tol import FINITE_DIFFERENCE_RTOL
from tests._tol import IDENTITY_RTOL

KINDS = ("hyper_representation", "loss_tuning")


@pytest.fixture(scope="module")
def digits():
    # 120 training images: 4 clients of 30, so every test below is a few ms per oracle call.
    return load_dataset("digits", limit=120)


def tiny(digits, kind, dtype=torch.float64, hidden=6, n_clients=4, seed=0, **options):
    if kind == "loss_tuning":
        # a mild tail (ratio 0.3) keeps every class present in a 120-image pool
        options = {"imbalance_ratio": 0.3, "inner_regularization": 0.1, **options}
    network = mlp(digits.input_shape, digits.n_classes, hidden=(hidden,))
    return build_workload(
        kind,
        digits,
        {"scheme": "iid", "n_clients": n_clients},
        model=network,
        seed=seed,
        dtype=dtype,
        **options,
    )


def rows(problem, seed):
    gen = torch.Generator().manual_seed(seed)
    M = problem.n_clients
    x0, y0 = problem.initial_point()
    x = x0 + 0.1 * torch.randn(M, problem.dim_x, generator=gen, dtype=x0.dtype)
    y = y0 + 0.1 * torch.randn(M, problem.dim_y, generator=gen, dtype=y0.dtype)
    return x, y


# ------------------------------------------------------------------------- the Problem contract


@pytest.mark.parametrize("kind", KINDS)
def test_workload_is_a_problem_with_seeded_start(digits, kind):
    p = tiny(digits, kind)
    assert isinstance(p, Problem)
    assert p.kind == "bilevel" and p.n_clients == 4
    x0, y0 = p.initial_point()
    assert x0.shape == (p.dim_x,) and y0.shape == (p.dim_y,) and x0.dtype == torch.float64
    again = tiny(digits, kind)
    assert torch.equal(again.initial_point()[1], y0)
    assert again.description == p.description
    assert not torch.equal(tiny(digits, kind, seed=1).initial_point()[1], y0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("batched", [False, True])
def test_vmap_rows_equal_a_per_client_loop(digits, kind, batched):
    """Row c of the batched losses is client clients[c]'s loss at its own (x_c, y_c), computed
    one client at a time; clients may repeat. Equal up to float64 summation order."""
    p = tiny(digits, kind)
    x, y = rows(p, 1)
    clients = torch.tensor([2, 0, 2, 3])
    batch = p.sample_batch(np.random.default_rng(0), clients, 5) if batched else None
    for loss in (p.outer_loss, p.inner_loss):
        stacked = loss(x, y, clients, batch)
        for c in range(4):
            one = None if batch is None else type(batch)(batch.indices[c : c + 1])
            single = loss(x[c : c + 1], y[c : c + 1], clients[c : c + 1], one)
            torch.testing.assert_close(stacked[c : c + 1], single, rtol=IDENTITY_RTOL, atol=0.0)


@pytest.mark.parametrize("kind", KINDS)
def test_row_depends_only_on_its_own_iterates(digits, kind):
    """Changing row j of x and y changes row j of the losses and no other row, bit for bit."""
    p = tiny(digits, kind)
    x, y = rows(p, 2)
    clients = torch.arange(4)
    x2, y2 = x.clone(), y.clone()
    x2[1] += 1.0
    y2[1] += 1.0
    for loss in (p.outer_loss, p.inner_loss):
        before, after = loss(x, y, clients, None), loss(x2, y2, clients, None)
        assert torch.equal(before[[0, 2, 3]], after[[0, 2, 3]])
        assert before[1] != after[1]


def test_minibatch_mean_is_unbiased_over_all_index_pairs(digits):
    """Each batch index k in {0..n_i m_i - 1} picks the pair (k mod n_i, k div n_i): averaging the
    batch loss over every k gives the full local objective exactly (float64 round-off)."""
    p = tiny(digits, "hyper_representation")
    x, y = rows(p, 3)
    clients = torch.tensor([1])
    pairs = int(p.data.train.counts[1] * p.data.val.counts[1])
    every = type(p.sample_batch(np.random.default_rng(0), clients, 1))(torch.arange(pairs)[None, :])
    for loss in (p.outer_loss, p.inner_loss):
        torch.testing.assert_close(
            loss(x[1:2], y[1:2], clients, every),
            loss(x[1:2], y[1:2], clients, None),
            rtol=IDENTITY_RTOL,
            atol=0.0,
        )


@pytest.mark.parametrize("kind", KINDS)
def test_evaluate_accepts_vectors_and_rows(digits, kind):
    p = tiny(digits, kind)
    x0, y0 = p.initial_point()
    metrics = p.evaluate(x0, y0)
    assert set(metrics) == {
        "test_accuracy",
        "test_loss",
        "test_balanced_accuracy",
        "outer_loss",
        "inner_loss",
    }
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    # rows are averaged: two copies of y0 are the model y0
    assert p.evaluate(x0, y0.expand(2, -1)) == metrics
    f, g = p.objectives(x0, y0)
    clients = torch.arange(p.n_clients)
    xs, ys = x0.expand(4, -1), y0.expand(4, -1)
    assert f == float(p.outer_loss(xs, ys, clients, None).mean())
    assert g == float(p.inner_loss(xs, ys, clients, None).mean())


def test_to_moves_dtype_and_keeps_values(digits):
    p = tiny(digits, "loss_tuning")
    q = p.to("cpu", torch.float32)
    assert q.initial_point()[0].dtype == torch.float32
    assert q.class_weights.dtype == torch.float32 and q.data.train.inputs.dtype == torch.float32
    assert p.initial_point()[0].dtype == torch.float64  # the original is untouched
    x, y = rows(p, 4)
    clients = torch.arange(4)
    # float32 evaluation of the same losses: single-precision round-off of sums of O(1) terms
    torch.testing.assert_close(
        q.inner_loss(x.float(), y.float(), clients, None).double(),
        p.inner_loss(x, y, clients, None),
        rtol=1e-5,
        atol=1e-5,
    )


def test_cnn_rows_equal_a_per_client_loop(digits):
    network = build_network("cnn", digits.input_shape, digits.n_classes)
    p = build_workload(
        "hyper_representation",
        digits,
        {"scheme": "iid", "n_clients": 3},
        model=network,
        dtype=torch.float64,
    )
    x, y = rows(p, 5)
    clients = torch.arange(3)
    stacked = p.inner_loss(x, y, clients, None)
    for c in range(3):
        torch.testing.assert_close(
            stacked[c : c + 1],
            p.inner_loss(x[c : c + 1], y[c : c + 1], clients[c : c + 1], None),
            rtol=IDENTITY_RTOL,
            atol=0.0,
        )


# ------------------------------------------------------------------------- exact hypergradients


def global_loss(problem, loss, x, y):
    M = problem.n_clients
    return loss(x.expand(M, -1), y.expand(M, -1), torch.arange(M), None).mean()


def global_inner_gradient(problem, x, y):
    return Oracles(problem).grad_inner(x, y, torch.arange(problem.n_clients)).mean(dim=0)


def global_inner_hessian(problem, x, y):
    """``H = mean_i grad^2_y g_i`` column by column in one batched oracle call: row ``(i, k)``
    is client i's Hessian-vector product with ``e_k`` (the workload's row-separability)."""
    M, dy = problem.n_clients, problem.dim_y
    clients = torch.arange(M).repeat_interleave(dy)
    basis = torch.eye(dy, dtype=y.dtype).repeat(M, 1)
    columns = Oracles(problem).hvp_inner(x, y, basis, clients).reshape(M, dy, dy).mean(dim=0)
    return 0.5 * (columns + columns.T)  # symmetric up to round-off; symmetrise for eigvalsh


def newton_inner_solution(problem, x, y):
    """``y*(x)`` of a strongly convex inner problem by damped Newton (dense Hessian, float64)."""

    def g(v):
        return float(global_loss(problem, problem.inner_loss, x, v))

    # Why 50: damped Newton on a smooth strongly convex function converges quadratically once
    # close (about 10 steps from these starts); the loop stops when the gradient is at round-off.
    for _ in range(50):
        grad = global_inner_gradient(problem, x, y)
        if float(grad.norm()) < 1e-13:
            return y
        step = torch.linalg.solve(global_inner_hessian(problem, x, y), grad)
        t, value = 1.0, g(y)
        while g(y - t * step) > value and t > 1e-8:
            t /= 2
        y = y - t * step
    raise AssertionError(f"Newton did not converge: |grad g| = {float(grad.norm()):.2e}")


def implicit_hypergradient(problem, x, y_star):
    """``grad h = grad_x f - J H^{-1} grad_y f`` at ``y*`` (implicit function theorem)."""
    oracles, clients = Oracles(problem), torch.arange(problem.n_clients)
    fx, fy = (part.mean(dim=0) for part in oracles.grad_outer(x, y_star, clients))
    hessian = global_inner_hessian(problem, x, y_star)
    w = torch.linalg.solve(hessian, fy)
    cross = oracles.jvp_inner_xy(x, y_star, w, clients).mean(dim=0)
    return fx - cross, hessian, fy, fx


def solvable(digits, kind):
    """Tiny workloads whose inner problem is strongly convex, so ``y*(x)`` is unique:
    hyper-representation with the squared regulariser (convex in the linear head), loss tuning
    with a linear model and ``lambda > 0``."""
    if kind == "hyper_representation":
        return tiny(digits, kind, hidden=4, n_clients=3)
    network = build_network("linear", digits.input_shape, digits.n_classes)
    return build_workload(
        kind,
        digits,
        {"scheme": "iid", "n_clients": 3},
        model=network,
        dtype=torch.float64,
        imbalance_ratio=0.3,
        inner_regularization=0.1,
    )


@pytest.fixture(scope="module")
def solved(digits):
    """Per kind: the workload, ``x = x0``, ``y*(x)`` and the implicit hypergradient's parts
    (computed once: the dense Newton solve is the expensive step of this file)."""
    cache = {}

    def get(kind):
        if kind not in cache:
            p = solvable(digits, kind)
            x, y = p.initial_point()
            y_star = newton_inner_solution(p, x, y)
            cache[kind] = (p, x, y_star, *implicit_hypergradient(p, x, y_star))
        return cache[kind]

    return get


def chord_inner_solution(problem, x, y, hessian):
    """``y*(x)`` near a solved point by the chord method: Newton steps with the fixed Hessian
    of the solved point. Its contraction factor is ``||I - H0^{-1} H||``, O(perturbation), so a
    1e-4 move of x gains about four digits per step."""
    factors = torch.linalg.lu_factor(hessian)
    for _ in range(20):
        grad = global_inner_gradient(problem, x, y)
        if float(grad.norm()) < 1e-13:
            return y
        y = y - torch.linalg.lu_solve(*factors, grad[:, None])[:, 0]
    raise AssertionError(f"chord iteration did not converge: |grad g| = {float(grad.norm()):.2e}")


@pytest.mark.parametrize("kind", KINDS)
def test_hypergradient_equals_finite_differences_of_the_outer_objective(solved, kind):
    """``<grad h(x), d>`` from the implicit formula equals central differences of
    ``h(x) = f(x, y*(x))`` with ``y*`` solved to round-off, along two random directions."""
    p, x, y_star, grad_h, hessian, _, fx = solved(kind)

    def h(u):
        return global_loss(p, p.outer_loss, u, chord_inner_solution(p, u, y_star, hessian))

    gen = torch.Generator().manual_seed(0)
    for _ in range(2):
        d = torch.randn(p.dim_x, generator=gen)
        d /= d.norm()
        # Why eps = 1e-4 and FINITE_DIFFERENCE_RTOL (1e-6): the central difference has error
        # eps^2 |h^(3)| / 6 ~ 1e-9 here; the solves stop at |grad g| < 1e-13, so y is within
        # 1e-13 / mu = 1e-12 of y* (mu = lambda = 0.1) and h within ~1e-12, i.e. ~1e-8 after
        # dividing by 2 eps. 1e-6 relative to ||grad h|| leaves a margin of 100 over both.
        eps = 1e-4
        fd = (h(x + eps * d) - h(x - eps * d)) / (2 * eps)
        assert abs(float(fd - grad_h @ d)) <= FINITE_DIFFERENCE_RTOL * float(grad_h.norm())
    if kind == "loss_tuning":
        # f depends on x only through y*(x): the direct part is exactly zero (FedMSA Sec. 4)
        assert torch.equal(fx, torch.zeros_like(fx))


@pytest.mark.parametrize("kind", KINDS)
def test_fedihgp_on_a_workload_has_the_exact_neumann_bias(solved, kind):
    """FedIHGP (deterministic truncation, full participation) at y = y* returns
    ``grad h + J H^{-1} A^{N+1} grad_y f`` with ``A = I - lambda H`` (FedNest Lemma 2.2),
    an identity in exact arithmetic; checked to float64 round-off."""
    p, x, y_star, grad_h, hessian, fy, _ = solved(kind)
    L = float(torch.linalg.eigvalsh(hessian).max())
    N = 30
    est = FedIHGP(
        inner_steps=0,
        neumann_terms=N,
        neumann_step_size=1.0 / L,
        truncation="deterministic",
        inner_step_size=1.0,
    )
    out = est.estimate(p, x, InnerState(y_star), np.random.default_rng(0))
    A = torch.eye(p.dim_y) - hessian / L
    residual = torch.linalg.solve(hessian, torch.linalg.matrix_power(A, N + 1) @ fy)
    bias = Oracles(p).jvp_inner_xy(x, y_star, residual, torch.arange(p.n_clients)).mean(dim=0)
    # Why IDENTITY_RTOL: both sides are the same finite sums evaluated in float64 in a different
    # order (N + 1 Hessian-vector products against dense matrix powers), kappa below 1e3.
    torch.testing.assert_close(
        out.value, grad_h + bias, rtol=IDENTITY_RTOL, atol=IDENTITY_RTOL * float(grad_h.norm())
    )
    assert out.calls.comm_rounds == (N + 1) + 1


# ------------------------------------------------------------------------- algorithms, float32

# Step sizes for the tiny float32 workloads: the inner Hessians of these networks stay below
# ~2 (standardised digits, 8 hidden units), so 0.1 is a stable step for every level.
STEPS = {"inner_step_size": 0.1, "outer_step_size": 0.1, "neumann_step_size": 0.1}
ALGORITHMS = {
    "fednest": {**STEPS, "inner_steps": 2, "neumann_terms": 3, "local_steps": 2},
    "fednest-sgd": {**STEPS, "inner_steps": 2, "neumann_terms": 3, "local_steps": 2},
    "lfednest": {**STEPS, "inner_steps": 2, "neumann_terms": 3, "local_steps": 2},
    "lfednest-svrg": {**STEPS, "inner_steps": 2, "neumann_terms": 3, "local_steps": 2},
    "fbo-aggitd": {**STEPS, "inner_steps": 3, "local_steps": 2},
    "fbo-aggitd-sgd": {**STEPS, "inner_steps": 3, "local_steps": 2},
    "fedmsa": {"outer_step_size": 0.1, "inner_step_size": 0.1, "local_steps": 2},
    "fedmsa-generalised": {"outer_step_size": 0.1, "inner_step_size": 0.1, "local_steps": 2},
}


def inner_iterate(state, problem):
    """The inner model of an algorithm's state (FedMSA keeps ``Z = [w; v]``)."""
    return state.y if hasattr(state, "y") else state.Z[: problem.dim_y]


def state_tensors(state):
    values = state._asdict().values() if hasattr(state, "_asdict") else vars(state).values()
    return [v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()]


@pytest.fixture(scope="module")
def float32_workloads(digits):
    return {kind: tiny(digits, kind, dtype=torch.float32, hidden=8) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_registered_algorithm_runs_unchanged_in_float32(float32_workloads, kind, name):
    """Each registered server-based algorithm runs on the workload as it is, keeps float32
    everywhere, and lowers the outer loss f(x, y) within four iterations (seeded)."""
    p = float32_workloads[kind]
    algorithm = get_estimator(name).build(**ALGORITHMS[name])
    records = run_algorithm(algorithm, p, 4, np.random.default_rng(0))
    first, last = records[0].state, records[-1].state
    for tensor in state_tensors(last):
        assert tensor.dtype == torch.float32 and bool(torch.isfinite(tensor).all())
    f0, _ = p.objectives(first.x, inner_iterate(first, p))
    f4, _ = p.objectives(last.x, inner_iterate(last, p))
    assert f4 < f0
    assert not torch.equal(last.x, first.x)  # the outer variable was updated
    assert records[-1].calls.comm_rounds > 0


def test_same_seed_same_numbers_under_partial_participation(float32_workloads):
    p = float32_workloads["hyper_representation"]
    algorithm = get_estimator("fednest").build(
        **ALGORITHMS["fednest"], participation=2, batch_size=4
    )
    runs = [run_algorithm(algorithm, p, 2, np.random.default_rng(7)) for _ in range(2)]
    assert torch.equal(runs[0][-1].x, runs[1][-1].x)
    assert torch.equal(runs[0][-1].state.y, runs[1][-1].state.y)
    other = run_algorithm(algorithm, p, 2, np.random.default_rng(8))
    assert not torch.equal(other[-1].x, runs[0][-1].x)


# ------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kind", "split", "options", "message"),
    [
        (
            "hyper_representation",
            {"scheme": "iid", "n_clients": 4},
            {"learning_rate": 0.1},
            "unknown option",
        ),
        ("nope", {"scheme": "iid", "n_clients": 4}, {}, "unknown workload"),
        ("hyper_representation", {"scheme": "iid"}, {}, "lacks"),
        ("hyper_representation", {"scheme": "iid", "n_clients": 4, "seed": 3}, {}, "seed"),
        ("hyper_representation", {"scheme": "iid", "n_clients": 4, "bogus": 1}, {}, "bad split"),
        (
            "hyper_representation",
            {"scheme": "iid", "n_clients": 4},
            {"validation_fraction": 1.0},
            "validation_fraction",
        ),
        (
            "hyper_representation",
            {"scheme": "iid", "n_clients": 4},
            {"regularization": "l1"},
            "regularization",
        ),
        (
            "hyper_representation",
            {"scheme": "iid", "n_clients": 4},
            {"regularization_strength": -1.0},
            "regularization_strength",
        ),
        ("hyper_representation", {"scheme": "iid", "n_clients": 120}, {}, "no training or no val"),
        ("loss_tuning", {"scheme": "long_tail", "n_clients": 4}, {}, "long tail itself"),
        (
            "loss_tuning",
            {"scheme": "iid", "n_clients": 4},
            {"imbalance_ratio": 1e-4},
            "no sample on any client",
        ),
    ],
)
def test_bad_workload_requests_raise_clear_errors(digits, kind, split, options, message):
    with pytest.raises(WorkloadError, match=message):
        build_workload(kind, digits, split, **options)


def test_bad_model_dtype_and_device_raise(digits):
    split = {"scheme": "iid", "n_clients": 4}
    with pytest.raises(ModelError, match="unknown model"):
        build_workload("hyper_representation", digits, split, model="resnet")
    with pytest.raises(WorkloadError, match="no representation layers"):
        build_workload("hyper_representation", digits, split, model="linear")
    with pytest.raises(WorkloadError, match="dtype"):
        build_workload("hyper_representation", digits, split, dtype="int8")
    if not torch.cuda.is_available():
        with pytest.raises(WorkloadError, match="no CUDA GPU"):
            build_workload("hyper_representation", digits, split, device="cuda")
    with pytest.raises(ModelError, match="input_shape"):
        mlp((64,), 10)
    with pytest.raises(ModelError, match="4x4"):
        build_network("cnn", (1, 3, 3), 10)


def test_split_object_and_options_listing(digits):
    from problems.workloads import split_clients

    split = split_clients(digits.train_y, 4, "shards", seed=0)
    p = build_workload("loss_tuning", digits, split, imbalance_ratio=None)
    assert p.description["split"]["scheme"] == "shards"
    with pytest.raises(WorkloadError, match="imbalance_ratio=None"):
        build_workload("loss_tuning", digits, split)
    assert set(workload_options("loss_tuning")) >= {"imbalance_ratio", "validation_fraction"}
    histogram = np.array(p.description["split"]["label_histogram"])
    assert histogram.shape == (4, 10) and histogram.sum() == split.sizes.sum()


def test_losses_reject_mismatched_rows_and_bad_batches(digits):
    from problems import ProblemError

    p = tiny(digits, "hyper_representation")
    x, y = rows(p, 0)
    with pytest.raises(ProblemError, match="expected x"):
        p.outer_loss(x[:2], y, torch.arange(4), None)
    with pytest.raises(ProblemError, match="batch size"):
        p.sample_batch(np.random.default_rng(0), torch.arange(4), 0)
    with pytest.raises(ProblemError, match="shape"):
        p.evaluate(x[:, :3], y)
