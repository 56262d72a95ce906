"""Builders of deliberately wrong estimators from the registry's own builds.

A claim's :class:`theory_checks.claim.Perturbation` (the smallest bug that matters for a claim
expected to hold) is a subclass of the real estimator, or a changed field, with one realistic
mistake: the wrong classes live in the result module that uses them, or in a paper's
``perturbations.py`` when several results do. These functions turn the registry's build of an
entry into such a wrong estimator (:func:`recast`, :func:`registry_variant`,
:func:`part_variant`, :func:`field_variant`); ``testbed check`` runs the perturbations and
records whether the check caught them (the check's power), ``theory_checks/test_claims.py``
asserts it, and the mutants of ``testbed mutate`` (:mod:`theory_checks.mutation`, each paper's
``mutants.py``) are built with the same functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from testbed.registry import get_estimator


def recast(obj: Any, cls: type, **fixed: Any) -> Any:
    """``obj``'s dataclass fields as an instance of ``cls`` (typically a subclass of
    ``type(obj)`` with one deliberate mistake), with ``fixed`` overriding some of them."""
    return cls(**{**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}, **fixed})


def registry_variant(name: str, cls: type, **fixed: Any) -> Callable[..., Any]:
    """Builder of registry entry ``name`` (with the keyword parameters a check passes) recast as
    ``cls`` (:func:`recast`)."""
    def make(**kw: Any) -> Any:
        return recast(get_estimator(name).build(**kw), cls, **fixed)

    return make


def part_variant(name: str, field: str, cls: type, **fixed: Any) -> Callable[..., Any]:
    """Builder of registry entry ``name`` whose part ``field`` (a solver, a strategy, the maps)
    is recast as ``cls`` (:func:`recast`); an entry whose part is not an instance of ``cls``'s
    parent (e.g. an exact inner solution where the bug is in gradient descent) is left as
    built: the bug lives only where the part runs."""
    def make(**kw: Any) -> Any:
        built = get_estimator(name).build(**kw)
        part = getattr(built, field)
        if not isinstance(part, cls.__mro__[1]):
            return built
        return dataclasses.replace(built, **{field: recast(part, cls, **fixed)})

    return make


def field_variant(name: str, **change: Callable[[Any], Any]) -> Callable[..., Any]:
    """Builder of registry entry ``name`` with some fields changed: each keyword is a field and
    a rule from the built estimator to its wrong value (``neumann_terms=lambda e:
    e.neumann_terms - 1``), the size of bug a translation layer makes in a library's call (the
    adapters of ``integrations/`` plant theirs this way)."""
    def make(**kw: Any) -> Any:
        estimator = get_estimator(name).build(**kw)
        return dataclasses.replace(estimator, **{field: rule(estimator)
                                                 for field, rule in change.items()})

    return make
