"""FedMSA perturbations: the smallest realistic bug that each claim expected to hold must catch.

Each builder takes the registry's keyword parameters (like ``EstimatorInfo.build``), builds the
registered algorithm and returns a copy of it with one mistake: a subclass of
:class:`~testbed.algorithms.fedmsa.FedMSA` or of its maps. Which claim names which builder, and
why that bug is the smallest that matters to it, is in the claims' perturbations (their result
modules of :mod:`theory_checks.fedmsa`); the mutants (:mod:`theory_checks.fedmsa.mutants`)
reuse the classes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from testbed.algorithms.fedmsa import FedMSA
from testbed.algorithms.fedmsa_maps import BilevelMaps
from testbed.algorithms.fedmsa_maps import CompositionalMaps
from testbed.algorithms.fedmsa_maps import GlobalStepInputs
from testbed.algorithms.fedmsa_maps import MapInputs
from testbed.algorithms.fedmsa_maps import repeat_batch
from theory_checks.perturbed_variants import registry_variant

# --------------------------------------------------------------------------- maps


@dataclasses.dataclass(frozen=True)
class FreshSampleAtOldPoint(BilevelMaps):
    """Eqs. (5)-(6) evaluate both points of a difference on one sample; here the second stacked
    point (the previous one) gets the next sample of the client's set instead."""

    def evaluate(self, at: MapInputs) -> tuple[torch.Tensor, torch.Tensor]:
        C = int(at.clients.shape[0]) // 2
        if C == 0 or at.batches[0] is None:
            return super().evaluate(at)
        problem: Any = at.oracles.problem
        shifted = [None if b is None else repeat_batch(b, 1) for b in at.batches]
        for b in shifted:
            if b is not None:
                b.indices[C:] = (b.indices[C:] + 1) % problem.n_samples
        return super().evaluate(at._replace(batches=shifted))


@dataclasses.dataclass(frozen=True)
class IndirectTermOnW(BilevelMaps):
    """(10b)'s indirect term ``grad^2_xw g v`` evaluated on the w-block of ``z = [w; v]``
    instead of the v-block (an off-by-one-block slice of the flat Z)."""

    def evaluate(self, at: MapInputs) -> tuple[torch.Tensor, torch.Tensor]:
        p, s = super().evaluate(at)
        oracles, x, Z, clients, (_, zeta) = at
        dy = oracles.problem.dim_y
        w, v = Z[:, :dy], Z[:, dy:]
        Jv = oracles.jvp_inner_xy(x, w, v, clients, zeta)
        Jw = oracles.jvp_inner_xy(x, w, w, clients, zeta)
        return p + Jv - Jw, s


@dataclasses.dataclass(frozen=True)
class VEquationSignConvention(BilevelMaps):
    """(10a)'s v-block with eq. (1)'s sign convention, ``grad^2_w g v + grad_w f``, beside
    (10b) in eq. (2)'s: the paper uses both conventions (Sec. 2.2), and mixing them moves the
    fixed point to ``v = -v*``, so P there is not the hypergradient."""

    def evaluate(self, at: MapInputs) -> tuple[torch.Tensor, torch.Tensor]:
        p, s = super().evaluate(at)
        oracles, x, Z, clients, (xi, _) = at
        dy = oracles.problem.dim_y
        _, fw = oracles.grad_outer(x, Z[:, :dy], clients, xi)
        return p, torch.cat([s[:, :dy], s[:, dy:] + 2.0 * fw], dim=1)


