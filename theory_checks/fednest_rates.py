"""FedNest's rates and remaining Lemma 2.2 / heterogeneity claims (Tarzanagh et al., ICML 2022).

Companion of :mod:`theory_checks.fednest` (same notation: ``H = grad^2_y g``, ``J_i =
grad^2_xy g_i``, ``l = 1 / neumann_step_size``, ``A = I - H / l``, ``N = neumann_terms``,
``N' ~ U{0..N-1}``, ``T = inner_steps``, ``tau = local_steps``). It holds:

- Thm 3.1 / Cors. 3.1-3.3 in the stochastic setting: Monte Carlo over independent replicates
  (statistical claims), the exponent of ``E (1/K) sum_{k=1}^K ||grad f(x_k)||^2`` in the horizon
  K with Thm 3.1's step rule ``alpha_K = min(alpha_1, alpha_bar / sqrt(K))``, ``beta_K =
  beta_bar alpha_K / T``;
- the fitted slope in N of the deterministic stationarity floor, against Lemma 2.2's bias rate;
- Lemma 2.2 (14b), as stated (A1-A2 constants) and with per-sample Hessian bounds (notes issue 4),
  by Monte Carlo with Hoeffding's bound (statistical claims);
- LFedNest's heterogeneity bias (notes 2.7 [D], item T19);
- FedIHGP's client-sampling variance for ``N > 1`` (a derived law; the paper states none).

The other claims are exact and deterministic: the floor slope reads limits of the exact-oracle
iteration through its affine map, the LFedNest bias takes E over N' as a finite sum, and the
sampling variance enumerates every sequence of client subsets.

Profiles: the Monte Carlo claims size their designs by the design's profile (``design.profile``):
the K-rate claims run a smoke design on ``fast`` (undecided) and decide on ``thorough``.

Layout: this module gathers the claims and keeps every name importable from it; the code lives in
one module per job: :mod:`~theory_checks.fednest_k_rate` (Thm 3.1's K-rates),
:mod:`~theory_checks.fednest_floor_slope` (the floor's slope in N),
:mod:`~theory_checks.fednest_abs_error` ((14b)), :mod:`~theory_checks.fednest_lfednest`
(LFedNest's heterogeneity bias), :mod:`~theory_checks.fednest_sampling` (client sampling,
``N > 1``) and :mod:`~theory_checks.fednest_rates_claims` (the ``CLAIMS`` literal).
"""

# ruff: noqa: F401  (a re-exporting module: every name below is imported to be importable here)

from __future__ import annotations

# The names this module imported before the split into per-job modules.
import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import LinearCompositional, ProblemConstants, QuadraticBilevel, strategies
from testbed.algorithms.base import run_algorithm
from testbed.federation.context import FederatedContext
from theory_checks import _stats
from theory_checks._exact import dominant_mode_window, evaluation_point
from theory_checks.claim import (
    Case,
    Claim,
    Fit,
    Measurement,
    NotMeasurable,
    SeriesPoint,
    known_case,
)
from theory_checks.decision import (
    Design,
    Evidence,
    Hoeffding,
    SpentRate,
    StatTest,
    batch_evidence,
    replicates_for_half_width,
)
from theory_checks.fednest import CLAIMS as FEDNEST_CLAIMS
from theory_checks.fednest import (
    PAPER,
    REF,
    LinearOuterProbe,
    ScriptedContext,
    _bilevel,
    _case_builder,
    _client_matrices,
    _expected_ihgp,
    _fedihgp,
    _measured_map,
    _power,
    check_stationarity_floor,
    floor_bound,
    paper_constants,
)
from theory_checks.fednest_abs_error import (
    ABS_ERROR_EFFECT,
    ABS_ERROR_MAX_DRAWS,
    _abs_error_cases,
    _sample_hessian_range,
    abs_error_bound_as_stated,
    abs_error_bound_per_sample,
    check_abs_error,
)
from theory_checks.fednest_floor_slope import (
    _FLOOR_CLAIM,
    FLOOR_SLOPE_RTOL,
    _floor_parts,
    check_floor_slope,
)
from theory_checks.fednest_k_rate import (
    EXPONENT_EDGE,
    EXPONENT_HALF_WIDTH,
    EXPONENT_SD,
    FIRST_LOOK,
    RATE_EXPONENT,
    TRANSIENT_SPAN,
    _averaged_stationarity,
    _Diverged,
    _exact_map_radius,
    _first_horizon,
    _horizon_design,
    _neumann_for_horizon,
    _outer_hessian,
    _rate_algorithm,
    _rate_bilevel,
    _rate_compositional,
    _rate_minimax,
    _stable_outer_step,
    _x_star,
    check_k_rate,
    sequential_test,
)
from theory_checks.fednest_lfednest import (
    LFEDNEST_EXPONENT_TOL,
    LFEDNEST_H0,
    _fedihgp_builder,
    _lfednest_cases,
    _lfednest_parts,
    check_lfednest_bias,
)
from theory_checks.fednest_rates_claims import (
    _ABS_ERROR_CONTROL,
    _ABS_ERROR_COUNTEREXAMPLE,
    _RATE_NOTES,
    CLAIMS,
)
from theory_checks.fednest_sampling import (
    _sampling_cases,
    check_sampling_variance_n,
    sampling_variance_formula,
)
from theory_checks.perturbations import fednest as perturb
from theory_checks.runner import per_profile
from theory_checks.tolerances import IDENTITY_RTOL
