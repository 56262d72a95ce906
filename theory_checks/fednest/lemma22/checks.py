"""The checks of FedNest's Lemma 2.2 (:mod:`theory_checks.fednest.lemma22`): the probe that reads
``E[H_hat]`` column by column, (13b)'s identity and (14a), the bias of (15) per client and on
the client average with its constants, and (14b) by Monte Carlo with its bounds under the two
readings of A1-A2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from problems import ProblemConstants
from problems import QuadraticBilevel
from testbed.federation.context import FederatedContext
from testbed.federation.replicates import NotBatchable
from theory_checks import stats
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.decision import Design
from theory_checks.decision import Hoeffding
from theory_checks.exact_quantities import evaluation_point
from theory_checks.fednest.common import client_matrices
from theory_checks.fednest.common import expected_ihgp
from theory_checks.fednest.common import fedihgp
from theory_checks.fednest.common import sequential_test
from theory_checks.fednest.constants import assumption_constants
from theory_checks.fednest.constants import fednest_constants
from theory_checks.fednest.constants import neumann_scale
from theory_checks.measurements import BoundOnGrid
from theory_checks.measurements import bound_at_point
from theory_checks.measurements import identity_residual
from theory_checks.replicates import shared
from theory_checks.streams import design_rngs
from theory_checks.tolerances import IDENTITY_RTOL

# ======================================================================================= the probe


class LinearOuterProbe:
    """``problem`` with every outer loss replaced by ``v^T y``, so ``grad_y f_i = v``.

    FedIHGP applied to the probe returns ``H_hat v``; probing ``v = e_j`` reads the columns of
    ``E[H_hat]`` (Lemma 2.2 is a statement about a matrix). ``v`` is one probe ``(dy,)``, or one
    per replicate ``(R, dy)`` for :class:`~testbed.federation.replicates.Replicates`, whose
    evaluated rows are ``R`` equal blocks (replicate-major): block ``r`` probes ``v[r]``.
    """

    def __init__(self, base: Any, v: torch.Tensor) -> None:
        self.base, self.v = base, v
        self.kind, self.n_clients = base.kind, base.n_clients
        self.dim_x, self.dim_y = base.dim_x, base.dim_y
        # the base's samples per client, the bound of its minibatch draws (sample_batch)
        self.n_samples = getattr(base, "n_samples", 0)
        self._constants: ProblemConstants | None = None

    @property
    def id(self) -> str:
        return f"probe({self.base.id})"

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Any
    ) -> torch.Tensor:
        v = self.v
        if v.ndim == 2:  # one probe per replicate: each to its block of rows
            v = v.repeat_interleave(y.shape[0] // v.shape[0], dim=0)
        return (y * v).sum(-1) + 0.0 * x.sum(-1)

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Any
    ) -> torch.Tensor:
        return self.base.inner_loss(x, y, clients, batch)

    def sample_batch(self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int) -> Any:
        return self.base.sample_batch(rng, clients, batch_size)

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.base.initial_point()

    def constants(self) -> ProblemConstants:
        # the base's, computed once: FedIHGP asks at every run (15% of check_abs_error's time)
        if self._constants is None:
            self._constants = self.base.constants()
        return self._constants


# ========================================================================================== checks


def _expected_hessian_inverse(
    estimator: Any, problem: Any, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """``E[H_hat]`` of FedIHGP over ``N'``, column by column: the expected IHGP of the probe
    whose outer gradient is ``e_j`` (:class:`LinearOuterProbe`)."""
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    columns = [expected_ihgp(estimator, LinearOuterProbe(problem, e), x, y)[0] for e in eye]
    return torch.stack(columns, dim=1)


def check_inverse_hessian_identity(
    claim: Claim, case: Case, make: Callable[..., Any]
) -> Measurement:
    """``H^{-1} - E[H_hat] = H^{-1} (I - H/l)^N`` with ``E`` over ``N'`` as a finite sum."""
    problem = case.problem
    x, y = evaluation_point(problem, case.params["point_seed"])
    terms = int(case.params["neumann_terms"])
    lam = 1.0 / neumann_scale(case)
    estimator = fedihgp(make, terms, lam)
    expected = _expected_hessian_inverse(estimator, problem, x, y)
    H = client_matrices(problem, x, y)["H"].mean(0)
    H_inv = torch.linalg.inv(H)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    predicted = H_inv @ torch.linalg.matrix_power(eye - lam * H, terms)
    scale = float(torch.linalg.matrix_norm(H_inv, ord=2))
    relative = float(torch.linalg.matrix_norm(H_inv - expected - predicted, ord=2)) / scale
    return identity_residual(relative, details={"neumann_terms": terms, "l_g1": 1.0 / lam})


