"""The adapter with a planted bug that needs its class: imported only when the perturbation
that plants it runs (the claims file names :mod:`testbed_fedmsa_authors.perturbations`, which is
read without the authors' checkout)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from problems import Problem
from testbed_fedmsa_authors.adapter import AuthorsFedMSA


@dataclasses.dataclass(frozen=True)
class NegatedV(AuthorsFedMSA):
    """The adapter handing their code ``-v`` (eq. (1)'s sign convention for v where (10) has
    the other)."""

    def maps(
        self, problem: Problem, x: torch.Tensor, w: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return super().maps(problem, x, w, -v)

    def local_update(
        self, problem: Problem, x: torch.Tensor, w: torch.Tensor, v: torch.Tensor, *rest: Any
    ) -> dict[str, torch.Tensor]:
        # rest: the global (h, q) and the client id, passed on unchanged
        return super().local_update(problem, x, w, -v, *rest)
