"""Server-based experiments: a registered outer algorithm on an MLP/CNN workload.

:class:`ServerExperiment` builds, from a validated config, the dataset and its client split,
the workload problem (:func:`problems.workloads.registry.build_workload`), the registered
algorithm (``[algorithm] name`` and its overrides of the registry defaults) and one persistent
:class:`~testbed.federation.context.FederatedContext`. One :meth:`~ServerExperiment.step` is
one ``algorithm.step``: the outer iteration of FedNest, LFedNest, FBO-AggITD or FedMSA, with
all its communication rounds counted by the context's ledger.

Exact resumption: :meth:`~ServerExperiment.state_dict` holds the algorithm state, the numpy
generator's state (client sampling and minibatches draw from it), torch's generator state, the
call counter and the ledger's counts, so a run interrupted after step k and resumed from its
checkpoint writes the same metrics, bit for bit, as an uninterrupted run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from problems.workloads.registry import build_workload
from testbed.algorithms.base import OuterAlgorithm
from testbed.algorithms.base import model_point
from testbed.estimators.validation import GROWTH_FACTOR
from testbed.federation.context import FederatedContext
from testbed.registry import get_estimator
from testbed_app.experiments.algorithm import build_entry
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.base import MetricRow
from testbed_app.experiments.data import load_data

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def build_problem(config: ExperimentConfig, device: torch.device | str) -> Any:
    """The workload problem of a validated server-experiment config: its dataset, client split
    and model, in the config's dtype on ``device`` (also what a deployed client builds); a
    :class:`~problems.Problem` with the workloads' ``description`` and ``evaluate``."""
    options = {k: v for k, v in config.workload.items() if k not in ("kind", "model")}
    # the split spec, not a computed split: loss tuning splits its long-tailed subsample
    return build_workload(
        config.workload["kind"],
        load_data(config.data),
        dict(config.split),
        model=config.workload["model"],
        seed=int(config.run["seed"]),
        device=torch.device(device),
        dtype=DTYPES[config.run["dtype"]],
        **options,
    )


def outer_algorithm(name: str, entry: Any) -> OuterAlgorithm:
    """``entry``, the built registry entry ``name``, as a server experiment's outer algorithm
    (a ValueError when the entry is an estimator)."""
    info = get_estimator(name)
    if info.role != "algorithm":
        raise ValueError(
            f"[algorithm] name: {info.name!r} is an estimator; a server "
            "experiment runs an outer algorithm (role 'algorithm' in "
            "`testbed list`)"
        )
    algorithm: OuterAlgorithm = entry
    return algorithm


def build_algorithm(algorithm: dict[str, Any]) -> OuterAlgorithm:
    """The registered outer algorithm an ``[algorithm]`` table names, with its overrides
    (``testbed deploy``; a validated config carries its own, ``config.entry``)."""
    return outer_algorithm(algorithm["name"], build_entry(algorithm))


