r"""FBO-AggITD (Xiao & Ji 2023, Alg. 3) for many Monte Carlo replicates at once.

``R`` replicates of :class:`~testbed.algorithms.aggitd.FBOAggITD` from a common start, each a
run of :func:`~testbed.algorithms.base.run_algorithm` with its own generator, computed as one
run whose state has a leading replicate axis: ``x (R, dx)``, ``y (R, dy)``. An outer iteration
is the unbatched one (AggITD, Alg. 1, with One-Round-Lower, Alg. 2; One-Round-Upper, Alg. 4),

.. math::

    \tilde h_r, y_{r,k+1} = \mathrm{AggITD}(x_{r,k}, y_{r,k}, \beta; Q_r), \qquad
    x_{r,k+1} = \mathrm{One\text{-}Round\text{-}Upper}(x_{r,k}, y_{r,k+1}, \tilde h_r, \alpha),

with the rounds' client works (:class:`~testbed.estimators.aggitd.HessIVTerm`,
:class:`~testbed.federation.local.InnerGradient`, :class:`~testbed.federation.local.
LocalIterates`, :class:`~testbed.estimators.aggitd.AggITDDirection`) run on every replicate's
clients in one batched call (:class:`~testbed.federation.replicates.Replicates`). Replicate
``r`` draws from its own generator what its own run draws, in the same order: its round's
clients, its index ``Q_r ~ U{0..N}`` (Alg. 1 line 1), then each work's minibatches (all of an
iteration's in one call, :meth:`~testbed.federation.replicates.Replicates.drawn_ahead`, which
draws the same numbers).
The term ``z^t`` starts at ``t = Q_r``, so at round ``t`` the replicates split into those whose term
starts (``Q_r = t``), those whose term continues (``Q_r < t``) and those without one; each group's
term is run on its own replicates (:meth:`~testbed.federation.replicates.Replicates.select`)
before the round's anchor gradient, which is the order :class:`~testbed.federation.client_work.
Together` runs them in. So every iterate of replicate ``r`` is its own run's, bit for bit
(``tests/test_aggitd_replicates.py``), provided the oracles compute row by row what they compute
for one run: a shared ``(dx,)`` point goes through a matrix-vector kernel whose sums differ in
their rounding from the batched one beyond ``dx = 2`` (:data:`MAX_SHARED_DIM`), so larger
outer dimensions are not batched.

What is not batched raises :class:`~testbed.federation.replicates.NotBatchable` before any
generator is touched, and the caller runs each replicate by itself: a subclass of FBO-AggITD or
of AggITD (a planted mistake or a perturbation runs its own code), a printed, fixed-index,
expectation or FedAvg-type (``lower_solver="sgd"``) AggITD, per-client local steps, a problem
other than :class:`~problems.QuadraticMinimax` (the closed forms the equality is shown on), or a
tensor off the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple
from typing import cast

import numpy as np
import torch

from problems import Problem
from problems import QuadraticMinimax
from testbed.algorithms.aggitd import DEFAULT_OUTER_STEP_SIZE
from testbed.algorithms.aggitd import FBOAggITD
from testbed.estimators.aggitd import AggITDDirection
from testbed.estimators.aggitd import HessIVTerm
from testbed.estimators.aggitd import draw_index
from testbed.estimators.validation import DivergenceError
from testbed.estimators.validation import check_iterate
from testbed.estimators.validation import rows_to_check
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt
from testbed.federation.replicates import NotBatchable
from testbed.federation.replicates import Replicates

#: The largest outer dimension batched. Why 2: the closed-form oracles apply ``A_i`` to a shared
#: ``(dx,)`` point as one matrix-vector product (a GEMV) in the unbatched run and to per-replicate
#: rows as a batched product in this one; the two sum ``dx`` products in the same order (equal
#: bit for bit) for ``dx <= 2`` and in different orders beyond (checked on this machine's MKL
#: for dx = 3, 4, 6: most results differ in the last bit).
MAX_SHARED_DIM = 2


class ReplicateRuns(NamedTuple):
    """``R`` runs of ``iterations`` outer iterations.

    Attributes:
        x: the outer iterates ``(R, iterations + 1, dx)``, ``x[r, k]`` replicate r's ``x_k``
            (``x_0`` the start).
        y: the inner iterates ``(R, iterations + 1, dy)`` (the state's warm start ``y_k``).
        diverged: ``(R,)`` booleans: replicate r's own run raises
            :class:`~testbed.estimators.validation.DivergenceError` (an iterate non-finite or
            past :data:`~testbed.estimators.validation.GROWTH_FACTOR` times its start);
            its later iterates are what the arithmetic gives, not a run's.
    """

    x: torch.Tensor
    y: torch.Tensor
    diverged: np.ndarray


def check_batchable(algorithm: FBOAggITD, problem: Problem, start: torch.Tensor) -> None:
    """Raise :class:`~testbed.federation.replicates.NotBatchable` unless the replicates of
    ``algorithm`` on ``problem`` from ``start`` run here (module docstring)."""
    if type(algorithm) is not FBOAggITD:  # a variant runs its own code
        raise NotBatchable(f"{type(algorithm).__name__} is not FBOAggITD itself: run it alone")
    estimator = algorithm.estimator
    reasons = {
        "a printed, fixed-index or expectation AggITD": (
            estimator.as_printed or estimator.index is not None or estimator.expectation
        ),
        "the FedAvg-type lower level": estimator.lower_solver != "svrg",
        "per-client local steps": not isinstance(algorithm.local_steps, int),
        f"a {type(problem).__name__}": type(problem) is not QuadraticMinimax,
        f"dim_x = {problem.dim_x} > {MAX_SHARED_DIM}": problem.dim_x > MAX_SHARED_DIM,
        f"tensors on {start.device}": start.device.type != "cpu",
        "minibatches without samples": (
            algorithm.batch_size is not None and not getattr(problem, "n_samples", 0)
        ),
    }
    refused = [reason for reason, applies in reasons.items() if applies]
    if refused:
        raise NotBatchable(f"FBO-AggITD replicates run one by one: {', '.join(refused)}")


def fbo_aggitd_replicates(
    algorithm: FBOAggITD,
    problem: Problem,
    rngs: Sequence[np.random.Generator],
    start: tuple[torch.Tensor, torch.Tensor],
    iterations: int,
) -> ReplicateRuns:
    """``len(rngs)`` runs of ``algorithm`` on ``problem`` from ``start = (x_0, y_0)``, run ``r``
    drawing from ``rngs[r]``: :func:`~testbed.algorithms.base.run_algorithm` with that
    generator and the state ``init(problem)._replace(x=x_0, y=y_0)``, for ``iterations``
    iterations.

    Raises:
        NotBatchable: for what is not batched (:func:`check_batchable`), before any draw.
    """
    x0, y0 = start
    check_batchable(algorithm, problem, x0)
    algorithm.check_problem(problem)
    algorithm.estimator.check_problem(problem)
    side = Replicates(problem, rngs, algorithm.participation, algorithm.batch_size)
    count = len(side.rngs)
    x = x0.detach().expand(count, -1).clone()
    y = y0.detach().expand(count, -1).clone()
    path, inner, diverged = [x], [y], np.zeros(count, dtype=bool)
    x0_norm = float(x0.norm())
    for _ in range(iterations):
        x, y = _iteration(algorithm, side, x, y)
        diverged |= _diverged(x, x0_norm)
        path.append(x)
        inner.append(y)
    return ReplicateRuns(torch.stack(path, dim=1), torch.stack(inner, dim=1), diverged)


def _diverged(x: torch.Tensor, x0_norm: float) -> np.ndarray:
    """Which rows ``run_algorithm``'s check (:func:`~testbed.estimators.validation.
    check_iterate`) refuses, each decided by the check itself (:func:`~testbed.estimators.
    validation.rows_to_check` picks the rows it could refuse)."""
    out = np.zeros(int(x.shape[0]), dtype=bool)
    for r in rows_to_check(x, x0_norm):
        try:
            check_iterate(x[r], x0_norm, 0, "FBOAggITD")
        except DivergenceError:
            out[r] = True
    return out


def _iteration(
    algorithm: FBOAggITD, replicates: Replicates, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One FBO-AggITD iteration of every replicate (:meth:`FBOAggITD.advance`):
    ``(x_{k+1}, y_{k+1})``, each ``(R, d)``."""
    n = algorithm.inner_steps
    beta, lam = algorithm.estimator.step_sizes(replicates.problem)
    clients = replicates.participants()
    index = np.array([draw_index(rng, n) for rng in replicates.rngs])  # Q_r, after the clients
    side = replicates.drawn_ahead(_iteration_draws(algorithm, index))
    z: torch.Tensor | None = None
    x_rows = side.rows(x)
    for t in range(n + 1):
        z = _terms(side, clients, index, t, x, y, z, lam)
        if t < n:
            y_rows = side.rows(y)
            (anchor,) = InnerGradient(x_rows, y_rows, rows=False).run(side, clients).uploads
            lower = LocalIterates(
                y_rows,
                InnerGradientAt(x_rows),
                algorithm.local_steps,
                beta,
                global_direction=side.rows(side.aggregate(anchor)),
                scale_by_steps=True,
            )
            y = side.aggregate(lower.run(side, clients).uploads[0])
    assert z is not None  # every replicate's term reaches t = N
    y_rows = side.rows(y)
    direction = AggITDDirection(x_rows, y_rows, side.rows(z), lam * (n + 1))
    h = side.aggregate(direction.run(side, clients).uploads[0])
    upper = LocalIterates(
        x_rows,
        OuterGradientXAt(y_rows),
        algorithm.local_steps,
        algorithm.outer_step_size or DEFAULT_OUTER_STEP_SIZE,
        side.rows(h),
        True,
    )
    x_next = side.aggregate(upper.run(side, clients).uploads[0])
    side.check_drawn()
    return x_next, y


def _iteration_draws(algorithm: FBOAggITD, index: np.ndarray) -> list[int]:
    """Each replicate's minibatch draws in an iteration (all after its clients and ``Q_r``):
    replicate ``r`` with index ``Q_r`` makes ``N + 1 - Q_r`` term draws, ``N`` anchor draws and
    ``N tau`` local-step draws in the lower rounds, 2 in the hypergradient round and ``tau`` in
    One-Round-Upper, each of ``(C, b)`` indices."""
    # check_batchable admitted only one integer tau
    n, tau = algorithm.inner_steps, cast(int, algorithm.local_steps)
    return [n + 1 - q + n * (1 + tau) + 2 + tau for q in index.tolist()]


def _terms(
    side: Replicates,
    clients: torch.Tensor,
    index: np.ndarray,
    t: int,
    x: torch.Tensor,
    y: torch.Tensor,
    z: torch.Tensor | None,
    lam: float,
) -> torch.Tensor | None:
    """``z^t`` of every replicate after round ``t`` (:class:`HessIVTerm`): the replicates whose
    term starts here (``Q_r = t``) run it first, then those whose term continues (``Q_r <
    t``); the others keep what they had (no term yet: rows of NaN, never read)."""
    starting, continuing = np.flatnonzero(index == t), np.flatnonzero(index < t)
    if len(starting) == 0 and len(continuing) == 0:
        return z
    out = torch.full_like(y, float("nan")) if z is None else z.clone()
    for group, fresh in ((starting, True), (continuing, False)):
        if len(group) == 0:
            continue
        rows = torch.as_tensor(group, dtype=torch.long)
        part = side.select(group.tolist())
        own = clients.reshape(len(index), side.sampler.per_round).index_select(0, rows).reshape(-1)
        previous = None if fresh else part.rows(out.index_select(0, rows))
        term = HessIVTerm(
            part.rows(x.index_select(0, rows)),
            part.rows(y.index_select(0, rows)),
            previous,
            lam,
            fresh,
        )
        out[rows] = part.aggregate(term.run(part, own).uploads[0])
    return out


__all__ = ["MAX_SHARED_DIM", "ReplicateRuns", "check_batchable", "fbo_aggitd_replicates"]
