r"""FedNest (Tarzanagh et al., ICML 2022, Alg. 1) for ``R`` Monte Carlo replicates at once.

A statistical check runs FedNest many times from one start, each run on its own generator
(:func:`~testbed.algorithms.base.run_algorithm` with ``rng_r``). Each iteration of a run is a
few batched oracle calls over a handful of clients, so Python's overhead, not the arithmetic, is
its cost. :func:`run_fednest_replicates` runs the ``R`` runs as one: the server's state has a
leading replicate axis (``x (R, dx)``, ``y (R, dy)``), every round is one oracle call over the
``R x C`` rows of :class:`~testbed.federation.replicates.Replicates` (the clients of every
replicate stacked replicate-major), and the clients run the very client works of the unbatched
rounds (:class:`~testbed.federation.client_work.ClientWork`: FedInn's anchor gradient and local
steps, FedIHGP's terms, FedOut's direction and local steps), sent one row per client:

.. math::

    y^{k+1}_r = \text{FedInn}^T(x^k_r, y^k_r), \qquad
    x^{k+1}_r = \text{FedOut}(x^k_r, y^{k+1}_r, p^k_r), \qquad
    p^k_r = \text{FedIHGP}(x^k_r, y^{k+1}_r; N'_r)   \quad\text{(eqs. (10)-(13b))}.

Replicate ``r`` draws from its own generator what its own
:class:`~testbed.federation.context.FederatedContext` draws, in the same order: its clients,
its minibatches (through :class:`~testbed.federation.replicates.StackedGenerator`), and under
random truncation its ``N'_r ~ U{0..N-1}`` (Alg. 3) before FedIHGP's first round. Replicates
draw different ``N'``: Hessian round ``n`` runs on the replicates with ``N'_r >= n`` only (their
own draws, through a :class:`Replicates` of their generators), and each keeps ``p_{N'_r}``.

Bit for bit: the oracles work row by row, a round's mean is the ledger's mean of the same rows,
and every vector a replicate's unbatched run shares among its clients (``x``, ``y``, ``q``,
``p``, ``h``) is here that replicate's rows. One kernel differs by the vector's form: a shared
``x`` enters ``A_i x`` (:func:`problems._rows.matvec`) as one BLAS matrix-vector product, rows
as a batched one, and the two sum ``dim_x >= 3`` products in different orders; so problems with
``dim_x > 2`` are refused (:class:`NotBatchable`). Tests compare every iterate exactly
(tests/test_fednest_rate_replicates.py).

What is not batched raises :class:`~testbed.federation.replicates.NotBatchable` before any
draw: a subclass of :class:`~testbed.algorithms.fednest.FedNest` or an update strategy other
than FedInn / LFedInn and FedOut / MinimaxFedOut (a perturbation or a mutant runs its own code,
unbatched), per-client ``tau_i``, a problem family whose oracles were not read for it
(:data:`ROW_EXACT_FAMILIES`), tensors off the CPU (on CUDA the replicates run one by one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from problems import LinearCompositional
from problems import Problem
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from testbed.algorithms.fednest import FedNest
from testbed.algorithms.fednest import FedNestState
from testbed.algorithms.fednest import StepSizes
from testbed.algorithms.fednest_updates import FedInn
from testbed.algorithms.fednest_updates import FedOut
from testbed.algorithms.fednest_updates import LFedInn
from testbed.algorithms.fednest_updates import MinimaxFedOut
from testbed.estimators.fedihgp import IHGPFirstTerm
from testbed.estimators.fedihgp import IHGPTerm
from testbed.estimators.fedihgp import truncation_schedule
from testbed.estimators.fednest import OuterDirection
from testbed.estimators.validation import GROWTH_FACTOR
from testbed.estimators.validation import check_iterate
from testbed.estimators.validation import check_positive_int
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt
from testbed.federation.replicates import NotBatchable
from testbed.federation.replicates import Replicates

#: The largest ``dim_x`` whose products ``A_i x`` the batched rows sum as the shared vector's
#: BLAS product does: one or two terms have one order (the module docstring).
MAX_DIM_X = 2

#: The problem families whose closed-form oracles were read for the one kernel that depends on
#: a vector's form: each applies a shared vector only as ``A_i x`` (every other product is a
#: row-vector one, ``v^T A_i``, one batched kernel for a shared vector and for rows). Another
#: family runs per replicate.
ROW_EXACT_FAMILIES = (QuadraticBilevel, QuadraticMinimax, LinearCompositional)


class ReplicateState(NamedTuple):
    """Every replicate's :class:`~testbed.algorithms.fednest.FedNestState` after an iteration,
    stacked: row ``r`` of ``x``, ``y``, ``h`` and entry ``r`` of ``truncation_index`` and
    ``rounds`` are replicate ``r``'s."""

    x: torch.Tensor
    y: torch.Tensor
    h: torch.Tensor | None
    truncation_index: tuple[int | None, ...]
    rounds: tuple[int, ...]

    def replicate(self, r: int, steps: StepSizes) -> FedNestState:
        """Replicate ``r``'s state as its unbatched run holds it."""
        h = None if self.h is None else self.h[r]
        return FedNestState(
            self.x[r], self.y[r], h, steps, self.truncation_index[r], self.rounds[r]
        )


