"""FedMSA's local recursion, Algorithm 1 lines 7-9 and eqs. (5)-(6): the first local step
uses the global direction, and without noise the recursion telescopes.

The paper's global step (5) on every client m, with one fresh sample at both server points,

    h_r^m = p^m(x_r, Z_r; xi_r^m) + (1 - rho) (h_{r-1} - p^m(x_{r-1}, Z_{r-1}; xi_r^m))     (5a)

(q_r likewise with s^{m,n}, (5b)), averaged by the server into ``(h_r, q_r)``; then the local
SARAH recursion (6) on the one client m~, from ``h_{r,0} = h_r`` and ``x_{r+1,1} = x_{r+1,0} =
x_r`` (line 7), with one fresh sample at both local points,

    h_{r,k} = p^{m~}(x_{r+1,k}, Z_{r+1,k}; xi_{r,k}) + h_{r,k-1}
              - p^{m~}(x_{r+1,k-1}, Z_{r+1,k-1}; xi_{r,k})                                   (6a)

(q likewise, (6b)). Two consequences (derived from eqs. (5)-(6)), each an exact identity:

- **first step** (:data:`FIRST_STEP_IS_GLOBAL_DIRECTION`): at k = 1 both points are x_r, the two
  p-terms cancel and ``h_{r,1} = h_r``, ``q_{r,1} = q_r`` in every round, stochastic oracles
  included;
- **telescoping** (:data:`DETERMINISTIC_TELESCOPING`): with exact oracles (sigma = 0) and
  ``h_0 = P(x_0, Z_0)``, (5) gives ``h_r = P(x_r, Z_r)`` for every rho, and (6) telescopes to
  ``h_{r,k} = h_r + P^{m~}(x_{r+1,k}, Z_{r+1,k}) - P^{m~}(x_r, Z_r)`` (likewise q).

Hypothesis: A1 (unique fixed points; :mod:`theory_checks.fedmsa.constants`). Each check runs
the registered algorithm (``fedmsa`` or ``fedmsa-mco``) for 4 rounds of K = 3 local steps on a
drawn closed-form family and compares its states with the identity, the maps ``P, P^m`` taken
from the reference maps (:func:`~theory_checks.fedmsa.common.reference_maps`), to a relative
1e-10 (:data:`~theory_checks.tolerances.IDENTITY_RTOL`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.fedmsa.claim_makers import step_identity_claim
from theory_checks.fedmsa.common import MOMENTA
from theory_checks.fedmsa.common import build
from theory_checks.fedmsa.common import cases_of
from theory_checks.fedmsa.common import families
from theory_checks.fedmsa.common import gap_per_round
from theory_checks.fedmsa.common import reference_maps
from theory_checks.fedmsa.common import run
from theory_checks.fedmsa.perturbations import fresh_sample_at_old_point
from theory_checks.fedmsa.perturbations import stateful_client
from theory_checks.tolerances import IDENTITY_RTOL


def _four_rounds(case: Case, make: Callable[..., Any], batch_size: int | None) -> list[Any]:
    """The run both identities are checked on: 4 rounds of K = 3 local steps at the case's
    momentum, outer and inner steps 0.02 and 0.05 (the identities are algebraic: any step)."""
    alg = build(
        make,
        case.problem,
        local_steps=3,
        momentum=case.params["momentum"],
        outer_step_size=0.02,
        inner_step_size=0.05,
        batch_size=batch_size,
    )
    return run(alg, case.problem, 4, seed=case.params["seed"])


def check_first_step(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """h_{r,1} == h_r and q_{r,1} == q_r in every round, stochastic oracles included."""
    stochastic = getattr(case.problem, "n_samples", 0) > 0
    records = _four_rounds(case, make, batch_size=2 if stochastic else None)

    def gap(rec: Any) -> float:
        st_ = rec.state
        first = st_.local[0]
        scale = float(st_.h.norm() + st_.q.norm()) + 1.0
        return float((first.h - st_.h).norm() + (first.q - st_.q).norm()) / scale

    return gap_per_round(records, gap, details={"stochastic": stochastic})


def check_telescoping(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Deterministic: h_r == P(x_r, Z_r) (any rho) and h_{r,k} == h_r + P^{m~}(x_{r+1,k}) -
    P^{m~}(x_r) (likewise q), with P, P^m from the reference maps."""
    problem = case.problem
    records = _four_rounds(case, make, batch_size=None)
    worst = 0.0
    for rec in records[1:]:
        st_ = rec.state
        P_a, S_a = reference_maps(problem, st_.anchor_x[None], st_.anchor_Z[None])
        scale = float(P_a.norm() + S_a.norm()) + 1.0
        worst = max(
            worst, float((st_.h - P_a[0].mean(0)).norm() + (st_.q - S_a[0].mean(0)).norm()) / scale
        )
        m = int(st_.clients[0])
        for it in st_.local:
            P_k, S_k = reference_maps(problem, it.x[:1], it.Z[:1])
            h_pred = st_.h + P_k[0, m] - P_a[0, m]
            q_pred = st_.q + S_k[0, m] - S_a[0, m]
            scale_k = scale + float(P_k.norm() + S_k.norm())
            worst = max(
                worst, float((it.h[0] - h_pred).norm() + (it.q[0] - q_pred).norm()) / scale_k
            )
    return Measurement(worst, IDENTITY_RTOL, worst <= IDENTITY_RTOL, "relative gap <=")


