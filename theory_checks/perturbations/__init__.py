"""Perturbations: the smallest bug that matters for each claim expected to hold.

One module per paper. Each defines deliberately wrong estimators (a subclass of the real one with
one realistic mistake) and the builders that a claim's :class:`theory_checks.claim.Perturbation`
names; ``testbed check`` runs them and records whether the check caught them (the check's power),
and ``theory_checks/test_claims.py`` asserts it.
"""
