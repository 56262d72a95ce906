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
shared model by SGP (``rounds``/``floats_sent`` count SGP's and HGP's gossip), refines it to
stationarity, and runs HGP's Neumann series at lambda = 1 on the refined model; the prediction
for dropping sample k of client i is ``-v_ik`` (first order in lambda_ik). The ``top_k``
predictions of largest magnitude (over all clients: the paper's "top 50" is ambiguous, notes 7.3
item 26) are then checked against retraining without the sample, ``retrain_per_step`` of them
per step.

*Influence protocol* (every figure below is a metrics column):

1. Trained model near stationarity. ``train_grad_norm_sgp`` is ``||grad G||`` (``G = sum_i
   g_i``) at the SGP consensus; full-batch descent on G at step ``1/lambda_max`` (re-estimated
   every :data:`REFINE_CHUNK` steps) refines it until ``||grad G|| <= train_grad_tol`` or
   ``train_refine_steps`` (``train_grad_norm``, ``train_refine_steps``, ``train_stationary``).
   The refinement is a centralized reference computation: its gradients are not gossip and are
   not counted in ``rounds``.
2. Retraining step. ``lambda_max`` of ``grad^2 G`` at the trained model by seeded power
   iteration (:func:`~problems.workloads.decentralized.largest_eigenvalue`; residual tolerance
   and cap are stated there). The step is ``1/lambda_max`` (``retrain_step_size = "auto"``): the
   largest step that is monotone in every eigendirection of the local quadratic model, half the
   divergence bound, which leaves a factor 2 for the power iteration's estimate and for
   curvature growth along the path. Descent uses Nesterov's momentum
   ``beta = (1 - sqrt(q)) / (1 + sqrt(q))``, ``q = n wd / lambda_max`` (``momentum =
   "nesterov"``; a number sets beta, 0 is plain gradient descent), whose stable bound is
   ``eta < 2 (1 + beta) / ((1 + 2 beta) lambda_max)`` (``retrain_step_bound``; 2/lambda_max at
   beta = 0). A configured ``retrain_step_size`` at or above that bound is refused with an error
   naming it (checked once lambda_max is known, at step 1; checked for every model, used by
   networks). For a network a retraining runs from the trained model until
   ``||grad G_-k|| <= retrain_grad_tol`` or ``retrain_steps`` steps, against a control run on G
   from the same start (so continued training is not counted as an effect; when both hit the
   cap they take equal steps). For ``model = "logreg"`` retraining is the exact re-solve
   (damped Newton in float64, warm started at ``y*``). Recorded: ``lambda_max``,
   ``retrain_step``, ``retrain_momentum``, ``control_steps``, ``retrain_steps_max``,
   ``retrain_grad_norm_max``, ``retrain_reached`` (fraction of retrainings that reached the
   tolerance).
3. Damping. ``hessian_lambda_min`` of the averaged Hessian ``(1/n) grad^2 G`` at the trained
   model by Lanczos (:func:`~problems.workloads.decentralized.smallest_eigenvalue`). Where it is
   negative, HGP runs on ``H_i + delta I`` with ``delta = |lambda_min| + margin``; the margin is
   ``1/(eta M)`` (``damping_margin = "auto"``): curvature below it is not resolved by M Neumann
   terms anyway (``(1 - eta m)^M >= e^-1`` there), so the damping leaves what the truncated
   series resolves nearly unchanged while its slowest mode contracts by ``e^-1`` over the
   series, keeping the iterates bounded. HGP's estimator has no damping term; the problem
   carries it (:meth:`~problems.workloads.decentralized.InfluenceProblem.with_damping`, Hessian
   only). ``eta (hessian_lambda_max + delta) >= 2`` (``neumann_eta_lambda``) is refused.
