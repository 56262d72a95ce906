"""Shared helpers of the AggITD results (notation: :mod:`theory_checks.aggitd`): what several
result modules use.

- the exact-run generators: :data:`NO_DRAWS` (any draw is an error) and :class:`FixedIndex`
  (the server's index Q fixed);
- the claim constructors (:class:`~theory_checks.claim.ClaimMaker`): :data:`aggitd_claim` and,
  per kind of claim, :data:`estimate_claim` (AggITD's estimate under the propositions' caps;
  :data:`four_case_estimate_claim`), :data:`step_claim` and :data:`identity_claim` (a step of
  Alg. 1 or Table 1's rounds), :data:`lemma3_claim` (FBO-AggITD at Lemma 3's conditions;
  :data:`upper_round_claim`, the claims measured by :func:`upper_round`) and
  :data:`theorem1_claim` (at Theorem 1's step rule), :func:`bias_bound_claims` for the loose bias
  bounds, with the shared case budget :data:`TWO_FAST_CASES` and cases :data:`SMALL_CASES`;
- the case strategies :func:`point_seed_cases` and :func:`bilevel_cases` (the closed-form
  families' are the classical checks', :func:`~theory_checks.classical.common.closed_form_cases`)
  and the saved cases :func:`saved_bilevel_case`;
- :class:`ExactView` (dense derivatives of one problem, with the paper's constants from
  :mod:`theory_checks.aggitd.constants`, and the case's steps), :func:`exact_setup` (its
  :meth:`ExactView.estimate` runs an estimator at the case's steps, :meth:`ExactView.at_steps`
  builds an algorithm there) and the fixed-subset context :func:`fixed_clients_context`;
- FBO-AggITD's expected iteration as an affine map (:func:`affine_iteration`), to follow it
  over the long horizons that Theorem 1's step rule implies (:class:`AffineIteration`: its
  fixed point, and the mean or the minimum of a value along a trajectory);
- one FBO-AggITD upper round per Q with One-Round-Upper's local path replayed
  (:func:`upper_round`, at Lemma 3's conditions: :func:`upper_setup`), measured by Lemma 3's and
  Theorem 2's D_h checks;
- Prop. 1's bias check (:func:`check_prop1_bias`), which Prop. 1's claim and erratum 9 (eq.
  (45)'s alpha_3) run with their own bounds.

FBO-AggITD's iteration as an affine map: with exact oracles, full participation and the exact
mean over the server's index Q (expectation mode, eq. 11), one FBO-AggITD iteration on a
closed-form family is an affine map of the state ``z = (x, y)``: AggITD's inner FedSVRG steps,
its HessIV sum and One-Round-Upper's local steps are all affine in ``(x, y)`` (the derivatives
are constant). :func:`affine_iteration` reads the map ``z -> A z + c`` off the *registered
algorithm* (``d + 1`` single iterations from the origin and the unit vectors) and validates it
on a seeded random state to round-off, so a nonlinear or state-dependent implementation is not
measurable rather than misread."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import strategies
from results_format.verdicts import ABOUT_RESULT
from results_format.verdicts import ABOUT_STEP
from testbed.algorithms.aggitd import AggITDState
from testbed.algorithms.base import run_algorithm
from testbed.estimators.base import InnerState
from testbed.federation.context import FederatedContext
from testbed.federation.sampling import FixedParticipants
from testbed.oracles import Oracles
from theory_checks.aggitd.constants import ESTIMATOR
from theory_checks.aggitd.constants import LEMMA3
from theory_checks.aggitd.constants import THEOREM1
from theory_checks.aggitd.constants import AggITDConstants
from theory_checks.aggitd.constants import aggitd_constants
from theory_checks.aggitd.constants import dissimilarity_sq
from theory_checks.aggitd.constants import gradient_bound
from theory_checks.aggitd.constants import inner_step
from theory_checks.aggitd.constants import lemma3_outer_step
from theory_checks.aggitd.constants import neumann_step
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import ClaimMaker
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import PerProfile
from theory_checks.claim import SeriesPoint
from theory_checks.claim import bilevel_spec
from theory_checks.claim import known_case
from theory_checks.claim import paper_claim
from theory_checks.classical.common import closed_form_cases
from theory_checks.exact_quantities import evaluation_point
from theory_checks.exact_quantities import quadratic_view
from theory_checks.measurements import bound_on_grid
from theory_checks.tolerances import IDENTITY_RTOL

#: The constructor of AggITD's claims (:class:`~theory_checks.claim.ClaimMaker`); each result
#: module narrows it with the fields its claims share. A claim is about the paper's result
#: unless it says it is about a step (an identity, an erratum, a derived law).
aggitd_claim = paper_claim("AggITD", about=ABOUT_RESULT)

#: Claims about AggITD's estimate (Alg. 1, one call), run under Props. 1-2's caps on lambda
#: and beta; a failing case is saved as drawn (shrinking would rerun the estimator many times).
estimate_claim = aggitd_claim.but(estimators=("aggitd",), hypotheses=ESTIMATOR, shrink=False)

#: :data:`estimate_claim` for checks of a few estimator runs (about 0.3-0.4 s a case): four
#: cases on the fast profile.
four_case_estimate_claim = estimate_claim.but(max_examples=PerProfile(4, None))

#: The cases of the claims that run a few estimates or iterations: the closed-form families up
#: to dimension 5, at a drawn point seed.
SMALL_CASES = closed_form_cases(max_dim=5)

#: Claims about one step of AggITD or FBO-AggITD (Alg. 1's estimate, Table 1's rounds) on
#: :data:`SMALL_CASES`, under the propositions' caps.
step_claim = aggitd_claim.but(about=ABOUT_STEP, strategy=SMALL_CASES, hypotheses=ESTIMATOR)

#: The exact identities of AggITD's estimate (eqs. (5) and (11)): step claims.
identity_claim = step_claim.but(kind="exact_identity", estimators=("aggitd",))

#: Claims about FBO-AggITD's iteration at Lemma 3's conditions (outer step alpha <= alpha_2).
lemma3_claim = aggitd_claim.but(estimators=("fbo-aggitd",), hypotheses=LEMMA3, shrink=False)

#: Claims about FBO-AggITD's run at Theorem 1's step rule (and Corollary 1's N).
theorem1_claim = aggitd_claim.but(estimators=("fbo-aggitd",), hypotheses=THEOREM1, shrink=False)

#: The case budget of the checks that run FBO-AggITD iterations or many estimates (seconds a
#: case): two cases on the fast profile, the profile's own count on thorough.
TWO_FAST_CASES = PerProfile(2, None)


def bias_bound_claims(maker: ClaimMaker) -> ClaimMaker:
    """``maker`` for the loose bounds on AggITD's bias, with the claims that give them power."""
    return maker.but(
        kind="bias_bound",
        power_from=("aggitd.prop1.mean_identity", "aggitd.scaling.bias_rate_in_n"),
    )


