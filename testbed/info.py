"""What a registry entry says about an estimator or algorithm (shared by the paper modules)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

ALL_KINDS = frozenset({"bilevel", "minimax", "compositional"})


@dataclasses.dataclass(frozen=True)
class EstimatorInfo:
    """Metadata of one registered estimator variant.

    Attributes:
        name: lower-case identifier (also the pytest id and the report label).
        cls: the estimator class.
        paper: short paper name ("Classical", "FedNest", "AggITD", "FedMSA", "HGP").
        reference: where the estimator is defined (author year, algorithm / equation).
        supports: problem kinds the estimator handles.
        make: builds the estimator from keyword parameters (the registry's defaults merged with
            the caller's overrides).
        defaults: default parameters, using the testbed's explicit names (glossary in README).
        claims: ids of the claims this estimator must satisfy.
        no_claims_reason: required when ``claims`` is empty.
        closed_form_only: needs a closed-form problem (exact answers) to run.
        role: "estimator" (returns a hypergradient at x) or "algorithm" (an outer loop).
    """

    name: str
    cls: type
    paper: str
    reference: str
    supports: frozenset[str]
    make: Callable[..., Any]
    defaults: dict[str, Any]
    claims: tuple[str, ...] = ()
    no_claims_reason: str = ""
    closed_form_only: bool = False
    role: Literal["estimator", "algorithm"] = "estimator"

    def build(self, **overrides: Any) -> Any:
        unknown = set(overrides) - set(self.defaults)
        if unknown:
            raise ValueError(
                f"estimator {self.name!r} has no parameter(s) {sorted(unknown)}; "
                f"known: {sorted(self.defaults)}"
            )
        return self.make(**{**self.defaults, **overrides})
