"""TorchOpt's estimators as testbed registry entries (entry point group ``testbed.estimators``).

Each entry names the classical claims it must meet (``enrolled_claims``); the claims pass their
own parameters (``cg_iterations = dim_y``, ``neumann_terms = N`` with ``neumann_step_size =
1/L``, ``inner_steps = T`` with ``inner_step_size = 1/L``), which the adapter maps to TorchOpt's
arguments (``testbed_torchopt.adapter``). The defaults are what ``testbed verify`` uses where a
claim passes none (the finite-difference claim): the exact inner solution and 10 CG iterations
(more than the classical strategies' largest ``dim_y``, 8).
"""

from __future__ import annotations

import functools
from importlib.metadata import version
from typing import Any

from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo
from testbed_torchopt.adapter import TorchoptImplicit
from testbed_torchopt.adapter import TorchoptUnrolled

LIBRARY = f"torchopt {version('torchopt')}"
CG = ("classical.cg.exact_after_dim_y", "classical.exact.finite_differences")
FD = ("classical.exact.finite_differences",)
NEUMANN = (
    "classical.neumann.error_identity",
    "classical.neumann.error_bound",
    "classical.neumann.decay_rate",
)
ITD = ("classical.itd.error_identity", "classical.itd.error_bound", "classical.gd.linear_rate")
# the fields an implicit entry does not use (fixed at the class defaults) or fixes itself
_CG_UNUSED = ("solver", "leaves", "neumann_terms", "neumann_step_size")
_SERIES_UNUSED = ("solver", "leaves", "cg_iterations", "rtol")


def _implicit(
    name: str,
    solver: str,
    call: str,
    claims: tuple[str, ...],
    leaves: int = 1,
    fixed: tuple[str, ...] = _CG_UNUSED,
) -> EstimatorInfo:
    def make(**kw: Any) -> TorchoptImplicit:
        return TorchoptImplicit(solver=solver, leaves=leaves, **kw)  # type: ignore[arg-type]

    where = "y as one vector" if leaves == 1 else f"y handed over as {leaves} tensors"
    return EstimatorInfo(
        name=name,
        cls=TorchoptImplicit,
        paper="torchopt",
        reference=f"{LIBRARY}: torchopt.diff.implicit.custom_root with {call} ({where})",
        supports=ALL_KINDS,
        make=make,
        fixed=fixed,
        enrolled_claims=claims,
    )


ENTRIES: list[EstimatorInfo] = [
    _implicit("torchopt-implicit-cg", "cg", "linear_solve.solve_cg(maxiter, rtol=0)", CG),
    _implicit(
        "torchopt-implicit-cg-two-tensors",
        "cg",
        "linear_solve.solve_cg(maxiter, rtol=0)",
        CG,
        leaves=2,
    ),
    # CG on the normal equations: its own exactness claim, at the round-off of H^T H
    # (testbed_torchopt/claims.toml: torchopt.normal_cg.exact_after_dim_y names this entry)
    _implicit(
        "torchopt-implicit-normal-cg",
        "normal_cg",
        "linear_solve.solve_normal_cg(maxiter, rtol=0)",
        FD,
    ),
    _implicit(
        "torchopt-implicit-inv",
        "inv",
        "linear_solve.solve_inv()",
        FD,
        fixed=_CG_UNUSED + ("cg_iterations", "rtol"),
    ),
    _implicit(
        "torchopt-implicit-inv-two-tensors",
        "inv",
        "linear_solve.solve_inv()",
        FD,
        leaves=2,
        fixed=_CG_UNUSED + ("cg_iterations", "rtol"),
    ),
    _implicit(
        "torchopt-implicit-neumann",
        "neumann",
        "linear_solve.solve_inv(ns=True, maxiter=N - 1, alpha=lambda)",
        NEUMANN,
        fixed=_SERIES_UNUSED,
    ),
    EstimatorInfo(
        name="torchopt-unrolled",
        cls=TorchoptUnrolled,
        paper="torchopt",
        reference=f"{LIBRARY}: unrolled meta-gradient through torchopt.MetaSGD (ITD)",
        supports=ALL_KINDS,
        make=functools.partial(TorchoptUnrolled),
        enrolled_claims=ITD,
    ),
]
