"""The shared pieces of HGP's decentralized experiments (:mod:`testbed_app.experiments.hgp`):
the ``[workload]`` defaults of each experiment, the option checks, the HGP estimator of
``[algorithm]``, the device, what both set up from a config (:class:`DecentralizedRun`), SGP's
counted training (:func:`train_by_sgp`) and the numpy generators' state.
"""

from __future__ import annotations

import abc
import functools
import math
from collections.abc import Callable
from typing import Any
from typing import ClassVar

import numpy as np
import torch

from problems.workloads.data import Dataset
from problems.workloads.splits import ClientSplit
from testbed.calls import CallCounter
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.decentralized.sgp import counted_inner_run
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.data import load_data
from testbed_app.experiments.data import split_data

DTYPES = {"float32": torch.float32, "float64": torch.float64}
METHODS: tuple[str, ...] = ("hgp-pl", "hgp-mtl", "sgp")

#: ``[workload]`` keys (besides ``kind`` and ``model``) of each experiment, with defaults.
PERSONALIZATION_DEFAULTS: dict[str, Any] = {
    "methods": list(METHODS),
    "test_fraction": 0.2,  # per-client test share (paper: 20%)
    "val_fraction": 0.25,  # of the rest (paper: train:val = 3:1)
    "input_clusters": 3,  # clusters with their own input normalisation (paper: 3)
    "weight_decay": 1e-3,  # L2 on the model in g_i (paper: 0.001)
    "pl_hyper_lr": 0.1,  # Adam step on lambda (Table 6, RandD: 0.1 for PL and MTL)
    "mtl_hyper_lr": 0.1,
    "pl_outer_l2": 1e-3,  # rho on lambda in f_i (Table 6, RandD: PL 0.001, MTL 0.01)
    "mtl_outer_l2": 1e-2,
    "learners": 3,  # HGP-MTL's mixture size (paper: 3 CNNs)
    "outer_data": "train",  # f_i's samples: the code's use_train_for_outer_loss=True
    "sgp_batch_size": 32,  # SGP's per-client minibatch (paper: 128); 0 = full batch
}
INFLUENCE_DEFAULTS: dict[str, Any] = {
    "val_fraction": 0.5,  # per-client validation share (sec. 5.1: 100 train / 100 val)
    "weight_decay": 1e-2,  # L2 on the model in g_i (paper's CNN: 0.001)
    "top_k": 50,  # instances retrained (paper: 50)
    "retrain_per_step": 10,
    # the protocol (module docstring, "Influence protocol")
    "train_grad_tol": 1e-4,  # ||grad G|| the trained model is refined to
    "train_refine_steps": 5000,  # cap on the refinement's steps
    "retrain_grad_tol": 1e-4,  # networks: ||grad G_-k|| a retraining runs to
    "retrain_steps": 2000,  # networks: cap on a retraining's steps
    "retrain_step_size": "auto",  # 1/lambda_max, or a number below the stable bound (refused
    # otherwise)
    "momentum": "nesterov",  # refinement and retraining: "nesterov" or beta in [0, 1)
    "damping_margin": "auto",  # 1/(eta M), or a number >= 0
    "jitter_count": 5,  # retrainings repeated from a jittered start
    "jitter_scale": 1e-6,  # the jitter's standard deviation per coordinate
}
PERSONALIZATION_OPTIONS: frozenset[str] = frozenset(PERSONALIZATION_DEFAULTS)
INFLUENCE_OPTIONS: frozenset[str] = frozenset(INFLUENCE_DEFAULTS)


# ------------------------------------------------------------------------------ helpers

#: An option check: ``check(name, value)`` raises ValueError naming the option, else returns
#: the value.
Check = Callable[[str, Any], Any]


def _options(config: ExperimentConfig, defaults: dict[str, Any]) -> dict[str, Any]:
    given = {k: v for k, v in config.workload.items() if k not in ("kind", "model")}
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(
            f"[workload] {config.workload.get('kind')!r} has no option(s) "
            f"{unknown}; known: {sorted(defaults)}"
        )
    return {**defaults, **given}


def _check_fraction(name: str, value: Any, *, closed: bool = False) -> float:
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and (0.0 <= value < 1.0 if closed else 0.0 < value < 1.0)
    )
    if not ok:
        raise ValueError(
            f"[workload] {name} must be a number in {'[0' if closed else '(0'}, 1), got {value!r}"
        )
    return float(value)


def _check_positive(name: str, value: Any, *, integer: bool = False) -> Any:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (
        not number
        or not math.isfinite(value)
        or value <= 0
        or (integer and not isinstance(value, int))
    ):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"[workload] {name} must be {kind} > 0, got {value!r}")
    return value


def _check_nonnegative(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value >= 0)
    ):
        raise ValueError(f"[workload] {name} must be a number >= 0, got {value!r}")
    return float(value)


def _check_positive_integer(name: str, value: Any) -> Any:
    return _check_positive(name, value, integer=True)


def _check_auto(name: str, value: Any, check: Check) -> Any:
    return value if value == "auto" else check(name, value)


def _check_batch_size(name: str, value: Any) -> Any:
    """A minibatch size, or 0 for the full batch."""
    return 0 if value == 0 else _check_positive_integer(name, value)


