"""For a researcher's own test suite: assert that an estimator satisfies the testbed's claims.

.. code-block:: python

    from testbed_app.testing import assert_claims_hold

    def test_my_variant(tmp_path):
        assert_claims_hold("my-horner-aid", results=tmp_path)            # every declared claim
        assert_claims_hold("my_pkg.entries:ENTRY", claims=["classical.gd.linear_rate"])

False failures: a deterministic claim compares float64 quantities with round-off tolerances
(``theory_checks/tolerances.py``), so a correct estimator fails it only through a defect of the
claim; a statistical claim is decided at its stated family-wise false-failure rate over all its
cases (``Claim.false_fail_rate``, 1e-3 unless the claim says otherwise) with a failure confirmed
on fresh seeds. Over several statistical claims the chance that a correct estimator fails any of
them is at most the sum of their rates (Bonferroni): 1e-3 per claim. A claim the fast budget
cannot decide is reported "undecided" and fails the assertion with that word, never as "fails".
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testbed.info import EstimatorInfo
from testbed_app.verify import failures
from testbed_app.verify import verdict_table
from testbed_app.verify import verify
from theory_checks.profiles import get_profile
from theory_checks.settings import RunSettings
from theory_checks.settings import use_settings


def assert_claims_hold(
    target: str | EstimatorInfo,
    claims: Sequence[str] | None = None,
    *,
    profile: str | None = None,
    results: Path | None = None,
) -> list[dict[str, Any]]:
    """Run ``claims`` (default: every claim ``target`` declares) on ``target`` and raise an
    ``AssertionError`` naming each claim whose verdict is not the expected one; returns the
    run summaries. ``target``: a registry or plugin name, ``module:object``, or an entry.

    A researcher's test is an entry point: this puts the testbed's settings in force (float64
    on the CPU, the installed plugins loaded, the precision policy; ``profile``: ``fast`` or
    ``thorough``, default ``$TESTBED_PROFILE`` else ``fast``) before it runs the claims."""
    settings = use_settings(RunSettings(profile=get_profile(profile)))
    folder = Path(results) if results is not None else Path(tempfile.mkdtemp(prefix="verify-"))
    _, summaries = verify(target, folder, settings.profile, claims, resume=False, progress=False)
    failed = failures(summaries)
    assert not failed, "claims not holding: " + "; ".join(failed) + "\n" + verdict_table(summaries)
    return summaries


__all__ = ["assert_claims_hold"]
