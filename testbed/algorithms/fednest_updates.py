r"""FedNest's inner and outer updates as strategies (Tarzanagh et al., ICML 2022, Table 2).

A FedNest variant is a pair of strategies, one inner update run ``T`` times and one outer update
(:class:`~testbed.algorithms.fednest.FedNest`'s ``inner_method`` and ``outer_method``). Each field
takes a strategy object or its name, resolved through :data:`INNER_UPDATES` /
:data:`OUTER_UPDATES`:

| name | strategy | paper | rounds |
| --- | --- | --- | --- |
| inner "svrg" | :class:`FedInn` | FedInn, Alg. 4 | ``2T`` |
| inner "sgd" | :class:`LFedInn` | LFedInn / FedAvg (Alg. 6 of App. A, reconstructed) | ``T`` |
| outer "svrg" | :class:`FedOut` | FedIHGP + FedOut, Algs. 3, 2 | ``N' + 3`` (``N + 3``: fixed N) |
| outer "local" | :class:`LFedOut` | LFedOut, local Neumann (Alg. 5 reconstructed) | ``1`` |
| outer "minimax" | :class:`MinimaxFedOut` | FedOut without the indirect term, eq. (12) | ``2`` |

A strategy is a small frozen dataclass with its ``update``, its share of the rounds formula
(:meth:`rounds`: text as the paper prints it and the symbols' values) and any problem check. It
has no hyperparameters of its own: ``T``, ``N``, ``tau``, the truncation and the step rule are
FedNest's dataclass fields (their one home), which ``update`` and ``rounds`` read from the
configuration they are given.

:func:`fedinn_rows` is FedInn's (and LFedInn's) call for many runs at once, on the stacked
client rows of :class:`~testbed.federation.replicates.Replicates` (the replicates of one problem,
:mod:`testbed.algorithms.fednest_replicates`; the stacked problems of
:mod:`testbed.algorithms.fednest_stacked`).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import TYPE_CHECKING
from typing import ClassVar
from typing import NamedTuple

import torch

from problems import Problem
from testbed.estimators.fedihgp import IHGPResult
from testbed.estimators.fedihgp import fedihgp
from testbed.estimators.fednest import fedinn
from testbed.estimators.fednest import fedout
from testbed.estimators.fednest import lfedout
from testbed.federation.context import FederatedContext
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates
from testbed.federation.replicates import Replicates

if TYPE_CHECKING:  # the configuration a strategy reads; fednest.py imports this module
    from testbed.algorithms.fednest import FedNest
    from testbed.algorithms.fednest import StepSizes


@dataclasses.dataclass(frozen=True)
class UpdateInputs:
    """What one update of Alg. 1 is given: FedNest's configuration (``T``, ``N``, ``tau``, the
    truncation and the step rule), the federation, the point (``(x^k, y^{k,t})`` for the inner
    update, ``(x^k, y^{k+1})`` for the outer one) and the resolved step sizes."""

    config: FedNest
    ctx: FederatedContext
    x: torch.Tensor
    y: torch.Tensor
    steps: StepSizes

    def leading(self) -> tuple[FederatedContext, torch.Tensor, torch.Tensor]:
        """``(ctx, x, y)``, the leading arguments of FedNest's routines (``fedinn``, ``fedihgp``,
        ``fedout``, ``lfedout`` of :mod:`testbed.estimators.fednest`)."""
        return self.ctx, self.x, self.y


# An outer update's result: ``(x^+, h, FedIHGP's result or None)``.
OuterResult = tuple[torch.Tensor, torch.Tensor, IHGPResult | None]


class RoundsShare(NamedTuple):
    """A strategy's share of FedNest's rounds formula: ``text`` (``"2T"``, ``"N' + 3"``) and the
    values of the symbols it uses."""

    text: str
    parameters: dict[str, int]


@dataclasses.dataclass(frozen=True)
class InnerUpdate(abc.ABC):
    """One inner call ``y^{k,t+1} = update(x^k, y^{k,t}, beta)`` of Alg. 1 (run ``T`` times)."""

    name: ClassVar[str]

    @abc.abstractmethod
    def rounds(self, config: FedNest) -> RoundsShare:
        """The rounds of the ``T`` calls of one outer iteration."""

    @abc.abstractmethod
    def update(self, inputs: UpdateInputs) -> torch.Tensor:
        """``y^+`` from ``y`` at ``x``."""


@dataclasses.dataclass(frozen=True)
class _LocalInnerRound(InnerUpdate):
    """Local steps on y from the server's ``y``, averaged in one round; with
    ``variance_reduction`` around the averaged gradient ``q`` of a round before
    (:func:`~testbed.estimators.fednest.fedinn`)."""

    variance_reduction: ClassVar[bool]

    def update(self, inputs: UpdateInputs) -> torch.Tensor:
        config = inputs.config
        return fedinn(
            *inputs.leading(),
            inputs.steps.inner,
            config.local_steps,
            variance_reduction=self.variance_reduction,
            scale_by_steps=config.scale_by_steps,
        )


@dataclasses.dataclass(frozen=True)
class FedInn(_LocalInnerRound):
    """FedInn (Alg. 4): SVRG local steps on y around the averaged gradient ``q``; two rounds
    (``q``, then the average of the local iterates)."""

    name: ClassVar[str] = "svrg"
    variance_reduction: ClassVar[bool] = True

    def rounds(self, config: FedNest) -> RoundsShare:
        return RoundsShare("2T", {"T": config.inner_steps})


@dataclasses.dataclass(frozen=True)
class LFedInn(_LocalInnerRound):
    """LFedInn (FedAvg on y; Alg. 6 of App. A, reconstructed from Table 2 and the authors' code):
    FedInn's local steps without the control variate; one round."""

    name: ClassVar[str] = "sgd"
    variance_reduction: ClassVar[bool] = False

    def rounds(self, config: FedNest) -> RoundsShare:
        return RoundsShare("T", {"T": config.inner_steps})


def fedinn_rows(
    config: FedNest,
    side: Replicates,
    clients: torch.Tensor,
    x_rows: torch.Tensor,
    y: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """One inner call of every run of ``side`` (``config.inner_rule``, :class:`FedInn` or
    :class:`LFedInn`): :func:`~testbed.estimators.fednest.fedinn`'s rounds on the stacked rows,
    ``y^+ (R, dy)`` from ``y (R, dy)``. FedInn (Alg. 4) first averages the anchor gradient
    ``q = grad_y g_i(x, y)`` of ``clients`` (one round), then both run ``tau`` local steps of
    size ``beta`` (a float, or one value per row) from each run's ``y`` (around ``q`` for
    FedInn), averaged in one round. ``x_rows`` is each run's ``x`` on its clients' rows
    (:meth:`~testbed.federation.replicates.Replicates.rows`); the same client works as the
    unbatched rounds, so each run's numbers are its own run's, row by row."""
    y_rows = side.rows(y)
    direction = None
    if isinstance(config.inner_rule, FedInn):
        (snapshot,) = InnerGradient(x_rows, y_rows).run(side, clients).uploads
        direction = side.rows(side.aggregate(snapshot))
    work = LocalIterates(
        y_rows,
        InnerGradientAt(x_rows),
        config.local_steps,
        beta,
        global_direction=direction,
        scale_by_steps=config.scale_by_steps,
    )
    return side.aggregate(work.run(side, clients).uploads[0])


@dataclasses.dataclass(frozen=True)
class OuterUpdate(abc.ABC):
    """The outer update ``x^{k+1} = update(x^k, y^{k+1}, alpha)`` of Alg. 1."""

    name: ClassVar[str]

    def check_problem(self, problem: Problem) -> None:
        """Raise when the update is not valid for ``problem`` (none by default)."""
        del problem  # valid on every kind FedNest supports

    @abc.abstractmethod
    def rounds(self, config: FedNest) -> RoundsShare:
        """The rounds of one call."""

    @abc.abstractmethod
    def update(self, inputs: UpdateInputs) -> OuterResult:
        """``(x^+, h, FedIHGP's result or None)`` at ``(x, y^+)``."""


def fedihgp_at(inputs: UpdateInputs) -> IHGPResult:
    """FedIHGP (Alg. 3) at ``inputs``'s point with FedNest's ``N``, truncation and step
    ``1 / l_{g,1}``."""
    config = inputs.config
    return fedihgp(*inputs.leading(), config.neumann_terms, inputs.steps.neumann, config.truncation)


def fedout_steps(inputs: UpdateInputs, p: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """FedOut (Alg. 2) at ``inputs``'s point and configuration with FedIHGP's ``p`` (``None``:
    no indirect term, eq. (12)): ``(x^+, h)``."""
    config = inputs.config
    return fedout(
        *inputs.leading(), p, inputs.steps.outer, config.local_steps, config.scale_by_steps
    )


@dataclasses.dataclass(frozen=True)
class FedOut(OuterUpdate):
    """FedIHGP (Alg. 3, ``N' + 1`` rounds, ``N + 1`` deterministic) then FedOut (Alg. 2, two
    rounds): SVRG local steps on x with the drift correction on the direct part only (eqs.
    (10)-(11))."""

    name: ClassVar[str] = "svrg"

    def rounds(self, config: FedNest) -> RoundsShare:
        return RoundsShare(
            "N' + 3" if config.truncation == "random" else "N + 3", {"N": config.neumann_terms}
        )

    def update(self, inputs: UpdateInputs) -> OuterResult:
        result = fedihgp_at(inputs)
        return (*fedout_steps(inputs, result.p), result)


@dataclasses.dataclass(frozen=True)
class MinimaxFedOut(OuterUpdate):
    """FedOut without the indirect term (Sec. 2.4, eq. (12)): ``grad_xy g_i = 0`` cannot be
    assumed in general, so it is valid only for minimax problems; two rounds."""

    name: ClassVar[str] = "minimax"

    def check_problem(self, problem: Problem) -> None:
        if problem.kind != "minimax":
            raise ValueError(
                "outer_method='minimax' drops the indirect term, which is valid "
                f"only for minimax problems (got a {problem.kind} problem)"
            )

    def rounds(self, config: FedNest) -> RoundsShare:
        return RoundsShare("2", {})

    def update(self, inputs: UpdateInputs) -> OuterResult:
        return (*fedout_steps(inputs, None), None)


@dataclasses.dataclass(frozen=True)
class LFedOut(OuterUpdate):
    """LFedOut (Alg. 5 of App. A, reconstructed from Table 2 and the authors' code): local
    hypergradient steps with each client's own Neumann series, one round; on a minimax problem
    without the indirect term."""

    name: ClassVar[str] = "local"

    def rounds(self, config: FedNest) -> RoundsShare:
        return RoundsShare("1", {})

    def update(self, inputs: UpdateInputs) -> OuterResult:
        config, steps = inputs.config, inputs.steps
        x_plus, h = lfedout(
            *inputs.leading(),
            steps.outer,
            config.local_steps,
            config.neumann_terms,
            steps.neumann,
            indirect=inputs.ctx.problem.kind != "minimax",
            scale_by_steps=config.scale_by_steps,
        )
        return x_plus, h, None


# The strategies by name: ``inner_method`` / ``outer_method`` accept a strategy or its name, and
# the registry, the claims, the configs and the tests pass names (a config's value is a string).
INNER_UPDATES: dict[str, InnerUpdate] = {s.name: s for s in (FedInn(), LFedInn())}
OUTER_UPDATES: dict[str, OuterUpdate] = {s.name: s for s in (FedOut(), LFedOut(), MinimaxFedOut())}

__all__ = [
    "INNER_UPDATES",
    "OUTER_UPDATES",
    "FedInn",
    "FedOut",
    "InnerUpdate",
    "LFedInn",
    "LFedOut",
    "MinimaxFedOut",
    "OuterResult",
    "OuterUpdate",
    "RoundsShare",
    "UpdateInputs",
    "fedihgp_at",
    "fedinn_rows",
    "fedout_steps",
]
