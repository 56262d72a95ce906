"""HGP's communication: only vectors of size d_y + 1 travel (Alg. 1-2, Sec. 3.3).

HGP's point (Sec. 3.3, Remark 2): every block of the Hessian and Jacobian is computable by one
client, so only ``u``-sized Push-Sum messages are exchanged: per Push-Sum step s each client j
sends its numerator and weight, ``d_y + 1`` floats, to each of its out-neighbours; Hessians
(``O(d_y^2)``) and the hyperparameter-sized ``v_i`` never leave a client. Over M fixed-point
iterations of S steps,

.. math::  \\text{floats sent} = \\sum_{m=1}^{M} \\sum_{s=1}^{S} \\sum_j
           (|N_j^{out}(s)| - 1)(d_y + 1).

Hypotheses: Assumption 1, Assumption 2.

Checked (:func:`check_communication`, ``hgp.communication.vector_messages``): the graph ledger
of a run (M = 5, S in [1, 6], every connected family) against the count from the graph
sequence, in total and per client, and its payload sizes equal to ``{d_y + 1}``. Perturbation:
``v`` gossiped once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from problems import strategies
from results_format.verdicts import ABOUT_SENTENCE
from testbed.decentralized.graphs import CONNECTED_FAMILIES
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import HGPRun
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.hgp.common import fresh_state
from theory_checks.hgp.common import graph_cases
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import point
from theory_checks.hgp.constants import network_assumptions
from theory_checks.hgp.perturbations import AroundRun
from theory_checks.hgp.perturbations import swap


def check_communication(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Every message is a ``d_y + 1`` vector (numerator and weight) per edge per Push-Sum step:
    payload sizes are exactly ``{d_y + 1}`` (no Hessian, no hyperparameter-sized v) and the total
    equals ``sum_m sum_s sum_j (|N_j^out(s)| - 1)(d_y + 1)`` from the graph sequence."""
    problem = case.problem
    if problem.dim_hyper == problem.dim_y + 1:
        raise NotMeasurable("d_lambda = d_y + 1: a leaked v would look like a Push-Sum message")
    x = point(problem, case.params["point_seed"])
    M, S = 5, int(case.params["pushsum_steps"])
    est = make(
        neumann_terms=M,
        pushsum_steps=S,
        graph_family=case.params["graph_family"],
        graph_seed=case.params["graph_seed"],
    )
    out = est.run(problem, x, fresh_state(problem), np.random.default_rng(0))
    ledger = out.graph_ledger
    graph = GraphSequence(case.params["graph_family"], problem.n_clients, case.params["graph_seed"])
    edges = graph.edges(0, M * S)
    out_degree = edges.sum(axis=1) - 1  # [s, j]: messages j sends at step s (self-loop free)
    size = problem.dim_y + 1
    expected = int(out_degree.sum()) * size
    per_client = out_degree.sum(axis=0) * size
    measured = ledger.total_floats if ledger is not None else -1
    passed = (
        ledger is not None
        and ledger.payload_sizes == {size}
        and measured == expected
        and bool((ledger.floats_sent == per_client).all())
        and out.calls.floats_up == expected
    )
    return Measurement(
        float(measured),
        float(expected),
        passed,
        "floats sent == sum (out-degree)(d_y + 1), payloads == {d_y + 1}",
        details={"payload_sizes": sorted(ledger.payload_sizes) if ledger else []},
    )


# Cases of claim hgp.communication.vector_messages
communication_vector_messages_cases = graph_cases(
    strategies.per_client_quadratic(), CONNECTED_FAMILIES, (1, 6)
)

# --------------------------------------------------------------------------- perturbation


@dataclasses.dataclass(frozen=True)
class _Leaky(AroundRun):
    """Also gossips the hyperparameter-sized v once (which must never leave a client)."""

    def after_run(self, out: HGPRun, problem: Any) -> HGPRun:
        if out.graph_ledger is not None:
            graph = self.graph(problem.n_clients)
            out.graph_ledger.gossip(out.trajectory[-1, 0], graph.mixing(0, 1))
        return out


LEAKY = Perturbation(
    "v gossiped once",
    "the hyperparameter-sized v is gossiped once besides the Push-Sum messages (a debugging "
    "all-reduce left in): one extra payload size in the ledger",
    swap("hgp", _Leaky),
)

# --------------------------------------------------------------------------- the claim


VECTOR_MESSAGES = hgp_claim(
    id="hgp.communication.vector_messages",
    reference="HGP Alg. 1-2, Sec. 3.3 (O(d_x) messages, Hessians never sent)",
    kind="communication_count",
    about=ABOUT_SENTENCE,
    statement=(
        "floats sent = sum_m sum_s sum_j (|N_j^out(s)| - 1)(d_y + 1); every payload has "
        "d_y + 1 floats (v_i and Hessians never leave a client)"
    ),
    estimators=("hgp",),
    strategy=communication_vector_messages_cases,
    check=check_communication,
    hypotheses=network_assumptions(),
    perturbation=LEAKY,
)


CLAIMS: tuple[Claim, ...] = (VECTOR_MESSAGES,)
