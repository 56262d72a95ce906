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
its minibatches, and under random truncation its ``N'_r ~ U{0..N-1}`` (Alg. 3) before FedIHGP's
first round. Under full participation a stretch of minibatches with nothing else drawn between
them is drawn in one call per replicate (:func:`_drawn_ahead`; NumPy's bounded integers of one
bound give the same numbers in one call as in several): 64 iterations where an iteration draws
nothing else (minimax, deterministic truncation, ``N = 1``), else FedInn's draws, ``N'_r``,
then FedIHGP's and FedOut's; under partial participation, whose rounds draw their clients in
between, each minibatch is its own call
(:class:`~testbed.federation.replicates.StackedGenerator`). Replicates
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
from typing import cast

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
from testbed.algorithms.fednest_updates import fedinn_rows
from testbed.estimators.fedihgp import IHGPFirstTerm
from testbed.estimators.fedihgp import IHGPTerm
from testbed.estimators.fedihgp import truncation_schedule
from testbed.estimators.fednest import OuterDirection
from testbed.estimators.validation import check_iterate
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import rows_to_check
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

#: The iterations whose minibatches a replicate draws in one call where an iteration draws
#: nothing else (:func:`_iteration_draws`). Why 64: a call then serves 64 iterations (a call
#: costs 5-8 us, an iteration's rounds about 1 ms), and the draws held are at most 64 x 7 x C
#: x b integers a replicate (256 stacked replicates of 10 clients: 9 MB).
CHUNK_ITERATIONS = 64


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


def _truncations(config: FedNest, side: Replicates) -> list[int]:
    """Every replicate's count of Hessian rounds: ``N`` under deterministic truncation; under
    random truncation ``N'_r ~ U{0..N-1}``, drawn from its own generator as
    :func:`~testbed.estimators.fedihgp.fedihgp` draws it (first, before its rounds), except with
    ``N = 1``: ``integers(1)`` is 0 and takes nothing from the stream (NumPy's bounded integers
    of an empty range return the bound without a draw; tests/test_fednest_rate_replicates.py),
    so it is not called."""
    terms = config.neumann_terms
    if config.truncation != "random":
        return [terms] * len(side.rngs)
    check_positive_int(terms, "neumann_terms", minimum=1)
    if terms == 1:
        return [0] * len(side.rngs)
    return [int(rng.integers(terms)) for rng in side.rngs]


def _fedihgp(
    config: FedNest,
    side: Replicates,
    x: torch.Tensor,
    y: torch.Tensor,
    lam: float,
    n_primes: list[int],
) -> torch.Tensor:
    """FedIHGP (Alg. 3, eq. (13b)) for every replicate, ``p (R, dy)``: each replicate's
    :func:`~testbed.estimators.fedihgp.fedihgp` with its ``N'_r`` (:func:`_truncations`;
    Hessian round ``n`` on the replicates with ``N'_r >= n``)."""
    terms, count = config.neumann_terms, len(side.rngs)
    random = config.truncation == "random"
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
    return p if random else total


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


def _drawn_ahead(side: Replicates, counts: Sequence[int]) -> Replicates:
    """``side`` serving the replicates' next ``counts[r]`` minibatch draws from one call of
    each generator (:meth:`~testbed.federation.replicates.Replicates.drawn_ahead`); ``side``
    itself (each draw a call) under partial participation, which draws each round's clients
    (``choice``) in between, so its rounds' minibatches are not adjacent in the stream.

    Why the numbers are the same: every minibatch of these problems is ``integers(0, n, size=(C,
    b))`` with the same bound ``n`` (:func:`problems._rows.draw_indices`, the one
    ``sample_batch`` of :data:`ROW_EXACT_FAMILIES`), and draws of one bound adjacent in the
    stream are the same in one call as in several (tests/test_fednest_rate_replicates.py)."""
    return side.drawn_ahead(counts) if side.sampler.is_full else side


def _draw_counts(config: FedNest) -> tuple[int, int]:
    """The minibatch draws of an iteration (:meth:`FedNest.advance`) but FedIHGP's Hessian
    rounds' (one each): ``(inner, outer)``, FedInn's ``T (1 + tau)`` (LFedInn: ``T tau``), and
    FedIHGP's first round and FedOut's, ``1 + 2 + tau`` (minimax: FedOut's ``1 + tau``, no
    FedIHGP and no indirect part)."""
    tau = cast(int, config.local_steps)  # check_batchable admitted one integer tau
    inner = config.inner_steps * (int(isinstance(config.inner_rule, FedInn)) + tau)
    minimax = type(config.outer_rule) is MinimaxFedOut
    return inner, (1 + tau if minimax else 1 + 2 + tau)


