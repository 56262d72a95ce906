"""Claims files: a plugin's claims in a TOML file, the code that checks them named by
reference.

The testbed's own claims are Python, each declared in the module of its paper's result
(``theory_checks/hgp/theorem2.py``) beside its cases, check, perturbation and positive control,
referring to them by import. A plugin that checks its estimators against claims of its own (the
packages of ``integrations/``) may instead keep them in a claims file, which holds what a reader
checks (the statement, where it stands in the paper, what has been established, the notes
behind each tolerance) and names the code by ``"package.module:name"``:

.. code-block:: toml

    paper = "Classical"                     # the default of every claim below

    [[claim]]
    id = "mylib.cg.exact_after_dim_y"
    reference = "Hestenes & Stiefel 1952 (CG is exact after dim_y steps)"
    kind = "exact_identity"
    about = "stated result"                 # or "proof step or formula", "informal sentence",
                                            # "table number" (results_format.verdicts.ABOUTS)
    statement = "the CG hypergradient after dim_y steps equals the exact one to 1e-10"
    estimators = ["mylib-cg"]
    strategy = {call = "theory_checks.classical.common:closed_form_cases"}
    check = "mylib.checks:check_cg_exact"
    perturbation = "mylib.checks:SHORT_CG"
    max_examples = {fast = 2, thorough = 8}     # per profile; one left out: the profile's own

    [claim.positive_control]                # a saved case: a problem spec and parameters
    problem = {family = "QuadraticBilevel.random", n_clients = 1, ...}
    params = {point_seed = 0}

``hypotheses`` lists the paper's assumptions and conditions as references to
:class:`~theory_checks.hypotheses.Hypothesis` objects (or calls of builders that return one), and
``readings`` the reasonable readings of the statement as tables:

.. code-block:: toml

    hypotheses = ["theory_checks.classical.constants:STRONGLY_CONVEX"]

    [[claim.readings]]
    name = "at most (a budget)"
    statement = "rounds per iteration <= 2T + N + 3"
    params = {reading = "at_most"}

A perturbation may be a reference or an inline table (``name``, ``description``, ``build`` as a
reference, optional ``max_examples``, ``slow``, ``profile``); ``examples`` is a list of saved
cases or references. Every field of :class:`~theory_checks.claim.Claim` may be given; unknown
keys, unresolvable references and malformed values are errors naming the file and the claim.
"""

from __future__ import annotations

import dataclasses
import importlib
import tomllib
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from theory_checks.claim import Claim
from theory_checks.claim import PerProfile
from theory_checks.claim import Perturbation
from theory_checks.claim import known_case
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import Reading


class ClaimFileError(ValueError):
    """A claims file that cannot be read into claims: says which file, claim and key."""


_CLAIM_FIELDS = {f.name for f in dataclasses.fields(Claim)}
_REFERENCE_FIELDS = ("strategy", "check", "bound")
_TUPLE_FIELDS = ("estimators", "undecided_on", "power_from")
_PERTURBATION_FIELDS = {f.name for f in dataclasses.fields(Perturbation)}
_READING_FIELDS = {f.name for f in dataclasses.fields(Reading)}


def resolve(reference: str) -> Any:
    """The object named by ``"package.module:name"`` (``name`` may be dotted: ``Class.attr``)."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise ClaimFileError(f"reference {reference!r} is not of the form 'package.module:name'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise ClaimFileError(
            f"reference {reference!r}: cannot import {module_name}: {error}"
        ) from error
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ClaimFileError(f"reference {reference!r}: {module_name} has no {attribute}")
        target = getattr(target, part)
    return target


def _as_tuples(value: Any) -> Any:
    """TOML arrays as the tuples the code's literals were (``kappa = [1.0, 30.0]``)."""
    if isinstance(value, list):
        return tuple(_as_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_tuples(v) for k, v in value.items()}
    return value


def code(value: Any) -> Any:
    """The object a field names: ``"package.module:name"``, or a call of one with literal
    arguments, ``{call = "package.module:name", args = [...], keyword = value, ...}`` (arrays
    passed as tuples)."""
    if isinstance(value, str):
        return resolve(value)
    if isinstance(value, Mapping) and isinstance(value.get("call"), str):
        arguments = {k: _as_tuples(v) for k, v in value.items() if k not in ("call", "args")}
        return resolve(value["call"])(*_as_tuples(value.get("args", [])), **arguments)
    raise ClaimFileError(
        f"expected a reference 'package.module:name' or a call table "
        f"{{call = ..., ...}}, got {value!r}"
    )


