"""What a refutation rests on, in words: the paper's hypotheses with their margins on the
counterexample, and the readings of the statement with the verdict under each.

A "fails as stated" is only as good as its case: the report shows, beside every refutation, each
hypothesis of the paper the case was checked inside (its margin: the relative room left, ``>= 0``
inside) and, when the statement admits several readings, that it fails under every one (or which
reading holds). Reads the claim's results JSON only (``hypotheses``, ``readings``,
``holding_readings`` and the counterexample's ``hypotheses``).
"""

from __future__ import annotations

from typing import Any

from reports.results_reading import as_float


def _counterexample_margins(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The margins recorded on the case the verdict rests on: the counterexample (a case of
    ``cases`` whose outcome is "fails"), else the first measured case."""
    cases = [c for c in claim.get("cases") or [] if isinstance(c, dict)]
    failing = [c for c in cases if c.get("outcome") == "fails"]
    for case in failing or cases:
        found = case.get("hypotheses")
        if isinstance(found, list) and found:
            return [m for m in found if isinstance(m, dict)]
    return []


def hypothesis_lines(claim: dict[str, Any]) -> list[str]:
    """One line per hypothesis the claim declares: name, statement and its margin on the case
    the verdict rests on (or "declared" when no case recorded it)."""
    margins = {str(m.get("name")): m for m in _counterexample_margins(claim)}
    lines = []
    for h in claim.get("hypotheses") or []:
        if not isinstance(h, dict):
            continue
        name = str(h.get("name", "?"))
        found = margins.get(name)
        if found is None:
            state = "declared (no case recorded its margin)"
        else:
            margin = as_float(found.get("margin"))
            state = f"margin {margin:+.3g}" + ("" if margin >= 0 else " (OUTSIDE)")
        lines.append(f"{name}: {h.get('statement', '')} ({h.get('reference', '')}); {state}")
    return lines


def reading_lines(claim: dict[str, Any]) -> list[str]:
    """One line per reading of the statement with its verdict (empty for a claim read one
    way)."""
    lines = []
    for r in claim.get("readings") or []:
        if not isinstance(r, dict):
            continue
        line = f"read as {r.get('name', '?')}: {r.get('verdict', '?')}"
        ce = r.get("counterexample")
        if isinstance(ce, dict):
            line += (
                f" (counterexample {ce.get('problem_id', '?')}: measured "
                f"{as_float(ce.get('measured')):.4g} vs {as_float(ce.get('bound')):.4g})"
            )
        lines.append(line)
    return lines


def refutation_summary(claim: dict[str, Any]) -> str:
    """One sentence: under how many readings and inside how many hypotheses the verdict was
    reached (the errata's "what was measured" note)."""
    hypotheses = [h for h in claim.get("hypotheses") or [] if isinstance(h, dict)]
    readings = [r for r in claim.get("readings") or [] if isinstance(r, dict)]
    parts = []
    if hypotheses:
        margins = _counterexample_margins(claim)
        inside = all(as_float(m.get("margin")) >= 0 for m in margins) if margins else None
        parts.append(
            f"inside {len(hypotheses)} declared hypothes"
            f"{'is' if len(hypotheses) == 1 else 'es'}"
            + ("" if inside is None else "" if inside else " (one is violated!)")
        )
    elif claim.get("scale"):
        parts.append(
            "under the paper's protocol at the closest scale the data allow (the "
            "differences are stated with the claim)"
        )
    else:
        parts.append("no hypotheses declared")
    if readings:
        failing = sum(1 for r in readings if r.get("verdict") == "fails as stated")
        parts.append(f"fails under {failing} of {len(readings)} readings")
    return "; ".join(parts)
