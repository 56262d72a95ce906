"""Run claims on hypothesis-drawn cases, turn outcomes into verdicts, write results files.

A claim's check runs on cases drawn by its strategy under a fixed, derandomized hypothesis
profile, so the same profile gives the same cases and numbers. When a check fails, hypothesis
shrinks the case; the minimal failing case is saved as a counterexample (JSON spec + the arrays
that define the problem) and the verdict is "fails as stated".

Results are written per claim, atomically, as soon as the claim finishes; a rerun of the same
profile skips the claims whose results are already there, so an interrupted run resumes with
nothing lost. Layout under the results directory (``results/`` by default):

- ``metadata.json``: git commit, package versions, profile, seeds;
- ``claims/<run_id>.json``: claim metadata, verdict, per-case summaries, fits (``run_id`` is the
  claim id, or ``<claim_id>@<estimator>`` for a registered variant enrolled in the claim);
- ``series/<run_id>.csv``: tidy rows (claim, estimator, problem_id, seed, params, series,
  step_name, step, value, oracle_calls, comm_rounds) behind the plots;
- ``counterexamples/<run_id>.json`` and ``.npz``: the minimal failing case.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from hypothesis import HealthCheck, Phase, assume, example, given, seed, settings

from testbed.registry import get_estimator
from theory_checks import _determinism  # noqa: F401  (before any draw: seed-only draws)
from theory_checks.claim import Case, Claim, Measurement, NotMeasurable, Verdict

SERIES_COLUMNS = (
    "claim", "estimator", "problem_id", "seed", "params", "series", "step_name", "step",
    "value", "oracle_calls", "comm_rounds",
)


@dataclasses.dataclass(frozen=True)
class Profile:
    """How hard to look: ``fast`` for the default test run, ``thorough`` for ``tox -e theory``."""

    name: str
    max_examples: int


PROFILES = {
    # Why 8: each classical check takes 10-300 ms; 8 cases x 8 claims keeps `tox -e py` in its
    # few-minute budget while still drawing edge cases (one client, kappa = 1, zero spread).
    "fast": Profile("fast", 8),
    # Why 60: enough draws that hypothesis reaches dimension, client-count and kappa extremes.
    "thorough": Profile("thorough", 60),
}


def get_profile(name: str | None = None) -> Profile:
    name = name or os.environ.get("TESTBED_PROFILE", "fast")
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    return PROFILES[name]


_T = TypeVar("_T")


def fast_profile() -> bool:
    """Whether claims are being built for the fast profile (``TESTBED_PROFILE``, which
    ``testbed check --profile`` sets before it imports the claims): costly Monte Carlo claims
    read it to size their designs."""
    return get_profile().name == "fast"


def per_profile(fast: _T, thorough: _T) -> _T:
    """``fast`` on the fast profile, ``thorough`` otherwise (read when the claims are built)."""
    return fast if fast_profile() else thorough


@dataclasses.dataclass
class CaseResult:
    problem_id: str
    spec: dict[str, Any]
    params: dict[str, Any]
    measurement: Measurement


@dataclasses.dataclass
class ClaimResult:
    claim: Claim
    verdict: Verdict
    cases: list[CaseResult]
    counterexample: CaseResult | None
    rejected: list[str]
    seconds: float
    estimator: str = ""

    @property
    def run_id(self) -> str:
        """The claim id, suffixed ``@estimator`` for a variant enrolled through the registry."""
        if not self.estimator or self.estimator == self.claim.estimators[0]:
            return self.claim.id
        return f"{self.claim.id}@{self.estimator}"

    @property
    def as_expected(self) -> bool:
        return (self.verdict == "fails as stated") == (self.claim.expected == "fails")


def claim_seed(claim_id: str) -> int:
    """The seed of a claim's case draws: sha256 of its id (benchopt's RunContext.get_seed)."""
    return int.from_bytes(hashlib.sha256(claim_id.encode()).digest()[:4], "little")


def default_make(claim: Claim, estimator: str | None = None) -> Callable[..., Any]:
    """Builder of ``estimator`` (default: the claim's first estimator) from its registry entry."""
    return get_estimator(estimator or claim.estimators[0]).build


def enrolled_variants(claim: Claim) -> list[str]:
    """Registered entries that list ``claim`` without being named by it: variants added later.

    A variant is checked against every claim its registry entry lists, with no edit to the
    claim: this is what makes "one file plus one registry entry" enough to add one.
    """
    from testbed.registry import ESTIMATOR_DB

    return [info.name for info in ESTIMATOR_DB
            if claim.id in info.claims and info.name not in claim.estimators]


def claim_runs(claims: Iterable[Claim]) -> list[tuple[Claim, str]]:
    """Every (claim, estimator) pair to check: the claim's own estimator, then its variants."""
    return [(claim, name) for claim in claims
            for name in [claim.estimators[0], *enrolled_variants(claim)]]


def _case_result(case: Case, measurement: Measurement) -> CaseResult:
    problem = case.problem
    spec = problem.spec() if hasattr(problem, "spec") else {"id": problem.id}
    return CaseResult(problem.id, spec, dict(case.params), measurement)


def run_claim(
    claim: Claim, profile: Profile, make: Callable[..., Any] | None = None,
    estimator: str | None = None,
) -> ClaimResult:
    """Check ``claim`` on drawn cases and give its verdict.

    Args:
        claim: the claim.
        profile: how many cases to draw.
        make: estimator builder; the registry's by default (tests pass perturbed ones).
        estimator: registry name to check (default: the claim's first estimator).
    """
    builder = make or default_make(claim, estimator)
    passed: list[CaseResult] = []
    failed: list[CaseResult] = []
    rejected: list[str] = []

    # The cases come from an explicit seed derived from the claim id (not from hypothesis's
    # derandomize, which hashes the test function's source and so changes with any edit here).
    @seed(claim_seed(claim.id))
    @settings(
        max_examples=min(profile.max_examples, claim.max_examples or profile.max_examples),
        derandomize=False, database=None, deadline=None,
        phases=(Phase.explicit, Phase.generate, *((Phase.shrink,) if claim.shrink else ())),
        print_blob=False,
        suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much),
    )
    @given(claim.strategy())
    def property_(case: Case) -> None:
        try:
            measurement = claim.check(claim, case, builder)
        except NotMeasurable as reason:
            rejected.append(str(reason))
            assume(False)
            return
        result = _case_result(case, measurement)
        (passed if measurement.passed else failed).append(result)
        assert measurement.passed, (
            f"{claim.id}: measured {measurement.measured:.6g} vs {measurement.bound:.6g} "
            f"({measurement.relation}) on {result.problem_id}"
        )

    for known in claim.examples:
        property_ = example(known())(property_)
    start = time.perf_counter()
    counterexample = None
    try:
        property_()
    except AssertionError:
        if not failed:
            raise
        counterexample = failed[-1]  # hypothesis replays the minimal failing case last
    seconds = time.perf_counter() - start
    if counterexample is not None:
        verdict: Verdict = "fails as stated"
    else:
        verdict = "holds once corrected" if claim.corrects else "holds"
    unique: dict[str, CaseResult] = {}
    for r in passed:
        unique.setdefault(f"{r.problem_id}|{json.dumps(r.params, sort_keys=True)}", r)
    return ClaimResult(claim, verdict, list(unique.values()), counterexample, rejected, seconds,
                       estimator or claim.estimators[0])


