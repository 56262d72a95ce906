"""The arrays of FedNest's synthetic minimax instance (Sec. 4.3, Fig. 4), drawn from a seed.

Used by :meth:`problems.minimax.QuadraticMinimax.fednest_synthetic`, whose docstring gives the
instance and how it differs from the authors' notebook.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from problems.checks import check_int
from problems.family import knob_spec
from problems.family import recipe_rng

#: FedNest's synthetic minimax instance's knobs in its recipe's order, with the paper's values
#: (Sec. 4.3) as defaults; the paper does not give m, 1000 is the authors' notebook value.
FEDNEST_SYNTHETIC: dict[str, float | None] = {
    "n_clients": 1000,
    "dim": 10,
    "s": 1.0,
    "lam": 10.0,
    "seed": 0,
}


def fednest_synthetic_arrays(
    knobs: dict[str, float],
) -> tuple[tuple[np.ndarray, ...], dict[str, Any]]:
    """``((P, b, A, Lam, e), spec)`` for the :data:`FEDNEST_SYNTHETIC` knobs given in ``knobs``:
    ``P_i = I``, ``b_i`` centred normal draws, ``A_i = t_i I`` with ``t_i ~ U(0, 0.1)``,
    ``Lam_i = lam I``, ``e_i = 0``. Draw order from ``np.random.default_rng(seed)``: all
    ``t_i``, then all ``b_i'``."""
    label = "QuadraticMinimax.fednest_synthetic"
    spec = knob_spec(label, {}, knobs, FEDNEST_SYNTHETIC)
    n_clients, dim, s, lam = (spec[k] for k in ("n_clients", "dim", "s", "lam"))
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
