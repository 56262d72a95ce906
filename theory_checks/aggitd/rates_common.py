"""Shared helpers of the AggITD rate, errata and scaling checks: the fixed-Q generator and the
observer that records One-Round-Upper's uploads (the constants, ``L_f``, ``M`` and Lemma 4's
among them, are in :mod:`theory_checks.aggitd.constants`)."""

from __future__ import annotations

import torch


class FixedIndex:
    """Stands in for a run's generator when the only draw is AggITD's ``Q`` (Alg. 1 line 1).

    With exact oracles and full participation the server's ``Q ~ U{0..N}`` is the run's only
    random draw, so the exact expectation over Q is the mean over runs with ``Q = 0..N``; any
    other draw is an error.
    """

    def __init__(self, index: int) -> None:
        self.index = index

    def integers(self, low: int, high: int) -> int:
        if not low <= self.index < high:
            raise ValueError(f"fixed index {self.index} outside [{low}, {high})")
        return self.index


class LastUploads:
    """An upload observer that keeps the uploads of the last aggregation (One-Round-Upper's
    ``x^i``): ``FederatedContext(..., upload_observer=LastUploads())``."""

    def __init__(self) -> None:
        self.uploads: torch.Tensor | None = None

    def __call__(self, uploads: torch.Tensor, clients: torch.Tensor) -> None:
        self.uploads = uploads.detach().clone()
