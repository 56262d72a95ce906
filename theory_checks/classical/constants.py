"""The classical results' constants and conditions (Grazzi et al. 2020; the AID/ITD analyses of
a single inner problem): the inner objective ``g = mean_i g_i`` is ``mu``-strongly convex and
``L``-smooth in ``y`` (``mu, L`` the extreme eigenvalues of ``H = grad^2_y g``), and the Neumann
step ``lambda`` and the gradient step ``beta`` are at most ``1/L``. The classical checks take
``mu``, ``L`` and their steps from here (``problem.constants()``: the mean inner Hessian's
spectrum), and the claims declare the conditions as hypotheses on a case
(:mod:`theory_checks.hypotheses`)."""

from __future__ import annotations

from typing import Any

from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import at_most

REF = "Grazzi et al. 2020, Sec. 2 (assumptions of Thms 2.1-2.2)"


def smoothness(problem: Any) -> float:
    """``L = lambda_max(grad^2_y g)``."""
    return float(problem.constants().L)


def strong_convexity(problem: Any) -> float:
    """``mu = lambda_min(grad^2_y g)``."""
    return float(problem.constants().mu)


def step(case: Any, name: str) -> float:
    """The step ``name`` (``neumann_step_size`` or ``inner_step_size``) of a case: its own when
    it sets one, else ``1/L``, the step every classical check takes."""
    value = case.params.get(name)
    return float(value) if value else 1.0 / smoothness(case.problem)


STRONGLY_CONVEX = Hypothesis(
    "strong convexity",
    "mu = lambda_min(grad^2_y g) > 0 (margin mu / L)",
    REF,
    lambda case: strong_convexity(case.problem) / smoothness(case.problem),
)

NEUMANN_STEP_CAP = Hypothesis(
    "Neumann step",
    "lambda <= 1/L (so ||I - lambda H|| = 1 - lambda mu < 1)",
    REF,
    lambda case: at_most(step(case, "neumann_step_size"), 1.0 / smoothness(case.problem)),
)

GD_STEP_CAP = Hypothesis(
    "gradient step",
    "beta <= 1/L (so ||I - beta H|| = 1 - beta mu < 1)",
    REF,
    lambda case: at_most(step(case, "inner_step_size"), 1.0 / smoothness(case.problem)),
)

__all__ = [
    "GD_STEP_CAP",
    "NEUMANN_STEP_CAP",
    "REF",
    "STRONGLY_CONVEX",
    "smoothness",
    "step",
    "strong_convexity",
]
