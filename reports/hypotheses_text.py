"""What a refutation rests on, in words: the paper's hypotheses with their margins on the
counterexample, and the readings of the statement with the verdict under each.

A "fails as stated" is only as good as its case: the report shows, beside every refutation, each
hypothesis of the paper the case was checked inside (its margin: the relative room left, ``>= 0``
inside) and, when the statement admits several readings, that it fails under every one (or which
reading holds). Reads the claim's results JSON only (``hypotheses``, ``readings``,
``holding_readings`` and the counterexample's ``hypotheses``).
"""

from __future__ import annotations

from reports.results_reading import as_float
from results_format.claim_record import ClaimRecord
from results_format.claim_record import MarginRecord


def _counterexample_margins(claim: ClaimRecord) -> tuple[MarginRecord, ...]:
    """The margins recorded on the case the verdict rests on: the counterexample (a case of
    ``cases`` whose outcome is "fails"), else the first measured case."""
    failing = [c for c in claim.cases if c.outcome == "fails"]
    for case in failing or claim.cases:
        if case.hypotheses:
            return case.hypotheses
    return ()


def hypothesis_lines(claim: ClaimRecord) -> list[str]:
    """One line per hypothesis the claim declares: name, statement and its margin on the case
    the verdict rests on (or "declared" when no case recorded it)."""
    margins = {m.name: m for m in _counterexample_margins(claim)}
    lines = []
    for h in claim.hypotheses:
        found = margins.get(h.name)
        if found is None:
            state = "declared (no case recorded its margin)"
        else:
            margin = as_float(found.margin)
            state = f"margin {margin:+.3g}" + ("" if margin >= 0 else " (OUTSIDE)")
        lines.append(f"{h.name}: {h.statement} ({h.reference}); {state}")
    return lines


def reading_lines(claim: ClaimRecord) -> list[str]:
    """One line per reading of the statement with its verdict (empty for a claim read one
    way)."""
    lines = []
    for r in claim.readings:
        line = f"read as {r.name}: {r.verdict}"
        ce = r.counterexample
        if ce is not None:
            line += (
                f" (counterexample {ce.problem_id}: measured "
                f"{as_float(ce.measured):.4g} vs {as_float(ce.bound):.4g})"
            )
        lines.append(line)
    return lines


def refutation_summary(claim: ClaimRecord) -> str:
    """One sentence: under how many readings and inside how many hypotheses the verdict was
    reached (the errata's "what was measured" note)."""
    hypotheses, readings = claim.hypotheses, claim.readings
    parts = []
    if hypotheses:
        margins = _counterexample_margins(claim)
        inside = all(as_float(m.margin) >= 0 for m in margins) if margins else None
        parts.append(
            f"inside {len(hypotheses)} declared hypothes"
            f"{'is' if len(hypotheses) == 1 else 'es'}"
            + ("" if inside is None else "" if inside else " (one is violated!)")
        )
    elif claim.scale:
        parts.append(
            "under the paper's protocol at the closest scale the data allow (the "
            "differences are stated with the claim)"
        )
    else:
        parts.append("no hypotheses declared")
    if readings:
        failing = sum(1 for r in readings if r.verdict == "fails as stated")
        parts.append(f"fails under {failing} of {len(readings)} readings")
    return "; ".join(parts)
