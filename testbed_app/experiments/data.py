"""The data of an experiment config: its dataset, loaded once, and its client split.

:func:`load_data` reads a validated ``[data]`` section (cached, so validation, which loads the
data to know the files are valid and the split possible, and the run read the files once);
:func:`split_data` splits its training samples over the ``[split]`` section's clients.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

from problems.workloads.data import Dataset
from problems.workloads.data import load_dataset
from problems.workloads.splits import ClientSplit
from problems.workloads.splits import split_clients


def scheme_parameters() -> tuple[str, ...]:
    """Keyword parameters of :func:`problems.workloads.splits.split_clients` (``alpha``, ...)."""
    return tuple(
        name
        for name, p in inspect.signature(split_clients).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("seed", "n_classes")
    )  # both set by the runner


@functools.lru_cache(maxsize=4)
def _load_cached(
    name: str, root: str | None, test_fraction: float, seed: int, limit: int | None
) -> Dataset:
    return load_dataset(name, root, test_fraction=test_fraction, seed=seed, limit=limit)


def load_data(data: Mapping[str, Any]) -> Dataset:
    """The :class:`~problems.workloads.data.Dataset` of a validated ``[data]`` section.

    Cached (the last few datasets), so validation and the run load the files once.
    """
    return _load_cached(
        data["dataset"],
        data["root"],
        float(data["test_fraction"]),
        int(data["seed"]),
        data["limit"],
    )


def split_data(split: Mapping[str, Any], dataset: Dataset, *, seed: int) -> ClientSplit:
    """The :class:`~problems.workloads.splits.ClientSplit` of a validated ``[split]`` section.

    The split's seed is the run's seed (``[run] seed``), as in the workloads' builders.
    """
    params = {key: value for key, value in split.items() if key not in ("scheme", "n_clients")}
    return split_clients(
        dataset.train_y,
        split["n_clients"],
        split["scheme"],
        seed=seed,
        n_classes=dataset.n_classes,
        **params,
    )
