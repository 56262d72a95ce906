"""Hypergradient estimators (private modules; :mod:`testbed` re-exports the public names)."""
