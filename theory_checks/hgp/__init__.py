"""Claims of the HGP paper (Terashita & Hara): Lemma 1, Lemma 2, Theorem 1, Corollary 1,
Theorem 2, the errata of the notes (sec. 7), the negative control and the applications.

This module assembles :data:`CLAIMS`; the code
lives in sibling modules of one job each:

- :mod:`theory_checks.hgp.constants`: the paper's constants (alpha, beta, L, kappa, mu, nu, c_S)
  and its assumptions and conditions as hypotheses, used by every check;
- :mod:`theory_checks.hgp.common`: the paper's shared helpers (mixing families, case
  strategies, a run, exact blocks and noise moments);
- :mod:`theory_checks.hgp.exact_averaging`: Lemma 1, the D2 error identity and Theorem 2;
- :mod:`theory_checks.hgp.pushsum`: Lemma 2 and the explicit Push-Sum bound;
- :mod:`theory_checks.hgp.theorem1`: Corollary 1 (D1), the stated step condition, the rates;
- :mod:`theory_checks.hgp.core_claims`: CORE_CLAIMS, read from ``core_claims.toml``.

Stochastic claims live in :mod:`theory_checks.hgp.stochastic`; applications and communication in
:mod:`theory_checks.hgp.applications`, influence estimation (Table 4) in
:mod:`theory_checks.hgp.influence`. Every check compares the estimator's output with a bound
from the paper's formula (or the notes' explicit version of it) and the problem's constants.
"""

from __future__ import annotations

# Library names this module has always exposed, kept so that no importer of them breaks.
from theory_checks.claim import (
    Claim,
)
from theory_checks.hgp.applications import CLAIMS as APPLICATION_CLAIMS
from theory_checks.hgp.core_claims import CORE_CLAIMS
from theory_checks.hgp.stochastic import CLAIMS as STOCHASTIC_CLAIMS

CLAIMS: tuple[Claim, ...] = CORE_CLAIMS + STOCHASTIC_CLAIMS + APPLICATION_CLAIMS
