"""Power measured by mutants: realistic bugs in every estimator and algorithm family, run against
the claims that concern them (``testbed mutate``).

A claim that holds is worth only as much as the bugs it would catch. A :class:`Mutant` is a
small, realistic bug (an off-by-one in a count, a step doubled or halved, a missing ``1/M``,
``1/tau`` or ``1/(N + 1)``, per-client instead of averaged, a dropped or sign-flipped correction,
a stale iterate, a wrong Push-Sum weight) built the way the claims' perturbations are: a
subclass of the real estimator, algorithm or part with one mistake, recast from the registry's
own build (:mod:`theory_checks.perturbed_variants`). Its ``builds`` map each registry entry the
bug lives in (a bug in shared code lives in every entry that runs it) to a builder of the
mutated entry.

:func:`run_mutant` runs the mutant against every claim that concerns one of its entries and that
holds on the correct code (a refuted claim cannot tell a bug from the original): the claim is
checked with the mutant's builder exactly as ``testbed check`` checks the entry (same cases,
same decision procedure, shrinking off), and the mutant is **killed** by the first claim whose
verdict is "fails as stated" or whose check cannot run on it (an error raised by the check or a
guard of the library, recorded with its message). The claims run cheapest first: those the
mutant names (``first``), then deterministic, statistical, budget-undecided and comparison
claims, and within each the exact identities first (one case of one decides them, and they pin
the most: :func:`planned_runs`); ties keep the registry's order, so the order is a function of
the claims' definitions. A mutant no claim can tell from the original carries ``equivalent``: the
argument why (it is run against every claim all the same, and a kill contradicts the argument).

Shared work (:class:`SharedRuns`): a declared-equivalent mutant often builds exactly the
correct estimator (a parameter whose ``None`` default the checks never set: an exact inner
solver has no step count). Each ``(claim, entry)`` is then run once on the correct entry,
recording every set of keywords the check builds it with; a mutant whose builder gives, for
each of those keyword sets, an estimator equal field by field to the correct one (same class,
same fields, tensors equal) makes the same computation (the checks are deterministic: seeded
cases, seeded draws), so the correct run's verdict is its own, recorded with ``shared`` saying
so. A mutant that builds anything else is run.

Results: ``mutation/<mutant>.json`` (one per mutant, rewritten after every claim run, so an
interrupted run resumes claim by claim; stamped with a fingerprint of the mutant, the claims'
definitions and the profile) and ``mutation/summary.json`` (every fresh record of the folder,
in catalogue order), which the report reads.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from results_format.layout import MUTATION
from results_format.layout import SUMMARY
from results_format.records import killers
from results_format.records import mutant_as_expected
from results_format.records import mutant_status
from results_format.records import mutation_counts
from results_format.records import mutation_record_problem
from results_format.records import mutation_row
from results_format.resume import fingerprint
from results_format.resume import read_fresh
from results_format.resume import write_json
from results_format.validation import seal
from testbed.registry import get_estimator
from theory_checks.claim import Claim
from theory_checks.claim_results import claim_fingerprint
from theory_checks.profiles import Profile
from theory_checks.registry import claims_of
from theory_checks.runner import enrolled_variants
from theory_checks.runner import run_claim

#: The kinds of realistic bug of the catalogue (issue 22), with the words the table uses.
MUTANT_KINDS: dict[str, str] = {
    "count": "one term, inner step or local step too many or too few",
    "step": "a step size doubled or halved",
    "normalisation": "a missing 1/M, 1/tau or 1/(N+1)",
    "per_client": "per-client instead of averaged",
    "correction": "a dropped or sign-flipped correction term",
    "stale": "a stale iterate",
    "pushsum_weight": "a wrong Push-Sum weight",
}

#: Status of a mutant after its run.
KILLED, SURVIVED, EQUIVALENT = "killed", "survived", "equivalent"


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One realistic bug.

    Attributes:
        name: ``<entry>.<what is wrong>`` (the id in the table and the results file name).
        family: the estimator or algorithm family it belongs to ("AID-Neumann", "FedIHGP", ...).
        kind: one of :data:`MUTANT_KINDS`.
        description: what is wrong, in the code's terms.
        builds: registry entry -> builder of that entry with the bug (keyword parameters as the
            registry's ``build``).
        first: claims expected to kill it, tried before the others (an ordering only).
        equivalent: why no claim can tell it from the original (an argument); empty when the
            mutant must be killed.
        cheap: part of the default test run's subset (killed within a few seconds).
    """

    name: str
    family: str
    kind: str
    description: str
    builds: Mapping[str, Callable[..., Any]]
    first: tuple[str, ...] = ()
    equivalent: str = ""
    cheap: bool = False

    def __post_init__(self) -> None:
        if self.kind not in MUTANT_KINDS:
            raise ValueError(
                f"mutant {self.name}: unknown kind {self.kind!r}; "
                f"choose from {sorted(MUTANT_KINDS)}"
            )
        if not self.builds:
            raise ValueError(f"mutant {self.name}: builds no entry")


