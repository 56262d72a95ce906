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

Layout: this module gathers the claims (the registry reads its ``CLAIMS``); the code lives in
one module per job: :mod:`~theory_checks.fednest.k_rate` (Thm 3.1's K-rates),
:mod:`~theory_checks.fednest.floor_slope` (the floor's slope in N),
:mod:`~theory_checks.fednest.abs_error` ((14b)), :mod:`~theory_checks.fednest.lfednest`
(LFedNest's heterogeneity bias), :mod:`~theory_checks.fednest.sampling` (client sampling,
``N > 1``) and :mod:`~theory_checks.fednest.rates_claims` (the ``CLAIMS`` literal).
"""

from __future__ import annotations

from theory_checks.fednest.rates_claims import CLAIMS

__all__ = ["CLAIMS"]
