"""The workload registry: one builder per workload kind, one entry point with checked options.

>>> from problems.workloads.registry import build_workload
>>> w = build_workload("hyper_representation", "digits", {"scheme": "iid", "n_clients": 5},
...                    model="mlp", seed=0)
>>> (w.kind, w.n_clients, w.dim_x, w.dim_y)
('bilevel', 5, 13000, 2010)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from problems.workloads._assemble import WorkloadError
from problems.workloads._workload import ClientWorkload
from problems.workloads.data import Dataset
from problems.workloads.hyper_representation import build_hyper_representation
from problems.workloads.loss_tuning import build_loss_tuning
from problems.workloads.splits import ClientSplit

WORKLOAD_BUILDERS: dict[str, Callable[..., ClientWorkload]] = {
    "hyper_representation": build_hyper_representation,
    "loss_tuning": build_loss_tuning,
}

# Arguments every builder takes; the rest of a builder's keyword arguments are its options.
_COMMON = ("dataset", "split", "model", "seed", "device", "dtype")


def workload_options(kind: str) -> dict[str, Any]:
    """The options of workload ``kind`` with their defaults (beyond the common arguments)."""
    builder = _builder(kind)
    return {
        name: p.default
        for name, p in inspect.signature(builder).parameters.items()
        if name not in _COMMON
    }


def _builder(kind: str) -> Callable[..., ClientWorkload]:
    if kind not in WORKLOAD_BUILDERS:
        raise WorkloadError(f"unknown workload {kind!r}; known: {sorted(WORKLOAD_BUILDERS)}")
    return WORKLOAD_BUILDERS[kind]


def build_workload(
    kind: str,
    dataset: Dataset | str,
    split: ClientSplit | Mapping[str, Any],
    **arguments: Any,
) -> ClientWorkload:
    """Build workload ``kind`` (a key of :data:`WORKLOAD_BUILDERS`) with its builder.

    Args:
        kind: ``"hyper_representation"`` or ``"loss_tuning"``.
        dataset: a loaded dataset or its name (``"digits"``, ``"mnist"``, ...; files from the
            ``data_root`` option).
        split: a client-split spec ``{"scheme": ..., "n_clients": ..., **knobs}`` or a
            computed :class:`~problems.workloads.splits.ClientSplit`.
        arguments: the arguments every builder takes, with the builders' defaults: ``model``
            (``"mlp"``, ``"mlp3"``, ``"cnn"`` or a built network; ``"mlp"``), ``seed`` (every
            random choice of the workload: split, hold-out, initial point; 0), ``device``
            (``"cpu"`` / ``"cuda"``; ``"cpu"``) and ``dtype`` (``torch.float32`` / ``"float64"``;
            float32); and the kind's own options (:func:`workload_options`). An unknown one
            raises.
    """
    builder = _builder(kind)
    allowed = workload_options(kind)
    unknown = sorted(set(arguments) - set(allowed) - set(_COMMON))
    if unknown:
        raise WorkloadError(
            f"unknown option(s) {unknown} for workload {kind!r}; its options are {sorted(allowed)}"
        )
    seed = arguments.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise WorkloadError(f"seed must be an integer >= 0, got {seed!r}")
    return builder(dataset, split, **arguments)


__all__ = ["WORKLOAD_BUILDERS", "WorkloadError", "build_workload", "workload_options"]
