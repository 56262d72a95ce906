"""The curvature decisions of HGP's influence protocol at the trained model (sec. 5.2, Table 4):
lambda_max of the training objective's Hessian, the momentum and step of the retraining and
their stable bound, and the Hessian damping HGP's Neumann series runs with.

The reasons for each choice are in :mod:`testbed_app.experiments.hgp` ("Influence protocol");
:class:`~testbed_app.experiments.influence.HGPInfluenceExperiment` takes these decisions once
per run, at the refined model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch

from problems.workloads.influence import InfluenceProblem
from problems.workloads.spectral import SpectralEstimate
from problems.workloads.spectral import largest_eigenvalue
from problems.workloads.spectral import momentum_bound
from problems.workloads.spectral import smallest_eigenvalue


@dataclasses.dataclass(frozen=True)
class InfluenceCurvature:
    """The curvature decisions for ``problem`` at the hyperparameters ``x`` (every
    ``lambda_ik = 1``), from a run's ``[workload]`` options.

    Attributes:
        problem: the run's influence problem (``G = sum_i g_i``).
        x: the hyperparameters the model is trained at.
        seed: seeds the power iteration and Lanczos (the run's seed).
        options: the run's ``[workload]`` options (``momentum``, ``retrain_step_size``,
            ``damping_margin``).
        name: the run's name, for the errors.
        dtype, device: of the eigenvalue estimates' vectors (the run's).
    """

    problem: InfluenceProblem
    x: torch.Tensor
    seed: int
    options: Mapping[str, Any]
    name: str
    dtype: torch.dtype
    device: torch.device | str

    def lambda_max(self, y: torch.Tensor) -> SpectralEstimate:
        """lambda_max of ``grad^2 G`` at ``y`` (power iteration, seeded by the run's seed).

        Raises:
            ValueError: no positive eigenvalue (gradient descent has no stable step).
        """
        problem, x = self.problem, self.x
        estimate = largest_eigenvalue(
            lambda v: problem.total_hvp(x, y, v),
            problem.dim_y,
            seed=self.seed,
            dtype=self.dtype,
            device=self.device,
        )
        if not estimate.value > 0.0:
            raise ValueError(
                f"{self.name}: the Hessian of the training objective has no "
                f"positive eigenvalue (lambda_max = {estimate.value:g}); gradient "
                "descent has no stable step"
            )
        return estimate

    def momentum(self, lam_max: float) -> float:
        """``beta`` of Nesterov's method: ``(1 - sqrt(q)) / (1 + sqrt(q))`` with
        ``q = n wd / lambda_max`` (the weight decay's curvature, the one curvature floor known
        before training; for a non-convex loss it only sets beta, convergence is checked by the
        gradient tolerance), or the configured number."""
        momentum = self.options["momentum"]
        if momentum != "nesterov":
            return float(momentum)
        q = min(1.0, self.problem.n_clients * self.problem.weight_decay / lam_max)
        return (1.0 - math.sqrt(q)) / (1.0 + math.sqrt(q))

    def retrain_step(self, lam_max: float) -> tuple[float, float, float]:
        """``(step, beta, bound)``: the retraining step (1/lambda_max, or the configured one,
        refused at or above the stable bound ``momentum_bound(beta) / lambda_max``).

        Raises:
            ValueError: a configured step at or above the bound.
        """
        beta = self.momentum(lam_max)
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
                f'use "auto" (1/lambda_max = {1.0 / lam_max:.4g}) or a value below '
                f"{bound:.4g}"
            )
        return float(chosen), beta, bound

    def damping(self, y: torch.Tensor, lam_max: float, estimator: Any) -> dict[str, float]:
        """lambda_min of the averaged Hessian ``(1/n) grad^2 G`` (Lanczos), the damping delta
        and the Neumann series' ``eta (lambda_max + delta)`` for HGP's ``estimator`` (its
        ``neumann_step_size`` eta and ``neumann_terms``).

        Raises:
            ValueError: ``eta (lambda_max + delta) >= 2`` (the Neumann series diverges).
        """
        problem, x, n = self.problem, self.x, self.problem.n_clients
        lam_min = smallest_eigenvalue(
            lambda v: problem.total_hvp(x, y, v) / n,
            problem.dim_y,
            seed=self.seed,
            dtype=self.dtype,
            device=self.device,
        )
        eta, terms = float(estimator.neumann_step_size or 0.0), estimator.neumann_terms
        margin = self.options["damping_margin"]
        margin = 1.0 / (eta * max(terms, 1)) if margin == "auto" else float(margin)
        delta = -lam_min.value + margin if lam_min.value < 0.0 else 0.0
        product = eta * (lam_max / n + delta)
        if product >= 2.0:
            raise ValueError(
                f"[algorithm] neumann_step_size = {eta:g}: eta (lambda_max + delta) = "
                f"{product:.4g} >= 2 (averaged Hessian lambda_max = {lam_max / n:.4g}, damping "
                f"delta = {delta:.4g}), so the Neumann series diverges; use a step below "
                f"{2.0 / (lam_max / n + delta):.4g}"
            )
        return {
            "hessian_lambda_min": lam_min.value,
            "hessian_lambda_max": lam_max / n,
            "lanczos_converged": float(lam_min.converged),
            "damping_margin": margin,
            "damping": delta,
            "neumann_eta_lambda": product,
        }


__all__ = ["InfluenceCurvature"]
