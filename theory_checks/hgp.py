"""Claims of the HGP paper (Terashita & Hara): Lemma 1, Lemma 2, Theorem 1, Corollary 1,
Theorem 2, the errata of the notes (sec. 7), the negative control and the applications.

This module assembles :data:`CLAIMS` and re-exports the names it has always defined; the code
lives in sibling modules of one job each:

- :mod:`theory_checks.hgp_core_helpers`: shared helpers (mixing families, case strategy, a run);
- :mod:`theory_checks.hgp_exact_averaging`: Lemma 1, the D2 error identity and Theorem 2;
- :mod:`theory_checks.hgp_pushsum`: Lemma 2 and the explicit Push-Sum bound;
- :mod:`theory_checks.hgp_theorem1`: Corollary 1 (D1), the stated step condition, the rates;
- :mod:`theory_checks.hgp_core_claims`: the CORE_CLAIMS literal.

Stochastic claims live in :mod:`theory_checks.hgp_stochastic`; applications and communication in
:mod:`theory_checks.hgp_applications`. Every check compares the estimator's output with a bound
from the paper's formula (or the notes' explicit version of it) and the problem's constants.
"""

from __future__ import annotations

# Library names this module has always exposed, kept so that no importer of them breaks.
import math as math
from collections.abc import Callable as Callable
from typing import Any as Any

import numpy as np  # noqa: F401
import torch as torch
from hypothesis import strategies as st  # noqa: F401

from problems import PerClientQuadratic as PerClientQuadratic
from problems import strategies as strategies
from testbed.decentralized.graphs import CONNECTED_FAMILIES as CONNECTED_FAMILIES
from testbed.decentralized.graphs import GraphSequence as GraphSequence
from testbed.decentralized.hgp import HGPState as HGPState
from theory_checks import _stats as _stats
from theory_checks._exact import dominant_mode_window as dominant_mode_window
from theory_checks.claim import Case as Case
from theory_checks.claim import Claim
from theory_checks.claim import Fit as Fit
from theory_checks.claim import Measurement as Measurement
from theory_checks.claim import NotMeasurable as NotMeasurable
from theory_checks.claim import SeriesPoint as SeriesPoint
from theory_checks.claim import known_case as known_case
from theory_checks.hgp_applications import CLAIMS as APPLICATION_CLAIMS
from theory_checks.hgp_common import RATE_RTOL as RATE_RTOL
from theory_checks.hgp_common import det_constants as det_constants
from theory_checks.hgp_common import fresh_state as fresh_state
from theory_checks.hgp_common import global_grad as global_grad
from theory_checks.hgp_common import graph_cases as graph_cases
from theory_checks.hgp_common import graph_of as graph_of
from theory_checks.hgp_common import point as point
from theory_checks.hgp_common import scale as scale
from theory_checks.hgp_common import stacked_error as stacked_error
from theory_checks.hgp_common import terms_for as terms_for
from theory_checks.hgp_core_claims import CORE_CLAIMS
from theory_checks.hgp_core_helpers import MIXING_FAMILIES as MIXING_FAMILIES
from theory_checks.hgp_core_helpers import _cases as _cases
from theory_checks.hgp_core_helpers import _run as _run
from theory_checks.hgp_exact_averaging import _identity_cases as _identity_cases
from theory_checks.hgp_exact_averaging import _theorem2 as _theorem2
from theory_checks.hgp_exact_averaging import _thm2_cases as _thm2_cases
from theory_checks.hgp_exact_averaging import check_error_identity as check_error_identity
from theory_checks.hgp_exact_averaging import check_lemma1 as check_lemma1
from theory_checks.hgp_exact_averaging import check_theorem2_as_stated as check_theorem2_as_stated
from theory_checks.hgp_exact_averaging import check_theorem2_corrected as check_theorem2_corrected
from theory_checks.hgp_pushsum import _lemma2_cases as _lemma2_cases
from theory_checks.hgp_pushsum import _lemma2_grid as _lemma2_grid
from theory_checks.hgp_pushsum import _operators as _operators
from theory_checks.hgp_pushsum import check_lemma2_geometric as check_lemma2_geometric
from theory_checks.hgp_pushsum import check_lemma2_sqrt_n as check_lemma2_sqrt_n
from theory_checks.hgp_pushsum import ergodicity_coefficient as ergodicity_coefficient
from theory_checks.hgp_pushsum import pushsum_bound as pushsum_bound
from theory_checks.hgp_stochastic import CLAIMS as STOCHASTIC_CLAIMS
from theory_checks.hgp_theorem1 import _pushsum_run as _pushsum_run
from theory_checks.hgp_theorem1 import _rate_s_cases as _rate_s_cases
from theory_checks.hgp_theorem1 import _step_cases as _step_cases
from theory_checks.hgp_theorem1 import check_corollary1 as check_corollary1
from theory_checks.hgp_theorem1 import check_rate_in_m as check_rate_in_m
from theory_checks.hgp_theorem1 import check_rate_in_s as check_rate_in_s
from theory_checks.hgp_theorem1 import check_stated_step_condition as check_stated_step_condition
from theory_checks.hgp_theorem1 import d1_bound as d1_bound
from theory_checks.perturbations import hgp as perturb  # noqa: F401
from theory_checks.tolerances import IDENTITY_RTOL as IDENTITY_RTOL

CLAIMS: tuple[Claim, ...] = CORE_CLAIMS + STOCHASTIC_CLAIMS + APPLICATION_CLAIMS
