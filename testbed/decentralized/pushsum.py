"""Push-Sum consensus (HGP Alg. 1; Kempe et al. 2003; Nedic & Olshevsky 2015).

Each client i holds a numerator ``z_i`` (initially its vector ``y_i^(0)``) and a weight
``omega_i`` (initially 1). At step s every client sends ``(z_j, omega_j) / |N_j^out(s)|`` to its
out-neighbours, so with the column-stochastic ``A(s)``:

.. math::  z^{(s)} = A(s) z^{(s-1)}, \\quad \\omega^{(s)} = A(s)\\omega^{(s-1)}, \\quad
           y_i^{(s)} = z_i^{(s)} / \\omega_i^{(s)} .

As an operator, ``y^(S) = Theta_hat y^(0)`` with ``Theta_hat = diag(P 1)^{-1} P``,
``P = A(S) ... A(1)`` (Sec. 2.1): row-stochastic, and ``Theta_hat -> Theta = 11^T / n`` under
Assumption 1 (eq. 1). All clients are updated at once: the state is a stacked ``(..., n, d)``
tensor and a step is one batched product through the :class:`GraphLedger`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from testbed.decentralized.ledger import GraphLedger


class PushSumResult(NamedTuple):
    """``y = z / omega`` (the de-biased estimates), the numerators and the weights."""

    y: torch.Tensor
    z: torch.Tensor
    omega: torch.Tensor


def push_sum(
    values: torch.Tensor,
    mixings: np.ndarray,
    ledger: GraphLedger,
    omega: torch.Tensor | None = None,
) -> PushSumResult:
    """Run S = ``len(mixings)`` Push-Sum steps on ``values`` (``(..., n, d)``), Alg. 1.

    Args:
        values: initial numerators ``z^(0)``.
        mixings: ``(S, n, n)`` column-stochastic weights of the S steps.
        ledger: every message passes through it (a ``d + 1``-float payload per edge per step).
        omega: initial weights ``(..., n)``; ones (Alg. 1) when None. HGP's practical variant
            passes the weights carried over from earlier calls (Sec. 5.3's "de-bias weight without
            initialization").
    """
    w = (
        # one row of ones for every replica (an expanded view: the same in each, at a glance)
        torch.ones(values.shape[-2], dtype=values.dtype, device=values.device).expand(
            values.shape[:-1]
        )
        if omega is None
        else omega
    )
    z, w = ledger.gossip_weighted(values, w, mixings)
    # y in z's layout (z may be a view of the ledger's client-major rows: the quotient is then
    # written in place along them, not across them; testbed.decentralized.replica_rows)
    y = torch.empty_like(z, dtype=torch.promote_types(z.dtype, w.dtype))
    torch.div(z, w[..., None], out=y)
    return PushSumResult(y, z, w)


def pushsum_operator(mixings: np.ndarray, omega: np.ndarray | None = None) -> np.ndarray:
    """``Theta_hat = diag(P omega)^{-1} P`` with ``P = A(S) ... A(1)`` (Sec. 2.1, Alg. 1).

    With ``omega = 1`` (Alg. 1) this maps initial vectors to the S-step Push-Sum output.
    """
    n = mixings.shape[-1]
    P = np.eye(n)
    for A in mixings:
        P = A @ P
    w = np.ones(n) if omega is None else np.asarray(omega, dtype=np.float64)
    return P / (P @ w)[:, None]


def consensus_error(theta_hat: np.ndarray) -> float:
    """``sigma_max(Theta_hat - 11^T / n)``: the Push-Sum error that Lemma 2 bounds (eq. (15))."""
    n = theta_hat.shape[-1]
    return float(np.linalg.norm(theta_hat - np.full((n, n), 1.0 / n), 2))
