"""Planted one-line bugs in the Betty adapter's calls: what its claims must catch. They are
data, ``planted_bugs.toml`` beside this module (each bug, the field it changes and how, the
claims that catch it); ``integrations/test_library_adapters.py`` shows each is caught."""

from __future__ import annotations

from pathlib import Path

from theory_checks.planted_bugs import load_planted_bugs

PLANTED = load_planted_bugs(Path(__file__).with_name("planted_bugs.toml"))
#: the perturbation of betty.darts.one_term_identity (claims.toml)
DARTS_ONE_LOWER_STEP_SHORT = PLANTED["DARTS_ONE_LOWER_STEP_SHORT"].perturbation
