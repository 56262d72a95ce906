"""The arrays of FedNest's synthetic minimax instance (Sec. 4.3, Fig. 4), drawn from a seed.

Used by :meth:`problems.minimax.QuadraticMinimax.fednest_synthetic`, whose docstring gives the
instance and how it differs from the authors' notebook.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from problems._base import ProblemError, check_clients, check_nonnegative, check_seed


def fednest_synthetic_arrays(
    n_clients: int, dim: int, s: float, lam: float, seed: int,
) -> tuple[tuple[np.ndarray, ...], dict[str, Any]]:
    """``((P, b, A, Lam, e), spec)``: ``P_i = I``, ``b_i`` centred normal draws, ``A_i = t_i I``
    with ``t_i ~ U(0, 0.1)``, ``Lam_i = lam I``, ``e_i = 0``. Draw order from
    ``np.random.default_rng(seed)``: all ``t_i``, then all ``b_i'``."""
    label = "QuadraticMinimax.fednest_synthetic"
    check_clients(label, n_clients)
    check_nonnegative(label, "s", s)
    if dim < 1:
        raise ProblemError(f"{label}: dim must be >= 1, got {dim}")
    if not math.isfinite(lam) or lam <= 0.0:
        raise ProblemError(f"{label}: lam must be a positive number, got {lam}")
    check_seed(label, seed)
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, 0.1, size=n_clients)
    b_raw = rng.normal(0.0, s, size=(n_clients, dim))
    b = b_raw - b_raw.mean(axis=0, keepdims=True)
    eye = np.eye(dim)
    spec = {
        "family": label,
        "n_clients": n_clients,
        "dim": dim,
        "s": s,
        "lam": lam,
        "seed": seed,
    }
    ones = np.ones((n_clients, 1, 1))
    arrays = (ones * eye, b, t[:, None, None] * eye, ones * (lam * eye),
              np.zeros((n_clients, dim)))
    return arrays, spec
