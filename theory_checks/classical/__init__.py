"""Claims about the classical single-machine estimators (exact, AID with Neumann or CG, ITD) and
gradient descent: the statements in :file:`claims.toml`, the checks in
:mod:`theory_checks.classical.checks`, the perturbations in
:mod:`theory_checks.classical.perturbations`."""

from __future__ import annotations

from theory_checks.classical.checks import CLAIMS

__all__ = ["CLAIMS"]
