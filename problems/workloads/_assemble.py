"""Turning a dataset and a client split into stacked per-client data (shared by the builders).

Steps, all seeded: load the dataset (or take a loaded one) and build the network for it
(:func:`resolve_inputs`), draw the client split from a spec (or take a computed
:class:`~problems.workloads.splits.ClientSplit`), hold out each client's validation part
(:meth:`ClientSplit.holdout`), standardise the images with the training set's per-channel
statistics, and stack every client's samples on a client axis in the requested dtype and device
(:func:`assemble`); :meth:`Assembled.arguments` hands the result to the workload's constructor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import NamedTuple

import numpy as np
import torch

from problems._base import ProblemError
from problems.workloads._client_data import ClientData
from problems.workloads._client_data import ClientSamples
from problems.workloads._client_data import standardize
from problems.workloads.data import Dataset
from problems.workloads.data import load_dataset
from problems.workloads.models import Network
from problems.workloads.models import build_network
from problems.workloads.splits import ClientSplit
from problems.workloads.splits import split_clients

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}


class WorkloadError(ProblemError):
    """A workload cannot be built from the given kind, data, split or options."""


def resolve_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise WorkloadError(f"unknown dtype {dtype!r}; choose one of {sorted(DTYPES)}")
        return DTYPES[dtype]
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise WorkloadError(
            f"dtype must be a floating torch dtype or one of {sorted(DTYPES)}, got {dtype!r}"
        )
    return dtype


def resolve_device(device: torch.device | str) -> torch.device:
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise WorkloadError(f"unknown device {device!r}: {error}") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise WorkloadError("device 'cuda' asked for, but torch sees no CUDA GPU on this machine")
    return resolved


def resolve_dataset(dataset: Dataset | str, data_root: str | Path | None) -> Dataset:
    """A loaded dataset as is, or ``load_dataset(name, data_root)`` with the loader's default
    train/test split (the same test set whatever the workload's seed)."""
    if isinstance(dataset, Dataset):
        return dataset
    if isinstance(dataset, str):
        return load_dataset(dataset, data_root)
    raise WorkloadError(f"dataset must be a Dataset or a dataset name, got {dataset!r}")


class Inputs(NamedTuple):
    """A builder's common arguments resolved (:func:`resolve_inputs`)."""

    data: Dataset
    network: Network
    dtype: torch.dtype
    device: torch.device


def resolve_inputs(
    dataset: Dataset | str,
    model: str | Network,
    dtype: torch.dtype | str,
    device: torch.device | str,
    data_root: str | Path | None,
) -> Inputs:
    """A builder's common arguments resolved: the dataset (:func:`resolve_dataset`), the network
    for its inputs and classes, and the checked dtype and device."""
    dtype, device = resolve_dtype(dtype), resolve_device(device)
    data = resolve_dataset(dataset, data_root)
    return Inputs(data, build_network(model, data.input_shape, data.n_classes), dtype, device)


def resolve_split(
    split: ClientSplit | Mapping[str, Any], labels: np.ndarray, n_classes: int, seed: int
) -> ClientSplit:
    """A computed split as is, or ``split_clients(labels, **spec, seed=seed)``.

    A spec is a mapping with ``scheme``, ``n_clients`` and the scheme's own knobs (see
    :func:`~problems.workloads.splits.split_clients`).
    """
    if isinstance(split, ClientSplit):
        return split
    if not isinstance(split, Mapping):
        raise WorkloadError(
            f"split must be a ClientSplit or a mapping with 'scheme' and 'n_clients', got {split!r}"
        )
    spec = dict(split)
    missing = {"scheme", "n_clients"} - set(spec)
    if missing:
        raise WorkloadError(f"split spec {spec!r} lacks {sorted(missing)}")
    if "seed" in spec:
        raise WorkloadError(
            "the split's seed is the workload's seed; remove 'seed' from the split spec"
        )
    try:
        return split_clients(
            labels,
            spec.pop("n_clients"),
            spec.pop("scheme"),
            seed=seed,
            n_classes=n_classes,
            **spec,
        )
    except TypeError as error:
        raise WorkloadError(f"bad split spec {dict(split)!r}: {error}") from error


def check_fraction(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise WorkloadError(f"{name} must be a number in (0, 1), got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Assembled:
    """Stacked client data, the test set and what results files should record."""

    data: ClientData
    test_inputs: torch.Tensor
    test_labels: torch.Tensor
    description: dict[str, Any]
    workload: str

    def arguments(
        self, network: Network, x0: torch.Tensor, y0: torch.Tensor, **facts: Any
    ) -> dict[str, Any]:
        """The :class:`~problems.workloads._workload.ClientWorkload` constructor's arguments: the
        network, these data, the initial point ``(x0, y0)`` on the data's device and dtype, and
        the description with the workload, the model and the workload's own ``facts`` added."""
        device, dtype = self.test_inputs.device, self.test_inputs.dtype
        return {
            "network": network,
            "data": self.data,
            "test_inputs": self.test_inputs,
            "test_labels": self.test_labels,
            "x0": x0.to(device=device, dtype=dtype),
            "y0": y0.to(device=device, dtype=dtype),
            "description": {
                **self.description,
                "workload": self.workload,
                "model": network.name,
                **facts,
            },
        }


def assemble(
    resolved: Inputs,
    split: ClientSplit,
    *,
    validation_fraction: float,
    normalize: bool,
    seed: int,
    what: str,
) -> Assembled:
    """Hold out validation parts, standardise, and stack the clients' samples (of the resolved
    dataset, in its dtype, on its device)."""
    dataset, dtype, device = resolved.data, resolved.dtype, resolved.device
    check_fraction("validation_fraction", validation_fraction)
    if not isinstance(normalize, bool):
        raise WorkloadError(f"normalize must be true or false, got {normalize!r}")
    if split.n_clients < 1:
        raise WorkloadError(f"{what}: the split has no clients")
    train, val = split.holdout(validation_fraction, seed=seed)
    small = [
        k
        for k, (t, v) in enumerate(zip(train.indices, val.indices, strict=True))
        if t.shape[0] == 0 or v.shape[0] == 0
    ]
    if small:
        raise WorkloadError(
            f"{what}: clients {small[:10]} have no training or no validation sample after "
            f"holding out {validation_fraction:.0%} (sizes {split.sizes[small[:10]].tolist()}); "
            "use fewer clients, a larger dataset or another validation_fraction"
        )
    if normalize:
        inputs = standardize(dataset.train_x, dataset.train_x)
        test_inputs = standardize(dataset.test_x, dataset.train_x)
    else:
        inputs, test_inputs = dataset.train_x, dataset.test_x
    inputs = inputs.to(device=device, dtype=dtype)
    labels = dataset.train_y.to(device=device)
    data = ClientData(
        ClientSamples.stack(inputs, labels, train.indices, what),
        ClientSamples.stack(inputs, labels, val.indices, what),
    )
    description = {
        "dataset": dataset.name,
        "source": dataset.source,
        "input_shape": list(dataset.input_shape),
        "n_classes": dataset.n_classes,
        "seed": seed,
        "validation_fraction": validation_fraction,
        "normalize": normalize,
        "split": split.to_json(dataset.train_y, dataset.n_classes),
        "train_sizes": train.sizes.tolist(),
        "validation_sizes": val.sizes.tolist(),
    }
    return Assembled(
        data,
        test_inputs.to(device=device, dtype=dtype),
        dataset.test_y.to(device=device),
        description,
        what,
    )
