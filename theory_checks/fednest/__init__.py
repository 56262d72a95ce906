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
and live in :mod:`theory_checks.fednest.rates`. Each claim that holds names its perturbation
(:mod:`theory_checks.fednest.perturbations`), each refuted one a positive control.

Speed: oracle calls cost about 1-2 ms on the reference machine, so the strategies here use small
dimensions, few clients and small kappa; each claim's fast profile (8 cases) stays near 5 s.

Layout: this module gathers the claims (the registry reads its ``CLAIMS``); the code lives in
one module per job: :mod:`~theory_checks.fednest.common` (shared helpers and strategies),
:mod:`~theory_checks.fednest.lemma22` (Lemma 2.2 bias), :mod:`~theory_checks.fednest.variance`
(FedIHGP's variance), :mod:`~theory_checks.fednest.fedinn` (FedInn / FedAvg),
:mod:`~theory_checks.fednest.minimax`, :mod:`~theory_checks.fednest.compositional`,
:mod:`~theory_checks.fednest.rounds` (communication), :mod:`~theory_checks.fednest.floor`
(Thm 3.1's floor) and :mod:`~theory_checks.fednest.claims` (the cases and controls that
``claims.toml`` names, and ``CLAIMS`` read from it).
"""

from __future__ import annotations

from theory_checks.fednest import rates
from theory_checks.fednest.claims import CLAIMS as FIRST_CLAIMS

CLAIMS = FIRST_CLAIMS + rates.CLAIMS

__all__ = ["CLAIMS"]