@dataclasses.dataclass(frozen=True)
class MutantFamily:
    """What the mutants of one family share: the family's name and the claims they try first
    (``first``; a mutant may name its own). A paper's ``mutants.py`` states each mutant through
    its family (:meth:`mutant`), so a catalogue entry says only what is its own."""

    name: str
    first: tuple[str, ...] = ()

    def mutant(
        self,
        name: str,
        kind: str,
        description: str,
        builds: Mapping[str, Callable[..., Any]],
        **own: Any,
    ) -> Mutant:
        """A mutant of this family; ``own``: its own ``first``, ``equivalent`` or ``cheap``."""
        return Mutant(name, self.name, kind, description, builds, **{"first": self.first, **own})


#: The labels of the generated perturbations of an integer parameter (a count) and of a real one
#: (a step), as in the generated mutants' names ``param.<entry>.<keyword>.<label>``
#: (:mod:`theory_checks.parameter_mutants`).
COUNT_WAYS: tuple[str, ...] = ("plus1", "minus1")
STEP_WAYS: tuple[str, ...] = ("half", "double")


def declared_equivalents(
    reason: str | Callable[[str], str], entries: Iterable[str], **ways: tuple[str, ...]
) -> dict[str, str]:
    """Generated perturbations no claim can tell from the original, with the argument why (a
    paper's ``PARAMETER_EQUIVALENTS``): ``param.<entry>.<keyword>.<label>`` -> ``reason`` (or
    ``reason(entry)``) for each of ``entries``, each keyword of ``ways`` and each of its labels
    (``inner_steps=COUNT_WAYS``, ``inner_step_size=STEP_WAYS``, ``local_steps=("plus1",)``)."""
    return {
        f"param.{entry}.{keyword}.{label}": reason if isinstance(reason, str) else reason(entry)
        for entry in entries
        for keyword, labels in ways.items()
        for label in labels
    }


def can_kill(claim: Claim) -> bool:
    """Whether a claim can kill a mutant: only one that holds on the correct code (or holds once
    corrected) can tell a bug from the original."""
    return claim.expected == "holds"


def _cost_rank(claim: Claim, profile: Profile) -> int:
    """Cheapest first: deterministic, statistical, undecided by design on ``profile``,
    comparisons (whole tuned algorithm runs)."""
    if claim.id.startswith("comparison."):
        return 3
    if profile.name in claim.undecided_on:
        return 2
    return 1 if claim.statistical else 0


def _exactness_rank(claim: Claim) -> int:
    """Exact identities first within a cost rank: a float64 identity on a few cases is the
    cheapest claim to run and the one that sees any change of the computation it pins."""
    return 0 if claim.kind == "exact_identity" else 1


def checks_through_builder(claim: Claim, entry: str) -> bool:
    """Whether ``claim``'s check builds ``entry`` through the builder it is given (its first
    estimator, or a variant enrolled in it): only there can a mutated builder be put in. A
    claim's other estimators (a comparison's FedNest baseline, the taxonomy's ClientGrad) are
    built inside the check by name."""
    return entry == claim.estimators[0] or entry in enrolled_variants(claim)


