"""Shared helpers of the deterministic HGP checks (:mod:`theory_checks.hgp`): the graph
families that mix, the case strategy of the exact-averaging checks, and one estimator run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import strategies
from testbed.decentralized.graphs import CONNECTED_FAMILIES
from testbed.decentralized.hgp import HGPState
from theory_checks.claim import Case
from theory_checks.hgp.common import fresh_state

# Families that satisfy Assumption 1 and do not make Push-Sum trivially exact.
MIXING_FAMILIES = tuple(f for f in CONNECTED_FAMILIES if f != "fully_connected")


def _cases(**kwargs: Any) -> Callable[[], st.SearchStrategy[Case]]:
    def build() -> st.SearchStrategy[Case]:
        return st.builds(lambda problem, seed, f: Case(problem, {"point_seed": seed,
                                                                 "eta_factor": f}),
                         strategies.per_client_quadratic(**kwargs), strategies.SEEDS,
                         st.floats(0.3, 1.5))

    return build


def _run(estimator: Any, problem: Any, x: torch.Tensor, state: HGPState | None = None,
         replicas: int = 1, seed: int = 0) -> Any:
    return estimator.run(problem, x, state or fresh_state(problem), np.random.default_rng(seed),
                         replicas=replicas)

