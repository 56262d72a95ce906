"""Mixing weights for gossip over directed graphs (HGP Alg. 1, Sec. 2.1).

Edges are boolean arrays ``E[..., i, j]``: True when client j sends to client i at that step
(``j in N_i^in``); the diagonal is always True (self-loops, Assumption 1's convention). Push-Sum
needs *column-stochastic* weights, ``A[i, j] = 1 / |N_j^out|`` for ``j in N_i^in``: each sender
splits its mass evenly over its out-neighbours and needs to know only its own out-degree.
"""

from __future__ import annotations

import networkx as nx
import numpy as np


class MixingError(ValueError):
    """Raised for mixing weights Push-Sum cannot use (not column-stochastic, negative, ...)."""


# Why 1e-12: weights are sums of at most n reciprocals of small integers; float64 round-off
# in a column sum is ~n eps, while a wrong normalisation (rows instead of columns) is O(1/n).
STOCHASTIC_ATOL = 1e-12


def pushsum_weights(edges: np.ndarray) -> np.ndarray:
    """Column-stochastic ``A[..., i, j] = E[..., i, j] / |N_j^out|`` (HGP Alg. 1 line 4)."""
    edges = np.asarray(edges, dtype=bool)
    if edges.shape[-1] != edges.shape[-2]:
        raise MixingError(f"edges must be square in the last two axes, got {edges.shape}")
    diagonal = np.diagonal(edges, axis1=-2, axis2=-1)
    if not diagonal.all():
        raise MixingError("every client must keep a self-loop (i in N_i^out), Alg. 1")
    out_degree = edges.sum(axis=-2, keepdims=True)
    return edges / out_degree


def check_column_stochastic(weights: np.ndarray, name: str = "mixing weights") -> None:
    """Raise :class:`MixingError` unless every matrix is non-negative with columns summing to 1.

    Push-Sum's mass conservation (``sum_i z_i`` and ``sum_i omega_i`` preserved) and its
    convergence to the exact average rest on this (Nedic & Olshevsky 2015, eq. 1).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim < 2 or weights.shape[-1] != weights.shape[-2]:
        raise MixingError(f"{name}: expected square matrices, got shape {weights.shape}")
    if weights.size == 0:  # no step: nothing to check
        return
    if not np.isfinite(weights).all():
        raise MixingError(f"{name}: NaN or inf entries")
    if (weights < 0).any():
        raise MixingError(f"{name}: negative entry {weights.min():.3g}; weights must be >= 0")
    sums = weights.sum(axis=-2)
    worst = float(np.abs(sums - 1.0).max())
    if worst > STOCHASTIC_ATOL:
        bad = np.argwhere(np.abs(sums - 1.0) > STOCHASTIC_ATOL)[0]
        raise MixingError(
            f"{name}: not column-stochastic: column {int(bad[-1])} sums to "
            f"{float(sums[tuple(bad)]):.6g} (Push-Sum needs every column to sum to 1; "
            "row-stochastic weights bias the average towards well-connected clients)"
        )


def metropolis_weights(graph: nx.Graph) -> np.ndarray:
    """Symmetric doubly-stochastic Metropolis-Hastings weights of an undirected graph.

    ``W_ij = 1 / (1 + max(deg_i, deg_j))`` on edges, ``W_ii = 1 - sum_j W_ij`` (Xiao & Boyd
    2004); the static-network variant of HGP (its experiments' FixU) has ``Theta_hat = W^S``.
    """
    n = graph.number_of_nodes()
    W = np.zeros((n, n))
    degree = dict(graph.degree())
    for i, j in graph.edges():
        if i != j:
            W[i, j] = W[j, i] = 1.0 / (1.0 + max(degree[i], degree[j]))
    W[np.diag_indices(n)] = 1.0 - W.sum(axis=1)
    return W


def slem(W: np.ndarray) -> float:
    """Second-largest eigenvalue modulus of a symmetric doubly-stochastic W (= ``tau``)."""
    values = np.sort(np.abs(np.linalg.eigvalsh(W)))
    return float(values[-2]) if len(values) > 1 else 0.0