# --------------------------------------------------------------------------- results files


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, cwd=Path(__file__).resolve().parent)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    import hypothesis
    import scipy
    import sympy
    import torch

    return {"python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__, "torch": torch.__version__,
            "sympy": sympy.__version__, "hypothesis": hypothesis.__version__}


def claim_fingerprint(claim: Claim) -> str:
    """Changes when the claim's definition changes, so stale results are not reused."""
    text = "|".join([claim.id, claim.reference, claim.kind, claim.statement,
                     ",".join(claim.estimators), claim.check.__qualname__,
                     str(claim.max_examples)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _case_summary(r: CaseResult) -> dict[str, Any]:
    m = r.measurement
    return {
        "problem_id": r.problem_id, "spec": r.spec, "params": r.params,
        "measured": m.measured, "bound": m.bound, "passed": m.passed, "relation": m.relation,
        "fit": dataclasses.asdict(m.fit) if m.fit else None, "details": dict(m.details),
    }


def write_claim_result(result: ClaimResult, out_dir: Path, profile: Profile) -> Path:
    """Write the claim's JSON, its series CSV and any counterexample; return the JSON path."""
    claim = result.claim
    run_id, estimator = result.run_id, result.estimator or claim.estimators[0]
    counter_path = None
    if result.counterexample is not None:
        ce = result.counterexample
        counter_path = Path("counterexamples") / f"{run_id}.json"
        _atomic_write(out_dir / counter_path, json.dumps(
            {"claim": claim.id, **_case_summary(ce)}, indent=2, default=_json_default))
        arrays = getattr(_rebuild_problem(ce.spec), "to_arrays", None)
        if arrays is not None:
            np.savez(out_dir / "counterexamples" / f"{run_id}.npz", **arrays())
    cases = result.cases + ([result.counterexample] if result.counterexample else [])
    series_path = out_dir / "series" / f"{run_id}.csv"
    series_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = series_path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SERIES_COLUMNS)
        for r in cases:
            params = json.dumps(r.params, sort_keys=True, default=_json_default)
            seed = r.spec.get("seed", "")
            for p in r.measurement.series:
                writer.writerow([claim.id, p.label or estimator, r.problem_id, seed,
                                 params,
                                 p.series, p.step_name, p.step, repr(p.value),
                                 p.oracle_calls, p.comm_rounds])
    os.replace(tmp, series_path)
    fits = [dataclasses.asdict(r.measurement.fit) | {"problem_id": r.problem_id}
            for r in cases if r.measurement.fit is not None]
    payload = {
        "id": run_id, "claim": claim.id, "estimator": estimator, "paper": claim.paper,
        "reference": claim.reference, "kind": claim.kind,
        "statement": claim.statement, "estimators": list(claim.estimators),
        "corrects": claim.corrects, "expected": claim.expected, "notes": claim.notes,
        "verdict": result.verdict, "as_expected": result.as_expected,
        "profile": profile.name, "fingerprint": claim_fingerprint(claim),
        "n_cases": len(result.cases), "n_rejected": len(result.rejected),
        "seconds": result.seconds,
        "counterexample": str(counter_path) if counter_path else None,
        "cases": [_case_summary(r) for r in cases], "fits": fits,
        "series_file": str(Path("series") / f"{run_id}.csv"),
    }
    path = out_dir / "claims" / f"{run_id}.json"
    _atomic_write(path, json.dumps(payload, indent=2, default=_json_default))
    return path


def _rebuild_problem(spec: dict[str, Any]) -> Any:
    from problems import from_spec

    try:
        return from_spec(spec)
    except (KeyError, ValueError):
        return None


def is_done(claim: Claim, out_dir: Path, profile: Profile, run_id: str | None = None) -> bool:
    path = out_dir / "claims" / f"{run_id or claim.id}.json"
    if not path.exists():
        return False
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return False
    return data.get("profile") == profile.name and data.get("fingerprint") == \
        claim_fingerprint(claim)


def write_metadata(out_dir: Path, profile: Profile) -> None:
    from theory_checks.registry import CLAIM_DB

    registered = [{"id": c.id, "paper": c.paper, "reference": c.reference, "kind": c.kind,
                   "statement": c.statement, "estimators": list(c.estimators),
                   "expected": c.expected} for c in CLAIM_DB]
    meta = {"git_commit": git_commit(), "versions": package_versions(),
            "profile": dataclasses.asdict(profile),
            "hypothesis": "seed = sha256(claim id), no database",
            "written": time.strftime("%Y-%m-%dT%H:%M:%S"), "claims_registered": registered}
    _atomic_write(out_dir / "metadata.json", json.dumps(meta, indent=2))


def run_claims(
    claims: Iterable[Claim], out_dir: Path, profile: Profile, resume: bool = True,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run every claim (skipping finished ones when ``resume``), write results, return summaries."""
    from tqdm import tqdm

    runs = claim_runs(claims)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_metadata(out_dir, profile)
    summaries = []
    bar = tqdm(runs, desc="claims", unit="claim", disable=not progress)
    for claim, estimator in bar:
        run_id = claim.id if estimator == claim.estimators[0] else f"{claim.id}@{estimator}"
        bar.set_postfix_str(run_id)
        if not (resume and is_done(claim, out_dir, profile, run_id)):
            write_claim_result(run_claim(claim, profile, estimator=estimator), out_dir, profile)
        summaries.append(json.loads((out_dir / "claims" / f"{run_id}.json").read_text()))
    return summaries
