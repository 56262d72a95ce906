"""Lower-level solvers for the decentralized problem (eq. 2): exact consensus and SGP.

Stochastic gradient push (the lower-level solver HGP cites, Sec. 2.2) solves ``min_y sum_i g_i(y,
lambda_i)`` over the time-varying graph; every client keeps a numerator ``z_i`` and a weight
``omega_i``, de-biased iterate ``y_i = z_i / omega_i``:

- ``variant="assran"`` (Assran et al. 2019; the code's ASSRAN, sec. 5.1/5.2):
  ``z_i^+ = z_i - gamma_t grad g_i(y_i)``, then ``(z, omega) <- A(t) (z^+, omega)``;
- ``variant="nedic"`` (Nedic & Olshevsky 2016; the code's NEDIC, RandU/RandD personalization):
  ``(w, omega) <- A(t)(z, omega)``, ``y_i = w_i / omega_i``, ``z_i = w_i - gamma_t grad g_i(y_i)``.

The step size is multiplied by 0.1 at each milestone (fractions of the run), as in the paper's
schedules, which drives the iterates to consensus and optimality (what HGP assumes; Thm 2 covers
the rest). Gradients of all clients come from one batched oracle call per step.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Literal
from typing import NamedTuple

import numpy as np
import torch

from testbed.calls import CallCounter
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.ledger import GraphLedger
from testbed.oracles import Oracles


class InnerResult(NamedTuple):
    """Per-client inner iterates ``y (n, dy)``, Push-Sum weights ``omega (n,)``, next step."""

    y: torch.Tensor
    omega: torch.Tensor
    time: int


@dataclasses.dataclass(frozen=True)
class InnerRunInputs:
    """What a lower-level solver's run is given.

    Attributes:
        problem: the decentralized problem (eq. 2).
        x: the hyperparameters.
        y: the per-client iterates ``(n, dy)`` it starts from.
        omega: their Push-Sum weights ``(n,)``.
        time: the graph step it starts at.
        graph: the graph sequence it gossips on.
        oracles: the oracles its gradients are counted through.
        ledger: the graph ledger its gossip is counted through.
        rng: the generator of its minibatches.
    """

    problem: Any
    x: torch.Tensor
    y: torch.Tensor
    omega: torch.Tensor
    time: int
    graph: GraphSequence
    oracles: Oracles
    ledger: GraphLedger
    rng: np.random.Generator


@dataclasses.dataclass(frozen=True)
class ExactConsensus:
    """The exact inner solution at every client (``y_i = y*(x)``; closed-form problems)."""

    def run(self, inputs: InnerRunInputs) -> InnerResult:
        y_star = inputs.problem.exact_inner_solution(inputs.x)
        return InnerResult(
            y_star.expand(inputs.problem.n_clients, -1).clone(), inputs.omega, inputs.time
        )


@dataclasses.dataclass(frozen=True)
class StochasticGradientPush:
    """SGP with ``steps`` gossip steps (0: keep the given iterates, e.g. a perturbed x_hat).

    Args:
        steps: number of SGP iterations T.
        step_size: initial gamma; ``1 / (n L_clients)`` when None. The step on the de-biased
            iterate ``y_i`` is ``gamma / omega_i`` and Push-Sum weights drop to about ``1/n`` on
            sparse steps, so ``1 / L_clients`` can make a client's step ``n / L`` (unstable).
        variant: ``"assran"`` or ``"nedic"``.
        milestones: fractions of ``steps`` at which gamma is multiplied by 0.1.
        batch_size: per-client minibatch (None: full local gradients).
    """

    steps: int = 200
    step_size: float | None = None
    variant: Literal["assran", "nedic"] = "assran"
    milestones: tuple[float, ...] = (0.5, 0.75, 0.9)
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"SGP steps must be an integer >= 0, got {self.steps!r}")
        if self.variant not in ("assran", "nedic"):
            raise ValueError(f"SGP variant must be 'assran' or 'nedic', got {self.variant!r}")

    def gamma(self, problem: Any, t: int) -> float:
        base = (
            1.0 / (problem.n_clients * problem.constants().L_clients)
            if self.step_size is None
            else self.step_size
        )
        passed = sum(t >= m * self.steps for m in self.milestones)
        return base * 0.1**passed

    def run(self, inputs: InnerRunInputs) -> InnerResult:
        problem, ledger = inputs.problem, inputs.ledger
        clients = torch.arange(problem.n_clients)
        z = inputs.y * inputs.omega[:, None]
        w = inputs.omega
        mixings = inputs.graph.mixing(inputs.time, self.steps)

        def grad(at: torch.Tensor) -> torch.Tensor:
            batch = (
                None
                if self.batch_size is None
                else problem.sample_batch(inputs.rng, clients, self.batch_size)
            )
            return inputs.oracles.grad_inner(inputs.x, at, clients, batch)

        for t in range(self.steps):
            gamma = self.gamma(problem, t)
            if self.variant == "assran":
                z = z - gamma * grad(z / w[:, None])
                mixed = ledger.transmit(torch.cat([z, w[:, None]], 1), mixings[t])
                z, w = mixed[:, :-1], mixed[:, -1]
            else:
                mixed = ledger.transmit(torch.cat([z, w[:, None]], 1), mixings[t])
                z, w = mixed[:, :-1], mixed[:, -1]
                z = z - gamma * grad(z / w[:, None])
        return InnerResult(z / w[:, None], w, inputs.time + self.steps)


def counted_inner_run(
    inner: ExactConsensus | StochasticGradientPush,
    problem: Any,
    x: torch.Tensor,
    state: Any,
    graph: GraphSequence,
    counter: CallCounter,
    rng: np.random.Generator,
) -> InnerResult:
    """``inner.run`` from an HGP state (its iterates ``y``, Push-Sum weights ``omega`` and graph
    step ``time``) over ``graph``, its oracle calls and gossip counted into ``counter``."""
    return inner.run(
        InnerRunInputs(
            problem,
            x,
            state.y,
            state.omega,
            state.time,
            graph,
            Oracles(problem, counter),
            GraphLedger(problem.n_clients, counter),
            rng,
        )
    )
