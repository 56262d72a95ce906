"""Client splits: partition properties, each scheme's label structure, seeds, the long tail."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from problems.workloads.splits import SCHEMES
from problems.workloads.splits import ClientSplit
from problems.workloads.splits import SplitError
from problems.workloads.splits import long_tail_indices
from problems.workloads.splits import long_tail_profile
from problems.workloads.splits import split_clients


def balanced_labels(n_classes: int, per_class: int, seed: int) -> np.ndarray:
    """``per_class`` samples of each class, in a seeded random order."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(n_classes), per_class))


def uneven_labels(seed: int) -> np.ndarray:
    """1,003 labels over 10 classes with unequal class sizes (like MNIST's)."""
    rng = np.random.default_rng(seed)
    return rng.permutation(np.repeat(np.arange(10), rng.integers(60, 140, 10)))[:1003]


def assert_partition(split: ClientSplit, n: int) -> None:
    everything = np.concatenate(split.indices)
    assert everything.dtype == np.int64
    assert np.unique(everything).shape[0] == everything.shape[0]  # disjoint
    assert everything.min() >= 0 and everything.max() < n


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_partitions_disjointly_and_records_its_histogram(scheme: str) -> None:
    labels = uneven_labels(0)
    split = split_clients(labels, 10, scheme, seed=3)
    assert split.scheme == scheme and split.seed == 3 and split.n_clients == 10
    assert_partition(split, labels.shape[0])
    histogram = split.label_histogram(labels, 10)
    assert histogram.shape == (10, 10)
    np.testing.assert_array_equal(histogram.sum(axis=1), split.sizes)
    record = split.to_json(labels, 10)
    assert json.loads(json.dumps(record)) == record  # plain JSON types
    assert record["label_histogram"] == histogram.tolist()
    assert record["n_unassigned"] == labels.shape[0] - split.sizes.sum()


@pytest.mark.parametrize("scheme", ["iid", "shards", "dominant"])
def test_equal_size_schemes_leave_less_than_one_share_unassigned(scheme: str) -> None:
    labels = uneven_labels(1)
    split = split_clients(labels, 7, scheme, seed=0, shards_per_client=3)
    assert np.all(split.sizes == split.sizes[0])
    unit = 7 * 3 if scheme == "shards" else 7  # shards: equal shards, 21 of them
    assert labels.shape[0] - split.sizes.sum() < unit
    if scheme != "dominant":
        assert split.sizes[0] == labels.shape[0] // unit * (unit // 7)


def test_dirichlet_covers_everything() -> None:
    labels = uneven_labels(2)
    split = split_clients(labels, 13, "dirichlet", seed=1, alpha=0.3)
    np.testing.assert_array_equal(split.assigned(), np.arange(labels.shape[0]))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_same_seed_same_split_other_seed_other_split(scheme: str) -> None:
    labels = torch.from_numpy(uneven_labels(3))
    a, b, c = (split_clients(labels, 8, scheme, seed=s) for s in (4, 4, 5))
    assert all(np.array_equal(x, y) for x, y in zip(a.indices, b.indices, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a.indices, c.indices, strict=True))
    # torch and numpy labels give the same split
    numpy_split = split_clients(labels.numpy(), 8, scheme, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a.indices, numpy_split.indices, strict=True))


def test_iid_histograms_are_close_to_the_global_profile() -> None:
    labels = balanced_labels(10, 300, seed=0)
    histogram = split_clients(labels, 10, "iid", seed=2).label_histogram(labels, 10)
    # 300 draws per client, class share 0.1 without replacement from 3000:
    # std = sqrt(300 * 0.1 * 0.9 * (1 - 300/3000)) = 4.9; 5 std bound per cell.
    assert np.all(np.abs(histogram - 30) <= 5 * 4.9)


def test_shards_give_at_most_shards_per_client_labels() -> None:
    # McMahan/FedNest at 1/100 scale: 10 classes x 60 samples, 20 clients x 2 shards of 15, so
    # no shard straddles two classes and each client sees at most 2 labels.
    labels = balanced_labels(10, 60, seed=1)
    split = split_clients(labels, 20, "shards", seed=0, shards_per_client=2)
    assert split.params == {"shards_per_client": 2, "shard_size": 15}
    histogram = split.label_histogram(labels, 10)
    assert np.all((histogram > 0).sum(axis=1) <= 2)
    assert np.all(histogram % 15 == 0) and np.all(split.sizes == 30)
    assert (histogram > 0).sum(axis=1).mean() > 1.5  # random shards mostly differ in label


