"""A block of calibration seeds checked on one search's cases (:mod:`theory_checks.seed_blocks`):
each seed's result, as written to its results files, is what its own run gives, also where a
seed could not measure a case the first seed measured (it then searches on its own)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

from problems import QuadraticBilevel
from tests.test_hypotheses_readings import toy_claim
from theory_checks import seed_blocks
from theory_checks.calibration import CalibrationBlock
from theory_checks.calibration import CalibrationTask
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim_results import render_claim_result
from theory_checks.decision import Design
from theory_checks.decision import StatTest
from theory_checks.decision import batch_evidence
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import Reading
from theory_checks.hypotheses import at_least
from theory_checks.registry import get_claim
from theory_checks.replicates import seed_batch
from theory_checks.runner import ClaimRun
from theory_checks.runner import Profile
from theory_checks.runner import get_profile
from theory_checks.runner import run_claim
from theory_checks.seed_blocks import check_block

PROFILE = Profile("fast", 6)
# Why 400 draws and bound 0.5: at the toy's case rate a mean of 400 unit Gaussians is decided
# "holds" below about 0.31 and "fails" above about 0.69, so on seeds 0-11 a true mean of 0 holds,
# 0.3 holds on some seeds and is undecided on others, and 0.7 fails (a confirmed failure stops a
# seed's measuring), with some first-stage failures unconfirmed: the seeds take every path.
DRAWS = 400
BOUND = 0.5


def _recorded(result, profile=PROFILE) -> dict:
    """Everything a run writes (claim JSON, series CSV, counterexample arrays), but the time."""
    files = render_claim_result(result, profile)
    out = {}
    for name, data in files.items():
        if name.endswith(".json"):
            record = json.loads(data)
            out[name] = {k: v for k, v in record.items() if k not in ("seconds", "seal")}
        else:
            out[name] = data
    return out


def _toy_check(claim: Claim, case: Case, make, design: Design) -> Measurement:
    """E X <= BOUND (times the reading's scale) for X Gaussian around the estimator's mean; a
    stream whose first uniform is below 0.05 cannot measure the case (so seeds differ in which
    cases they can measure)."""
    if design.rng(1).random() < 0.05:
        raise NotMeasurable("an unlucky stream")
    bound = BOUND * case.params.get("scale", 1.0)
    values = make().mean + design.rng(0).standard_normal(DRAWS)
    evidence = batch_evidence(values)
    return Measurement(
        evidence.estimate, bound, True, "mean <=", tests=(StatTest("mean", evidence, high=bound),)
    )


class _Gaussian:
    def __init__(self, mean: float) -> None:
        self.mean = mean


def _builder(mean: float):
    """The toy estimator's builder: its values are Gaussian around ``mean``."""

    def make(**_: object) -> _Gaussian:
        return _Gaussian(mean)

    return make


# The cases whose hypotheses were evaluated (by id), while COUNTING is set.
MARGIN_CALLS: list[int] = []
COUNTING: list[bool] = [True]


def _counted_margin(case: Case) -> float:
    if COUNTING[0]:
        MARGIN_CALLS.append(id(case))
    return at_least(case.problem.constants().mu, 0.05)


def _toy_claim(**kw) -> Claim:
    """A statistical claim on the readings test's toy problems (:func:`toy_claim`)."""
    return toy_claim(
        **{
            "id": "toy.block_mean",
            "statement": "E X <= 1/2",
            "strategy": lambda: st.builds(
                lambda seed: Case(QuadraticBilevel.random(1, 1, 1, 1.0, seed=seed), {}),
                st.integers(0, 50),
            ),
            "check": _toy_check,
            "decision": "statistical",
            "max_examples": 6,
            "hypotheses": (Hypothesis("toy mu", "mu >= 0.05", "test", _counted_margin),),
            **kw,
        }
    )


@pytest.mark.parametrize(
    ("mean", "verdicts"),
    [(0.0, {"holds"}), (0.3, {"holds", "undecided"}), (0.7, {"fails as stated"})],
)
def test_each_seed_of_a_block_records_what_it_records_alone(monkeypatch, mean, verdicts):
    """Seeds 0-11 of a toy claim whose measurability depends on the stream: a block gives each
    seed the files its own run writes; seeds that disagree with the first on a case run their
    own search; the hypotheses are evaluated once per drawn case, not once per seed."""
    claim, seeds = _toy_claim(), tuple(range(12))
    make = _builder(mean)
    alone = [run_claim(claim, PROFILE, make=make, calibration_seed=k) for k in seeds]
    searches = []
    own_search = seed_blocks.check_drawn_cases

    def search_alone(run):
        searches.append(run.calibration_seed)
        COUNTING[0] = False  # a seed's own search evaluates its own cases' hypotheses
        try:
            return own_search(run)
        finally:
            COUNTING[0] = True

    monkeypatch.setattr(seed_blocks, "check_drawn_cases", search_alone)
    MARGIN_CALLS.clear()
    together = check_block(ClaimRun(claim, PROFILE, make, None, 0), seeds)
    assert [_recorded(r) for r in together] == [_recorded(r) for r in alone]
    assert [r.calibration_seed for r in together] == list(seeds)
    # the streams make some seeds disagree with seed 0 (they search alone), not all of them
    assert 0 < len(searches) < len(seeds) - 1
    assert {r.verdict for r in alone} == verdicts
    assert mean < 0.7 or any(r.unconfirmed for r in alone)
    # the block's search evaluated each drawn case's hypotheses once for all its seeds
    assert MARGIN_CALLS and len(MARGIN_CALLS) == len(set(MARGIN_CALLS))


def test_later_blocks_replay_the_first_blocks_cases(monkeypatch):
    """A process's later blocks of a claim replay the cases of its first block's search (no
    search of their own, but for seeds that disagree with it): each seed's files are still its
    own run's, in the first block and the later ones."""
    claim, make, blocks = _toy_claim(), _builder(0.3), [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]
    alone = [run_claim(claim, PROFILE, make=make, calibration_seed=k) for b in blocks for k in b]
    block_searches = []
    own_search = seed_blocks.search

    def counted(*args):
        block_searches.append(args)
        return own_search(*args)

    monkeypatch.setattr(seed_blocks, "search", counted)
    together = [r for b in blocks for r in check_block(ClaimRun(claim, PROFILE, make, None, 0), b)]
    assert [_recorded(r) for r in together] == [_recorded(r) for r in alone]
    assert len(block_searches) == 1


def test_a_block_of_a_claim_with_readings_records_what_each_seed_records_alone():
    """Readings: one search per reading for the block, each seed's verdict over its readings."""
    claim = _toy_claim(
        readings=(
            Reading("strict", "E X <= 1/2", {"scale": 1.0}),
            Reading("lenient", "E X <= 3/2", {"scale": 3.0}),
        )
    )
    make = _builder(0.7)  # fails as stated strictly, holds leniently
    seeds = (3, 4, 5, 6)
    alone = [run_claim(claim, PROFILE, make=make, calibration_seed=k) for k in seeds]
    together = check_block(ClaimRun(claim, PROFILE, make, None, seeds[0]), seeds)
    assert [_recorded(r) for r in together] == [_recorded(r) for r in alone]
    assert [[r.verdict for r in result.readings] for result in together] == [
        ["fails as stated", "holds"]
    ] * len(seeds)


def test_a_check_that_raises_in_a_later_seed_raises_as_it_would_alone():
    """A later seed whose check raises is checked by its own search, which raises the same."""

    def check(claim, case, make, design):
        if design.seed[1] == 2:
            raise ZeroDivisionError("seed 2's check")
        return _toy_check(claim, case, make, design)

    claim, make = _toy_claim(check=check), _builder(0.0)
    with pytest.raises(ZeroDivisionError, match="seed 2's check"):
        run_claim(claim, PROFILE, make=make, calibration_seed=2)
    with pytest.raises(ZeroDivisionError, match="seed 2's check"):
        check_block(ClaimRun(claim, PROFILE, make, None, 0), (0, 1, 2, 3))


def test_a_calibration_block_gives_each_seed_its_own_record():
    """CalibrationBlock (one search, seed_batch) records per seed what CalibrationTask records."""
    claim, make, seeds = _toy_claim(), _builder(0.3), (5, 6, 7, 8)
    block = CalibrationBlock(claim.id, seeds, PROFILE, make=make, claim=claim)()
    singles = [CalibrationTask(claim.id, k, PROFILE, make=make, claim=claim)() for k in seeds]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in block] == [
        {k: v for k, v in r.items() if k != "seconds"} for r in singles
    ]
    assert all(np.isfinite(r["seconds"]) and r["seconds"] >= 0 for r in block)


