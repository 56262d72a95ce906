"""HGP's decentralized experiments on real data: personalization (Table 2), influence (Table 4).

Both run the registered HGP estimator (``[algorithm] name``, e.g. ``hgp-practical`` or ``hgp``,
with its SGP inner solver) unchanged on the per-client problems of
:mod:`problems.workloads.decentralized`, over the time-varying directed graph its
``graph_family`` names (RandD by default).

**Personalization** (sec. 5.3; :class:`HGPPersonalizationExperiment`). Each client splits its
samples into test (``test_fraction``, paper 20%) and the rest train:val = 3:1
(``val_fraction = 0.25``); with ``input_clusters = K`` the clients form K groups whose inputs are
normalised differently (the paper's 3 clusters, mean and variance drawn per cluster). One step is
one outer iteration of every method in ``methods``, in lockstep:

- ``hgp-pl`` / ``hgp-mtl``: SGP retraining of the shared model (warm-started), evaluation of the
  personalized model (the model trained for the current lambda), the HGP estimate
  ``v_i^(M) ~ <d_lambda F>_i`` (Alg. 2), and one Adam step on every lambda_i with it (the
  paper's outer optimiser, betas (0.9, 0.999), lambda_0 = 0);
- ``sgp``: SGP only (the "Global SGP" baseline: lambda stays 0, PL's mask is then 1).

With the same seed, step 1 of ``hgp-pl`` and ``sgp`` evaluate the same model (lambda = 0 and the
same SGP run); they part from step 2 on. Metrics per method ``m`` (``hgp_pl``, ``hgp_mtl``,
``sgp``): ``m_test_accuracy`` (Table 2's mean over clients weighted by local test size),
``m_test_p10`` (its bottom-10% percentile), ``m_val_accuracy``, ``m_best_test_accuracy`` /
``m_best_test_p10`` (at the step with the best validation accuracy so far: the paper's early
stopping), ``m_rounds`` and ``m_floats_sent`` (cumulative gossip steps and floats along edges).
``test_accuracy``, ``rounds``, ``floats_sent`` are those of the first method listed.

**Influence** (sec. 5.2, eq. 12, Table 4; :class:`HGPInfluenceExperiment`). Step 1 trains the
shared model by SGP and runs HGP at lambda = 1 (``rounds``/``floats_sent`` count both); the
prediction for dropping sample k of client i is ``-v_ik`` (first order in lambda_ik). The
``top_k`` predictions of largest magnitude (over all clients: the paper's "top 50" is ambiguous,
notes 7.3 item 26) are then checked against retraining without the sample, ``retrain_per_step``
of them per step: for ``model = "logreg"`` (convex) by the exact re-solve (damped Newton, warm
started at ``y*``), for a network by ``retrain_steps`` of full-batch gradient descent on
``sum_i g_i`` started from the consensus SGP model, against a control run with every sample and
the same steps (so continued training is not counted as an effect). Metrics: ``r2`` (Table 4's
``1 - SS_res/SS_tot`` of actual against predicted on the retrained instances), ``f1``
(detection of negative influence: removal lowers the validation loss), ``n_retrained``, and for
the convex model ``r2_exact`` (HGP against the exact influence ``-<d_lambda F>`` at ``y*`` on all
samples) and ``hgp_relative_error``; ``test_accuracy`` is the SGP consensus model's.

Both round-trip their whole state through ``state_dict`` / ``load_state_dict`` (iterates, Adam
moments, numpy generator states, counters), so a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from problems.workloads.data import Dataset
from problems.workloads.decentralized import (
    InfluenceProblem,
    PersonalizationProblem,
    build_classifier,
    client_samples,
)
from problems.workloads.splits import ClientSplit
from testbed._calls import CallCounter
from testbed._decentralized.graphs import GraphSequence
from testbed._decentralized.hgp import HGPState, HyperGradientPush
from testbed._decentralized.influence_metrics import negative_influence_f1, r_squared
from testbed._decentralized.ledger import GraphLedger
from testbed._decentralized.sgp import StochasticGradientPush
from testbed.experiments.base import Experiment, ExperimentConfig, MetricRow
from testbed.experiments.config import load_data, split_data
from testbed.oracles import Oracles

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
    "retrain_steps": 300,        # networks only: gradient steps of a retraining
    "retrain_step_size": 0.1,
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


# ------------------------------------------------------------------------------ personalization


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


def _with_clusters(samples: Any, cluster_of: np.ndarray, shift: np.ndarray,
                   scale: np.ndarray) -> Any:
    """Client i's inputs normalised as ``(u - shift_c) / scale_c`` of its cluster c."""
    index = torch.as_tensor(cluster_of, device=samples.inputs.device)
    view = (-1,) + (1,) * (samples.inputs.ndim - 1)
    mean = torch.as_tensor(shift, dtype=samples.inputs.dtype,
                           device=samples.inputs.device)[index].reshape(view)
    std = torch.as_tensor(scale, dtype=samples.inputs.dtype,
                          device=samples.inputs.device)[index].reshape(view)
    return dataclasses.replace(samples, inputs=(samples.inputs - mean) / std)


