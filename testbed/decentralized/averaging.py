"""HGP's averaging rules: the ``Avg`` of the u-update (Terashita & Hara, eq. 9-10, Alg. 1-2).

Client i's step ``u_bar^(m-1) = Avg(u^(m-1))`` is one of three rules, each a strategy object
that :class:`~testbed.decentralized.hgp.HyperGradientPush` takes in its ``averaging`` field (or
by the name in brackets, resolved through :data:`AVERAGING_RULES`):

- :class:`PushSumAveraging` (``"pushsum"``): S Push-Sum steps (Alg. 1) on the graph sequence,
  through the graph ledger: ``u_bar = Theta_hat u`` with ``Theta_hat = diag(P w)^{-1} P``,
  ``P = A(t + S) ... A(t + 1)`` (Sec. 2.1); the static-network variant is this rule with
  ``graph_family="static_undirected"`` (W^S);
- :class:`ExactAveraging` (``"exact"``): the exact averaging operator ``Theta = 11^T / n``
  (eq. 9-10 as written; notes D2); nothing is communicated;
- :class:`ServerAveraging` (``"server"``): the centralized variant (sec. 4): a server averages,
  one round of the server ledger.

A rule owns the ledger it communicates through (:meth:`AveragingRule.ledgers`), its averaging
call (:meth:`AveragingRule.average`) and the operator that call applies
(:meth:`AveragingRule.operator`). Its parameters (S, whether the Push-Sum weights are kept) are
the estimator's fields, passed to each call.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import ClassVar
from typing import NamedTuple

import numpy as np
import torch

from testbed.calls import CallCounter
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.pushsum import push_sum
from testbed.federation.ledger import Ledger

#: ``(u_bar, Push-Sum weights, next graph step)``: what one averaging call returns.
Averaged = tuple[torch.Tensor, torch.Tensor, int]


class Ledgers(NamedTuple):
    """The ledgers an averaging rule communicates through (``None``: not used)."""

    graph: GraphLedger | None = None
    server: Ledger | None = None


@dataclasses.dataclass(frozen=True)
class AveragingInputs:
    """What one averaging call on ``u (R, n, d)`` (R replicas of n clients) is given.

    Attributes:
        u: the vectors averaged.
        w: the Push-Sum weights ``(R, n)`` carried into the call.
        time: the graph step the call starts at.
        graph: the graph sequence Push-Sum runs on.
        ledgers: the rule's ledgers (:meth:`AveragingRule.ledgers`).
        steps: S, the Push-Sum steps of a call.
        keep_weights: start Push-Sum from ``w`` and return its new weights (HGP's practical
            form (b)), instead of from ones, returning ``w`` unchanged.
    """

    u: torch.Tensor
    w: torch.Tensor
    time: int
    graph: GraphSequence
    ledgers: Ledgers
    steps: int
    keep_weights: bool


@dataclasses.dataclass(frozen=True)
class AveragingRule(abc.ABC):
    """One averaging call on ``u (R, n, d)`` (R replicas of n clients).

    Attributes:
        name: the rule's name (a strategy field ``averaging`` also accepts it, as a string).
        gossips: averages by Push-Sum over the graph, so its operator has a consensus error
            ``c^(m) = sigma_max(Theta_hat^(m) - Theta)`` (Lemma 2) worth recording.
    """

    name: ClassVar[str]
    gossips: ClassVar[bool] = False

    @abc.abstractmethod
    def ledgers(self, n: int, counter: CallCounter | None = None) -> Ledgers:
        """Fresh ledgers for ``n`` clients, counting into ``counter`` (none: a throwaway)."""

    @abc.abstractmethod
    def average(self, call: AveragingInputs) -> Averaged:
        """``(u_bar, weights, next graph step)`` from ``call.u`` at graph step ``call.time``."""

    def operator(
        self,
        graph: GraphSequence,
        time: int,
        omega: torch.Tensor | None = None,
        *,
        steps: int,
        keep_weights: bool,
    ) -> np.ndarray:
        """The ``(n, n)`` operator of one call at graph step ``time`` (weights ``omega``, ones
        when None): ``Theta_hat`` for Push-Sum, ``Theta`` for the exact rules; see
        :func:`measured_operator`."""
        ledgers = self.ledgers(graph.n)
        return measured_operator(
            lambda u, w: self.average(
                AveragingInputs(u, w, time, graph, ledgers, steps, keep_weights)
            )[0],
            graph.n,
            omega,
        )


def measured_operator(
    average: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    n: int,
    omega: torch.Tensor | None = None,
) -> np.ndarray:
    """The ``(n, n)`` operator an averaging call applies, measured: the identity basis averaged
    by ``average(u, w)`` (weights ``omega``, ones when None), so it is what the call does, not
    what it should do."""
    basis = torch.eye(n, dtype=torch.float64)[None]
    w = torch.ones(1, n, dtype=torch.float64) if omega is None else omega.reshape(1, n).clone()
    return average(basis, w)[0].cpu().numpy()


@dataclasses.dataclass(frozen=True)
class PushSumAveraging(AveragingRule):
    """S Push-Sum steps (Alg. 1) through the graph ledger; the graph clock advances by S."""

    name: ClassVar[str] = "pushsum"
    gossips: ClassVar[bool] = True

    def ledgers(self, n: int, counter: CallCounter | None = None) -> Ledgers:
        return Ledgers(graph=GraphLedger(n, counter))

    def average(self, call: AveragingInputs) -> Averaged:
        assert call.ledgers.graph is not None
        keep, w = call.keep_weights, call.w
        mixing = call.graph.mixing(call.time, call.steps)
        result = push_sum(call.u, mixing, call.ledgers.graph, w if keep else None)
        return result.y, (result.omega if keep else w), call.time + call.steps


@dataclasses.dataclass(frozen=True)
class ExactAveraging(AveragingRule):
    """The exact operator Theta: every client receives the mean (no communication counted)."""

    name: ClassVar[str] = "exact"

    def ledgers(self, n: int, counter: CallCounter | None = None) -> Ledgers:
        return Ledgers()

    def average(self, call: AveragingInputs) -> Averaged:
        return call.u.mean(dim=1, keepdim=True).expand_as(call.u), call.w, call.time


@dataclasses.dataclass(frozen=True)
class ServerAveraging(AveragingRule):
    """A server averages the n clients' vectors: one round of the server ledger per call."""

    name: ClassVar[str] = "server"

    def ledgers(self, n: int, counter: CallCounter | None = None) -> Ledgers:
        return Ledgers(server=Ledger(n, counter))

    def average(self, call: AveragingInputs) -> Averaged:
        u, server = call.u, call.ledgers.server
        assert server is not None
        mean = server.aggregate(u.transpose(0, 1), torch.arange(u.shape[1]))
        return mean[:, None, :].expand_as(u), call.w, call.time


# The rules by name: ``averaging`` accepts a rule or its name, and the registry, the claims, the
# configs and the tests pass names (a config's value is a string).
AVERAGING_RULES: dict[str, AveragingRule] = {
    rule.name: rule for rule in (PushSumAveraging(), ExactAveraging(), ServerAveraging())
}

__all__ = [
    "AVERAGING_RULES",
    "AveragingInputs",
    "AveragingRule",
    "ExactAveraging",
    "Ledgers",
    "PushSumAveraging",
    "ServerAveraging",
    "measured_operator",
]
