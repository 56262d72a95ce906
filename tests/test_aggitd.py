"""AggITD (Xiao & Ji 2023, Alg. 1) and FBO-AggITD (Alg. 3): exact centralized reproductions,
client-permutation invariance, exact ledger counts, message sizes, seeding and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from testbed import FederatedContext
from testbed import InnerState
from testbed import run_algorithm
from testbed.algorithms.aggitd import AggITDState
from testbed.algorithms.aggitd import FBOAggITD
from testbed.estimators.aggitd import AggITD
from testbed.registry import get_estimator
from tests._tol import IDENTITY_RTOL


def _problem(m=4, dx=3, dy=4, kappa=6.0, seed=0, **kw):
    kw.setdefault("hessian_heterogeneity", 0.4)
    kw.setdefault("gradient_heterogeneity", 1.5)
    return QuadraticBilevel.random(m, dx, dy, kappa, seed=seed, **kw)


def _close(a, b, scale=1.0):
    assert float((a - b).norm()) <= IDENTITY_RTOL * (scale + float(b.norm()))


def _centralized_trajectory(p, x, y0, steps, beta, tau):
    """One client: FedSVRG is tau plain GD steps of size beta / tau (the control variate
    cancels), written out with the problem's arrays."""
    A, B, b = p.A[0], p.B[0], p.b[0]
    ys = [y0]
    for _ in range(steps):
        w = ys[-1]
        for _ in range(tau):
            w = w - (beta / tau) * (A @ w - B @ x - b)
        ys.append(w)
    return ys


@pytest.mark.parametrize("n,tau", [(0, 1), (3, 1), (5, 3)])
def test_one_client_mean_over_q_is_the_centralized_neumann_type_sum(n, tau):
    p = _problem(m=1)
    x, y0 = torch.randn(3, generator=torch.Generator().manual_seed(1)), torch.ones(4)
    lam = beta = 1.0 / p.constants().L
    ys = _centralized_trajectory(p, x, y0, n, beta, tau)
    H, J = p.A[0], -p.B[0].T
    total = torch.zeros(4)
    for y in ys:  # sum_Q prod_{t=N}^{Q+1} (I - lam H) grad_y f(y^Q), Horner form
        total = (torch.eye(4) - lam * H) @ total + p.outer_grad_y(x, y)
    expected = p.outer_grad_x(x, ys[-1]) - lam * J @ total
    params = dict(inner_steps=n, local_steps=tau, inner_step_size=beta, neumann_step_size=lam)
    values = [
        AggITD(index=q, **params).estimate(p, x, InnerState(y0), np.random.default_rng(0)).value
        for q in range(n + 1)
    ]
    _close(torch.stack(values).mean(0), expected)
    mean = AggITD(expectation=True, **params).estimate(
        p, x, InnerState(y0), np.random.default_rng(0)
    )
    _close(mean.value, expected)
    _close(mean.state.y, ys[-1])


@pytest.mark.parametrize("n", [0, 4, 12])
def test_at_the_exact_inner_solution_the_mean_is_aid_neumann_with_n_plus_1_terms(n):
    p = _problem()
    x = torch.randn(3, generator=torch.Generator().manual_seed(2))
    lam = 1.0 / p.constants().L
    aid = get_estimator("aid-neumann").build(
        inner_steps=None, neumann_terms=n + 1, neumann_step_size=lam
    )
    reference = aid.estimate(p, x, aid.init(p), np.random.default_rng(0)).value
    est = AggITD(inner_steps=n, local_steps=2, neumann_step_size=lam, expectation=True)
    out = est.estimate(p, x, InnerState(p.exact_inner_solution(x)), np.random.default_rng(0))
    _close(out.value, reference)


def test_permuting_clients_changes_nothing():
    p = _problem(m=5)
    perm = torch.tensor([3, 0, 4, 1, 2])
    q = QuadraticBilevel(*(getattr(p, k)[perm] for k in ("A", "B", "b", "C", "D", "c", "E", "e")))
    x, y0 = torch.randn(3), torch.randn(4)
    for kw in ({"index": 2}, {"expectation": True}):
        est = AggITD(inner_steps=5, local_steps=2, **kw)
        a = est.estimate(p, x, InnerState(y0), np.random.default_rng(0))
        b = est.estimate(q, x, InnerState(y0), np.random.default_rng(0))
        _close(a.value, b.value)
        _close(a.state.y, b.state.y)


def _expected_calls(n, q, tau, count, dx, dy, sgd=False):
    anchors = 0 if sgd else n
    piggy = n - q if q >= 0 else n
    up = count * (anchors * dy + piggy * dy + n * dy + dy + dx)
    return {
        "comm_rounds": (n + 2) if sgd else (2 * n + 2),
        "grad_g": count * (anchors + (1 if sgd else 2) * tau * n),
        "grad_f": count * ((n + 1 if q < 0 else 1) + 1),
        "hvp": count * (n if q < 0 else n - q),
        "jvp": count,
        "floats_up": up,
        "floats_down": up + count * (dx + dy + 1),
    }