class ServerExperiment:
    """One registered outer algorithm run on a server-based workload (see the module doc).

    Args:
        config: a validated config whose ``[workload] kind`` is a server-based workload.
        device: ``"cpu"`` or ``"cuda"`` (the config's ``[run] device`` by default).
    """

    def __init__(self, config: ExperimentConfig, device: str | None = None) -> None:
        self.name = config.name
        self.config = config
        run = config.run
        self.device = torch.device(device or run["device"])
        self.eval_every = int(run["eval_every"])
        self.last_step = int(run["steps"])
        self.dataset = load_data(config.data)
        self.problem = build_problem(config, self.device)
        self.algorithm = outer_algorithm(config.algorithm["name"], config.entry)
        self.rng = np.random.default_rng(int(run["seed"]))
        self.ctx = FederatedContext(
            self.problem, self.rng, self.algorithm.participation, self.algorithm.batch_size
        )
        self.algorithm.check_problem(self.problem)
        self.state = self.algorithm.init(self.problem)
        x0, y0 = model_point(self.state, self.problem.dim_y)
        self._start_norms = (float(x0.norm()), float(y0.norm()))
        self.step_count = 0
        # the metrics at the starting point: the divergence watch's reference for the losses
        # (testbed_app.experiments.divergence), and the evaluation's keys, so that every row
        # has the same columns
        self.initial_metrics = self._evaluate()
        self.eval_keys = tuple(self.initial_metrics)
        self.chance_accuracy = 1.0 / self.dataset.n_classes

    # ------------------------------------------------------------------------- records
    def split_json(self) -> dict[str, Any]:
        """The client split the workload used, with each client's label histogram."""
        return dict(self.problem.description["split"])

    def describe(self) -> dict[str, Any]:
        """Facts for ``metadata.json``: the workload, the algorithm as built, its cost model."""
        return {
            "problem_id": self.problem.id,
            "dim_x": self.problem.dim_x,
            "dim_y": self.problem.dim_y,
            "n_clients": self.problem.n_clients,
            "workload": {k: v for k, v in self.problem.description.items() if k != "split"},
            "algorithm": repr(self.algorithm),
            "rounds_per_iteration": self.algorithm.rounds_per_iteration(),
        }

    # ------------------------------------------------------------------------- stepping
    def _evaluate(self) -> dict[str, float]:
        x, y = model_point(self.state, self.problem.dim_y)
        with torch.no_grad():
            return {key: float(value) for key, value in self.problem.evaluate(x, y).items()}

    def step(self) -> MetricRow:
        """One outer iteration of the algorithm; its cumulative cost and (maybe) test metrics."""
        self.state = self.algorithm.step(self.ctx, self.state)
        self.step_count += 1
        calls = self.ctx.calls()
        row: MetricRow = {
            "step": float(self.step_count),
            "rounds": float(calls.comm_rounds),
            "floats_sent": float(calls.floats_sent),
            "floats_up": float(calls.floats_up),
            "floats_down": float(calls.floats_down),
            "oracle_calls": float(calls.oracle_calls),
        }
        evaluate = self.step_count % self.eval_every == 0 or self.step_count == self.last_step
        scores = self._evaluate() if evaluate else {}
        row.update({key: scores.get(key, math.nan) for key in self.eval_keys})
        return row

    def divergence(self) -> str | None:
        """Why the current iterate counts as diverged (the runner stops there), or None:
        a non-finite ``x`` or ``y``, or one grown past ``GROWTH_FACTOR`` times its starting
        norm (see :data:`testbed.estimators.validation.GROWTH_FACTOR`)."""
        x, y = model_point(self.state, self.problem.dim_y)
        for name, value, start in (("x", x, self._start_norms[0]), ("y", y, self._start_norms[1])):
            if not bool(torch.isfinite(value).all()):
                return f"the iterate {name} is not finite"
            norm, limit = float(value.norm()), GROWTH_FACTOR * max(1.0, start)
            if not norm <= limit:
                return (
                    f"||{name}|| = {norm:.3g} grew past {GROWTH_FACTOR:.0e} x max(1, "
                    f"||{name}_0||) = {limit:.3g}"
                )
        return None

    # ------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """The state a resumption needs. Every draw of a run comes from the experiment's numpy
        generator (client sampling, minibatches) or from seeded initialisations (the models
        fork torch's RNG around ``manual_seed``); torch's process-wide RNG is not drawn from,
        so it is not part of the state (saving it would make a checkpoint's bytes depend on
        what the process drew before the run)."""
        return {
            "step": self.step_count,
            "algorithm_state": self.state,
            "numpy_rng": self.rng.bit_generator.state,
            "calls": {
                k: v
                for k, v in self.ctx.calls().as_dict().items()
                if k not in ("floats_sent", "oracle_calls")
            },
            "ledger": self.ctx.ledger.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (this experiment must be freshly built)."""
        if self.step_count != 0 or self.ctx.calls().comm_rounds != 0:
            raise RuntimeError("load_state_dict needs a freshly built experiment")
        self.step_count = int(state["step"])
        self.state = state["algorithm_state"]
        self.rng.bit_generator.state = state["numpy_rng"]
        # "torch_rng" / "cuda_rng" of older checkpoints: nothing draws from them (state_dict)
        for field, count in state["calls"].items():
            self.ctx.counter.add(field, count)
        self.ctx.ledger.load_state_dict(state["ledger"])


def build_server_experiment(
    config: ExperimentConfig, device: str | None = None
) -> ServerExperiment:
    """The :data:`~testbed_app.experiments.registry.EXPERIMENT_BUILDERS` entry of server
    workloads."""
    return ServerExperiment(config, device)
