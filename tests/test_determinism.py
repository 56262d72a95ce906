"""Hypothesis draws of the claim runner depend on the seed only (see theory_checks.determinism):
the same claim seed draws the same cases in a fresh process whatever local modules the process
has imported, here one full of constants inside the ranges the claims draw from (hypothesis
>= 6.131 mixes such constants into its draws; with the scraping on, this test's two draws
differed for both claims, 2026-11-28). Public API only: ``given``, ``seed``, ``settings``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._python_runs import run_python

#: a local module (not under site-packages, not a test file) whose constants a scraping
#: hypothesis would mix into the draws: floats in (0, 10), integers past its +-100 floor
CONSTANTS = """VALUES = [0.11, 0.23, 0.37, 0.41, 0.53, 0.67, 0.79, 0.83, 0.97, 1.13, 1.27, 2.5, 3.5,
    4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 101, 103, 107, 109, 113, 127, 131, 1e-3, 1e-2, 2e-3, 3e-4,
    0.011, 0.013, 0.017, 0.019, 0.29, 0.31, 0.43, 0.47, 0.59, 0.61, 0.71, 0.73]
"""

#: draws a claim's cases with the runner's seed; after importing ``constants_heavy`` when asked
DRAW = """
import importlib, json, sys
from hypothesis import HealthCheck, Phase, given, seed, settings
from theory_checks.registry import get_claim
from theory_checks.runner import claim_seed
claim = get_claim(sys.argv[1])
if sys.argv[2] == "more":
    sys.path.insert(0, sys.argv[3])
    importlib.import_module("constants_heavy")
drawn = []
@seed(claim_seed(claim.id))
@settings(max_examples=20, database=None, deadline=None, phases=(Phase.generate,),
          suppress_health_check=list(HealthCheck))
@given(claim.cases("fast"))
def collect(case):
    drawn.append([case.problem.id, repr(sorted(case.params.items()))])
collect()
print(json.dumps(drawn))
"""


def _drawn(claim_id: str, imports: str, folder: Path) -> list[list[str]]:
    done = run_python(DRAW, claim_id, imports, str(folder))
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", ["classical.gd.linear_rate", "fednest.fedinn.linear_rate"])
def test_a_seed_draws_the_same_cases_whatever_local_modules_are_imported(
    claim_id: str, tmp_path: Path
) -> None:
    (tmp_path / "constants_heavy.py").write_text(CONSTANTS)
    plain = _drawn(claim_id, "plain", tmp_path)
    assert len(plain) == 20
    assert _drawn(claim_id, "more", tmp_path) == plain
