"""One place per paper result: each claim, with its cases, check, perturbation and positive
control, lives in the module named after its result, and nothing refers to it by a string.

The layout (docs/design.md, "One place per paper result"): a paper's folder
``theory_checks/<paper>/`` holds its shared modules (:data:`SHARED_MODULES`: the paper's
constants and hypotheses, its shared helpers, the wrong estimators that several results'
perturbations or the mutants build, the mutants) and one module per result, named after the
subject of its claims' ids (``hgp.theorem2.corrected`` lives in
``theory_checks/hgp/theorem2.py``; a comparison's id has no subject,
``comparison.aggitd_table2_factor`` lives in ``theory_checks/comparison/aggitd_table2_factor.py``).
A result module declares ``CLAIMS``. A result whose module would be too long to read (over 600
lines) is a package of the same name instead (``theory_checks/fednest/lemma22/``): its
``__init__`` states the result and declares ``CLAIMS``, its submodules hold the parts by job
(``cases.py``, ``checks.py``, ``perturbations.py``), and the package is the result's one place.

These tests read the modules themselves (attributes and ``ast``), so a claim defined elsewhere,
a check or perturbation left in a shared module that only one result uses, a claims file, or a
claim id written as a string where the claim could be imported fails here with its place.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from theory_checks.claim import Claim
from theory_checks.profiles import PerProfile
from theory_checks.registry import BUILTIN_CLAIMS
from theory_checks.registry import defined_in

PACKAGE = Path(__file__).resolve().parents[1] / "theory_checks"
PAPERS = ("classical", "fednest", "aggitd", "fedmsa", "hgp", "comparison")
# A paper's shared modules: what several of its results use (and the mutants, which concern
# estimators rather than results). Anything else in a paper's folder is a result module.
SHARED_MODULES = {
    "__init__",
    "constants",
    "common",
    "moments",
    "k_rate",
    "perturbations",
    "mutants",
    "wrong_parts",  # the wrong estimator parts the mutants plant (fednest)
    # the claim constructors per kind of claim (fedmsa: not in common.py, which constants.py
    # imports, while the constructors need the constants' hypotheses)
    "claim_makers",
}
# Modules of a paper's folder that are neither shared helpers nor results, with the reason.
OTHER_MODULES = {
    "comparison": {
        # the rounds-to-target table (testbed run's comparison runs and the report's table),
        # not a claim: no claim's check runs it
        "runs",
        "table",
        # the stacked evaluation of a look's problems (every undecided seed of a calibration
        # block), which common.py's check runs for all three comparisons: a helper of several
        # results, beside common.py because common.py would otherwise pass 600 lines
        "batched",
        # the target, R and the rule that stops a run, which runs.py (the tuning, the
        # comparisons), batched.py and the table use: beside runs.py, which would otherwise
        # pass 600 lines
        "reaching",
    },
}


def result_of(claim_id: str) -> str:
    """The result module's name of a claim id: its subject (``<paper>.<subject>.<name>``), or
    the name of a comparison (``comparison.<name>``)."""
    parts = claim_id.split(".")
    return parts[1]


def _modules(paper: str) -> Iterator[tuple[str, types.ModuleType]]:
    """The modules of a paper's folder by name; a result package is listed as one module (its
    ``__init__``), its parts are :func:`_parts`."""
    folder = PACKAGE / paper
    for info in pkgutil.iter_modules([str(folder)]):
        yield info.name, importlib.import_module(f"theory_checks.{paper}.{info.name}")


def _parts(package: types.ModuleType) -> list[types.ModuleType]:
    """The submodules of a result package (none for a result module)."""
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(getattr(package, "__path__", []))
    ]


def _defined_in_result(home: str | None, module: Any) -> bool:
    """Whether ``home`` (an object's ``__module__``) is the result module ``module`` or, for a
    result package, one of its submodules."""
    name = module.__name__
    return home == name or (hasattr(module, "__path__") and str(home).startswith(name + "."))


def _result_modules(paper: str) -> dict[str, types.ModuleType]:
    return {
        name: module
        for name, module in _modules(paper)
        if name not in SHARED_MODULES | OTHER_MODULES.get(paper, set())
    }


def _paper_of(claim: Claim) -> str:
    return claim.id.split(".")[0]


def _uses(results: dict[str, Any]) -> dict[int, set[str]]:
    """Each object a claim of the result modules ``results`` (name -> module) names (check,
    strategy and its per-profile builders, bound, positive control, examples, perturbation), by
    ``id``, with the result modules whose claims name it."""
    used: dict[int, set[str]] = {}
    for name, module in results.items():
        for claim in module.CLAIMS:
            strategies = (
                (claim.strategy.fast, claim.strategy.thorough)
                if isinstance(claim.strategy, PerProfile)
                else (claim.strategy,)
            )
            for thing in (
                claim.check,
                claim.bound,
                claim.positive_control,
                claim.perturbation,
                *strategies,
                *claim.examples,
            ):
                if thing is not None:
                    used.setdefault(id(thing), set()).add(name)
    return used


@pytest.mark.parametrize("paper", PAPERS)
def test_a_paper_folder_holds_shared_modules_and_result_modules_only(paper):
    files = {
        path.name
        for path in (PACKAGE / paper).iterdir()
        if path.is_file() and not path.name.endswith(".pyc")
    }
    folders = {
        path.name
        for path in (PACKAGE / paper).iterdir()
        if path.is_dir() and path.name != "__pycache__"
    }
    not_python = sorted(name for name in files if not name.endswith(".py"))
    assert not not_python, (
        f"theory_checks/{paper} holds {not_python}: claims are Python, "
        "defined in their result's module"
    )
    results = _result_modules(paper)
    assert results, f"theory_checks/{paper} has no result module"
    not_results = sorted(folders - set(results))
    assert not not_results, (
        f"theory_checks/{paper} holds the folders {not_results}: a folder of a paper's folder is "
        "a result package (its __init__ declares the result's CLAIMS)"
    )
    for name in sorted(folders):
        in_package = {p.name for p in (PACKAGE / paper / name).iterdir() if p.is_file()}
        assert all(n.endswith((".py", ".pyc")) for n in in_package), (
            f"theory_checks/{paper}/{name}/ holds files other than Python modules"
        )
        for part in _parts(results[name]):
            assert not getattr(part, "CLAIMS", ()), (
                f"{part.__name__} declares CLAIMS: a result package declares them in its "
                "__init__ only"
            )
            assert len(part.__doc__ or "") >= 100, f"{part.__name__}: its docstring says its job"
    for name, module in results.items():
        claims = getattr(module, "CLAIMS", None)
        assert claims, (
            f"theory_checks/{paper}/{name}.py declares no CLAIMS: a module of a "
            "paper's folder is a result (with its claims) or one of "
            f"{sorted(SHARED_MODULES)}"
        )
        # the result stated as the paper states it, its hypotheses and what is checked: the
        # shortest today (comparison/fedmsa_tenfold_fewer_rounds.py) has 704 characters
        assert len(module.__doc__ or "") >= 300, (
            f"theory_checks/{paper}/{name}.py: its docstring must state the result"
        )


def misplaced_claims(results: dict[str, Any]) -> list[str]:
    """Claims of the result modules ``results`` (name -> module) declared outside the module of
    their result, or twice."""
    placed: dict[str, str] = {}
    problems = []
    for name, module in results.items():
        for claim in module.CLAIMS:
            if result_of(claim.id) != name:
                problems.append(
                    f"{claim.id} is declared in {name}.py; it belongs in {result_of(claim.id)}.py"
                )
            if claim.id in placed:
                problems.append(f"{claim.id} is declared in {placed[claim.id]}.py and {name}.py")
            placed[claim.id] = name
    return problems


@pytest.mark.parametrize("paper", PAPERS)
def test_every_claim_lives_in_the_module_of_its_result(paper):
    package = importlib.import_module(f"theory_checks.{paper}")
    results = _result_modules(paper)
    assert not misplaced_claims(results), "\n".join(misplaced_claims(results))
    for name, module in _modules(paper):
        if name in SHARED_MODULES - {"__init__"}:
            assert not getattr(module, "CLAIMS", ()), (
                f"theory_checks/{paper}/{name}.py is a shared module and declares claims"
            )
    placed = {c.id for module in results.values() for c in module.CLAIMS}
    builtin = {c.id for c in BUILTIN_CLAIMS if _paper_of(c) == paper}
    assert placed == builtin == {c.id for c in package.CLAIMS}


@pytest.mark.parametrize("paper", PAPERS)
def test_testbed_list_names_the_file_of_each_claim(paper):
    """``testbed list --verbose`` prints where each claim is declared: the result's module."""
    packages = {name for name, module in _modules(paper) if hasattr(module, "__path__")}
    for claim in BUILTIN_CLAIMS:
        if _paper_of(claim) == paper:
            result = result_of(claim.id)
            place = f"{result}/" if result in packages else f"{result}.py"
            assert defined_in(claim) == f"theory_checks/{paper}/{place}"


def misplaced_uses(paper: str, results: dict[str, Any], shared: dict[str, Any]) -> list[str]:
    """The checks, perturbations, controls and strategies of the result modules ``results``
    (name -> module; a result package counts with its submodules) that one result uses and
    that are not defined in its module, or that several use and that are not in one of the
    ``shared`` modules of ``paper`` (or the checking machinery)."""
    used = _uses(results)
    misplaced = []
    for name, module in results.items():
        for claim in module.CLAIMS:
            for role, thing in (
                ("check", claim.check),
                ("perturbation", claim.perturbation),
                ("positive control", claim.positive_control),
                ("strategy", claim.strategy),
            ):
                if thing is None or isinstance(thing, PerProfile):
                    continue
                users = used[id(thing)]
                home = getattr(thing, "__module__", None)
                in_module = any(value is thing for value in vars(module).values())
                in_shared = [
                    s
                    for s, m in shared.items()
                    if any(value is thing for value in vars(m).values())
                ]
                if len(users) == 1:
                    defined_here = (
                        _defined_in_result(home, module)
                        if isinstance(thing, types.FunctionType)
                        and thing.__code__.co_name == thing.__name__
                        and "<locals>" not in thing.__qualname__
                        else in_module and not in_shared
                    )
                    if not defined_here:
                        place = f"{name}/" if hasattr(module, "__path__") else f"{name}.py"
                        misplaced.append(
                            f"{claim.id}: its {role} is used by {name} only and "
                            f"is not defined in {paper}/{place}"
                        )
                elif not in_shared and not _core(home):
                    misplaced.append(
                        f"{claim.id}: its {role}, used by {sorted(users)}, belongs "
                        f"in a shared module of {paper} (found in {home})"
                    )
    return misplaced


@pytest.mark.parametrize("paper", PAPERS)
def test_what_one_result_uses_is_defined_in_its_module(paper):
    """A check, case strategy, perturbation or control that one result uses lives in its
    module (or its package); one used by several results lives in the paper's shared modules,
    never in another result's module."""
    shared = {name: module for name, module in _modules(paper) if name in SHARED_MODULES}
    misplaced = misplaced_uses(paper, _result_modules(paper), shared)
    assert not misplaced, "\n".join(misplaced)


def _core(module_name: str | None) -> bool:
    """A module of the checking machinery (theory_checks' own top level), not a paper's."""
    return (
        bool(module_name)
        and module_name.count(".") == 1
        and module_name.startswith("theory_checks.")
    )


def is_claim_constructor(func: ast.expr) -> bool:
    """Whether a call of ``func`` declares a claim or a claim constructor: ``Claim(...)``,
    ``lemma22_claim(...)``, a maker's ``.but(...)``, or a maker built by a function named for
    the claims it makes (``bias_bound_claims(cor1_claim)(...)``)."""
    if isinstance(func, ast.Call):
        func = func.func
    if isinstance(func, ast.Attribute):
        return func.attr == "but"
    name = getattr(func, "id", "")
    return name == "Claim" or name.endswith(("_claim", "_claims"))


def claim_id_strings(source: str, ids: set[str]) -> list[int]:
    """Lines of ``source`` where a claim id of ``ids`` is written as a string other than the
    ``id=``, ``serves=`` or ``power_from=`` of a ``Claim(...)`` or of a claim constructor's call
    (``lemma22_claim(...)``, a :class:`~theory_checks.claim.ClaimMaker`) (a refuted step names
    the result it serves, a loose claim its companions, often declared after it or in another
    result's module; tests/test_claim_about.py and tests/test_claim_evidence.py check each
    resolves)."""
    tree = ast.parse(source)
    declared: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and is_claim_constructor(node.func):
            for k in node.keywords:
                if k.arg in ("id", "serves"):
                    declared.add(id(k.value))
                elif k.arg == "power_from" and isinstance(k.value, ast.Tuple):
                    declared |= {id(e) for e in k.value.elts}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in ids and id(node) not in declared
    ]


