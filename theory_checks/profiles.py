"""Profiles: how hard a run looks, passed to the run rather than read at import (issue 13).

A :class:`Profile` caps the drawn cases; :func:`running_on` makes a profile the running one
while a claim's cases are drawn and measured (a context variable), and what a claim sizes by the
profile is a :class:`~theory_checks.claim.PerProfile` value resolved then.
``$TESTBED_PROFILE`` is only the default of a command line or a test run.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Iterator
from typing import TypeVar

from theory_checks.claim import Claim, PerProfile


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
    default of a command line or a test run, read when asked, never at import."""
    name = name or os.environ.get("TESTBED_PROFILE", "fast")
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    return PROFILES[name]


_T = TypeVar("_T")


# The profile of the claim being run: set by run_claim / run_claims from their ``profile``
# argument for the duration of the run (a context variable, so nested and concurrent runs each
# see their own); None outside a run.
_RUNNING: contextvars.ContextVar[Profile | None] = contextvars.ContextVar("profile", default=None)


@contextlib.contextmanager
def running_on(profile: Profile) -> Iterator[Profile]:
    """Run the enclosed claim code on ``profile`` (what :func:`active_profile` returns)."""
    token = _RUNNING.set(profile)
    try:
        yield profile
    finally:
        _RUNNING.reset(token)


def active_profile() -> Profile:
    """The profile of the claim being run (:func:`running_on`); outside a run, the default of
    :func:`get_profile`."""
    return _RUNNING.get() or get_profile()


def fast_profile() -> bool:
    """Whether the running claim runs on the fast profile: costly Monte Carlo claims read it,
    when their cases are drawn, to size their designs."""
    return active_profile().name == "fast"


def per_profile(fast: _T, thorough: _T) -> PerProfile:
    """A claim field that depends on the profile, resolved when the claim runs."""
    return PerProfile(fast, thorough)


def claim_max_examples(claim: Claim, profile: Profile) -> int | None:
    """The claim's cap on drawn cases on ``profile`` (``None``: the profile's own)."""
    value = claim.max_examples
    return value.resolve(profile.name) if isinstance(value, PerProfile) else value
