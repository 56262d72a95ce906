"""The whole-row elementwise products (:func:`problems._rows.loop_matvec`,
:func:`problems._rows.loop_rmatvec`) give torch's batched products bit for bit, signed zeros
included, where :func:`problems._rows.loop_form` says they are used; HGP's curvature products
take them there."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from problems._rows import LOOP_FORM_COLUMNS
from problems._rows import loop_form
from problems._rows import loop_matvec
from problems._rows import loop_rmatvec
from problems._rows import matvec
from problems._rows import rmatvec
from tests._bitwise import assert_bitwise_equal
from tests._bitwise import binade_values


def _values(rng: np.random.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.as_tensor(binade_values(rng, shape))


# up to 4 x 4 (past LOOP_FORM_COLUMNS too: the identity holds wherever the kernel is the loop)
@pytest.mark.parametrize(("m", "n"), list(itertools.product(range(1, 5), range(1, 5))))
def test_loop_products_are_the_batched_products(m: int, n: int):
    rng = np.random.default_rng(10 * m + n)
    rows = 4096
    matrices = _values(rng, (rows, m, n))
    right, left = _values(rng, (rows, n)), _values(rng, (rows, m))
    assert_bitwise_equal(loop_matvec(matrices, right), matvec(matrices, right))
    assert_bitwise_equal(loop_rmatvec(matrices, left), rmatvec(matrices, left))
    assert_bitwise_equal(loop_rmatvec(matrices, -left), rmatvec(matrices, -left))


def test_sums_of_negative_zeros_are_positive_zeros():
    """Every term ``-0``: the kernel's sum from ``+0`` is ``+0``, and so is the loop form's."""
    matrices = torch.full((8, 2, 2), -0.0, dtype=torch.float64)
    vectors = torch.ones(8, 2, dtype=torch.float64)
    for got, expected in (
        (loop_matvec(matrices, vectors), matvec(matrices, vectors)),
        (loop_rmatvec(matrices, vectors), rmatvec(matrices, vectors)),
    ):
        assert_bitwise_equal(got, expected)
        assert not bool(torch.signbit(got).any())


def test_loop_form_is_used_only_where_it_is_the_kernel_and_pays():
    small = torch.zeros(5, LOOP_FORM_COLUMNS, LOOP_FORM_COLUMNS, dtype=torch.float64)
    vectors = torch.zeros(5, LOOP_FORM_COLUMNS, dtype=torch.float64)
    assert loop_form(small, vectors)
    wide = torch.zeros(5, LOOP_FORM_COLUMNS, LOOP_FORM_COLUMNS + 1, dtype=torch.float64)
    assert not loop_form(wide, vectors)
    assert not loop_form(small.float(), vectors.float())  # another dtype: the product itself
    assert not loop_form(small, vectors[0])  # a shared vector: one product over stacked rows
    assert not loop_form(small.requires_grad_(), vectors)
