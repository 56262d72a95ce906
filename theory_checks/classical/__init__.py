"""Claims about the classical single-machine estimators (exact, AID with Neumann or CG, ITD) and
gradient descent on one strongly convex inner problem.

Notation (docs/glossary.md): ``H = grad^2_y g`` (dy x dy), ``J = grad^2_xy g`` (dx x dy),
``mu, L`` the extreme eigenvalues of H, ``lambda`` the Neumann step, ``beta`` the inner GD step,
``N`` the Neumann terms, ``T`` the inner steps; ``h(x) = f(x, y*(x))``.

==============================================  ===================  ==========================
result                                          module               claims
==============================================  ===================  ==========================
Neumann AID error (Ghadimi & Wang eq. (3.3);    :mod:`.neumann`      error_identity,
FedNest Lemma 2.2, eq. (14a))                                        error_bound, decay_rate
CG exact after dim_y iterations                 :mod:`.cg`           exact_after_dim_y
GD linear rate (Nesterov Thm 2.1.15)            :mod:`.gd`           linear_rate
ITD error (Grazzi et al. 2020, Thm 2.1)         :mod:`.itd`          error_identity, error_bound
exact hypergradient (FedNest eq. (8))           :mod:`.exact`        finite_differences
==============================================  ===================  ==========================

Shared: :mod:`.constants` (the hypotheses), :mod:`.common` (the closed-form cases and exact
quantities), :mod:`.mutants`.
"""

from __future__ import annotations

from theory_checks.claim import Claim
from theory_checks.discovery import declared_claims

#: The claims of every result module of this package (modules in name order).
CLAIMS: tuple[Claim, ...] = declared_claims(__name__, __path__)

__all__ = ["CLAIMS"]
