r"""FBO-AggITD (Xiao & Ji 2023, Alg. 3) with One-Round-Lower (Alg. 2) and One-Round-Upper (Alg. 4).

One outer iteration is

.. math::

    \tilde h, y_{k+1} = \mathrm{AggITD}(x_k, y_k, \beta), \qquad
    x_{k+1} = \mathrm{One\text{-}Round\text{-}Upper}(x_k, y_{k+1}, \tilde h, \alpha),

where One-Round-Upper runs ``tau_i`` local steps of size ``alpha / tau_i`` on every client with
the SVRG correction applied to the direct part only (Alg. 4 line 4):

.. math::

    h_{i,\nu} = \tilde h - \nabla_x F_i(x, y^+; \xi^i_\nu) + \nabla_x F_i(x^i_\nu, y^+; \xi^i_\nu),
    \qquad x^+ = \tfrac{1}{|S|} \sum_{i \in S} x^i_{\tau_i},

with fresh samples ``xi^i_nu`` that differ from those of the direct part inside ``tilde h``
(Alg. 4; Lemma 5 step (i) needs it). One-Round-Lower is
:class:`testbed.federation.local.LocalIterates` with the FedSVRG control variate (Alg. 2 line 4:
the same sample at the local point and at the anchor), One-Round-Upper the same routine on x.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import NamedTuple

import torch

from problems import Problem
from testbed.algorithms.base import OuterAlgorithm
from testbed.algorithms.rounds import RoundsFormula
from testbed.defaults import AGGITD_INNER_STEPS
from testbed.defaults import AGGITD_LOCAL_STEPS
from testbed.estimators.aggitd import AggITD
from testbed.estimators.aggitd import check_shared_parameters
from testbed.estimators.base import InnerState
from testbed.estimators.validation import check_step
from testbed.federation.context import FederatedContext
from testbed.federation.local import outer_steps_round

# Why 0.01: the outer step of the paper's experiments (App. A.3); small enough to be stable on
# the closed-form families drawn by problems.strategies, whose outer Hessians stay below ~50.
DEFAULT_OUTER_STEP_SIZE = 0.01


class AggITDState(NamedTuple):
    """FBO-AggITD state.

    Attributes:
        x: outer iterate ``x_k``.
        y: warm-started inner iterate ``y_k`` (AggITD's last ``y^N``).
        h: the hypergradient estimate used in the last step (``None`` initially).
        q_index: the last iteration's Q (``-1`` in expectation mode, ``None`` initially).
    """

    x: torch.Tensor
    y: torch.Tensor
    h: torch.Tensor | None
    q_index: int | None = None


@dataclasses.dataclass(frozen=True)
class FBOAggITD(OuterAlgorithm):
    r"""FBO-AggITD (Xiao & Ji 2023, Alg. 3; Thm 1, eq. (38)) and its SGD-type variant (Fig. 4).

    Per outer iteration: AggITD (Alg. 1) with One-Round-Lower (Alg. 2), then One-Round-Upper
    (Alg. 4). Communication per iteration (Table 1): ``2N + 3`` rounds with the FedSVRG lower
    level. With ``lower_solver="sgd"`` (FBO-AggITD_SGD, FedAvg lower level, Fig. 4) the anchor
    round is dropped and ``z^t`` rides on the local-step round, giving ``N + 3`` rounds, the
    same convention as FedNest_SGD's ``T + N + 3`` (one round per FedAvg inner step).

    The client set ``S`` is drawn once per iteration (inside AggITD) and One-Round-Upper uses the
    same clients.

    Args:
        inner_steps: N.
        local_steps: ``tau`` (both sub-procedures, as in the paper), or per-client ``tau_i``.
        inner_step_size: beta (``None``: ``1 / L``).
        outer_step_size: alpha (``None``: 0.01, the paper's experiments).
        neumann_step_size: lambda (``None``: ``1 / L``).
        lower_solver: ``"svrg"`` (FBO-AggITD) or ``"sgd"`` (FBO-AggITD_SGD).
        expectation: use AggITD's exact conditional mean over Q (for deterministic checks).
        participation, batch_size: see :class:`~testbed.OuterAlgorithm`.
    """

    inner_steps: int = AGGITD_INNER_STEPS
    local_steps: int | tuple[int, ...] = AGGITD_LOCAL_STEPS
    inner_step_size: float | None = None
    outer_step_size: float | None = None
    neumann_step_size: float | None = None
    lower_solver: str = "svrg"
    expectation: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_shared_parameters(self)
        check_step(self.outer_step_size, "outer_step_size")

    @property
    def estimator(self) -> AggITD:
        return AggITD(
            participation=self.participation,
            batch_size=self.batch_size,
            inner_steps=self.inner_steps,
            local_steps=self.local_steps,
            inner_step_size=self.inner_step_size,
            neumann_step_size=self.neumann_step_size,
            lower_solver=self.lower_solver,
            expectation=self.expectation,
        )

    def init(self, problem: Problem) -> AggITDState:
        self.check_problem(problem)
        x, y = problem.initial_point()
        return AggITDState(x, y, None)

    def rounds_formula(self) -> RoundsFormula:
        """``2N + 3`` (Table 1) for FedSVRG, ``N + 3`` for the SGD-type lower level."""
        svrg = self.lower_solver == "svrg"
        return RoundsFormula(
            "2N + 3" if svrg else "N + 3",
            {"N": self.inner_steps},
            "AggITD (Xiao & Ji 2023), Table 1" + ("" if svrg else "; Fig. 4 SGD"),
        )

    def rounds_per_iteration(self) -> int:
        value = self.rounds_formula().value()
        assert value is not None  # N is a parameter, nothing is drawn
        return value

    def advance(self, ctx: FederatedContext, state: AggITDState) -> AggITDState:
        h, inner, aux = self.estimator.estimate_in(ctx, state.x, InnerState(state.y))
        x_next = one_round_upper(
            ctx,
            state.x,
            inner.y,
            h,
            aux["clients"],
            self.local_steps,
            self.outer_step_size or DEFAULT_OUTER_STEP_SIZE,
        )
        return AggITDState(x_next, inner.y, h, aux["index"])


def one_round_upper(
    ctx: FederatedContext,
    x: torch.Tensor,
    y: torch.Tensor,
    h: torch.Tensor,
    clients: torch.Tensor,
    local_steps: Any,
    outer_step_size: float,
) -> torch.Tensor:
    """One-Round-Upper (Alg. 4): ``tau_i`` SVRG-corrected local x-steps, one round."""
    return outer_steps_round(ctx, clients, x, y, h, local_steps, outer_step_size, True)
