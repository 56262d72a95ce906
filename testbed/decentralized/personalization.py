"""Decentralized personalization with HGP (sec. 5.3, HGP-PL) on a closed-form problem.

Each client owns a personal hyperparameter ``lambda_i``; the shared model ``y`` is trained by SGP
over the time-varying graph, and every outer step moves each ``lambda_i`` along HGP's estimate of
``<d_lambda F>_i`` (Alg. 2), which client i computes from vector gossip only:

.. math::  \\lambda_i \\leftarrow \\lambda_i - \\alpha\\, v_i^{(M)}, \\qquad
           v_i^{(M)} \\approx d_{\\lambda_i} \\sum_k f_k(y^*(\\lambda), \\lambda_k).

Plain SGP (the paper's "Global SGP" baseline) keeps ``lambda = lambda_0``; the gain is
``F(lambda_0) - F(lambda_K)``. The inner SGP is warm-started across outer steps (its iterates and
Push-Sum weights live in the state), as in the paper's retraining before every outer step.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import ClassVar
from typing import NamedTuple

import torch

from testbed.algorithms.base import OuterAlgorithm
from testbed.algorithms.rounds import RoundsFormula
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.hgp import hypergradient_from_blocks
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.defaults import HGP_PERSONALIZATION
from testbed.federation.context import FederatedContext


class PersonalizationState(NamedTuple):
    """Outer iterate ``x = [lambda_i]`` and the HGP/SGP state (inner iterates, weights, time)."""

    x: torch.Tensor
    hgp: HGPState


@dataclasses.dataclass(frozen=True)
class HGPPersonalization(OuterAlgorithm):
    """Hypergradient descent on the per-client hyperparameters with HGP estimates.

    Args:
        outer_step_size: alpha on the stacked GlobalGrad (sum convention); ``1 / L_F`` from the
            problem's outer Hessian when None (``L_F = n lambda_max(grad^2 h)``).
        estimator: the HGP estimator (its ``inner`` is the warm-started SGP).
    """

    supports: ClassVar[frozenset[str]] = frozenset({"bilevel"})
    outer_step_size: float | None = None
    estimator: HyperGradientPush = dataclasses.field(
        default_factory=lambda: HyperGradientPush(
            neumann_terms=HGP_PERSONALIZATION["neumann_terms"],
            pushsum_steps=HGP_PERSONALIZATION["pushsum_steps"],
            inner=StochasticGradientPush(HGP_PERSONALIZATION["inner_steps"]),
        )
    )

    def rounds_formula(self) -> RoundsFormula:
        """``M S + T`` gossip steps per outer iteration: M Neumann terms of S Push-Sum steps
        each, plus the T SGP steps of the inner solve (HGP Alg. 2); no server rounds."""
        est = self.estimator
        return RoundsFormula(
            "M S + T",
            {
                "M": est.neumann_terms,
                "S": est.pushsum_steps,
                "T": int(getattr(est.inner, "steps", 0)),
            },
            "HGP (Terashita & Hara), Alg. 2 with SGP inner solve",
            unit="gossip steps",
            note="gossip steps over the graph, not server rounds",
        )

    def init(self, problem: Any) -> PersonalizationState:
        self.check_problem(problem)
        return PersonalizationState(problem.initial_point()[0], self.estimator.init(problem))

    def step_size(self, problem: Any) -> float:
        if self.outer_step_size is not None:
            return float(self.outer_step_size)
        top = float(torch.linalg.eigvalsh(problem.outer_hessian()).max())
        return 1.0 / (problem.n_clients * top)

    def advance(self, ctx: FederatedContext, state: PersonalizationState) -> PersonalizationState:
        problem = ctx.problem
        out = self.estimator.run(problem, state.x, state.hgp, ctx.rng, track_consensus=False)
        for name, amount in out.calls.as_dict().items():
            if name not in ("floats_sent", "oracle_calls"):
                ctx.counter.add(name, amount)
        # GlobalGrad estimates (each client its own block); n grad h in the testbed's convention
        value = problem.n_clients * hypergradient_from_blocks(problem, out.trajectory[-1, 0])
        x = state.x - self.step_size(problem) * value
        return PersonalizationState(x, out.state)
