"""What a registry entry says about an estimator or algorithm (shared by the paper modules)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

ALL_KINDS = frozenset({"bilevel", "minimax", "compositional"})


def class_defaults(cls: type, fixed: tuple[str, ...] = ()) -> dict[str, Any]:
    """The defaults of a dataclass's init fields (those with a plain default), less ``fixed``."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass: give the entry its defaults")
    return {f.name: f.default for f in dataclasses.fields(cls)
            if f.init and f.default is not dataclasses.MISSING and f.name not in fixed}


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
        defaults: the parameters ``build`` accepts and their defaults (testbed names, glossary
            in README). Left out, they are read from ``cls``'s dataclass fields (the defaults'
            one home) less ``fixed``, with ``settings`` on top; given, they are the builder's own
            keywords (a ``make`` that assembles parts, e.g. ``inner_steps`` into a solver).
        settings: the variant's values where it differs from the class (with derived defaults).
        fixed: fields the variant's ``make`` sets itself and a caller cannot override.
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
    defaults: dict[str, Any] = None  # type: ignore[assignment]  # derived in __post_init__
    claims: tuple[str, ...] = ()
    no_claims_reason: str = ""
    closed_form_only: bool = False
    role: Literal["estimator", "algorithm"] = "estimator"
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    fixed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.defaults is None:
            object.__setattr__(self, "defaults",
                               {**class_defaults(self.cls, self.fixed), **self.settings})
        elif self.settings or self.fixed:
            raise ValueError(f"{self.name}: give either defaults or settings/fixed, not both")

    def build(self, **overrides: Any) -> Any:
        unknown = set(overrides) - set(self.defaults)
        if unknown:
            raise ValueError(
                f"estimator {self.name!r} has no parameter(s) {sorted(unknown)}; "
                f"known: {sorted(self.defaults)}"
            )
        return self.make(**{**self.defaults, **overrides})