def check_batchable(algorithm: FedNest, problem: Problem) -> None:
    """Raise :class:`NotBatchable` unless :func:`run_fednest_replicates` computes exactly what
    ``run_algorithm(algorithm, problem, ...)`` does (the module docstring)."""
    if type(algorithm) is not FedNest:
        raise NotBatchable(f"{type(algorithm).__name__} is not FedNest itself: run per replicate")
    if type(algorithm.inner_rule) not in (FedInn, LFedInn):
        raise NotBatchable(f"inner update {type(algorithm.inner_rule).__name__}: not batched")
    if type(algorithm.outer_rule) not in (FedOut, MinimaxFedOut):
        raise NotBatchable(f"outer update {type(algorithm.outer_rule).__name__}: not batched")
    if not isinstance(algorithm.local_steps, int):
        raise NotBatchable("per-client local steps tau_i: not batched")
    if type(problem) not in ROW_EXACT_FAMILIES:
        raise NotBatchable(
            f"{type(problem).__name__}: its oracles' kernels are not known row-exact"
        )
    if problem.dim_x > MAX_DIM_X:
        raise NotBatchable(f"dim_x = {problem.dim_x} > {MAX_DIM_X}: A_i x sums in another order")


def _inner_update(
    config: FedNest, side: Replicates, x_rows: torch.Tensor, y: torch.Tensor, beta: float
) -> torch.Tensor:
    """FedInn (Alg. 4) or LFedInn for every replicate:
    :func:`~testbed.estimators.fednest.fedinn`'s rounds, ``y^+ (R, dy)``."""
    clients = side.participants()
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


def _fedihgp(
    config: FedNest, side: Replicates, x: torch.Tensor, y: torch.Tensor, lam: float
) -> tuple[torch.Tensor, list[int]]:
    """FedIHGP (Alg. 3, eq. (13b)) for every replicate: ``(p (R, dy), N'_r)``, each replicate's
    :func:`~testbed.estimators.fedihgp.fedihgp` (``N'_r`` drawn from its own generator first
    under random truncation; Hessian round ``n`` on the replicates with ``N'_r >= n``)."""
    terms, count = config.neumann_terms, len(side.rngs)
    random = config.truncation == "random"
    if random:
        check_positive_int(terms, "neumann_terms", minimum=1)
        n_primes = [int(rng.integers(terms)) for rng in side.rngs]
    else:
        n_primes = [terms] * count
    schedule = truncation_schedule(terms, lam, config.truncation, n_primes[0] if random else None)
    clients = side.participants()
    (first,) = IHGPFirstTerm(side.rows(x), side.rows(y), schedule.scale).run(side, clients).uploads
    p = total = side.aggregate(first)
    for n in range(1, max(n_primes) + 1):
        active = [r for r, last in enumerate(n_primes) if last >= n]
        if len(active) == count:
            sub, xs, ys, ps = side, x, y, p
        else:
            index = torch.tensor(active, dtype=torch.long, device=p.device)
            sub = side.select(active)
            xs, ys, ps = (
                x.index_select(0, index),
                y.index_select(0, index),
                p.index_select(0, index),
            )
        clients = sub.participants()
        term = IHGPTerm(sub.rows(xs), sub.rows(ys), sub.rows(ps), schedule.step)
        new = sub.aggregate(term.run(sub, clients).uploads[0])
        p = new if sub is side else p.index_copy(0, index, new)
        total = total + p
    return (p if random else total), n_primes