def inverse_hessian_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(14a): ``(1/mu_g) ((kappa_g - 1)/kappa_g)^N``."""
    kappa = params["l_g1"] / params["mu_g"]
    return ((kappa - 1.0) / kappa) ** params["neumann_terms"] / params["mu_g"]


def check_inverse_hessian_bound(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """``||H^{-1} - E[H_hat]|| <= (1/mu_g)((kappa_g - 1)/kappa_g)^N`` for N on a grid."""
    problem = case.problem
    x, y = evaluation_point(problem, case.params["point_seed"])
    pc = fednest_constants(problem).as_dict()
    lam = 1.0 / neumann_scale(case)
    H = client_matrices(problem, x, y)["H"].mean(0)
    H_inv = torch.linalg.inv(H)
    scale = float(torch.linalg.matrix_norm(H_inv, ord=2))
    grid = BoundOnGrid("neumann_terms", IDENTITY_RTOL * scale)
    # Why this grid: 1..16 covers the regime N < kappa (bound near 1/mu) and N > kappa (several
    # e-folds) at kappa <= 30 while keeping sum(N) * dim_y Hessian rounds small.
    for terms in (1, 2, 4, 8, 16):
        estimator = fedihgp(make, terms, lam)
        error = float(
            torch.linalg.matrix_norm(
                H_inv - _expected_hessian_inverse(estimator, problem, x, y), ord=2
            )
        )
        bound = claim.evaluate_bound(problem.constants(), {**pc, "neumann_terms": terms})
        grid.add(terms, error, bound, comm_rounds=terms)
    return grid.measurement("<= at every N on the grid", details={"kappa_g": pc["kappa_g"]})


def _indirect_bias_parts(
    case: Case, make: Callable[..., Any], point_scale: float = 1.0
) -> dict[str, Any]:
    """``E[h^I_i]`` per client and the plug-in ``grad_bar^I f_i`` at ``(x, y*(x))``."""
    problem = case.problem
    x, _ = evaluation_point(problem, case.params["point_seed"])
    x = point_scale * x
    y = problem.exact_inner_solution(x)
    terms = int(case.params["neumann_terms"])
    pc = fednest_constants(problem).as_dict()
    estimator = fedihgp(make, terms, 1.0 / neumann_scale(case))
    mean_p, _, _ = expected_ihgp(estimator, problem, x, y)
    ctx = FederatedContext(problem, np.random.default_rng(0))
    h, direct, indirect = estimator.direction(ctx, x, y, mean_p)  # linear in p: E over N'
    mats = client_matrices(problem, x, y)
    J_bar, H_bar = mats["J"].mean(0), mats["H"].mean(0)
    plug_in_clients = -(J_bar @ torch.linalg.solve(H_bar, mats["gy"].T)).T  # (M, dx), eq (8b)
    plug_in = plug_in_clients.mean(0)
    # l_{f,0} at the case's point: the smallest Lipschitz constant of f_i on a region holding it
    # (the whole space when every f_i is affine, where grad f_i is constant)
    pc["l_f0"] = float(torch.cat([mats["gx"], mats["gy"]], dim=1).norm(dim=1).max())
    return {
        "problem": problem,
        "x": x,
        "y": y,
        "terms": terms,
        "pc": pc,
        "h": h,
        "direct": direct,
        "indirect": indirect,
        "plug_in_clients": plug_in_clients,
        "plug_in": plug_in,
        "J_bar": J_bar,
        "H_bar": H_bar,
        "gy": mats["gy"].mean(0),
        "scale": float(
            torch.linalg.matrix_norm(J_bar @ torch.linalg.inv(H_bar), ord=2)
            * mats["gy"].norm(dim=1).max()
        )
        + 1e-300,
    }


def paper_bias_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(15): ``b = kappa_g l_{f,1} ((kappa_g - 1)/kappa_g)^N``."""
    kappa = params["l_g1"] / params["mu_g"]
    return kappa * params["l_f1"] * ((kappa - 1.0) / kappa) ** params["neumann_terms"]


