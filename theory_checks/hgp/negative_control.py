"""HGP's negative control: without Assumption 1 Push-Sum does not reach consensus (Lemma 2's
hypothesis is needed: a graph sequence with a permanently disconnected part).

Lemma 2 and Thm 1 assume B-strong connectivity (Assumption 1): the union of the graphs over
every window of B steps is strongly connected. On a sequence that is never strongly connected
(two groups of clients, edges one way only) the groups' Push-Sum averages differ by O(target
heterogeneity) whatever S, so HGP cannot converge to GlobalGrad: a check that reported HGP
accurate there would be blind to the hypothesis it relies on.

Hypotheses: Assumption 2 and the step condition (the problem is well posed); Assumption 1 is
the one deliberately violated (and reported by networkx).

Checked (:func:`check_negative_control`, ``hgp.negative_control.not_strongly_connected``): with
M until ``r^M <= 1e-7``, the relative error stays >= 1e-3 at S = 20 and S = 40 on the
``disconnected`` family, Assumption 1 is reported violated, and the same run on a random
directed sequence (Assumption 1 holds) is accurate to 1e-5. Perturbation: an estimator that
ignores the graph and averages exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from problems import strategies
from results_format.verdicts import ABOUT_RESULT
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import HyperGradientPush
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.hgp.common import fresh_state
from theory_checks.hgp.common import global_grad
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import point
from theory_checks.hgp.common import scale
from theory_checks.hgp.common import stacked_error
from theory_checks.hgp.common import terms_for
from theory_checks.hgp.constants import A2_STRONG_CONVEXITY
from theory_checks.hgp.constants import deterministic_contractions
from theory_checks.hgp.constants import step_condition
from theory_checks.hgp.constants import step_size
from theory_checks.hgp.perturbations import swap


def check_negative_control(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """On a sequence that is never strongly connected (two groups, one-way edges) HGP does not
    converge to GlobalGrad: the relative error stays >= 1e-3 at S = 20 and S = 40 with M large,
    networkx reports Assumption 1 violated, and the same run on a random directed sequence
    (A1 holds) is accurate to 1e-5."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    eta = step_size(case)  # 1/L
    k = deterministic_contractions(blocks, eta)
    # Why r^M <= 1e-7: every block-row of (I - eta H) Theta_hat contracts by r in the block
    # infinity norm (Theta_hat is row-stochastic), so the iteration has settled to 1e-7.
    M = terms_for(k["r"], 1e-7, 300)
    exact = global_grad(problem, x)
    unit = scale(blocks)
    seed = case.params["graph_seed"]
    errors = []
    for S in (20, 40):
        est = make(neumann_terms=M, pushsum_steps=S, graph_family="disconnected", graph_seed=seed)
        out = est.run(
            problem, x, fresh_state(problem), np.random.default_rng(0), track_consensus=False
        )
        errors.append(float(stacked_error(out.trajectory[-1:, 0], exact)[0]) / unit)
    violation = GraphSequence("disconnected", problem.n_clients, seed).assumption_violation(40)
    control_est = make(
        neumann_terms=M, pushsum_steps=20, graph_family="random_directed", graph_seed=seed
    )
    control = control_est.run(
        problem, x, fresh_state(problem), np.random.default_rng(0), track_consensus=False
    )
    control_error = float(stacked_error(control.trajectory[-1:, 0], exact)[0]) / unit
    # Why 1e-3 and 1e-5: with Assumption 1 the floor is ~c_20 plus the 1e-7 truncation, far
    # below 1e-5 on these dense random graphs; without it the groups' averages differ by
    # O(target heterogeneity) (>= 1 here), orders above 1e-3.
    passed = min(errors) >= 1e-3 and violation is not None and control_error <= 1e-5
    return Measurement(
        min(errors),
        1e-3,
        passed,
        "relative error >= (no convergence)",
        details={"violated": violation or "none", "control_error": control_error, "errors": errors},
    )


def negative_cases() -> st.SearchStrategy[Case]:
    """Cases for HGP's negative control: 2-5 heterogeneous clients, a point and a graph seed."""
    return st.builds(
        lambda problem, seed, gs: Case(problem, {"point_seed": seed, "graph_seed": gs}),
        strategies.per_client_quadratic(
            min_clients=2,
            max_clients=5,
            hessian_heterogeneity=(0.2, 0.5),
            target_heterogeneity=(1.0, 3.0),
        ),
        strategies.SEEDS,
        st.integers(0, 2**16),
    )


EXACT_AVERAGING = Perturbation(
    "graph ignored (exact averaging)",
    "the estimator averages exactly whatever the graph (the Push-Sum call bypassed): it "
    "converges on a sequence that violates Assumption 1, which the negative control must notice",
    swap("hgp", HyperGradientPush, averaging="exact"),
    slow=True,  # ~4 s on one core: two long runs per case plus shrinking
)

# --------------------------------------------------------------------------- the claim


NOT_STRONGLY_CONNECTED = hgp_claim(
    id="hgp.negative_control.not_strongly_connected",
    reference="HGP Assumption 1 (B-strong connectivity), Lemma 2 (App. C.1)",
    kind="bias_bound",
    about=ABOUT_RESULT,
    power_from=("hgp.theorem1.rate_in_s", "hgp.lemma2.geometric_consensus"),
    statement=(
        "on a graph sequence that is never strongly connected the estimate does not "
        "converge to GlobalGrad (relative error >= 1e-3 for S = 20, 40), and the check "
        "names Assumption 1 as violated"
    ),
    estimators=("hgp",),
    strategy=negative_cases,
    check=check_negative_control,
    hypotheses=(
        A2_STRONG_CONVEXITY,
        step_condition(),
    ),
    perturbation=EXACT_AVERAGING,
)


CLAIMS: tuple[Claim, ...] = (NOT_STRONGLY_CONNECTED,)
