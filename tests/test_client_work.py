"""The seam between a server algorithm's aggregation steps and its clients' work
(:mod:`testbed.federation.client_work`), checked without Flower.

A recording transport stands where a deployment's would: it runs each round's work in this
process and notes every vector the ledger records. For every registered server-based algorithm
it must see what a deployment needs: every averaged upload came back from a round's client work
(none computed by the server), every vector sent or echoed has a name, one array per ledger
message and the ledger's floats; and the iterates are bit for bit those of the default transport.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from testbed.algorithms.base import run_algorithm
from testbed.federation.client_work import WORK_KINDS
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientWork
from testbed.federation.client_work import InProcessClients
from testbed.federation.client_work import Together
from testbed.federation.context import FederatedContext
from testbed.registry import ESTIMATOR_DB

PROBLEMS = {
    "bilevel": QuadraticBilevel.random(4, 3, 4, 10.0, 0.3, seed=1),
    "minimax": QuadraticMinimax.random(4, 3, 4, 10.0, 0.3, seed=2),
    "compositional": LinearCompositional.random(4, [2, 3, 4], seed=3, heterogeneity=0.2),
}
SERVER_ALGORITHMS = sorted(
    info.name
    for info in ESTIMATOR_DB
    if info.role == "algorithm"
    and (f := info.build().rounds_formula()) is not None
    and f.unit == "rounds"
)


@dataclasses.dataclass
class RecordingClients(InProcessClients):
    """In-process clients that note what a deployment would carry."""

    vectors: int = 0
    floats_down: int = 0
    uploads: int = 0
    floats_up: int = 0
    unnamed: int = 0
    replies: list[torch.Tensor] = dataclasses.field(default_factory=list)
    server_computed: int = 0

    def sent(self, name, value, clients):
        self.unnamed += name is None
        self.vectors += int(clients.shape[0])
        self.floats_down += int(value.numel()) * int(clients.shape[0])

    def aggregated(self, name, uploads, mean, clients):
        self.server_computed += not any(uploads is reply for reply in self.replies)
        self.sent(name, mean, clients)

    def run(self, side, work, clients):
        reply = super().run(side, work, clients)
        self.replies = list(reply.uploads)
        self.uploads += len(reply.uploads) * int(clients.shape[0])
        self.floats_up += sum(int(u[0].numel()) for u in reply.uploads) * int(clients.shape[0])
        return reply


def _run(name: str, participation: float | None, transport=None):
    from testbed.registry import get_estimator

    info = get_estimator(name)
    kind = next(k for k in ("bilevel", "minimax", "compositional") if k in info.supports)
    problem = PROBLEMS[kind]
    params = {"participation": participation} if participation else {}
    algorithm = info.build(**params)
    ctx = FederatedContext(
        problem,
        np.random.default_rng(5),
        algorithm.participation,
        algorithm.batch_size,
        transport=transport,
    )
    state = algorithm.init(problem)
    states = [state]
    for _ in range(2):
        state = algorithm.step(ctx, state)
        states.append(state)
    return ctx, states


@pytest.mark.parametrize("participation", [None, 0.5])
@pytest.mark.parametrize("name", SERVER_ALGORITHMS)
def test_every_round_of_a_server_algorithm_goes_through_client_work(name, participation):
    if name.startswith("fedmsa") and participation is None:
        participation = 1  # FedMSA's paper form: one client runs the local recursion
    recording = RecordingClients()
    ctx, states = _run(name, participation, recording)
    assert recording.server_computed == 0, "an aggregation of values no client work uploaded"
    assert recording.unnamed == 0, "a vector sent without the name a deployment gives it"
    calls = ctx.calls()
    assert recording.vectors + recording.uploads == ctx.ledger.messages
    assert (recording.floats_down, recording.floats_up) == (calls.floats_down, calls.floats_up)
    _, plain = _run(name, participation)  # the default transport: the same numbers, bit for bit
    for a, b in zip(states, plain, strict=True):
        assert torch.equal(a.x, b.x)


def test_run_algorithm_equals_the_steps_on_a_default_context():
    """``run_algorithm`` builds its context with the in-process transport."""
    problem = PROBLEMS["bilevel"]
    from testbed.registry import get_estimator

    algorithm = get_estimator("fednest").build(participation=0.5)
    records = run_algorithm(algorithm, problem, 2, np.random.default_rng(5))
    _, states = _run("fednest", 0.5)
    assert all(torch.equal(r.x, s.x) for r, s in zip(records, states, strict=True))


def test_works_are_registered_by_kind_and_together_runs_them_in_order():
    assert {
        "local_iterates",
        "inner_gradient",
        "ihgp_first_term",
        "ihgp_term",
        "outer_direction",
        "hessiv_term",
        "aggitd_direction",
        "msa_global_step",
        "msa_local_recursion",
        "together",
    } <= set(WORK_KINDS)
    for kind, cls in WORK_KINDS.items():
        assert cls.kind == kind and kind.isidentifier()
        assert "kind" not in {f.name for f in dataclasses.fields(cls)}  # a ClassVar, not a field

    @dataclasses.dataclass(frozen=True)
    class Constant(ClientWork):
        value: float

        def run(self, side, clients):
            return ClientReply((torch.full((int(clients.shape[0]), 1), self.value),))

    clients = torch.arange(3)
    reply = Together((Constant(1.0), Constant(2.0))).run(None, clients)
    assert [u[:, 0].tolist() for u in reply.uploads] == [[1.0] * 3, [2.0] * 3]
    with pytest.raises(ValueError, match="two client works of kind 'together'"):

        @dataclasses.dataclass(frozen=True)
        class Clash(ClientWork):
            kind = "together"  # type: ignore[misc]

            def run(self, side, clients):
                raise AssertionError