def proof_bias_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(15) with the constant its proof gives: ``kappa_g l_{f,0}
    ((kappa_g - 1)/kappa_g)^N``, ``l_{f,0} >= ||grad f_i||``: the bound of ``||J|| ||H^{-1} -
    E H_hat|| ||grad_y f||`` where the paper prints ``l_{f,1}``."""
    return paper_bias_bound(constants, {**params, "l_f1": params["l_f0"]})


#: The readings of (15)'s constant ``b`` (``params["constant"]``): as printed, and with the
#: ``l_{f,0}`` its proof gives; the per-client statement is refuted only if both fail.
BIAS_CONSTANTS = {"printed": paper_bias_bound, "proof": proof_bias_bound}


def check_per_client_bias(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """(15) for every client: ``max_i ||E[h^I_i] - grad_bar^I f_i|| <= b``, with ``b`` as printed
    or with its proof's constant (``params["constant"]``, :data:`BIAS_CONSTANTS`)."""
    parts = _indirect_bias_parts(case, make)
    gaps = (parts["indirect"] - parts["plug_in_clients"]).norm(dim=1)
    measured = float(gaps.max())
    bound_fn = BIAS_CONSTANTS[str(case.params.get("constant", "printed"))]
    bound = bound_fn(parts["problem"].constants(), {**parts["pc"], "neumann_terms": parts["terms"]})
    details = {
        "neumann_terms": parts["terms"],
        "n_clients": parts["problem"].n_clients,
        "l_f0": parts["pc"]["l_f0"],
        "l_f1": parts["pc"]["l_f1"],
    }
    return _bias_within(measured, bound, parts, "max_i <=", details)


def _bias_within(
    measured: float, bound: float, parts: dict[str, Any], relation: str, details: dict[str, Any]
) -> Measurement:
    """(15)'s checks: ``measured <= bound`` up to ``IDENTITY_RTOL`` of the bias's scale (the
    measured bias is a difference of float64 sums of that size)."""
    slack = IDENTITY_RTOL * parts["scale"]
    return Measurement(
        measured, bound, measured <= bound + slack, relation, slack=slack, details=details
    )


def averaged_bias_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """Corrected (15): ``||J_bar|| ||grad_y f|| (1/mu_g) ((kappa_g - 1)/kappa_g)^N``."""
    kappa = params["l_g1"] / params["mu_g"]
    return (
        params["cross_norm"]
        * params["grad_y_norm"]
        * ((kappa - 1.0) / kappa) ** params["neumann_terms"]
        / params["mu_g"]
    )