# The statistical claims whose calibration the batched path serves (benchmarks/
# calibration_seeds.py) and the one with readings (2 seeds: ~20 s a seed on a loaded core): each
# seed's files in a block (seed_batch and one search) equal its unbatched run's.
CLAIMS = (
    ("hgp.stochastic.unbiased", (0, 1, 2)),
    ("hgp.noise.sqrt_eta", (0, 1, 2)),
    ("fednest.lemma22.abs_error_per_sample", (0, 1, 2)),
    ("fednest.lemma22.abs_error_as_stated", (0, 1)),
    ("aggitd.thm1.rate_in_K", (0, 1, 2)),
)


@pytest.mark.slow
@pytest.mark.parametrize(("claim_id", "seeds"), CLAIMS)
def test_a_calibration_block_records_what_each_seed_records_alone(claim_id, seeds):
    torch.set_default_dtype(torch.float64)
    claim, profile = get_claim(claim_id), get_profile("fast")
    alone = [run_claim(claim, profile, calibration_seed=k) for k in seeds]
    with seed_batch(seeds) as block:
        together = check_block(ClaimRun(claim, profile, None, None, seeds[0]), seeds)
    assert [_recorded(r, profile) for r in together] == [_recorded(r, profile) for r in alone]
    if claim_id.startswith(("hgp.", "aggitd.")):
        assert block.batched_runs > 0  # the replicates were computed as one batch
