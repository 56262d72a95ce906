"""Mutants of HGP (Terashita & Hara, Alg. 2 with Alg. 1 Push-Sum, eq. 10) and of its averaging
rules: realistic bugs that ``testbed mutate`` runs against the HGP claims
(:mod:`theory_checks.mutation`).

A bug in HGP's fixed-point loop lives in every entry that runs it (Push-Sum, exact averaging,
the centralized variant through the exact-averaging entry's ``averaging="server"``, the
stochastic, static and practical forms, and the personalization algorithm's estimator); a bug
in Push-Sum lives in the entries that gossip; a bug in an exact averaging rule lives in the
entry that runs it. Each is a subclass of :class:`~testbed.decentralized.hgp.HyperGradientPush`
or of an averaging rule with one mistake, recast from the registry's build.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any
from typing import NamedTuple
from typing import cast

import numpy as np
import torch

from testbed.decentralized.averaging import Averaged
from testbed.decentralized.averaging import AveragingInputs
from testbed.decentralized.averaging import ExactAveraging
from testbed.decentralized.averaging import ServerAveraging
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import DecentralizedGradient
from testbed.decentralized.hgp import HGPRun
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.pushsum import PushSumResult
from testbed.decentralized.pushsum import push_sum
from testbed.registry import get_estimator
from theory_checks.hgp import communication
from theory_checks.hgp import exact_averaging
from theory_checks.hgp import lemma2
from theory_checks.hgp import negative_control
from theory_checks.hgp import taxonomy
from theory_checks.hgp.perturbations import AroundRun
from theory_checks.hgp.perturbations import swap
from theory_checks.hgp.perturbations import v_part_scaled
from theory_checks.mutation import COUNT_WAYS
from theory_checks.mutation import STEP_WAYS
from theory_checks.mutation import Mutant
from theory_checks.mutation import MutantFamily
from theory_checks.mutation import declared_equivalents
from theory_checks.perturbed_variants import registry_variant

LOOP_ENTRIES = ("hgp", "hgp-exact-averaging", "hgp-stochastic", "hgp-static", "hgp-practical")
GOSSIP_ENTRIES = ("hgp", "hgp-stochastic", "hgp-static", "hgp-practical")
IDENTITY = exact_averaging.ERROR_IDENTITY.id
CONSENSUS = lemma2.GEOMETRIC_CONSENSUS.id

# --------------------------------------------------------------------------- the loop


@dataclasses.dataclass(frozen=True)
class ShiftedTerms(AroundRun):
    """HGP running ``M + shift`` fixed-point iterations while M is reported."""

    shift: int = 1

    def run_as(self, problem: Any) -> tuple[HyperGradientPush, Any]:
        terms = max(self.neumann_terms + self.shift, 0)
        return dataclasses.replace(self, neumann_terms=terms), problem


@dataclasses.dataclass(frozen=True)
class ScaledStep(HyperGradientPush):
    """HGP stepping ``factor * eta`` in both updates while eta is reported."""

    factor: float = 0.5

    def step_size(self, problem: Any) -> float:
        return self.factor * super().step_size(problem)


@dataclasses.dataclass(frozen=True)
class ScaledVStep(AroundRun):
    """The v-update steps ``factor * eta`` while the u-update uses eta (the step read from two
    places): ``v^(M) - v^(0)`` is scaled by ``factor``."""

    factor: float = 2.0

    def after_run(self, out: HGPRun, problem: Any) -> HGPRun:
        del problem  # the v part of any run
        return v_part_scaled(out, self.factor)


@dataclasses.dataclass(frozen=True)
class FlippedVStep(ScaledVStep):
    """The v-update adds ``eta J u_bar`` instead of subtracting it."""

    factor: float = -1.0


@dataclasses.dataclass(frozen=True)
class NotAveraged(HyperGradientPush):
    """The averaging of u skipped (each client runs its own series: LocalGrad, not GlobalGrad)."""

    def average_step(self, u: torch.Tensor, w: torch.Tensor, time: int, *rest: Any) -> Averaged:
        del rest  # the graph and the ledgers: nothing is averaged, nothing sent
        return u, w, time + self.pushsum_steps


# --------------------------------------------------------------------------- Push-Sum


class AveragingCall(NamedTuple):
    """The inputs of one averaging call (:meth:`HyperGradientPush.average_step
    <testbed.decentralized.hgp.HyperGradientPush.average_step>`), in its order: ``u (R, n, d)``,
    the Push-Sum weights, the graph step, the graph and the two ledgers."""

    u: torch.Tensor
    w: torch.Tensor
    time: int
    graph: GraphSequence
    gledger: Any
    sledger: Any


#: ``push(steps, counted=True)``: ``steps`` Push-Sum steps (Alg. 1) of the call's ``u`` from its
#: starting weights at its graph step, through the graph ledger (``counted``) or a throwaway one.
PushSum = Callable[..., PushSumResult]


@dataclasses.dataclass(frozen=True)
class WrongPushSum(HyperGradientPush):
    """HGP whose Push-Sum call (Alg. 1) has one mistake (:meth:`gossip`): the weights it starts
    from, the weights it keeps and the graph clock are the real rule's; a rule that does not
    gossip averages as built."""

    @abc.abstractmethod
    def gossip(self, push: PushSum) -> tuple[torch.Tensor, torch.Tensor]:
        """``(u_bar, omega)`` of the wrong call, from the real Push-Sum ``push``."""

    def average_step(self, *args: Any) -> Averaged:
        call = AveragingCall(*args)
        if not self.averaging_rule.gossips:
            return super().average_step(*call)
        start = call.w if self.keep_weights else None

        def push(steps: int, counted: bool = True) -> PushSumResult:
            ledger = call.gledger if counted else GraphLedger(call.graph.n)
            return push_sum(call.u, call.graph.mixing(call.time, steps), ledger, start)

        u_bar, omega = self.gossip(push)
        return u_bar, (omega if self.keep_weights else call.w), call.time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class PushSumStepShort(WrongPushSum):
    """Each Push-Sum call gossips S - 1 times while the graph clock advances by S."""

    def gossip(self, push: PushSum) -> tuple[torch.Tensor, torch.Tensor]:
        result = push(max(self.pushsum_steps - 1, 0))
        return result.y, result.omega


@dataclasses.dataclass(frozen=True)
class NoDebias(WrongPushSum):
    """Push-Sum returning the numerators z instead of ``z / omega`` (the de-bias forgotten)."""

    def gossip(self, push: PushSum) -> tuple[torch.Tensor, torch.Tensor]:
        result = push(self.pushsum_steps)
        return result.z, result.omega


@dataclasses.dataclass(frozen=True)
class StaleWeightDebias(WrongPushSum):
    """Push-Sum de-biasing by the weights of one step before: ``z^(S) / omega^(S-1)`` (with no
    step, S = 0, there is no step before: the call is the real one)."""

    def gossip(self, push: PushSum) -> tuple[torch.Tensor, torch.Tensor]:
        result = push(self.pushsum_steps)
        if self.pushsum_steps == 0:
            return result.y, result.omega
        before = push(self.pushsum_steps - 1, counted=False)  # what the client still holds
        return result.z / before.omega[..., None], result.omega


@dataclasses.dataclass(frozen=True)
class StaleClock(HyperGradientPush):
    """Push-Sum calls that do not advance the graph clock: every call gossips over the same
    segment of the time-varying graph (a stale step counter)."""

    def average_step(self, u: torch.Tensor, w: torch.Tensor, time: int, *rest: Any) -> Averaged:
        u_bar, w, _ = super().average_step(u, w, time, *rest)  # rest: the graph and the ledgers
        return u_bar, w, time


class _RowStochasticGraph(GraphSequence):
    """The graph sequence with weights split over the receiver's in-neighbours (``1/|N_i^in|``,
    rows summing to one) instead of the sender's out-neighbours."""

    def mixing(self, start: int, count: int) -> np.ndarray:
        if self.family == "static_undirected":
            return super().mixing(start, count)
        edges = self.edges(start, count).astype(float)
        return edges / edges.sum(axis=-1, keepdims=True)


