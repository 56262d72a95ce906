"""The adapters with a planted bug that needs its class: imported only when the perturbation
that plants it runs (the claims file names :mod:`testbed_fedmsa_authors.perturbations`, which is
read without the authors' checkout)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from problems import Problem
from testbed_fedmsa_authors.adapter import AuthorsFedMSA
from testbed_fedmsa_authors.mco import AuthorsFedMCO


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

    def global_step(
        self, problem: Problem, x: torch.Tensor, w: torch.Tensor, v: torch.Tensor, *rest: Any
    ) -> dict[str, torch.Tensor]:
        return super().global_step(problem, x, w, -v, *rest)


@dataclasses.dataclass(frozen=True)
class NegatedFirstLevel(AuthorsFedMCO):
    """The adapter handing their notebook functions ``-z^1`` (a sign slip in the translation of
    the levels into their nested ``Z``)."""

    def maps(
        self, problem: Problem, levels: list[torch.Tensor]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        return super().maps(problem, [levels[0], -levels[1], *levels[2:]])