# --------------------------------------------------------------------------- exact runs


class NoDraws:
    """Stands in for a run's generator in the exact checks. With exact oracles (no samples), full
    participation and a fixed Q (or the exact mean over Q, expectation mode) a run has nothing to
    draw, so these checks are deterministic, not Monte Carlo with a fixed seed: any draw is an
    error, raised here."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"an exact AggITD check drew a random number (rng.{name})")


NO_DRAWS: Any = NoDraws()


class FixedIndex:
    """Stands in for a run's generator when the only draw is AggITD's ``Q`` (Alg. 1 line 1).

    With exact oracles and full participation the server's ``Q ~ U{0..N}`` is the run's only
    random draw, so the exact expectation over Q is the mean over runs with ``Q = 0..N``; any
    other draw is an error.
    """

    def __init__(self, index: int) -> None:
        self.index = index

    def integers(self, low: int, high: int) -> int:
        if not low <= self.index < high:
            raise ValueError(f"fixed index {self.index} outside [{low}, {high})")
        return self.index


class LastUploads:
    """An upload observer that keeps the uploads of the last aggregation (One-Round-Upper's
    ``x^i``): ``FederatedContext(..., upload_observer=LastUploads())``."""

    def __init__(self) -> None:
        self.uploads: torch.Tensor | None = None

    def __call__(self, uploads: torch.Tensor, clients: torch.Tensor) -> None:
        self.uploads = uploads.detach().clone()


# --------------------------------------------------------------------------- strategies


def point_seed_cases(problems: st.SearchStrategy[Any]) -> st.SearchStrategy[Case]:
    """Cases of ``problems``, each with a drawn ``point_seed`` (the seed of the evaluation point,
    :func:`~theory_checks.exact_quantities.evaluation_point`)."""
    return st.builds(
        lambda problem, seed: Case(problem, {"point_seed": seed}), problems, strategies.SEEDS
    )


def bilevel_cases(**problem_kwargs: Any) -> Callable[[], st.SearchStrategy[Case]]:
    """Cases of quadratic bilevel problems (keyword sizes ``problem_kwargs``) with a drawn
    ``point_seed``."""

    def build() -> st.SearchStrategy[Case]:
        return point_seed_cases(strategies.quadratic_bilevel(**problem_kwargs))

    return build


def saved_bilevel_case(**spec: Any) -> Callable[[], Case]:
    """A saved case (a counterexample or a positive control) of a ``QuadraticBilevel.random``
    problem at point seed 0; ``spec`` is what differs from
    :func:`~theory_checks.claim.bilevel_spec`'s defaults."""
    return known_case(bilevel_spec(**spec), {"point_seed": 0})