@dataclasses.dataclass(frozen=True)
class RowStochastic(HyperGradientPush):
    """Push-Sum with row-stochastic weights (split by in-degree, not out-degree)."""

    def graph(self, n: int) -> GraphSequence:
        low, high = self.edge_probability
        return _RowStochasticGraph(self.graph_family, n, self.graph_seed, low, high)


# --------------------------------------------------------------------------- averaging rules


class SumsInsteadOfMean:
    """An exact averaging rule (a base put before the rule's class) returning the clients' sum:
    the real rule's mean times n (a missing 1/n)."""

    def average(self, call: AveragingInputs) -> Averaged:
        rule = cast(Any, super())  # the real rule, the next class of the bug's bases
        mean, w, time = rule.average(call)
        return call.u.shape[1] * mean, w, time


@dataclasses.dataclass(frozen=True)
class SummingExact(SumsInsteadOfMean, ExactAveraging):
    """The exact rule returning the clients' sum (a missing 1/n)."""


@dataclasses.dataclass(frozen=True)
class SummingServer(SumsInsteadOfMean, ServerAveraging):
    """The server rule returning the clients' sum (a missing 1/n)."""


def _summing_rules(**kw: Any) -> HyperGradientPush:
    """The exact-averaging entry (and its ``averaging="server"`` centralized form) with the
    rule that runs summing instead of averaging."""
    built = get_estimator("hgp-exact-averaging").build(**kw)
    rule = built.averaging_rule
    wrong = SummingServer() if isinstance(rule, ServerAveraging) else SummingExact()
    return dataclasses.replace(built, averaging=wrong)


