"""Planted one-line bugs in the higher adapter's calls (``tests/test_higher_adapter.py`` shows
each is caught by the ITD and GD claims)."""

from __future__ import annotations

import dataclasses
from typing import Any

from testbed.registry import get_estimator
from theory_checks.claim import Perturbation


def _with(name: str, **change: Any) -> Any:
    def make(**kw: Any) -> Any:
        estimator = get_estimator(name).build(**kw)
        return dataclasses.replace(estimator, **{field: rule(estimator)
                                                 for field, rule in change.items()})

    return make


ONE_STEP_SHORT = Perturbation(
    "one diffopt.step short", "T - 1 differentiable steps for T",
    _with("higher-unrolled", inner_steps=lambda e: max(e.inner_steps - 1, 0)))
STEP_DOUBLED = Perturbation(
    "SGD lr doubled", "torch.optim.SGD(lr=2 beta)",
    _with("higher-unrolled", inner_step_size=lambda e: 2 * e.inner_step_size))
