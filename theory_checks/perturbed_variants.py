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
from collections.abc import Iterable
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
    is recast as ``cls`` (:func:`recast`); an entry whose part's class is not one ``cls``
    derives from (e.g. an exact inner solution where the bug is in gradient descent, LFedInn
    where it is in FedInn) is left as built: the bug lives only where the part runs."""

    def make(**kw: Any) -> Any:
        built = get_estimator(name).build(**kw)
        part = getattr(built, field)
        if not issubclass(cls, type(part)):
            return built
        return dataclasses.replace(built, **{field: recast(part, cls, **fixed)})

    return make


def part_variants(
    entries: Iterable[str], field: str, cls: type, **fixed: Any
) -> dict[str, Callable[..., Any]]:
    """A bug in a part that ``entries`` share (a catalogue mutant's builds): each entry's builder
    with its part ``field`` recast as ``cls`` (:func:`part_variant`)."""
    return {entry: part_variant(entry, field, cls, **fixed) for entry in entries}


def field_variant(name: str, **change: Callable[[Any], Any]) -> Callable[..., Any]:
    """Builder of registry entry ``name`` with some fields changed: each keyword is a field and
    a rule from the built estimator to its wrong value (``neumann_terms=lambda e:
    e.neumann_terms - 1``), the size of bug a translation layer makes in a library's call (the
    adapters of ``integrations/`` plant theirs this way)."""

    def make(**kw: Any) -> Any:
        estimator = get_estimator(name).build(**kw)
        return dataclasses.replace(
            estimator, **{field: rule(estimator) for field, rule in change.items()}
        )

    return make


# --------------------------------------------------------------------------- parameters

#: Methods through which an estimator reports its parameters rather than runs with them (its
#: communication formulas; the steps it resolves from the problem): a pinned part answers these
#: from the recorded (true) value when a check asks, so a count or step that is reported but not
#: run (the realistic bug) is visible to the claims that compare the report with the run. The
#: part's own methods, running on the twin, resolve the perturbed value.
REPORTING_METHODS = frozenset(
    {
        "rounds_formula",
        "rounds_per_iteration",
        "rounds_per_call",
        "rounds_per_round",
        "steps",
        "step_sizes",
        "resolve_steps",
        "step_size",
        "gamma",
    }
)

#: How a part resolves a ``None`` parameter at run time: ``resolve(part, problem)``.
Resolver = Callable[[Any, Any], Any]


def apply_rule(rule: Callable[[Any], Any], value: Any) -> Any:
    """``rule`` of a value, entry-wise for a per-client tuple (``local_steps = (tau_1, ...)``,
    a per-level ``inner_step_size``)."""
    if isinstance(value, (tuple, list)):
        return type(value)(rule(v) for v in value)
    return rule(value)


def problem_in(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The problem a method is called with: an argument that is one (it has ``n_clients`` and
    ``initial_point``), or that holds one (a federated context, counted oracles)."""
    for value in (*args, *kwargs.values()):
        if hasattr(value, "n_clients") and hasattr(value, "initial_point"):
            return value
        held = getattr(value, "problem", None)
        if held is not None and hasattr(held, "n_clients"):
            return held
    return None


