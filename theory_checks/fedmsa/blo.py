"""FedMSA's bilevel maps, eq. (10): their fixed point gives the exact hypergradient (eq. (10)
and the sentence after it; Sec. 2.2).

The maps, with ``z = [w; v]`` and (10a) read with ``grad_w f^m`` (the printed ``grad_x f^m`` is
a typo: eq. (2) and the code have ``grad_w f^m``):

    S^m(x, z) = [ grad_w g^m(x, w) ;  grad^2_w g^m(x, w) v - grad_w f^m(x, w) ]            (10a)
    P^m(x, z) = grad_x f^m(x, w) - grad^2_xw g^m(x, w) v                                   (10b)

v is one shared variable, so the averaged system ``avg_m S^m = 0`` has the solution
``z*(x) = (w*(x), [grad^2_w g]^{-1} grad_w f)`` and, P^m being linear in the local quantities,

    avg_m S^m(x, z*(x)) = 0,    avg_m P^m(x, z*(x)) = grad F(x),   F(x) = f(x, w*(x)).

Hypothesis: A1. The check (:func:`check_blo_fixed_point`) evaluates the registered algorithm's
maps at ``z*(x)`` (from the reference maps) on a drawn bilevel or minimax problem and compares
their average with the problem's exact hypergradient and with 0, to a relative 1e-10.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from problems import strategies
from testbed.algorithms.fedmsa_maps import MapInputs
from testbed.oracles import Oracles
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.fedmsa.claim_makers import step_identity_claim
from theory_checks.fedmsa.common import build
from theory_checks.fedmsa.common import cases_of
from theory_checks.fedmsa.common import fixed_point_Z
from theory_checks.fedmsa.common import reference_maps
from theory_checks.fedmsa.common import start_point
from theory_checks.fedmsa.perturbations import indirect_term_on_w
from theory_checks.measurements import identity_residual


def check_blo_fixed_point(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """avg_m P^m(x, z*(x)) == grad F(x) and avg_m S^m(x, z*(x)) == 0, with the algorithm's maps."""
    problem = case.problem
    alg = build(make, problem)
    x = start_point(problem, case.params["seed"])
    Z_star = fixed_point_Z(problem, x[None])[0]
    M = problem.n_clients
    p, s = alg.maps.evaluate(
        MapInputs(
            Oracles(problem),
            x.expand(M, -1),
            Z_star.expand(M, -1),
            torch.arange(M),
            [None] * alg.maps.n_batches,
        )
    )
    exact = problem.exact_hypergradient(x)
    P_ref, S_ref = reference_maps(problem, x[None], Z_star[None])
    scale = float(P_ref.norm() + S_ref.norm()) / math.sqrt(M) + float(exact.norm()) + 1e-300
    gap = float((p.mean(0) - exact).norm() + s.mean(0).norm()) / scale
    return identity_residual(gap)


# Cases of claim fedmsa.blo.fixed_point_is_hypergradient
blo_fixed_point_is_hypergradient_cases = cases_of(
    st.one_of(strategies.quadratic_bilevel(max_dim=6), strategies.quadratic_minimax(max_dim=6))
)


FIXED_POINT_IS_HYPERGRADIENT_PERTURBATION = Perturbation(
    name="indirect term on the w-block",
    description=(
        "(10b)'s grad^2_xw g v evaluated on the w-block of the flat z = [w; v] (an "
        "off-by-one-block slice): avg P^m(x, z*(x)) = grad F(x) + J (v* - w*), "
        "caught whenever w*(x) != v*(x)."
    ),
    build=indirect_term_on_w,
)


FIXED_POINT_IS_HYPERGRADIENT = step_identity_claim(
    id="fedmsa.blo.fixed_point_is_hypergradient",
    reference="eq. (10) and the sentence after it (Sec. 2.2)",
    statement=(
        "avg_m S^m(x, z*(x)) = 0 and avg_m P^m(x, z*(x)) = grad F(x), z*(x) = (w*(x), "
        "[grad^2_w g]^{-1} grad_w f)"
    ),
    strategy=blo_fixed_point_is_hypergradient_cases,
    check=check_blo_fixed_point,
    perturbation=FIXED_POINT_IS_HYPERGRADIENT_PERTURBATION,
)


CLAIMS: tuple[Claim, ...] = (FIXED_POINT_IS_HYPERGRADIENT,)
