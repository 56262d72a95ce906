"""The shared pieces of HGP's decentralized experiments (:mod:`testbed_app.experiments.hgp`):
the ``[workload]`` defaults of each experiment, the option checks, the HGP estimator of
``[algorithm]``, the device and the numpy generators' state.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.sgp import StochasticGradientPush
from testbed_app.experiments.base import ExperimentConfig

DTYPES = {"float32": torch.float32, "float64": torch.float64}
METHODS: tuple[str, ...] = ("hgp-pl", "hgp-mtl", "sgp")

#: ``[workload]`` keys (besides ``kind`` and ``model``) of each experiment, with defaults.
PERSONALIZATION_DEFAULTS: dict[str, Any] = {
    "methods": list(METHODS),
    "test_fraction": 0.2,        # per-client test share (paper: 20%)
    "val_fraction": 0.25,        # of the rest (paper: train:val = 3:1)
    "input_clusters": 3,         # clusters with their own input normalisation (paper: 3)
    "weight_decay": 1e-3,        # L2 on the model in g_i (paper: 0.001)
    "pl_hyper_lr": 0.1,          # Adam step on lambda (Table 6, RandD: 0.1 for PL and MTL)
    "mtl_hyper_lr": 0.1,
    "pl_outer_l2": 1e-3,         # rho on lambda in f_i (Table 6, RandD: PL 0.001, MTL 0.01)
    "mtl_outer_l2": 1e-2,
    "learners": 3,               # HGP-MTL's mixture size (paper: 3 CNNs)
    "outer_data": "train",       # f_i's samples: the code's use_train_for_outer_loss=True
    "sgp_batch_size": 32,        # SGP's per-client minibatch (paper: 128); 0 = full batch
}
INFLUENCE_DEFAULTS: dict[str, Any] = {
    "val_fraction": 0.5,         # per-client validation share (sec. 5.1: 100 train / 100 val)
    "weight_decay": 1e-2,        # L2 on the model in g_i (paper's CNN: 0.001)
    "top_k": 50,                 # instances retrained (paper: 50)
    "retrain_per_step": 10,
    # the protocol (module docstring, "Influence protocol")
    "train_grad_tol": 1e-4,      # ||grad G|| the trained model is refined to
    "train_refine_steps": 5000,  # cap on the refinement's steps
    "retrain_grad_tol": 1e-4,    # networks: ||grad G_-k|| a retraining runs to
    "retrain_steps": 2000,       # networks: cap on a retraining's steps
    "retrain_step_size": "auto",  # 1/lambda_max, or a number below the stable bound (refused
                                  # otherwise)
    "momentum": "nesterov",      # refinement and retraining: "nesterov" or beta in [0, 1)
    "damping_margin": "auto",    # 1/(eta M), or a number >= 0
    "jitter_count": 5,           # retrainings repeated from a jittered start
    "jitter_scale": 1e-6,        # the jitter's standard deviation per coordinate
}
PERSONALIZATION_OPTIONS: frozenset[str] = frozenset(PERSONALIZATION_DEFAULTS)
INFLUENCE_OPTIONS: frozenset[str] = frozenset(INFLUENCE_DEFAULTS)


# ------------------------------------------------------------------------------ helpers


def _options(config: ExperimentConfig, defaults: dict[str, Any]) -> dict[str, Any]:
    given = {k: v for k, v in config.workload.items() if k not in ("kind", "model")}
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"[workload] {config.workload.get('kind')!r} has no option(s) "
                         f"{unknown}; known: {sorted(defaults)}")
    return {**defaults, **given}


def _check_fraction(name: str, value: Any, *, closed: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
        0.0 <= value < 1.0 if closed else 0.0 < value < 1.0)
    if not ok:
        raise ValueError(f"[workload] {name} must be a number in {'[0' if closed else '(0'}, "
                         f"1), got {value!r}")
    return float(value)


def _check_positive(name: str, value: Any, *, integer: bool = False) -> Any:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0 or (
            integer and not isinstance(value, int)):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"[workload] {name} must be {kind} > 0, got {value!r}")
    return value


def _check_nonnegative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value >= 0):
        raise ValueError(f"[workload] {name} must be a number >= 0, got {value!r}")
    return float(value)


def _estimator(config: ExperimentConfig) -> HyperGradientPush:
    """The registered HGP estimator of ``[algorithm]``, which must train by SGP."""
    from testbed.registry import get_estimator

    params = {k: v for k, v in config.algorithm.items() if k != "name"}
    estimator = get_estimator(config.algorithm["name"]).build(**params)
    if not isinstance(estimator, HyperGradientPush):
        raise ValueError(f"[algorithm] name: {config.algorithm['name']!r} is not an HGP "
                         "estimator (hgp, hgp-practical, hgp-stochastic, ...)")
    if not isinstance(estimator.inner, StochasticGradientPush) or estimator.inner.steps < 1:
        raise ValueError("[algorithm] inner_steps: the decentralized experiments train the model "
                         "by SGP; set inner_steps >= 1 (and inner_step_size)")
    if estimator.inner.step_size is None or estimator.neumann_step_size is None:
        raise ValueError("[algorithm] inner_step_size and neumann_step_size must be set: the "
                         "defaults need the problem's smoothness constants, which a network "
                         "workload does not have")
    if estimator.averaging != "pushsum":
        raise ValueError(f"[algorithm] averaging: the decentralized experiments gossip; got "
                         f"{estimator.averaging!r}")
    return estimator


def _device(config: ExperimentConfig, device: str | None) -> torch.device:
    chosen = torch.device(device or config.run["device"])
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
    return chosen


def _rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return dict(rng.bit_generator.state)


def _set_rng(rng: np.random.Generator, state: dict[str, Any]) -> None:
    rng.bit_generator.state = state


def _gossip_counts(calls: Any) -> tuple[int, int]:
    return int(calls.comm_rounds), int(calls.floats_sent)