def planned_runs(mutant: Mutant, profile: Profile) -> list[tuple[Claim, str]]:
    """Every ``(claim, entry)`` the mutant runs against, in the order they are tried."""
    runs = [
        (claim, entry)
        for entry in mutant.builds
        for claim in claims_of(entry)
        if can_kill(claim) and checks_through_builder(claim, entry)
    ]
    first = {claim_id: rank for rank, claim_id in enumerate(mutant.first)}
    return sorted(
        runs,
        key=lambda run: (
            first.get(run[0].id, len(first)),
            _cost_rank(run[0], profile),
            _exactness_rank(run[0]),
        ),
    )


def mutant_fingerprint(mutant: Mutant, profile: Profile, runs: Sequence[tuple[Claim, str]]) -> str:
    """Changes when the mutant or a claim it runs against changes (on ``profile``)."""
    return fingerprint(
        mutant.name,
        mutant.kind,
        mutant.description,
        mutant.equivalent,
        *(f"{entry}:{claim_fingerprint(claim, profile)}" for claim, entry in runs),
    )


def _no_shrink(claim: Claim) -> Claim:
    # Why no shrinking: a mutant's kill needs one failing case, not a minimal one; shrinking
    # would multiply the cost of every kill without changing whether it happened.
    return dataclasses.replace(claim, shrink=False)


def run_once(
    claim: Claim, entry: str, make: Callable[..., Any], profile: Profile
) -> dict[str, Any]:
    """The claim checked on the mutated entry: its verdict, or the error its check raised."""
    start = time.perf_counter()
    try:
        result = run_claim(_no_shrink(claim), profile, make=make, estimator=entry)
    except Exception as error:  # the check (or a guard of the library) refuses the mutant
        return {
            "claim": claim.id,
            "estimator": entry,
            "verdict": "error",
            "error": f"{type(error).__name__}: {str(error)[:300]}",
            "killed": True,
            "cases_passed": 0,
            "seconds": time.perf_counter() - start,
        }
    return {
        "claim": claim.id,
        "estimator": entry,
        "verdict": result.verdict,
        "error": None,
        "killed": result.verdict == "fails as stated",
        "cases_passed": len(result.cases),
        "seconds": time.perf_counter() - start,
    }


def same_build(a: Any, b: Any) -> bool:
    """Whether two built estimators are the same computation: the same class and, field by
    field, equal values (tensors and arrays equal entry-wise, containers element-wise); an
    object without structural equality compares by ``==`` (identity by default: not the same)."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(
            same_build(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and bool(np.array_equal(a, b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_build(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_build(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # an ambiguous comparison: not known to be the same
        return False


class SharedRuns:
    """The correct entry's run of each ``(claim, entry)``, with the keyword sets its check built
    the entry with, computed once per process and shared by the mutants that build the same
    estimator for every one of them (module docstring)."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str, str], tuple[tuple[dict[str, Any], ...], dict[str, Any]]]
        self._runs = {}

    def correct_run(
        self, claim: Claim, entry: str, profile: Profile
    ) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
        """``(keyword sets, run record)`` of ``claim`` on the correct ``entry``."""
        key = (claim.id, entry, profile.name)
        if key not in self._runs:
            calls: list[dict[str, Any]] = []
            info = get_estimator(entry)

            def recording(**kw: Any) -> Any:
                calls.append(dict(kw))
                return info.build(**kw)

            record = run_once(claim, entry, recording, profile)
            self._runs[key] = (tuple(calls), record)
        return self._runs[key]

    def shared_run(
        self, claim: Claim, entry: str, make: Callable[..., Any], profile: Profile
    ) -> dict[str, Any] | None:
        """The correct run as the mutant's own when ``make`` builds the correct estimator for
        every keyword set the check uses (``None`` otherwise: the mutant must be run)."""
        info = get_estimator(entry)
        start = time.perf_counter()
        # a mutant that builds something else at the entry's defaults is run, without paying
        # for the correct run (sharing is a saving, never a requirement)
        try:
            if not same_build(make(), info.build()):
                return None
        except Exception:
            return None
        calls, record = self.correct_run(claim, entry, profile)
        for kw in calls:
            try:
                built = make(**kw)
            except Exception:  # the mutant's build fails where the correct one does not
                return None
            if not same_build(built, info.build(**kw)):
                return None
        return {
            **record,
            "seconds": time.perf_counter() - start,
            "shared": (
                f"the mutant builds the correct estimator for each of the {len(calls)} "
                "keyword sets the check uses: the correct entry's run (same cases, same draws)"
            ),
        }


