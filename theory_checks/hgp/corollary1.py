"""HGP Corollary 1 (App. D): exact Jacobians, Push-Sum averaging; made explicit from its proof.

The result (App. D.1): with exact Jacobians (no sampling noise), under Thm 1's conditions,

.. math::

    \\frac{\\|v^{(M)} - d_\\lambda f\\|}{\\|\\partial_x f\\|} \\le
    \\frac{2\\beta}{\\eta\\alpha^2}\\, \\frac{8\\sqrt{n}}{\\delta}\\tau^S + \\exp(-O(M)).

Its constants are not computable (``delta``, ``tau`` exist; ``exp(-O(M))`` is unspecified), so
the claim checks the explicit bound of the proof (App. C.2, eqs. (17)-(19), made explicit) with the
measured Push-Sum error ``c_S = max_m sigma_max(Theta_hat^(m) - Theta)`` of Alg. 1 on the graph
sequence:

.. math::

    \\frac{\\|v^{(m)} - d_\\lambda f\\|}{\\|\\partial_x f\\|} \\le
    \\eta\\beta c_S \\frac{1 - \\rho + r}{(1 - q)(1 - \\rho)}
    + \\eta\\beta \\frac{\\rho^m}{1 - \\rho},

``r = max_k ||I - eta H_k||``, ``rho = ||I - eta H_bar||``, ``q = r (1 + c_S) < 1``, at every
``m <= M``, eta = 1/L.

Hypotheses: Assumption 1 on each graph family, Assumption 2, and the step condition
``eta L <= 2 - eta alpha`` (the one the proof uses and the paper leaves unstated;
``hgp.theorem1.stated_step_condition`` shows the stated one is not enough, which this claim
corrects).

Checked (:func:`check_corollary1`, ``hgp.corollary1.explicit_bound``): S doubled from the case's
until ``q < 1``, M until ``rho^M <= 1e-6``, the normalised error of every iterate against the
bound (plus the 1e-10 round-off). Perturbation: the v step slipped by 1e-3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from problems import strategies
from results_format.verdicts import ABOUT_RESULT
from testbed.decentralized.graphs import CONNECTED_FAMILIES
from testbed.decentralized.graphs import GraphSequence
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import SeriesPoint
from theory_checks.hgp.common import global_grad
from theory_checks.hgp.common import graph_cases
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import point
from theory_checks.hgp.common import run_hgp
from theory_checks.hgp.common import stacked_error
from theory_checks.hgp.common import terms_for
from theory_checks.hgp.constants import case_graph
from theory_checks.hgp.constants import deterministic_contractions
from theory_checks.hgp.constants import hgp_constants
from theory_checks.hgp.constants import network_assumptions
from theory_checks.hgp.constants import pushsum_errors
from theory_checks.hgp.constants import step_condition
from theory_checks.hgp.constants import step_size
from theory_checks.hgp.perturbations import step_slip
from theory_checks.hgp.theorem1 import STATED_STEP_CONDITION
from theory_checks.tolerances import IDENTITY_RTOL


def cor1_setup(case: Case) -> tuple[GraphSequence, int, int, float, float]:
    """What Corollary 1 (D1) runs on a case: its graph, the smallest ``S = S_0 2^k`` at which
    ``q = r (1 + c_S) < 1`` (footnote 4's S-threshold, ``c_S`` of Alg. 1 on the graph), M with
    ``rho_bar^M <= 1e-6``, eta = 1/L and alpha."""
    problem = case.problem
    k = hgp_constants(problem)
    eta = step_size(case, k)  # 1/L: the proof's step condition
    contraction = deterministic_contractions(problem.client_blocks(point(problem, 0)), eta)
    # Why rho_bar^M <= 1e-6: the geometric term is then far below the consensus term, so the
    # run covers the decay and the floor of the bound.
    M = terms_for(contraction["rho_bar"], 1e-6, 300)
    graph = case_graph(case, "random_directed")
    S = int(case.params["pushsum_steps"])
    # Why 256: past it the sequence is not contracting in practice on these small graphs.
    while contraction["r"] * (1 + max(pushsum_errors(graph, S, M))) >= 1.0 and S < 256:
        S *= 2
    return graph, S, M, eta, k.alpha


def d1_bound(r: float, rho: float, beta: float, eta: float, c: float, m: np.ndarray) -> np.ndarray:
    """The explicit bound from the proof of Cor. 1 (App. C.2, D.1):
    ``eta beta c (1 - rho + r)/((1 - q)(1 - rho)) + eta beta rho^m/(1 - rho)``."""
    q = r * (1 + c)
    return eta * beta * c * (1 - rho + r) / ((1 - q) * (1 - rho)) + eta * beta * rho**m / (1 - rho)


def check_corollary1(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Explicit Cor. 1 (D1) at every m <= M on the drawn graph family, with ``c_S`` the Push-Sum
    error of Alg. 1 on the graph sequence (:func:`~theory_checks.hgp.constants.pushsum_errors`,
    not the estimator's own averaging: a gossip that mixes less than Alg. 1 must not widen its
    own bound)."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    graph, S, M, eta, _ = cor1_setup(case)
    k = hgp_constants(problem)
    contraction = deterministic_contractions(blocks, eta)
    r, rho = contraction["r"], contraction["rho_bar"]
    c = max(pushsum_errors(graph, S, M))
    if r * (1 + c) >= 1.0:
        raise NotMeasurable(f"q = r (1 + c_S) >= 1 up to S = {S} (below the S-threshold)")
    est = make(
        neumann_terms=M,
        pushsum_steps=S,
        neumann_step_size=eta,
        graph_family=graph.family,
        graph_seed=graph.seed,
    )
    errors = stacked_error(run_hgp(est, problem, x).trajectory[:, 0], global_grad(problem, x))
    errors = errors / float(blocks["c"].norm())
    m = np.arange(len(errors))
    bound = d1_bound(r, rho, k.beta, eta, c, m)
    slack = IDENTITY_RTOL  # round-off of the estimate itself once the bound reaches it
    passed = bool((errors <= bound + slack).all())
    series = tuple(
        [
            SeriesPoint("measured", "neumann_terms", int(i), float(e), 0, int(i) * S)
            for i, e in zip(m, errors, strict=True)
        ]
        + [
            SeriesPoint("bound", "neumann_terms", int(i), float(b), 0, int(i) * S)
            for i, b in zip(m, bound, strict=True)
        ]
    )
    return Measurement(
        float(errors[-1]),
        float(bound[-1]),
        passed,
        "<= at every m",
        series=series,
        details={
            "c_S": c,
            "pushsum_steps": S,
            "q": r * (1 + c),
            "bound_over_measured": float(bound[-1] / max(errors[-1], 1e-300)),
        },
    )


# Cases of claim hgp.corollary1.explicit_bound
corollary1_explicit_bound_cases = graph_cases(strategies.per_client_quadratic(), CONNECTED_FAMILIES)

STEP_SLIP = step_slip("hgp")

# --------------------------------------------------------------------------- the claim


EXPLICIT_BOUND = hgp_claim(
    id="hgp.corollary1.explicit_bound",
    reference="HGP Cor. 1 (App. D.1) made explicit with the measured Push-Sum error",
    kind="bias_bound",
    about=ABOUT_RESULT,
    statement=(
        "||v^(m) - d_lambda f|| / ||d_x f|| <= eta beta c_S (1 - rho + r) / ((1 - q)(1 - "
        "rho)) + eta beta rho^m / (1 - rho), r = max||I - eta H_k||, rho = ||I - eta "
        "H_bar||, q = r (1 + c_S) < 1, eta = 1/L, every graph family"
    ),
    estimators=("hgp",),
    strategy=corollary1_explicit_bound_cases,
    check=check_corollary1,
    hypotheses=(*network_assumptions(), step_condition()),
    corrects=STATED_STEP_CONDITION.id,
    perturbation=STEP_SLIP,
)


CLAIMS: tuple[Claim, ...] = (EXPLICIT_BOUND,)
