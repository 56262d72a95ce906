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
iteration's in one call, :class:`IterationDraws`, which draws the same numbers). The term
``z^t`` starts at ``t = Q_r``, so at round ``t`` the replicates split into those whose term
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

import math
from collections.abc import Sequence
from typing import Any
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
from testbed.estimators.validation import GROWTH_FACTOR
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
    limit = GROWTH_FACTOR * max(1.0, float(x0.norm()))
    for _ in range(iterations):
        x, y = _iteration(algorithm, side, x, y)
        diverged |= _diverged(x, limit)
        path.append(x)
        inner.append(y)
    return ReplicateRuns(torch.stack(path, dim=1), torch.stack(inner, dim=1), diverged)


def _diverged(x: torch.Tensor, limit: float) -> np.ndarray:
    """Which rows ``run_algorithm``'s check (:func:`~testbed.estimators.validation.
    check_iterate`) refuses: non-finite, or ``float(x_r.norm())`` past ``limit``. The batched
    norms only pick the rows to look at (they may differ from a row's own norm in the last
    bits, far less than the margin); each of those is decided on its own norm, as the check
    computes it."""
    norms = torch.linalg.vector_norm(x, dim=1)
    near = ~(norms <= limit * (1.0 - 1e-9)) | ~torch.isfinite(x).all(dim=1)
    out = np.zeros(int(x.shape[0]), dtype=bool)
    for r in near.nonzero().flatten().tolist():
        row = x[r]
        norm = float(row.norm())
        out[r] = not bool(torch.isfinite(row).all()) or not np.isfinite(norm) or norm > limit
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
    draws = _iteration_draws(algorithm, replicates, index)
    side = replicates if draws is None else replicates.served(draws)
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
    if draws is not None:
        draws.check_used()
    return x_next, y


def _iteration_draws(
    algorithm: FBOAggITD, side: Replicates, index: np.ndarray
) -> IterationDraws | None:
    """An iteration's minibatches (``None`` with exact oracles): replicate ``r`` with index
    ``Q_r`` makes ``N + 1 - Q_r`` term draws, ``N`` anchor draws and ``N tau`` local-step draws
    in the lower rounds, 2 in the hypergradient round and ``tau`` in One-Round-Upper, each of
    ``(C, b)`` indices."""
    # check_batchable admitted only one integer tau and a QuadraticMinimax
    n, tau, b = algorithm.inner_steps, cast(int, algorithm.local_steps), side.batch_size
    if b is None:
        return None
    counts = [n + 1 - q + n * (1 + tau) + 2 + tau for q in index.tolist()]
    n_samples = cast(QuadraticMinimax, side.problem).n_samples
    return IterationDraws(side.rngs, n_samples, counts, (side.sampler.per_round, b))


class IterationDraws:
    """Every replicate's minibatch indices of one iteration, drawn in one call per replicate
    and handed out in the order its run asks for them.

    Every minibatch of an iteration (after its clients and ``Q``) is ``rng.integers(0, n, size=
    (C, b))`` with the same bound ``n`` (the problem's samples per client:
    :func:`problems._rows.draw_indices`), and NumPy's bounded integers of one bound draw the
    generator's 32-bit stream the same way whatever the calls' sizes (each value one or more
    32-bit draws by Lemire's method, the bit generator keeping the other half of a 64-bit draw
    for the next call), so ``rng.integers(0, n, size=m C b)`` split into blocks is exactly the
    draws of the ``m`` separate calls (``tests/test_aggitd_replicates.py`` checks it on the
    generators :class:`~theory_checks.decision.Design` makes). One call instead of ``m``: a
    call costs about 12 us, most of a batched iteration's time when each draw was a call.

    Args:
        rngs: the replicates' generators.
        n_samples: the bound ``n``.
        counts: each replicate's minibatch draws in the iteration (the calls of its run).
        shape: a draw's ``(C, b)``.
    """

    def __init__(
        self,
        rngs: Sequence[np.random.Generator],
        n_samples: int,
        counts: Sequence[int],
        shape: tuple[int, int],
    ) -> None:
        self.high, self.shape = int(n_samples), shape
        self.counts = np.asarray(counts, dtype=np.int64)
        self.values = np.zeros((len(rngs), max(counts), *shape), dtype=np.int64)
        for r, (rng, m) in enumerate(zip(rngs, counts, strict=True)):
            drawn = rng.integers(0, self.high, size=m * math.prod(shape))
            self.values[r, :m] = drawn.reshape(m, *shape)
        self.used = np.zeros(len(rngs), dtype=np.int64)

    def next(self, members: np.ndarray, low: Any, high: Any, size: Any) -> np.ndarray:
        """The next draw of each replicate of ``members``, stacked as their run asks for it:
        ``integers(0, n, size=(len(members) C, b))``."""
        expected = (len(members) * self.shape[0], self.shape[1])
        if (low, high) != (0, self.high) or tuple(size) != expected:
            raise AssertionError(
                f"an iteration draws integers(0, {self.high}, {expected}), "
                f"not integers({low}, {high}, {size})"
            )
        out = self.values[members, self.used[members]]
        self.used[members] += 1
        if bool((self.used[members] > self.counts[members]).any()):
            raise AssertionError("a replicate asked for more minibatches than its run draws")
        return out.reshape(expected)

    def check_used(self) -> None:
        """Raise unless every replicate used the draws its run makes (the counts are right)."""
        if not np.array_equal(self.used, self.counts):
            raise AssertionError("an iteration's minibatches were not all used")


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
