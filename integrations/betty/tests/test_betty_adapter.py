"""Betty through the testbed: the CG finding confirmed (saved case, fresh seeds, an independent
computation) and the DARTS reading checked against Neumann (the recorded verdicts, the planted
bugs and a missing betty: ``integrations/test_library_adapters.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from testbed.registry import get_estimator
from testbed_app.library_verdicts import fresh_seed_outcomes
from testbed_app.library_verdicts import reproduction_lines
from theory_checks.registry import get_claim
from theory_checks.runner import default_make
from theory_checks.runner import replay_counterexample

HERE = Path(__file__).resolve().parents[1]
CG_FINDING = HERE / "findings" / "classical.cg.exact_after_dim_y@betty-cg.json"


def test_the_cg_finding_replays_from_its_saved_minimal_case():
    saved = json.loads(CG_FINDING.read_text())
    claim = get_claim("classical.cg.exact_after_dim_y")
    again = replay_counterexample(claim, saved, default_make(claim, "betty-cg"))
    assert again.outcome == "fails"
    assert again.measurement.measured == pytest.approx(saved["measured"], rel=1e-9)
    assert saved["spec"]["dim_y"] == 2 and saved["measured"] > 0.1  # 30% on a 2-d problem


def test_the_cg_finding_holds_on_fresh_seeds():
    """On fresh cases, betty's cg with dim_y iterations is wrong (by orders of magnitude more
    than CG's round-off) or not finite (a residual exactly zero, then 0 / 0): at least one case
    per seed."""
    outcomes = fresh_seed_outcomes("classical.cg.exact_after_dim_y", "betty-cg", (101, 102, 103))
    failed = [o for o in outcomes if o["outcome"] == "fails"]
    assert {o["seed"] for o in failed} == {101, 102, 103}, outcomes
    assert all(o["measured"] > 1e3 * o["bound"] or math.isinf(o["measured"]) for o in failed), (
        failed
    )


def test_the_reproduction_in_plain_betty_confirms_it_by_an_independent_computation():
    lines = reproduction_lines(HERE / "repro_cg.py")
    rows = [line.split() for line in lines[1:11]]
    for _, cg5, cg50, neumann in rows:
        assert float(cg5) > 1e-2 and float(cg50) > 1e-2 and float(neumann) < 1e-12
    assert "nan" in lines[11]


def test_darts_is_betty_neumann_with_one_term_and_step_one():
    """The reading the DARTS claim states, checked through betty itself: its darts equals its
    neumann with neumann_iterations = 0 (N = 1 term) and neumann_alpha = 1, to round-off."""
    # L = 1.5: the step 1 that darts implies is inside (0, 2/L), which the estimator checks
    problem = QuadraticBilevel.random(3, 3, 4, condition_number=1.5, seed=5)
    x = torch.linspace(-1.0, 1.0, 3)
    darts = get_estimator("betty-darts").build()
    neumann = get_estimator("betty-neumann").build(neumann_terms=1, neumann_step_size=1.0)
    rng = np.random.default_rng(0)
    a = darts.estimate(problem, x, darts.init(problem), rng).value
    b = neumann.estimate(problem, x, neumann.init(problem), rng).value
    assert float((a - b).norm()) <= 1e-10 * float(b.norm())
