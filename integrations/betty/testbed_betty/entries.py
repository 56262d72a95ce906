"""Betty's hypergradient methods as testbed registry entries (entry point ``testbed.estimators``).

The claims pass their parameters (``neumann_terms`` N with ``neumann_step_size = 1/L``,
``cg_iterations = dim_y``, ``inner_steps``); the defaults serve the finite-difference claim:
the exact inner solution (with betty's one lower step) and 10 CG iterations.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo
from testbed_betty.adapter import BettyHypergradient

LIBRARY = f"betty-ml {version('betty-ml')}"
_UNUSED = {
    "neumann": ("method", "cg_iterations", "darts_alpha"),
    "cg": ("method", "neumann_terms", "neumann_step_size", "darts_alpha"),
    "darts": ("method", "neumann_terms", "neumann_step_size", "cg_iterations"),
}


def _entry(method: str, call: str, claims: tuple[str, ...]) -> EstimatorInfo:
    def make(**kw: Any) -> BettyHypergradient:
        return BettyHypergradient(method=method, **kw)  # type: ignore[arg-type]

    return EstimatorInfo(
        name=f"betty-{method}",
        cls=BettyHypergradient,
        paper="betty",
        reference=f"{LIBRARY}: ImplicitProblem + Engine, lower Config({call})",
        supports=ALL_KINDS,
        make=make,
        fixed=_UNUSED[method],
        enrolled_claims=claims,
    )


ENTRIES: list[EstimatorInfo] = [
    _entry(
        "neumann",
        'type="neumann", neumann_iterations=N - 1, neumann_alpha=lambda',
        (
            "classical.neumann.error_identity",
            "classical.neumann.error_bound",
            "classical.neumann.decay_rate",
        ),
    ),
    _entry(
        "cg",
        'type="cg", cg_iterations, cg_alpha=1',
        ("classical.cg.exact_after_dim_y", "classical.exact.finite_differences"),
    ),
    # its claim names it: betty.darts.one_term_identity (testbed_betty/claims.toml)
    _entry("darts", 'type="darts", darts_alpha', ()),
]
