"""Seeded partitions of a training set over clients: the papers' iid and non-iid splits.

Schemes (``SCHEMES``), each a deterministic function of ``(labels, n_clients, params, seed)``:

* ``iid``: a seeded permutation cut into ``n_clients`` equal parts (FedNest/AggITD "600 random
  images per client", McMahan et al. 2017).
* ``shards``: McMahan et al.'s pathological non-iid split as used by FedNest (Sec. 4.1, "200 shards
  of 300 images, each client gets 2 shards") and AggITD (Sec. 5): sort by label, cut into
  ``n_clients * shards_per_client`` equal shards, deal ``shards_per_client`` random shards to each
  client; with 2 shards per client every client sees about two labels.
* ``dirichlet``: per class, client proportions drawn from ``Dirichlet(alpha * 1)`` (Hsu et al.
  2019; HGP's personalization data uses alpha = 0.4 through FedEM's split). Smaller ``alpha``
  means more concentrated label histograms.
* ``dominant``: FedMSA's ``q``-heterogeneity (Sec. 4, ``q_noniid`` in its code): client ``k`` has
  dominant class ``k mod C``; ``q = dominant_fraction`` of its samples are drawn from that class
  (capped by availability), the rest uniformly from the pool left after every client took its
  dominant share. The pool may hold the dominant class too, so the dominant class makes up *at
  least* ``q`` of a client's samples when the class is large enough. ``q = 1`` gives one-label
  clients; ``q = 1/C`` is close to iid.
* ``long_tail``: the long-tailed subsample of :func:`long_tail_indices` (FedNest Sec. 4.2 and
  FedMSA Sec. 4's imbalanced MNIST), then split iid.

Every index is assigned to at most one client. The equal-size schemes (iid, shards, dominant,
long_tail) give every client exactly the same number of samples, so per-client batches stack on a
client axis; the at most ``n_clients - 1`` (shards: ``n_clients * shards_per_client - 1``)
samples left over are chosen at random and left unassigned (``to_json`` reports how many).
Dirichlet clients have unequal sizes and cover the whole set.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import torch

SCHEMES: tuple[str, ...] = ("iid", "shards", "dirichlet", "dominant", "long_tail")


class SplitError(ValueError):
    """An impossible or malformed client-split request."""


def _as_labels(labels: np.ndarray | torch.Tensor | Sequence[int]) -> np.ndarray:
    """Labels as a 1-D int64 numpy array of non-negative class ids."""
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    array = np.asarray(labels)
    if array.ndim != 1:
        raise SplitError(f"labels must be 1-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise SplitError(f"labels must be integers, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        raise SplitError(f"labels must be non-negative, found {array.min()}")
    return array


def _check_n_classes(labels: np.ndarray, n_classes: int | None) -> int:
    inferred = int(labels.max()) + 1 if labels.size else 0
    if n_classes is None:
        return inferred
    if n_classes < inferred:
        raise SplitError(f"n_classes={n_classes} but the labels go up to {inferred - 1}")
    return int(n_classes)


@dataclasses.dataclass(frozen=True, eq=False)
class ClientSplit:
    """A partition of (part of) a training set over clients.

    ``indices[k]`` holds client ``k``'s indices into the training set, in a seeded random order
    (so the first ``b`` of them are a uniform minibatch). ``params`` are the scheme's knobs as
    used (with derived sizes), ``seed`` the seed that produced it.
    """

    scheme: str
    params: dict[str, float | int]
    seed: int
    indices: tuple[np.ndarray, ...]

    @property
    def n_clients(self) -> int:
        return len(self.indices)

    @property
    def sizes(self) -> np.ndarray:
        """Samples per client, shape ``(n_clients,)``."""
        return np.array([ix.shape[0] for ix in self.indices], dtype=np.int64)

    def assigned(self) -> np.ndarray:
        """All assigned indices, sorted (each appears once)."""
        if not self.indices:
            return np.empty(0, dtype=np.int64)
        return np.sort(np.concatenate(self.indices))

    def label_histogram(self, labels: np.ndarray | torch.Tensor, n_classes: int) -> np.ndarray:
        """Counts ``H[k, c]`` of class ``c`` on client ``k``, shape ``(n_clients, n_classes)``."""
        array = _as_labels(labels)
        n_classes = _check_n_classes(array, n_classes)
        return np.stack([np.bincount(array[ix], minlength=n_classes) for ix in self.indices])

    def to_json(self, labels: np.ndarray | torch.Tensor, n_classes: int) -> dict[str, object]:
        """What the results files record: scheme, params, seed, sizes, label histogram."""
        histogram = self.label_histogram(labels, n_classes)
        return {
            "scheme": self.scheme,
            "params": dict(self.params),
            "seed": self.seed,
            "n_clients": self.n_clients,
            "sizes": self.sizes.tolist(),
            "n_unassigned": int(_as_labels(labels).shape[0] - self.sizes.sum()),
            "label_histogram": histogram.tolist(),
        }

    def holdout(self, fraction: float, *, seed: int) -> tuple[ClientSplit, ClientSplit]:
        """Split each client's samples into (train, validation), validation share ``fraction``.

        Client ``k`` keeps ``round(fraction * size_k)`` of its samples (a seeded random subset)
        for validation, as FedNest/AggITD's per-client train/val splits (20% in the non-iid code,
        50% in the iid code) and HGP's 3:1 train:val. Equal client sizes stay equal.
        """
        if not 0.0 <= fraction <= 1.0:
            raise SplitError(f"holdout fraction must lie in [0, 1], got {fraction!r}")
        rng = np.random.default_rng([seed, 7])
        train, val = [], []
        for ix in self.indices:
            order = ix[rng.permutation(ix.shape[0])]
            n_val = int(round(fraction * ix.shape[0]))
            val.append(order[:n_val])
            train.append(order[n_val:])
        params = {**self.params, "holdout_fraction": fraction}
        return (
            ClientSplit(self.scheme, params, self.seed, tuple(train)),
            ClientSplit(self.scheme, params, self.seed, tuple(val)),
        )


def long_tail_indices(
    labels: np.ndarray | torch.Tensor,
    n_classes: int,
    imbalance_ratio: float,
    *,
    seed: int,
    n_max: int | None = None,
) -> np.ndarray:
    """Seeded subsample with the long-tailed class profile ``n_c = ceil(n_max * r^(c/(C-1)))``.

    FedNest Sec. 4.2 (and FedMSA Sec. 4, "the same dataset as FedNest"): MNIST with
    ``n_c = 6000 mu^c``, ``mu = 0.01^(1/9)``, i.e. ``r = 0.01`` (imbalance ratio 100), classes
    6000, 3597, ..., 101, 60, about 14.9k images. Class 0 is the head and class ``C-1`` the tail.
    ``n_c`` is capped by the samples class ``c`` has. ``n_max`` defaults to the smallest class
    count, so the profile holds exactly; the papers use ``n_max = 6000`` on MNIST, where only
    class 0 (5,923 images) is capped.

    The value is rounded to 9 decimals before the ceiling, so that ``r^1 = 0.01`` gives the
    paper's 60 tail images; the authors' code computes ``mu^9`` in floating point and keeps 61.
    Returns the kept indices, sorted.
    """
    array = _as_labels(labels)
    n_classes = _check_n_classes(array, n_classes)
    if n_classes < 2:
        raise SplitError(f"a long-tailed profile needs at least 2 classes, got {n_classes}")
    if not 0.0 < imbalance_ratio <= 1.0:
        raise SplitError(f"imbalance_ratio must lie in (0, 1] (tail/head), got {imbalance_ratio!r}")
    available = np.bincount(array, minlength=n_classes)
    if n_max is None:
        n_max = int(available.min())
    if n_max < 1:
        raise SplitError(
            f"n_max must be positive (every class needs a sample), got {n_max} "
            f"(class counts {available.tolist()})"
        )
    rng = np.random.default_rng([seed, 5])
    kept = []
    for c in range(n_classes):
        target = math.ceil(round(n_max * imbalance_ratio ** (c / (n_classes - 1)), 9))
        members = np.flatnonzero(array == c)
        kept.append(rng.permutation(members)[: min(target, members.shape[0])])
    return np.sort(np.concatenate(kept))


def long_tail_profile(n_classes: int, imbalance_ratio: float, n_max: int) -> np.ndarray:
    """The target counts ``ceil(n_max * r^(c/(C-1)))`` of :func:`long_tail_indices`, uncapped."""
    return np.array(
        [
            math.ceil(round(n_max * imbalance_ratio ** (c / (n_classes - 1)), 9))
            for c in range(n_classes)
        ],
        dtype=np.int64,
    )


def split_clients(
    labels: np.ndarray | torch.Tensor,
    n_clients: int,
    scheme: str = "iid",
    *,
    seed: int,
    alpha: float = 0.5,
    shards_per_client: int = 2,
    dominant_fraction: float = 0.8,
    imbalance_ratio: float = 0.01,
    min_size: int = 1,
    n_classes: int | None = None,
    n_max: int | None = None,
    max_tries: int = 1000,
) -> ClientSplit:
    """Partition the training set with labels ``labels`` over ``n_clients`` clients.

    ``scheme`` is one of :data:`SCHEMES` (see the module docstring for each, with the papers'
    settings); only the knobs of the chosen scheme are used and recorded. ``min_size`` is the
    smallest client the ``dirichlet`` scheme accepts; it redraws the proportions until every
    client has that many samples, at most ``max_tries`` times. ``n_classes`` defaults to
    ``max(labels) + 1``; ``n_max`` is the head-class size of the ``long_tail`` profile.
    """
    _check_split_parameters(
        seed=seed,
        alpha=alpha,
        shards_per_client=shards_per_client,
        dominant_fraction=dominant_fraction,
        imbalance_ratio=imbalance_ratio,
        min_size=min_size,
        n_max=n_max,
        max_tries=max_tries,
    )
    array = _as_labels(labels)
    if scheme not in SCHEMES:
        raise SplitError(f"unknown split scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    if isinstance(n_clients, bool) or not isinstance(n_clients, (int, np.integer)) or n_clients < 1:
        raise SplitError(f"n_clients must be a positive integer, got {n_clients!r}")
    n_clients = int(n_clients)
    n_classes = _check_n_classes(array, n_classes)
    rng = np.random.default_rng([seed, SCHEMES.index(scheme)])
    params: dict[str, float | int]
    if scheme == "iid":
        params, parts = {}, _iid(np.arange(array.shape[0]), n_clients, rng)
    elif scheme == "shards":
        params, parts = _shards(array, n_clients, shards_per_client, rng)
    elif scheme == "dirichlet":
        params, parts = _dirichlet(array, n_clients, n_classes, alpha, min_size, max_tries, rng)
    elif scheme == "dominant":
        params, parts = _dominant(array, n_clients, n_classes, dominant_fraction, rng)
    else:
        subset = long_tail_indices(array, n_classes, imbalance_ratio, seed=seed, n_max=n_max)
        params = {"imbalance_ratio": imbalance_ratio, "n_long_tail": int(subset.shape[0])}
        parts = _iid(subset, n_clients, rng)
    shuffled = tuple(part[rng.permutation(part.shape[0])].astype(np.int64) for part in parts)
    return ClientSplit(scheme, params, seed, shuffled)


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: object) -> bool:
    """A real number (NaN and inf included: each scheme's own range check names them)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _check_split_parameters(**values: object) -> None:
    """Types first (a string or a float where an integer belongs is an error naming the
    parameter, not a TypeError deep in numpy); each scheme checks its own ranges."""
    integers = {"seed": 0, "shards_per_client": 1, "min_size": 0, "max_tries": 1, "n_max": 1}
    for name, minimum in integers.items():
        value = values[name]
        if name == "n_max" and value is None:
            continue
        if not _is_int(value) or int(value) < minimum:  # type: ignore[call-overload]
            raise SplitError(f"{name} must be an integer >= {minimum}, got {value!r}")
    for name in ("alpha", "dominant_fraction", "imbalance_ratio"):
        if not _is_number(values[name]):
            raise SplitError(f"{name} must be a number, got {values[name]!r}")


def _iid(pool: np.ndarray, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``n_clients`` equal random parts of ``pool``; the remainder stays unassigned."""
    size = pool.shape[0] // n_clients
    if size == 0:
        raise SplitError(
            f"cannot give {n_clients} clients a sample each from {pool.shape[0]} samples"
        )
    order = rng.permutation(pool)[: size * n_clients]
    return list(order.reshape(n_clients, size))


def _shards(
    labels: np.ndarray, n_clients: int, shards_per_client: int, rng: np.random.Generator
) -> tuple[dict[str, float | int], list[np.ndarray]]:
    """McMahan et al.'s shards: sort by label, equal shards, ``shards_per_client`` per client."""
    if isinstance(shards_per_client, bool) or shards_per_client < 1:
        raise SplitError(f"shards_per_client must be a positive integer, got {shards_per_client!r}")
    n_shards = n_clients * shards_per_client
    shard_size = labels.shape[0] // n_shards
    if shard_size == 0:
        raise SplitError(
            f"{n_clients} clients x {shards_per_client} shards = {n_shards} shards "
            f"do not fit in {labels.shape[0]} samples (a shard needs one sample)"
        )
    # Drop a random remainder first (not the tail of the sorted order, which would be one class),
    # then sort stably by label so that the order within a class stays random.
    kept = rng.permutation(labels.shape[0])[: n_shards * shard_size]
    by_label = kept[np.argsort(labels[kept], kind="stable")]
    shards = by_label.reshape(n_shards, shard_size)
    dealt = rng.permutation(n_shards).reshape(n_clients, shards_per_client)
    params: dict[str, float | int] = {
        "shards_per_client": shards_per_client,
        "shard_size": shard_size,
    }
    return params, [shards[row].reshape(-1) for row in dealt]


def _dirichlet(
    labels: np.ndarray,
    n_clients: int,
    n_classes: int,
    alpha: float,
    min_size: int,
    max_tries: int,
    rng: np.random.Generator,
) -> tuple[dict[str, float | int], list[np.ndarray]]:
    """Per class ``c``, proportions ``p_c ~ Dirichlet(alpha 1_M)``; class ``c``'s samples are cut
    at the cumulative proportions. Redrawn until every client holds ``min_size`` samples."""
    if not (math.isfinite(alpha) and alpha > 0.0):
        raise SplitError(f"dirichlet alpha must be positive and finite, got {alpha!r}")
    if min_size < 0 or min_size * n_clients > labels.shape[0]:
        raise SplitError(
            f"min_size={min_size} for {n_clients} clients needs "
            f"{min_size * n_clients} samples, only {labels.shape[0]} exist"
        )
    if max_tries < 1:
        raise SplitError(f"max_tries must be positive, got {max_tries}")
    members = [np.flatnonzero(labels == c) for c in range(n_classes)]
    smallest = 0
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for idx in members:
            proportions = rng.dirichlet(np.full(n_clients, alpha))
            cuts = np.floor(np.cumsum(proportions)[:-1] * idx.shape[0]).astype(np.int64)
            for k, piece in enumerate(np.split(rng.permutation(idx), cuts)):
                parts[k].append(piece)
        merged = [np.concatenate(p) if p else np.empty(0, np.int64) for p in parts]
        smallest = min(m.shape[0] for m in merged)
        if smallest >= min_size:
            params: dict[str, float | int] = {"alpha": alpha, "min_size": min_size}
            return params, merged
    raise SplitError(
        f"dirichlet(alpha={alpha}) over {n_clients} clients gave a client fewer than "
        f"min_size={min_size} samples in all {max_tries} tries (last smallest: "
        f"{smallest}); raise alpha, lower min_size or use fewer clients"
    )


def _dominant(
    labels: np.ndarray, n_clients: int, n_classes: int, fraction: float, rng: np.random.Generator
) -> tuple[dict[str, float | int], list[np.ndarray]]:
    """FedMSA's q-split: client ``k`` first takes ``round(q * size)`` samples of class
    ``k mod C`` (shared evenly among the clients of that class when it is too small), then every
    client is filled to ``size = n // n_clients`` uniformly from the remaining pool."""
    if not 0.0 <= fraction <= 1.0:
        raise SplitError(f"dominant_fraction must lie in [0, 1], got {fraction!r}")
    size = labels.shape[0] // n_clients
    if size == 0:
        raise SplitError(
            f"cannot give {n_clients} clients a sample each from {labels.shape[0]} samples"
        )
    if n_classes < 1:
        raise SplitError("the dominant scheme needs at least one class")
    target = int(round(fraction * size))
    dominant: list[np.ndarray] = [np.empty(0, np.int64)] * n_clients
    taken = np.zeros(labels.shape[0], dtype=bool)
    for c in range(n_classes):
        owners = list(range(c, n_clients, n_classes))
        if not owners:
            continue
        members = rng.permutation(np.flatnonzero(labels == c))
        share = min(target, members.shape[0] // len(owners))
        for j, k in enumerate(owners):
            dominant[k] = members[j * share : (j + 1) * share]
            taken[dominant[k]] = True
    pool = rng.permutation(np.flatnonzero(~taken))
    parts, start = [], 0
    for k in range(n_clients):
        need = size - dominant[k].shape[0]
        parts.append(np.concatenate([dominant[k], pool[start : start + need]]))
        start += need
    params: dict[str, float | int] = {
        "dominant_fraction": fraction,
        "size": size,
        "dominant_target": target,
    }
    return params, parts
