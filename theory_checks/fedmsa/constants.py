"""FedMSA's constants as Tarzanagh, Li, Sharma & Oymak (2023) define them, its explicit step and
batch conditions, and its assumptions as hypotheses on a case (:mod:`theory_checks.hypotheses`).
Every FedMSA check takes its constants from here, so a check and the assumptions it is judged
against use one definition.

The maps are those of eq. (10) (bilevel, minimax: one level ``z = [w; v]``) and eq. (11)
(compositional: levels ``z^1..z^N``), read off the families' arrays
(:func:`~theory_checks.fedmsa.common.reference_maps`); they are affine, so every constant below
is a norm or an eigenvalue of their Jacobians (exact). For level ``n``, ``J^m_{n,n}`` is client
``m``'s Jacobian of ``S^{m,n}`` in ``z^n`` and ``J^m_{n,n-1}`` in ``z^{n-1}`` (``x`` for n = 1);
bars are client averages (Algorithm 1 averages; (Fed-MSA) and Def. 2.2 write sums).

Assumptions A-C (Sec. 3):

- **A1**: ``S^n(z^{n-1}, .) = 0`` has a unique solution: ``J-bar_{n,n}`` is invertible.
- **A2**: ``z^{n,*}(.)`` is ``L_{z,n}``-Lipschitz: ``L_{z,1} = ||J-bar_{1,1}^{-1} J-bar_{1,0}||``.
- **A3**: ``S^{m,n}`` is ``L_{s,n}``-Lipschitz. As printed, in its first argument; Lemma B.1's
  proof uses it in ``z^n``: ``L_{s,n} = max_m ||J^m_{n,n}||`` (the proof's
  reading), or jointly ``max_m ||[J^m_{n,n-1}, J^m_{n,n}]||`` (the larger, :data:`JOINT`).
- **A5**: one-point strong monotonicity ``<z^n - z^{n,*}, S^{m,n}(z^{n-1}, z^n)> >= lambda_n
  ||z^n - z^{n,*}||^2`` (the printed ``<=`` is a typo: as printed it is no monotonicity condition).
  As printed it is imposed on every client at the global fixed point ``z^{n,*}``, which for affine
  maps needs every client's map to vanish there (a shared fixed point) and ``lambda_n <= min_m
  lambda_min(sym J^m_{n,n})`` (:data:`A5_PER_CLIENT`); Lemma B.1's proof uses it for the averaged
  map only, ``lambda_n <= lambda_min(sym J-bar_{n,n})`` (:data:`A5_AVERAGED`).
- **C**: ``{P^m}``, ``{S^{m,n}}`` are ``tau``-heterogeneous (Def. 2.2 with averages):
  ``tau = max_m ||J^m - J-bar||`` of the joint map (:func:`heterogeneity_tau`).

Explicit conditions of the proof (App. B): Lemma B.1 ``beta_n <= lambda_n / (2 L_{s,n})``
(:data:`LEMMA_B1_STEP`), Lemma B.2 ``alpha <= 1 / (2 L_{z,1}^2)`` (both on a rate check's steps:
:data:`THEOREM31_STEPS`), and the
final parameter choice's initial batch ``b_0 = K R`` (:data:`B0_PROOF`), which Algorithm 1's box
omits (its round 0 draws the same batch ``b`` as every round). The theorem's ``alpha, beta =
O(1/(tau K))`` and ``rho = Theta(1/R)`` hide constants and are not checkable predicates.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from problems import LinearCompositional
from theory_checks.fedmsa.common import fixed_point_Z
from theory_checks.fedmsa.common import joint_jacobian
from theory_checks.fedmsa.common import reference_maps
from theory_checks.fedmsa.common import single_timescale_step
from theory_checks.fedmsa.common import state_sizes
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import at_least
from theory_checks.hypotheses import at_most

REF = "Tarzanagh et al. 2023 (FedMSA)"
#: The reading of A3's ``L_{s,n}`` jointly in ``(z^{n-1}, z^n)`` (case parameter ``lipschitz``).
JOINT = "joint"


@dataclasses.dataclass(frozen=True)
class FedMSAConstants:
    """Assumptions A and C's constants of one problem, per level ``n = 1..N`` (lists).

    Attributes:
        lam: A5's ``lambda_n`` for the averaged map, ``lambda_min(sym J-bar_{n,n})``.
        lam_clients: A5's ``lambda_n`` per client as printed, ``min_m lambda_min(sym
            J^m_{n,n})``.
        offset: ``max_m ||S^{m,n}(x, z*(x))||`` relative to ``||S^m||``'s scale, maximised over
            ``x`` (0 when the clients share the fixed point, as per-client A5 needs).
        L_s: A3's ``L_{s,n} = max_m ||J^m_{n,n}||`` (in ``z^n``, Lemma B.1's use).
        L_s_joint: ``max_m ||[J^m_{n,n-1}, J^m_{n,n}]||`` (in both arguments).
        sigma_min: ``sigma_min(J-bar_{n,n})`` (A1: > 0).
        L_z1: A2's ``L_{z,1} = ||J-bar_{1,1}^{-1} J-bar_{1,0}||``.
        tau: Assumption C's heterogeneity.
    """

    lam: tuple[float, ...]
    lam_clients: tuple[float, ...]
    offset: float
    L_s: tuple[float, ...]
    L_s_joint: tuple[float, ...]
    sigma_min: tuple[float, ...]
    L_z1: float
    tau: float

    def lipschitz(self, reading: str | None) -> tuple[float, ...]:
        """``L_{s,n}`` under a reading of A3 (``"joint"`` or the proof's, in ``z^n``)."""
        return self.L_s_joint if reading == JOINT else self.L_s

    def lemma_b1_cap(self, reading: str | None = None, per_client: bool = False) -> float:
        """Lemma B.1's ``min_n lambda_n / (2 L_{s,n})``, with the averaged map's ``lambda_n``
        or (``per_client``) A5's as printed."""
        lams = self.lam_clients if per_client else self.lam
        return min(lam / (2.0 * L) for lam, L in zip(lams, self.lipschitz(reading), strict=True))

    @property
    def lemma_b2_cap(self) -> float:
        """Lemma B.2's ``1 / (2 L_{z,1}^2)`` (infinite when ``z*`` does not depend on x)."""
        return 1.0 / (2.0 * self.L_z1**2) if self.L_z1 > 0 else float("inf")


def levels(problem: Any) -> list[int]:
    """The sizes of the levels ``z^1..z^N``: eq. (10) has one, ``z = [w; v]``."""
    if isinstance(problem, LinearCompositional):
        return list(problem.dims[1:])
    return [state_sizes(problem)[1]]


def heterogeneity_tau(problem: Any) -> float:
    """``tau = max_m ||J^m - J||`` of the joint map (Def. 2.2 with averages, Assumption C)."""
    J_m = joint_jacobian(problem, per_client=True)
    return float(torch.linalg.matrix_norm(J_m - J_m.mean(0), ord=2).max())


def _spectral(matrix: torch.Tensor) -> float:
    return float(torch.linalg.matrix_norm(matrix, ord=2).max())


def fedmsa_constants(problem: Any) -> FedMSAConstants:
    """Assumptions A and C's constants of ``problem`` (exact: the maps are affine)."""
    dx, _ = state_sizes(problem)
    J_m = joint_jacobian(problem, per_client=True)  # (M, d, d), rows (P, S), columns (x, Z)
    J = J_m.mean(0)
    lam, lam_clients, L_s, L_s_joint, sigma_min = [], [], [], [], []
    start, previous = dx, slice(0, dx)
    for size in levels(problem):
        block = slice(start, start + size)
        own_m, own = J_m[:, block, block], J[block, block]
        sym = 0.5 * (own + own.T)
        sym_m = 0.5 * (own_m + own_m.transpose(1, 2))
        lam.append(float(torch.linalg.eigvalsh(sym).min()))
        lam_clients.append(float(torch.linalg.eigvalsh(sym_m).min()))
        L_s.append(_spectral(own_m))
        L_s_joint.append(_spectral(torch.cat([J_m[:, block, previous], own_m], dim=2)))
        sigma_min.append(float(torch.linalg.svdvals(own).min()))
        previous, start = block, start + size
    first = slice(dx, dx + levels(problem)[0])
    L_z1 = _spectral(torch.linalg.solve(J[first, first], J[first, :dx]))
    return FedMSAConstants(
        tuple(lam),
        tuple(lam_clients),
        _client_offset(problem),
        tuple(L_s),
        tuple(L_s_joint),
        tuple(sigma_min),
        L_z1,
        heterogeneity_tau(problem),
    )


def _client_offset(problem: Any) -> float:
    """``max_m ||S^m(x, z*(x))||`` over ``x`` in ``{0, e_1, .., e_dx}`` (affine in x, so zero at
    those points means zero everywhere), relative to the largest client map value there."""
    dx, _ = state_sizes(problem)
    xs = torch.cat([torch.zeros(1, dx, dtype=torch.float64), torch.eye(dx, dtype=torch.float64)])
    _, S = reference_maps(problem, xs, fixed_point_Z(problem, xs))
    _, S0 = reference_maps(problem, xs, torch.zeros_like(fixed_point_Z(problem, xs)))
    scale = float(S0.norm(dim=-1).max()) + 1.0
    return float(S.norm(dim=-1).max()) / scale


# --------------------------------------------------------------------------- step rules


def lemma_b1_step(case: Any) -> float:
    """Lemma B.1's ``beta``: the case's ``inner_step_size``, else the largest the lemma allows,
    ``min_n lambda_n / (2 L_{s,n})`` with A5's ``lambda_n`` as printed (per client) and A3's
    ``L_{s,n}`` under the case's reading (``lipschitz``)."""
    step = case.params.get("inner_step_size")
    if step:
        return float(step)
    return fedmsa_constants(case.problem).lemma_b1_cap(
        case.params.get("lipschitz"), per_client=True
    )


def theorem31_steps(case: Any) -> tuple[float, float]:
    """``(alpha, beta)`` of a rate check: the case's ``outer_step_size`` and ``inner_step_size``,
    else the contracting pair of :func:`~theory_checks.fedmsa.common.single_timescale_step`
    capped by the proof's explicit conditions, Lemma B.2's ``1/(2 L_{z,1}^2)`` on alpha and Lemma
    B.1's ``lambda_n / (2 L_{s,n})`` on beta (the theorem's ``O(1/(tau K))`` hides its
    constants; a check may lower the steps further, e.g. to ``1/(4 tau K)``)."""
    alpha, beta = case.params.get("outer_step_size"), case.params.get("inner_step_size")
    if alpha and beta:
        return float(alpha), float(beta)
    a, b, _ = single_timescale_step(case.problem)
    c = fedmsa_constants(case.problem)
    return min(a, c.lemma_b2_cap), min(b, c.lemma_b1_cap())


# --------------------------------------------------------------------------- hypotheses


def _a1_margin(case: Any) -> float:
    c = fedmsa_constants(case.problem)
    return min(s / L for s, L in zip(c.sigma_min, c.L_s, strict=True))


def _a5_averaged_margin(case: Any) -> float:
    c = fedmsa_constants(case.problem)
    return min(lam / L for lam, L in zip(c.lam, c.L_s, strict=True))


def _a5_per_client_margin(case: Any) -> float:
    c = fedmsa_constants(case.problem)
    # Why 1e-10: a shared fixed point is zero to round-off; any real offset is O(1) relative
    if c.offset > 1e-10:
        return -c.offset
    return min(lam / L for lam, L in zip(c.lam_clients, c.L_s, strict=True))


#: A1: a unique fixed point of every level.
A1_UNIQUE_FIXED_POINT = Hypothesis(
    "A1",
    "S^n(z^{n-1}, .) has a unique zero: sigma_min(J-bar_{n,n}) > 0 (margin / L_{s,n})",
    f"{REF}, Assumption A1",
    _a1_margin,
)

#: A5 for the averaged map, the form Lemma B.1's proof uses.
A5_AVERAGED = Hypothesis(
    "A5 (averaged map)",
    "<z - z*, S(z)> >= lambda_n ||z - z*||^2 for S = avg_m S^m: lambda_min(sym J-bar_{n,n}) > 0 "
    "(margin lambda_n / L_{s,n})",
    f"{REF}, Assumption A5 (sign corrected), as Lemma B.1's proof uses it",
    _a5_averaged_margin,
)

#: A5 as printed: every client's map, at the global fixed point.
A5_PER_CLIENT = Hypothesis(
    "A5 (per client)",
    "<z - z*, S^m(z)> >= lambda_n ||z - z*||^2 for every client m at the global z*: S^m(z*) = 0 "
    "and lambda_min(sym J^m_{n,n}) > 0 (margin min_m lambda / L_{s,n}; -offset without a shared "
    "fixed point)",
    f"{REF}, Assumption A5 as printed (sign corrected)",
    _a5_per_client_margin,
)

#: Lemma B.1's step condition.
LEMMA_B1_STEP = Hypothesis(
    "Lemma B.1 step",
    "beta_n <= lambda_n / (2 L_{s,n}) (A5's lambda_n per client, A3's L_{s,n} under the case's "
    "reading)",
    f"{REF}, Lemma B.1",
    lambda case: at_most(
        lemma_b1_step(case),
        fedmsa_constants(case.problem).lemma_b1_cap(case.params.get("lipschitz"), per_client=True),
    ),
)


def _theorem31_steps_margin(case: Any) -> float:
    alpha, beta = theorem31_steps(case)
    c = fedmsa_constants(case.problem)
    return min(at_most(alpha, c.lemma_b2_cap), at_most(beta, c.lemma_b1_cap()))


#: The explicit step conditions of Theorem 3.1's proof, on the steps a rate check runs.
THEOREM31_STEPS = Hypothesis(
    "Lemmas B.1-B.2 steps",
    "alpha <= 1 / (2 L_{z,1}^2) (Lemma B.2, L_{z,1} = ||dz*/dx||) and beta_n <= lambda_n / "
    "(2 L_{s,n}) (Lemma B.1)",
    f"{REF}, Lemmas B.1-B.2 (proof of Theorem 3.1)",
    _theorem31_steps_margin,
)


def _b0_margin(case: Any) -> float:
    """0 when the case's rule is ``b_0 = K R`` at every R (``initial_batch = "KR"``); else the
    margin of ``b_0 = b = 1 >= K R`` at the smallest R a rate grid takes (32)."""
    if case.params.get("initial_batch") == "KR":
        return 0.0
    K = int(case.params.get("local_steps", 1))
    return at_least(1.0, float(K * 32))


#: The proof's initial batch (App. B.2, final parameter choice), absent from Algorithm 1's box.
B0_PROOF = Hypothesis(
    "b_0 = KR",
    "the round-0 batch is b_0 = K R (App. B.2's parameter choice)",
    f"{REF}, proof of Theorem 3.1 (App. B.2); not in Algorithm 1",
    _b0_margin,
)

__all__ = [
    "A1_UNIQUE_FIXED_POINT",
    "A5_AVERAGED",
    "A5_PER_CLIENT",
    "B0_PROOF",
    "FedMSAConstants",
    "JOINT",
    "LEMMA_B1_STEP",
    "REF",
    "THEOREM31_STEPS",
    "fedmsa_constants",
    "heterogeneity_tau",
    "lemma_b1_step",
    "levels",
    "theorem31_steps",
]