class HGPPersonalizationExperiment:
    """HGP-PL, HGP-MTL and SGP in lockstep (see the module docstring).

    Args:
        config: a validated config with ``[workload] kind = "hgp_personalization"``.
        device: overrides ``[run] device``.
        dataset: the loaded data (default: ``[data]`` through the config loader's cache).
    """

    def __init__(self, config: ExperimentConfig, device: str | None = None,
                 dataset: Dataset | None = None) -> None:
        options = _options(config, PERSONALIZATION_DEFAULTS)
        methods = list(options["methods"])
        if not methods or any(m not in METHODS for m in methods) or len(set(methods)) != len(
                methods):
            raise ValueError(f"[workload] methods must be distinct names from {list(METHODS)}, "
                             f"got {options['methods']!r}")
        if options["outer_data"] not in ("train", "val"):
            raise ValueError(f"[workload] outer_data must be 'train' or 'val', got "
                             f"{options['outer_data']!r}")
        test_fraction = _check_fraction("test_fraction", options["test_fraction"])
        val_fraction = _check_fraction("val_fraction", options["val_fraction"])
        clusters = _check_positive("input_clusters", options["input_clusters"], integer=True)
        for key in ("pl_hyper_lr", "mtl_hyper_lr"):
            _check_positive(key, options[key])
        for key in ("weight_decay", "pl_outer_l2", "mtl_outer_l2"):
            _check_nonnegative(key, options[key])
        self.name, self.config, self.options = config.name, config, options
        self.device = _device(config, device)
        self.dtype = DTYPES[config.run["dtype"]]
        self.seed = int(config.run["seed"])
        batch = options["sgp_batch_size"]
        if batch != 0:
            _check_positive("sgp_batch_size", batch, integer=True)
        estimator = _estimator(config)
        inner = estimator.inner
        assert isinstance(inner, StochasticGradientPush)  # checked by _estimator
        self.estimator = dataclasses.replace(
            estimator, inner=dataclasses.replace(inner, batch_size=batch or None))
        self.dataset = load_data(config.data) if dataset is None else dataset
        self.split: ClientSplit = split_data(config.split, self.dataset, seed=self.seed)
        rest, test = self.split.holdout(test_fraction, seed=self.seed)
        train, val = rest.holdout(val_fraction, seed=self.seed + 1)
        n = self.split.n_clients
        cluster_rng = np.random.default_rng([self.seed, 11])
        self.cluster_of = cluster_rng.permutation(n) % clusters
        # the paper draws mean and variance ~ U[0, 1] per cluster; the variance is kept >= 0.25
        # so that one learning rate trains every cluster (inputs are scaled by at most 2)
        shift = cluster_rng.uniform(0.0, 1.0, clusters) if clusters > 1 else np.zeros(1)
        scale = (np.sqrt(cluster_rng.uniform(0.25, 1.0, clusters)) if clusters > 1
                 else np.ones(1))

        def samples(split: ClientSplit, what: str) -> Any:
            stacked = client_samples(self.dataset.train_x, self.dataset.train_y, split.indices,
                                     what, dtype=self.dtype, device=self.device)
            return _with_clusters(stacked, self.cluster_of, shift, scale)

        data = {"train": samples(train, "train"), "val": samples(val, "validation"),
                "test": samples(test, "test")}
        for name, part in data.items():
            if int(part.counts.min()) < 1:
                raise ValueError(f"a client has no {name} samples; use fewer clients")
        net = build_classifier(config.workload.get("model", "cnn"), self.dataset.input_shape,
                               self.dataset.n_classes)

        def problem(mode: str) -> PersonalizationProblem:
            return PersonalizationProblem(
                net, data["train"], data[options["outer_data"]], mode=mode,  # type: ignore[arg-type]
                n_classes=self.dataset.n_classes, weight_decay=float(options["weight_decay"]),
                outer_l2=float(options[f"{mode}_outer_l2"]), learners=options["learners"],
                seed=self.seed, evaluation={"test": data["test"], "val": data["val"]})

        problems = {"pl": problem("pl")}
        if "hgp-mtl" in methods:
            problems["mtl"] = problem("mtl")
        self.runs = [self._new_run(m, problems["mtl" if m == "hgp-mtl" else "pl"])
                     for m in methods]
        self.graph: GraphSequence = self.estimator.graph(n)
        self.step_count = 0

    def _new_run(self, method: str, problem: PersonalizationProblem) -> _MethodRun:
        lam = problem.initial_point()[0].clone().requires_grad_(method != "sgp")
        optimizer = None
        if method != "sgp":
            lr = float(self.options["mtl_hyper_lr" if method == "hgp-mtl" else "pl_hyper_lr"])
            optimizer = torch.optim.Adam([lam], lr=lr, betas=(0.9, 0.999))
        # every method starts from the same generator state (common random numbers): SGP's
        # minibatches of step 1 are then the same for all, and HGP-PL's step 1 equals SGP's
        return _MethodRun(method, problem, lam, optimizer, self.estimator.init(problem),
                          np.random.default_rng([self.seed, 100]))

    # ----------------------------------------------------------------- Experiment protocol
    def step(self) -> MetricRow:
        self.step_count += 1
        row: MetricRow = {"step": float(self.step_count)}
        for run in self.runs:
            row.update(self._advance(run))
        first = self.runs[0].key
        row.update({"rounds": row[f"{first}_rounds"], "floats_sent": row[f"{first}_floats_sent"],
                    "test_accuracy": row[f"{first}_test_accuracy"]})
        return row

    def _advance(self, run: _MethodRun) -> MetricRow:
        problem, x = run.problem, run.lam.detach()
        if run.optimizer is None:  # SGP: retrain only, lambda fixed
            counter = CallCounter()
            inner = self.estimator.inner
            assert isinstance(inner, StochasticGradientPush)
            out = inner.run(problem, x, run.state.y, run.state.omega, run.state.time, self.graph,
                            Oracles(problem, counter), GraphLedger(problem.n_clients, counter),
                            run.rng)
            run.state = HGPState(out.y, out.omega, out.time)
            rounds, floats = _gossip_counts(counter.snapshot())
            metrics = problem.evaluate(x, run.state.y)
        else:
            hgp = self.estimator.run(problem, x, run.state, run.rng, track_consensus=False)
            run.state = hgp.state
            rounds, floats = _gossip_counts(hgp.calls)
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
        return {f"{k}_test_accuracy": metrics["test_accuracy"],
                f"{k}_test_p10": metrics["test_p10"], f"{k}_test_loss": metrics["test_loss"],
                f"{k}_val_accuracy": metrics["val_accuracy"],
                f"{k}_best_test_accuracy": run.best_test, f"{k}_best_test_p10": run.best_p10,
                f"{k}_rounds": float(run.rounds), f"{k}_floats_sent": float(run.floats_sent)}

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step_count, "runs": [{
            "name": r.name, "lam": r.lam.detach().clone(),
            "optimizer": None if r.optimizer is None else r.optimizer.state_dict(),
            "y": r.state.y.clone(), "omega": r.state.omega.clone(), "time": r.state.time,
            "rng": _rng_state(r.rng), "rounds": r.rounds, "floats_sent": r.floats_sent,
            "best": (r.best_val, r.best_test, r.best_p10)} for r in self.runs]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = [s["name"] for s in state["runs"]]
        if saved != [r.name for r in self.runs]:
            raise ValueError(f"checkpoint holds methods {saved}, this experiment runs "
                             f"{[r.name for r in self.runs]}")
        self.step_count = int(state["step"])
        for run, s in zip(self.runs, state["runs"], strict=True):
            with torch.no_grad():
                run.lam.copy_(s["lam"])
            if run.optimizer is not None:
                run.optimizer.load_state_dict(s["optimizer"])
            run.state = HGPState(s["y"].to(self.device), s["omega"].to(self.device),
                                 int(s["time"]))
            _set_rng(run.rng, s["rng"])
            run.rounds, run.floats_sent = int(s["rounds"]), int(s["floats_sent"])
            run.best_val, run.best_test, run.best_p10 = s["best"]

    # ----------------------------------------------------------------- records
    def split_json(self) -> dict[str, Any]:
        """The client split with each client's label histogram and input cluster."""
        record = dict(self.split.to_json(self.dataset.train_y, self.dataset.n_classes))
        record["input_cluster"] = self.cluster_of.tolist()
        return record

    def describe(self) -> dict[str, Any]:
        return {"methods": [r.name for r in self.runs],
                "problems": sorted({r.problem.id for r in self.runs}),
                "estimator": repr(self.estimator), "options": dict(self.options),
                "dim_y": {r.name: r.problem.dim_y for r in self.runs},
                "dtype": str(self.dtype), "device": str(self.device)}


