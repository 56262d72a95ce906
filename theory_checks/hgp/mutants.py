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

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from testbed.decentralized.averaging import Averaged
from testbed.decentralized.averaging import ExactAveraging
from testbed.decentralized.averaging import ServerAveraging
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import DecentralizedGradient
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.pushsum import push_sum
from testbed.registry import get_estimator
from theory_checks.hgp import communication
from theory_checks.hgp import exact_averaging
from theory_checks.hgp import lemma2
from theory_checks.hgp import negative_control
from theory_checks.hgp import taxonomy
from theory_checks.mutation import Mutant
from theory_checks.perturbed_variants import recast
from theory_checks.perturbed_variants import registry_variant

LOOP_ENTRIES = ("hgp", "hgp-exact-averaging", "hgp-stochastic", "hgp-static", "hgp-practical")
GOSSIP_ENTRIES = ("hgp", "hgp-stochastic", "hgp-static", "hgp-practical")
IDENTITY = exact_averaging.ERROR_IDENTITY.id
CONSENSUS = lemma2.GEOMETRIC_CONSENSUS.id

# --------------------------------------------------------------------------- the loop


@dataclasses.dataclass(frozen=True)
class ShiftedTerms(HyperGradientPush):
    """HGP running ``M + shift`` fixed-point iterations while M is reported."""

    shift: int = 1

    def run(
        self,
        problem: Any,
        x: torch.Tensor,
        state: Any,
        rng: np.random.Generator,
        replicas: int = 1,
        track_consensus: bool = True,
    ) -> Any:
        shifted = dataclasses.replace(self, neumann_terms=max(self.neumann_terms + self.shift, 0))
        return HyperGradientPush.run(shifted, problem, x, state, rng, replicas, track_consensus)


@dataclasses.dataclass(frozen=True)
class ScaledStep(HyperGradientPush):
    """HGP stepping ``factor * eta`` in both updates while eta is reported."""

    factor: float = 0.5

    def step_size(self, problem: Any) -> float:
        return self.factor * super().step_size(problem)


@dataclasses.dataclass(frozen=True)
class ScaledVStep(HyperGradientPush):
    """The v-update steps ``factor * eta`` while the u-update uses eta (the step read from two
    places): ``v^(M) - v^(0)`` is scaled by ``factor``."""

    factor: float = 2.0

    def run(
        self,
        problem: Any,
        x: torch.Tensor,
        state: Any,
        rng: np.random.Generator,
        replicas: int = 1,
        track_consensus: bool = True,
    ) -> Any:
        out = super().run(problem, x, state, rng, replicas, track_consensus)
        start = out.trajectory[:1]
        return out._replace(trajectory=start + self.factor * (out.trajectory - start))


@dataclasses.dataclass(frozen=True)
class FlippedVStep(ScaledVStep):
    """The v-update adds ``eta J u_bar`` instead of subtracting it."""

    factor: float = -1.0


@dataclasses.dataclass(frozen=True)
class NotAveraged(HyperGradientPush):
    """The averaging of u skipped (each client runs its own series: LocalGrad, not GlobalGrad)."""

    def average_step(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        gledger: Any,
        sledger: Any,
    ) -> Averaged:
        return u, w, time + self.pushsum_steps


# --------------------------------------------------------------------------- Push-Sum


@dataclasses.dataclass(frozen=True)
class PushSumStepShort(HyperGradientPush):
    """Each Push-Sum call gossips S - 1 times while the graph clock advances by S."""

    def average_step(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        gledger: Any,
        sledger: Any,
    ) -> Averaged:
        if not self.averaging_rule.gossips:
            return super().average_step(u, w, time, graph, gledger, sledger)
        result = push_sum(
            u,
            graph.mixing(time, max(self.pushsum_steps - 1, 0)),
            gledger,
            w if self.keep_weights else None,
        )
        return result.y, (result.omega if self.keep_weights else w), time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class NoDebias(HyperGradientPush):
    """Push-Sum returning the numerators z instead of ``z / omega`` (the de-bias forgotten)."""

    def average_step(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        gledger: Any,
        sledger: Any,
    ) -> Averaged:
        if not self.averaging_rule.gossips:
            return super().average_step(u, w, time, graph, gledger, sledger)
        result = push_sum(
            u, graph.mixing(time, self.pushsum_steps), gledger, w if self.keep_weights else None
        )
        return result.z, (result.omega if self.keep_weights else w), time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class StaleWeightDebias(HyperGradientPush):
    """Push-Sum de-biasing by the weights of one step before: ``z^(S) / omega^(S-1)``."""

    def average_step(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        gledger: Any,
        sledger: Any,
    ) -> Averaged:
        if not self.averaging_rule.gossips or self.pushsum_steps == 0:
            return super().average_step(u, w, time, graph, gledger, sledger)
        start = w if self.keep_weights else None
        result = push_sum(u, graph.mixing(time, self.pushsum_steps), gledger, start)
        before = push_sum(
            u, graph.mixing(time, self.pushsum_steps - 1), GraphLedger(graph.n), start
        )  # what the client still holds
        y = result.z / before.omega[..., None]
        return y, (result.omega if self.keep_weights else w), time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class StaleClock(HyperGradientPush):
    """Push-Sum calls that do not advance the graph clock: every call gossips over the same
    segment of the time-varying graph (a stale step counter)."""

    def average_step(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        gledger: Any,
        sledger: Any,
    ) -> Averaged:
        u_bar, w, _ = super().average_step(u, w, time, graph, gledger, sledger)
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