4. Metrics: ``r2`` (Table 4's ``1 - SS_res/SS_tot`` of actual against predicted), ``pearson_r``
   and ``pearson_r2`` (the best affine fit's R^2, an upper bound of ``r2``), ``sign_agreement``,
   ``f1`` (detection of negative influence: removal lowers the validation loss),
   ``n_retrained``; the resolution of the actual effects: the first ``jitter_count``
   retrainings are repeated from the start plus ``jitter_scale * N(0, I)`` (seeded per
   instance), ``jitter_mean_abs`` (mean ``|delta F|``) beside ``effect_mean_abs`` (mean
   ``|actual effect|``). For the convex model also ``r2_exact`` (HGP against the exact
   influence ``-<d_lambda F>`` at ``y*`` on all samples) and ``hgp_relative_error``;
   ``test_accuracy`` is the trained model's.

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
    LANCZOS_TOL,
    POWER_ITERATIONS,
    POWER_RTOL,
    Descent,
    InfluenceProblem,
    PersonalizationProblem,
    SpectralEstimate,
    build_classifier,
    client_samples,
    descend,
    largest_eigenvalue,
    momentum_bound,
    smallest_eigenvalue,
)
from problems.workloads.splits import ClientSplit
from testbed.calls import CallCounter
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import HGPState, HyperGradientPush
from testbed.decentralized.influence_metrics import negative_influence_f1, r_squared
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.oracles import Oracles
from testbed_app.experiments.base import Experiment, ExperimentConfig, MetricRow
from testbed_app.experiments.config import load_data, split_data

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


#: Steps of the trained model's refinement between two power iterations: lambda_max grows while a
#: network trains (progressive sharpening; 57 -> 88 over 4000 steps on the CNN), so the step
#: 1/lambda_max is re-estimated every REFINE_CHUNK steps (a power iteration costs ~10-40
#: Hessian-vector products, a few percent of a chunk's gradients).
REFINE_CHUNK = 250


def pearson_r(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Pearson's correlation of ``predicted`` with ``actual``; NaN for fewer than two points or
    no spread. Its square is the R^2 of the best affine fit, an upper bound of
    :func:`r_squared` (which also charges a wrong slope or offset)."""
    a, p = np.asarray(actual, float), np.asarray(predicted, float)
    if a.size < 2 or float(a.std()) == 0.0 or float(p.std()) == 0.0:
        return math.nan
    return float(np.corrcoef(a, p)[0, 1])


def sign_agreement(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Fraction of instances whose predicted change has the actual change's sign (NaN: none)."""
    a, p = np.asarray(actual, float), np.asarray(predicted, float)
    return math.nan if a.size == 0 else float((np.sign(a) == np.sign(p)).mean())


def _check_auto(name: str, value: Any, check: Callable[[str, Any], Any]) -> Any:
    return value if value == "auto" else check(name, value)


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
        for key in ("top_k", "retrain_per_step", "retrain_steps", "train_refine_steps"):
            _check_positive(key, options[key], integer=True)
        for key in ("train_grad_tol", "retrain_grad_tol", "jitter_scale"):
            _check_positive(key, options[key])
        _check_auto("retrain_step_size", options["retrain_step_size"], _check_positive)
        _check_auto("damping_margin", options["damping_margin"], _check_nonnegative)
        jitter = options["jitter_count"]
        if isinstance(jitter, bool) or not isinstance(jitter, int) or jitter < 0:
            raise ValueError(f"[workload] jitter_count must be an integer >= 0, got {jitter!r}")
        momentum = options["momentum"]
        if momentum != "nesterov" and (isinstance(momentum, bool) or not isinstance(
                momentum, (int, float)) or not 0.0 <= momentum < 1.0):
            raise ValueError(f"[workload] momentum must be \"nesterov\" or a number in [0, 1), "
                             f"got {momentum!r}")
        if momentum == "nesterov" and options["weight_decay"] <= 0:
            raise ValueError("[workload] momentum = \"nesterov\" sets beta from the weight "
                             "decay's curvature n * weight_decay; it needs weight_decay > 0")
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

    # ----------------------------------------------------------------- the protocol's pieces
    def _grad(self, x: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda v: self.problem.total_grad(x, v)

    def _lambda_max(self, y: torch.Tensor) -> SpectralEstimate:
        """lambda_max of ``grad^2 G`` at ``y`` (power iteration, seeded by the run's seed)."""
        problem, x = self.problem, self.x0
        estimate = largest_eigenvalue(lambda v: problem.total_hvp(x, y, v), problem.dim_y,
                                      seed=self.seed, dtype=self.dtype, device=self.device)
        if not estimate.value > 0.0:
            raise ValueError(f"{self.name}: the Hessian of the training objective has no "
                             f"positive eigenvalue (lambda_max = {estimate.value:g}); gradient "
                             "descent has no stable step")
        return estimate

    def _momentum(self, lam_max: float) -> float:
        """``beta`` of Nesterov's method: ``(1 - sqrt(q)) / (1 + sqrt(q))`` with
        ``q = n wd / lambda_max`` (the weight decay's curvature, the one curvature floor known
        before training; for a non-convex loss it only sets beta, convergence is checked by the
        gradient tolerance), or the configured number."""
        momentum = self.options["momentum"]
        if momentum != "nesterov":
            return float(momentum)
        q = min(1.0, self.problem.n_clients * self.problem.weight_decay / lam_max)
        return (1.0 - math.sqrt(q)) / (1.0 + math.sqrt(q))

    def _refine(self, y: torch.Tensor) -> tuple[Descent, list[float]]:
        """The trained model refined by full-batch descent on G at step 1/lambda_max
        (re-estimated every REFINE_CHUNK steps) until ``||grad G|| <= train_grad_tol``."""
        tol, cap = float(self.options["train_grad_tol"]), int(self.options["train_refine_steps"])
        taken, estimates = 0, []
        while True:
            lam = self._lambda_max(y).value
            estimates.append(lam)
            out = descend(self._grad(self.x0), y, step=1.0 / lam, tol=tol,
                          max_steps=min(REFINE_CHUNK, cap - taken),
                          momentum=self._momentum(lam))
            y, taken = out.y, taken + out.steps
            if out.reached or taken >= cap:
                return Descent(y, taken, out.grad_norm, out.reached), estimates

    def _retrain_step(self, lam_max: float) -> tuple[float, float, float]:
        """``(step, beta, bound)``: the retraining step (1/lambda_max, or the configured one,
        refused at or above the stable bound ``momentum_bound(beta) / lambda_max``)."""
        beta = self._momentum(lam_max)
        bound = momentum_bound(beta) / lam_max
        chosen = self.options["retrain_step_size"]
        if chosen == "auto":
            return 1.0 / lam_max, beta, bound
        if float(chosen) >= bound:
            raise ValueError(
                f"[workload] retrain_step_size = {chosen:g} is not below the stable bound "
                f"{bound:.4g} = {momentum_bound(beta):.4g} / lambda_max (lambda_max = "
                f"{lam_max:.4g}, the largest eigenvalue of the retraining objective's Hessian "
                f"at the trained model, by power iteration; momentum beta = {beta:.4g}); "
                f"use \"auto\" (1/lambda_max = {1.0 / lam_max:.4g}) or a value below "
                f"{bound:.4g}")
        return float(chosen), beta, bound

    def _damping(self, y: torch.Tensor, lam_max: float) -> dict[str, float]:
        """lambda_min of the averaged Hessian ``(1/n) grad^2 G`` (Lanczos), the damping delta
        and the Neumann series' ``eta (lambda_max + delta)``, refused at >= 2."""
        problem, x, n = self.problem, self.x0, self.problem.n_clients
        lam_min = smallest_eigenvalue(lambda v: problem.total_hvp(x, y, v) / n, problem.dim_y,
                                      seed=self.seed, dtype=self.dtype, device=self.device)
        eta, terms = float(self.estimator.neumann_step_size or 0.0), self.estimator.neumann_terms
        margin = self.options["damping_margin"]
        margin = 1.0 / (eta * max(terms, 1)) if margin == "auto" else float(margin)
        delta = -lam_min.value + margin if lam_min.value < 0.0 else 0.0
        product = eta * (lam_max / n + delta)
        if product >= 2.0:
            raise ValueError(
                f"[algorithm] neumann_step_size = {eta:g}: eta (lambda_max + delta) = "
                f"{product:.4g} >= 2 (averaged Hessian lambda_max = {lam_max / n:.4g}, damping "
                f"delta = {delta:.4g}), so the Neumann series diverges; use a step below "
                f"{2.0 / (lam_max / n + delta):.4g}")
        return {"hessian_lambda_min": lam_min.value, "hessian_lambda_max": lam_max / n,
                "lanczos_converged": float(lam_min.converged), "damping_margin": margin,
                "damping": delta, "neumann_eta_lambda": product}

    def _retrain(self, x: torch.Tensor, start: torch.Tensor) -> tuple[torch.Tensor, Descent | None]:
        """The model retrained for hyperparameters x from ``start``: the exact re-solve for the
        convex model (float64 Newton), descent to ``retrain_grad_tol`` for a network."""
        if self.problem.net.convex:
            return self.reference.exact_inner_solution(x, start=start), None
        record = self.record
        out = descend(self._grad(x), start, step=record["retrain_step"],
                      tol=float(self.options["retrain_grad_tol"]),
                      max_steps=int(self.options["retrain_steps"]),
                      momentum=record["retrain_momentum"])
        return out.y, out

    def _F(self, x: torch.Tensor, y: torch.Tensor) -> float:
        return float(self.reference.total_outer(x.to(self.reference.dtype),
                                                y.to(self.reference.dtype)))

    def _first_step(self) -> MetricRow:
        problem, n, x0 = self.problem, self.problem.n_clients, self.x0
        estimator = self.estimator
        inner = estimator.inner
        assert isinstance(inner, StochasticGradientPush)  # checked by _estimator
        # SGP training (the paper's), counted; then the model is refined to stationarity
        counter = CallCounter()
        state = estimator.init(problem)
        graph = estimator.graph(n)
        sgp = inner.run(problem, x0, state.y, state.omega, state.time, graph,
                        Oracles(problem, counter), GraphLedger(n, counter), self.rng)
        y_sgp = sgp.y.mean(0).detach()
        sgp_rounds, sgp_floats = _gossip_counts(counter.snapshot())
        sgp_grad = float(self._grad(x0)(y_sgp).norm())
        refined, refine_lams = self._refine(y_sgp)
        y_model = refined.y
        top = self._lambda_max(y_model)
        step, beta, bound = self._retrain_step(top.value)
        row: MetricRow = {
            "train_grad_norm_sgp": sgp_grad, "train_grad_norm": refined.grad_norm,
            "train_refine_steps": float(refined.steps),
            "train_stationary": float(refined.reached),
            "lambda_max": top.value, "lambda_max_converged": float(top.converged),
            "lambda_max_sgp": refine_lams[0], "retrain_step": step,
            "retrain_momentum": beta, "retrain_step_bound": bound}
        self.record = {"retrain_step": step, "retrain_momentum": beta}
        row.update(self._damping(y_model, top.value))
        # HGP's Neumann series at the refined model (no further SGP steps), damped Hessians
        hgp_estimator = dataclasses.replace(estimator, inner=dataclasses.replace(inner, steps=0))
        hgp_state = HGPState(y_model.expand(n, -1).clone(), sgp.omega, sgp.time)
        hgp = hgp_estimator.run(problem.with_damping(row["damping"]), x0, hgp_state, self.rng,
                                track_consensus=False)
        rounds, floats = _gossip_counts(hgp.calls)
        mask = problem.sample_mask
        predicted = -hgp.trajectory[-1, 0].detach()
        record: dict[str, Any] = {
            "predicted": predicted, "y_model": y_model, "rounds": sgp_rounds + rounds,
            "floats_sent": sgp_floats + floats, "actual": [], "retrain_steps": [],
            "retrain_grad_norms": [], "retrain_reached": [], "jitter": [],
            "retrain_step": step, "retrain_momentum": beta}
        scores = torch.where(mask, predicted.abs(), torch.full_like(predicted, -1.0)).reshape(-1)
        k = min(int(self.options["top_k"]), int(mask.sum()))
        top_k = torch.argsort(scores, descending=True)[:k].cpu()
        record["top"] = [(int(i) // problem.dim_hyper, int(i) % problem.dim_hyper)
                         for i in top_k]
        row.update({"r2_exact": math.nan, "r2_exact_top": math.nan,
                    "hgp_relative_error": math.nan})
        self.record = record
        if problem.net.convex:
            reference, x64 = self.reference, x0.to(torch.float64)
            y_ref = reference.exact_inner_solution(x64, start=y_model.to(torch.float64))
            exact = -reference.exact_global_grad(x64, y_ref)
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
            record["y_ref"], control_steps = y_ref, 0.0
        else:
            # the control retraining on the full objective, from the trained model
            record["y_ref"], control = self._retrain(x0, y_model)
            assert control is not None
            control_steps = float(control.steps)
        record["F_ref"] = self._F(x0, record["y_ref"])
        row["control_steps"] = control_steps
        record["first_row"] = dict(row)
        return row

    def _retrain_next(self) -> None:
        record, problem = self.record, self.problem
        done = len(record["actual"])
        start = record["y_ref"] if problem.net.convex else record["y_model"]
        for client, sample in record["top"][done:done + int(self.options["retrain_per_step"])]:
            index = len(record["actual"])
            x = problem.without(self.x0, client, sample).to(self.reference.dtype)
            y, out = self._retrain(x, start)
            value = self._F(x, y)
            record["actual"].append(value - record["F_ref"])
            record["retrain_steps"].append(0 if out is None else out.steps)
            record["retrain_grad_norms"].append(
                float(self.reference.total_grad(x, y).norm()) if out is None else out.grad_norm)
            record["retrain_reached"].append(True if out is None else out.reached)
            if index < int(self.options["jitter_count"]):
                # the same retraining from a start moved by jitter_scale * N(0, I) (seeded per
                # instance): how far the "actual" effect is resolved
                noise = np.random.default_rng([self.seed, 300, index]).standard_normal(
                    start.numel())
                moved = start + float(self.options["jitter_scale"]) * torch.as_tensor(
                    noise, dtype=start.dtype, device=start.device)
                record["jitter"].append(abs(self._F(x, self._retrain(x, moved)[0]) - value))

    # ----------------------------------------------------------------- Experiment protocol
    def step(self) -> MetricRow:
        if self.step_count >= self.total_steps:
            raise RuntimeError(f"{self.name}: the influence run is complete after "
                               f"{self.total_steps} steps")
        self.step_count += 1
        row = self._first_step() if self.step_count == 1 else dict(self.record["first_row"])
        if self.step_count > 1:
            self._retrain_next()
        record = self.record
        actual = np.asarray(record["actual"], float)
        predicted = np.asarray([float(record["predicted"][i, j])
                                for i, j in record["top"][:actual.size]])
        jitter = np.asarray(record["jitter"], float)
        with torch.no_grad():
            logits = self.problem.net.apply(record["y_model"], self.test_x)
            accuracy = float((logits.argmax(-1) == self.test_y).to(self.dtype).mean())
        r = pearson_r(actual, predicted)
        nan = math.nan
        row.update({
            "step": float(self.step_count), "rounds": float(record["rounds"]),
            "floats_sent": float(record["floats_sent"]), "test_accuracy": accuracy,
            "r2": r_squared(actual, predicted), "pearson_r": r,
            "pearson_r2": r * r, "sign_agreement": sign_agreement(actual, predicted),
            "f1": negative_influence_f1(actual, predicted), "n_retrained": float(actual.size),
            "effect_mean_abs": float(np.abs(actual).mean()) if actual.size else nan,
            "jitter_mean_abs": float(jitter.mean()) if jitter.size else nan,
            "n_jitter": float(jitter.size),
            "retrain_steps_max": float(max(record["retrain_steps"], default=nan)),
            "retrain_grad_norm_max": float(max(record["retrain_grad_norms"], default=nan)),
            "retrain_reached": (float(np.mean(record["retrain_reached"]))
                                if record["retrain_reached"] else nan)})
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
                "protocol": {"power_iterations": POWER_ITERATIONS, "power_rtol": POWER_RTOL,
                             "lanczos_tol": LANCZOS_TOL, "refine_chunk": REFINE_CHUNK},
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
    "PERSONALIZATION_OPTIONS", "REFINE_CHUNK", "build_hgp_influence",
    "build_hgp_personalization", "negative_influence_f1", "pearson_r", "r_squared",
    "sign_agreement",
]