# Cases of claim fedmsa.local.first_step_is_global_direction
local_first_step_is_global_direction_cases = cases_of(
    st.one_of(families(stochastic=True), families()), momentum=MOMENTA
)

# Cases of claim fedmsa.local.deterministic_telescoping
local_deterministic_telescoping_cases = cases_of(families(), momentum=MOMENTA)


FIRST_STEP_IS_GLOBAL_DIRECTION_PERTURBATION = Perturbation(
    name="fresh sample at the previous point",
    description=(
        "The local recursion (6) evaluates p(x_{r+1,k-1}; xi) on another sample "
        "than p(x_{r+1,k}; xi) (a second draw instead of reusing xi): every "
        "estimate stays unbiased, but h_{r,1} = h_r + (noise difference), which the "
        "1e-10 identity sees on any stochastic case."
    ),
    build=fresh_sample_at_old_point,
)


# What every claim of this result shares.
local_claim = step_identity_claim.but(estimators=("fedmsa", "fedmsa-mco"))


FIRST_STEP_IS_GLOBAL_DIRECTION = local_claim(
    id="fedmsa.local.first_step_is_global_direction",
    reference="Algorithm 1 line 7 and eq. (6) at k = 1",
    statement=(
        "h_{r,1} = h_r and q_{r,1} = q_r in every round (same sample at both points; "
        "stochastic oracles included)"
    ),
    strategy=local_first_step_is_global_direction_cases,
    check=check_first_step,
    perturbation=FIRST_STEP_IS_GLOBAL_DIRECTION_PERTURBATION,
)


DETERMINISTIC_TELESCOPING_PERTURBATION = Perturbation(
    name="stateful client",
    description=(
        "Eq. (5)'s h_{r-1}, q_{r-1} read from the local client's last SARAH state "
        "(h_{r-1,K}, q_{r-1,K}) instead of the previous global averages (the "
        "clients are stateless in Algorithm 1; a stateful implementation reuses its "
        "own h). With rho < 1 h_r differs from P(x_r, Z_r) by (1 - rho)(P^m~ - P^m~ "
        "at the anchor), so the identity fails on every case with momentum below 1."
    ),
    build=stateful_client,
)


DETERMINISTIC_TELESCOPING = local_claim(
    id="fedmsa.local.deterministic_telescoping",
    reference="eqs. (5)-(6), sigma = 0 (telescoping derived from (6))",
    statement=(
        "sigma = 0: h_r = P(x_r, Z_r) for every rho, and h_{r,k} = h_r + "
        "P^{m~}(x_{r+1,k}, Z_{r+1,k}) - P^{m~}(x_r, Z_r) (same for q)"
    ),
    strategy=local_deterministic_telescoping_cases,
    check=check_telescoping,
    perturbation=DETERMINISTIC_TELESCOPING_PERTURBATION,
)


CLAIMS: tuple[Claim, ...] = (
    FIRST_STEP_IS_GLOBAL_DIRECTION,
    DETERMINISTIC_TELESCOPING,
)