@dataclasses.dataclass(frozen=True)
class SummingExact(ExactAveraging):
    """The exact rule returning the clients' sum (a missing 1/n)."""

    def average(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        ledgers: Any,
        *,
        steps: int,
        keep_weights: bool,
    ) -> Averaged:
        mean, w, time = super().average(
            u, w, time, graph, ledgers, steps=steps, keep_weights=keep_weights
        )
        return u.shape[1] * mean, w, time


@dataclasses.dataclass(frozen=True)
class SummingServer(ServerAveraging):
    """The server rule returning the clients' sum (a missing 1/n)."""

    def average(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        ledgers: Any,
        *,
        steps: int,
        keep_weights: bool,
    ) -> Averaged:
        mean, w, time = super().average(
            u, w, time, graph, ledgers, steps=steps, keep_weights=keep_weights
        )
        return u.shape[1] * mean, w, time


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

    def builder(entry: str) -> Callable[..., Any]:
        def make(**kw: Any) -> Any:
            built = get_estimator(entry).build(**kw)
            if hasattr(built, "estimator"):
                return dataclasses.replace(built, estimator=recast(built.estimator, cls, **fixed))
            return recast(built, cls, **fixed)

        return make

    return {entry: builder(entry) for entry in (*entries, "hgp-personalization")}


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "hgp.terms_plus_one",
        "HGP loop",
        "count",
        "M + 1 fixed-point iterations while M is reported",
        _loop(ShiftedTerms, shift=1),
        first=(IDENTITY,),
        cheap=True,
    ),
    Mutant(
        "hgp.terms_minus_one",
        "HGP loop",
        "count",
        "M - 1 fixed-point iterations while M is reported",
        _loop(ShiftedTerms, shift=-1),
        first=(IDENTITY,),
    ),
    Mutant(
        "hgp.step_halved",
        "HGP loop",
        "step",
        "both updates step eta / 2 while eta is reported",
        _loop(ScaledStep, factor=0.5),
        first=(IDENTITY,),
    ),
    Mutant(
        "hgp.v_step_doubled",
        "HGP loop",
        "step",
        "the v-update steps 2 eta while the u-update steps eta",
        _loop(ScaledVStep, factor=2.0),
        first=(IDENTITY,),
    ),
    Mutant(
        "hgp.v_sign_flipped",
        "HGP loop",
        "correction",
        "the v-update adds eta J u_bar instead of subtracting it",
        _loop(FlippedVStep),
        first=(IDENTITY,),
    ),
    Mutant(
        "hgp.u_not_averaged",
        "HGP loop",
        "per_client",
        "the averaging of u skipped: each client runs its own series (LocalGrad)",
        _loop(NotAveraged),
        first=(IDENTITY,),
    ),
    Mutant(
        "hgp.averaging_sums",
        "HGP averaging rules",
        "normalisation",
        "the exact and the server averaging rule return the clients' sum (a missing 1/n)",
        {"hgp-exact-averaging": _summing_rules},
        first=(IDENTITY,),
        cheap=True,
    ),
    Mutant(
        "pushsum.step_short",
        "Push-Sum",
        "count",
        "each Push-Sum call gossips S - 1 times while the clock advances by S",
        _loop(PushSumStepShort, GOSSIP_ENTRIES),
        first=(CONSENSUS,),
    ),
    Mutant(
        "pushsum.no_debias",
        "Push-Sum",
        "pushsum_weight",
        "Push-Sum returns the numerators z instead of z / omega",
        _loop(NoDebias, GOSSIP_ENTRIES),
        first=(CONSENSUS,),
        cheap=True,
    ),
    Mutant(
        "pushsum.stale_weight_debias",
        "Push-Sum",
        "pushsum_weight",
        "Push-Sum de-biases by the weights of one step before: z^(S) / omega^(S-1)",
        _loop(StaleWeightDebias, GOSSIP_ENTRIES),
        first=(CONSENSUS,),
    ),
    Mutant(
        "pushsum.graph_clock_stale",
        "Push-Sum",
        "stale",
        "the graph clock is not advanced between Push-Sum calls: every call gossips over "
        "the same segment of the time-varying graph",
        _loop(StaleClock, GOSSIP_ENTRIES),
        first=(communication.VECTOR_MESSAGES.id,),
    ),
    Mutant(
        "pushsum.weights_not_reset",
        "Push-Sum",
        "pushsum_weight",
        "the Push-Sum weights omega carried over between calls instead of reset to 1 "
        "(the practical form's keep_weights on by mistake)",
        _loop(HyperGradientPush, ("hgp", "hgp-stochastic"), keep_weights=True),
        first=(negative_control.NOT_STRONGLY_CONNECTED.id,),
    ),
    Mutant(
        "pushsum.row_stochastic",
        "Push-Sum",
        "pushsum_weight",
        "the weights split by the receiver's in-degree (rows summing to one) instead of "
        "the sender's out-degree",
        _loop(RowStochastic, GOSSIP_ENTRIES),
        first=(CONSENSUS,),
    ),
    Mutant(
        "hgp-globalgrad.client_adjoint",
        "HGP closed forms",
        "per_client",
        "GlobalGrad computed with each client's own c_i instead of sum_k c_k",
        {"hgp-globalgrad": registry_variant("hgp-globalgrad", ClientAdjointGlobal)},
        first=(taxonomy.CLOSED_FORMS.id,),
    ),
)