# --------------------------------------------------------------------------- exact helpers


class ExactView:
    """Dense derivatives and per-client Hessians of one problem, with the paper's constants
    (``paper``, :func:`~theory_checks.aggitd.constants.aggitd_constants`: ``mu``, ``L_g`` and
    ``L_f`` are Assumptions 1-2's, per sample and jointly in ``(x, y)``) and the steps the
    estimator runs with: ``lam`` (HessIV) and ``beta`` (inner)."""

    def __init__(self, problem: Any, x: torch.Tensor, lam: float, beta: float) -> None:
        self.problem = problem
        self.x = x
        self.lam, self.beta = lam, beta
        self.constants = problem.constants()
        self.y_star = problem.exact_inner_solution(x)
        self.view = quadratic_view(problem, x, self.y_star)
        self.H, self.J = self.view.H, self.view.J
        self.oracles = Oracles(problem)
        self.clients = torch.arange(problem.n_clients)
        eye = torch.eye(problem.dim_y, dtype=torch.float64)
        cols = [self.oracles.hvp_inner(x, self.y_star, e, self.clients) for e in eye]
        self.client_H = torch.stack(cols, dim=2)  # (M, dy, dy): column k is H_i e_k
        self.paper = aggitd_constants(problem)
        self.mu, self.L_g, self.L_f = self.paper.mu, self.paper.L_g, self.paper.L_f
        self.eye = eye

    def grad_outer(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.view.grad_outer(self.x, y)

    @property
    def steps(self) -> dict[str, float]:
        """The view's steps as the estimators' keywords."""
        return {"neumann_step_size": self.lam, "inner_step_size": self.beta}

    def at_steps(self, make: Callable[..., Any], **params: Any) -> Any:
        """``make(**params)`` at the view's steps ``lam`` and ``beta``: the estimator or the
        algorithm a check runs."""
        return make(**self.steps, **params)

    def estimate(
        self, make: Callable[..., Any], y0: torch.Tensor, rng: Any = NO_DRAWS, **params: Any
    ) -> Any:
        """One estimate at ``(x, y0)`` of the estimator :meth:`at_steps` builds from ``params``
        (the counts, the index Q or ``expectation``), with no random draws unless ``rng`` is
        given."""
        estimator = self.at_steps(make, **params)
        estimator.init(self.problem)
        return estimator.estimate(self.problem, self.x, InnerState(y0), rng)

    def heterogeneity_sq(self, y: torch.Tensor) -> float:
        """Assumption 4's dissimilarity at ``(x, y)`` (:func:`~theory_checks.aggitd.constants.
        dissimilarity_sq`)."""
        return dissimilarity_sq(self.problem, self.x, y)

    def fedsvrg_trajectory(
        self, y0: torch.Tensor, steps: int, beta: float, tau: int
    ) -> list[torch.Tensor]:
        """Deterministic FedSVRG (Alg. 2) on a quadratic, full participation, in closed form.

        ``w_tau - y = -eta sum_{j<tau} (I - eta H_i)^j grad g(y)`` with ``eta = beta / tau``.
        """
        eta = beta / tau
        powers = [self.eye.expand_as(self.client_H)]
        for _ in range(tau - 1):
            powers.append(powers[-1] @ (self.eye - eta * self.client_H))
        step_matrix = eta * torch.stack(powers).sum(0).mean(0)
        ys = [y0]
        for _ in range(steps):
            grad = self.oracles.grad_inner(self.x, ys[-1], self.clients).mean(0)
            ys.append(ys[-1] - step_matrix @ grad)
        return ys

    def indirect_sum(self, ys: list[torch.Tensor], lam: float) -> torch.Tensor:
        """``sum_{Q=0}^{N} prod_{t=N}^{Q+1} (I - lam H(y^t)) grad_y f(x, y^Q)`` (eq. 11)."""
        total = torch.zeros_like(self.y_star)
        for y in ys:
            total = (self.eye - lam * self.H) @ total + self.grad_outer(y)[1]
        return total

    def scale(self, y: torch.Tensor) -> float:
        gx, gy = self.grad_outer(y)
        Hinv = torch.linalg.inv(self.H)
        return (
            float(gx.norm() + torch.linalg.matrix_norm(self.J @ Hinv, ord=2) * gy.norm()) + 1e-300
        )


def exact_setup(case: Case) -> tuple[ExactView, torch.Tensor, torch.Tensor]:
    """The case's exact view at its evaluation point ``(x, y0)`` (seeded by ``point_seed``),
    at the case's steps (the propositions' caps unless it names them:
    :func:`~theory_checks.aggitd.constants.neumann_step`,
    :func:`~theory_checks.aggitd.constants.inner_step`), with ``x`` and ``y0``."""
    x, y0 = evaluation_point(case.problem, case.params["point_seed"])
    return ExactView(case.problem, x, neumann_step(case), inner_step(case)), x, y0


def fixed_clients_context(problem: Any, rng: Any, subset: torch.Tensor) -> FederatedContext:
    """A context whose every round uses one given client subset (to enumerate subsets)."""
    return FederatedContext(problem, rng, sampler=FixedParticipants(subset, problem.n_clients))


# --------------------------------------------------------------------------- the affine iteration


#: Iterations an affine trajectory is followed by at a time (:meth:`AffineIteration.powers`).
CHUNK = 2048


@dataclasses.dataclass(frozen=True)
class AffineIteration:
    """``z_{k+1} = A z_k + c`` with ``z = (x, y)`` (``x`` first, ``dim_x`` entries)."""

    A: np.ndarray
    c: np.ndarray
    dim_x: int

    @property
    def radius(self) -> float:
        """Spectral radius of ``A``: below 1 iff every start converges to the fixed point."""
        return float(np.abs(np.linalg.eigvals(self.A)).max())

    def fixed_point(self) -> np.ndarray:
        """The limit of every trajectory, ``(I - A)^{-1} c``; NotMeasurable when ``A`` has
        spectral radius >= 1 (no limit to compare with)."""
        if self.radius >= 1.0:
            raise NotMeasurable(
                f"the iteration does not contract (spectral radius {self.radius:.6g})"
            )
        return np.linalg.solve(np.eye(len(self.c)) - self.A, self.c)

    def powers(self) -> list[np.ndarray]:
        """``A^j`` for ``j < CHUNK``: a trajectory is followed ``CHUNK`` iterations at a time,
        ``z_{kB + j} = A^j z_{kB}`` plus the affine part."""
        powers = [np.eye(len(self.c))]
        for _ in range(CHUNK - 1):
            powers.append(self.A @ powers[-1])
        return powers

    def mean(
        self, z0: np.ndarray, value: Callable[[np.ndarray], np.ndarray], iterations: int
    ) -> float:
        """``(1/K) sum_{k<K} value(z_k)`` from ``z0`` (the iterates ``z_0..z_{K-1}``, as
        Theorem 1 averages them), followed in chunks of ``z_{kB + j} = A^j z_{kB} + (sum_{i<j}
        A^i) c``; ``value`` maps a ``(n, d)`` stack of states to ``(n,)`` values."""
        partial = [np.zeros(len(z0))]
        for _ in range(CHUNK - 1):
            partial.append(self.A @ partial[-1] + self.c)
        P, S = np.stack(self.powers()), np.stack(partial)
        total, done, z = 0.0, 0, np.asarray(z0, dtype=np.float64)
        while done < iterations:
            block = (np.einsum("jab,b->ja", P, z) + S)[: iterations - done]
            total += float(value(block).sum())
            done += len(block)
            z = self.A @ block[-1] + self.c
        return total / iterations

    def minimum(
        self,
        z0: np.ndarray,
        value: Callable[[np.ndarray], np.ndarray],
        limit_value: float,
        max_iterations: int = 20_000_000,
    ) -> tuple[float, int]:
        """``min_k value(z_k)`` over the whole trajectory from ``z0``, and the iterations
        followed: in chunks (``z_{kB + j} - z* = A^j (z_{kB} - z*)``) until it is within
        round-off of the fixed point (``||z_k - z*|| <= 1e-12 (||z*|| + ||z0||)``), where the
        values equal ``limit_value`` to round-off, so the minimum of the prefix and of the
        limit is the infimum over all k."""
        z_star = self.fixed_point()
        powers = self.powers()
        P = np.stack(powers)
        step_B = self.A @ powers[-1]
        best, done, e = math.inf, 0, z0 - z_star
        scale = float(np.linalg.norm(z_star) + np.linalg.norm(z0)) + 1e-300
        while done < max_iterations:
            block = np.einsum("jab,b->ja", P, e) + z_star
            best = min(best, float(value(block).min()))
            done += CHUNK
            e = step_B @ e
            if float(np.linalg.norm(e)) <= 1e-12 * scale:
                return min(best, limit_value), done
        raise NotMeasurable(f"trajectory not within round-off of its limit after {done} iterations")


def affine_iteration(algorithm: Any, problem: Any, seed: int = 0) -> AffineIteration:
    """Read one deterministic iteration of ``algorithm`` off ``d + 1`` runs and validate it.

    Raises :class:`NotMeasurable` when the iteration is not affine to ``1e-8`` relative on a
    seeded random state (it draws, or its map depends on the state in another way).
    """
    dx, dy = problem.dim_x, problem.dim_y
    init = algorithm.init(problem)

    def step(z: np.ndarray) -> np.ndarray:
        zt = torch.as_tensor(z, dtype=torch.float64)
        state = init._replace(x=zt[:dx].clone(), y=zt[dx:].clone())
        new = run_algorithm(algorithm, problem, 1, NO_DRAWS, state=state)[-1]
        return torch.cat([new.state.x, new.state.y]).cpu().numpy()

    d = dx + dy
    c = step(np.zeros(d))
    A = np.stack([step(e) - c for e in np.eye(d)], axis=1)
    z = np.random.default_rng(seed).standard_normal(d)
    predicted, actual = A @ z + c, step(z)
    # Why 1e-8: an affine iteration is reproduced to round-off (~1e-15 relative); anything above
    # 1e-8 is a nonlinearity, not arithmetic.
    if np.linalg.norm(actual - predicted) > 1e-8 * (np.linalg.norm(actual) + 1.0):
        raise NotMeasurable("the expected iteration is not affine in (x, y) on this instance")
    return AffineIteration(A, c, dx)


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


def upper_round(
    problem: Any,
    ex: ExactView,
    x: torch.Tensor,
    y0: torch.Tensor,
    make: Callable[..., Any],
    **params: Any,
) -> UpperRound:
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
        ctx = FederatedContext(
            problem,
            FixedIndex(q),  # type: ignore[arg-type]
            upload_observer=recorded,
        )
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
        M=gradient_bound(problem, points),
        replay_gap=max(gaps),
    )


