"""A design's generators made at once (:func:`theory_checks.streams.design_rngs`) are the
generators ``design.rng`` makes: the same states, the same draws, on entropies of every length
the designs make (claim seed, calibration seed, case digest, stage, replicate, horizon) and
integers of one to three 32-bit words. (Minibatches drawn ahead from such generators,
:class:`~testbed.federation.replicates.DrawnAhead`: tests/test_fednest_replicates.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from theory_checks.decision import Design
from theory_checks.streams import FEWEST_KEYS
from theory_checks.streams import design_rngs
from theory_checks.streams import seed_words

SEEDS = (
    (0,),
    (3, 1, 4),
    (2**32 - 1, 2**32, 7),
    (123456789, 299, 2**31 + 5, 0),
    (2**64 + 3, 2**40, 1, 2**32 - 1, 9),
)
KEYS = (
    [(j,) for j in range(40)],
    [(r, h) for r in range(12) for h in range(2)],
    [(0,), (2**33 + 1,), (0, 2**70), (5, 0, 0)] * 5,
)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("keys", KEYS)
def test_design_rngs_are_the_designs_generators(seed, keys):
    design = Design(seed=seed)
    made = design_rngs(design, keys)
    assert len(made) == len(keys)
    assert len({id(g) for g in made}) == len(made)  # each replicate a generator of its own
    for generator, key in zip(made, keys, strict=True):
        own = design.rng(*key)
        assert generator.bit_generator.state == own.bit_generator.state
        assert np.array_equal(generator.integers(0, 16, size=5), own.integers(0, 16, size=5))
        assert generator.integers(0, 7) == own.integers(0, 7)  # a scalar after an array
        assert np.array_equal(generator.standard_normal(3), own.standard_normal(3))


def test_seed_words_are_seed_sequences_words():
    rng = np.random.default_rng(0)
    for length in range(1, 9):
        entropy = rng.integers(0, 2**32, size=(50, length), dtype=np.uint64).astype(np.uint32)
        expected = [
            np.random.SeedSequence([int(v) for v in row]).generate_state(4, np.uint64)
            for row in entropy
        ]
        assert np.array_equal(seed_words(entropy), np.array(expected))


def test_few_keys_and_bad_keys_are_the_designs_own_calls():
    design = Design(seed=(1, 2, 3))
    few = [(j,) for j in range(FEWEST_KEYS - 1)]
    for generator, key in zip(design_rngs(design, few), few, strict=True):
        assert generator.bit_generator.state == design.rng(*key).bit_generator.state
    with pytest.raises(ValueError):  # what numpy says of a negative entropy, as design.rng
        design_rngs(design, [(j,) for j in range(FEWEST_KEYS)] + [(-1,)])