#: Generated parameter perturbations (:mod:`theory_checks.parameter_mutants`) that no claim can
#: tell from the original, with the argument why no answer can change.
PARAMETER_EQUIVALENTS: dict[str, str] = {
    **{
        f"param.{entry}.batch_size.{way}": (
            f"every claim of {entry} runs exact Jacobians (batch_size None, the entry's default; "
            "the minibatch claims are hgp-stochastic's): the batch size does not exist in any "
            "answer of its suite"
        )
        for entry in ("hgp", "hgp-exact-averaging")
        for way in ("plus1", "minus1")
    },
    **{
        f"param.hgp.{keyword}.{way}": (
            "every claim of hgp runs the exact consensus inner solution (inner_steps None, the "
            "entry's default), where SGP's count and step do not exist; the inexact inner solution "
            "is pinned on hgp-exact-averaging (hgp.theorem2.corrected)"
        )
        for keyword, ways in (
            ("inner_steps", ("plus1", "minus1")),
            ("inner_step_size", ("half", "double")),
        )
        for way in ways
    },
    "param.hgp-exact-averaging.inner_steps.minus1": (
        "the one claim of the entry that runs SGP (hgp.theorem2.corrected) gives it T = 0 inner "
        "steps, where one less is no count (the case runs as built); every other claim runs the "
        "exact consensus solution; one step more is killed by hgp.theorem2.corrected"
    ),
    **{
        f"param.hgp-exact-averaging.inner_step_size.{way}": (
            "the one claim of the entry that runs SGP (hgp.theorem2.corrected) gives it T = 0 "
            "inner steps, so no SGP step is ever taken; every other claim runs the exact consensus "
            "solution"
        )
        for way in ("half", "double")
    },
    **{
        f"param.{entry}.{keyword}.{way}": (
            f"every claim of {entry} runs the exact consensus inner solution (inner_steps None, "
            "the entry's default; no check passes a count), where SGP's count and step do not "
            "exist; the inexact inner solution is pinned on hgp-exact-averaging "
            "(hgp.theorem2.corrected) and hgp-personalization (hgp.personalization.step_identity)"
        )
        for entry in ("hgp-stochastic", "hgp-static")
        for keyword, ways in (
            ("inner_steps", ("plus1", "minus1")),
            ("inner_step_size", ("half", "double")),
        )
        for way in ways
    },
    **{
        f"param.hgp-static.batch_size.{way}": (
            "every claim of the entry (hgp.theorem1.rate_in_s, hgp.alg1.static_operator, "
            "hgp.recursion.static_iterates) runs exact Jacobians (batch_size None, the entry's "
            "default): the batch size does not exist in their answers"
        )
        for way in ("plus1", "minus1")
    },
}
