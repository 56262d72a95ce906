"""HGP's influence experiment (sec. 5.2, eq. 12, Table 4) and the influence protocol's metrics:
:class:`HGPInfluenceExperiment`, :func:`pearson_r`, :func:`sign_agreement`.

The protocol is described in :mod:`testbed_app.experiments.hgp` ("Influence protocol").
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
    SpectralEstimate,
    build_classifier,
    client_samples,
    descend,
    largest_eigenvalue,
    momentum_bound,
    smallest_eigenvalue,
)
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.influence_metrics import negative_influence_f1, r_squared
from testbed.decentralized.sgp import StochasticGradientPush
from testbed_app.experiments.base import ExperimentConfig, MetricRow
from testbed_app.experiments.hgp_common import (
    INFLUENCE_CHECKS,
    INFLUENCE_DEFAULTS,
    DecentralizedRun,
    _gossip_counts,
    _rng_state,
    _set_rng,
    train_by_sgp,
)

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


class HGPInfluenceExperiment(DecentralizedRun):
    """Influence estimation against retraining (see the module docstring) of a config with
    ``[workload] kind = "hgp_influence"`` and ``model = "logreg"`` (convex, exact retraining)
    or a network name; its set-up and arguments are :class:`DecentralizedRun`'s."""

    DEFAULTS = INFLUENCE_DEFAULTS
    CHECKS = INFLUENCE_CHECKS

    def __init__(self, config: ExperimentConfig, device: str | None = None,
                 dataset: Dataset | None = None) -> None:
        super().__init__(config, device, dataset)
        options = self.options
        train, val = self.split.holdout(float(options["val_fraction"]), seed=self.seed)
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
        if int(config.run["steps"]) > self.total_steps:
            raise ValueError(f"[run] steps: this influence run has {self.total_steps} steps "
                             f"(1 training + HGP step, then top_k={options['top_k']} "
                             f"retrainings, {options['retrain_per_step']} per step); got "
                             f"{config.run['steps']}")
        self.test_x = self.dataset.test_x.to(device=self.device, dtype=self.dtype)
        self.test_y = self.dataset.test_y.to(self.device)
        self.rng = np.random.default_rng([self.seed, 200])
        self.step_count = 0
        self.x0 = self.problem.initial_point()[0]
        self.record: dict[str, Any] = {}

    def _check_options(self, options: dict[str, Any]) -> None:
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
        # SGP training (the paper's), counted; then the model is refined to stationarity
        sgp, sgp_rounds, sgp_floats = train_by_sgp(estimator, problem, x0,
                                                   estimator.init(problem), estimator.graph(n),
                                                   self.rng)
        y_sgp = sgp.y.mean(0).detach()
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
        inner = estimator.inner
        assert isinstance(inner, StochasticGradientPush)  # checked by _estimator
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
    def describe(self) -> dict[str, Any]:
        return {"problem": self.problem.id, "dim_y": self.problem.dim_y,
                "dim_x": self.problem.dim_x, "estimator": repr(self.estimator),
                "options": dict(self.options), "total_steps": self.total_steps,
                "protocol": {"power_iterations": POWER_ITERATIONS, "power_rtol": POWER_RTOL,
                             "lanczos_tol": LANCZOS_TOL, "refine_chunk": REFINE_CHUNK},
                "dtype": str(self.dtype), "device": str(self.device)}
