"""The wrong FedNest parts the mutants of :mod:`theory_checks.fednest.mutants` plant (Tarzanagh
et al., ICML 2022): one mistake each in FedIHGP (Alg. 3), FedInn (Alg. 4) and LFedInn, FedOut
(Alg. 2) and LFedOut (local Neumann), the minimax FedOut and the outer loop (Alg. 1).

Each is a subclass of the real estimator, update strategy or algorithm. Where the mistake lives
inside a round's local steps, the subclass runs the real client work
(:class:`~testbed.federation.local.LocalIterates` through ``ctx.run_clients``, as FedInn and
FedOut do) with the one wrong argument, and otherwise calls the real routines
(:func:`~testbed.estimators.fednest.fedinn`, :func:`~testbed.estimators.fednest.fedout`,
:func:`~testbed.estimators.fednest.fedihgp`) with the wrong value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from testbed.algorithms.fednest import FedNest
from testbed.algorithms.fednest_updates import FedInn
from testbed.algorithms.fednest_updates import FedOut
from testbed.algorithms.fednest_updates import LFedInn
from testbed.algorithms.fednest_updates import LFedOut
from testbed.algorithms.fednest_updates import MinimaxFedOut
from testbed.estimators.fednest import FedIHGP
from testbed.estimators.fednest import IHGPResult
from testbed.estimators.fednest import fedihgp
from testbed.estimators.fednest import fedinn
from testbed.estimators.fednest import fedout
from testbed.estimators.fednest import lfedout
from testbed.estimators.fednest import send
from testbed.federation.client_work import ClientWork
from testbed.federation.context import FederatedContext
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt

# --------------------------------------------------------------------------- FedIHGP


@dataclasses.dataclass(frozen=True)
class ScaledStepIHGP(FedIHGP):
    """FedIHGP whose Neumann step is ``factor / l`` while ``1 / l`` is reported."""

    factor: float = 0.5

    def steps(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().steps(problem)
        return beta, self.factor * lam


@dataclasses.dataclass(frozen=True)
class SummedIHGP(FedIHGP):
    """FedIHGP whose server sums ``p_0`` over the subset instead of averaging (a missing
    ``1/|S_0|``)."""

    def ihgp(
        self,
        ctx: FederatedContext,
        x: torch.Tensor,
        y: torch.Tensor,
        truncation_index: int | None = None,
    ) -> IHGPResult:
        out = super().ihgp(ctx, x, y, truncation_index)
        size = float(
            ctx.problem.n_clients if ctx.participation is None else len(ctx.participants())
        )
        return out._replace(p=size * out.p, path=tuple(size * q for q in out.path))


@dataclasses.dataclass(frozen=True)
class FlippedIndirectIHGP(FedIHGP):
    """FedIHGP's direction adds the indirect part: ``grad_x f_i + J_i p`` (eq. (13a)'s sign)."""

    def direction(
        self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, p: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return super().direction(ctx, x, y, None if p is None else -p)


# --------------------------------------------------------------------------- FedInn / LFedInn


@dataclasses.dataclass(frozen=True)
class ShiftedLocalFedInn(FedInn):
    """FedInn running ``tau_i + shift`` local steps (at least one)."""

    shift: int = 1

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> torch.Tensor:
        return fedinn(
            ctx,
            x,
            y,
            steps.inner,
            _shifted(config.local_steps, self.shift),
            variance_reduction=True,
            scale_by_steps=config.scale_by_steps,
        )


@dataclasses.dataclass(frozen=True)
class ShiftedLocalLFedInn(LFedInn):
    """LFedInn (FedAvg) running ``tau_i + shift`` local steps."""

    shift: int = 1

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> torch.Tensor:
        return fedinn(
            ctx,
            x,
            y,
            steps.inner,
            _shifted(config.local_steps, self.shift),
            variance_reduction=False,
            scale_by_steps=config.scale_by_steps,
        )


def _shifted(local_steps: Any, shift: int) -> Any:
    if isinstance(local_steps, int):
        return max(local_steps + shift, 1)
    return tuple(max(t + shift, 1) for t in local_steps)


@dataclasses.dataclass(frozen=True)
class ScaledStepFedInn(FedInn):
    """FedInn stepping ``factor * beta`` while beta is reported."""

    factor: float = 2.0

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> torch.Tensor:
        return super().update(config, ctx, x, y, steps._replace(inner=self.factor * steps.inner))


@dataclasses.dataclass(frozen=True)
class UnscaledFedInn(FedInn):
    """FedInn's local step ``beta`` where Thm 3.1's rule says ``beta / tau_i`` (a missing
    ``1/tau``)."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> torch.Tensor:
        return fedinn(
            ctx,
            x,
            y,
            steps.inner,
            config.local_steps,
            variance_reduction=True,
            scale_by_steps=False,
        )


