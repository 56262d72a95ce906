"""Planted one-line bugs in the higher adapter's calls (``integrations/test_library_adapters.py``
shows each is caught by the ITD and GD claims)."""

from __future__ import annotations

from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import field_variant

ONE_STEP_SHORT = Perturbation(
    "one diffopt.step short",
    "T - 1 differentiable steps for T",
    field_variant("higher-unrolled", inner_steps=lambda e: max(e.inner_steps - 1, 0)),
)
STEP_DOUBLED = Perturbation(
    "SGD lr doubled",
    "torch.optim.SGD(lr=2 beta)",
    field_variant("higher-unrolled", inner_step_size=lambda e: 2 * e.inner_step_size),
)