def _pinned_class(
    cls: type,
    field: str,
    rule: Callable[[Any], Any],
    resolvers: Callable[[type, str], Resolver | None],
) -> type:
    """A subclass of dataclass ``cls`` whose fields keep what was recorded (the true
    parameter) and whose methods run on a twin with ``field`` replaced by ``rule`` of its value
    (of the value ``resolve`` gives for ``None``, from the problem the method is called with).
    Only :data:`REPORTING_METHODS` and dunder or private names are answered by the recorded
    object itself; a property that builds a part carrying the same field (FBO-AggITD's
    ``estimator``) gives that part pinned the same way."""
    fields = {f.name for f in dataclasses.fields(cls)}
    resolve = resolvers(cls, field)

    def twin(self: Any, problem: Any) -> Any:
        value = object.__getattribute__(self, field)
        if value is None:
            if resolve is None or problem is None:
                return recast(self, cls)  # nothing to perturb: the parameter is not used here
            value = resolve(recast(self, cls), problem)
        try:
            return recast(self, cls, **{field: apply_rule(rule, value)})
        except ValueError:  # the perturbed value is invalid here (a count below its minimum):
            return recast(self, cls)  # the bug cannot exist in this case, which runs as built

    def __getattribute__(self: Any, attr: str) -> Any:  # noqa: N807 (the proxy's hook)
        value = object.__getattribute__(self, attr)
        if attr.startswith("_") or attr in fields or attr in REPORTING_METHODS:
            return value
        if isinstance(getattr(cls, attr, None), property):  # a part built from the fields
            if dataclasses.is_dataclass(value) and field in {
                f.name for f in dataclasses.fields(value)
            }:
                return pin_at(value, (field,), rule, resolvers)
            return getattr(twin(self, None), attr)
        if not callable(value) or not hasattr(value, "__self__"):
            return value

        def run_on_twin(*args: Any, **kwargs: Any) -> Any:
            return getattr(twin(self, problem_in(args, kwargs)), attr)(*args, **kwargs)

        return run_on_twin

    return type(
        f"{cls.__name__}[{field} perturbed]",
        (cls,),
        {
            "__getattribute__": __getattribute__,
            "__module__": cls.__module__,
            "__doc__": f"{cls.__name__} recording its {field} but running with it "
            "perturbed (:func:`parameter_variant`).",
        },
    )


def parameter_paths(built: Any, probe: Any) -> list[tuple[str, ...]]:
    """The field paths where two builds of one entry differ (a keyword's place in the built
    object: ``("inner", "step_size")`` for AID's ``inner_step_size``); a differing field whose
    values are not both dataclasses of one type is a leaf."""
    paths: list[tuple[str, ...]] = []
    for f in dataclasses.fields(built):
        a, b = getattr(built, f.name), getattr(probe, f.name)
        if a is b:
            continue
        if dataclasses.is_dataclass(a) and not isinstance(a, type) and type(a) is type(b):
            paths += [(f.name, *rest) for rest in parameter_paths(a, b)]
        elif not _same(a, b):
            paths.append((f.name,))
    return paths


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (RuntimeError, TypeError, ValueError):  # tensors: compare by identity only
        return False


def pin_at(
    obj: Any,
    path: tuple[str, ...],
    rule: Callable[[Any], Any],
    resolvers: Callable[[type, str], Resolver | None],
) -> Any:
    """``obj`` with the part at ``path[:-1]`` recorded as built and run with field
    ``path[-1]`` perturbed by ``rule`` (:func:`_pinned_class`)."""
    head, *rest = path
    if head not in {f.name for f in dataclasses.fields(obj)}:
        return obj  # this build has no such part (an exact solver where a count would go)
    if rest:
        return dataclasses.replace(
            obj, **{head: pin_at(getattr(obj, head), tuple(rest), rule, resolvers)}
        )
    cls = type(obj)
    pinned = _pinned_class(cls, head, rule, resolvers)
    return pinned(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init})


def parameter_variant(
    name: str,
    keyword: str,
    rule: Callable[[Any], Any],
    probes: tuple[Any, Any],
    resolvers: Callable[[type, str], Resolver | None],
) -> Callable[..., Any]:
    """Builder of registry entry ``name`` that records keyword ``keyword`` as the check passes
    it but runs with ``rule`` of it: the check computes its bound or reference with the true
    value, the estimator works with the wrong one (a parameter read in one place and run from
    another). The keyword's place in the built object is found by building the entry with two
    values and comparing (:func:`parameter_paths`): the true value and the perturbed one, or
    for ``None`` the two ``probes``; a ``None`` value (a step resolved
    from the problem) is resolved by ``resolvers(cls, field)`` at run time, and where there is
    none the part runs as built (the parameter does not exist there: an exact inner solution
    has no step count)."""

    def make(**kw: Any) -> Any:
        info = get_estimator(name)
        built = info.build(**kw)
        value = info.defaults[keyword] if keyword not in kw else kw[keyword]
        try:
            a, b = (
                (info.build(**{**kw, keyword: probes[0]}), info.build(**{**kw, keyword: probes[1]}))
                if value is None
                else (built, info.build(**{**kw, keyword: apply_rule(rule, value)}))
            )
        except ValueError:  # the perturbed value is invalid for this build: it runs as built
            return built
        for path in parameter_paths(a, b):
            built = pin_at(built, path, rule, resolvers)
        return built

    return make
