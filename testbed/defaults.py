"""The library's default iteration counts, in one place, with why the families differ.

Each class and registry entry reads its default from here; where two families take different
values for one quantity (the Neumann terms are N = 10 for FedNest's outer loop, 20 for an
estimator alone, 50 for HGP), both are named here with the reason. None is a paper's
experimental setting unless it says so: the papers' own settings are beside each value.
``testbed regress`` and the claims measure the registry entries with these values, so changing
one changes measured numbers (a deliberate change only, with a new baseline).

Neumann terms (N in FedNest and the classical AID, M in HGP), three values for three uses:

- :data:`NEUMANN_TERMS` = 20: an estimator measured on its own, the classical AID-Neumann and
  fixed-point entries (:mod:`testbed.entries.classical`) and FedIHGP
  (:class:`testbed.estimators.fednest.FedIHGP`); its truncation bias ``(1 - mu/L)^N`` is 0.12
  at condition number 10.
- :data:`FEDNEST_NEUMANN_TERMS` = 10: FedNest's outer loop
  (:class:`testbed.algorithms.fednest.FedNest`), where every outer iteration pays
  ``2T + N + 3`` rounds. The paper takes N = O(kappa_g log K) (Cor. 3.1); the authors' code
  defaults to N = 5.
- :data:`HGP_NEUMANN_TERMS` = 50 with :data:`HGP_PUSHSUM_STEPS` = 10: HGP's estimator
  (:class:`testbed.decentralized.hgp.HyperGradientPush`), whose M terms each carry a Push-Sum
  consensus error too; the paper uses M = 500-1000 (influence, error experiments) and M = 10,
  S = 10 (personalization, sec. 5.3).
- :data:`HGP_PERSONALIZATION` (M = 15, S = 5, T = 40 SGP steps): HGP-PL's estimator, read by
  both the registry entry ``hgp-personalization`` (which claims and ``testbed regress``
  measure) and the class default of
  :class:`testbed.decentralized.personalization.HGPPersonalization`. Not the paper's sec. 5.3
  setting (M = 10, S = 10, 600 SGP steps on EMNIST). One value for both, so the class's
  default estimator is the one the claims and ``testbed regress`` measure.

Inner and local steps, each shared by an estimator and the outer algorithm built on it:

- :data:`FEDNEST_INNER_STEPS` = 5 (T) and :data:`FEDNEST_LOCAL_STEPS` = 5 (tau): FedNest and
  FedIHGP (the authors' code: T = 1, 5 local epochs);
- :data:`AGGITD_INNER_STEPS` = 10 (N) and :data:`AGGITD_LOCAL_STEPS` = 1 (tau): AggITD and
  FBO-AggITD.

Graphs: :data:`EDGE_PROBABILITY` = (0.4, 0.8), HGP's RandD graphs (sec. 5.3:
rho_ij ~ U[0.4, 0.8]), for :class:`testbed.decentralized.graphs.GraphSequence` and the HGP
estimator alike.

Running: :data:`TASK_RETRIES` = 3, the retries of a Ray task whose worker process or node dies
(``--max-retries``; an exception the task raises itself is not retried: it would raise again
with the same seeds).
"""

from __future__ import annotations

NEUMANN_TERMS = 20
FEDNEST_NEUMANN_TERMS = 10
HGP_NEUMANN_TERMS = 50
HGP_PUSHSUM_STEPS = 10
HGP_PERSONALIZATION: dict[str, int] = {"neumann_terms": 15, "pushsum_steps": 5, "inner_steps": 40}

FEDNEST_INNER_STEPS = 5
FEDNEST_LOCAL_STEPS = 5
AGGITD_INNER_STEPS = 10
AGGITD_LOCAL_STEPS = 1

EDGE_PROBABILITY: tuple[float, float] = (0.4, 0.8)

TASK_RETRIES = 3
