"""Inputs and an assertion for the tests that compare two computations bit for bit: values over
many binades with exact zeros of both signs, and equality of the numbers and of the signs of
their zeros (``torch.equal`` reads ``-0`` and ``+0`` as equal)."""

from __future__ import annotations

import numpy as np
import torch


def binade_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal values scaled over many binades (another order of the sums shows in the
    last bits), a tenth of them ``+0`` and a tenth ``-0`` (a plain loop's sums start from
    ``+0``)."""
    values = rng.standard_normal(shape) * np.exp(rng.normal(0.0, 4.0, shape))
    values[rng.random(shape) < 0.1] = 0.0
    values[rng.random(shape) < 0.1] = -0.0
    return values


def assert_bitwise_equal(got: torch.Tensor, expected: torch.Tensor) -> None:
    """The same shape, dtype, numbers and signs of zero."""
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert torch.equal(got, expected)
    assert torch.equal(torch.signbit(got), torch.signbit(expected))
