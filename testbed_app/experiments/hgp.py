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
predictions of largest magnitude (over all clients: the paper's "top 50" of Sec. 5.2 could
also be read per client) are then checked against retraining without the sample,
``retrain_per_step`` of them per step.

*Influence protocol* (every figure below is a metrics column):

1. Trained model near stationarity. ``train_grad_norm_sgp`` is ``||grad G||`` (``G = sum_i
   g_i``) at the SGP consensus; full-batch descent on G at step ``1/lambda_max`` (re-estimated
   every :data:`REFINE_CHUNK` steps) refines it until ``||grad G|| <= train_grad_tol`` or
   ``train_refine_steps`` (``train_grad_norm``, ``train_refine_steps``, ``train_stationary``).
   The refinement is a centralized reference computation: its gradients are not gossip and are
   not counted in ``rounds``.
2. Retraining step. ``lambda_max`` of ``grad^2 G`` at the trained model by seeded power
   iteration (:func:`~problems.workloads.spectral.largest_eigenvalue`; residual tolerance
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
   model by Lanczos (:func:`~problems.workloads.spectral.smallest_eigenvalue`). Where it is
   negative, HGP runs on ``H_i + delta I`` with ``delta = |lambda_min| + margin``; the margin is
   ``1/(eta M)`` (``damping_margin = "auto"``): curvature below it is not resolved by M Neumann
   terms anyway (``(1 - eta m)^M >= e^-1`` there), so the damping leaves what the truncated
   series resolves nearly unchanged while its slowest mode contracts by ``e^-1`` over the
   series, keeping the iterates bounded. HGP's estimator has no damping term; the problem
   carries it (:meth:`~problems.workloads.influence.InfluenceProblem.with_damping`, Hessian
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

This module is the entry point (the builders the registry names); the experiments live in
:mod:`testbed_app.experiments.personalization` and :mod:`testbed_app.experiments.influence`,
their shared set-up and option checks in :mod:`testbed_app.experiments.hgp_common`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from testbed_app.experiments.base import Experiment
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.hgp_common import INFLUENCE_OPTIONS
from testbed_app.experiments.hgp_common import PERSONALIZATION_OPTIONS
from testbed_app.experiments.influence import REFINE_CHUNK
from testbed_app.experiments.influence import HGPInfluenceExperiment
from testbed_app.experiments.personalization import HGPPersonalizationExperiment

# ------------------------------------------------------------------------------ builders


@dataclasses.dataclass(frozen=True)
class ExperimentBuilder:
    """A builder ``(config, device) -> Experiment`` with the ``[workload]`` keys it accepts
    (``OPTIONS``, read by the config loader before any work)."""

    OPTIONS: frozenset[str]
    make: Callable[[ExperimentConfig, str | None], Experiment]

    def __call__(self, config: ExperimentConfig, device: str | None = None) -> Experiment:
        return self.make(config, device)


build_hgp_personalization = ExperimentBuilder(PERSONALIZATION_OPTIONS, HGPPersonalizationExperiment)
build_hgp_influence = ExperimentBuilder(INFLUENCE_OPTIONS, HGPInfluenceExperiment)

__all__ = [
    "HGPInfluenceExperiment",
    "HGPPersonalizationExperiment",
    "INFLUENCE_OPTIONS",
    "PERSONALIZATION_OPTIONS",
    "REFINE_CHUNK",
    "build_hgp_influence",
    "build_hgp_personalization",
]
