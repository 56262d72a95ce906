"""Replicates as a batch axis: a calibration's seeds of one claim computed together.

``testbed calibrate`` runs a statistical claim under calibration seeds ``0..K-1``
(:mod:`theory_checks.calibration`); the drawn cases are the same for every seed, and seed ``k``
changes only the Monte Carlo streams (:class:`~theory_checks.decision.Design`'s
``(claim seed, calibration seed, case, stage)`` entropy). So a block of seeds can share one
process, one setup and one batched computation of the Monte Carlo replicates:

- :func:`seed_batch` opens a block: inside it the seeds are checked one after the other on the
  cases of one search (:func:`theory_checks.seed_blocks.check_block`: each seed's decisions,
  confirmations and verdict are the runner's unbatched code, not a copy);
- a check's replicated computation goes through :func:`replicated`: the first seed of the block
  that reaches it computes every later seed's replicates at once, as one run with a leading
  axis of ``K x R`` replicates, and each seed is served its own block of ``R``;
- the random draws stay each seed's own: the batched run draws through a
  :class:`~testbed.federation.replicates.StackedGenerator` (the generator FedIHGP's replicate
  axis draws through too), which splits every draw along the leading axis into ``K`` draws of
  the unbatched shape, the ``k``-th from seed ``k``'s own generator. A seed's replicates are
  therefore drawn from the same streams, in the same calls, as its unbatched run draws them,
  and computed row by row by the same arithmetic (a test compares per-seed records and numbers,
  ``tests/test_calibration_batch.py``);
- a check whose replicate ``r`` has a stream of its own, ``design.rng(r)`` (Theorem 1's
  FBO-AggITD runs, :mod:`theory_checks.aggitd.thm1.replicates`; FedNest's K-rate runs,
  ``design.rng(r, horizon)``, :mod:`theory_checks.fednest.k_rate`), goes through
  :func:`replicated_streams`: the batched run is given every replicate's generator, seed after
  seed, and each seed is served its own replicates in the same way.

Where a computation cannot be stacked (a draw without the replicate axis, e.g. a stochastic
inner solver shared by every replicate:
:class:`~testbed.federation.replicates.NotBatchable`), the seed's replicates are
computed unbatched, as outside a block. Seed-independent values of a case (exact moments, a
deterministic reference run) are computed once through :func:`shared` and kept for the process's
later blocks.

Device: the stacked draws are NumPy arrays, as the unbatched generator's are; the estimator
moves them to its tensors' device, so the same path runs on the CPU and on CUDA.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

import numpy as np

from testbed.federation.replicates import StackedGenerator
from theory_checks.decision import Design
from theory_checks.recently_used import RecentlyUsed
from theory_checks.streams import design_rngs


def calibration_seed_of(design: Design) -> int:
    """The calibration seed of a design built by :func:`~theory_checks.decision.first_design`:
    its entropy is ``(claim seed, calibration seed, ...)`` at every stage and case."""
    return int(design.seed[1])


def sibling(design: Design, seed: int) -> Design:
    """``design`` under calibration seed ``seed``: the same claim, case, stage and scale."""
    return dataclasses.replace(design, seed=(design.seed[0], int(seed), *design.seed[2:]))


@dataclasses.dataclass
class _Block:
    seeds: tuple[int, ...]
    replicates: dict[Hashable, Any] = dataclasses.field(default_factory=dict)
    unbatched: set[Hashable] = dataclasses.field(default_factory=set)  # computations run alone
    batched_runs: int = 0  # stacked computations made (each serves several seeds)


_BLOCK: contextvars.ContextVar[_Block | None] = contextvars.ContextVar("seed_block", default=None)


@contextlib.contextmanager
def seed_batch(seeds: Sequence[int]) -> Iterator[_Block]:
    """Within it, the calibration seeds ``seeds`` (run in this order) share their replicated
    computations (:func:`replicated`) and seed-independent values (:func:`shared`)."""
    block = _Block(tuple(int(s) for s in seeds))
    token = _BLOCK.set(block)
    try:
        yield block
    finally:
        _BLOCK.reset(token)


def replicated(
    run: Callable[[Any, int], Any],
    replicates: int,
    design: Design,
    key: int,
    rows: int,
    identity: Hashable,
) -> Any:
    """``run(design.rng(key), replicates)``: ``replicates`` Monte Carlo replicates, stacked on
    the leading axis of the result, drawn from ``design``'s stream ``key`` with ``rows`` rows
    of every draw per replicate.

    In a :func:`seed_batch` block, a first-stage design of a seed of the block is served from a
    run of every seed of the block still to come (``run(StackedGenerator, K * replicates)``);
    ``identity`` names the computation (the case, the estimator's settings) so that a seed
    takes only what it would have computed itself. Outside a block, or for a confirmation
    (its own larger stream, rarely drawn), or when the stacked run cannot be made (a draw
    without the replicate axis, :class:`NotBatchable`, or an error in some seed's replicates),
    it is the plain call, which raises what the seed's own run raises."""

    def stacked(designs: list[Design]) -> Any:
        generators = [d.rng(key) for d in designs]
        return run(StackedGenerator(generators, rows * replicates), len(designs) * replicates)

    return _served(
        (identity, key, replicates),
        design,
        replicates,
        stacked,
        lambda: run(design.rng(key), replicates),
    )


def replicated_streams(
    run: Callable[[list[np.random.Generator]], Any],
    design: Design,
    keys: Sequence[tuple[int, ...]],
    identity: Hashable,
) -> Any:
    """``run([design.rng(*k) for k in keys])``: one result per stream ``k`` of ``keys`` (a
    replicate's own sub-stream, ``(replicate, horizon)`` say), in their order.

    :func:`replicated` for computations whose replicates draw each from a generator of its own
    rather than rows of one draw: in a :func:`seed_batch` block the first seed to reach it runs
    every later seed's streams in one call (``run`` of their generators, seed after seed) and
    each seed takes its own ``len(keys)`` results; the same fallbacks (outside a block, a
    confirmation, a failed stacked run: the seed's own call)."""
    keys = [tuple(int(k) for k in key) for key in keys]

    def stacked(designs: list[Design]) -> Any:
        return run([rng for d in designs for rng in design_rngs(d, keys)])

    return _served(
        (identity, tuple(keys)),
        design,
        len(keys),
        stacked,
        lambda: run(design_rngs(design, keys)),
    )


def _served(
    computation: Hashable,
    design: Design,
    size: int,
    stacked: Callable[[list[Design]], Any],
    alone: Callable[[], Any],
) -> Any:
    """A seed's ``size`` results of ``computation``: ``alone()`` outside a block, for a
    confirmation, or when the block's ``stacked`` run of every later seed's designs failed;
    else its slice of that run (made by the first seed that asks)."""
    block = _BLOCK.get()
    seed = calibration_seed_of(design)
    if block is None or design.scale != 1 or seed not in block.seeds:
        return alone()
    slot = (computation, sibling(design, 0).seed)
    found = block.replicates.pop((slot, seed), None)
    if found is not None:
        return found
    if slot in block.unbatched:
        return alone()
    later = block.seeds[block.seeds.index(seed) :]
    try:
        results = stacked([sibling(design, s) for s in later])
    except Exception:  # noqa: BLE001 - not stackable, or some seed's run raised
        # each seed then runs its own replicates, and raises (or not) as it would alone
        block.unbatched.add(slot)
        return alone()
    block.batched_runs += 1
    for index, s in enumerate(later[1:], start=1):
        block.replicates[(slot, s)] = results[index * size : (index + 1) * size]
    return results[:size]


#: How many seed-independent values (:func:`shared`) a process keeps across its blocks. Why
#: 256: a block of ``hgp.noise.sqrt_eta`` asks for 25 (5 cases x 4 steps' exact moments and a
#: reference run), the other claims fewer, so the last blocks' values of any claim stay while
#: the memory stays bounded (each value is a few small arrays), whatever ``--seeds``.
SHARED_VALUES = 256

_SHARED: RecentlyUsed[Any] = RecentlyUsed(SHARED_VALUES)


def shared(identity: Hashable, compute: Callable[[], Any]) -> Any:
    """``compute()``, a value that depends on the case and not on the calibration seed: inside a
    :func:`seed_batch` block, computed once and kept for the later seeds and the later blocks of
    this process (the ``SHARED_VALUES`` most recently used); outside a block, at every call.
    ``identity`` must name everything the value depends on (the case, the estimator's
    settings): it is the only key."""
    if _BLOCK.get() is None:
        return compute()
    if identity in _SHARED:
        return _SHARED.get(identity)
    return _SHARED.put(identity, compute())
