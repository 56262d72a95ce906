"""Outer loops of the papers (private modules; :mod:`testbed` re-exports the public names)."""
