"""Many of a design's generators at once: ``[design.rng(*key) for key in keys]``, made faster.

A statistical check whose replicates each draw from a stream of their own (``design.rng(r)``:
FedNest's (14b) draws, Theorem 1's FBO-AggITD runs, the K-rate runs) makes a generator per
replicate and calibration seed. ``np.random.default_rng(entropy)`` costs about 30 us, most of
it NumPy's :class:`~numpy.random.SeedSequence` hashing the entropy word by word, which for the
(14b) check is a third of a seed's time. :func:`design_rngs` hashes every key's entropy at
once, as arrays, by SeedSequence's own algorithm (NumPy's ``bit_generator.pyx``, whose output
NumPy keeps stable across versions), and seeds each :class:`~numpy.random.PCG64` with the
words SeedSequence would hand it (:class:`_SeedWords`). So generator ``i`` is in the state
``design.rng(*keys[i])`` starts in, and draws the same numbers (``tests/test_streams.py``
compares states and draws on entropies of every length the designs make and more).
What differs: the generators' ``bit_generator.seed_seq`` is a :class:`_SeedWords`, which cannot
``spawn`` (no check spawns a design's generator).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.random.bit_generator import ISeedSequence

from theory_checks.decision import Design

# SeedSequence's constants (NumPy's bit_generator.pyx, after Melissa O'Neill's seed_seq)
_POOL = 4
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_MASK32 = 0xFFFFFFFF
_SHIFT = np.uint32(16)
# PCG64 is seeded by 4 uint64 words, which it asks SeedSequence for as 8 uint32 words
_STATE_WORDS = 8
#: Fewer keys than this are made one by one (``design.rng``): the array arithmetic's fixed cost
#: (about 0.2 ms) is then more than it saves (about 20 us a generator).
FEWEST_KEYS = 16


class _SeedWords(ISeedSequence):
    """A seed sequence that hands a bit generator the words it was given (those the real
    SeedSequence of the same entropy generates)."""

    def __init__(self, words: np.ndarray) -> None:
        self.words = words

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words != _STATE_WORDS // 2 or dtype is not np.uint64:
            raise ValueError("these words seed a PCG64 (4 uint64 words) only")
        return self.words


def design_rngs(design: Design, keys: Sequence[tuple[int, ...]]) -> list[np.random.Generator]:
    """``[design.rng(*key) for key in keys]``: the same generators, each a generator of its
    own, in the same states (their entropy hashed for all keys at once)."""
    if len(keys) < FEWEST_KEYS or not all(v >= 0 for v in design.entropy(*_flat(keys))):
        return [design.rng(*key) for key in keys]  # (NumPy says what is wrong with a key)
    prefix = _entropy_words(design.entropy())
    words = [prefix + _entropy_words([int(k) for k in key]) for key in keys]
    state = np.empty((len(words), _STATE_WORDS // 2), dtype=np.uint64)
    for length in {len(w) for w in words}:
        rows = [i for i, w in enumerate(words) if len(w) == length]
        state[rows] = seed_words(np.array([words[i] for i in rows], dtype=np.uint32))
    seeds: list[Any] = [_SeedWords(row) for row in state]  # a seed sequence numpy's types omit
    return [np.random.Generator(np.random.PCG64(seed)) for seed in seeds]


def _flat(keys: Sequence[tuple[int, ...]]) -> list[int]:
    return [k for key in keys for k in key]


def _entropy_words(entropy: list[int]) -> list[int]:
    """SeedSequence's entropy words of a list of non-negative integers: each integer's 32-bit
    words, least significant first (one word 0 for 0), concatenated."""
    words: list[int] = []
    for value in entropy:
        words.append(value & _MASK32)
        value >>= 32
        while value:
            words.append(value & _MASK32)
            value >>= 32
    return words


def seed_words(entropy: np.ndarray) -> np.ndarray:
    """``SeedSequence(entropy[b]).generate_state(4, np.uint64)`` for every row ``b`` of the
    ``(B, L)`` uint32 entropy words: ``(B, 4)`` uint64. Unsigned 32-bit arithmetic wraps as
    SeedSequence's C arithmetic does."""
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK32
        value = value * np.uint32(hash_const)
        return value ^ (value >> _SHIFT)

    def mix(x: Any, y: Any) -> Any:
        result = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return result ^ (result >> _SHIFT)

    batch, length = entropy.shape
    zero = np.zeros(batch, dtype=np.uint32)
    pool = [hashmix(entropy[:, i] if i < length else zero) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL, length):
        for dst in range(_POOL):
            pool[dst] = mix(pool[dst], hashmix(entropy[:, src]))
    hash_const = _INIT_B
    out = []
    for i in range(_STATE_WORDS):
        value = pool[i % _POOL] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK32
        value = value * np.uint32(hash_const)
        out.append(value ^ (value >> _SHIFT))
    # little-endian pairs of uint32 words as uint64 (SeedSequence's view '<u4' -> '<u8')
    low = np.stack(out[0::2], axis=1).astype(np.uint64)
    high = np.stack(out[1::2], axis=1).astype(np.uint64)
    return low | (high << np.uint64(32))


__all__ = ["design_rngs", "seed_words"]