@pytest.mark.parametrize("shards_per_client", [1, 2, 3])
def test_shards_with_uneven_classes_bound_the_labels_per_client(shards_per_client: int) -> None:
    labels = uneven_labels(4)
    split = split_clients(labels, 10, "shards", seed=6, shards_per_client=shards_per_client)
    n_labels = (split.label_histogram(labels, 10) > 0).sum(axis=1)
    # A shard is a run of s consecutive samples of the label-sorted order. With every class at
    # least m samples, a run holds at most 2 partial classes plus (s - 2) // m whole ones.
    s, m = int(split.params["shard_size"]), int(np.bincount(labels).min())
    per_shard = min(10, 2 + (s - 2) // m)
    assert np.all(n_labels <= shards_per_client * per_shard)
    iid = split_clients(labels, 10, "iid", seed=6).label_histogram(labels, 10)
    assert n_labels.mean() < (iid > 0).sum(axis=1).mean()  # label-skewed, unlike iid


def test_dominant_class_makes_up_at_least_the_dominant_fraction() -> None:
    labels = balanced_labels(10, 200, seed=2)
    q = 0.5
    split = split_clients(labels, 20, "dominant", seed=0, dominant_fraction=q)
    histogram = split.label_histogram(labels, 10)
    size = 2000 // 20
    target = round(q * size)
    assert split.params["dominant_target"] == target
    dominant_counts = histogram[np.arange(20), np.arange(20) % 10]
    assert np.all(dominant_counts >= target)
    # The remaining 50 samples per client come uniformly from a pool of 1000 in which every class
    # has 100 (= 200 - 2 clients x 50), so the expected surplus of the dominant class is
    # 50 * 0.1 = 5 per client, hypergeometric std sqrt(50 * 0.1 * 0.9 * 950/999) = 2.07; the
    # mean over 20 clients is within 4 of its standard errors (4 * 2.07 / sqrt(20) = 1.85).
    assert abs((dominant_counts - target).mean() - 5.0) <= 1.85


def test_dominant_fraction_one_gives_single_label_clients() -> None:
    labels = balanced_labels(5, 40, seed=3)
    histogram = split_clients(
        labels, 10, "dominant", seed=1, dominant_fraction=1.0
    ).label_histogram(labels, 5)
    expected = np.zeros((10, 5), dtype=np.int64)
    expected[np.arange(10), np.arange(10) % 5] = 20
    np.testing.assert_array_equal(histogram, expected)


def test_dominant_shares_a_small_class_evenly() -> None:
    # Class 1 has only 9 samples for the 3 clients whose dominant class it is (clients 1, 3, 5).
    labels = np.concatenate([np.zeros(291, np.int64), np.ones(9, np.int64)])
    split = split_clients(labels, 6, "dominant", seed=0, dominant_fraction=1.0, n_classes=2)
    histogram = split.label_histogram(labels, 2)
    assert np.all(histogram[[1, 3, 5], 1] == 3)  # 9 // 3 each, the rest filled with class 0
    assert np.all(split.sizes == 50)


def _concentration(split: ClientSplit, labels: np.ndarray) -> float:
    """Mean over clients of the Herfindahl index sum_c p_kc^2 (1/C: uniform, 1: one label)."""
    histogram = split.label_histogram(labels, 10).astype(float)
    shares = histogram / histogram.sum(axis=1, keepdims=True)
    return float((shares**2).sum(axis=1).mean())


@settings(max_examples=15)
@given(seed=st.integers(0, 2**31 - 1))
def test_smaller_dirichlet_alpha_concentrates_histograms(seed: int) -> None:
    labels = balanced_labels(10, 50, seed=0)
    values = [
        _concentration(split_clients(labels, 10, "dirichlet", seed=seed, alpha=a), labels)
        for a in (0.05, 1.0, 100.0)
    ]
    assert values[0] > values[1] > values[2]


def test_dirichlet_min_size_and_its_clear_failure() -> None:
    labels = balanced_labels(10, 50, seed=4)
    split = split_clients(labels, 10, "dirichlet", seed=0, alpha=0.5, min_size=20)
    assert split.sizes.min() >= 20
    with pytest.raises(SplitError, match="fewer than min_size=45 samples in all 5 tries"):
        split_clients(labels, 10, "dirichlet", seed=0, alpha=0.05, min_size=45, max_tries=5)
    with pytest.raises(SplitError, match="needs 510 samples"):
        split_clients(labels, 10, "dirichlet", seed=0, min_size=51)


def test_long_tail_profile_matches_fednest_imbalanced_mnist() -> None:
    # FedNest Sec. 4.2: n_c = 6000 * mu^c, mu = 0.01^(1/9): 6000, 3597, ..., 101, 60 (paper's
    # values; the authors' code gets 61 for the tail from floating-point error in mu^9).
    paper = [6000, 3597, 2157, 1293, 775, 465, 279, 167, 101, 60]
    np.testing.assert_array_equal(long_tail_profile(10, 0.01, 6000), paper)
    labels = balanced_labels(10, 6000, seed=5)
    kept = long_tail_indices(labels, 10, 0.01, seed=0, n_max=6000)
    np.testing.assert_array_equal(np.bincount(labels[kept], minlength=10), paper)
    assert np.all(np.diff(kept) > 0)  # sorted, no repeats


def test_long_tail_is_capped_by_availability_and_defaults_to_the_smallest_class() -> None:
    labels = uneven_labels(6)
    available = np.bincount(labels, minlength=10)
    kept = long_tail_indices(labels, 10, 0.1, seed=1)
    counts = np.bincount(labels[kept], minlength=10)
    profile = long_tail_profile(10, 0.1, int(available.min()))
    np.testing.assert_array_equal(counts, profile)
    # with a head larger than some classes, those keep everything they have
    capped = np.bincount(
        labels[long_tail_indices(labels, 10, 0.1, seed=1, n_max=10_000)], minlength=10
    )
    np.testing.assert_array_equal(capped, np.minimum(long_tail_profile(10, 0.1, 10_000), available))
    # the ratio of head to tail is the imbalance ratio (up to the ceiling)
    assert profile[-1] == int(np.ceil(round(available.min() * 0.1, 9)))


def test_long_tail_scheme_splits_the_subsample_iid() -> None:
    labels = balanced_labels(10, 200, seed=7)
    split = split_clients(labels, 8, "long_tail", seed=2, imbalance_ratio=0.05)
    subset = long_tail_indices(labels, 10, 0.05, seed=2)
    assert set(split.assigned().tolist()) <= set(subset.tolist())
    assert np.all(split.sizes == subset.shape[0] // 8)
    assert split.params["n_long_tail"] == subset.shape[0]
    histogram = split.label_histogram(labels, 10).sum(axis=0)
    profile = long_tail_profile(10, 0.05, 200)
    assert np.all(histogram <= profile) and profile.sum() - histogram.sum() < 8


def test_holdout_splits_each_client_into_train_and_validation() -> None:
    labels = uneven_labels(8)
    split = split_clients(labels, 10, "shards", seed=0)
    train, val = split.holdout(0.2, seed=1)
    for whole, tr, va in zip(split.indices, train.indices, val.indices, strict=True):
        assert va.shape[0] == round(0.2 * whole.shape[0])
        assert np.intersect1d(tr, va).size == 0
        np.testing.assert_array_equal(np.sort(np.concatenate([tr, va])), np.sort(whole))
    assert np.all(train.sizes == train.sizes[0]) and val.params["holdout_fraction"] == 0.2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_clients": 5, "scheme": "pathological"}, "unknown split scheme"),
        ({"n_clients": 0}, "n_clients must be a positive integer"),
        ({"n_clients": 2.5}, "n_clients must be a positive integer"),
        ({"n_clients": 31}, "cannot give 31 clients"),
        ({"n_clients": 31, "scheme": "dominant"}, "cannot give 31 clients"),
        ({"n_clients": 11, "scheme": "shards", "shards_per_client": 3}, "33 shards do not fit"),
        ({"n_clients": 5, "scheme": "shards", "shards_per_client": 0}, "shards_per_client must be"),
        ({"n_clients": 5, "scheme": "dirichlet", "alpha": 0.0}, "alpha must be positive"),
        ({"n_clients": 5, "scheme": "dirichlet", "alpha": float("nan")}, "alpha must be positive"),
        ({"n_clients": 5, "scheme": "dominant", "dominant_fraction": 1.5}, "dominant_fraction"),
        ({"n_clients": 5, "scheme": "long_tail", "imbalance_ratio": 0.0}, "imbalance_ratio"),
        ({"n_clients": 5, "n_classes": 2}, "labels go up to 2"),
    ],
)
def test_impossible_requests_raise(kwargs: dict, message: str) -> None:
    labels = balanced_labels(3, 10, seed=0)
    with pytest.raises(SplitError, match=message):
        split_clients(labels, seed=0, **kwargs)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (np.zeros((3, 2), np.int64), "1-D"),
        (np.array([0.0, 1.0]), "integers"),
        (np.array([0, -1]), "non-negative"),
    ],
)
def test_malformed_labels_raise(labels: np.ndarray, message: str) -> None:
    with pytest.raises(SplitError, match=message):
        split_clients(labels, 1, seed=0)
