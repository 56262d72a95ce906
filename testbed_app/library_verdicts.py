"""The verdicts a verified library's estimators get, recorded per library version.

An adapter package (``integrations/<library>/``) keeps ``expected_verdicts.toml``::

    library = "torchopt"                      # the distribution (or code) whose version keys it

    [verdicts."0.7.3".torchopt-implicit-cg]   # version, then estimator: claim -> verdict
    "classical.cg.exact_after_dim_y" = "holds"

:func:`verdict_changes` runs ``testbed verify`` on every recorded estimator and lists each
claim whose verdict differs from the record of the installed version, or, for a version not
recorded, from the newest recorded one; an adapter's test fails on any, naming the claim and
the versions (so a release of the library that fixes or breaks a claim is seen). A claim an
estimator declares that the record lacks, or the reverse, is a change too.

``python -m testbed_app.library_verdicts record FILE VERSION`` writes the current verdicts of
the file's estimators under ``VERSION`` (after a deliberate review of what changed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from results_format import atomic_write
from testbed_app.verify import verify
from theory_checks.claim import NotMeasurable
from theory_checks.profiles import Profile
from theory_checks.profiles import get_profile
from theory_checks.registry import get_claim
from theory_checks.runner import default_make
from theory_checks.runner import measure_and_decide
from theory_checks.settings import RunSettings
from theory_checks.settings import use_settings


def read_record(path: Path) -> dict[str, Any]:
    """The file's table (``library``, ``verdicts``), checked for shape."""
    try:
        record = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: not a readable verdicts file: {error}") from error
    if not isinstance(record.get("library"), str) or not isinstance(record.get("verdicts"), dict):
        raise ValueError(f'{path}: needs library = "..." and [verdicts."VERSION".ESTIMATOR]')
    return record


def _version_key(version: str) -> tuple[Any, ...]:
    return tuple(
        (0, int(p)) if p.isdigit() else (1, p) for p in version.replace("-", ".").split(".")
    )


def reference_version(record: Mapping[str, Any], version: str) -> str:
    """``version`` when it is recorded, else the newest recorded version."""
    recorded = list(record["verdicts"])
    if version in recorded:
        return version
    if not recorded:
        raise ValueError(f"no verdicts recorded for {record['library']}")
    return max(recorded, key=_version_key)


def run_verdicts(
    estimators: Sequence[str], results: Path, profile: Profile | None = None
) -> dict[str, dict[str, str]]:
    """``testbed verify`` of each estimator on ``profile`` (default ``fast``): ``{estimator:
    {claim id: verdict}}``. The caller has put its settings in force (an entry point:
    :func:`main`, a test session, a script calling
    :func:`~theory_checks.settings.use_settings`)."""
    profile = profile or get_profile("fast")

    verdicts: dict[str, dict[str, str]] = {}
    for estimator in estimators:
        _, summaries = verify(
            estimator, results / estimator, profile, None, resume=False, progress=False
        )
        verdicts[estimator] = {str(s["id"]).split("@")[0]: str(s["verdict"]) for s in summaries}
    return verdicts


def verdict_changes(
    path: Path, version: str, results: Path | None = None, profile: Profile | None = None
) -> tuple[str, list[str]]:
    """``(the version compared with, a line per claim whose verdict changed)``."""
    record = read_record(path)
    reference = reference_version(record, version)
    expected: dict[str, dict[str, str]] = record["verdicts"][reference]
    folder = Path(results) if results is not None else Path(tempfile.mkdtemp(prefix="verdicts-"))
    now = run_verdicts(sorted(expected), folder, profile)
    library = record["library"]
    where = (
        f"{library} {version}"
        if reference == version
        else f"{library} {version} (not recorded; compared with {reference})"
    )
    changes = []
    for estimator in sorted(expected):
        claims = sorted(set(expected[estimator]) | set(now[estimator]))
        for claim in claims:
            before = expected[estimator].get(claim, "not recorded")
            after = now[estimator].get(claim, "not declared")
            if before != after:
                changes.append(
                    f"{where}: {claim} on {estimator}: {after} (recorded under "
                    f"{reference}: {before})"
                )
    return reference, changes


def fresh_seed_outcomes(
    claim_id: str,
    estimator: str,
    seeds: Sequence[int],
    cases: int = 8,
    profile: Profile | None = None,
) -> list[dict[str, Any]]:
    """Measure ``claim_id`` on ``estimator`` over cases drawn from the claim's strategy for
    ``profile`` (default ``fast``) with each of ``seeds`` (other seeds than the claim's own,
    which ``testbed verify`` uses): how a refutation is confirmed on fresh cases. One record per
    measured case (rejected cases are left out): problem id, parameters, measured value, bound
    and outcome."""
    from hypothesis import HealthCheck
    from hypothesis import Phase
    from hypothesis import given
    from hypothesis import seed
    from hypothesis import settings

    claim = get_claim(claim_id)
    make = default_make(claim, estimator)
    outcomes: list[dict[str, Any]] = []

    def draw_with(value: int) -> None:
        @seed(value)
        @settings(
            max_examples=cases,
            database=None,
            deadline=None,
            phases=(Phase.generate,),
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(claim.cases((profile or get_profile("fast")).name))
        def draw(case: Any) -> None:
            try:
                result = measure_and_decide(claim, case, make, None, 0.0)
            except NotMeasurable:
                return
            m = result.measurement
            outcomes.append(
                {
                    "seed": value,
                    "problem_id": result.problem_id,
                    "params": dict(result.params),
                    "measured": m.measured,
                    "bound": m.bound,
                    "outcome": result.outcome,
                }
            )

        draw()

    for value in seeds:
        draw_with(value)
    return outcomes


def reproduction_lines(script: Path, *args: str, timeout: float = 600) -> list[str]:
    """The lines a finding's plain reproduction prints: ``script`` (a ``repro_*.py`` of an
    adapter's folder, the library alone, no testbed) run with ``args`` by this interpreter; a
    :class:`subprocess.CalledProcessError` (its stderr attached) when it fails."""
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return done.stdout.strip().splitlines()


def record_verdicts(path: Path, version: str, profile: Profile | None = None) -> dict[str, Any]:
    """Run the file's estimators (those of its newest version) and write their verdicts under
    ``version``; returns the new table."""
    record = read_record(path)
    estimators = sorted(record["verdicts"][reference_version(record, version)])
    with tempfile.TemporaryDirectory(prefix="verdicts-") as folder:
        record["verdicts"][version] = run_verdicts(estimators, Path(folder), profile)
    atomic_write(Path(path), tomli_w.dumps(record))
    return record


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testbed_app.library_verdicts", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("check", "record"):
        command = sub.add_parser(name)
        command.add_argument("file", type=Path)
        command.add_argument("version")
    args = parser.parse_args(argv)
    use_settings(RunSettings(profile=get_profile("fast")))
    try:
        if args.command == "record":
            record_verdicts(args.file, args.version)
            print(f"recorded the verdicts of {args.version} in {args.file}")
            return 0
        reference, changes = verdict_changes(args.file, args.version)
    except (KeyError, ValueError) as error:
        print(f"library_verdicts: error: {error}", file=sys.stderr)
        return 2
    for line in changes:
        print(line)
    if not changes:
        print(f"every verdict as recorded under {reference}")
    return 1 if changes else 0


if __name__ == "__main__":
    raise SystemExit(main())
