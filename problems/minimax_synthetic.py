"""The arrays of FedNest's synthetic minimax instance (Sec. 4.3, Fig. 4), drawn from a seed.

Used by :meth:`problems.minimax.QuadraticMinimax.fednest_synthetic`, whose docstring gives the
instance and how it differs from the authors' notebook.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from problems.checks import check_int
from problems.family import recipe_rng


def fednest_synthetic_arrays(
    n_clients: int,
    dim: int,
    s: float,
    lam: float,
    seed: int,
) -> tuple[tuple[np.ndarray, ...], dict[str, Any]]:
    """``((P, b, A, Lam, e), spec)``: ``P_i = I``, ``b_i`` centred normal draws, ``A_i = t_i I``
    with ``t_i ~ U(0, 0.1)``, ``Lam_i = lam I``, ``e_i = 0``. Draw order from
    ``np.random.default_rng(seed)``: all ``t_i``, then all ``b_i'``."""
    label = "QuadraticMinimax.fednest_synthetic"
    spec = {"family": label, "n_clients": n_clients, "dim": dim, "s": s, "lam": lam, "seed": seed}
    check_int(label, "dim", dim, 1)
    rng = recipe_rng(
        spec,
        nonnegative=("s",),
        positive=("lam",),
        size=(lambda s: s["n_clients"] * (3 * s["dim"] ** 2 + 2 * s["dim"]), "n_clients x 3 dim^2"),
    )
    t = rng.uniform(0.0, 0.1, size=n_clients)
    b_raw = rng.normal(0.0, s, size=(n_clients, dim))
    b = b_raw - b_raw.mean(axis=0, keepdims=True)
    eye = np.eye(dim)
    ones = np.ones((n_clients, 1, 1))
    arrays = (ones * eye, b, t[:, None, None] * eye, ones * (lam * eye), np.zeros((n_clients, dim)))
    return arrays, spec