def upper_setup(
    case: Case,
) -> tuple[Any, ExactView, torch.Tensor, torch.Tensor, dict[str, Any], AggITDConstants]:
    """Lemma 3's conditions (:mod:`~theory_checks.aggitd.constants`): lam = min(10, 1/L_g),
    beta = min(1, lam, 1/(6 L_g)), alpha = alpha_2."""
    ex, x, y0 = exact_setup(case)
    seed = case.params["point_seed"]
    # Why tau in {4, 8}: the lemma's point is a tau-free bound under alpha_i = alpha / tau_i,
    # so large tau is the demanding case; tau = 1 makes the local path one step.
    params = {
        "inner_steps": 1 + seed % 2,
        "local_steps": (4, 8)[(seed // 2) % 2],
        "inner_step_size": ex.beta,
        "neumann_step_size": ex.lam,
        "outer_step_size": lemma3_outer_step(case),
    }
    return case.problem, ex, x, y0, params, ex.paper


#: The cases of the claims measured by :func:`upper_round`: two-level families small enough for
#: one FBO-AggITD iteration per Q.
UPPER_ROUND_CASES = closed_form_cases(("bilevel", "minimax"), max_dim=3, kappa=(1.0, 4.0))

#: How the claims measured by :func:`upper_round` run (the start of their notes).
UPPER_ROUND_NOTES = (
    "Exact oracles and full participation; one FBO-AggITD iteration per Q = 0..N (the "
    "server's only random draw, fixed by FixedIndex) gives the exact expectation over Q. "
    "Lemma 3's conditions: lambda = 1/L_g, beta = min(1, lambda, 1/(6 L_g)), alpha = "
    "1/(324 M_f^2 + 6 M_f), tau in {4, 8}, N in 1..2. The local path is replayed from the "
    "run's h and y+ with Alg. 4 and must reproduce the recorded upload x_tau^i. L_f is "
    "the Lipschitz constant of the full grad F_i, M the max of ||grad F_i|| over the "
    "visited points."
)

#: The constructor of the claims measured by :func:`upper_round` at :func:`upper_setup`'s
#: conditions (Lemma 3's drift, Theorem 2's D_h): two cases on fast, each N + 1 iterations.
upper_round_claim = lemma3_claim.but(strategy=UPPER_ROUND_CASES, max_examples=TWO_FAST_CASES)


# --------------------------------------------------------------------------- Prop. 1


def _prop1_bias_at(
    claim: Claim,
    make: Callable[..., Any],
    ex: Any,
    x: torch.Tensor,
    y0: torch.Tensor,
    n: int,
    tau: int,
) -> tuple[float, float, float, Any]:
    """:func:`check_prop1_bias` at one ``N = n`` from ``y0`` with ``tau`` local steps: ``B_I``,
    eq. (4)'s bound with the constants read along the inner trajectory, the round-off slack and
    the run's calls."""
    out = ex.estimate(make, y0, inner_steps=n, local_steps=tau, expectation=True)
    y_n = out.state.y
    gx, gy = ex.grad_outer(y_n)
    target = ex.J @ torch.linalg.solve(ex.H, gy)
    bias_sq = float(((gx - out.value) - target).norm() ** 2)
    ys = out.aux["trajectory"] + [ex.y_star]
    params = {
        "inner_steps": n,
        "neumann_step_size": ex.lam,
        "inner_step_size": ex.beta,
        "mu": ex.mu,
        "L_g": ex.L_g,
        "L_f": ex.L_f,
        "M": gradient_bound(ex.problem, [(x, y) for y in ys]),
        "initial_gap_sq": float((y0 - ex.y_star).norm() ** 2),
        "sigma_g_sq": max(ex.heterogeneity_sq(y) for y in ys),
    }
    bound = claim.evaluate_bound(ex.constants, params)
    return bias_sq, bound, (IDENTITY_RTOL * ex.scale(y_n)) ** 2, out.calls


def check_prop1_bias(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """B_I = ||E_Q h^I - J H^{-1} grad_y f(x, y^N)||^2 <= eq. (4) at every N on a grid, from the
    case's start y^0 and from y^0 = y*.

    Why both starts: the bound holds for every warm start; from y* its initial-gap term is 0
    and, on clients that agree (sigma_g = 0), only the truncation term 4 L_g^2 M^2 (1 - lambda
    mu)^{2N+2} / mu^2 is left, which decays geometrically in N: an error in the estimator's
    weights that does not decay (lambda N for lambda (N + 1)) exceeds it at the grid's largest
    N. From a random start the initial-gap and drift terms, with Assumption 2's joint L_f, are
    too large for that.
    """
    ex, x, y_start = exact_setup(case)
    tau = 1 + case.params["point_seed"] % 3
    series, worst, last = [], -math.inf, (0.0, 0.0)
    ratios = {}
    for start, y0 in (("start", y_start), ("y*", ex.y_star)):
        worst_ratio = 0.0
        for n in (0, 1, 2, 3, 5, 8, 12, 16):
            bias_sq, bound, slack, calls = _prop1_bias_at(claim, make, ex, x, y0, n, tau)
            worst = max(worst, bias_sq - bound - slack)
            worst_ratio = max(worst_ratio, bias_sq / (bound + slack))
            series += [
                SeriesPoint(name, "inner_steps", n, value, calls.oracle_calls, calls.comm_rounds)
                for name, value in (
                    (f"measured from {start}", bias_sq),
                    (f"bound from {start}", bound),
                )
            ]
            if start == "start":
                last = (bias_sq, bound)
        ratios[start] = worst_ratio
    details = {
        "local_steps": tau,
        "worst_ratio_from_start": ratios["start"],
        "worst_ratio_from_y_star": ratios["y*"],
    }
    return bound_on_grid(last, worst, series, "N", details=details)
