"""theory_checks.recently_used: the bounded store a calibration keeps across its blocks."""

from __future__ import annotations

import pytest

from theory_checks.recently_used import RecentlyUsed


def test_the_least_recently_used_value_is_dropped_past_the_size():
    kept: RecentlyUsed[str] = RecentlyUsed(2)
    assert kept.put("a", "A") == "A"
    kept.put("b", "B")
    assert kept.get("a") == "A"  # a read makes "a" the most recent, so "b" goes next
    kept.put("c", "C")
    assert "b" not in kept and "a" in kept and "c" in kept and len(kept) == 2
    kept.put("a", "A2")  # a write of a kept key replaces it and makes it the most recent
    kept.put("d", "D")
    assert ("c" in kept, kept.get("a"), kept.get("d")) == (False, "A2", "D")


def test_a_missing_key_and_a_size_below_one_are_refused():
    with pytest.raises(KeyError):
        RecentlyUsed[int](1).get("nothing")
    with pytest.raises(ValueError, match="at least one"):
        RecentlyUsed[int](0)
