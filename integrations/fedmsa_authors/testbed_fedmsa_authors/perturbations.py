"""Planted one-line bugs in the FedMSA authors'-code adapter's calls (what its claims must
catch, on a faithful implementation of their module API)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from problems import Problem
from testbed.registry import get_estimator
from testbed_fedmsa_authors.adapter import AuthorsFedMSA
from theory_checks.claim import Perturbation


@dataclasses.dataclass(frozen=True)
class NegatedV(AuthorsFedMSA):
    """The adapter handing their code ``-v`` (eq. (1)'s sign convention for v where (10) has
    the other)."""

    def maps(
        self, problem: Problem, x: torch.Tensor, w: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return super().maps(problem, x, w, -v)

    def local_update(
        self,
        problem: Problem,
        x: torch.Tensor,
        w: torch.Tensor,
        v: torch.Tensor,
        h: torch.Tensor,
        q: list[torch.Tensor],
        client: int,
    ) -> dict[str, torch.Tensor]:
        return super().local_update(problem, x, w, -v, h, q, client)


def _negated_v(**kw: Any) -> NegatedV:
    estimator = get_estimator("fedmsa-authors").build(**kw)
    return NegatedV(
        **{field.name: getattr(estimator, field.name) for field in dataclasses.fields(estimator)}
    )


def _alpha_doubled(**kw: Any) -> AuthorsFedMSA:
    estimator = get_estimator("fedmsa-authors").build(**kw)
    return dataclasses.replace(estimator, outer_step_size=2 * estimator.outer_step_size)


V_NEGATED = Perturbation(
    "v negated",
    "the adapter hands their p_func, s_func and update_local -v (the other sign "
    "convention of the adjoint)",
    _negated_v,
)
ALPHA_DOUBLED = Perturbation(
    "alpha doubled",
    "--alpha 2 alpha: the step on x handed to their update_local doubled",
    _alpha_doubled,
)