# ------------------------------------------------------------------------------ influence


class HGPInfluenceExperiment:
    """Influence estimation against retraining (see the module docstring).

    Args:
        config: a validated config with ``[workload] kind = "hgp_influence"`` and
            ``model = "logreg"`` (convex, exact retraining) or a network name.
        device: overrides ``[run] device``.
        dataset: the loaded data (default: ``[data]`` through the config loader's cache).
    """

    def __init__(self, config: ExperimentConfig, device: str | None = None,
                 dataset: Dataset | None = None) -> None:
        options = _options(config, INFLUENCE_DEFAULTS)
        val_fraction = _check_fraction("val_fraction", options["val_fraction"])
        _check_nonnegative("weight_decay", options["weight_decay"])
        for key in ("top_k", "retrain_per_step", "retrain_steps"):
            _check_positive(key, options[key], integer=True)
        _check_positive("retrain_step_size", options["retrain_step_size"])
        self.name, self.config, self.options = config.name, config, options
        self.device = _device(config, device)
        self.dtype = DTYPES[config.run["dtype"]]
        self.seed = int(config.run["seed"])
        self.estimator = _estimator(config)
        self.dataset = load_data(config.data) if dataset is None else dataset
        self.split: ClientSplit = split_data(config.split, self.dataset, seed=self.seed)
        train, val = self.split.holdout(val_fraction, seed=self.seed)
        net = build_classifier(config.workload.get("model", "logreg"), self.dataset.input_shape,
                               self.dataset.n_classes)

        def problem(dtype: torch.dtype) -> InfluenceProblem:
            return InfluenceProblem(
                net, client_samples(self.dataset.train_x, self.dataset.train_y, train.indices,
                                    "train", dtype=dtype, device=self.device),
                client_samples(self.dataset.train_x, self.dataset.train_y, val.indices,
                               "validation", dtype=dtype, device=self.device),
                weight_decay=float(options["weight_decay"]), seed=self.seed)

        self.problem = problem(self.dtype)
        if net.convex and self.problem.weight_decay <= 0:
            raise ValueError("[workload] weight_decay must be > 0 for logreg (strong convexity "
                             "makes the exact re-solve and the exact influence well defined)")
        # the reference answers (exact solve, exact influence, retraining) of the convex model
        # are computed in float64 whatever the run's dtype: Newton reaches round-off only there
        self.reference = (problem(torch.float64) if net.convex and self.dtype != torch.float64
                          else self.problem)
        self.total_steps = 1 + math.ceil(options["top_k"] / options["retrain_per_step"])
        if int(config.run["rounds"]) > self.total_steps:
            raise ValueError(f"[run] rounds: this influence run has {self.total_steps} steps "
                             f"(1 training + HGP step, then top_k={options['top_k']} "
                             f"retrainings, {options['retrain_per_step']} per step); got "
                             f"{config.run['rounds']}")
        self.test_x = self.dataset.test_x.to(device=self.device, dtype=self.dtype)
        self.test_y = self.dataset.test_y.to(self.device)
        self.rng = np.random.default_rng([self.seed, 200])
        self.step_count = 0
        self.x0 = self.problem.initial_point()[0]
        self.record: dict[str, Any] = {}

    # ----------------------------------------------------------------- retraining
    def _solve(self, x: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """The model retrained for hyperparameters x from ``start`` (module docstring)."""
        if self.problem.net.convex:
            return self.reference.exact_inner_solution(x, start=start)
        y = start.clone()
        step = float(self.options["retrain_step_size"])
        for _ in range(int(self.options["retrain_steps"])):
            y = y - step * torch.func.grad(lambda v: self.problem.total_inner(x, v))(y)
        return y.detach()

    def _first_step(self) -> MetricRow:
        problem = self.problem
        hgp = self.estimator.run(problem, self.x0, self.estimator.init(problem), self.rng,
                                 track_consensus=False)
        rounds, floats = _gossip_counts(hgp.calls)
        mask = problem.sample_mask
        predicted = -hgp.trajectory[-1, 0].detach()
        y_model = hgp.y.mean(0).detach()  # the consensus of the SGP iterates
        record: dict[str, Any] = {"predicted": predicted, "y_model": y_model, "rounds": rounds,
                                  "floats_sent": floats, "actual": []}
        scores = torch.where(mask, predicted.abs(), torch.full_like(predicted, -1.0)).reshape(-1)
        k = min(int(self.options["top_k"]), int(mask.sum()))
        top = torch.argsort(scores, descending=True)[:k].cpu()
        record["top"] = [(int(i) // problem.dim_hyper, int(i) % problem.dim_hyper) for i in top]
        row: MetricRow = {"r2_exact": math.nan, "r2_exact_top": math.nan,
                          "hgp_relative_error": math.nan}
        if problem.net.convex:
            reference, x0 = self.reference, self.x0.to(torch.float64)
            y_ref = reference.exact_inner_solution(x0, start=y_model.to(torch.float64))
            exact = -reference.exact_global_grad(x0, y_ref)
            predicted = predicted.to(torch.float64)
            flat_mask = mask.reshape(-1)
            chosen = torch.as_tensor([i * problem.dim_hyper + j for i, j in record["top"]],
                                     device=exact.device)
            row["r2_exact"] = r_squared(exact.reshape(-1)[flat_mask].cpu().numpy(),
                                        predicted.reshape(-1)[flat_mask].cpu().numpy())
            row["r2_exact_top"] = r_squared(exact.reshape(-1)[chosen].cpu().numpy(),
                                            predicted.reshape(-1)[chosen].cpu().numpy())
            row["hgp_relative_error"] = float((predicted - exact)[mask].norm()
                                              / exact[mask].norm())
            record["y_ref"] = y_ref
        else:
            record["y_ref"] = self._solve(self.x0, y_model)  # the control retraining
        record["F_ref"] = float(self.reference.total_outer(self.x0.to(self.reference.dtype),
                                                           record["y_ref"]))
        record["first_row"] = dict(row)
        self.record = record
        return row

    def _retrain_next(self) -> None:
        record, problem = self.record, self.problem
        done = len(record["actual"])
        for client, sample in record["top"][done:done + int(self.options["retrain_per_step"])]:
            x = problem.without(self.x0, client, sample).to(self.reference.dtype)
            start = record["y_ref"] if problem.net.convex else record["y_model"]
            effect = float(self.reference.total_outer(x, self._solve(x, start))) - \
                record["F_ref"]
            record["actual"].append(effect)

    # ----------------------------------------------------------------- Experiment protocol
    def step(self) -> MetricRow:
        if self.step_count >= self.total_steps:
            raise RuntimeError(f"{self.name}: the influence run is complete after "
                               f"{self.total_steps} steps")
        self.step_count += 1
        row = self._first_step() if self.step_count == 1 else dict(self.record["first_row"])
        if self.step_count > 1:
            self._retrain_next()
        actual = np.asarray(self.record["actual"], float)
        predicted = np.asarray([float(self.record["predicted"][i, j])
                                for i, j in self.record["top"][:actual.size]])
        with torch.no_grad():
            logits = self.problem.net.apply(self.record["y_model"], self.test_x)
            accuracy = float((logits.argmax(-1) == self.test_y).to(self.dtype).mean())
        row.update({"step": float(self.step_count), "rounds": float(self.record["rounds"]),
                    "floats_sent": float(self.record["floats_sent"]), "test_accuracy": accuracy,
                    "r2": r_squared(actual, predicted),
                    "f1": negative_influence_f1(actual, predicted),
                    "n_retrained": float(actual.size)})
        return row

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step_count, "rng": _rng_state(self.rng),
                "record": {k: (list(v) if isinstance(v, list) else v)
                           for k, v in self.record.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count = int(state["step"])
        _set_rng(self.rng, state["rng"])
        record = dict(state["record"])
        for key in ("predicted", "y_model", "y_ref"):
            if isinstance(record.get(key), torch.Tensor):
                record[key] = record[key].to(self.device)
        self.record = record

    # ----------------------------------------------------------------- records
    def split_json(self) -> dict[str, Any]:
        return dict(self.split.to_json(self.dataset.train_y, self.dataset.n_classes))

    def describe(self) -> dict[str, Any]:
        return {"problem": self.problem.id, "dim_y": self.problem.dim_y,
                "dim_x": self.problem.dim_x, "estimator": repr(self.estimator),
                "options": dict(self.options), "total_steps": self.total_steps,
                "dtype": str(self.dtype), "device": str(self.device)}


# ------------------------------------------------------------------------------ builders


@dataclasses.dataclass(frozen=True)
class ExperimentBuilder:
    """A builder ``(config, device) -> Experiment`` with the ``[workload]`` keys it accepts
    (``OPTIONS``, read by the config loader before any work)."""

    OPTIONS: frozenset[str]
    make: Callable[[ExperimentConfig, str | None], Experiment]

    def __call__(self, config: ExperimentConfig, device: str | None = None) -> Experiment:
        return self.make(config, device)


build_hgp_personalization = ExperimentBuilder(PERSONALIZATION_OPTIONS,
                                              HGPPersonalizationExperiment)
build_hgp_influence = ExperimentBuilder(INFLUENCE_OPTIONS, HGPInfluenceExperiment)

__all__ = [
    "HGPInfluenceExperiment", "HGPPersonalizationExperiment", "INFLUENCE_OPTIONS",
    "PERSONALIZATION_OPTIONS", "build_hgp_influence", "build_hgp_personalization",
    "negative_influence_f1", "r_squared",
]
