"""The Monte Carlo values of Theorem 1's rate check (:func:`theory_checks.aggitd.thm1.
check_thm1_rate`, the package's ``__init__``): ``A_r(K) = (1/K) sum_{k<K} ||grad f(x_{r,k})||^2``
of replicate ``r``'s FBO-AggITD run at horizon K, on the stream ``design.rng(r)``.

The replicates of a horizon run as one batched run
(:func:`~testbed.algorithms.aggitd_replicates.fbo_aggitd_replicates`: every iterate is the
replicate's own run's, bit for bit), and a calibration block stacks its seeds' replicates on the
same axis (:func:`theory_checks.replicates.replicated_streams`). What is not batched (a
perturbation or a mutant that subclasses the algorithm, a configuration the batched run does
not cover: :class:`~testbed.federation.replicates.NotBatchable`) runs replicate after replicate,
each through :func:`run_average`, as the check always did. Either way ``A_r(K)`` is computed from
the replicate's own iterates by :func:`gradient_average` (the same expression on the same
``(K, dx)`` tensor), and is ``inf`` when the run diverges.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from testbed.algorithms.aggitd_replicates import fbo_aggitd_replicates
from testbed.algorithms.base import run_algorithm
from testbed.estimators.validation import DivergenceError
from testbed.federation.replicates import NotBatchable
from theory_checks.decision import Design
from theory_checks.replicates import replicated_streams


def gradient_average(xs: torch.Tensor, G: torch.Tensor, g0: torch.Tensor) -> float:
    """``(1/K) sum_k ||G x_k + g0||^2`` of the iterates ``xs (K, dx)`` (``grad f(x) = G x +
    g0``, exact)."""
    return float(((xs @ G.T + g0) ** 2).sum(-1).mean())


def run_average(
    problem: Any,
    algorithm: Any,
    start: tuple[torch.Tensor, torch.Tensor],
    K: int,
    rng: np.random.Generator,
    outer: tuple[torch.Tensor, torch.Tensor],
) -> float:
    """``A(K)`` of one run of ``algorithm`` from ``start`` on ``rng``; ``inf`` when the run
    diverges."""
    x0, y0 = start
    state = algorithm.init(problem)._replace(x=x0, y=y0)
    try:
        records = run_algorithm(algorithm, problem, K, rng, state=state)
    except DivergenceError:
        return math.inf
    return gradient_average(torch.stack([r.x for r in records[:K]]), *outer)


def batched_averages(
    problem: Any,
    algorithm: Any,
    start: tuple[torch.Tensor, torch.Tensor],
    K: int,
    rngs: list[np.random.Generator],
    outer: tuple[torch.Tensor, torch.Tensor],
) -> np.ndarray:
    """``A(K)`` of the run on each generator of ``rngs``, as one batched run (raises
    :class:`~testbed.federation.replicates.NotBatchable` before any draw when it cannot be
    batched)."""
    runs = fbo_aggitd_replicates(algorithm, problem, rngs, start, K)
    return np.array(
        [
            math.inf if diverged else gradient_average(path[:K], *outer)
            for path, diverged in zip(runs.x, runs.diverged, strict=True)
        ]
    )


def horizon_averages(
    problem: Any,
    algorithm: Any,
    start: tuple[torch.Tensor, torch.Tensor],
    K: int,
    design: Design,
    replicates: int,
    outer: tuple[torch.Tensor, torch.Tensor],
) -> np.ndarray:
    """``A_r(K)`` for ``r < replicates``, replicate ``r`` on a fresh ``design.rng(r)``: one
    batched run (stacked with a calibration block's later seeds), or, where that is not
    batchable, one run per replicate."""

    def run(rngs: list[np.random.Generator]) -> np.ndarray:
        return batched_averages(problem, algorithm, start, K, rngs, outer)

    x0, y0 = start
    identity = (
        "aggitd.thm1",
        repr(algorithm),
        K,
        repr(problem.spec()),
        tuple(x0.tolist()),
        tuple(y0.tolist()),
    )
    try:
        return replicated_streams(run, design, [(r,) for r in range(replicates)], identity)
    except NotBatchable:  # one run per replicate, each from a fresh generator
        return np.array(
            [
                run_average(problem, algorithm, start, K, design.rng(r), outer)
                for r in range(replicates)
            ]
        )


__all__ = ["batched_averages", "gradient_average", "horizon_averages", "run_average"]
