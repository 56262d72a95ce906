"""Claims of the AggITD paper (Xiao & Ji, ICML 2023) and its errata.

Notation (README glossary): ``N`` = ``inner_steps``, ``tau`` = ``local_steps``, ``beta`` =
``inner_step_size``, ``alpha`` = ``outer_step_size``, ``lambda`` = ``neumann_step_size``, ``S`` =
participating clients. ``H = grad^2_y g`` and ``J = grad^2_xy g`` are constant on the closed-form
families (so the paper's Hessian-Lipschitz constant ``rho`` is 0 and the ``alpha_1``,
``alpha_2`` terms of Prop. 1 vanish).

The paper's constants are read off each problem as follows (notes 3.1):

- ``mu`` = ``lambda_min`` of the global inner Hessian; ``L_g`` = ``max(L, L_clients, ||J||)``
  (Assumption 2 bounds every ``||grad^2_y G_i||`` and ``||grad^2_xy G||`` by ``L_g``);
- ``L_f`` = Lipschitz constant of ``grad_y f`` in y (``||C_bar||``): the only place it enters
  Prop. 1 is ``||grad_y f(y^Q) - grad_y f(y^N)|| <= L_f ||y^Q - y^N||``;
- ``M`` bounds ``||grad_y f||``, which no quadratic satisfies globally (notes 6, item 20), so it is
  the maximum of ``||grad_y f(x, y)||`` over the points the run visits (and ``y*``): the proofs
  only use the bound at those points;
- ``sigma_g^2`` = ``max(sigma_1^2, sigma_2^2)``; the checks use exact oracles (``sigma_1 = 0``) and
  measure ``sigma_2^2`` = max over the visited points of ``mean_i ||grad_y g_i - grad_y g||^2``.

Every claim of this module is deterministic: exact oracles, full participation (or every client
subset enumerated) and the expectation over the server's index Q computed exactly (one run per
``Q = 0..N``, or the expectation mode, eq. 11), so each measured figure is a float64 quantity
compared with round-off tolerances; the runs get :data:`NO_DRAWS`, which raises on any random
draw. Theorem 1's stochastic rate is the statistical claim, in :mod:`theory_checks.aggitd.rates`.

The code lives in sibling modules of one job each (this module gathers their ``CLAIMS``):

- :mod:`~theory_checks.aggitd.common`: the shared case strategies and exact helpers;
- :mod:`~theory_checks.aggitd.identities`: Algorithm 1's identities (eqs. 5 and 11) and errata;
- :mod:`~theory_checks.aggitd.bounds`: Props. 1 and 2 and the lower-level contraction;
- :mod:`~theory_checks.aggitd.communication`: the rounds and floats per iteration (Table 1);
- :mod:`~theory_checks.aggitd.corollary1`: Corollary 1 as stated and with its floor kept;
- :mod:`~theory_checks.aggitd.scaling`: the rates in N, tau and S;
- :mod:`~theory_checks.aggitd.claims`: the claim records, :data:`CLAIMS`.
"""

from __future__ import annotations

from theory_checks.aggitd.claims import CLAIMS

__all__ = ["CLAIMS"]
