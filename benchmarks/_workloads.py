"""The problems the benchmarks time: a closed-form quadratic and the MLP/CNN workloads on digits.

Every workload is built at M clients with full local objectives (``batch=None``): on the
embedded 8x8 digits a client of 100 holds about 13 training images, fewer than the papers'
minibatch of 64, so its full local objective *is* its minibatch, and timings do not depend on
which samples were drawn.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from _common import Sized

from problems import Batch
from problems import Problem
from problems import QuadraticBilevel
from problems.workloads import Dataset
from problems.workloads import build_workload
from problems.workloads import load_dataset

#: (name, workload kind, model): the paper workloads of issue 6 that run on digits.
NEURAL = (
    ("hyper-representation MLP", "hyper_representation", "mlp"),
    ("hyper-representation CNN", "hyper_representation", "cnn"),
    ("loss-tuning MLP", "loss_tuning", "mlp"),
)
CLIENTS = Sized(full=100, quick=2)


@dataclasses.dataclass(frozen=True)
class Workload:
    """A problem on a device, a point with one row per client, and its batch rule."""

    name: str
    problem: Problem
    device: str
    point: tuple[torch.Tensor, torch.Tensor]
    batch: Callable[[torch.Tensor], Batch | None] = lambda clients: None


def _rows(problem: Problem) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = problem.initial_point()
    return (x.expand(problem.n_clients, -1).clone(), y.expand(problem.n_clients, -1).clone())


def closed_form_workload(quick: bool) -> Workload:
    """``QuadraticBilevel.random`` (dim_x = dim_y = 10, kappa = 10), float64 on the CPU."""
    problem = QuadraticBilevel.random(CLIENTS(quick), 10, 10, 10.0, 0.3, seed=0)
    return Workload("closed-form quadratic", problem, "cpu", _rows(problem))


@functools.lru_cache(maxsize=1)
def digits() -> Dataset:
    """The embedded digits data, loaded once per process."""
    return load_dataset("digits")


def neural_workload(kind: str, model: str, clients: int, device: str) -> Problem:
    """The registry's workload on digits, iid split over ``clients``, float32, seed 0."""
    return build_workload(
        kind,
        digits(),
        {"scheme": "iid", "n_clients": clients},
        model=model,
        seed=0,
        device=device,
        dtype=torch.float32,
    )


def neural_workloads(
    quick: bool, device: str, names: tuple[str, ...] | None = None
) -> list[Workload]:
    """The NEURAL workloads (or those named) at 100 clients (quick: 4) on ``device``."""
    clients = CLIENTS(quick)
    out = []
    for name, kind, model in NEURAL:
        if names is not None and name not in names:
            continue
        problem = neural_workload(kind, model, clients, device)
        out.append(Workload(name, problem, device, _rows(problem)))
    return out
