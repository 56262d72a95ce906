"""The closed-form oracles of :class:`problems._base.ClosedFormOracles`, assembled from parts.

The closed-form quadratic families (:class:`~problems.quadratic_bilevel.QuadraticBilevel`,
:class:`~problems.minimax.QuadraticMinimax` and the ``N == 1`` bilevel view of
:class:`~problems.compositional.LinearCompositional`) write the protocol's derivatives one part
at a time, and their inner objectives are quadratic in ``y``, so the second derivatives
``grad^2_y g_i`` and ``grad^2_xy g_i`` do not depend on ``(x, y)``:

- :meth:`OracleParts.oracle_grad_outer` computes only the parts named in ``wrt`` (the other is
  ``None``): ``grad_x f_i`` from :meth:`~OracleParts._outer_grad_x_rows`, ``grad_y f_i`` from
  :meth:`~OracleParts._outer_grad_y_rows`;
- :meth:`OracleParts.oracle_hvp_inner` is ``grad^2_y g_i v`` (:meth:`~OracleParts._hessian_rows`)
  and :meth:`OracleParts.oracle_jvp_inner_xy` is ``grad^2_xy g_i v``
  (:meth:`~OracleParts._cross_rows`), whatever ``(x, y)``.

Every part returns one row per evaluated client; ``x``, ``y`` and ``v`` are ``(C, d)`` rows or
one ``(d,)`` vector for every client (the protocol's convention).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from problems._base import Batch


class OracleParts:
    """The protocol's outer gradient, HVP and mixed product from a family's parts (module
    docstring); a family gives the four ``_*_rows`` methods and its own ``oracle_grad_inner``."""

    def oracle_grad_outer(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt: str = "xy",
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(grad_x f_i, grad_y f_i)`` per evaluated client; only the parts named in ``wrt`` are
        computed (the other is ``None``)."""
        gx = self._outer_grad_x_rows(x, y, clients, batch) if "x" in wrt else None
        gy = self._outer_grad_y_rows(x, y, clients, batch) if "y" in wrt else None
        return gx, gy

    def oracle_hvp_inner(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``grad^2_y g_i v``: ``(C, dy)``, the same at every ``(x, y)``."""
        return self._hessian_rows(v, clients, batch)

    def oracle_jvp_inner_xy(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``grad^2_xy g_i v``: ``(C, dx)``, the same at every ``(x, y)``."""
        return self._cross_rows(v, clients, batch)

    # the parts a family gives: (x, y, clients, batch) -> grad_x f_i or grad_y f_i rows, and
    # (v, clients, batch) -> grad^2_y g_i v or grad^2_xy g_i v rows
    _outer_grad_x_rows: Callable[..., torch.Tensor]
    _outer_grad_y_rows: Callable[..., torch.Tensor]
    _hessian_rows: Callable[..., torch.Tensor]
    _cross_rows: Callable[..., torch.Tensor]
