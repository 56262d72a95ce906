"""Claims of FedNest (Tarzanagh, Li, Thrampoulidis, Oymak; ICML 2022) and its errata.

Notation (README glossary; notes ``/work/shared/papers/fednest-notes.md``): ``H = grad^2_y g``,
``H_i = grad^2_y g_i``, ``J_i = grad^2_xy g_i`` (``dx x dy``), bars for client means,
``l = l_{g,1}`` (``1 / neumann_step_size``), ``A = I - H / l``, ``N = neumann_terms``,
``N' ~ U{0..N-1}`` the random truncation index, ``T = inner_steps``, ``tau = local_steps``,
``beta = inner_step_size``, ``alpha = outer_step_size``.

Expectations over ``N'`` are exact finite sums: under full participation and exact oracles the
only randomness of FedIHGP is ``N'``, and the vector after round ``n`` of a run with
``N' = N - 1`` is exactly ``p_n`` of a run stopped at ``N' = n`` (the rounds are the same), so one
run gives the whole distribution. Linear maps of the algorithms (FedInn's per-call map, the
outer loop's per-iteration map) are read off column by column from single calls at ``z* + e_j``.

So every claim in this module is deterministic (``decision="deterministic"``): no quantity is a
Monte Carlo estimate, the client-sampling variances enumerate every subset through a scripted
context, and the communication counts read the ledger of runs whose seeded draws (N', subsets) are
recorded with each iteration. The Monte Carlo claims (Thm 3.1's K-rates, (14b)) are statistical
and live in :mod:`theory_checks.fednest_rates`. Each claim that holds names its perturbation
(:mod:`theory_checks.perturbations.fednest`), each refuted one a positive control.

Speed: oracle calls cost about 1-2 ms on the reference machine, so the strategies here use small
dimensions, few clients and small kappa; each claim's fast profile (8 cases) stays near 5 s.

Layout: this module gathers the claims and keeps every name importable from it; the code lives in
one module per job: :mod:`~theory_checks.fednest_common` (shared helpers and strategies),
:mod:`~theory_checks.fednest_lemma22` (Lemma 2.2 bias), :mod:`~theory_checks.fednest_variance`
(FedIHGP's variance), :mod:`~theory_checks.fednest_fedinn` (FedInn / FedAvg),
:mod:`~theory_checks.fednest_minimax`, :mod:`~theory_checks.fednest_compositional`,
:mod:`~theory_checks.fednest_rounds` (communication), :mod:`~theory_checks.fednest_floor`
(Thm 3.1's floor) and :mod:`~theory_checks.fednest_claims` (the ``CLAIMS`` literal).
"""

# ruff: noqa: F401  (a re-exporting module: every name below is imported to be importable here)

from __future__ import annotations

# The names this module imported before the split into per-job modules.
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import (
    LinearCompositional,
    ProblemConstants,
    QuadraticBilevel,
    QuadraticMinimax,
    strategies,
)
from testbed.algorithms.base import run_algorithm
from testbed.algorithms.fednest import FedNest
from testbed.algorithms.rounds import RoundsFormula
from testbed.federation.context import FederatedContext
from testbed.oracles import Oracles
from theory_checks import _stats
from theory_checks._exact import evaluation_point
from theory_checks.claim import (
    Case,
    Claim,
    Fit,
    Measurement,
    NotMeasurable,
    SeriesPoint,
    known_case,
)
from theory_checks.fednest_claims import (
    _COMPOSITIONAL_ONE_TERM,
    _MINIMAX_ONE_CLIENT,
    _ONE_CLIENT_NEAR_SOLUTION,
    _ROUNDS_DETERMINISTIC,
    CLAIMS,
    _rounds_claim,
)
from theory_checks.fednest_common import (
    PAPER,
    REF,
    LinearOuterProbe,
    ScriptedContext,
    _bilevel,
    _case_builder,
    _client_matrices,
    _clients,
    _closed_form,
    _expected_hessian_inverse,
    _expected_ihgp,
    _fedihgp,
    _heterogeneous_bilevel,
    _joint_lipschitz,
    _measured_map,
    _per_client_taus,
    _power,
    paper_constants,
)
from theory_checks.fednest_compositional import (
    _compositional_cases,
    _compositional_paths,
    check_compositional_one_call,
    check_compositional_paper_form,
    check_compositional_single_term,
)
from theory_checks.fednest_fedinn import (
    _fedinn_cases,
    _fedinn_draw,
    _fedinn_prediction,
    _inner_map,
    _taus,
    check_fedavg_fixed_point,
    check_fedinn_linear_rate,
    check_fedinn_tau_exponent,
)
from theory_checks.fednest_floor import check_stationarity_floor, floor_bound
from theory_checks.fednest_lemma22 import (
    _indirect_bias_parts,
    averaged_bias_bound,
    check_averaged_bias,
    check_inverse_hessian_bound,
    check_inverse_hessian_identity,
    check_paper_constant,
    check_per_client_bias,
    inverse_hessian_bound,
    paper_bias_bound,
)
from theory_checks.fednest_minimax import (
    MINIMAX_RATE_RTOL,
    _minimax_cases,
    _minimax_map,
    _minimax_parts,
    _run_synthetic,
    _synthetic_cases,
    check_minimax_averaged_indirect,
    check_minimax_per_client_indirect,
    check_minimax_synthetic_rate,
)
from theory_checks.fednest_rounds import (
    _round_cases,
    _rounds_run,
    _table2,
    _table2_formula,
    check_rounds,
    check_rounds_paper_random,
    check_rounds_random,
)
from theory_checks.fednest_variance import (
    _variance_formula,
    check_client_sampling_variance,
    check_variance_exact,
    check_variance_linear_in_n,
)
from theory_checks.perturbations import fednest as perturb
from theory_checks.tolerances import IDENTITY_RTOL