def status_of(mutant: Mutant, runs: Sequence[Mapping[str, Any]]) -> str:
    """The mutant's status from its runs (the rule a reader checks a record with:
    :func:`results_format.records.mutant_status`)."""
    return mutant_status(runs, mutant.equivalent)


def as_expected(record: Mapping[str, Any]) -> bool:
    """A mutant is as expected when it is killed, or declared equivalent and not killed."""
    return mutant_as_expected(record)


def _warn(message: str) -> None:
    print(f"testbed: warning: {message}", file=sys.stderr)


def read_record(
    path: Path, stamp: str, profile: str, notify: Callable[[str], None] = _warn
) -> dict[str, Any] | None:
    """The mutant's record at ``path`` when it is fresh (this mutant, claims and profile) and
    can be believed (:func:`results_format.records.mutation_record_problem`: its schema, its
    seal, its status and killers recomputed from its runs); one that cannot is named by
    ``notify`` and run again from its first claim."""
    saved = read_fresh(path, stamp, profile, keys=("runs", "status"))
    if saved is None:
        return None
    problem = mutation_record_problem(saved, path.stem)
    if problem is not None:
        notify(f"{path}: not trusted ({problem}); its claims are run again")
        return None
    return saved


def run_mutant(
    mutant: Mutant,
    profile: Profile,
    out_dir: Path | None = None,
    *,
    every_claim: bool = False,
    resume: bool = True,
    progress: Callable[[str], None] | None = None,
    shared: SharedRuns | None = None,
) -> dict[str, Any]:
    """Run ``mutant`` against the claims that concern it and give its record (written to
    ``out_dir / "mutation" / <name>.json`` after every claim when ``out_dir`` is given).

    Stops at the first kill unless ``every_claim`` (a declared-equivalent mutant always runs
    every claim: its argument says none can kill it). Resumes from a fresh record. With
    ``shared``, a declared-equivalent mutant that builds the correct estimator for a claim
    takes the correct entry's run of it (:class:`SharedRuns`).
    """
    runs = planned_runs(mutant, profile)
    stamp = mutant_fingerprint(mutant, profile, runs)
    path = out_dir / MUTATION / f"{mutant.name}.json" if out_dir is not None else None
    saved = read_record(path, stamp, profile.name) if (path is not None and resume) else None
    done: list[dict[str, Any]] = list(saved["runs"]) if saved else []
    seen = {(r["claim"], r["estimator"]) for r in done}
    record = _record(mutant, profile, stamp, runs, done)
    for claim, entry in runs:
        if record["status"] == KILLED and not (every_claim or mutant.equivalent):
            break
        if (claim.id, entry) in seen:
            continue
        if progress is not None:
            progress(f"{mutant.name}: {claim.id}")
        make = mutant.builds[entry]
        run = (
            shared.shared_run(claim, entry, make, profile)
            if shared is not None and mutant.equivalent
            else None
        )
        done.append(run if run is not None else run_once(claim, entry, make, profile))
        record = _record(mutant, profile, stamp, runs, done)
        if path is not None:
            write_json(path, seal(record), indent=2)
    if path is not None and saved is None and not done:
        write_json(path, seal(record), indent=2)  # no claim concerns it: recorded as such
    return record


def _record(
    mutant: Mutant,
    profile: Profile,
    stamp: str,
    runs: Sequence[tuple[Claim, str]],
    done: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "mutant": mutant.name,
        "family": mutant.family,
        "kind": mutant.kind,
        "kind_text": MUTANT_KINDS[mutant.kind],
        "description": mutant.description,
        "entries": list(mutant.builds),
        "equivalent": mutant.equivalent,
        "fingerprint": stamp,
        "profile": profile.name,
        "planned": len(runs),
        "status": status_of(mutant, done),
        "killed_by": killers(done),
        "runs": done,
    }


