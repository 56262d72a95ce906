"""Planted one-line bugs in the higher adapter's calls: what the ITD and GD claims must catch.
They are data, ``planted_bugs.toml`` beside this module (each bug, the field it changes and how,
the claims that catch it); ``integrations/test_library_adapters.py`` shows each is caught."""

from __future__ import annotations

from pathlib import Path

from theory_checks.planted_bugs import load_planted_bugs

PLANTED = load_planted_bugs(Path(__file__).with_name("planted_bugs.toml"))
