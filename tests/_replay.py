"""Shared assertion of the perturbation tests: a failing claim's counterexample is saved as data,
rebuilds the same problem, and fails the same check again (on fresh seeds, when statistical)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from problems import from_spec
from theory_checks.claim import Claim
from theory_checks.runner import ClaimResult
from theory_checks.runner import Profile
from theory_checks.runner import replay_counterexample
from theory_checks.runner import run_claim
from theory_checks.runner import write_claim_result


def assert_saved_and_replays(
    result: ClaimResult, make: Callable[..., Any], tmp_path: Path, profile: Profile
) -> None:
    """``result`` failed; its counterexample is written, rebuilt exactly, and fails again."""
    claim, ce = result.claim, result.counterexample
    assert ce is not None and ce.outcome == "fails"
    write_claim_result(result, tmp_path, profile)
    saved = json.loads((tmp_path / "counterexamples" / f"{result.run_id}.json").read_text())
    assert saved["problem_id"] == ce.problem_id
    rebuilt = from_spec(saved["spec"])
    npz = tmp_path / "counterexamples" / f"{result.run_id}.npz"
    if not hasattr(rebuilt, "to_arrays"):
        # a workload recipe (a paper's table at its scale): its spec rebuilds it from the data,
        # and no arrays are saved beside it
        assert not npz.exists() and rebuilt.spec() == ce.spec
    else:
        with np.load(npz) as arrays:
            for key, value in rebuilt.to_arrays().items():
                np.testing.assert_array_equal(arrays[key], value)
    again = replay_counterexample(claim, saved, make)
    assert again.outcome == "fails", (claim.id, again.outcome)
    if claim.statistical:
        # re-confirmed on streams that the saving run never drew from
        assert again.design is not None and again.design.seed != ce.design.seed


def assert_perturbation_detected(
    claim: Claim, make: Callable[..., Any], tmp_path: Path, profile: Profile
) -> None:
    """The claim, checked on a deliberately wrong estimator ``make``, fails as stated, and its
    counterexample is saved and replays (:func:`assert_saved_and_replays`)."""
    result = run_claim(claim, profile, make=make)
    assert result.verdict == "fails as stated", (claim.id, result.verdict)
    assert_saved_and_replays(result, make, tmp_path, profile)
