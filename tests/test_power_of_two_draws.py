"""Bounded integers of a power-of-two range from the bit generator's raw output
(testbed.federation.power_of_two_draws): numpy's own values and states, draw after draw."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.federation.power_of_two_draws import MAX_BITS
from testbed.federation.power_of_two_draws import available
from testbed.federation.power_of_two_draws import draw_into
from testbed.federation.power_of_two_draws import drawable
from testbed.federation.power_of_two_draws import range_bits
from testbed.federation.replicates import StackedGenerator


def test_this_numpy_passes_the_check():
    assert available()


@given(
    seed=st.integers(0, 2**32 - 1),
    bits=st.integers(1, MAX_BITS),
    sizes=st.lists(st.integers(0, 9), min_size=1, max_size=8),
)
def test_values_and_states_are_numpys_draw_after_draw(seed: int, bits: int, sizes: list[int]):
    """Any sequence of draws, of odd and even sizes (so from both states of the kept 32-bit
    half), gives numpy's values and leaves numpy's state, the kept half included."""
    ours, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
    for size in sizes:
        out = np.empty(size, dtype=np.int64)
        draw_into(ours, bits, out)
        np.testing.assert_array_equal(out, numpys.integers(0, 2**bits, size=size))
        assert ours.bit_generator.state == numpys.bit_generator.state
    # and the streams go on alike, through another kind of draw
    assert ours.standard_normal(3).tolist() == numpys.standard_normal(3).tolist()
    assert ours.integers(0, 10, 5).tolist() == numpys.integers(0, 10, 5).tolist()


@pytest.mark.parametrize(
    ("low", "high", "kwargs", "bits"),
    [
        (0, 16, {}, 4),
        (0, np.int64(2), {"dtype": np.int64}, 1),
        (0, 2**32, {}, 32),
        (0, 1, {}, None),  # numpy draws nothing for a range of one value
        (0, 15, {}, None),
        (1, 16, {}, None),
        (0, 2**33, {}, None),
        (0, 16, {"dtype": np.int32}, None),
        (0, 16, {"endpoint": True}, None),
        (0, True, {}, None),
        (0.0, 16, {}, None),
        (0, np.array([16, 16]), {}, None),
    ],
)
def test_only_an_int64_draw_of_a_power_of_two_range_from_zero_is_taken(low, high, kwargs, bits):
    assert range_bits(low, high, kwargs) == bits


def test_only_pcg64_generators_are_drawn_from_the_raw_output():
    assert drawable(np.random.default_rng(0))
    assert not drawable(np.random.Generator(np.random.MT19937(0)))
    assert not drawable(np.random.RandomState(0))


@pytest.mark.parametrize("kind", ["pcg64", "mixed"])
def test_a_stacked_power_of_two_draw_is_each_generators_own(kind: str):
    """StackedGenerator's power-of-two draws (written in place) and its other draws (the
    concatenation, here for a generator without the raw form among them) give block k of each
    draw from generator k, in the same calls, with the same states after."""

    def generators() -> list[np.random.Generator]:
        gens = [np.random.default_rng([s, 3]) for s in range(5)]
        if kind == "mixed":
            gens[2] = np.random.Generator(np.random.MT19937(2))
        return gens

    stacked_generators, own = generators(), generators()
    stacked = StackedGenerator(stacked_generators, rows=3)
    for high, columns in ((16, 4), (16, 1), (2, 3), (7, 2), (2**20, 4)):
        drawn = stacked.integers(0, high, size=(15, columns))
        expected = np.concatenate([g.integers(0, high, size=(3, columns)) for g in own])
        assert drawn.dtype == expected.dtype and drawn.shape == expected.shape
        np.testing.assert_array_equal(drawn, expected)
    for g, h in zip(stacked_generators, own, strict=True):
        np.testing.assert_equal(g.bit_generator.state, h.bit_generator.state)


def test_only_a_contiguous_int64_array_is_written():
    """A strided or other-typed target would be written through a copy, and lost: refused."""
    generator = np.random.default_rng(0)
    with pytest.raises(ValueError, match="contiguous int64"):
        draw_into(generator, 4, np.empty((4, 2), dtype=np.int64)[:, 0])
    with pytest.raises(ValueError, match="contiguous int64"):
        draw_into(generator, 4, np.empty(4, dtype=np.int32))