def test_claims_are_referred_to_by_import_not_by_string():
    """A claim id appears as a string only where its claim is declared (``Claim(id=...)``):
    ``corrects``, the mutants' ``first`` and every other reference import the claim and use its
    ``.id``, which a rename or a typo breaks at import time rather than at run time."""
    ids = {c.id for c in BUILTIN_CLAIMS}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name.startswith("test_"):
            continue  # the package's own pytest modules name claims as a user would
        for line in claim_id_strings(path.read_text(encoding="utf-8"), ids):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert not found, "claim ids written as strings (import the claim, use .id):\n" + "\n".join(
        found
    )


def test_the_layout_rules_catch_planted_violations():
    """The rules can fail: a claim declared under another result's name, a claim declared twice,
    a claim id written as a string, a check of one result defined in another result's package
    or in a shared module are each reported."""
    results = _result_modules("classical")
    (first, module), (other, _) = list(results.items())[:2]
    stray = module.CLAIMS[0]
    planted = {**results, other: types.SimpleNamespace(CLAIMS=(stray,))}
    problems = misplaced_claims(planted)
    assert any(
        f"{stray.id} is declared in {other}.py; it belongs in {first}.py" in p for p in problems
    )
    assert any(f"{stray.id} is declared in {first}.py and {other}.py" in p for p in problems)
    source = (
        f'X = Claim(id="{stray.id}")\nM = Mutant("m", first=("{stray.id}",))\n'
        f'Y = maker.but(power_from=("{stray.id}",))\nZ = table(power_from=("{stray.id}",))\n'
        f'W = bias_bound_claims(maker)(id="{stray.id}")\n'
    )
    assert claim_id_strings(source, {stray.id}) == [2, 4]
    # a result package (fednest.lemma22) whose checks live in its submodule passes; its check
    # used by another result only, or a check of its own defined in a shared module, does not
    fednest = _result_modules("fednest")
    shared = {name: module for name, module in _modules("fednest") if name in SHARED_MODULES}
    assert hasattr(fednest["lemma22"], "__path__") and not misplaced_uses(
        "fednest", fednest, shared
    )
    borrowed = fednest["lemma22"].PAPER_CONSTANT.check
    assert borrowed.__module__ == "theory_checks.fednest.lemma22.checks"
    other = next(name for name in fednest if name != "lemma22")
    stray_claim = types.SimpleNamespace(
        id=f"fednest.{other}.planted",
        check=borrowed,
        bound=None,
        positive_control=None,
        perturbation=None,
        strategy=None,
        examples=(),
    )
    planted_other = types.SimpleNamespace(
        __name__=f"theory_checks.fednest.{other}", CLAIMS=(stray_claim,)
    )
    problems = misplaced_uses("fednest", {**fednest, other: planted_other}, shared)
    assert any(
        f"fednest.{other}.planted: its check, used by {sorted(['lemma22', other])}, belongs in a "
        "shared module of fednest (found in theory_checks.fednest.lemma22.checks)" in p
        for p in problems
    ), problems
    alone = {other: planted_other}
    assert misplaced_uses("fednest", alone, shared) == [
        f"fednest.{other}.planted: its check is used by {other} only and is not defined in "
        f"fednest/{other}.py"
    ]
    from_shared = types.SimpleNamespace(**{**vars(stray_claim), "check": shared["common"].fedihgp})
    planted_package = types.SimpleNamespace(
        __name__="theory_checks.fednest.lemma22", __path__=[], CLAIMS=(from_shared,)
    )
    assert misplaced_uses("fednest", {"lemma22": planted_package}, shared) == [
        f"fednest.{other}.planted: its check is used by lemma22 only and is not defined in "
        "fednest/lemma22/"
    ]
