"""HGP's personalization experiment (sec. 5.3, Table 2): :class:`HGPPersonalizationExperiment`.

The protocol and its metrics are described in :mod:`testbed_app.experiments.hgp`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from problems.workloads.classifiers import build_classifier
from problems.workloads.decentralized import client_samples
from problems.workloads.personalization import PersonalizationProblem
from problems.workloads.splits import ClientSplit
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.sgp import StochasticGradientPush
from testbed_app.experiments.base import MetricRow
from testbed_app.experiments.hgp_common import METHODS
from testbed_app.experiments.hgp_common import PERSONALIZATION_CHECKS
from testbed_app.experiments.hgp_common import PERSONALIZATION_DEFAULTS
from testbed_app.experiments.hgp_common import DecentralizedRun
from testbed_app.experiments.hgp_common import gossip_counts
from testbed_app.experiments.hgp_common import rng_state
from testbed_app.experiments.hgp_common import set_rng
from testbed_app.experiments.hgp_common import train_by_sgp


@dataclasses.dataclass
class _MethodRun:
    """One method's running state: lambda and its Adam, the SGP/HGP state, rng and counters."""

    name: str
    problem: PersonalizationProblem
    lam: torch.Tensor
    optimizer: torch.optim.Adam | None
    state: HGPState
    rng: np.random.Generator
    rounds: int = 0
    floats_sent: int = 0
    best_val: float = -math.inf
    best_test: float = math.nan
    best_p10: float = math.nan

    @property
    def key(self) -> str:
        return self.name.replace("-", "_")


def _with_clusters(
    samples: Any, cluster_of: np.ndarray, shift: np.ndarray, scale: np.ndarray
) -> Any:
    """Client i's inputs normalised as ``(u - shift_c) / scale_c`` of its cluster c."""
    index = torch.as_tensor(cluster_of, device=samples.inputs.device)
    view = (-1,) + (1,) * (samples.inputs.ndim - 1)
    mean = torch.as_tensor(shift, dtype=samples.inputs.dtype, device=samples.inputs.device)[
        index
    ].reshape(view)
    std = torch.as_tensor(scale, dtype=samples.inputs.dtype, device=samples.inputs.device)[
        index
    ].reshape(view)
    return dataclasses.replace(samples, inputs=(samples.inputs - mean) / std)


