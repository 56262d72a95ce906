"""What a registry entry says about an estimator or algorithm (shared by the paper modules)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from typing import Literal

ALL_KINDS = frozenset({"bilevel", "minimax", "compositional"})


def class_defaults(cls: type, fixed: tuple[str, ...] = ()) -> dict[str, Any]:
    """The defaults of a dataclass's init fields (those with a plain default), less ``fixed``;
    none for a class that is not a dataclass (not an estimator: the registry refuses it)."""
    if not dataclasses.is_dataclass(cls):
        return {}
    return {
        f.name: f.default
        for f in dataclasses.fields(cls)
        if f.init and f.default is not dataclasses.MISSING and f.name not in fixed
    }


def field_defaults(cls: type, *names: str, **renamed: str) -> dict[str, Any]:
    """The defaults of some of a dataclass's fields, for an entry whose ``make`` passes its
    keywords on to a part (a solver, the maps): ``names`` keep their names, ``renamed`` maps a
    field to the entry's keyword (``field_defaults(StochasticGradientPush,
    step_size="inner_step_size")``)."""
    defaults = class_defaults(cls)
    wanted = {**{name: name for name in names}, **renamed}
    missing = sorted(set(wanted) - set(defaults))
    if missing:
        raise TypeError(f"{cls.__name__} has no field(s) {missing} with a default")
    return {keyword: defaults[field] for field, keyword in wanted.items()}


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
            in docs/glossary.md), derived, not given: ``cls``'s dataclass fields (the defaults'
            one home) less ``fixed``, with ``settings`` on top.
        settings: the variant's values where it differs from the class, and the keywords of a
            ``make`` that assembles parts (e.g. ``inner_steps`` into a solver object) with their
            defaults (read from the part's fields with :func:`field_defaults` where it has them).
        fixed: fields the variant's ``make`` sets itself (or leaves at the class default, e.g.
            fields its variant does not use) and a caller cannot override.
        enrolled_claims: ids of claims that do not name this entry but must check it too (a
            variant enrolled in the claims of the estimator it varies). The claims that are
            about it name it in their ``estimators``: each link is written once, on one side
            (the claims' catalogue, :func:`theory_checks.registry.claims_of`, joins the two).
        no_claims_reason: required when no claim checks the entry.
        closed_form_only: needs a closed-form problem (exact answers) to run.
        role: "estimator" (returns a hypergradient at x) or "algorithm" (an outer loop).
    """

    name: str
    cls: type
    paper: str
    reference: str
    supports: frozenset[str]
    make: Callable[..., Any]
    defaults: dict[str, Any] = dataclasses.field(init=False)
    enrolled_claims: tuple[str, ...] = ()
    no_claims_reason: str = ""
    closed_form_only: bool = False
    role: Literal["estimator", "algorithm"] = "estimator"
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    fixed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # derived here (a frozen dataclass sets its own derived field this way), and again in
        # every copy dataclasses.replace makes, so a copy with other settings has its defaults
        defaults = {**class_defaults(self.cls, self.fixed), **self.settings}
        object.__setattr__(self, "defaults", defaults)

    def build(self, **overrides: Any) -> Any:
        """The estimator (or algorithm) at :attr:`defaults` with ``overrides`` on top.

        Raises:
            ValueError: an override that is not one of :attr:`defaults`' parameters.
        """
        unknown = set(overrides) - set(self.defaults)
        if unknown:
            raise ValueError(
                f"estimator {self.name!r} has no parameter(s) {sorted(unknown)}; "
                f"known: {sorted(self.defaults)}"
            )
        return self.make(**{**self.defaults, **overrides})
