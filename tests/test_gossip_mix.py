"""The graph ledger's gossip (:func:`testbed.decentralized.ledger.mix`) gives torch's batched
product ``A @ payload`` bit for bit: row by row where that product is the CPU kernel's plain loop,
the product itself elsewhere, on every shape the HGP claims draw and more."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.ledger import LOOP_PRODUCT
from testbed.decentralized.ledger import ROW_FORM_COLUMNS
from testbed.decentralized.ledger import ROW_FORM_REPLICAS
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.ledger import mix
from testbed.decentralized.ledger import mix_beside_shared_column
from testbed.decentralized.pushsum import push_sum
from tests._bitwise import assert_bitwise_equal
from tests._bitwise import binade_values


def _product(weights: torch.Tensor, payload: torch.Tensor, keep_all: bool) -> list[torch.Tensor]:
    """The gossip as it was: one batched product a step."""
    out = [payload]
    for A in weights:
        out.append(A @ out[-1])
        if not keep_all:
            del out[0]
    return out if keep_all else out[-1:]


def _payload(rng: np.random.Generator, lead: tuple[int, ...], n: int, size: int, shared: bool):
    """Values over many binades (a different order of the sums shows in the last bits), exact
    zeros of both signs (the kernel's sums start from +0), and a last column that is the same
    in every replica when ``shared`` (Push-Sum's weights)."""
    values = binade_values(rng, (*lead, n, size))
    if shared:
        values[..., -1] = rng.random(n)
    return torch.as_tensor(values)


def _assert_same(got: list[torch.Tensor], expected: list[torch.Tensor]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert_bitwise_equal(a, b)


# clients 1-12 (the claims draw 2-10), payloads of 1-6 floats (d_y + 1 <= 4 in the claims), up
# to 3 steps; products at and past the plain loop's size go to the product itself
@pytest.mark.parametrize(("n", "size"), list(itertools.product(range(1, 13), range(1, 7))))
def test_mix_is_the_batched_product(n: int, size: int):
    rng = np.random.default_rng(100 * n + size)
    leads = ((1,), (3,), (257,), (2, 5), (ROW_FORM_REPLICAS,), (2, ROW_FORM_REPLICAS // 2 + 1))
    for lead, steps, shared in itertools.product(leads, (0, 1, 3), (0, 1)):
        mixings = rng.random((steps, n, n)) * (rng.random((steps, n, n)) < 0.7)
        weights = torch.as_tensor(mixings / np.maximum(mixings.sum(1, keepdims=True), 1e-300))
        payload = _payload(rng, lead, n, size, bool(shared))
        for keep_all in (False, True):
            _assert_same(mix(weights, payload, keep_all), _product(weights, payload, keep_all))


def test_the_plain_loop_bound_is_where_the_product_changes_its_sums():
    """Below ``LOOP_PRODUCT`` multiply-adds the product is the plain loop (the row form equals
    it above); at it, BLAS (fused multiply-adds), which the row form does not reproduce: so the
    bound is the kernel's, and :func:`mix` leaves larger products to it."""
    rng = np.random.default_rng(0)
    n, size = 10, 4  # 400 multiply-adds a replica
    assert n * n * size == LOOP_PRODUCT
    weights = torch.as_tensor(rng.random((1, n, n)))
    payload = torch.as_tensor(rng.standard_normal((64, n, size)))
    rows = payload.transpose(0, 1).reshape(n, -1)
    by_rows = sum((weights[0][:, k, None] * rows[k] for k in range(n)), torch.zeros_like(rows))
    assert not torch.equal(by_rows.reshape(n, 64, size).transpose(0, 1), weights[0] @ payload)
    _assert_same(mix(weights, payload), _product(weights, payload, False))


def test_gossip_counts_and_mixes_as_before():
    """The ledger's counts do not depend on how the steps are computed; its output is the
    product's on a replicated Push-Sum payload with the weights last."""
    n, d, replicas = 4, 3, 50
    mixings = GraphSequence("random_directed", n, 3).mixing(0, 3)
    payload = _payload(np.random.default_rng(1), (replicas,), n, d + 1, shared=True)
    ledger = GraphLedger(n)
    out = ledger.gossip(payload, mixings, keep_all=True)
    weights = torch.as_tensor(mixings)
    _assert_same(out, _product(weights, payload, True))
    assert ledger.steps == 3 and ledger.payload_sizes == {d + 1}
    assert int(ledger.messages_sent.sum()) == replicas * int(
        sum(((m != 0) & ~np.eye(n, dtype=bool)).sum() for m in mixings)
    )


def _assert_same_or_nan(got: list[torch.Tensor], expected: list[torch.Tensor]) -> None:
    """:func:`_assert_same` where NaNs are where the product has them (a NaN's payload bits
    are not compared)."""
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(torch.isnan(a), torch.isnan(b))
        _assert_same([torch.nan_to_num(a, nan=7.0)], [torch.nan_to_num(b, nan=7.0)])


@pytest.mark.parametrize(("n", "size"), [(4, 4), (4, 5), (5, 3), (3, 5)])
def test_zero_weights_with_infinities_and_nans_mix_as_the_product(n: int, size: int):
    """Past :data:`ROW_FORM_COLUMNS` the row form leaves out the zero entries of ``A``, which
    only holds while the rows are finite (``0 x inf`` is NaN): infinities and NaNs in the
    payload, products that overflow, and a step with a zero column (whose row no other sum
    reads) give the product's numbers, NaNs and signed zeros."""
    assert size - 1 > ROW_FORM_COLUMNS
    rng = np.random.default_rng(n + size)
    replicas = ROW_FORM_REPLICAS + 7
    for trial in range(6):
        mixings = rng.random((3, n, n)) * (rng.random((3, n, n)) < 0.5)
        mixings[:, 0, :] += 0.1  # every column weighted ...
        if trial % 3 == 2:
            mixings[1, :, n - 1] = 0.0  # ... or not: a zero column
        weights = torch.as_tensor(mixings / mixings.sum(1, keepdims=True).clip(min=1e-300))
        payload = _payload(rng, (replicas,), n, size, shared=True)
        if trial % 2 == 0:
            payload[rng.integers(replicas), rng.integers(n), 0] = float("inf")
            payload[rng.integers(replicas), rng.integers(n), 1] = float("nan")
        else:
            payload[rng.integers(replicas), rng.integers(n), 0] = 1e308  # overflows in a sum
            payload[rng.integers(replicas), :, 0] = 1e308
        for keep_all in (False, True):
            _assert_same_or_nan(
                mix(weights, payload, keep_all), _product(weights, payload, keep_all)
            )


def test_finite_payloads_leave_out_zero_weights_and_keep_the_products_signed_zeros():
    """The row form past :data:`ROW_FORM_COLUMNS` on payloads of signed zeros only (sums of
    ``-0`` terms are ``+0`` from the product's start at zero) and on a weight matrix with a
    zero row (its client receives ``+0``)."""
    n, size = 4, 4
    replicas = ROW_FORM_REPLICAS
    rng = np.random.default_rng(5)
    signs = np.where(rng.random((replicas, n, size)) < 0.5, -0.0, 0.0)
    signs[..., -1] = 1.0
    mixings = rng.random((2, n, n))
    mixings[:, 2, :] = 0.0
    weights = torch.as_tensor(mixings / mixings.sum(1, keepdims=True))
    for payload in (torch.as_tensor(signs), -torch.as_tensor(signs)):
        _assert_same(mix(weights, payload, True), _product(weights, payload, True))


def test_finite_rows_whose_sum_overflows_mix_as_the_product():
    """The row form tells finite rows by their sum: finite rows of large values whose sum
    overflows are computed again with every entry, and still give the product's numbers."""
    n, size = 4, 4
    assert size - 1 > ROW_FORM_COLUMNS
    rng = np.random.default_rng(11)
    replicas = ROW_FORM_REPLICAS
    mixings = rng.random((2, n, n)) + 0.1
    weights = torch.as_tensor(mixings / mixings.sum(1, keepdims=True))
    payload = torch.as_tensor(1e306 * (1.0 + rng.random((replicas, n, size))))
    payload[..., -1] = torch.as_tensor(rng.random(n))
    got = mix(weights, payload)
    rows = got[-1][..., :-1]
    assert bool(torch.isfinite(rows).all()) and not np.isfinite(float(rows.sum()))
    _assert_same(got, _product(weights, payload, False))


def _assert_same_counts(a: GraphLedger, b: GraphLedger) -> None:
    left, right = a.state_dict(), b.state_dict()
    assert left.keys() == right.keys()
    for key, value in left.items():
        assert np.array_equal(value, right[key]), key


# Push-Sum's payload (values with the weights as a last column) mixed without being built where
# the weights are the same in every replica: the same parts, counts and quotients as the payload
@pytest.mark.parametrize(
    ("n", "size"), list(itertools.product((1, 2, 3, 4, 5, 8, 12), (2, 3, 4, 6)))
)
def test_gossip_weighted_is_the_gossip_of_the_payload(n: int, size: int):
    rng = np.random.default_rng(7 * n + size)
    leads = ((3,), (ROW_FORM_REPLICAS,), (2, ROW_FORM_REPLICAS // 2 + 1))
    for lead, steps, shared in itertools.product(leads, (0, 1, 3), (0, 1)):
        mixings = rng.random((steps, n, n)) * (rng.random((steps, n, n)) < 0.7)
        mixings[:, 0, :] += 0.05  # column-stochastic: every column weighted
        mixings /= mixings.sum(1, keepdims=True)
        payload = _payload(rng, lead, n, size, bool(shared))
        values, omega = payload[..., :-1], payload[..., -1]
        built, parted = GraphLedger(n), GraphLedger(n)
        (mixed,) = built.gossip(payload, mixings)
        z, w = parted.gossip_weighted(values.contiguous(), omega.contiguous(), mixings)
        _assert_same([z, w], [mixed[..., :-1], mixed[..., -1]])
        _assert_same_counts(built, parted)
        beside = mix_beside_shared_column(torch.as_tensor(mixings), values, omega)
        # not built exactly where mix mixes rows and the weights are the same in every replica
        rows = n * n * size < LOOP_PRODUCT and lead != (3,)
        assert (beside is not None) == (rows and bool(shared))
        if shared:  # Push-Sum's quotient from the parts is the payload's (NaN: a client that
            # receives nothing, 0 / 0)
            positive = omega.abs() + 0.5
            result = push_sum(values, mixings, GraphLedger(n), positive)
            (full,) = mix(torch.as_tensor(mixings), torch.cat([values, positive[..., None]], -1))
            _assert_same_or_nan([result.y], [full[..., :-1] / full[..., -1:]])
            # the quotient lies as the numerators do where they are dense (client-major rows:
            # written in place along them), else contiguous
            assert result.y.stride() == torch.empty_like(result.z).stride()