@dataclasses.dataclass(frozen=True)
class UncorrectedFedInn(FedInn):
    """FedInn without its control variate (the FedAvg step of LFedInn under FedInn's name)."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> torch.Tensor:
        return fedinn(
            ctx,
            x,
            y,
            steps.inner,
            config.local_steps,
            variance_reduction=False,
            scale_by_steps=config.scale_by_steps,
        )


@dataclasses.dataclass(frozen=True)
class FlippedCorrectionFedInn(FedInn):
    """FedInn whose control variate subtracts the averaged gradient ``q``:
    ``G_i(y_nu) - G_i(y) - q`` for ``G_i(y_nu) - G_i(y) + q``."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> torch.Tensor:
        # fedinn's two rounds, with -q where Alg. 4 adds q: the anchor gradients' average
        # (InnerGradient), then the real local steps (LocalIterates) around the wrong q
        clients = ctx.participants()
        send(ctx, clients, x=x, y=y)
        (snapshot,) = ctx.run_clients(InnerGradient(x, y), clients).uploads
        q = ctx.aggregate(snapshot, clients, "q")
        return _local_average(
            ctx,
            clients,
            LocalIterates(
                y,
                InnerGradientAt(x),
                config.local_steps,
                steps.inner,
                global_direction=-q,
                scale_by_steps=config.scale_by_steps,
            ),
            "y",
        )


def _local_average(
    ctx: FederatedContext, clients: torch.Tensor, work: ClientWork, name: str
) -> torch.Tensor:
    """The clients' last local iterates of ``work``, averaged in one round (named ``name``)."""
    (local,) = ctx.run_clients(work, clients).uploads
    return ctx.aggregate(local, clients, name)


@dataclasses.dataclass(frozen=True)
class CorrectedLFedInn(LFedInn):
    """LFedInn (FedAvg) that runs FedInn's control variate (the baseline secretly corrected)."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> torch.Tensor:
        return fedinn(
            ctx,
            x,
            y,
            steps.inner,
            config.local_steps,
            variance_reduction=True,
            scale_by_steps=config.scale_by_steps,
        )


# --------------------------------------------------------------------------- FedOut / LFedOut


@dataclasses.dataclass(frozen=True)
class ShiftedTermsFedOut(FedOut):
    """FedOut whose FedIHGP runs ``N + shift`` terms while N is reported."""

    shift: int = 1

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        shifted = dataclasses.replace(
            config, neumann_terms=max(config.neumann_terms + self.shift, 1)
        )
        return super().update(shifted, ctx, x, y, steps)


@dataclasses.dataclass(frozen=True)
class ScaledNeumannFedOut(FedOut):
    """FedOut whose FedIHGP steps ``factor / l`` while ``1 / l`` is reported."""

    factor: float = 0.5

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        return super().update(
            config, ctx, x, y, steps._replace(neumann=self.factor * steps.neumann)
        )


@dataclasses.dataclass(frozen=True)
class FlippedIndirectFedOut(FedOut):
    """FedOut adding the indirect part: FedIHGP's ``p`` used with the wrong sign."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        result = fedihgp(ctx, x, y, config.neumann_terms, steps.neumann, config.truncation)
        x_plus, h = fedout(
            ctx, x, y, -result.p, steps.outer, config.local_steps, config.scale_by_steps
        )
        return x_plus, h, result


