"""Monte Carlo replicates of one federated computation, run as one batch.

A claim's statistical check repeats a federated computation (a FedIHGP run, say) under many
independent generators: its replicates. Run one by one, each replicate is a
:class:`~testbed.federation.context.FederatedContext` of its own, and a round is a batched
oracle call over a handful of clients, so Python's overhead per round, not the arithmetic, is
the cost. :class:`Replicates` is the clients' side of ``R`` such runs at once:

- replicate ``r`` draws from its own generator ``rngs[r]`` what its own context would draw, in
  the same calls (its round's clients, then the minibatch of each client work), or, over a
  stretch of its stream that holds only minibatches, in one call made ahead
  (:meth:`Replicates.drawn_ahead`: the same numbers);
- the clients of every replicate are stacked replicate-major on the oracles' client axis:
  ``R x C`` rows, ``C`` the clients of a round (:attr:`~testbed.federation.sampling.
  ClientSampler.per_round`, the same for every replicate), so a round of every replicate is one
  batched oracle call, and a :class:`~testbed.federation.client_work.ClientWork` runs on it
  unchanged (``work.run(replicates, clients)``);
- the server's state has a leading replicate axis ``(R, ...)``: :meth:`Replicates.aggregate`
  averages each replicate's ``C`` uploads, :meth:`Replicates.rows` hands a state to the
  clients as one row per evaluated client.

The oracles work row by row and the mean of a replicate's uploads is the ledger's mean of the
same rows, so replicate ``r`` gets the numbers its own context gives (tests compare them
exactly). Nothing goes through a ledger or a transport: replicates are a check's simulation,
not a deployment; the oracle calls are counted as in a context.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from problems import Batch
from problems import Problem
from testbed.calls import CallCounter
from testbed.federation.power_of_two_draws import draw_into
from testbed.federation.power_of_two_draws import drawable
from testbed.federation.power_of_two_draws import range_bits
from testbed.federation.sampling import ClientSampler
from testbed.oracles import Oracles


class NotBatchable(RuntimeError):
    """A draw without the stacked replicate axis: the computation runs unbatched."""


class StackedGenerator:
    """``K`` NumPy generators drawn as one, for a computation whose leading axis stacks ``K``
    blocks of ``rows`` rows (block ``k`` belongs to stream ``k``).

    A draw of shape ``(K * rows, ...)`` is ``K`` draws of shape ``(rows, ...)``, the ``k``-th
    from generator ``k``, concatenated: exactly the draw stream ``k``'s unbatched run makes
    (which has only its own ``rows``). Any other draw raises :class:`NotBatchable`: a draw
    shared by every row (one per run, not per replicate) has no stacked form.
    """

    def __init__(self, generators: Sequence[np.random.Generator], rows: int) -> None:
        if not generators or rows < 1:
            raise ValueError("StackedGenerator needs at least one generator and rows >= 1")
        self._generators, self._rows = list(generators), int(rows)

    def _block(self, size: Any) -> tuple[int, ...]:
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size or ())
        if not shape or shape[0] != len(self._generators) * self._rows:
            raise NotBatchable(
                f"a draw of shape {shape} does not stack {len(self._generators)} blocks of "
                f"{self._rows} rows"
            )
        return (self._rows, *shape[1:])

    def integers(self, low: Any, high: Any = None, size: Any = None, **kwargs: Any) -> np.ndarray:
        block = self._block(size)
        scalar_bounds = bool(np.isscalar(low)) and (high is None or bool(np.isscalar(high)))
        if block == (1,) * len(block) and scalar_bounds:
            # one value a generator: numpy's scalar draw takes the same value from the stream
            # (tests/test_calibration_batch.py compares them), at a quarter of the array draw's cost
            values = [g.integers(low, high, **kwargs) for g in self._generators]
            dtype = kwargs.get("dtype", np.int64)
            return np.array(values, dtype=dtype).reshape(len(values), *block[1:])
        bits = range_bits(low, high, kwargs)
        if bits is not None and all(drawable(g) for g in self._generators):
            # a power-of-two range: each generator's block drawn in place from its raw output
            # (power_of_two_draws: the same values and states, no concatenation)
            out = np.empty((len(self._generators) * block[0], *block[1:]), dtype=np.int64)
            for k, g in enumerate(self._generators):
                draw_into(g, bits, out[k * block[0] : (k + 1) * block[0]])
            return out
        return np.concatenate(
            [g.integers(low, high, size=block, **kwargs) for g in self._generators]
        )

    def standard_normal(self, size: Any = None, **kwargs: Any) -> np.ndarray:
        block = self._block(size)
        return np.concatenate([g.standard_normal(size=block, **kwargs) for g in self._generators])

    def random(self, size: Any = None, **kwargs: Any) -> np.ndarray:
        block = self._block(size)
        return np.concatenate([g.random(size=block, **kwargs) for g in self._generators])

    def __getattr__(self, name: str) -> Any:
        # any other draw (choice, permutation, a scalar) is not known to keep the row layout
        raise NotBatchable(f"the draw {name!r} has no stacked form")


class DrawnAhead:
    """Every replicate's next minibatch draws, drawn in one call per generator and served in
    the order its run asks for them: for a stretch of a run's stream that holds nothing but
    minibatches (:meth:`Replicates.drawn_ahead`; FedNest's iterations, FBO-AggITD's, FedIHGP's
    rounds).

    Every minibatch of such a stretch is ``rng.integers(0, n, size=(C, b))`` with the same bound
    ``n`` (the problem's samples per client: :func:`problems._rows.draw_indices`), and NumPy's
    bounded integers of one bound draw the generator's 32-bit stream the same way whatever the
    calls' sizes (each value one or more 32-bit draws by Lemire's method, the bit generator
    keeping the other half of a 64-bit draw for the next call), so ``rng.integers(0, n, size=m C
    b)`` split into blocks is exactly the draws of the ``m`` separate calls, and leaves the
    generator in the state they leave it in (``tests/test_aggitd_replicates.py`` and
    ``tests/test_streams.py`` check it). One call instead of ``m``: a call costs about 12 us,
    most of a batched iteration's time when each draw was a call.

    A draw of another bound, shape or kind raises :class:`NotBatchable` (the generators' streams
    have moved past it: the run is then made replicate by replicate, from fresh generators or
    the states taken before); a replicate asking for more draws than were drawn for it, or
    fewer (:meth:`check_used`), is a wrong count, an internal error.

    Args:
        rngs: the replicates' generators.
        n_samples: the bound ``n``.
        counts: each replicate's minibatch draws in the stretch (the calls of its run).
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
        bits = range_bits(0, self.high, {})
        for r, (rng, m) in enumerate(zip(rngs, counts, strict=True)):
            if bits is not None and drawable(rng):  # in place (power_of_two_draws)
                draw_into(rng, bits, self.values[r, :m])
                continue
            drawn = rng.integers(0, self.high, size=m * math.prod(shape))
            self.values[r, :m] = drawn.reshape(m, *shape)
        self.used = np.zeros(len(rngs), dtype=np.int64)

    def next(self, members: np.ndarray, low: Any, high: Any, size: Any) -> np.ndarray:
        """The next draw of each replicate of ``members`` (indices into the generators the
        draws were made from), stacked as their run asks for it: ``integers(0, n, size=
        (len(members) C, b))``."""
        expected = (len(members) * self.shape[0], self.shape[1])
        if (low, high) != (0, self.high) or _shape(size) != expected:
            raise NotBatchable(
                f"draws ahead are integers(0, {self.high}, {expected}), "
                f"not integers({low}, {high}, {size})"
            )
        at = self.used[members]
        if bool((at >= self.counts[members]).any()):
            raise AssertionError("a replicate asked for more minibatches than its run draws")
        self.used[members] = at + 1
        return self.values[members, at].reshape(expected)

    def check_used(self) -> None:
        """Raise unless every replicate used the draws its run makes (the counts are right)."""
        if not np.array_equal(self.used, self.counts):
            raise AssertionError("the minibatches drawn ahead were not all used")


