"""The wrong FedNest parts the mutants of :mod:`theory_checks.fednest.mutants` plant (Tarzanagh
et al., ICML 2022): one mistake each in FedIHGP (Alg. 3), FedInn (Alg. 4) and LFedInn, FedOut
(Alg. 2) and LFedOut (local Neumann), the minimax FedOut and the outer loop (Alg. 1).

Each is a subclass of the real estimator, update strategy or algorithm. A mistake in what a
strategy is given (a count, a step, the ``1/tau`` rule: :class:`WrongInputs`) runs the real
strategy on the wrong configuration or step sizes; a mistake in the control variate runs the real
routine with its switch flipped (``variance_reduction``); a mistake inside a round's local steps
runs the real client work (:class:`~testbed.federation.local.LocalIterates` through
``ctx.run_clients``, as FedInn and FedOut do) with the one wrong argument, and otherwise calls the
real routines (:func:`~testbed.estimators.fedihgp.fedihgp`,
:func:`~testbed.estimators.fednest.fedout`) with the wrong value.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import ClassVar
from typing import cast

import torch

from testbed.algorithms.fednest import FedNest
from testbed.algorithms.fednest import StepSizes
from testbed.algorithms.fednest_updates import FedInn
from testbed.algorithms.fednest_updates import FedOut
from testbed.algorithms.fednest_updates import LFedInn
from testbed.algorithms.fednest_updates import LFedOut
from testbed.algorithms.fednest_updates import MinimaxFedOut
from testbed.algorithms.fednest_updates import OuterResult
from testbed.algorithms.fednest_updates import UpdateInputs
from testbed.algorithms.fednest_updates import fedihgp_at
from testbed.algorithms.fednest_updates import fedout_steps
from testbed.estimators.fednest import FedIHGP
from testbed.federation.client_work import ClientWork
from testbed.federation.context import FederatedContext
from testbed.federation.context import send
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt
from theory_checks.fednest.perturbations import WrongIHGP

# --------------------------------------------------------------------------- FedIHGP


@dataclasses.dataclass(frozen=True)
class ScaledStepIHGP(FedIHGP):
    """FedIHGP whose Neumann step is ``factor / l`` while ``1 / l`` is reported."""

    factor: float = 0.5

    def steps(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().steps(problem)
        return beta, self.factor * lam


@dataclasses.dataclass(frozen=True)
class SummedIHGP(WrongIHGP):
    """FedIHGP whose server sums ``p_0`` over the subset instead of averaging (a missing
    ``1/|S_0|``)."""

    def result_scale(self, ctx: FederatedContext) -> float:
        return float(
            ctx.problem.n_clients if ctx.participation is None else len(ctx.participants())
        )


@dataclasses.dataclass(frozen=True)
class FlippedIndirectIHGP(FedIHGP):
    """FedIHGP's direction adds the indirect part: ``grad_x f_i + J_i p`` (eq. (13a)'s sign)."""

    def direction(
        self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, p: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return super().direction(ctx, x, y, None if p is None else -p)


# --------------------------------------------------------------------------- wrong inputs


class WrongInputs:
    """A mistake in what a FedNest update strategy is given (a base put before the strategy's
    class): the strategy's own ``update`` run on :meth:`wrong_config` of the configuration and
    :meth:`wrong_steps` of the step sizes, each as given unless a bug overrides it."""

    def wrong_config(self, config: FedNest) -> FedNest:
        """The configuration the strategy runs with (the given one)."""
        return config

    def wrong_steps(self, steps: StepSizes) -> StepSizes:
        """The step sizes the strategy runs with (the given ones)."""
        return steps

    def update(self, inputs: UpdateInputs) -> Any:
        strategy = cast(Any, super())  # the real strategy, the next class of the bug's bases
        config, steps = self.wrong_config(inputs.config), self.wrong_steps(inputs.steps)
        return strategy.update(dataclasses.replace(inputs, config=config, steps=steps))


@dataclasses.dataclass(frozen=True)
class LocalStepsShifted(WrongInputs):
    """The strategy run with ``tau_i + shift`` local steps (at least one)."""

    shift: int = 1

    def wrong_config(self, config: FedNest) -> FedNest:
        steps = config.local_steps
        shifted = (
            max(steps + self.shift, 1)
            if isinstance(steps, int)
            else tuple(max(t + self.shift, 1) for t in steps)
        )
        return dataclasses.replace(config, local_steps=shifted)


@dataclasses.dataclass(frozen=True)
class TermsShifted(WrongInputs):
    """The strategy's Neumann series run with ``N + shift`` terms (at least one) while N is
    reported."""

    shift: int = 1

    def wrong_config(self, config: FedNest) -> FedNest:
        return dataclasses.replace(config, neumann_terms=max(config.neumann_terms + self.shift, 1))


@dataclasses.dataclass(frozen=True)
class StepsNotScaled(WrongInputs):
    """The strategy's local step ``beta`` or ``alpha`` where Thm 3.1's rule says ``beta / tau_i``
    or ``alpha / tau_i`` (a missing ``1/tau``)."""

    def wrong_config(self, config: FedNest) -> FedNest:
        return dataclasses.replace(config, scale_by_steps=False)


@dataclasses.dataclass(frozen=True)
class StepScaled(WrongInputs):
    """The strategy stepping ``factor`` times its step ``scaled`` (``"inner"`` beta,
    ``"outer"`` alpha, ``"neumann"`` 1 / l) while the step is reported."""

    scaled: ClassVar[str]
    factor: float = 0.5

    def wrong_steps(self, steps: StepSizes) -> StepSizes:
        return steps._replace(**{self.scaled: self.factor * getattr(steps, self.scaled)})


# --------------------------------------------------------------------------- FedInn / LFedInn


@dataclasses.dataclass(frozen=True)
class ShiftedLocalFedInn(LocalStepsShifted, FedInn):
    """FedInn running ``tau_i + shift`` local steps (at least one)."""


@dataclasses.dataclass(frozen=True)
class ShiftedLocalLFedInn(LocalStepsShifted, LFedInn):
    """LFedInn (FedAvg) running ``tau_i + shift`` local steps."""


@dataclasses.dataclass(frozen=True)
class ScaledStepFedInn(StepScaled, FedInn):
    """FedInn stepping ``factor * beta`` while beta is reported."""

    scaled: ClassVar[str] = "inner"
    factor: float = 2.0


@dataclasses.dataclass(frozen=True)
class UnscaledFedInn(StepsNotScaled, FedInn):
    """FedInn's local step ``beta`` where Thm 3.1's rule says ``beta / tau_i`` (a missing
    ``1/tau``)."""


@dataclasses.dataclass(frozen=True)
class UncorrectedFedInn(FedInn):
    """FedInn without its control variate (the FedAvg step of LFedInn under FedInn's name)."""

    variance_reduction: ClassVar[bool] = False


@dataclasses.dataclass(frozen=True)
class CorrectedLFedInn(LFedInn):
    """LFedInn (FedAvg) that runs FedInn's control variate (the baseline secretly corrected)."""

    variance_reduction: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class FlippedCorrectionFedInn(FedInn):
    """FedInn whose control variate subtracts the averaged gradient ``q``:
    ``G_i(y_nu) - G_i(y) - q`` for ``G_i(y_nu) - G_i(y) + q``."""

    def update(self, inputs: UpdateInputs) -> torch.Tensor:
        config, ctx, x, y, steps = inputs.config, inputs.ctx, inputs.x, inputs.y, inputs.steps
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


# --------------------------------------------------------------------------- FedOut / LFedOut


@dataclasses.dataclass(frozen=True)
class ShiftedTermsFedOut(TermsShifted, FedOut):
    """FedOut whose FedIHGP runs ``N + shift`` terms while N is reported."""


@dataclasses.dataclass(frozen=True)
class ScaledNeumannFedOut(StepScaled, FedOut):
    """FedOut whose FedIHGP steps ``factor / l`` while ``1 / l`` is reported."""

    scaled: ClassVar[str] = "neumann"


@dataclasses.dataclass(frozen=True)
class FlippedIndirectFedOut(FedOut):
    """FedOut adding the indirect part: FedIHGP's ``p`` used with the wrong sign."""

    def update(self, inputs: UpdateInputs) -> OuterResult:
        result = fedihgp_at(inputs)
        return (*fedout_steps(inputs, -result.p), result)


def _uncorrected_x_steps(inputs: UpdateInputs, clients: torch.Tensor) -> torch.Tensor:
    """FedOut's local x-steps without the drift correction: each client steps along its own
    direct gradient ``grad_x f_i`` (FedAvg on x), averaged in one round."""
    config = inputs.config
    work = LocalIterates(
        inputs.x,
        OuterGradientXAt(inputs.y),
        config.local_steps,
        inputs.steps.outer,
        scale_by_steps=config.scale_by_steps,
    )
    return _local_average(inputs.ctx, clients, work, "x")


@dataclasses.dataclass(frozen=True)
class UncorrectedFedOut(FedOut):
    """FedOut's local x-steps without the drift correction: each client steps along its own
    direct gradient ``grad_x f_i`` (FedAvg on x), the broadcast h computed and not used."""

    def update(self, inputs: UpdateInputs) -> OuterResult:
        result = fedihgp_at(inputs)
        ctx, x, y = inputs.ctx, inputs.x, inputs.y
        clients = ctx.participants()
        send(ctx, clients, x, y, result.p)
        direct = ctx.oracles.grad_outer_x(x, y, clients, ctx.draw(clients))
        indirect = -ctx.oracles.jvp_inner_xy(x, y, result.p, clients, ctx.draw(clients))
        h = ctx.aggregate(direct + indirect, clients)
        return _uncorrected_x_steps(inputs, clients), h, result


@dataclasses.dataclass(frozen=True)
class UnscaledFedOut(StepsNotScaled, FedOut):
    """FedOut's local x-step ``alpha`` where the rule says ``alpha / tau_i``."""


@dataclasses.dataclass(frozen=True)
class UnscaledMinimaxFedOut(StepsNotScaled, MinimaxFedOut):
    """The minimax FedOut (the same ``fedout`` routine) with local x-step ``alpha``."""


@dataclasses.dataclass(frozen=True)
class UncorrectedMinimaxFedOut(MinimaxFedOut):
    """The minimax FedOut's local x-steps without the drift correction (FedAvg on x)."""

    def update(self, inputs: UpdateInputs) -> OuterResult:
        ctx, x, y = inputs.ctx, inputs.x, inputs.y
        clients = ctx.participants()
        send(ctx, clients, x, y)
        h = ctx.aggregate(ctx.oracles.grad_outer_x(x, y, clients, ctx.draw(clients)), clients)
        return _uncorrected_x_steps(inputs, clients), h, None


@dataclasses.dataclass(frozen=True)
class ShiftedTermsLFedOut(TermsShifted, LFedOut):
    """LFedOut whose local Neumann series runs ``N + shift`` terms."""

    shift: int = -1


@dataclasses.dataclass(frozen=True)
class ScaledNeumannLFedOut(StepScaled, LFedOut):
    """LFedOut whose local Neumann series steps ``factor / l``."""

    scaled: ClassVar[str] = "neumann"


@dataclasses.dataclass(frozen=True)
class ScaledStepMinimaxFedOut(StepScaled, MinimaxFedOut):
    """The minimax FedOut stepping ``factor * alpha``."""

    scaled: ClassVar[str] = "outer"
    factor: float = 2.0


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