class HGPPersonalizationExperiment(DecentralizedRun):
    """HGP-PL, HGP-MTL and SGP in lockstep (see the module docstring) on a config with
    ``[workload] kind = "hgp_personalization"``; its set-up and arguments are
    :class:`DecentralizedRun`'s."""

    DEFAULTS = PERSONALIZATION_DEFAULTS
    CHECKS = PERSONALIZATION_CHECKS

    def _set_up(self) -> None:
        options, methods = self.options, list(self.options["methods"])
        inner = self.estimator.inner
        assert isinstance(inner, StochasticGradientPush)  # checked by _estimator
        self.estimator = dataclasses.replace(
            self.estimator,
            inner=dataclasses.replace(inner, batch_size=options["sgp_batch_size"] or None),
        )
        rest, test = self.split.holdout(float(options["test_fraction"]), seed=self.seed)
        train, val = rest.holdout(float(options["val_fraction"]), seed=self.seed + 1)
        clusters = options["input_clusters"]
        n = self.split.n_clients
        cluster_rng = np.random.default_rng([self.seed, 11])
        self.cluster_of = cluster_rng.permutation(n) % clusters
        # the paper draws mean and variance ~ U[0, 1] per cluster; the variance is kept >= 0.25
        # so that one learning rate trains every cluster (inputs are scaled by at most 2)
        shift = cluster_rng.uniform(0.0, 1.0, clusters) if clusters > 1 else np.zeros(1)
        scale = np.sqrt(cluster_rng.uniform(0.25, 1.0, clusters)) if clusters > 1 else np.ones(1)

        def samples(split: ClientSplit, what: str) -> Any:
            stacked = client_samples(
                self.dataset.train_x,
                self.dataset.train_y,
                split.indices,
                what,
                dtype=self.dtype,
                device=self.device,
            )
            return _with_clusters(stacked, self.cluster_of, shift, scale)

        data = {
            "train": samples(train, "train"),
            "val": samples(val, "validation"),
            "test": samples(test, "test"),
        }
        for name, part in data.items():
            if int(part.counts.min()) < 1:
                raise ValueError(f"a client has no {name} samples; use fewer clients")
        net = build_classifier(
            self.config.workload.get("model", "cnn"),
            self.dataset.input_shape,
            self.dataset.n_classes,
        )

        def problem(mode: str) -> PersonalizationProblem:
            return PersonalizationProblem(
                net,
                data["train"],
                data[options["outer_data"]],
                mode=mode,  # type: ignore[arg-type]
                n_classes=self.dataset.n_classes,
                weight_decay=float(options["weight_decay"]),
                outer_l2=float(options[f"{mode}_outer_l2"]),
                learners=options["learners"],
                seed=self.seed,
                evaluation={"test": data["test"], "val": data["val"]},
            )

        problems = {"pl": problem("pl")}
        if "hgp-mtl" in methods:
            problems["mtl"] = problem("mtl")
        self.runs = [self._new_run(m, problems["mtl" if m == "hgp-mtl" else "pl"]) for m in methods]
        self.graph: GraphSequence = self.estimator.graph(n)
        self.step_count = 0

    def _check_options(self, options: dict[str, Any]) -> None:
        methods = list(options["methods"])
        if (
            not methods
            or any(m not in METHODS for m in methods)
            or len(set(methods)) != len(methods)
        ):
            raise ValueError(
                f"[workload] methods must be distinct names from {list(METHODS)}, "
                f"got {options['methods']!r}"
            )
        if options["outer_data"] not in ("train", "val"):
            raise ValueError(
                f"[workload] outer_data must be 'train' or 'val', got {options['outer_data']!r}"
            )

    def _new_run(self, method: str, problem: PersonalizationProblem) -> _MethodRun:
        lam = problem.initial_point()[0].clone().requires_grad_(method != "sgp")
        optimizer = None
        if method != "sgp":
            lr = float(self.options["mtl_hyper_lr" if method == "hgp-mtl" else "pl_hyper_lr"])
            optimizer = torch.optim.Adam([lam], lr=lr, betas=(0.9, 0.999))
        # every method starts from the same generator state (common random numbers): SGP's
        # minibatches of step 1 are then the same for all, and HGP-PL's step 1 equals SGP's
        return _MethodRun(
            method,
            problem,
            lam,
            optimizer,
            self.estimator.init(problem),
            np.random.default_rng([self.seed, 100]),
        )

    # ----------------------------------------------------------------- Experiment protocol
    def step(self) -> MetricRow:
        self.step_count += 1
        row: MetricRow = {"step": float(self.step_count)}
        for run in self.runs:
            row.update(self._advance(run))
        first = self.runs[0].key
        row.update(
            {
                "rounds": row[f"{first}_rounds"],
                "floats_sent": row[f"{first}_floats_sent"],
                "test_accuracy": row[f"{first}_test_accuracy"],
            }
        )
        return row

    def _advance(self, run: _MethodRun) -> MetricRow:
        problem, x = run.problem, run.lam.detach()
        if run.optimizer is None:  # SGP: retrain only, lambda fixed
            out, rounds, floats = train_by_sgp(
                self.estimator, problem, x, run.state, self.graph, run.rng
            )
            run.state = HGPState(out.y, out.omega, out.time)
            metrics = problem.evaluate(x, run.state.y)
        else:
            hgp = self.estimator.run(problem, x, run.state, run.rng, track_consensus=False)
            run.state = hgp.state
            rounds, floats = gossip_counts(hgp.calls)
            metrics = problem.evaluate(x, run.state.y)  # the model trained for this lambda
            run.optimizer.zero_grad()
            run.lam.grad = hgp.trajectory[-1, 0].reshape(-1).to(run.lam.dtype)
            run.optimizer.step()
        run.rounds += rounds
        run.floats_sent += floats
        if metrics["val_accuracy"] > run.best_val:
            run.best_val = metrics["val_accuracy"]
            run.best_test, run.best_p10 = metrics["test_accuracy"], metrics["test_p10"]
        k = run.key
        return {
            f"{k}_test_accuracy": metrics["test_accuracy"],
            f"{k}_test_p10": metrics["test_p10"],
            f"{k}_test_loss": metrics["test_loss"],
            f"{k}_val_accuracy": metrics["val_accuracy"],
            f"{k}_best_test_accuracy": run.best_test,
            f"{k}_best_test_p10": run.best_p10,
            f"{k}_rounds": float(run.rounds),
            f"{k}_floats_sent": float(run.floats_sent),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step_count,
            "runs": [
                {
                    "name": r.name,
                    "lam": r.lam.detach().clone(),
                    "optimizer": None if r.optimizer is None else r.optimizer.state_dict(),
                    "y": r.state.y.clone(),
                    "omega": r.state.omega.clone(),
                    "time": r.state.time,
                    "rng": rng_state(r.rng),
                    "rounds": r.rounds,
                    "floats_sent": r.floats_sent,
                    "best": (r.best_val, r.best_test, r.best_p10),
                }
                for r in self.runs
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = [s["name"] for s in state["runs"]]
        if saved != [r.name for r in self.runs]:
            raise ValueError(
                f"checkpoint holds methods {saved}, this experiment runs "
                f"{[r.name for r in self.runs]}"
            )
        self.step_count = int(state["step"])
        for run, s in zip(self.runs, state["runs"], strict=True):
            with torch.no_grad():
                run.lam.copy_(s["lam"])
            if run.optimizer is not None:
                run.optimizer.load_state_dict(s["optimizer"])
            run.state = HGPState(s["y"].to(self.device), s["omega"].to(self.device), int(s["time"]))
            set_rng(run.rng, s["rng"])
            run.rounds, run.floats_sent = int(s["rounds"]), int(s["floats_sent"])
            run.best_val, run.best_test, run.best_p10 = s["best"]

    # ----------------------------------------------------------------- records
    def split_json(self) -> dict[str, Any]:
        """The client split with each client's label histogram and input cluster."""
        return {**super().split_json(), "input_cluster": self.cluster_of.tolist()}

    def describe(self) -> dict[str, Any]:
        return {
            "methods": [r.name for r in self.runs],
            "problems": sorted({r.problem.id for r in self.runs}),
            "estimator": repr(self.estimator),
            "options": dict(self.options),
            "dim_y": {r.name: r.problem.dim_y for r in self.runs},
            "dtype": str(self.dtype),
            "device": str(self.device),
        }