@dataclasses.dataclass(frozen=True)
class UncorrectedFedOut(FedOut):
    """FedOut's local x-steps without the drift correction: each client steps along its own
    direct gradient ``grad_x f_i`` (FedAvg on x), the broadcast h computed and not used."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        result = fedihgp(ctx, x, y, config.neumann_terms, steps.neumann, config.truncation)
        clients = ctx.participants()
        send(ctx, clients, x, y, result.p)
        direct = ctx.oracles.grad_outer_x(x, y, clients, ctx.draw(clients))
        indirect = -ctx.oracles.jvp_inner_xy(x, y, result.p, clients, ctx.draw(clients))
        h = ctx.aggregate(direct + indirect, clients)
        work = LocalIterates(
            x,
            OuterGradientXAt(y),
            config.local_steps,
            steps.outer,
            scale_by_steps=config.scale_by_steps,
        )
        x_plus = _local_average(ctx, clients, work, "x")
        return x_plus, h, result


@dataclasses.dataclass(frozen=True)
class UnscaledFedOut(FedOut):
    """FedOut's local x-step ``alpha`` where the rule says ``alpha / tau_i``."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        result = fedihgp(ctx, x, y, config.neumann_terms, steps.neumann, config.truncation)
        x_plus, h = fedout(
            ctx, x, y, result.p, steps.outer, config.local_steps, scale_by_steps=False
        )
        return x_plus, h, result


@dataclasses.dataclass(frozen=True)
class UnscaledMinimaxFedOut(MinimaxFedOut):
    """The minimax FedOut (the same ``fedout`` routine) with local x-step ``alpha``."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        x_plus, h = fedout(ctx, x, y, None, steps.outer, config.local_steps, scale_by_steps=False)
        return x_plus, h, None


@dataclasses.dataclass(frozen=True)
class UncorrectedMinimaxFedOut(MinimaxFedOut):
    """The minimax FedOut's local x-steps without the drift correction (FedAvg on x)."""

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        clients = ctx.participants()
        send(ctx, clients, x, y)
        h = ctx.aggregate(ctx.oracles.grad_outer_x(x, y, clients, ctx.draw(clients)), clients)
        work = LocalIterates(
            x,
            OuterGradientXAt(y),
            config.local_steps,
            steps.outer,
            scale_by_steps=config.scale_by_steps,
        )
        x_plus = _local_average(ctx, clients, work, "x")
        return x_plus, h, None


@dataclasses.dataclass(frozen=True)
class ShiftedTermsLFedOut(LFedOut):
    """LFedOut whose local Neumann series runs ``N + shift`` terms."""

    shift: int = -1

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        x_plus, h = lfedout(
            ctx,
            x,
            y,
            steps.outer,
            config.local_steps,
            max(config.neumann_terms + self.shift, 1),
            steps.neumann,
            indirect=ctx.problem.kind != "minimax",
            scale_by_steps=config.scale_by_steps,
        )
        return x_plus, h, None


@dataclasses.dataclass(frozen=True)
class ScaledNeumannLFedOut(LFedOut):
    """LFedOut whose local Neumann series steps ``factor / l``."""

    factor: float = 0.5

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        return super().update(
            config, ctx, x, y, steps._replace(neumann=self.factor * steps.neumann)
        )


@dataclasses.dataclass(frozen=True)
class ScaledStepMinimaxFedOut(MinimaxFedOut):
    """The minimax FedOut stepping ``factor * alpha``."""

    factor: float = 2.0

    def update(
        self, config: FedNest, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, steps: Any
    ) -> tuple[torch.Tensor, torch.Tensor, IHGPResult | None]:
        return super().update(config, ctx, x, y, steps._replace(outer=self.factor * steps.outer))


# --------------------------------------------------------------------------- the outer loop


@dataclasses.dataclass(frozen=True)
class StaleInnerFedNest(FedNest):
    """FedNest whose outer update runs at the iteration's starting ``y^k`` instead of the
    ``y^{k+1}`` its T inner calls just computed (the stale variable passed on)."""

    def advance(self, ctx: FederatedContext, state: Any) -> Any:
        start = ctx.rounds_so_far()
        y = state.y
        for _ in range(self.inner_steps):
            y = self.inner_update(ctx, state.x, y, state.steps)
        x_plus, h, result = self.outer_update(ctx, state.x, state.y, state.steps)
        index = None if result is None else result.truncation_index
        return type(state)(x_plus, y, h, state.steps, index, ctx.rounds_so_far() - start)
