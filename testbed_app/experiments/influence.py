"""HGP's influence experiment (sec. 5.2, eq. 12, Table 4), :class:`HGPInfluenceExperiment`: the
pieces of its steps, their records and checkpoints. The curvature decisions it takes at the
trained model are :class:`~testbed_app.experiments.influence_curvature.InfluenceCurvature`'s,
its metrics those of :mod:`testbed.decentralized.influence_metrics`.

The protocol is described in :mod:`testbed_app.experiments.hgp` ("Influence protocol").
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from problems.workloads.classifiers import build_classifier
from problems.workloads.decentralized import client_samples
from problems.workloads.influence import InfluenceProblem
from problems.workloads.spectral import LANCZOS_TOL
from problems.workloads.spectral import POWER_ITERATIONS
from problems.workloads.spectral import POWER_RTOL
from problems.workloads.spectral import Descent
from problems.workloads.spectral import DescentDiverged
from problems.workloads.spectral import descend
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.influence_metrics import negative_influence_f1
from testbed.decentralized.influence_metrics import pearson_r
from testbed.decentralized.influence_metrics import r_squared
from testbed.decentralized.influence_metrics import sign_agreement
from testbed.decentralized.sgp import StochasticGradientPush
from testbed_app.experiments.base import MetricRow
from testbed_app.experiments.divergence import Diverged
from testbed_app.experiments.divergence import accuracy_collapse
from testbed_app.experiments.divergence import gradient_growth
from testbed_app.experiments.hgp_common import INFLUENCE_CHECKS
from testbed_app.experiments.hgp_common import INFLUENCE_DEFAULTS
from testbed_app.experiments.hgp_common import DecentralizedRun
from testbed_app.experiments.hgp_common import gossip_counts
from testbed_app.experiments.hgp_common import rng_state
from testbed_app.experiments.hgp_common import set_rng
from testbed_app.experiments.hgp_common import train_by_sgp
from testbed_app.experiments.influence_curvature import InfluenceCurvature

#: Steps of the trained model's refinement between two power iterations: lambda_max grows while a
#: network trains (progressive sharpening; 57 -> 88 over 4000 steps on the CNN), so the step
#: 1/lambda_max is re-estimated every REFINE_CHUNK steps (a power iteration costs ~10-40
#: Hessian-vector products, a few percent of a chunk's gradients).
REFINE_CHUNK = 250


def _to_device(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor in it (nested dicts, lists, tuples) moved to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


class HGPInfluenceExperiment(DecentralizedRun):
    """Influence estimation against retraining (see the module docstring) of a config with
    ``[workload] kind = "hgp_influence"`` and ``model = "logreg"`` (convex, exact retraining)
    or a network name; its set-up and arguments are :class:`DecentralizedRun`'s."""

    DEFAULTS = INFLUENCE_DEFAULTS
    CHECKS = INFLUENCE_CHECKS

    def _set_up(self) -> None:
        options = self.options
        train, val = self.split.holdout(float(options["val_fraction"]), seed=self.seed)
        net = build_classifier(
            self.config.workload.get("model", "logreg"),
            self.dataset.input_shape,
            self.dataset.n_classes,
        )

        def problem(dtype: torch.dtype) -> InfluenceProblem:
            # the clients' samples of the training images: (index sets, their name)
            samples = functools.partial(
                client_samples,
                self.dataset.train_x,
                self.dataset.train_y,
                dtype=dtype,
                device=self.device,
            )
            return InfluenceProblem(
                net,
                samples(train.indices, "train"),
                samples(val.indices, "validation"),
                weight_decay=float(options["weight_decay"]),
                seed=self.seed,
            )

        self.problem = problem(self.dtype)
        if net.convex and self.problem.weight_decay <= 0:
            raise ValueError(
                "[workload] weight_decay must be > 0 for logreg (strong convexity "
                "makes the exact re-solve and the exact influence well defined)"
            )
        # the reference answers (exact solve, exact influence, retraining) of the convex model
        # are computed in float64 whatever the run's dtype: Newton reaches round-off only there
        self.reference = (
            problem(torch.float64) if net.convex and self.dtype != torch.float64 else self.problem
        )
        self.total_steps = 1 + math.ceil(options["top_k"] / options["retrain_per_step"])
        if int(self.config.run["steps"]) > self.total_steps:
            raise ValueError(
                f"[run] steps: this influence run has {self.total_steps} steps "
                f"(1 training + HGP step, then top_k={options['top_k']} "
                f"retrainings, {options['retrain_per_step']} per step); got "
                f"{self.config.run['steps']}"
            )
        self.test_x = self.dataset.test_x.to(device=self.device, dtype=self.dtype)
        self.test_y = self.dataset.test_y.to(self.device)
        self.rng = np.random.default_rng([self.seed, 200])
        self.step_count = 0
        self.x0 = self.problem.initial_point()[0]
        self.curvature = InfluenceCurvature(
            self.problem, self.x0, self.seed, options, self.name, self.dtype, self.device
        )
        self.record: dict[str, Any] = {}
        #: the finished pieces of the step under way (empty between steps), ``phase`` their
        #: description; ``on_phase(description, finished)`` is the runner's hook (progress,
        #: a checkpoint after each finished piece), None outside a run
        self.partial: dict[str, Any] = {}
        self.phase: str | None = None
        self.on_phase: Callable[[str, bool], None] | None = None

    def _check_options(self, options: dict[str, Any]) -> None:
        jitter = options["jitter_count"]
        if isinstance(jitter, bool) or not isinstance(jitter, int) or jitter < 0:
            raise ValueError(f"[workload] jitter_count must be an integer >= 0, got {jitter!r}")
        momentum = options["momentum"]
        if momentum != "nesterov" and (
            isinstance(momentum, bool)
            or not isinstance(momentum, (int, float))
            or not 0.0 <= momentum < 1.0
        ):
            raise ValueError(
                f'[workload] momentum must be "nesterov" or a number in [0, 1), got {momentum!r}'
            )
        if momentum == "nesterov" and options["weight_decay"] <= 0:
            raise ValueError(
                '[workload] momentum = "nesterov" sets beta from the weight '
                "decay's curvature n * weight_decay; it needs weight_decay > 0"
            )

    # ----------------------------------------------------------------- the protocol's pieces
    def _grad(self, x: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda v: self.problem.total_grad(x, v)

    def _refine(self) -> tuple[Descent, list[float]]:
        """The trained model refined by full-batch descent on G at step 1/lambda_max
        (re-estimated every REFINE_CHUNK steps) until ``||grad G|| <= train_grad_tol``; a
        piece of the step after each chunk (its state in ``partial["refine"]``), stopped as
        diverged when a chunk ends with a gradient far above the refinement's start."""
        tol, cap = float(self.options["train_grad_tol"]), int(self.options["train_refine_steps"])
        part = self.partial["refine"]
        while not part["done"]:
            y, taken = part["y"], int(part["taken"])
            lam = self.curvature.lambda_max(y).value
            self._phase(
                f"refinement: {taken} of at most {cap} steps, ||grad G|| = {part['grad_norm']:.3g}",
                finished=False,
            )
            try:
                out = descend(
                    self._grad(self.x0),
                    y,
                    step=1.0 / lam,
                    tol=tol,
                    max_steps=min(REFINE_CHUNK, cap - taken),
                    momentum=self.curvature.momentum(lam),
                )
            except DescentDiverged as error:
                raise Diverged(f"refinement after {taken} steps: {error}") from None
            taken += out.steps
            part.update(
                {
                    "y": out.y,
                    "taken": taken,
                    "grad_norm": out.grad_norm,
                    "reached": out.reached,
                    "done": out.reached or taken >= cap,
                    "estimates": [*part["estimates"], lam],
                }
            )
            reason = gradient_growth(
                f"refinement ({taken} steps, from the SGP model)", part["grad_start"], out.grad_norm
            )
            if reason:
                raise Diverged(reason)
            self._phase(
                f"refinement: {taken} of at most {cap} steps, ||grad G|| = {out.grad_norm:.3g}"
            )
        return (
            Descent(part["y"], int(part["taken"]), part["grad_norm"], part["reached"]),
            list(part["estimates"]),
        )

    def _retrain(
        self, x: torch.Tensor, start: torch.Tensor, label: str
    ) -> tuple[torch.Tensor, Descent | None]:
        """The model retrained for hyperparameters x from ``start``: the exact re-solve for the
        convex model (float64 Newton), descent to ``retrain_grad_tol`` for a network, stopped
        as diverged (:class:`Diverged`, naming ``label``) when its gradient ends far above
        where it started."""
        if self.problem.net.convex:
            return self.reference.exact_inner_solution(x, start=start), None
        record = self.record
        try:
            out = descend(
                self._grad(x),
                start,
                step=record["retrain_step"],
                tol=float(self.options["retrain_grad_tol"]),
                max_steps=int(self.options["retrain_steps"]),
                momentum=record["retrain_momentum"],
            )
        except DescentDiverged as error:
            raise Diverged(f"{label}: {error}") from None
        reason = gradient_growth(label, out.start_grad_norm, out.grad_norm)
        if reason:
            raise Diverged(reason)
        return out.y, out

    def _F(self, x: torch.Tensor, y: torch.Tensor) -> float:
        return float(
            self.reference.total_outer(x.to(self.reference.dtype), y.to(self.reference.dtype))
        )

    def _accuracy(self, y: torch.Tensor) -> float:
        """Test accuracy of the shared model ``y``."""
        with torch.no_grad():
            logits = self.problem.net.apply(y, self.test_x)
            return float((logits.argmax(-1) == self.test_y).to(self.dtype).mean())

    def _train(self) -> dict[str, Any]:
        """SGP's training of the shared model (the paper's), counted; ``partial["sgp"]``.
        One piece of the step (SGP's step-size schedule spans its whole run, so it is not cut
        into chunks); stopped as diverged when the gradient of G at the consensus ends far
        above its value at the initial model."""
        problem, x0, estimator = self.problem, self.x0, self.estimator
        if "sgp" not in self.partial:
            steps = estimator.inner.steps  # type: ignore[union-attr]
            self._phase(f"training by SGP ({steps} gossip steps)", finished=False)
            state = estimator.init(problem)
            start = float(self._grad(x0)(state.y.mean(0).detach()).norm())
            sgp, sgp_rounds, sgp_floats = train_by_sgp(
                estimator, problem, x0, state, estimator.graph(problem.n_clients), self.rng
            )
            y_sgp = sgp.y.mean(0).detach()
            grad = float(self._grad(x0)(y_sgp).norm())
            reason = gradient_growth("training by SGP", start, grad)
            if reason:
                raise Diverged(reason)
            self.partial["sgp"] = {
                "y": sgp.y.detach(),
                "omega": sgp.omega.detach(),
                "time": int(sgp.time),
                "rounds": sgp_rounds,
                "floats": sgp_floats,
                "grad_start": start,
                "grad": grad,
                "accuracy": self._accuracy(y_sgp),
            }
            self.partial["refine"] = {
                "y": y_sgp,
                "taken": 0,
                "grad_norm": grad,
                "grad_start": grad,
                "reached": False,
                "done": False,
                "estimates": [],
            }
            self._phase(f"training by SGP done ({steps} gossip steps), ||grad G|| = {grad:.3g}")
        return dict(self.partial["sgp"])

    def _first_step(self) -> MetricRow:
        """Step 1 in pieces, each kept in ``partial`` and announced by :meth:`_phase` (the
        runner checkpoints it): training by SGP, the refinement's chunks, the analysis (the
        retraining step, damping and HGP's estimate), and for a network the control
        retraining."""
        problem, x0 = self.problem, self.x0
        sgp = self._train()
        refined, refine_lams = self._refine()
        y_model = refined.y
        if "analysis" not in self.partial:
            self._phase("lambda_max, damping and HGP's estimate", finished=False)
            self.partial["analysis"] = self._analyse(sgp, refined, refine_lams)
            self._phase("HGP's estimate done")
        row, record = self.partial["analysis"]
        self.record = record
        if problem.net.convex:
            reference, x64 = self.reference, x0.to(torch.float64)
            y_ref = reference.exact_inner_solution(x64, start=y_model.to(torch.float64))
            exact = -reference.exact_global_grad(x64, y_ref)
            predicted = record["predicted"].to(torch.float64)
            mask = problem.sample_mask
            flat_mask = mask.reshape(-1)
            chosen = torch.as_tensor(
                [i * problem.dim_hyper + j for i, j in record["top"]], device=exact.device
            )
            row["r2_exact"] = r_squared(
                exact.reshape(-1)[flat_mask].cpu().numpy(),
                predicted.reshape(-1)[flat_mask].cpu().numpy(),
            )
            row["r2_exact_top"] = r_squared(
                exact.reshape(-1)[chosen].cpu().numpy(), predicted.reshape(-1)[chosen].cpu().numpy()
            )
            row["hgp_relative_error"] = float((predicted - exact)[mask].norm() / exact[mask].norm())
            record["y_ref"], control_steps = y_ref, 0.0
        else:
            # the control retraining on the full objective, from the trained model
            retrain_steps = int(self.options["retrain_steps"])
            self._phase(f"control retraining (at most {retrain_steps} steps)", finished=False)
            record["y_ref"], control = self._retrain(x0, y_model, "control retraining")
            assert control is not None
            control_steps = float(control.steps)
        record["F_ref"] = self._F(x0, record["y_ref"])
        row["control_steps"] = control_steps
        record["first_row"] = dict(row)
        return row

    def _analyse(
        self, sgp: dict[str, Any], refined: Descent, refine_lams: list[float]
    ) -> tuple[MetricRow, dict[str, Any]]:
        """The trained model's figures (lambda_max, the retraining step, damping), HGP's
        Neumann series at it, and the top-k removals: ``(row so far, record)``; stopped as
        diverged when the refinement left the model at chance after SGP had trained it."""
        problem, n, x0 = self.problem, self.problem.n_clients, self.x0
        estimator = self.estimator
        y_model = refined.y
        accuracy = self._accuracy(y_model)
        reason = accuracy_collapse(
            "test accuracy after the refinement", accuracy, sgp["accuracy"], self.chance_accuracy
        )
        if reason:
            raise Diverged(reason)
        top = self.curvature.lambda_max(y_model)
        step, beta, bound = self.curvature.retrain_step(top.value)
        row: MetricRow = {
            "train_grad_norm_sgp": sgp["grad"],
            "train_grad_norm": refined.grad_norm,
            "train_refine_steps": float(refined.steps),
            "train_stationary": float(refined.reached),
            "lambda_max": top.value,
            "lambda_max_converged": float(top.converged),
            "lambda_max_sgp": refine_lams[0],
            "retrain_step": step,
            "retrain_momentum": beta,
            "retrain_step_bound": bound,
        }
        row.update(self.curvature.damping(y_model, top.value, self.estimator))
        # HGP's Neumann series at the refined model (no further SGP steps), damped Hessians
        inner = estimator.inner
        assert isinstance(inner, StochasticGradientPush)  # checked by _estimator
        hgp_estimator = dataclasses.replace(estimator, inner=dataclasses.replace(inner, steps=0))
        hgp_state = HGPState(y_model.expand(n, -1).clone(), sgp["omega"], sgp["time"])
        hgp = hgp_estimator.run(
            problem.with_damping(row["damping"]), x0, hgp_state, self.rng, track_consensus=False
        )
        rounds, floats = gossip_counts(hgp.calls)
        mask = problem.sample_mask
        predicted = -hgp.trajectory[-1, 0].detach()
        record: dict[str, Any] = {
            "predicted": predicted,
            "y_model": y_model,
            "rounds": sgp["rounds"] + rounds,
            "floats_sent": sgp["floats"] + floats,
            "actual": [],
            "retrain_steps": [],
            "retrain_grad_norms": [],
            "retrain_reached": [],
            "jitter": [],
            "retrain_step": step,
            "retrain_momentum": beta,
        }
        scores = torch.where(mask, predicted.abs(), torch.full_like(predicted, -1.0)).reshape(-1)
        k = min(int(self.options["top_k"]), int(mask.sum()))
        top_k = torch.argsort(scores, descending=True)[:k].cpu()
        record["top"] = [(int(i) // problem.dim_hyper, int(i) % problem.dim_hyper) for i in top_k]
        row.update({"r2_exact": math.nan, "r2_exact_top": math.nan, "hgp_relative_error": math.nan})
        return row, record

    def _retrain_until(self, target: int) -> None:
        """Retrain the top-k removals until ``target`` of them are done, one piece of the
        step each (the record holds the finished ones, so a resumed step goes on from the
        next)."""
        record, problem = self.record, self.problem
        start = record["y_ref"] if problem.net.convex else record["y_model"]
        total = len(record["top"])
        while len(record["actual"]) < target:
            index = len(record["actual"])
            client, sample = record["top"][index]
            label = f"retraining {index + 1} of {total} (client {client}, sample {sample})"
            self._phase(label, finished=False)
            x = problem.without(self.x0, client, sample).to(self.reference.dtype)
            y, out = self._retrain(x, start, label)
            value = self._F(x, y)
            jitter = math.nan
            if index < int(self.options["jitter_count"]):
                # the same retraining from a start moved by jitter_scale * N(0, I) (seeded per
                # instance): how far the "actual" effect is resolved
                noise = np.random.default_rng([self.seed, 300, index]).standard_normal(
                    start.numel()
                )
                moved = start + float(self.options["jitter_scale"]) * torch.as_tensor(
                    noise, dtype=start.dtype, device=start.device
                )
                jitter = abs(self._F(x, self._retrain(x, moved, f"{label}, jittered")[0]) - value)
            record["actual"].append(value - record["F_ref"])
            record["retrain_steps"].append(0 if out is None else out.steps)
            record["retrain_grad_norms"].append(
                float(self.reference.total_grad(x, y).norm()) if out is None else out.grad_norm
            )
            record["retrain_reached"].append(True if out is None else out.reached)
            if not math.isnan(jitter):
                record["jitter"].append(jitter)
            self._phase(f"retraining {index + 1} of {total} done")

    def _phase(self, description: str, finished: bool = True) -> None:
        """Announce a piece of the current step: ``finished`` (its result is in the state
        :meth:`state_dict` returns, so the runner may checkpoint it) or begun."""
        if finished:
            self.phase = f"step {self.step_count + 1}, {description}"
        if self.on_phase is not None:
            self.on_phase(description, finished)

    # ----------------------------------------------------------------- Experiment protocol
    def step(self) -> MetricRow:
        if self.step_count >= self.total_steps:
            raise RuntimeError(
                f"{self.name}: the influence run is complete after {self.total_steps} steps"
            )
        number = self.step_count + 1
        if number == 1:
            row = self._first_step()
        else:
            per_step = int(self.options["retrain_per_step"])
            self._retrain_until(min(len(self.record["top"]), (number - 1) * per_step))
            row = dict(self.record["first_row"])
        self.step_count, self.partial, self.phase = number, {}, None
        record = self.record
        actual = np.asarray(record["actual"], float)
        predicted = np.asarray(
            [float(record["predicted"][i, j]) for i, j in record["top"][: actual.size]]
        )
        jitter = np.asarray(record["jitter"], float)
        accuracy = self._accuracy(record["y_model"])
        r = pearson_r(actual, predicted)
        nan = math.nan
        row.update(
            {
                "step": float(self.step_count),
                "rounds": float(record["rounds"]),
                "floats_sent": float(record["floats_sent"]),
                "test_accuracy": accuracy,
                "r2": r_squared(actual, predicted),
                "pearson_r": r,
                "pearson_r2": r * r,
                "sign_agreement": sign_agreement(actual, predicted),
                "f1": negative_influence_f1(actual, predicted),
                "n_retrained": float(actual.size),
                "effect_mean_abs": float(np.abs(actual).mean()) if actual.size else nan,
                "jitter_mean_abs": float(jitter.mean()) if jitter.size else nan,
                "n_jitter": float(jitter.size),
                "retrain_steps_max": float(max(record["retrain_steps"], default=nan)),
                "retrain_grad_norm_max": float(max(record["retrain_grad_norms"], default=nan)),
                "retrain_reached": (
                    float(np.mean(record["retrain_reached"])) if record["retrain_reached"] else nan
                ),
            }
        )
        return row

    def state_dict(self) -> dict[str, Any]:
        """The finished steps' state and, inside a step, its finished pieces (``partial``,
        described by ``phase``): a run resumed from it goes on from the next piece."""
        return {
            "step": self.step_count,
            "rng": rng_state(self.rng),
            "record": {k: (list(v) if isinstance(v, list) else v) for k, v in self.record.items()},
            "partial": copy.deepcopy(self.partial),
            "phase": self.phase,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count = int(state["step"])
        set_rng(self.rng, state["rng"])
        record = dict(state["record"])
        for key in ("predicted", "y_model", "y_ref"):
            if isinstance(record.get(key), torch.Tensor):
                record[key] = record[key].to(self.device)
        self.record = record
        # a checkpoint that lacks the keys (one with no pieces recorded) resumes with none
        self.partial = _to_device(dict(state.get("partial") or {}), self.device)
        self.phase = state.get("phase")
        if "analysis" in self.partial:
            self.record = self.partial["analysis"][1]

    # ----------------------------------------------------------------- records
    def describe(self) -> dict[str, Any]:
        return {
            "problem": self.problem.id,
            "dim_y": self.problem.dim_y,
            "dim_x": self.problem.dim_x,
            "estimator": repr(self.estimator),
            "options": dict(self.options),
            "total_steps": self.total_steps,
            "protocol": {
                "power_iterations": POWER_ITERATIONS,
                "power_rtol": POWER_RTOL,
                "lanczos_tol": LANCZOS_TOL,
                "refine_chunk": REFINE_CHUNK,
            },
            "dtype": str(self.dtype),
            "device": str(self.device),
        }
