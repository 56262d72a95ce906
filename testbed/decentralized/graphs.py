"""Seeded time-varying communication graphs (HGP sec. 2.1 and the graphs of Sec. 5).

A :class:`GraphSequence` is a family, a size ``n`` and a seed; step ``s = 0, 1, 2, ...`` has edge
set ``E(s)`` (always with self-loops) and is random-access and reproducible: the same (family,
n, seed, s) always gives the same graph, independently of the data randomness (HGP's D3 needs
the graphs independent of the samples).

Families:

- ``fully_connected``: every edge at every step (``A = 11^T / n``, Push-Sum exact for S >= 1);
- ``directed_ring``: static ring ``i -> i+1`` plus self-loops (B = 1);
- ``random_directed`` (RandD, sec. 5.1): each directed edge ``j -> i`` is present at each step
  independently with probability ``rho_ij ~ U[p_low, p_high]`` drawn once;
- ``random_undirected`` (RandU): the same with symmetric edges, still Push-Sum weights;
- ``b_connected``: one edge of a seeded random ring per step, so only the union over windows of
  ``B = n`` steps is strongly connected (Assumption 1 with B = n, notes G5);
- ``static_undirected`` (FixU): a connected Erdos-Renyi graph with Metropolis weights W (doubly
  stochastic, ``Theta_hat = W^S``);
- ``disconnected`` (negative control, violates Assumption 1): two groups, edges only inside a
  group and one way from the first group to the second, so no union of steps is strongly
  connected.

networkx builds the static graphs (``complete_graph``, ``cycle_graph``, ``gnp_random_graph``) and
checks strong connectivity of window unions (``is_strongly_connected``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import networkx as nx
import numpy as np

from testbed.decentralized.mixing import metropolis_weights
from testbed.decentralized.mixing import pushsum_weights
from testbed.defaults import EDGE_PROBABILITY

GRAPH_FAMILIES: tuple[str, ...] = (
    "fully_connected",
    "directed_ring",
    "random_directed",
    "random_undirected",
    "b_connected",
    "static_undirected",
    "disconnected",
)
CONNECTED_FAMILIES: tuple[str, ...] = tuple(f for f in GRAPH_FAMILIES if f != "disconnected")
# Why 256: random graphs are drawn in chunks of this many steps from a generator seeded by
# (seed, chunk), so any step is reproducible without replaying the sequence from step 0, and a
# chunk is one vectorised draw.
_CHUNK = 256


@functools.lru_cache(maxsize=256)
def _static_graph(family: str, n: int, seed: int, p: float) -> np.ndarray:
    """Edge matrix ``E[i, j]`` (j -> i) of a static family, self-loops included."""
    if family == "fully_connected":
        graph: Any = nx.complete_graph(n, create_using=nx.DiGraph)
    elif family == "directed_ring":
        graph = nx.cycle_graph(n, create_using=nx.DiGraph)
    elif family == "static_undirected":
        graph = _connected_gnp(n, p, seed)
    else:
        raise ValueError(f"{family!r} is not a static family")
    E = nx.to_numpy_array(graph, nodelist=range(n), dtype=bool).T  # to_numpy: [j, i] = j -> i
    if family == "static_undirected":
        E = E | E.T
    E[np.diag_indices(n)] = True
    return E


@functools.lru_cache(maxsize=1024)
def _uniform_chunk(seed: int, n: int, chunk: int) -> np.ndarray:
    """Uniform draws of ``_CHUNK`` steps, from a generator seeded by (seed, chunk) only."""
    draws = np.random.default_rng([seed, 1, chunk]).random((_CHUNK, n, n))
    draws.flags.writeable = False
    return draws


# Why 4096: an HGP run asks for the weights of each of its M <= 80 averaging calls, and a
# calibration repeats the same runs (the same graphs) block after block; the entries are a few
# (S, n, n) arrays.
@functools.lru_cache(maxsize=4096)
def _mixing_weights(graph: GraphSequence, start: int, count: int) -> np.ndarray:
    """:meth:`GraphSequence.mixing`'s weights, kept read-only (the sequence is a frozen value:
    equal sequences share them)."""
    weights = graph._computed_mixing(start, count)
    weights.flags.writeable = False
    return weights


def _connected_gnp(n: int, p: float, seed: int) -> nx.Graph:
    # Why at most 1000 draws: for p >= 0.3 and n <= 64 a G(n, p) draw is connected with
    # probability well above 1/2, so 1000 failures would mean the parameters are unusable.
    for k in range(1000):
        graph = nx.gnp_random_graph(n, p, seed=seed * 1000 + k)
        if nx.is_connected(graph):
            return graph
    raise ValueError(f"no connected G({n}, {p}) found; raise the edge probability")


@dataclasses.dataclass(frozen=True)
class GraphSequence:
    """A seeded graph sequence over time; see the module docstring for the families.

    Args:
        family: one of :data:`GRAPH_FAMILIES`.
        n: number of clients.
        seed: the sequence's own seed (independent of the data generator).
        p_low, p_high: range of the per-edge probabilities (random families) or, for
            ``static_undirected``, ``p_low`` is the Erdos-Renyi edge probability.
    """

    family: str
    n: int
    seed: int = 0
    p_low: float = EDGE_PROBABILITY[0]
    p_high: float = EDGE_PROBABILITY[1]

    def __post_init__(self) -> None:
        if self.family not in GRAPH_FAMILIES:
            raise ValueError(f"unknown graph family {self.family!r}; known: {GRAPH_FAMILIES}")
        if self.n < 1:
            raise ValueError(f"a graph needs at least one client, got n={self.n}")
        if not 0.0 <= self.p_low <= self.p_high <= 1.0:
            raise ValueError(f"need 0 <= p_low <= p_high <= 1, got {self.p_low}, {self.p_high}")

    @property
    def window(self) -> int:
        """The B of Assumption 1 that the family guarantees (random families: none; see
        :meth:`measured_window`)."""
        return self.n if self.family == "b_connected" else 1

    def spec(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # ----------------------------------------------------------------------------- edges
    @functools.cached_property
    def _probabilities(self) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 0])
        return rng.uniform(self.p_low, self.p_high, size=(self.n, self.n))

    @functools.cached_property
    def _ring_order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, 2]).permutation(self.n)

    @functools.cached_property
    def _groups(self) -> np.ndarray:
        """``True`` for the clients of the first (source) group of the negative control."""
        order = np.random.default_rng([self.seed, 3]).permutation(self.n)
        first = np.zeros(self.n, dtype=bool)
        first[order[: (self.n + 1) // 2]] = True
        return first

    def _random_chunk(self, chunk: int) -> np.ndarray:
        return _uniform_chunk(self.seed, self.n, chunk) < self._probabilities

    def edges(self, start: int, count: int) -> np.ndarray:
        """Boolean ``(count, n, n)``: ``E[s, i, j]`` is True when j sends to i at step start+s."""
        if start < 0 or count < 0:
            raise ValueError("graph steps are non-negative")
        n, f = self.n, self.family
        if f in ("fully_connected", "directed_ring", "static_undirected"):
            return np.broadcast_to(_static_graph(f, n, self.seed, self.p_low), (count, n, n)).copy()
        steps = np.arange(start, start + count)
        if f == "b_connected":
            E = np.zeros((count, n, n), dtype=bool)
            if n > 1:
                k = steps % n
                src, dst = self._ring_order[k], self._ring_order[(k + 1) % n]
                E[np.arange(count), dst, src] = True
        else:
            chunks = range(start // _CHUNK, (start + count - 1) // _CHUNK + 1) if count else []
            block = (
                np.concatenate([self._random_chunk(c) for c in chunks])
                if count
                else np.zeros((0, n, n), dtype=bool)
            )
            offset = start - (start // _CHUNK) * _CHUNK
            E = block[offset : offset + count].copy()
            if f == "random_undirected":
                upper = np.triu(E, 1)
                E = upper | np.swapaxes(upper, 1, 2)
            elif f == "disconnected":
                g = self._groups
                same = g[:, None] == g[None, :]
                first_to_second = (~g)[:, None] & g[None, :]  # [i, j]: j in group 1 -> i in 2
                E = E & (same | first_to_second)
        E[:, np.arange(n), np.arange(n)] = True
        return E

    def mixing(self, start: int, count: int) -> np.ndarray:
        """``(count, n, n)`` column-stochastic weights of steps ``start .. start+count-1``.

        Push-Sum weights ``1/|N_j^out|`` for every family except ``static_undirected``, whose
        weights are the doubly-stochastic Metropolis W (the static network, Theta_hat = W^S).
        A new array each call, computed once for a sequence's steps (:func:`_mixing_weights`).
        """
        return _mixing_weights(self, int(start), int(count)).copy()

    def _computed_mixing(self, start: int, count: int) -> np.ndarray:
        if self.family == "static_undirected":
            W = self.static_weights()
            return np.broadcast_to(W, (count, self.n, self.n)).copy()
        return pushsum_weights(self.edges(start, count))

    def static_weights(self) -> np.ndarray:
        if self.family != "static_undirected":
            raise ValueError("static_weights is defined for the static_undirected family")
        E = _static_graph(self.family, self.n, self.seed, self.p_low)
        graph = nx.from_numpy_array(E.astype(int))
        graph.remove_edges_from(nx.selfloop_edges(graph))
        return metropolis_weights(graph)

    # ----------------------------------------------------------------------------- A1
    def is_window_strongly_connected(self, start: int, length: int) -> bool:
        """Whether the union of ``E(start) .. E(start+length-1)`` is strongly connected."""
        union = self.edges(start, length).any(axis=0)
        graph = nx.from_numpy_array(union.T.astype(int), create_using=nx.DiGraph)
        return bool(nx.is_strongly_connected(graph))

    def measured_window(self, horizon: int, max_window: int | None = None) -> int | None:
        """Smallest B such that every aligned window of B steps in ``[0, horizon)`` is strongly
        connected (Assumption 1 on the realised sequence), or None if none up to ``max_window``.
        """
        limit = max_window or horizon
        for B in range(1, limit + 1):
            if all(self.is_window_strongly_connected(t * B, B) for t in range(horizon // B)):
                return B
        return None

    def assumption_violation(self, horizon: int) -> str | None:
        """A sentence naming the violated assumption, or None when A1 holds on the horizon."""
        if self.measured_window(horizon) is not None:
            return None
        return (
            f"Assumption 1 (B-strong connectivity) is violated: no window of up to "
            f"{horizon} steps of the {self.family} sequence (n={self.n}, seed={self.seed}) "
            "has a strongly connected union (networkx.is_strongly_connected)"
        )
