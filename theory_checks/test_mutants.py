"""Every mutant of the catalogue (:mod:`theory_checks.mutants`) against the claims that concern
it, on the running profile: killed by some claim, or, declared equivalent, by none (the
``theory`` tier; ``tox -e theory`` runs it on the thorough profile). The cheap subset is also
killed in the default test run (tests/test_mutation.py)."""

from __future__ import annotations

import pytest

from theory_checks.mutants import MUTANT_DB
from theory_checks.mutation import KILLED
from theory_checks.mutation import as_expected
from theory_checks.mutation import run_mutant
from theory_checks.runner import get_profile


@pytest.mark.theory
@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANT_DB, ids=[m.name for m in MUTANT_DB])
def test_mutant_is_killed_or_equivalent(mutant):
    record = run_mutant(mutant, get_profile())
    assert as_expected(record), (
        f"{mutant.name}: {record['status']}"
        + (f" by {record['killed_by']}" if record["status"] == KILLED else "")
        + "; runs: "
        + "; ".join(f"{r['claim']}: {r['verdict']}" for r in record["runs"])
    )
