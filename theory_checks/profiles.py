"""Profiles: how hard a run looks, an argument of the run (issues 13 and 26).

A :class:`Profile` caps the drawn cases. It travels one way: the command line (or a test
session) picks it, :func:`get_profile` reading ``$TESTBED_PROFILE`` only as that entry point's
default, and passes it to the runner, which gives each check what the profile decides: the
claim's cases are drawn from its strategy for the profile (a :class:`PerProfile` value), a
statistical check gets the profile's name in its design
(:attr:`~theory_checks.decision.Design.profile`), and a deterministic check reads its budgets
from its case's parameters. No check reads the environment or an ambient profile.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple
from typing import TypeVar

if TYPE_CHECKING:
    from theory_checks.claim import Claim


class PerProfile(NamedTuple):
    """A value that depends on the profile a claim runs on (``testbed check --profile``): the
    runner resolves it with the profile it is given when the claim runs, never at import."""

    fast: Any
    thorough: Any

    def resolve(self, profile_name: str) -> Any:
        """The value of the profile called ``profile_name``; a name other than ``fast`` and
        ``thorough`` is an error (a test's own profile takes one of the two names with its own
        case cap, ``Profile("thorough", 5)``), never silently the thorough value.

        >>> PerProfile(8, 60).resolve("thorough")
        60
        >>> PerProfile(8, 60).resolve("quick")
        Traceback (most recent call last):
        ...
        ValueError: no value for a profile called 'quick': a PerProfile has 'fast' and 'thorough'
        """
        if profile_name == "fast":
            return self.fast
        if profile_name == "thorough":
            return self.thorough
        raise ValueError(
            f"no value for a profile called {profile_name!r}: a PerProfile has "
            "'fast' and 'thorough'"
        )


@dataclasses.dataclass(frozen=True)
class Profile:
    """How hard to look: ``fast`` for the default test run, ``thorough`` for ``tox -e theory``."""

    name: str
    max_examples: int


PROFILES = {
    # Why 8: each classical check takes 10-300 ms; 8 cases x 8 claims keeps `tox -e py` in its
    # few-minute budget while still drawing edge cases (one client, kappa = 1, zero spread).
    "fast": Profile("fast", 8),
    # Why 60: enough draws that hypothesis reaches dimension, client-count and kappa extremes.
    "thorough": Profile("thorough", 60),
}


def get_profile(name: str | None = None) -> Profile:
    """The profile called ``name``; without a name, ``$TESTBED_PROFILE`` (default ``fast``): the
    default of a command line or a test session, which passes the profile down; nothing below
    an entry point calls it without a name."""
    name = name or os.environ.get("TESTBED_PROFILE", "fast")
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    return PROFILES[name]


_T = TypeVar("_T")


def per_profile(fast: _T, thorough: _T) -> PerProfile:
    """A claim field that depends on the profile, resolved when the claim runs."""
    return PerProfile(fast, thorough)


def claim_max_examples(claim: Claim, profile: Profile) -> int | None:
    """The claim's cap on drawn cases on ``profile`` (``None``: the profile's own)."""
    value = claim.max_examples
    return value.resolve(profile.name) if isinstance(value, PerProfile) else value
