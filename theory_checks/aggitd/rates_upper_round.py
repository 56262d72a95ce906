"""Lemma 3's client-drift bound and Theorem 2's D_h restatement (erratum 7), measured on
one FBO-AggITD upper round per Q with One-Round-Upper's local path replayed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from problems import ProblemConstants
from testbed.algorithms.aggitd import AggITDState
from testbed.federation.context import FederatedContext
from testbed.oracles import Oracles
from theory_checks.aggitd.common import ExactView, exact_setup
from theory_checks.aggitd.constants import (
    AggITDConstants,
    gradient_bound,
    inner_step,
    lemma3_outer_step,
    neumann_step,
)
from theory_checks.aggitd.rates_common import FixedIndex, LastUploads
from theory_checks.claim import Case, Claim, Measurement, SeriesPoint
from theory_checks.tolerances import IDENTITY_RTOL

# --------------------------------------------------------------------------- one upper round


@dataclasses.dataclass(frozen=True)
class UpperRound:
    """One FBO-AggITD iteration per Q = 0..N at the same (x, y^0), exact oracles.

    Attributes:
        drift: ``E_Q ||x_nu^i - x||^2``, shape ``(tau + 1, M)`` (nu = 0..tau).
        direction_sq: ``E_Q ||h_{i,nu}||^2`` (Prop. 2's D_h quantity), shape ``(tau, M)``.
        b_i: ``||E_Q h^I - J H^{-1} grad_y f(x, y^N)||^2`` (Prop. 1's B_I).
        replay_gap: relative gap between the recorded ``x_tau^i`` and the Alg. 4 recursion
            replayed from the run's ``h`` and ``y+`` (0 up to round-off when the run is Alg. 4).
    """

    drift: np.ndarray
    direction_sq: np.ndarray
    b_i: float
    y_gap_sq: float
    stationarity: float
    M: float
    replay_gap: float


def upper_round(problem: Any, ex: ExactView, x: torch.Tensor, y0: torch.Tensor,
                make: Callable[..., Any], **params: Any) -> UpperRound:
    """Run one iteration for every Q and replay One-Round-Upper's local path per client."""
    n, tau, alpha = params["inner_steps"], params["local_steps"], params["outer_step_size"]
    algorithm = make(**params)
    oracles = Oracles(problem)
    clients = torch.arange(problem.n_clients)
    drifts, directions, indirect, gaps = [], [], [], []
    points: list[tuple[torch.Tensor, torch.Tensor]] = [(x, y0), (x, ex.y_star)]
    y_plus = y0
    for q in range(n + 1):
        recorded = LastUploads()
        ctx = FederatedContext(problem, FixedIndex(q),  # type: ignore[arg-type]
                               upload_observer=recorded)
        new = algorithm.step(ctx, AggITDState(x, y0, None))
        last_uploads = recorded.uploads
        assert last_uploads is not None
        h, y_plus = new.h, new.y
        anchor = oracles.grad_outer(x.expand(len(clients), -1), y_plus, clients)[0]
        local = x.expand(len(clients), -1).clone()
        path, dirs = [local], []
        for _ in range(tau):
            direction = h - anchor + oracles.grad_outer(local, y_plus, clients)[0]
            dirs.append((direction**2).sum(-1))
            local = local - alpha / tau * direction
            path.append(local)
        scale = float(x.norm()) + float(last_uploads.norm()) + 1e-300
        gaps.append(float((last_uploads - local).norm()) / scale)
        path[-1] = last_uploads  # the recorded upload, not the replay, for nu = tau
        drifts.append(torch.stack([((p - x) ** 2).sum(-1) for p in path]))
        directions.append(torch.stack(dirs))
        indirect.append(ex.grad_outer(y_plus)[0] - h)
        points += [(p_i, y_plus) for p in path for p_i in p]
    gx, gy = ex.grad_outer(y_plus)
    target = ex.J @ torch.linalg.solve(ex.H, gy)
    return UpperRound(
        drift=torch.stack(drifts).mean(0).cpu().numpy(),
        direction_sq=torch.stack(directions).mean(0).cpu().numpy(),
        b_i=float((torch.stack(indirect).mean(0) - target).norm() ** 2),
        y_gap_sq=float((y_plus - ex.y_star).norm() ** 2),
        stationarity=float(problem.exact_hypergradient(x).norm() ** 2),
        M=gradient_bound(problem, points), replay_gap=max(gaps))


def _upper_setup(case: Case) -> tuple[Any, ExactView, torch.Tensor, torch.Tensor, dict[str, Any],
                                      AggITDConstants]:
    """Lemma 3's conditions (:mod:`~theory_checks.aggitd.constants`): lam = min(10, 1/L_g),
    beta = min(1, lam, 1/(6 L_g)), alpha = alpha_2."""
    ex, x, y0 = exact_setup(case)
    seed = case.params["point_seed"]
    # Why tau in {4, 8}: the lemma's point is a tau-free bound under alpha_i = alpha / tau_i,
    # so large tau is the demanding case; tau = 1 makes the local path one step.
    params = {"inner_steps": 1 + seed % 2, "local_steps": (4, 8)[(seed // 2) % 2],
              "inner_step_size": inner_step(case), "neumann_step_size": neumann_step(case),
              "outer_step_size": lemma3_outer_step(case)}
    return case.problem, ex, x, y0, params, ex.paper


def _sigma_h_sq(params: Mapping[str, Any], c: AggITDConstants, M: float) -> float:
    return params["neumann_step_size"] * (params["inner_steps"] + 1) * c.L_g**2 * M**2 / c.mu


def lemma3_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """``18 tau^2 alpha_i^2 [3 M_f^2 ||y+ - y*||^2 + 3 ||grad f(x)||^2 + B_I + 3 sigma_h^2 +
    6 sigma_f^2]`` with ``alpha_i = alpha / tau`` (so ``tau^2 alpha_i^2 = alpha^2``)."""
    return 18.0 * params["alpha"] ** 2 * (
        3.0 * params["M_f"] ** 2 * params["y_gap_sq"] + 3.0 * params["stationarity"]
        + params["B_I"] + 3.0 * params["sigma_h_sq"] + 6.0 * params["sigma_f_sq"])


def check_lemma3_drift(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """E_Q ||x_nu^i - x||^2 <= Lemma 3's bound for every client i and nu = 0..tau."""
    problem, ex, x, y0, params, c = _upper_setup(case)
    r = upper_round(problem, ex, x, y0, make, **params)
    bound = claim.evaluate_bound(ex.constants, {
        "alpha": params["outer_step_size"], "M_f": c.M_f, "y_gap_sq": r.y_gap_sq,
        "stationarity": r.stationarity, "B_I": r.b_i,
        "sigma_h_sq": _sigma_h_sq(params, c, r.M), "sigma_f_sq": 0.0})
    measured = float(r.drift.max())
    slack = (IDENTITY_RTOL * (float(x.norm()) + 1.0)) ** 2  # round-off of a zero drift
    series = tuple(SeriesPoint("measured", "local step nu", nu, float(d))
                   for nu, d in enumerate(r.drift.max(1))) + (
        SeriesPoint("bound", "local step nu", params["local_steps"], bound),)
    return Measurement(measured, bound, measured <= bound + slack,
                       "max_{i, nu} E_Q ||x_nu^i - x||^2 <=", series=series,
                       details={**params, "ratio": measured / bound, "replay_gap": r.replay_gap})


def dh_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """``D_h^2 = a M^2 + 4 lam (N+1) L_g^2 M^2 / mu`` with ``a = 8`` (Thm 2) or 12 (Prop. 2)."""
    return (params["m_coefficient"] * params["M"] ** 2
            + 4.0 * params["neumann_step_size"] * (params["inner_steps"] + 1) * params["L_g"] ** 2
            * params["M"] ** 2 / params["mu"])


def check_dh(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """max_{i, nu} E_Q ||h_{i,nu}||^2 <= D_h^2 as restated in Theorem 2 (8 M^2); Prop. 2's 12 M^2
    beside it in the details."""
    problem, ex, x, y0, params, c = _upper_setup(case)
    r = upper_round(problem, ex, x, y0, make, **params)
    common = {**params, "M": r.M, "L_g": c.L_g, "mu": c.mu}
    bound = claim.evaluate_bound(ex.constants, {**common, "m_coefficient": 8.0})
    prop2 = dh_bound(ex.constants, {**common, "m_coefficient": 12.0})
    measured = float(r.direction_sq.max())
    # the replay must reproduce the recorded upload: else the measured h_{i,nu} are not Alg. 4's
    replay_ok = r.replay_gap <= IDENTITY_RTOL
    return Measurement(measured, bound, measured <= bound and replay_ok,
                       "max_{i, nu} E_Q ||h_{i,nu}||^2 <= 8 M^2 + 4 sigma_h^2",
                       series=(SeriesPoint("measured", "local steps tau", params["local_steps"],
                                           measured),
                               SeriesPoint("bound", "local steps tau", params["local_steps"],
                                           bound)),
                       details={**params, "ratio_thm2": measured / bound,
                                "ratio_prop2": measured / prop2, "replay_gap": r.replay_gap})
