r"""The FedMSA authors' multi-level compositional code (JAX) as a testbed estimator: their
notebook ``fedMCO_stochastic_final.ipynb`` of ucr-optml/FedMSA and the maps of FedMSA's eq. (11)
as it computes them, on the testbed's :class:`~problems.RiskAverse` (the notebook's own problem:
``U(x, xi) = (b - (a'x)^2)^2``, ``f_0, f_1, f_2`` of its first markdown cell).

Taken from the notebook by name (:func:`~testbed_fedmsa_authors.notebooks.notebook_functions`),
unmodified, with the ``import`` lines of its cell 1 that they use (``jax.numpy as jnp``,
``jacfwd``): ``func_g``, ``func_U``, ``func_f2``, ``func_f1``, ``func_f0`` (cell 6, the level
maps) and ``s_func``, ``p_func`` (cell 9, the maps (11a) and (11b)). Their ``Z`` is the list
``[[x], [z^1_x, z^1_y], [z^2_x, z^2_y], [z^3]]``: ``z^1 = f_0(x) = (x, mean U)`` in ``R^{d+1}``,
``z^2 = f_1(z^1)`` in ``R^2``, and a fourth sequence ``z^3 = f_2(z^2)`` that (11) does not have
(the objective's value: ``s_func``'s last entry, which ``p_func`` never reads). ``s_func``
returns ``[[0], S^1, S^2, S^3]`` (the first a zero map for x), ``p_func`` returns ``[P]``.

The translation (nothing of their functions changed):

- **the data**: client m's examples ``problem.a[m]``, ``problem.b[m]`` (all of them: exact
  oracles; the notebook samples a batch of 100 with ``sample_batch`` in its training loop,
  cell 11, which is not run), ``lmbda = problem.lam``, ``delta = problem.delta``;
- **float64**: JAX's ``jax_enable_x64`` switched on (the notebook runs JAX's default float32;
  the identities are checked in float64);
- **the arrays**: torch float64 tensors handed over as ``jnp.asarray`` of their NumPy values,
  results read back with ``np.asarray``.

Not run: the notebook's training loop (cell 11: the momentum step (5), inline, and the local
SARAH steps (6)-(7), not functions that can be taken by name), its data generation (cells 3-5, 7,
unseeded ``np.random``; :class:`~problems.RiskAverse` draws the same kind of data from a seed) and
its centralised baseline (cell 8).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch

from problems import Problem
from testbed.calls import Calls
from testbed.estimators.base import Estimate
from testbed.estimators.base import Estimator
from testbed_fedmsa_authors.authors_code import CODE
from testbed_fedmsa_authors.notebooks import notebook_functions

#: The notebook and the functions taken from it (cells 6 and 9), in definition order.
NOTEBOOK = "fedMCO_stochastic_final.ipynb"  # at the top of a ucr-optml/FedMSA checkout
FUNCTIONS = ("func_g", "func_U", "func_f2", "func_f1", "func_f0", "s_func", "p_func")


def _jax() -> Any:
    """``jax.numpy`` with float64 on (imported here: only the MCO estimator needs JAX)."""
    import jax  # noqa: PLC0415

    jax.config.update("jax_enable_x64", True)
    return jax.numpy


def their_functions(repo: Path = CODE.repo) -> Any:
    """The notebook's functions :data:`FUNCTIONS`, from the checkout ``repo``."""
    _jax()
    return notebook_functions(repo / NOTEBOOK, FUNCTIONS)


def split(problem: Problem, levels: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """``[x, z^1, z^2, z^3]`` (flat tensors) as their nested ``Z``."""
    d = problem.dims[0]
    x, z1, z2, z3 = levels
    return [[x], [z1[:d], z1[d]], [z2[0], z2[1]], [z3.reshape(())]]


@dataclasses.dataclass(frozen=True)
class AuthorsFedMCO(Estimator):
    """FedMSA's compositional maps (11) as the authors' notebook computes them.

    :meth:`maps` calls their ``p_func`` and ``s_func`` for every client; :meth:`compute` is the
    direction their x-update follows at the fixed point of ``mean_m s_func_m = 0`` (``z^{n+1} =
    fbar^n(z^n)``): ``mean_m p_func_m(x, Z*(x))``.
    """

    supports = frozenset({"compositional"})

    def check_problem(self, problem: Problem) -> None:
        if not hasattr(problem, "a") or getattr(problem, "n_levels", None) != 2:
            raise ValueError(
                f"{type(self).__name__} runs the notebook's risk-averse maps: it needs a "
                f"RiskAverse problem, not {type(problem).__name__}"
            )

    def initial_state(self, problem: Problem) -> None:
        """No state: the direction is read at the fixed point of each ``x``."""
        return None

    def maps(
        self, problem: Problem, levels: list[torch.Tensor]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Every client's ``p_func(Z)`` ``(M, d)`` and ``s_func(Z)`` (levels 1-3, each ``(M,
        size)``) at ``levels = [x, z^1, z^2, z^3]``."""
        jnp, nb = _jax(), their_functions()
        Z = [
            [jnp.asarray(part.detach().cpu().numpy()) for part in level]
            for level in split(problem, levels)
        ]
        p, s = [], []
        for m in range(problem.n_clients):
            a = jnp.asarray(problem.a[m].detach().cpu().numpy())
            b = jnp.asarray(problem.b[m].detach().cpu().numpy())
            p.append(np.asarray(nb.p_func(Z, a, b, problem.lam, problem.delta)[0]))
            S = nb.s_func(Z, a, b, problem.lam, problem.delta)
            s.append(
                [np.concatenate([np.atleast_1d(np.asarray(e)) for e in level]) for level in S[1:]]
            )
        as_tensor = lambda arrays: torch.as_tensor(np.stack(arrays), dtype=torch.float64)  # noqa: E731
        return as_tensor(p), [as_tensor([entry[n] for entry in s]) for n in range(3)]

    def fixed_point(self, problem: Problem, x: torch.Tensor) -> list[torch.Tensor]:
        """``[x, z^1, z^2, z^3]`` with ``z^{n+1} = fbar^n(z^n)``: where ``mean_m s_func_m =
        0``."""
        levels = problem.level_values(x)
        return [*levels, problem.mean_level_map(2, levels[-1]).reshape(1)]

    def compute(
        self, problem: Problem, x: torch.Tensor, state: Any, rng: np.random.Generator
    ) -> Estimate:
        p, _ = self.maps(problem, self.fixed_point(problem, x))
        return Estimate(p.mean(0), state, Calls(), {})


__all__ = ["FUNCTIONS", "NOTEBOOK", "AuthorsFedMCO", "split", "their_functions"]