# --------------------------------------------------------------------------- closed forms


@dataclasses.dataclass(frozen=True)
class ClientAdjointGlobal(DecentralizedGradient):
    """GlobalGrad computed with each client's own ``c_i`` (ClientGrad's adjoint) instead of
    the sum ``sum_k c_k``: per-client instead of averaged."""

    def per_client(self, problem: Any, x: torch.Tensor) -> torch.Tensor:
        if self.quantity != "global":
            return super().per_client(problem, x)
        return dataclasses.replace(self, quantity="client").per_client(problem, x)


# --------------------------------------------------------------------------- builders


def _loop(
    cls: type, entries: tuple[str, ...] = LOOP_ENTRIES, **fixed: Any
) -> dict[str, Callable[..., Any]]:
    """The HGP bug ``cls`` in every entry of ``entries`` (and in the personalization
    algorithm's estimator, which runs the same loop)."""
    return {entry: swap(entry, cls, **fixed) for entry in (*entries, "hgp-personalization")}


HGP_LOOP = MutantFamily("HGP loop", first=(IDENTITY,))
AVERAGING_RULES = MutantFamily("HGP averaging rules", first=(IDENTITY,))
PUSH_SUM = MutantFamily("Push-Sum", first=(CONSENSUS,))
CLOSED_FORMS = MutantFamily("HGP closed forms", first=(taxonomy.CLOSED_FORMS.id,))

MUTANTS: tuple[Mutant, ...] = (
    HGP_LOOP.mutant(
        "hgp.terms_plus_one",
        "count",
        "M + 1 fixed-point iterations while M is reported",
        _loop(ShiftedTerms, shift=1),
        cheap=True,
    ),
    HGP_LOOP.mutant(
        "hgp.terms_minus_one",
        "count",
        "M - 1 fixed-point iterations while M is reported",
        _loop(ShiftedTerms, shift=-1),
    ),
    HGP_LOOP.mutant(
        "hgp.step_halved",
        "step",
        "both updates step eta / 2 while eta is reported",
        _loop(ScaledStep, factor=0.5),
    ),
    HGP_LOOP.mutant(
        "hgp.v_step_doubled",
        "step",
        "the v-update steps 2 eta while the u-update steps eta",
        _loop(ScaledVStep, factor=2.0),
    ),
    HGP_LOOP.mutant(
        "hgp.v_sign_flipped",
        "correction",
        "the v-update adds eta J u_bar instead of subtracting it",
        _loop(FlippedVStep),
    ),
    HGP_LOOP.mutant(
        "hgp.u_not_averaged",
        "per_client",
        "the averaging of u skipped: each client runs its own series (LocalGrad)",
        _loop(NotAveraged),
    ),
    AVERAGING_RULES.mutant(
        "hgp.averaging_sums",
        "normalisation",
        "the exact and the server averaging rule return the clients' sum (a missing 1/n)",
        {"hgp-exact-averaging": _summing_rules},
        cheap=True,
    ),
    PUSH_SUM.mutant(
        "pushsum.step_short",
        "count",
        "each Push-Sum call gossips S - 1 times while the clock advances by S",
        _loop(PushSumStepShort, GOSSIP_ENTRIES),
    ),
    PUSH_SUM.mutant(
        "pushsum.no_debias",
        "pushsum_weight",
        "Push-Sum returns the numerators z instead of z / omega",
        _loop(NoDebias, GOSSIP_ENTRIES),
        cheap=True,
    ),
    PUSH_SUM.mutant(
        "pushsum.stale_weight_debias",
        "pushsum_weight",
        "Push-Sum de-biases by the weights of one step before: z^(S) / omega^(S-1)",
        _loop(StaleWeightDebias, GOSSIP_ENTRIES),
    ),
    PUSH_SUM.mutant(
        "pushsum.graph_clock_stale",
        "stale",
        "the graph clock is not advanced between Push-Sum calls: every call gossips over "
        "the same segment of the time-varying graph",
        _loop(StaleClock, GOSSIP_ENTRIES),
        first=(communication.VECTOR_MESSAGES.id,),
    ),
    PUSH_SUM.mutant(
        "pushsum.weights_not_reset",
        "pushsum_weight",
        "the Push-Sum weights omega carried over between calls instead of reset to 1 "
        "(the practical form's keep_weights on by mistake)",
        _loop(HyperGradientPush, ("hgp", "hgp-stochastic"), keep_weights=True),
        first=(negative_control.NOT_STRONGLY_CONNECTED.id,),
    ),
    PUSH_SUM.mutant(
        "pushsum.row_stochastic",
        "pushsum_weight",
        "the weights split by the receiver's in-degree (rows summing to one) instead of "
        "the sender's out-degree",
        _loop(RowStochastic, GOSSIP_ENTRIES),
    ),
    CLOSED_FORMS.mutant(
        "hgp-globalgrad.client_adjoint",
        "per_client",
        "GlobalGrad computed with each client's own c_i instead of sum_k c_k",
        {"hgp-globalgrad": registry_variant("hgp-globalgrad", ClientAdjointGlobal)},
    ),
)

