"""The batched calibration path (:mod:`theory_checks.replicates`): a block of seeds gives each
seed the records and numbers its unbatched run gives, and its replicates are drawn from each
seed's own streams."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from testbed.federation.replicates import NotBatchable
from testbed.federation.replicates import StackedGenerator
from theory_checks.calibration import CalibrationBlock
from theory_checks.calibration import CalibrationTask
from theory_checks.calibration import PendingBlocks
from theory_checks.calibration import PendingTasks
from theory_checks.decision import first_design
from theory_checks.registry import get_claim
from theory_checks.replicates import calibration_seed_of
from theory_checks.replicates import replicated
from theory_checks.replicates import seed_batch
from theory_checks.replicates import shared
from theory_checks.replicates import sibling
from theory_checks.runner import get_profile
from theory_checks.runner import run_claim

# The cheapest statistical claim whose check draws its replicates through the batch hook
# (theory_checks.hgp.common.replica_estimates): ~0.5 s a seed on one core.
BATCHED_CLAIM = "hgp.stochastic.unbiased"


def test_a_stacked_draw_is_each_generators_own_draw():
    """Block k of a stacked draw is what generator k gives for the unbatched shape."""
    seeds = [3, 7, 11]
    stacked = StackedGenerator([np.random.default_rng(s) for s in seeds], rows=4)
    ints = stacked.integers(0, 16, size=(12, 2))
    normal = stacked.standard_normal(size=(12, 3))
    uniform = stacked.random(size=12)
    for k, s in enumerate(seeds):
        own = np.random.default_rng(s)
        np.testing.assert_array_equal(ints[4 * k : 4 * k + 4], own.integers(0, 16, size=(4, 2)))
        np.testing.assert_array_equal(normal[4 * k : 4 * k + 4], own.standard_normal((4, 3)))
        np.testing.assert_array_equal(uniform[4 * k : 4 * k + 4], own.random(4))


@pytest.mark.parametrize("high", [2, 5, 16, 17, 2**31 + 5, 2**40 + 3])
def test_a_stacked_draw_of_one_value_a_generator_is_each_generators_own_draw(high: int):
    """One value a generator (the (14b) check's replicates: one client, b = 1) is drawn by
    numpy's scalar draw: the values, dtype and streams of the array draw of one element, over
    many generators and with other draws in between."""
    stacked_generators = [np.random.default_rng([s, 5]) for s in range(200)]
    own = [np.random.default_rng([s, 5]) for s in range(200)]
    stacked = StackedGenerator(stacked_generators, rows=1)
    for step in range(6):
        for block in ((1, 1), (1,)):
            drawn = stacked.integers(step % 2, high, size=(200, *block[1:]))
            expected = np.concatenate([g.integers(step % 2, high, size=block) for g in own])
            assert drawn.dtype == expected.dtype and drawn.shape == expected.shape
            np.testing.assert_array_equal(drawn, expected)
        wide = np.concatenate([g.integers(0, 9, size=(1, 3)) for g in own])
        np.testing.assert_array_equal(stacked.integers(0, 9, size=(200, 3)), wide)
    for g, h in zip(stacked_generators, own, strict=True):
        assert g.bit_generator.state == h.bit_generator.state


def test_a_draw_without_the_stacked_axis_is_refused():
    """A draw shared by every replicate (its leading axis is not K blocks of rows) has no
    stacked form: it raises, and the computation runs unbatched."""
    stacked = StackedGenerator([np.random.default_rng(0), np.random.default_rng(1)], rows=4)
    with pytest.raises(NotBatchable):
        stacked.integers(0, 16, size=(4, 2))  # one run's clients, not 2 x 4 rows
    with pytest.raises(NotBatchable):
        stacked.permutation(8)


def test_a_sibling_design_is_the_other_seeds_design():
    """The design of calibration seed k is the runner's own for seed k, at every case and
    stage (the layout replicates.sibling relies on)."""
    for k in (0, 1, 299):
        mine = first_design(1234, 5, 1e-3, "fast").for_case("case A")
        theirs = first_design(1234, k, 1e-3, "fast").for_case("case A")
        assert sibling(mine, k) == theirs and calibration_seed_of(theirs) == k
        assert sibling(mine.confirmation(), k) == theirs.confirmation()


def test_replicated_serves_each_seed_its_own_stream():
    """In a block, the first seed's call runs every seed's replicates at once and each seed
    gets what its own unbatched call gives; outside a block, the plain call."""
    designs = [first_design(9, k, 1e-3, "fast").for_case("c") for k in range(3)]
    calls = []

    def run(rng, replicates):
        calls.append(replicates)
        return rng.standard_normal(size=(replicates * 2, 3)).reshape(replicates, 2, 3)

    plain = [replicated(run, 5, d, 0, 2, "c") for d in designs]
    assert calls == [5, 5, 5]
    calls.clear()
    with seed_batch(range(3)) as block:
        batched = [replicated(run, 5, d, 0, 2, "c") for d in designs]
        assert shared("x", lambda: [1]) is shared("x", lambda: [2])
    assert calls == [15] and block.batched_runs == 1
    for p, b in zip(plain, batched, strict=True):
        np.testing.assert_array_equal(p, b)


def _numbers(result):
    """Every recorded number of a run: each case's measurement and decisions, exactly."""
    return [
        (c.problem_id, repr(c.measurement), [repr(d) for d in c.decisions], c.outcome)
        for c in [*result.cases, *result.undecided]
    ]


@pytest.mark.slow
def test_a_block_of_seeds_records_what_each_seed_records_alone():
    """Per-seed verdicts, counts and every measured number of the batched path equal the
    unbatched path's (hgp.stochastic.unbiased, seeds 0-2), and the block did batch."""
    torch.set_default_dtype(torch.float64)
    claim, profile, seeds = get_claim(BATCHED_CLAIM), get_profile("fast"), (0, 1, 2)
    alone = [run_claim(claim, profile, calibration_seed=k) for k in seeds]
    with seed_batch(seeds) as block:
        together = [run_claim(claim, profile, calibration_seed=k) for k in seeds]
    assert block.batched_runs > 0  # the replicates were computed as one batch
    for a, t in zip(alone, together, strict=True):
        assert a.verdict == t.verdict and _numbers(a) == _numbers(t)
    records = CalibrationBlock(claim.id, seeds, profile, claim=claim)()
    singles = [CalibrationTask(claim.id, k, profile, claim=claim)() for k in seeds]
    drop = "seconds"
    assert [{k: v for k, v in r.items() if k != drop} for r in records] == [
        {k: v for k, v in r.items() if k != drop} for r in singles
    ]


def test_pending_blocks_cover_the_pending_seeds_in_order():
    """Blocks hold the seeds not yet recorded, claim by claim, at most BLOCK seeds each, and
    are built when asked for."""
    from theory_checks.registry import CLAIM_DB

    claims = [c for c in CLAIM_DB if c.statistical][:2]
    tasks = PendingTasks(
        claims, 10, get_profile("fast"), "float64", None, {claims[0].id: [0, 2, 5]}
    )
    blocks = PendingBlocks(tasks, block=3)
    assert [(b.claim_id, b.seeds) for b in blocks] == [
        (claims[0].id, (1, 3, 4)),
        (claims[0].id, (6, 7, 8)),
        (claims[0].id, (9,)),
        (claims[1].id, (0, 1, 2)),
        (claims[1].id, (3, 4, 5)),
        (claims[1].id, (6, 7, 8)),
        (claims[1].id, (9,)),
    ]
    huge = PendingBlocks(PendingTasks(claims, 10**9, get_profile("fast"), "float64", None, {}))
    assert huge[-1].seeds[-1] == 10**9 - 1 and len(huge) == 2 * -(-(10**9) // 16)


def test_a_run_that_cannot_be_stacked_runs_each_seed_alone():
    """A stacked run that raises (a draw without the replicate axis) is not retried: each seed
    of the block computes its own replicates, the numbers its unbatched call gives."""
    designs = [first_design(9, k, 1e-3, "fast").for_case("c") for k in range(3)]
    calls = []

    def run(rng, replicates):
        calls.append(replicates)
        if isinstance(rng, StackedGenerator):
            rng.integers(0, 4, size=(2, 2))  # one draw for the whole run: not stackable
        return rng.standard_normal(size=(replicates, 3))

    plain = [replicated(run, 5, d, 0, 1, "c") for d in designs]
    calls.clear()
    with seed_batch(range(3)) as block:
        alone = [replicated(run, 5, d, 0, 1, "c") for d in designs]
    assert calls == [15, 5, 5, 5] and block.batched_runs == 0
    for p, a in zip(plain, alone, strict=True):
        np.testing.assert_array_equal(p, a)