#: The checks of each experiment's numeric ``[workload]`` options, run in this order (an
#: experiment checks its other options itself: :meth:`DecentralizedRun._check_options`).
PERSONALIZATION_CHECKS: dict[str, Check] = {
    "test_fraction": _check_fraction,
    "val_fraction": _check_fraction,
    "input_clusters": _check_positive_integer,
    "pl_hyper_lr": _check_positive,
    "mtl_hyper_lr": _check_positive,
    "weight_decay": _check_nonnegative,
    "pl_outer_l2": _check_nonnegative,
    "mtl_outer_l2": _check_nonnegative,
    "sgp_batch_size": _check_batch_size,
}
INFLUENCE_CHECKS: dict[str, Check] = {
    "val_fraction": _check_fraction,
    "weight_decay": _check_nonnegative,
    **dict.fromkeys(
        ("top_k", "retrain_per_step", "retrain_steps", "train_refine_steps"),
        _check_positive_integer,
    ),
    **dict.fromkeys(("train_grad_tol", "retrain_grad_tol", "jitter_scale"), _check_positive),
    "retrain_step_size": functools.partial(_check_auto, check=_check_positive),
    "damping_margin": functools.partial(_check_auto, check=_check_nonnegative),
}


def _estimator(config: ExperimentConfig) -> HyperGradientPush:
    """The registered HGP estimator of ``[algorithm]`` (built once, ``config.entry``), which
    must train by SGP."""
    estimator = config.entry
    if not isinstance(estimator, HyperGradientPush):
        raise ValueError(
            f"[algorithm] name: {config.algorithm['name']!r} is not an HGP "
            "estimator (hgp, hgp-practical, hgp-stochastic, ...)"
        )
    if not isinstance(estimator.inner, StochasticGradientPush) or estimator.inner.steps < 1:
        raise ValueError(
            "[algorithm] inner_steps: the decentralized experiments train the model "
            "by SGP; set inner_steps >= 1 (and inner_step_size)"
        )
    if estimator.inner.step_size is None or estimator.neumann_step_size is None:
        raise ValueError(
            "[algorithm] inner_step_size and neumann_step_size must be set: the "
            "defaults need the problem's smoothness constants, which a network "
            "workload does not have"
        )
    if estimator.averaging != "pushsum":
        raise ValueError(
            f"[algorithm] averaging: the decentralized experiments gossip; got "
            f"{estimator.averaging!r}"
        )
    return estimator


def _device(config: ExperimentConfig, device: str | None) -> torch.device:
    chosen = torch.device(device or config.run["device"])
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
    return chosen


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """A numpy generator's state, as a checkpoint stores it."""
    return dict(rng.bit_generator.state)


def set_rng(rng: np.random.Generator, state: dict[str, Any]) -> None:
    """Restore a numpy generator from :func:`rng_state`."""
    rng.bit_generator.state = state


def gossip_counts(calls: Any) -> tuple[int, int]:
    """``(gossip steps, floats sent)`` of a call-counter snapshot."""
    return int(calls.comm_rounds), int(calls.floats_sent)


def train_by_sgp(
    estimator: HyperGradientPush,
    problem: Any,
    x: torch.Tensor,
    state: HGPState,
    graph: GraphSequence,
    rng: np.random.Generator,
) -> tuple[Any, int, int]:
    """SGP's training of the shared model for hyperparameters ``x`` from ``state`` (the
    estimator's inner solver, over ``graph``), counted: ``(its output, gossip steps, floats
    sent)``."""
    inner = estimator.inner
    assert isinstance(inner, StochasticGradientPush)  # checked by _estimator
    counter = CallCounter()
    out = counted_inner_run(inner, problem, x, state, graph, counter, rng)
    return (out, *gossip_counts(counter.snapshot()))


class DecentralizedRun(abc.ABC):
    """What both HGP experiments set up from a validated config: the ``[workload]`` options
    (the subclass's ``DEFAULTS`` filled in, each checked by its ``CHECKS`` entry, then by
    :meth:`_check_options`), the name, device, dtype, seed, the dataset, its client split
    (seeded by ``[run] seed``) and the HGP estimator of ``[algorithm]``; then the subclass's
    own set-up (:meth:`_set_up`).

    Args:
        config: a validated config of the subclass's ``[workload] kind``.
        device: overrides ``[run] device``.
        dataset: the loaded data (default: ``[data]`` through the config loader's cache).
    """

    DEFAULTS: ClassVar[dict[str, Any]]
    CHECKS: ClassVar[dict[str, Check]]

    def __init__(
        self, config: ExperimentConfig, device: str | None = None, dataset: Dataset | None = None
    ) -> None:
        options = _options(config, self.DEFAULTS)
        for key, check in self.CHECKS.items():
            check(key, options[key])
        self._check_options(options)
        self.name, self.config, self.options = config.name, config, options
        self.device = _device(config, device)
        self.dtype = DTYPES[config.run["dtype"]]
        self.seed = int(config.run["seed"])
        self.dataset = load_data(config.data) if dataset is None else dataset
        self.split: ClientSplit = split_data(config.split, self.dataset, seed=self.seed)
        self.chance_accuracy = 1.0 / self.dataset.n_classes  # the divergence watch's chance
        self.estimator = _estimator(config)
        self._set_up()

    @abc.abstractmethod
    def _set_up(self) -> None:
        """The experiment's own set-up (its problem, start and records), after the shared one."""

    def _check_options(self, options: dict[str, Any]) -> None:
        """Checks of the options that ``CHECKS`` cannot express (one option against another,
        a choice among names); raise ValueError naming the option."""
        del options  # none beyond CHECKS by default

    def split_json(self) -> dict[str, Any]:
        """The client split with each client's label histogram."""
        return dict(self.split.to_json(self.dataset.train_y, self.dataset.n_classes))