def _fedout(
    config: FedNest,
    side: Replicates,
    x: torch.Tensor,
    y: torch.Tensor,
    p: torch.Tensor | None,
    alpha: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FedOut (Alg. 2; ``p`` None: eq. (12)) for every replicate:
    :func:`~testbed.estimators.fednest.fedout`'s rounds, ``(x^+, h)``, each ``(R, dx)``."""
    clients = side.participants()
    x_rows, y_rows = side.rows(x), side.rows(y)
    p_rows = None if p is None else side.rows(p)
    (direction,) = OuterDirection(x_rows, y_rows, p_rows).run(side, clients).uploads
    h = side.aggregate(direction)
    work = LocalIterates(
        x_rows,
        OuterGradientXAt(y_rows),
        config.local_steps,
        alpha,
        side.rows(h),
        config.scale_by_steps,
    )
    return side.aggregate(work.run(side, clients).uploads[0]), h


def step_replicates(
    config: FedNest, side: Replicates, state: ReplicateState, steps: StepSizes
) -> ReplicateState:
    """One FedNest iteration (Alg. 1) of every replicate of ``side``:
    :meth:`FedNest.advance <testbed.algorithms.fednest.FedNest.advance>` row by row."""
    x, y = state.x, state.y
    x_rows = side.rows(x)
    vr = isinstance(config.inner_rule, FedInn)
    for _ in range(config.inner_steps):
        y = _inner_update(config, side, x_rows, y, steps.inner)
    inner_rounds = (2 if vr else 1) * config.inner_steps
    count = len(side.rngs)
    if type(config.outer_rule) is MinimaxFedOut:
        x_plus, h = _fedout(config, side, x, y, None, steps.outer)
        return ReplicateState(x_plus, y, h, (None,) * count, (inner_rounds + 2,) * count)
    p, n_primes = _fedihgp(config, side, x, y, steps.neumann)
    x_plus, h = _fedout(config, side, x, y, p, steps.outer)
    rounds = tuple(inner_rounds + n + 3 for n in n_primes)
    return ReplicateState(x_plus, y, h, tuple(n_primes), rounds)


def _check_iterates(x: torch.Tensor, x0_norm: float, step: int, who: str) -> None:
    """:func:`~testbed.estimators.validation.check_iterate` of every replicate's ``x``: rows
    near the limit or not finite are checked one by one (the same test, the same error)."""
    limit = GROWTH_FACTOR * max(1.0, x0_norm)
    norms = torch.linalg.vector_norm(x, dim=1)
    # why a factor 2: the batched norm may differ from a row's own in its last bits only
    suspect = ~torch.isfinite(x).all(dim=1) | ~torch.isfinite(norms) | (norms > 0.5 * limit)
    for r in torch.nonzero(suspect).flatten().tolist():
        check_iterate(x[r], x0_norm, step, who)


def run_fednest_replicates(
    algorithm: FedNest,
    problem: Problem,
    iterations: int,
    rngs: Sequence[np.random.Generator],
    state: FedNestState,
) -> list[ReplicateState]:
    """``run_algorithm(algorithm, problem, iterations, rngs[r], state=state)`` for every ``r``
    at once, from the common start ``state``: the stacked state after iterations ``0..K``
    (record ``k``'s ``x[r]`` is replicate ``r``'s ``records[k].x``, bit for bit).

    Raises:
        NotBatchable: a configuration the batched rounds do not reproduce
            (:func:`check_batchable`), before any draw.
        DivergenceError: some replicate's iterate diverged (the first row found; which one an
            unbatched loop over the replicates raises first is its own order's).
    """
    check_positive_int(iterations, "iterations")
    check_batchable(algorithm, problem)
    if state.x.device.type != "cpu":  # the kernels' row-exactness was read on the CPU's only
        raise NotBatchable(f"tensors on {state.x.device}: run per replicate")
    algorithm.check_problem(problem)
    side = Replicates(problem, rngs, algorithm.participation, algorithm.batch_size)
    count = len(side.rngs)
    x0_norm = float(state.x.norm())
    stacked = ReplicateState(
        state.x.expand(count, -1),
        state.y.expand(count, -1),
        None if state.h is None else state.h.expand(count, -1),
        (state.truncation_index,) * count,
        (state.rounds,) * count,
    )
    records = [stacked]
    for k in range(1, iterations + 1):
        stacked = step_replicates(algorithm, side, stacked, state.steps)
        _check_iterates(stacked.x, x0_norm, k, type(algorithm).__name__)
        records.append(stacked)
    return records


__all__ = [
    "MAX_DIM_X",
    "ROW_EXACT_FAMILIES",
    "ReplicateState",
    "check_batchable",
    "run_fednest_replicates",
    "step_replicates",
]