@pytest.mark.parametrize("sgd", [False, True])
@pytest.mark.parametrize("participation", [None, 0.5, 2])
@pytest.mark.parametrize("mode", [{"index": 1}, {"index": 4}, {"expectation": True}, {}])
def test_ledger_counts_and_floats_are_exact(sgd, participation, mode):
    p = _problem(m=6, dx=3, dy=5)
    n, tau = 4, 3
    est = AggITD(
        inner_steps=n,
        local_steps=tau,
        participation=participation,
        lower_solver="sgd" if sgd else "svrg",
        **mode,
    )
    ctx = FederatedContext(p, np.random.default_rng(5), participation)
    _, _, aux = est.estimate_in(ctx, torch.zeros(3), InnerState(torch.zeros(5)))
    count = int(aux["clients"].shape[0])
    assert count == {None: 6, 0.5: 3, 2: 2}[participation]
    calls = ctx.calls().as_dict()
    expected = _expected_calls(n, aux["index"], tau, count, 3, 5, sgd)
    assert {k: calls[k] for k in expected} == expected
    assert ctx.ledger.rounds == est.rounds_per_call()
    assert ctx.ledger.largest_payload <= max(p.dim_x, p.dim_y)  # no Hessian-sized message
    assert ctx.ledger.payload_sizes <= {1, p.dim_x, p.dim_y}
    assert set(np.flatnonzero(ctx.ledger.floats_up)) == set(aux["clients"].tolist())


@pytest.mark.parametrize("sgd,rounds", [(False, 2 * 3 + 3), (True, 3 + 3)])
def test_fbo_aggitd_rounds_per_iteration_are_measured_exactly(sgd, rounds):
    p = _problem(m=5, dx=2, dy=3)
    alg = FBOAggITD(
        inner_steps=3, local_steps=2, participation=0.6, lower_solver="sgd" if sgd else "svrg"
    )
    assert alg.rounds_per_iteration() == rounds
    records = run_algorithm(alg, p, 3, np.random.default_rng(0))
    spent = np.diff([r.calls.comm_rounds for r in records])
    assert spent.tolist() == [rounds] * 3
    assert isinstance(records[0].state, AggITDState) and records[0].state.h is None
    assert all(r.state.h is not None and r.state.h.shape == (2,) for r in records[1:])


def test_fbo_aggitd_decreases_the_true_hypergradient():
    p = _problem(m=3, dx=2, dy=3, kappa=2.0, seed=4, hessian_heterogeneity=0.2)
    alg = FBOAggITD(inner_steps=8, local_steps=2, outer_step_size=0.3, expectation=True)
    records = run_algorithm(alg, p, 25, np.random.default_rng(0))
    norms = [float(p.exact_hypergradient(r.x).norm()) for r in records]
    assert norms[-1] < 0.05 * norms[0]


def test_one_round_upper_uses_fresh_samples_and_is_unbiased():
    """With minibatches the direct part of h and the local correction use different samples;
    averaged over seeds, x+ from one local step equals x - alpha * E[h] (Lemma 5 step (i))."""
    p = _problem(m=2, dx=2, dy=2, kappa=2.0, n_samples=20, gradient_noise=1.0)
    alg = FBOAggITD(inner_steps=2, local_steps=1, outer_step_size=0.5, batch_size=1)
    state = alg.init(p)
    records = [run_algorithm(alg, p, 1, np.random.default_rng(s), state=state)[1] for s in range(3)]
    for r in records:
        # tau = 1: the correction vanishes, so x+ = x - alpha h exactly, whatever the samples
        _close(r.x, state.x - 0.5 * r.state.h)


def test_same_seed_same_numbers_and_q_is_random():
    p = _problem()
    est = AggITD(inner_steps=6, participation=0.5)
    x, y0 = torch.randn(3), torch.randn(4)
    a = est.estimate(p, x, InnerState(y0), np.random.default_rng(11))
    b = est.estimate(p, x, InnerState(y0), np.random.default_rng(11))
    assert torch.equal(a.value, b.value) and a.aux["index"] == b.aux["index"]
    indices = {
        est.estimate(p, x, InnerState(y0), np.random.default_rng(s)).aux["index"] for s in range(40)
    }
    assert indices == set(range(7))


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (AggITD, {"inner_steps": -1}, "inner_steps"),
        (AggITD, {"inner_steps": 2.5}, "inner_steps"),
        (AggITD, {"local_steps": 0}, "local_steps"),
        (AggITD, {"local_steps": ()}, "local_steps"),
        (AggITD, {"inner_step_size": -0.1}, "inner_step_size"),
        (AggITD, {"neumann_step_size": 0.0}, "neumann_step_size"),
        (AggITD, {"lower_solver": "adam"}, "lower_solver"),
        (AggITD, {"index": 11}, "index"),
        (AggITD, {"index": 2, "expectation": True}, "exclude"),
        (AggITD, {"batch_size": 0}, "batch_size"),
        (AggITD, {"participation": "all"}, "participation"),
        (FBOAggITD, {"outer_step_size": -1.0}, "outer_step_size"),
        (FBOAggITD, {"lower_solver": "sarah"}, "lower_solver"),
        (FBOAggITD, {"local_steps": 0}, "local_steps"),
    ],
)
def test_bad_parameters_raise_clear_errors(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_per_client_local_steps_must_match_the_clients():
    p = _problem(m=3)
    est = AggITD(inner_steps=2, local_steps=(1, 2))
    with pytest.raises(ValueError, match="entries for 3 clients"):
        est.estimate(p, torch.zeros(3), est.init(p), np.random.default_rng(0))
    ok = AggITD(inner_steps=2, local_steps=(1, 2, 3))
    ok.estimate(p, torch.zeros(3), ok.init(p), np.random.default_rng(0))


def test_registered_names_build():
    assert isinstance(get_estimator("aggitd").build(), AggITD)
    assert get_estimator("aggitd-as-printed").build().as_printed
    assert get_estimator("fbo-aggitd").build().rounds_per_iteration() == 23
    assert get_estimator("fbo-aggitd-sgd").build(inner_steps=5).rounds_per_iteration() == 8