def run_mutants(
    mutants: Iterable[Mutant],
    profile: Profile,
    out_dir: Path,
    *,
    every_claim: bool = False,
    resume: bool = True,
    progress: Callable[[str], None] | None = None,
    catalogue: Sequence[Mutant] | None = None,
) -> list[dict[str, Any]]:
    """Run each mutant (:func:`run_mutant`), then write ``mutation/summary.json``: every fresh
    record in the folder, in the order of ``catalogue`` (default: these mutants)."""
    chosen = list(mutants)
    shared = SharedRuns()
    records = [
        run_mutant(
            m,
            profile,
            out_dir,
            every_claim=every_claim,
            resume=resume,
            progress=progress,
            shared=shared,
        )
        for m in chosen
    ]
    write_summary(out_dir, profile, catalogue or chosen)
    return records


def fresh_records(
    out_dir: Path, profile: Profile, catalogue: Sequence[Mutant]
) -> list[dict[str, Any]]:
    """The records of ``out_dir / "mutation"`` that are fresh for ``catalogue`` on ``profile``,
    in catalogue order (a stale or torn file is left out)."""
    records = []
    for mutant in catalogue:
        path = out_dir / MUTATION / f"{mutant.name}.json"
        stamp = mutant_fingerprint(mutant, profile, planned_runs(mutant, profile))
        saved = read_record(path, stamp, profile.name)
        if saved is not None:
            records.append(saved)
    return records


def write_summary(out_dir: Path, profile: Profile, catalogue: Sequence[Mutant]) -> dict[str, Any]:
    records = fresh_records(out_dir, profile, catalogue)
    # sealed, its rows recomputed from the records by whoever reads it
    # (results_format.records.mutation_summary_problem)
    summary = {
        "profile": profile.name,
        "catalogue": len(catalogue),
        "counts": counts(records),
        "kinds": MUTANT_KINDS,
        "mutants": [mutation_row(r) for r in records],
    }
    write_json(out_dir / MUTATION / SUMMARY, seal(summary), indent=2)
    return summary


def counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return mutation_counts(list(records))


def format_table(records: Sequence[Mapping[str, Any]]) -> str:
    """The mutation table: mutant, family, claims run, killed by which claim, or "equivalent:
    reason"."""
    if not records:
        return "no mutant run"
    width = max(len(r["mutant"]) for r in records)
    fam = max(len(r["family"]) for r in records)
    lines = [f"{'mutant':{width}s}  {'family':{fam}s}  claims run  result"]
    for r in records:
        runs = len(r["runs"])
        if r["status"] == KILLED:
            result = "killed by " + ", ".join(r["killed_by"])
            if r["equivalent"]:
                result += "  (NOT equivalent as declared)"
        elif r["status"] == EQUIVALENT:
            result = f"equivalent: {r['equivalent']}"
        else:
            result = "SURVIVED"
        lines.append(
            f"{r['mutant']:{width}s}  {r['family']:{fam}s}  "
            f"{runs:4d} of {r['planned']:<3d}  {result}"
        )
    c = counts(records)
    lines.append(
        f"\n{c['mutants']} mutants: {c[KILLED]} killed, {c[EQUIVALENT]} equivalent, "
        f"{c[SURVIVED]} survived"
    )
    return "\n".join(lines)


__all__ = [
    "EQUIVALENT",
    "COUNT_WAYS",
    "KILLED",
    "MUTANT_KINDS",
    "STEP_WAYS",
    "SURVIVED",
    "Mutant",
    "MutantFamily",
    "SharedRuns",
    "as_expected",
    "can_kill",
    "checks_through_builder",
    "counts",
    "declared_equivalents",
    "format_table",
    "fresh_records",
    "planned_runs",
    "run_mutant",
    "run_mutants",
    "same_build",
    "write_summary",
]