def _iteration_draws(config: FedNest) -> int | None:
    """The minibatch draws of an iteration where they are the same for every replicate and
    nothing else is drawn between them (minimax: no FedIHGP; deterministic truncation: ``N``
    Hessian rounds; random truncation with ``N = 1``: ``N' = 0``, drawn from nowhere,
    :func:`_truncations`); ``None`` where each replicate draws its ``N'_r`` between FedInn's
    draws and FedIHGP's (random truncation, ``N > 1``)."""
    inner, outer = _draw_counts(config)
    if type(config.outer_rule) is MinimaxFedOut:
        return inner + outer
    if config.truncation != "random":
        return inner + config.neumann_terms + outer
    return inner + outer if config.neumann_terms == 1 else None


def step_replicates(
    config: FedNest,
    side: Replicates,
    state: ReplicateState,
    steps: StepSizes,
    drawn: Replicates | None = None,
) -> ReplicateState:
    """One FedNest iteration (Alg. 1) of every replicate of ``side``:
    :meth:`FedNest.advance <testbed.algorithms.fednest.FedNest.advance>` row by row.

    Each replicate's minibatches are drawn in one call per stretch of its stream that holds
    nothing else (:func:`_drawn_ahead`): the whole iteration (:func:`_iteration_draws`), or
    FedInn's draws, then ``N'_r``, then FedIHGP's and FedOut's. ``drawn``: ``side`` serving
    this iteration's minibatches from draws made ahead by the caller (who checks they were all
    used; :func:`run_fednest_replicates` draws several iterations' at once)."""
    x, y = state.x, state.y
    x_rows = side.rows(x)
    count = len(side.rngs)
    minimax = type(config.outer_rule) is MinimaxFedOut
    per_iteration = _iteration_draws(config)
    inner, outer = _draw_counts(config)
    if drawn is not None:
        served = drawn
    elif per_iteration is None:  # N'_r lies between FedInn's draws and the rest: two stretches
        served = _drawn_ahead(side, [inner] * count)
    else:
        served = _drawn_ahead(side, [per_iteration] * count)
    for _ in range(config.inner_steps):  # FedInn (Alg. 4) or LFedInn
        y = fedinn_rows(config, served, served.participants(), x_rows, y, steps.inner)
    inner_rounds = (2 if isinstance(config.inner_rule, FedInn) else 1) * config.inner_steps
    if minimax:
        x_plus, h = _fedout(config, served, x, y, None, steps.outer)
        if drawn is None:
            served.check_drawn()
        return ReplicateState(x_plus, y, h, (None,) * count, (inner_rounds + 2,) * count)
    if drawn is None and per_iteration is None:
        served.check_drawn()
        n_primes = _truncations(config, side)
        served = _drawn_ahead(side, [n + outer for n in n_primes])
    else:
        n_primes = _truncations(config, side)
    p = _fedihgp(config, served, x, y, steps.neumann, n_primes)
    x_plus, h = _fedout(config, served, x, y, p, steps.outer)
    if drawn is None:
        served.check_drawn()
    rounds = tuple(inner_rounds + n + 3 for n in n_primes)
    return ReplicateState(x_plus, y, h, tuple(n_primes), rounds)


def _check_iterates(x: torch.Tensor, x0_norm: float, step: int, who: str) -> None:
    """:func:`~testbed.estimators.validation.check_iterate` of every replicate's ``x``: the
    rows it could refuse (:func:`~testbed.estimators.validation.rows_to_check`) are checked
    one by one (the same test, the same error)."""
    for r in rows_to_check(x, x0_norm):
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
    per_iteration = _iteration_draws(algorithm)
    drawn = None
    for k in range(1, iterations + 1):
        if per_iteration is not None and (k - 1) % CHUNK_ITERATIONS == 0:
            # every draw of the next iterations is a minibatch: one call per replicate
            chunk = min(CHUNK_ITERATIONS, iterations - k + 1)
            served = _drawn_ahead(side, [chunk * per_iteration] * count)
            drawn = None if served.ahead is None else served
        stacked = step_replicates(algorithm, side, stacked, state.steps, drawn)
        if drawn is not None and (k % CHUNK_ITERATIONS == 0 or k == iterations):
            drawn.check_drawn()
        _check_iterates(stacked.x, x0_norm, k, type(algorithm).__name__)
        records.append(stacked)
    return records


__all__ = [
    "CHUNK_ITERATIONS",
    "MAX_DIM_X",
    "ROW_EXACT_FAMILIES",
    "ReplicateState",
    "check_batchable",
    "run_fednest_replicates",
    "step_replicates",
]
