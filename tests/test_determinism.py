"""Hypothesis draws of the claim runner depend on the seed only (see theory_checks.determinism)."""

from __future__ import annotations

import importlib

from hypothesis.internal.conjecture import providers

from theory_checks import determinism


def test_hypothesis_local_constants_are_off_even_after_new_local_imports() -> None:
    # if a hypothesis upgrade renamed the private hook, the patch reports it here
    assert determinism.LOCAL_CONSTANTS_DISABLED
    importlib.import_module("problems.workloads.splits")  # a local module full of constants
    assert len(providers._get_local_constants()) == 0
