"""A command's claim runs: each ``(claim, estimator)`` pair a unit of work (:class:`ClaimRunTask`)
that an executor runs where it likes, the driver writing each run's results files as they come
back (atomically, under the results folder's lock), skipping the runs a trusted file already
holds, so an interrupted command resumes with nothing lost. :func:`compute_claim_run` is one
run: the claim's cases (:func:`theory_checks.runner.run_claim`), and for the claim's own
estimator its perturbation, positive control and added parameters
(:mod:`theory_checks.controls`); a failure of a plugin's code is one line naming it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.claim_file import read_claim_file
from results_format.layout import CLAIMS
from results_format.locks import holding
from testbed import plugins
from testbed.progress import Progress
from testbed.registry import BUILTIN
from testbed.registry import get_estimator
from theory_checks.claim import Claim
from theory_checks.claim_results import NO_CONTROLS
from theory_checks.claim_results import ClaimFiles
from theory_checks.claim_results import ControlRuns
from theory_checks.claim_results import is_done
from theory_checks.claim_results import render_claim_result
from theory_checks.claim_results import reused_from_elsewhere
from theory_checks.claim_results import write_claim_files
from theory_checks.claim_results import write_metadata
from theory_checks.controls import run_added_parameters
from theory_checks.controls import run_positive_control
from theory_checks.controls import run_power
from theory_checks.profiles import Profile
from theory_checks.registry import BUILT_IN
from theory_checks.registry import BUILTIN_CLAIMS
from theory_checks.registry import get_claim
from theory_checks.registry import run_origin
from theory_checks.runner import claim_runs
from theory_checks.runner import registered_runs
from theory_checks.runner import run_claim
from theory_checks.units import SentByName
from theory_checks.units import driver_dtype
from theory_checks.units import run_in_process


def compute_claim_run(claim: Claim, estimator: str, profile: Profile) -> ClaimFiles:
    """Check one ``(claim, estimator)`` run on ``profile`` and give its results files, unwritten
    (the unit of work an executor runs: the driver writes them, :func:`write_claim_files`).

    The perturbation and the positive control are the claim check's, not the estimator's: they
    run once, with the claim's own estimator.
    """
    own = estimator == claim.estimators[0]
    with plugin_failures_named(claim, estimator):
        controls = control_runs(claim, profile) if own else NO_CONTROLS
        try:
            result = run_claim(claim, profile, estimator=estimator)
        except (ValueError, RuntimeError, IndexError, TypeError) as error:
            if plugins.raised_in(error, _outside_code(claim, estimator)) is not None:
                raise  # the plugin's own code raised it: plugin_failures_named says so
            # an estimator whose output the check cannot use (say a trajectory one entry
            # longer: "operands could not be broadcast together with shapes (32,) (31,)"):
            # name the claim and the estimator beside what failed
            raise ClaimRunError(
                f"claim {claim.id} on estimator {estimator}: the check could not use the "
                f"estimator's output ({type(error).__name__}: {error}); it expects what "
                f"{claim.estimators[0]} returns, with the same shapes"
            ) from error
    return render_claim_result(result, profile, controls)


def control_runs(claim: Claim, profile: Profile) -> ControlRuns:
    """The runs a claim records beside its verdict: its perturbation (power), its positive
    control and the values of the parameters the testbed adds (:mod:`theory_checks.controls`)."""
    return ControlRuns(
        run_power(claim, profile),
        run_positive_control(claim, profile),
        run_added_parameters(claim, profile),
    )


@contextlib.contextmanager
def plugin_failures_named(claim: Claim, estimator: str) -> Iterator[None]:
    """Run a claim's check on ``estimator`` inside: an exception of a plugin's code (or of a
    ``module:object`` target's) becomes a :class:`ClaimRunError` of one line naming the
    plugin, the claim, the estimator, the exception and where it was raised (a
    ZeroDivisionError in a plugin's ``estimate`` ended in a traceback); on the testbed's own
    claim and estimator it is an internal error and keeps its traceback. Ctrl-C is never
    caught."""
    try:
        yield
    except ClaimRunError:
        raise
    except (Exception, SystemExit) as error:
        origin = run_origin(claim, estimator)
        if origin == BUILT_IN:
            raise
        raise ClaimRunError(_plugin_failure(claim, estimator, origin, error)) from error


def _outside_code(claim: Claim, estimator: str) -> set[str]:
    """The top-level module names of the code a run takes from outside the testbed: a plugin
    (or ``module:object``) estimator's class and builder, a plugin claim's functions."""
    names: set[str] = set()
    if estimator not in {info.name for info in BUILTIN}:
        info = get_estimator(estimator)
        names |= plugins.modules_of(info.cls, info.make)
    if claim.id not in {c.id for c in BUILTIN_CLAIMS}:
        names |= plugins.modules_of(
            *(
                getattr(claim, f.name)
                for f in dataclasses.fields(claim)
                if callable(getattr(claim, f.name))
            )
        )
    return names


def _plugin_failure(claim: Claim, estimator: str, origin: str, error: BaseException) -> str:
    """One line on a run whose plugin code raised: the plugin, the claim, the estimator, the
    exception and where it was raised."""
    outside = _outside_code(claim, estimator)
    where = plugins.raised_in(error, outside)
    source = (
        origin
        if origin.startswith("plugin")
        else f"code from outside the testbed ({', '.join(sorted(outside)) or 'unknown module'})"
    )
    return (
        f"{source}: claim {claim.id} on estimator {estimator} raised "
        f"{plugins.describe_failure(error)}"
        + (f" (at {where})" if where else " (in the testbed, on the plugin's code or output)")
        + "; the run is not recorded"
    )


class ClaimRunError(ValueError):
    """A claim run that could not be measured: names the claim, the estimator and the cause."""


class RegisteredClaimTask(SentByName):
    """A unit of work on one claim that pickles to a worker (a local process or a Ray node;
    :class:`~theory_checks.units.SentByName`): it carries the claim's id and finds the claim in
    the worker's registry. Subclasses are dataclasses with the fields ``claim_id``,
    ``default_dtype`` and ``claim`` (the driver's object)."""

    held = "claim"
    claim_id: str
    claim: Claim | None

    def resolved_claim(self) -> Claim:
        """The claim object: the driver's, or, in a worker, the registry's."""
        return self._resolved(get_claim, self.claim_id)


@dataclasses.dataclass
class ClaimRunTask(RegisteredClaimTask):
    """One ``(claim, estimator)`` run as a picklable unit of work
    (:class:`RegisteredClaimTask`): calling it gives the run's :data:`ClaimFiles`."""

    claim_id: str
    estimator: str
    profile: Profile
    default_dtype: str = "float64"
    claim: Claim | None = None

    def __call__(self) -> ClaimFiles:
        return compute_claim_run(self.resolved_claim(), self.estimator, self.profile)


def claim_run_task(claim: Claim, estimator: str, profile: Profile) -> ClaimRunTask:
    """The :class:`ClaimRunTask` of one run, with the driver's torch default dtype."""
    return ClaimRunTask(claim.id, estimator, profile, driver_dtype(), claim)


#: How an executor runs tasks: given the tasks, it yields ``(index, result)`` for each as it
#: finishes, in any order (``testbed_app.executors``); the default runs them one by one here.
Execute = Callable[[Sequence[ClaimRunTask]], Iterable[tuple[int, ClaimFiles]]]


def run_claims(
    claims: Iterable[Claim],
    out_dir: Path,
    profile: Profile,
    resume: bool = True,
    progress: bool = True,
    execute: Execute | None = None,
) -> list[dict[str, Any]]:
    """Run every claim (skipping finished ones when ``resume``), write results, return summaries;
    ``execute`` runs the claims' runs (in this process, one by one, by default)."""
    return run_claim_runs(claim_runs(claims), out_dir, profile, resume, progress, execute)


def run_claim_runs(
    runs: Sequence[tuple[Claim, str]],
    out_dir: Path,
    profile: Profile,
    resume: bool = True,
    progress: bool = True,
    execute: Execute | None = None,
    only_these: bool = False,
) -> list[dict[str, Any]]:
    """Run the given ``(claim, estimator)`` pairs (:func:`claim_runs`, or a subset of them such
    as ``testbed verify``'s), write their results, return their summaries. ``metadata.json``
    lists every registered claim (the report shows those without results as "not checked"),
    or, with ``only_these``, these runs alone (``testbed verify``: its results are about its
    target)."""
    return _run_claim_runs(
        runs, out_dir, profile, resume, progress, execute or run_in_process, only_these
    )


def _run_claim_runs(
    runs: Sequence[tuple[Claim, str]],
    out_dir: Path,
    profile: Profile,
    resume: bool,
    progress: bool,
    execute: Execute,
    only_these: bool = False,
) -> list[dict[str, Any]]:
    """The driver: skips the finished runs, hands the others to ``execute`` and writes each
    one's files as it comes back (so an interrupted run resumes with nothing lost), with one
    progress bar over every run."""
    run_ids = [
        claim.id if estimator == claim.estimators[0] else f"{claim.id}@{estimator}"
        for claim, estimator in runs
    ]
    # a second process checking one of these claims into this folder stops before any work
    with holding(
        out_dir,
        [(f"claim-{run_id}", f"the results of claim {run_id} in {out_dir}") for run_id in run_ids],
    ):
        write_metadata(out_dir, profile, runs if only_these else registered_runs())
        if resume:
            warn_untrusted(out_dir, run_ids)
        reused = {
            run_id
            for run_id, (claim, _) in zip(run_ids, runs, strict=True)
            if resume and is_done(claim, out_dir, profile, run_id)
        }
        pending = [
            (run_id, claim_run_task(claim, estimator, profile))
            for run_id, (claim, estimator) in zip(run_ids, runs, strict=True)
            if run_id not in reused
        ]
        _execute_and_write(pending, len(runs), out_dir, progress, execute)
    summaries = [
        json.loads((out_dir / CLAIMS / f"{run_id}.json").read_text()) for run_id in run_ids
    ]
    note = reused_note([s for s in summaries if s["id"] in reused], out_dir)
    if note:
        print(note, file=sys.stderr)
    return summaries


def warn_untrusted(out_dir: Path, run_ids: Sequence[str]) -> None:
    """One line on stderr for each of these runs' claim files that cannot be believed
    (:func:`results_format.claim_file.read_claim_file`: its schema, its re-derived outcomes,
    counts and verdict, its seal, its companion files), which the run measures again."""
    for run_id in run_ids:
        path = out_dir / CLAIMS / f"{run_id}.json"
        if path.is_file():
            _, reason = read_claim_file(path, out_dir)
            if reason is not None:
                print(f"testbed: warning: {path}: {reason}; rerun", file=sys.stderr)


def reused_note(reused: Sequence[dict[str, Any]], out_dir: Path) -> str | None:
    """One line when results reused from ``out_dir`` were computed by other code or on another
    device than this run's (:func:`~theory_checks.claim_results.reused_from_elsewhere`): the
    fingerprint covers a claim's definition, not the code that checks it, so a result from
    before a fix of the check stays fresh; ``--fresh`` recomputes it."""
    elsewhere = set(reused_from_elsewhere(reused))
    if not elsewhere:
        return None
    sources = sorted({_computed_where(s) for s in reused if s["id"] in elsewhere})
    names = sorted(elsewhere)
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (
        f"testbed: note: {len(names)} claim result(s) in {out_dir} were reused from "
        f"{'; '.join(sources)} ({shown}); --fresh recomputes them"
    )


def _computed_where(record: dict[str, Any]) -> str:
    there = record.get("computed_by")
    if not there:
        return "a version of the testbed that did not record its commit"
    return f"commit {str(there.get('git_commit'))[:10]} on {there.get('device')}"


def _execute_and_write(
    pending: Sequence[tuple[str, ClaimRunTask]],
    total: int,
    out_dir: Path,
    progress: bool,
    execute: Execute,
) -> None:
    """Run the ``pending`` tasks through ``execute``, writing each one's files as it comes
    back, with one progress bar over the ``total`` runs."""
    # the bar names the claim running (executors start the tasks in this order)
    with Progress(
        total=total,
        initial=total - len(pending),
        desc="claims",
        unit="claim",
        enabled=progress,
        names=[run_id for run_id, _ in pending],
    ) as bar:
        for index, files in execute([task for _, task in pending]):
            write_claim_files(files, out_dir)
            bar.finish(pending[index][0])