#: Generated parameter perturbations (:mod:`theory_checks.parameter_mutants`) that no claim can
#: tell from the original, with the argument why no answer can change.
PARAMETER_EQUIVALENTS: dict[str, str] = {
    **declared_equivalents(
        lambda entry: (
            f"every claim of {entry} runs exact Jacobians (batch_size None, the entry's default; "
            "the minibatch claims are hgp-stochastic's): the batch size does not exist in any "
            "answer of its suite"
        ),
        ("hgp", "hgp-exact-averaging"),
        batch_size=COUNT_WAYS,
    ),
    **declared_equivalents(
        (
            "every claim of hgp runs the exact consensus inner solution (inner_steps None, the "
            "entry's default), where SGP's count and step do not exist; the inexact inner solution "
            "is pinned on hgp-exact-averaging (hgp.theorem2.corrected)"
        ),
        ("hgp",),
        inner_steps=COUNT_WAYS,
        inner_step_size=STEP_WAYS,
    ),
    "param.hgp-exact-averaging.inner_steps.minus1": (
        "the one claim of the entry that runs SGP (hgp.theorem2.corrected) gives it T = 0 inner "
        "steps, where one less is no count (the case runs as built); every other claim runs the "
        "exact consensus solution; one step more is killed by hgp.theorem2.corrected"
    ),
    **declared_equivalents(
        (
            "the one claim of the entry that runs SGP (hgp.theorem2.corrected) gives it T = 0 "
            "inner steps, so no SGP step is ever taken; every other claim runs the exact consensus "
            "solution"
        ),
        ("hgp-exact-averaging",),
        inner_step_size=STEP_WAYS,
    ),
    **declared_equivalents(
        lambda entry: (
            f"every claim of {entry} runs the exact consensus inner solution (inner_steps None, "
            "the entry's default; no check passes a count), where SGP's count and step do not "
            "exist; the inexact inner solution is pinned on hgp-exact-averaging "
            "(hgp.theorem2.corrected) and hgp-personalization (hgp.personalization.step_identity)"
        ),
        ("hgp-stochastic", "hgp-static"),
        inner_steps=COUNT_WAYS,
        inner_step_size=STEP_WAYS,
    ),
    **declared_equivalents(
        (
            "every claim of the entry (hgp.theorem1.rate_in_s, hgp.alg1.static_operator, "
            "hgp.recursion.static_iterates) runs exact Jacobians (batch_size None, the entry's "
            "default): the batch size does not exist in their answers"
        ),
        ("hgp-static",),
        batch_size=COUNT_WAYS,
    ),
}
