"""The rows of a batched run's iterates that the divergence check could refuse
(:func:`testbed.estimators.validation.rows_to_check`): FedNest's and FBO-AggITD's replicate
runs decide those rows with :func:`~testbed.estimators.validation.check_iterate` and skip the
others, so a skipped row must be one the check passes."""

from __future__ import annotations

import math

import pytest
import torch

from testbed.estimators.validation import GROWTH_FACTOR
from testbed.estimators.validation import DivergenceError
from testbed.estimators.validation import check_iterate
from testbed.estimators.validation import rows_to_check


def refused(row: torch.Tensor, x0_norm: float) -> bool:
    try:
        check_iterate(row, x0_norm, 0, "test")
    except DivergenceError:
        return True
    return False


@pytest.mark.parametrize("x0_norm", [0.0, 0.5, 3.0, 1e3])
def test_every_row_the_check_refuses_is_picked(x0_norm):
    limit = GROWTH_FACTOR * max(1.0, x0_norm)
    generator = torch.Generator().manual_seed(0)
    directions = torch.randn(40, 3, generator=generator, dtype=torch.float64)
    directions /= torch.linalg.vector_norm(directions, dim=1, keepdim=True)
    # norms straddling the limit within a few ulps, far below and far above it, and the
    # non-finite rows
    scales = [limit * (1 + k * 2.0**-52) for k in range(-8, 9)] + [1.0, limit / 2, limit * 2]
    rows = [directions[i % 40] * s for i, s in enumerate(scales)]
    rows += [torch.tensor([math.inf, 0.0, 0.0]), torch.tensor([math.nan, 1.0, 0.0])]
    rows += [torch.tensor([1e308, 1e308, 0.0], dtype=torch.float64)]  # norm overflows
    x = torch.stack([r.to(torch.float64) for r in rows])
    picked = set(rows_to_check(x, x0_norm))
    refusals = {r for r in range(len(x)) if refused(x[r], x0_norm)}
    assert refusals <= picked
    # the cases include refused rows, and rows the check passes (those near the limit picked,
    # the row of norm 1 and the row at half the limit not)
    assert refusals and refusals != set(range(len(x)))
    assert picked.isdisjoint({len(scales) - 3, len(scales) - 2})


def test_rows_far_below_the_limit_are_not_picked():
    x = torch.ones(5, 2, dtype=torch.float64)
    assert rows_to_check(x, 1.0) == []