def _shape(size: Any) -> tuple[int, ...]:
    """A draw's ``size`` as a shape tuple (``None``: a scalar, ``()``)."""
    if size is None:
        return ()
    return (int(size),) if isinstance(size, (int, np.integer)) else tuple(size)


class _MembersDraw:
    """:class:`DrawnAhead` as the generator of the replicates ``members`` (a problem's
    ``sample_batch`` draws ``integers`` from it); any other draw raises :class:`NotBatchable`."""

    def __init__(self, ahead: DrawnAhead, members: np.ndarray) -> None:
        self.ahead, self.members = ahead, members

    def integers(self, low: Any, high: Any = None, size: Any = None) -> np.ndarray:
        return self.ahead.next(self.members, low, high, size)

    def __getattr__(self, name: str) -> Any:
        raise NotBatchable(f"the draw {name!r} has no stacked form")


class Replicates:
    """The clients' side of ``len(rngs)`` replicates of a federated run on ``problem``.

    Args:
        problem: the federated problem every replicate runs on.
        rngs: one generator per replicate, its only source of randomness.
        participation: clients per round, as :class:`~testbed.federation.sampling.ClientSampler`
            reads it (``None``: all clients).
        batch_size: per-client minibatch size, ``None`` for exact local objectives.
    """

    def __init__(
        self,
        problem: Problem,
        rngs: Sequence[np.random.Generator],
        participation: float | int | None = None,
        batch_size: int | None = None,
    ) -> None:
        if not rngs:
            raise ValueError("Replicates needs at least one generator")
        self.problem, self.rngs, self.batch_size = problem, tuple(rngs), batch_size
        self.sampler = ClientSampler(problem.n_clients, participation)
        self.oracles = Oracles(problem, CallCounter())
        #: where the minibatches come from: ``None``, each replicate's generator at each draw
        #: (:class:`StackedGenerator`); else draws made ahead (:meth:`drawn_ahead`),
        #: ``members`` these replicates' indices in them
        self.ahead: DrawnAhead | None = None
        self.members = np.arange(len(self.rngs))

    def select(self, indices: Sequence[int]) -> Replicates:
        """The replicates ``indices`` of these, in that order (their generators; the same
        problem, sampler and counted oracles): for a round that only some replicates hold
        (AggITD's Hessian-inverse term starts at each replicate's own drawn index)."""
        part = copy.copy(self)
        part.rngs = tuple(self.rngs[i] for i in indices)
        part.members = self.members[np.asarray(indices, dtype=np.int64)]
        return part

    def drawn_ahead(self, counts: Sequence[int]) -> Replicates:
        """These replicates with replicate ``r``'s next ``counts[r]`` minibatches drawn in one
        call of its generator and handed out in order (:class:`DrawnAhead`): the same numbers,
        and the generators left in the same states, where those are the next draws of its
        stream (the caller knows that nothing else is drawn in between: partial participation
        draws each round's clients, AggITD its index, FedNest under random truncation its
        ``N'``). These replicates themselves (each draw a call of the generators) where nothing
        is drawn (exact oracles) or the draw is the problem's error (no samples, ``b < 1``).
        Check the counts with :meth:`check_drawn` once the stretch is run."""
        if self.ahead is not None:  # the generators are past the draws these are served
            raise AssertionError("these replicates are already served draws made ahead")
        b, n_samples = self.batch_size, getattr(self.problem, "n_samples", 0)
        if b is None or b < 1 or not n_samples:
            return self
        part = copy.copy(self)
        part.ahead = DrawnAhead(self.rngs, n_samples, counts, (self.sampler.per_round, b))
        part.members = np.arange(len(self.rngs))  # indices into these generators' draws
        return part

    def check_drawn(self) -> None:
        """Raise unless every replicate used the minibatches drawn ahead for it (the counts
        given to :meth:`drawn_ahead` were its run's); nothing to check where none were."""
        if self.ahead is not None:
            self.ahead.check_used()

    def participants(self) -> torch.Tensor:
        """Every replicate's clients of a round, each drawn from its own generator:
        ``(R x C,)``, replicate-major (full participation draws nothing)."""
        if self.sampler.is_full:
            return self.sampler.all_clients().repeat(len(self.rngs))
        return torch.cat([self.sampler.sample(rng) for rng in self.rngs])

    def draw(self, clients: torch.Tensor) -> Batch | None:
        """One minibatch per evaluated client row (``None`` when exact): the problem's
        ``sample_batch`` for every row at once, through :class:`StackedGenerator` (a problem draws
        one row per evaluated client: :func:`problems._rows.draw_indices`), so replicate ``r``'s
        rows are its own generator's draw for its own clients; any other draw raises
        :class:`NotBatchable` before a generator is touched, and the replicates must then run one
        by one, from fresh generators. Replicates :meth:`drawn_ahead` are served their next
        draws instead (the same rows)."""
        if self.batch_size is None:
            return None
        if self.ahead is not None:
            source = _MembersDraw(self.ahead, self.members)
            return self.problem.sample_batch(source, clients, self.batch_size)  # type: ignore[arg-type]
        blocks = StackedGenerator(self.rngs, int(clients.shape[0]) // len(self.rngs))
        return self.problem.sample_batch(blocks, clients, self.batch_size)  # type: ignore[arg-type]

    def aggregate(self, uploads: torch.Tensor) -> torch.Tensor:
        """Each replicate's round: the mean of its clients' uploads, ``(R, ...)`` (the ledger's
        mean over the same rows)."""
        return uploads.reshape(len(self.rngs), -1, *uploads.shape[1:]).mean(dim=1)

    def rows(self, state: torch.Tensor) -> torch.Tensor:
        """A state ``(R, ...)`` sent to each replicate's clients: one row per evaluated client,
        ``(R x C, ...)``."""
        return state.repeat_interleave(self.sampler.per_round, dim=0)


__all__ = ["DrawnAhead", "NotBatchable", "Replicates", "StackedGenerator"]
