"""Planted one-line bugs in the Betty adapter's calls: what its claims must catch
(``integrations/test_library_adapters.py`` shows each is caught)."""

from __future__ import annotations

from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import field_variant

DARTS_ONE_LOWER_STEP_SHORT = Perturbation(
    "lower problem one step short",
    "Config(unroll_steps=T - 1) for T: the lower problem's unrolled steps off by one",
    field_variant("betty-darts", inner_steps=lambda e: max(e.inner_steps - 1, 1)),
)
NEUMANN_ALPHA_DOUBLED = Perturbation(
    "neumann_alpha doubled",
    "Config(neumann_alpha=2 lambda)",
    field_variant("betty-neumann", neumann_step_size=lambda e: 2 * e.neumann_step_size),
)
NEUMANN_ONE_TERM_SHORT = Perturbation(
    "neumann_iterations = N - 2",
    "N - 1 terms for N (the K + 1 terms of approx_inverse_hvp invite the off-by-one)",
    field_variant("betty-neumann", neumann_terms=lambda e: max(e.neumann_terms - 1, 1)),
)
LOWER_STEP_DOUBLED = Perturbation(
    "lower SGD lr doubled",
    "SGD(lr=2 beta) for the lower problem",
    field_variant("betty-darts", inner_step_size=lambda e: 2 * e.inner_step_size),
)