@dataclasses.dataclass(frozen=True)
class AlwaysPaper(CompositionalMaps):
    """Claims the "exact" semantics but evaluates the paper's average of per-client products."""

    def exact_map(self, problem: Any, x: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        return CompositionalMaps("paper").exact_map(problem, x, Z)


# --------------------------------------------------------------------------- algorithm


class FirstClientOnly:
    """A view of a federated context in which the named calls see only the first client."""

    def __init__(self, ctx: Any, first_global: bool = False, first_local: bool = False):
        self._ctx = ctx
        self._first_global, self._first_local = first_global, first_local

    def all_clients(self) -> torch.Tensor:
        clients = self._ctx.all_clients()
        return clients[:1] if self._first_global else clients

    def participants(self) -> torch.Tensor:
        clients = self._ctx.participants()
        return clients[:1] if self._first_local else clients

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


@dataclasses.dataclass(frozen=True)
class WrongGlobalStep(FedMSA):
    """FedMSA whose global step (5) has one mistake around the maps' real one: the real step run
    on wrong inputs (:meth:`step_inputs`), or its ``(h_r, q_r)`` changed after it
    (:meth:`step_output`), each as given unless a bug overrides it."""

    def step_inputs(self, step: GlobalStepInputs) -> GlobalStepInputs:
        """The inputs the real global step runs on (the given ones)."""
        return step

    def step_output(
        self, step: GlobalStepInputs, h: torch.Tensor, q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h_r, q_r)`` as returned from the real step's ``(h, q)`` on ``step`` (as computed)."""
        del step  # as computed
        return h, q

    def global_directions(self, step: GlobalStepInputs) -> tuple[torch.Tensor, torch.Tensor]:
        wrong = self.step_inputs(step)
        return self.step_output(wrong, *super().global_directions(wrong))


@dataclasses.dataclass(frozen=True)
class OneClientGlobal(WrongGlobalStep):
    """The global step (5) uses client 0's maps only instead of the average over M clients."""

    def step_inputs(self, step: GlobalStepInputs) -> GlobalStepInputs:
        view: Any = FirstClientOnly(step.ctx, first_global=True)
        prev = None if step.prev is None else step.prev[:1]
        return step._replace(ctx=view, points=step.points[:1], prev=prev)


@dataclasses.dataclass(frozen=True)
class StatefulClient(FedMSA):
    """Eq. (5)'s ``h_{r-1}, q_{r-1}`` taken from the local client's last SARAH state
    ``(h_{r-1,K}, q_{r-1,K})`` instead of the previous global averages (eq. (5): the clients
    are stateless; the server sends ``h_{r-1}``)."""

    def advance(self, ctx: Any, state: Any) -> Any:
        if state.local:
            last = state.local[-1]
            state = dataclasses.replace(state, h=last.h[0], q=last.q[0])
        return super().advance(ctx, state)


@dataclasses.dataclass(frozen=True)
class ExtraLocalStep(FedMSA):
    """The local loop runs K + 1 steps in rounds r >= 1 (``range(K + 1)`` for
    ``range(1, K + 1)``)."""

    def advance(self, ctx: Any, state: Any) -> Any:
        if state.round == 0:
            return super().advance(ctx, state)
        return FedMSA.advance(
            dataclasses.replace(self, local_steps=self.local_steps + 1), ctx, state
        )


@dataclasses.dataclass(frozen=True)
class IgnoresK(FedMSA):
    """Runs one local step whatever K is (a loop bound that stops after the first step)."""

    def advance(self, ctx: Any, state: Any) -> Any:
        return FedMSA.advance(dataclasses.replace(self, local_steps=1), ctx, state)


@dataclasses.dataclass(frozen=True)
class AscentOnZ(FedMSA):
    """``z <- z + beta q``: the stochastic-approximation update written with the other sign
    convention (``z_{k+1} = z_k + beta S`` for a map S defined as minus FedMSA's)."""

    def _betas(self, problem: Any) -> torch.Tensor:
        return -super()._betas(problem)


# --------------------------------------------------------------------------- builders


fresh_sample_at_old_point = registry_variant("fedmsa", FedMSA, maps=FreshSampleAtOldPoint())
indirect_term_on_w = registry_variant("fedmsa", FedMSA, maps=IndirectTermOnW())
always_paper_semantics = registry_variant("fedmsa-mco", FedMSA, maps=AlwaysPaper())
one_client_global = registry_variant("fedmsa", OneClientGlobal)
stateful_client = registry_variant("fedmsa", StatefulClient)
extra_local_step = registry_variant("fedmsa", ExtraLocalStep)
ignores_k = registry_variant("fedmsa", IgnoresK)
ascent_on_z = registry_variant("fedmsa", AscentOnZ)