def _saved_case(value: Any) -> Callable[..., Any]:
    """A reference to a case builder, or a saved case ``{problem = {...}, params = {...}}``."""
    if isinstance(value, str) or "call" in value:
        return code(value)
    if isinstance(value, Mapping) and set(value) == {"problem", "params"}:
        return known_case(value["problem"], _as_tuples(value["params"]))
    raise ClaimFileError(
        f"a case is a reference or a table with 'problem' and 'params', got {value!r}"
    )


def _perturbation(value: Any) -> Perturbation:
    if isinstance(value, str) or "call" in value:
        found = code(value)
        if not isinstance(found, Perturbation):
            raise ClaimFileError(f"{value!r} is a {type(found).__name__}, not a Perturbation")
        return found
    if not isinstance(value, Mapping):
        raise ClaimFileError(f"a perturbation is a reference or a table, got {value!r}")
    unknown = set(value) - _PERTURBATION_FIELDS
    if unknown:
        raise ClaimFileError(f"perturbation: unknown key(s) {sorted(unknown)}")
    return Perturbation(**{**value, "build": code(value["build"])})


def _hypothesis(value: Any) -> Hypothesis:
    found = code(value)
    if not isinstance(found, Hypothesis):
        raise ClaimFileError(f"hypotheses: {value!r} is a {type(found).__name__}, not a Hypothesis")
    return found


def _reading(value: Any) -> Reading:
    if not isinstance(value, Mapping):
        raise ClaimFileError(f"a reading is a table (name, statement, params), got {value!r}")
    unknown = set(value) - _READING_FIELDS
    missing = {"name", "statement"} - set(value)
    if unknown or missing:
        raise ClaimFileError(
            f"reading: unknown key(s) {sorted(unknown)}, missing {sorted(missing)}"
        )
    params = value.get("params", {})
    if not isinstance(params, Mapping):
        raise ClaimFileError(f"reading {value['name']!r}: params must be a table")
    return Reading(str(value["name"]), str(value["statement"]), _as_tuples(dict(params)))


def _field(name: str, value: Any) -> Any:
    """One claim field's value as :class:`Claim` takes it."""
    if name in _REFERENCE_FIELDS:
        return code(value)
    if name in _TUPLE_FIELDS:
        return tuple(value)
    if name == "max_examples" and isinstance(value, Mapping):
        return PerProfile(value.get("fast"), value.get("thorough"))
    if name == "examples":
        return tuple(_saved_case(v) for v in value)
    if name == "positive_control":
        return _saved_case(value)
    if name == "perturbation":
        return _perturbation(value)
    if name in ("hypotheses", "readings"):
        if not isinstance(value, list):
            raise ClaimFileError(f"{name} must be a list, got {value!r}")
        return tuple((_hypothesis if name == "hypotheses" else _reading)(v) for v in value)
    return value


def claim_from_table(table: Mapping[str, Any], defaults: Mapping[str, Any]) -> Claim:
    """A :class:`Claim` from one ``[[claim]]`` table, with the file's defaults (``paper``)."""
    claim_id = table.get("id", "<no id>")
    unknown = set(table) - _CLAIM_FIELDS
    if unknown:
        raise ClaimFileError(
            f"claim {claim_id}: unknown key(s) {sorted(unknown)}; known: {sorted(_CLAIM_FIELDS)}"
        )
    try:
        fields = {name: _field(name, value) for name, value in {**defaults, **table}.items()}
        return Claim(**fields)
    except (ClaimFileError, KeyError, TypeError, ValueError) as error:
        raise ClaimFileError(f"claim {claim_id}: {error}") from error


def load_claims(path: Path) -> tuple[Claim, ...]:
    """The claims of one claims file, in file order."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ClaimFileError(f"{path}: {error}") from error
    tables = data.pop("claim", [])
    unknown = set(data) - {"paper"}
    if unknown:
        raise ClaimFileError(f"{path}: unknown top-level key(s) {sorted(unknown)}")
    try:
        return tuple(claim_from_table(table, data) for table in tables)
    except ClaimFileError as error:
        raise ClaimFileError(f"{path}: {error}") from error


__all__ = ["ClaimFileError", "claim_from_table", "code", "load_claims", "resolve"]
