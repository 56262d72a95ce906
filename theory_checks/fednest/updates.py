r"""One outer iteration of FedNest and of LFedNest, against the printed updates of the paper's
algorithms evaluated here in float64 from the problem's arrays (Tarzanagh et al. 2022, Alg. 1
with Algs. 2-4; LFedNest: Sec. 2.6, Table 2 and App. A).

On the quadratic bilevel problem of :mod:`problems.quadratic_bilevel` (client i:
``g_i = (1/2) y^T A_i y - y^T (B_i x + b_i)``, ``f_i = (1/2) y^T C_i y + y^T D_i x + c_i^T y +
(1/2) x^T E_i x + e_i^T x``) with exact oracles and every client participating, write
``G_i(y) = grad_y g_i(x, y) = A_i y - B_i x - b_i``, ``F_i(x') = grad_x f_i(x', y^+) = D_i^T y^+
+ E_i x' + e_i``, ``grad_y f_i(x', y) = C_i y + D_i x' + c_i`` and ``-grad^2_xy g_i = B_i^T``.
One iteration of Algorithm 1 from ``(x^k, y^k)`` is ``y^{k,0} = y^k``, ``T`` inner calls
``y^{k,t+1} = Inner(x^k, y^{k,t}, beta)``, ``y^{k+1} = y^{k,T}`` and ``x^{k+1} = Outer(x^k,
y^{k+1}, alpha)``, with:

- **FedInn** (Alg. 4): ``q = mean_i G_i(y)``; ``y_{i,nu+1} = y_{i,nu} - beta_i (G_i(y_{i,nu}) -
  G_i(y) + q)`` for ``nu < tau_i``; ``y^+ = mean_i y_{i,tau_i}``;
- **FedIHGP** (Alg. 3) at the drawn ``N' in {0..N-1}``: ``p_0 = (N / l) mean_i grad_y f_i(x,
  y^+)``, ``p_n = mean_i (I - A_i / l) p_{n-1}``, ``n = 1..N'``;
- **FedOut** (Alg. 2): ``h = mean_i (F_i(x) + B_i^T p_{N'})``; ``x_{i,nu+1} = x_{i,nu} -
  alpha_i (F_i(x_{i,nu}) - F_i(x) + h)``; ``x^+ = mean_i x_{i,tau_i}``;
- **LFedInn** (FedAvg on y; Alg. 6 of App. A, whose text is cut off: as Table 2 and the
  authors' code describe it): Alg. 4 without ``q`` and the control variate, ``y_{i,nu+1} =
  y_{i,nu} - beta_i G_i(y_{i,nu})``;
- **LFedOut** (Alg. 5 of App. A, as above): each client steps along its own hypergradient with
  its own Neumann series, ``x_{i,nu+1} = x_{i,nu} - alpha_i (F_i(x_{i,nu}) + B_i^T p_i(x_{i,nu}))``,
  ``p_i(x') = (1/l) sum_{j<N} (I - A_i / l)^j grad_y f_i(x', y^+)``; ``x^+ = mean_i
  x_{i,tau_i}``;

with ``beta_i = beta / tau_i`` and ``alpha_i = alpha / tau_i`` (the step rule of Thm 3.1, which
both algorithms allow: ``beta_i in (0, beta]``, ``alpha_i in (0, alpha]``).

Checked (:data:`FEDNEST_ITERATION`, :data:`LFEDNEST_ITERATION`): the registered entry built with
the case's T, N, tau_i and steps, run one iteration through its own ``init`` and ``step`` from a
drawn ``(x, y)``, equals the formulas above at the parameters the check passed, to a relative
1e-10 in both ``x^{k+1}`` and ``y^{k+1}`` (:data:`~theory_checks.tolerances.IDENTITY_RTOL`:
a few hundred float64 operations on O(1) numbers). ``N'`` is the iteration's one random draw
(Alg. 3 draws it uniformly): it is read from the state the step returns and checked to lie in
``{0..N-1}``; the formula is evaluated at it. :data:`FEDIHGP_CALL` checks the estimator
FedIHGP the same way: one estimate from ``y`` (T FedInn calls, Alg. 3 at its drawn ``N'``, and
Alg. 2's first round ``h = mean_i (F_i(x) + B_i^T p_{N'})``, eq. (13a)) equals the formulas in
``h`` and ``y^+``.

Why they are needed (issue 32): the claims on FedNest's rates and floors tolerate a smaller
outer step (a floor they stay under), and LFedNest's claims see its inner solver and its
local-step count only through a bias and the rounds, so a halved alpha on either, a halved
LFedInn beta and one local step fewer on LFedNest passed every claim of the entries. Each
changes ``x^{k+1}`` or ``y^{k+1}`` by a fraction of the step, far above 1e-10. FedIHGP run with
N - 1 terms while N is recorded was caught only by a guard (the claims that enumerate ``N'``
ask for ``N' = N - 1``, which the N - 1 estimator refuses); here its ``p_0`` scale ``(N - 1)/l``
against ``N/l`` is measured. A case whose
update is too small to resolve one (``||x^{k+1} - x^k||`` or ``||y^{k+1} - y^k||`` below
:data:`~theory_checks.tolerances.UNRESOLVED_TERM` of the scale) is rejected, not passed.

Hypothesis: A2 (strong convexity of every ``g_i`` in y; the problems draw ``A_i`` positive
definite). The identity itself needs no step condition: any finite steps give the same update
on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import QuadraticBilevel
from problems import strategies
from testbed.estimators.base import InnerState
from testbed.estimators.fednest import outer_smoothness
from testbed.federation.context import FederatedContext
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.exact_quantities import evaluation_point
from theory_checks.fednest.common import REF
from theory_checks.fednest.common import STEP_IDENTITY
from theory_checks.fednest.common import heterogeneous_bilevel
from theory_checks.fednest.common import per_client_taus
from theory_checks.fednest.common import strongly_convex_claim
from theory_checks.fednest.constants import inner_smoothness
from theory_checks.fednest.perturbations import ScaledIHGP
from theory_checks.perturbed_variants import field_variant
from theory_checks.perturbed_variants import registry_variant
from theory_checks.tolerances import IDENTITY_RTOL
from theory_checks.tolerances import UNRESOLVED_TERM


class Arrays:
    """The problem's arrays in float64 NumPy, with the client maps of the module docstring."""

    def __init__(self, problem: QuadraticBilevel) -> None:
        def get(name: str) -> np.ndarray:
            return np.asarray(getattr(problem, name).detach().cpu().numpy(), dtype=np.float64)

        A = get("A")
        self.A = 0.5 * (A + A.transpose(0, 2, 1))  # the Hessian of (1/2) y^T A_i y
        self.B, self.b, self.C, self.D = get("B"), get("b"), get("C"), get("D")
        self.c, self.E, self.e = get("c"), get("E"), get("e")
        self.m = self.A.shape[0]

    def G(self, i: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``grad_y g_i(x, y)``."""
        return self.A[i] @ y - self.B[i] @ x - self.b[i]

    def F(self, i: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``grad_x f_i(x, y)``."""
        return self.D[i].T @ y + self.E[i] @ x + self.e[i]

    def fy(self, i: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``grad_y f_i(x, y)``."""
        return self.C[i] @ y + self.D[i] @ x + self.c[i]


def _local_steps(
    start: np.ndarray, direction: Callable[[np.ndarray], np.ndarray], tau: int, step: float
) -> np.ndarray:
    """``w_{nu+1} = w_nu - step direction(w_nu)``, ``tau`` times from ``start``."""
    w = start.copy()
    for _ in range(tau):
        w = w - step * direction(w)
    return w


def fedinn_call(
    P: Arrays, x: np.ndarray, y: np.ndarray, beta: float, taus: Sequence[int], corrected: bool
) -> np.ndarray:
    """Alg. 4 (``corrected``) or LFedInn (FedAvg, without the control variate)."""
    q = np.mean([P.G(i, x, y) for i in range(P.m)], axis=0)
    finals = []
    for i in range(P.m):
        if corrected:

            def direction(w: np.ndarray, i: int = i) -> np.ndarray:
                return P.G(i, x, w) - P.G(i, x, y) + q
        else:

            def direction(w: np.ndarray, i: int = i) -> np.ndarray:
                return P.G(i, x, w)

        finals.append(_local_steps(y, direction, taus[i], beta / taus[i]))
    return np.mean(finals, axis=0)


def fedihgp_p(P: Arrays, x: np.ndarray, y: np.ndarray, N: int, n_prime: int, lam: float) -> Any:
    """Alg. 3 at the drawn ``N'``: ``p_{N'}`` (``lam = 1 / l``)."""
    p = N * lam * np.mean([P.fy(i, x, y) for i in range(P.m)], axis=0)
    for _ in range(n_prime):
        p = np.mean([p - lam * P.A[i] @ p for i in range(P.m)], axis=0)
    return p


def fedout_call(
    P: Arrays, x: np.ndarray, y: np.ndarray, p: np.ndarray, alpha: float, taus: Sequence[int]
) -> np.ndarray:
    """Alg. 2 after FedIHGP returned ``p``."""
    h = np.mean([P.F(i, x, y) + P.B[i].T @ p for i in range(P.m)], axis=0)
    finals = []
    for i in range(P.m):

        def direction(w: np.ndarray, i: int = i) -> np.ndarray:
            return P.F(i, w, y) - P.F(i, x, y) + h

        finals.append(_local_steps(x, direction, taus[i], alpha / taus[i]))
    return np.mean(finals, axis=0)


def lfedout_call(
    P: Arrays, x: np.ndarray, y: np.ndarray, alpha: float, taus: Sequence[int], N: int, lam: float
) -> np.ndarray:
    """LFedOut: local hypergradient steps with each client's own N-term Neumann series."""
    finals = []
    for i in range(P.m):
        A_step = np.eye(P.A.shape[1]) - lam * P.A[i]

        def direction(w: np.ndarray, i: int = i, A_step: np.ndarray = A_step) -> np.ndarray:
            power, total = P.fy(i, w, y), np.zeros_like(y)
            for _ in range(N):
                total, power = total + power, A_step @ power
            return P.F(i, w, y) + P.B[i].T @ (lam * total)

        finals.append(_local_steps(x, direction, taus[i], alpha / taus[i]))
    return np.mean(finals, axis=0)


# ------------------------------------------------------------------------------------ the check


def _settings(case: Case) -> dict[str, Any]:
    """The parameters the check passes (and evaluates the formulas at)."""
    problem, p = case.problem, case.params
    lam = 1.0 / inner_smoothness(problem)
    return {
        "inner_steps": p["inner_steps"],
        "neumann_terms": p["neumann_terms"],
        "local_steps": p["local_steps"],
        "inner_step_size": p["beta_factor"] * lam,
        "outer_step_size": p["alpha_factor"] / outer_smoothness(problem),
        "neumann_step_size": lam,
    }


def _one_iteration(case: Case, make: Callable[..., Any]) -> tuple[Any, Any, Any, dict[str, Any]]:
    """``(x^k, y^k)`` drawn, and the state after one iteration of the entry built by ``make``
    through its own ``init`` (the steps a run carries) and ``step``."""
    problem = case.problem
    settings = _settings(case)
    algorithm = make(**settings)
    x, y = evaluation_point(problem, case.params["point_seed"])
    state = algorithm.init(problem)._replace(x=x, y=y)
    ctx = FederatedContext(problem, np.random.default_rng(case.params["point_seed"]))
    return x, y, algorithm.step(ctx, state), settings


def _compare(
    x: torch.Tensor,
    y: torch.Tensor,
    new: Any,
    x_ref: np.ndarray,
    y_ref: np.ndarray,
    details: dict[str, Any],
) -> Measurement:
    x0, y0 = x.cpu().numpy(), y.cpu().numpy()
    for name, start, ref in (("x", x0, x_ref), ("y", y0, y_ref)):
        if np.linalg.norm(ref - start) < UNRESOLVED_TERM * (1.0 + np.linalg.norm(start)):
            raise NotMeasurable(f"the update of {name} is too small to resolve a step")
    return _relative_gap(
        "relative gap of (x^{k+1}, y^{k+1}) <=", ((new.x, x_ref), (new.y, y_ref)), details
    )


def _relative_gap(
    relation: str, pairs: Sequence[tuple[torch.Tensor, np.ndarray]], details: dict[str, Any]
) -> Measurement:
    """The largest relative gap ``||value - ref|| / (1 + ||ref||)`` of the ``(value, ref)``
    pairs (the entry's output against the printed update), against ``IDENTITY_RTOL``."""
    gap = max(
        float(np.linalg.norm(value.detach().cpu().numpy() - ref))
        / (1.0 + float(np.linalg.norm(ref)))
        for value, ref in pairs
    )
    return Measurement(gap, IDENTITY_RTOL, gap <= IDENTITY_RTOL, relation, details=details)


def _drawn_outside(n_prime: int | None, terms: int) -> Measurement | None:
    """The failed measurement of an iteration whose recorded draw ``N'`` is not in
    ``{0..N-1}`` (Alg. 3's range); ``None`` when it is."""
    if n_prime is None or not 0 <= n_prime < terms:
        return Measurement(
            float("inf"),
            IDENTITY_RTOL,
            False,
            "N' in {0..N-1}",
            details={"N'": n_prime, "N": terms},
        )
    return None


def check_fednest_iteration(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """One FedNest iteration (Alg. 1: T FedInn calls, FedIHGP, FedOut) against the printed
    updates at the parameters passed."""
    x, y, new, s = _one_iteration(case, make)
    P, taus = Arrays(case.problem), list(case.params["local_steps"])
    N, n_prime = s["neumann_terms"], new.truncation_index
    outside = _drawn_outside(n_prime, N)
    if outside is not None:
        return outside
    x0, y_ref = x.cpu().numpy(), y.cpu().numpy()
    for _ in range(s["inner_steps"]):
        y_ref = fedinn_call(P, x0, y_ref, s["inner_step_size"], taus, corrected=True)
    p = fedihgp_p(P, x0, y_ref, N, n_prime, s["neumann_step_size"])
    x_ref = fedout_call(P, x0, y_ref, p, s["outer_step_size"], taus)
    return _compare(x, y, new, x_ref, y_ref, {"N'": n_prime, **s})


def check_lfednest_iteration(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """One LFedNest iteration (Alg. 1: T LFedInn calls, LFedOut) against the updates of App. A
    at the parameters passed."""
    x, y, new, s = _one_iteration(case, make)
    P, taus = Arrays(case.problem), list(case.params["local_steps"])
    x0, y_ref = x.cpu().numpy(), y.cpu().numpy()
    for _ in range(s["inner_steps"]):
        y_ref = fedinn_call(P, x0, y_ref, s["inner_step_size"], taus, corrected=False)
    x_ref = lfedout_call(
        P, x0, y_ref, s["outer_step_size"], taus, s["neumann_terms"], s["neumann_step_size"]
    )
    return _compare(x, y, new, x_ref, y_ref, dict(s))


def check_fedihgp_call(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """One FedIHGP estimate (T FedInn calls, Alg. 3 at its drawn ``N'``, Alg. 2's first round,
    eq. (13a)) against the printed updates at the parameters passed: the relative gap of the
    direction ``h`` and of ``y^+``."""
    problem, p = case.problem, case.params
    s = _settings(case)
    N = s["neumann_terms"]
    est = make(**{k: v for k, v in s.items() if k != "outer_step_size"})
    x, y = evaluation_point(problem, p["point_seed"])
    out = est.estimate(problem, x, InnerState(y), np.random.default_rng(p["point_seed"]))
    n_prime = out.aux.get("truncation_index")
    outside = _drawn_outside(n_prime, N)
    if outside is not None:
        return outside
    P, taus = Arrays(problem), list(p["local_steps"])
    x0, y_ref = x.cpu().numpy(), y.cpu().numpy()
    for _ in range(s["inner_steps"]):
        y_ref = fedinn_call(P, x0, y_ref, s["inner_step_size"], taus, corrected=True)
    p_ref = fedihgp_p(P, x0, y_ref, N, n_prime, s["neumann_step_size"])
    h_ref = np.mean([P.F(i, x0, y_ref) + P.B[i].T @ p_ref for i in range(P.m)], axis=0)
    return _relative_gap(
        "relative gap of (h, y^+) <=",
        ((out.value, h_ref), (out.aux["y"], y_ref)),
        {"N'": n_prime, **s},
    )


@st.composite
def _iteration_draw(draw: st.DrawFn) -> Case:
    problem = draw(heterogeneous_bilevel(min_hessian=0.0, max_dim=3, clients=(2, 4)))
    return Case(
        problem,
        {
            "point_seed": draw(strategies.SEEDS),
            "inner_steps": draw(st.integers(1, 3)),
            "neumann_terms": draw(st.integers(1, 5)),
            # Why tau_i >= 2: one local step fewer must exist on every client (tau_i - 1 >= 1)
            "local_steps": draw(per_client_taus(problem, 2, 4)),
            # any finite steps: the identity holds at every step; these keep the numbers O(1)
            "beta_factor": draw(st.floats(0.2, 1.0)),
            "alpha_factor": draw(st.floats(0.2, 1.0)),
        },
    )


def iteration_cases() -> st.SearchStrategy[Case]:
    """Cases of both claims: a heterogeneous bilevel quadratic, a point, T in 1..3, N in 1..5,
    tau_i in 2..4 per client and the step factors."""
    return _iteration_draw()


# --------------------------------------------------------------------------- perturbations


FEDNEST_OUTER_STEP_HALVED = Perturbation(
    "FedOut steps alpha / 2",
    "FedNest built with alpha and run with alpha / 2 (the step read in one place and run from "
    "another): x^{k+1} - x^k halves, a gap of order ||x^{k+1} - x^k|| / 2 against 1e-10.",
    field_variant("fednest", outer_step_size=lambda est: est.outer_step_size / 2),
)

LFEDNEST_LOCAL_STEP_MISSING = Perturbation(
    "LFedNest runs tau_i - 1 local steps",
    "every client of LFedInn and LFedOut stops one local step early: both y^{k+1} and x^{k+1} "
    "move by about one local step (cases draw tau_i >= 2).",
    field_variant("lfednest", local_steps=lambda est: tuple(t - 1 for t in est.local_steps)),
)


FEDIHGP_SCALE_OFF_BY_ONE = Perturbation(
    "FedIHGP's p_0 scaled by (N + 1)/l",
    "N' counted on 0..N: p_{N'} and the indirect part of h grow by (N + 1)/N, a relative gap "
    "of at least 1/6 of the indirect part (N <= 5).",
    registry_variant("fedihgp", ScaledIHGP),
)

# ------------------------------------------------------------------------------------ claims


# What every claim of this result shares: an identity of one step on the same cases.
updates_claim = strongly_convex_claim.but(**STEP_IDENTITY, strategy=iteration_cases)


def iteration_claim(algorithm: str, name: str, updates: str, **fields: Any) -> Claim:
    """The claim that one outer iteration of ``algorithm`` (the registered entry; ``name`` in
    the paper) equals ``updates``, the paper's printed updates, at the step rule of Thm 3.1."""
    return updates_claim(
        id=f"fednest.updates.{algorithm}_iteration",
        statement=(
            f"one {name} iteration from (x^k, y^k) equals {updates} at the stated T, N, tau_i, "
            "beta, alpha and 1/l, beta_i = beta/tau_i, alpha_i = alpha/tau_i (relative 1e-10 in "
            "x^{k+1} and y^{k+1})"
        ),
        estimators=(algorithm,),
        **fields,
    )


FEDNEST_ITERATION = iteration_claim(
    "fednest",
    "FedNest",
    "T FedInn calls (Alg. 4) then FedOut (Alg. 2) with FedIHGP's p_{N'} (Alg. 3)",
    reference=f"{REF}, Alg. 1 with FedInn (Alg. 4), FedIHGP (Alg. 3) and FedOut (Alg. 2)",
    check=check_fednest_iteration,
    perturbation=FEDNEST_OUTER_STEP_HALVED,
)

LFEDNEST_ITERATION = iteration_claim(
    "lfednest",
    "LFedNest",
    "T LFedInn calls (FedAvg on y) then LFedOut (local steps along grad_x f_i + B_i^T p_i, "
    "p_i client i's own N-term Neumann series)",
    reference=(
        f"{REF}, Sec. 2.6 and Table 2: Alg. 1 with LFedInn and LFedOut (Algs. 5-6 of App. A, "
        "whose text is cut off; as Table 2 and the authors' code run them)"
    ),
    check=check_lfednest_iteration,
    perturbation=LFEDNEST_LOCAL_STEP_MISSING,
)


FEDIHGP_CALL = updates_claim(
    id="fednest.updates.fedihgp_call",
    reference=f"{REF}, Alg. 3 (FedIHGP) after T FedInn calls (Alg. 4), Alg. 2's first round "
    "(eq. (13a))",
    statement=(
        "FedIHGP's estimate from y equals T FedInn calls (Alg. 4), p_0 = (N/l) mean_i grad_y "
        "f_i, N' products mean_i (I - A_i/l) at its drawn N' in {0..N-1} (Alg. 3), and h = "
        "mean_i (grad_x f_i - grad^2_xy g_i p_{N'}) (eq. (13a)), at the stated T, N, tau_i, "
        "beta and 1/l (relative 1e-10 in h and y^+)"
    ),
    estimators=("fedihgp",),
    check=check_fedihgp_call,
    perturbation=FEDIHGP_SCALE_OFF_BY_ONE,
)


CLAIMS: tuple[Claim, ...] = (FEDNEST_ITERATION, LFEDNEST_ITERATION, FEDIHGP_CALL)