def check_averaged_bias(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Client-averaged (15) with the explicit constant: ``||E[h] - grad_bar f(x, y)|| <= bound``
    (``E[h] - grad_bar f = E[h^I] - grad_bar^I f`` since the direct part has no ``N'``)."""
    parts = _indirect_bias_parts(case, make, float(case.params.get("point_scale", 1.0)))
    plug_in_total = parts["direct"].mean(0) + parts["plug_in"]
    measured = float((parts["h"] - plug_in_total).norm())
    params = {
        **parts["pc"],
        "neumann_terms": parts["terms"],
        "cross_norm": float(torch.linalg.matrix_norm(parts["J_bar"], ord=2)),
        "grad_y_norm": float(parts["gy"].norm()),
    }
    bound = claim.evaluate_bound(parts["problem"].constants(), params)
    details = {"neumann_terms": parts["terms"], "grad_y_norm": params["grad_y_norm"]}
    return _bias_within(measured, bound, parts, "<=", details)


def check_paper_constant(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Client-averaged (15) with the paper's constant ``b = kappa_g l_{f,1} rho^N``."""
    parts = _indirect_bias_parts(case, make, float(case.params["point_scale"]))
    measured = float((parts["h"] - parts["direct"].mean(0) - parts["plug_in"]).norm())
    bound = claim.evaluate_bound(
        parts["problem"].constants(), {**parts["pc"], "neumann_terms": parts["terms"]}
    )
    details = {"grad_y_norm": float(parts["gy"].norm()), "l_f1": parts["pc"]["l_f1"]}
    return _bias_within(measured, bound, parts, "<=", details)


# --------------------------------------------------------------------------- (14b)


def _sample_hessian_range(problem: QuadraticBilevel) -> tuple[float, float]:
    """``min`` and ``max`` eigenvalue over every client's sample Hessians ``A_ij``."""
    if problem.A_samples is None:
        raise NotMeasurable("built without samples")
    eig = torch.linalg.eigvalsh(problem.A_samples)
    return float(eig.min()), float(eig.max())


def abs_error_bound_as_stated(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(14b): ``2 / mu_g`` with A2's ``mu_g`` under the case's reading of A1-A2
    (:func:`~theory_checks.fednest.constants.assumption_constants`: ``min_i lambda_min(H_i)`` of
    the expected Hessians, or ``min_{i, zeta}`` over the sample Hessians)."""
    return 2.0 / params["mu_g"]


def abs_error_bound_per_sample(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(14b) with per-sample constants (which Assumptions A-B do not state): ``2 / mu_s``, ``mu_s``
    the smallest eigenvalue of any sample Hessian (and ``l`` >= the largest)."""
    return 2.0 / params["mu_samples"]


# Why a quarter of the bound: the effect (14b) must resolve, i.e. a case whose E Z is at most
# 3/4 of the bound is decided "holds" (and one at 5/4 of it "fails"). Half the bound was too
# coarse: a thorough-profile case has E Z = 1.11 against 2 (0.55 of the bound), which the
# half-width of 1.0 left undecided. The refutation seen (5.5 vs 2) is far larger; the Hoeffding
# sample size grows like 1/effect^2, so this costs 4x the draws of half (~70 draws, < 1 s).
ABS_ERROR_EFFECT = 0.25
# Why 2000 at most: a draw costs dim_y FedIHGP runs (~1 ms each); beyond that the check would
# leave the fast budget, and the interval is recorded undecided instead of guessing.
ABS_ERROR_MAX_DRAWS = 2000


def _abs_error_constants(
    claim: Claim, case: Case, mu_s: float, l_s: float
) -> tuple[str, float, float]:
    """The reading of A1-A2 (``"y block per sample"`` for the per-sample claim), the scale ``l``
    FedIHGP divides by and A2's ``mu_g``: A1-A2's (:mod:`theory_checks.fednest.constants`,
    ``l_{g,1}`` joint in ``(x, y)``) under the case's reading, on the expected or on each
    sample's Hessian; the largest sample eigenvalue ``l_s`` and ``mu_s`` in the per-sample
    claim."""
    per_sample_y = claim.bound is abs_error_bound_per_sample
    l_g = l_s if per_sample_y else neumann_scale(case)
    mu_g = mu_s if per_sample_y else assumption_constants(case).mu_g
    reading = (
        "y block per sample" if per_sample_y else str(case.params.get("assumptions", "expected"))
    )
    return reading, l_g, mu_g


def _abs_error_looks(design: Design, bound: float, value_range: float) -> list[int]:
    """The draws after which :func:`check_abs_error` looks, fixed before sampling: two looks
    (:func:`sequential_test`), each at half the case's rate (one bounded side); the last has the
    draws that resolve ``ABS_ERROR_EFFECT`` of ``bound`` by Hoeffding's bound, the first a
    quarter of them, which refutes a gross excess (the saved counterexample: 5.5 against 2) at
    a quarter of the cost, confirmation included."""
    looks_rate = design.false_fail_rate / 2.0
    total = design.samples(
        min(
            ABS_ERROR_MAX_DRAWS,
            stats.min_num_samples_for_hoeffding(
                2.0 * ABS_ERROR_EFFECT * bound, value_range, 2.0 * looks_rate
            ),
        )
    )
    return sorted({max(1, total // 4), total})


@dataclasses.dataclass(frozen=True)
class AbsErrorSetup:
    """What :func:`check_abs_error` knows of a case before it draws (the same for every
    calibration seed): the reading of A1-A2 and its constants (:func:`_abs_error_constants`),
    the sample Hessians' range ``[mu_s, l_s]``, the point ``(x, y)``, ``H^{-1}``, the bound and
    the draws' value range."""

    reading: str
    l: float
    mu_g: float
    mu_samples: float
    l_samples: float
    mu_clients: float
    x: torch.Tensor
    y: torch.Tensor
    H_inv: torch.Tensor
    bound: float
    value_range: float


def abs_error_setup(claim: Claim, case: Case) -> AbsErrorSetup:
    """:class:`AbsErrorSetup` of ``case``: the value range is ``||H^{-1}|| + (1/l) sum_{n<N}
    r^n`` with ``r = max(|1 - mu_s/l|, |1 - l_s/l|)`` bounding every factor ``I - H_s/l``."""
    problem = case.problem
    terms = int(case.params["neumann_terms"])
    mu_s, l_s = _sample_hessian_range(problem)
    constants = problem.constants()
    reading, l_g, mu_g = _abs_error_constants(claim, case, mu_s, l_s)
    x, y = evaluation_point(problem, case.params["point_seed"])
    H_inv = torch.linalg.inv(client_matrices(problem, x, y)["H"].mean(0))
    bound = claim.evaluate_bound(
        constants, {"mu_samples": mu_s, "mu_g": mu_g, "neumann_terms": terms}
    )
    contraction = max(abs(1.0 - mu_s / l_g), abs(1.0 - l_s / l_g))
    value_range = (
        float(torch.linalg.matrix_norm(H_inv, ord=2))
        + sum(contraction**n for n in range(terms)) / l_g
    )
    return AbsErrorSetup(
        reading, l_g, mu_g, mu_s, l_s, constants.mu_clients, x, y, H_inv, bound, value_range
    )


class AbsErrorDraws:
    """The draws ``Z_j`` of :func:`check_abs_error`, computed a block at a time.

    Draw ``j`` runs FedIHGP once per probe ``e_k`` from a fresh generator ``design.rng(j)``
    (each probe on the same stream: the same subsets and samples) with ``N' = last``; column
    ``k`` of ``H_hat_n`` is probe ``k``'s vector after round ``n``, and ``Z_j = (1/(N'+1))
    sum_n ||H^{-1} - H_hat_n||``. A block of draws is one batched run of every draw's probes
    (:meth:`~testbed.estimators.fednest.FedIHGP.ihgp_replicates`), each replicate drawing what
    its own run draws (under full participation its rounds' minibatch indices in one call,
    :meth:`~testbed.federation.replicates.Replicates.drawn_ahead`); an estimator that changes
    FedIHGP's ``ihgp`` (a planted mistake) runs each probe of each draw through it, as the
    unbatched check did.
    """

    def __init__(
        self,
        estimator: Any,
        problem: Any,
        x: torch.Tensor,
        y: torch.Tensor,
        H_inv: torch.Tensor,
        last: int,
        design: Design,
    ) -> None:
        self.estimator, self.problem, self.x, self.y = estimator, problem, x, y
        self.H_inv, self.last, self.design = H_inv, last, design
        self.probes = torch.eye(problem.dim_y, dtype=torch.float64)

    def paths(self, draws: range) -> torch.Tensor:
        """Every probe's path for each draw of ``draws``: ``(N' + 1, draws, probes, dy)``."""
        dy = self.problem.dim_y
        probes = self.probes.repeat(len(draws), 1)  # replicate (j, k) probes e_k
        try:
            side = self.estimator.replicates(
                LinearOuterProbe(self.problem, probes), self._rngs(draws)
            )
            paths = self.estimator.ihgp_replicates(side, self.x, self.y, self.last)
        except NotBatchable:  # one run per replicate, from fresh generators
            runs = zip(probes, self._rngs(draws), strict=True)
            paths = torch.stack(
                [torch.stack(self._ihgp(probe, rng).path) for probe, rng in runs], dim=1
            )
        return paths.reshape(self.last + 1, len(draws), dy, dy)

    def _rngs(self, draws: range) -> list[np.random.Generator]:
        """Replicate ``(j, k)``'s generator: draw ``j``'s stream, afresh for each probe (made
        at once, :func:`~theory_checks.streams.design_rngs`: a third of a seed's time was
        ``design.rng``'s hashing of the entropy, one generator at a time)."""
        keys = [(j,) for j in draws for _ in range(self.problem.dim_y)]
        return design_rngs(self.design, keys)

    def _ihgp(self, probe: torch.Tensor, rng: np.random.Generator) -> Any:
        ctx = self.estimator.context(LinearOuterProbe(self.problem, probe), rng)
        return self.estimator.ihgp(ctx, self.x, self.y, truncation_index=self.last)

    def values(self, draws: range) -> list[float]:
        """``Z_j`` for each draw of ``draws``."""
        H_hats = self.paths(draws).permute(1, 0, 3, 2)  # (draws, N' + 1, dy, dy): column k, e_k
        errors = torch.linalg.matrix_norm(self.H_inv - H_hats, ord=2)
        # each row's mean as the row alone gives it (the same reduction of a contiguous row;
        # tests/test_fednest_replicates.py compares them)
        return errors.mean(dim=1).tolist()

    def look_ahead(self, looks: list[int]) -> Callable[[int], float]:
        """``draw(j)`` for :func:`~theory_checks.fednest.common.sequential_test`: the first
        draw asked for up to a look computes every draw up to that look as one block."""
        ready: dict[int, float] = {}

        def draw(j: int) -> float:
            if j not in ready:
                stop = min((look for look in looks if look > j), default=j + 1)
                ready.update(zip(range(j, stop), self.values(range(j, stop)), strict=True))
            return ready.pop(j)

        return draw


def check_abs_error(
    claim: Claim, case: Case, make: Callable[..., Any], design: Design
) -> Measurement:
    """(14b): ``E||H^{-1} - H_hat|| <= bound`` by Monte Carlo over the minibatches and subsets.

    Each draw j runs FedIHGP once per probe ``grad_y f_i = e_k`` (same stream, so the same
    subsets and samples) with ``N' = N - 1``: the vectors after round n are the columns of
    ``H_hat`` for ``N' = n``, so ``Z_j = (1/N) sum_n ||H^{-1} - H_hat_n||`` is the exact
    expectation over ``N'`` given the samples (Rao-Blackwell). Every factor ``I - H_s / l`` has
    norm at most ``r = max(|1 - mu_s/l|, |1 - l_s/l|)``, so ``0 <= Z_j <= ||H^{-1}|| +
    (1/l) sum_{n<N} r^n`` (the value range). The statistical test: the mean of ``n`` draws, by
    Hoeffding's bound (rigorous for bounded values), against the region ``E Z <= bound``, at
    the looks :func:`_abs_error_looks` fixes before sampling. The claim's bound picks the
    constants and ``l`` (:func:`_abs_error_constants`): (14b) as stated
    (:func:`abs_error_bound_as_stated`, A1-A2's ``l_{g,1}`` and ``mu_g`` under the case's
    reading) or the ``y``-block per-sample bound (:func:`abs_error_bound_per_sample`). What
    does not depend on the draws (:func:`abs_error_setup`) is computed once for a calibration's
    seeds (:func:`~theory_checks.replicates.shared`, keyed by the problem object the seeds
    share), and the draws a block at a time (:class:`AbsErrorDraws`).
    """
    setup = shared(
        ("abs_error setup", claim.id, claim.bound, case.problem, repr(sorted(case.params.items()))),
        lambda: abs_error_setup(claim, case),
    )
    terms = int(case.params["neumann_terms"])
    estimator = fedihgp(
        make, terms, 1.0 / setup.l, participation=case.params["participation"], batch_size=1
    )
    looks = _abs_error_looks(design, setup.bound, setup.value_range)
    draws = AbsErrorDraws(estimator, case.problem, setup.x, setup.y, setup.H_inv, terms - 1, design)
    test, samples = sequential_test(
        "E||H^{-1} - H_hat||",
        draws.look_ahead(looks),
        looks,
        design.false_fail_rate,
        setup.bound,
        evidence=lambda values: Hoeffding(float(np.mean(values)), setup.value_range, len(values)),
    )
    estimate = float(np.mean(samples))
    return bound_at_point(
        estimate,
        setup.bound,
        True,
        "E <= bound (Hoeffding)",
        "neumann_terms",
        terms,
        details={
            "mu_clients": setup.mu_clients,
            "mu_samples": setup.mu_samples,
            "mu_g": setup.mu_g,
            "assumptions": setup.reading,
            "l_samples": setup.l_samples,
            "l": setup.l,
            "draws": len(samples),
            "looks": looks,
            "value_range": setup.value_range,
        },
        tests=(test,),
    )
