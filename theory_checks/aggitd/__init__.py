"""Claims of the AggITD paper (Xiao & Ji, ICML 2023) and its errata.

Notation (README glossary): ``N`` = ``inner_steps``, ``tau`` = ``local_steps``, ``beta`` =
``inner_step_size``, ``alpha`` = ``outer_step_size``, ``lambda`` = ``neumann_step_size``, ``S`` =
participating clients. ``H = grad^2_y g`` and ``J = grad^2_xy g`` are constant on the closed-form
families (so the paper's Hessian-Lipschitz constant ``rho`` is 0 and the ``alpha_1``,
``alpha_2`` terms of Prop. 1 vanish).

The paper's constants, step rules and assumptions are in one module,
:mod:`theory_checks.aggitd.constants`, which every check uses and whose hypotheses every claim
declares: ``mu`` is Assumption 1's (the smallest eigenvalue of every client's and sample's inner
Hessian), ``L_g`` and ``L_f`` Assumption 2's (spectral norms of every client's and sample's
Hessian of ``g_i`` and ``f_i`` in ``z = (x, y)`` jointly), ``M`` the largest ``||grad_z F_i||``
at the points a statement evaluates (the whole space's when ``f`` is affine: no quadratic ``f``
is Lipschitz globally, notes 6 item 20), ``sigma_g^2`` Assumption 4's dissimilarity
``E_i ||grad_z g_i - grad_z g||^2`` at those points (exact oracles: ``sigma_1 = 0``); the steps
are ``lambda = min{10, 1/L_g}``, ``beta = min{1, lambda, 1/(6 L_g)}`` and the outer steps of
Lemma 3 and Theorem 1 unless a case names its own.

Every claim of this module is deterministic: exact oracles, full participation (or every client
subset enumerated) and the expectation over the server's index Q computed exactly (one run per
``Q = 0..N``, or the expectation mode, eq. 11), so each measured figure is a float64 quantity
compared with round-off tolerances; the runs get :data:`NO_DRAWS`, which raises on any random
draw. Theorem 1's stochastic rate is the statistical claim, in :mod:`theory_checks.aggitd.rates`.

The code lives in sibling modules of one job each (this module gathers their ``CLAIMS``):

- :mod:`~theory_checks.aggitd.constants`: the paper's constants, step rules and hypotheses;
- :mod:`~theory_checks.aggitd.common`: the shared case strategies and exact helpers;
- :mod:`~theory_checks.aggitd.iteration`: FBO-AggITD's expected iteration as an affine map;
- :mod:`~theory_checks.aggitd.identities`: Algorithm 1's identities (eqs. 5 and 11) and errata;
- :mod:`~theory_checks.aggitd.bounds`: Props. 1 and 2 and the lower-level contraction;
- :mod:`~theory_checks.aggitd.communication`: the rounds and floats per iteration (Table 1);
- :mod:`~theory_checks.aggitd.corollary1`: Corollary 1 as stated and with its floor kept;
- :mod:`~theory_checks.aggitd.scaling`: the rates in N, tau and S;
- :mod:`~theory_checks.aggitd.claims`: the claim records, :data:`CLAIMS`.
"""

from __future__ import annotations

from theory_checks.aggitd import rates
from theory_checks.aggitd.claims import CLAIMS as FIRST_CLAIMS

CLAIMS = FIRST_CLAIMS + rates.CLAIMS

__all__ = ["CLAIMS"]
