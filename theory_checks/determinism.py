"""Make hypothesis draws depend only on the seed, not on which local modules are imported.

Hypothesis (>= 6.131) mixes constants scraped from every *local* module in ``sys.modules`` into
its draws. Which modules count as local depends on how the package is installed (an editable
install is local, a wheel in site-packages is not) and on what has been imported so far in the
process, so the same claim seed drew different cases under ``pip install -e`` and under tox,
and a single claim drew differently from the same claim inside ``testbed check``. The testbed
promises that a seed gives the same numbers, so the claim runner turns the scraping off.

This patches a private hypothesis function (``providers._get_local_constants``) when imported
(by the runner, before any draw): hypothesis offers no public switch that keeps these draws
(6.155: no setting turns the scraping off; a registered backend of our own changes the engine's
behaviour, which treats any backend but ``"hypothesis"`` differently; without the patch every
claim's drawn cases change). ``tests/test_determinism.py`` checks the promise through public API
only: the same seed draws the same cases in a process that has imported a module full of
constants; if a future hypothesis renamed the function, that test would fail.
"""

from __future__ import annotations

from typing import Any


def disable_local_constants() -> bool:
    """Make hypothesis use only its global constants; True when the patch applied."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - hypothesis without the module
        return False
    if not hasattr(providers, "_get_local_constants") or not hasattr(providers, "Constants"):
        return False
    empty: Any = providers.Constants()
    providers._get_local_constants = lambda: empty  # type: ignore[attr-defined]
    return True


disable_local_constants()
