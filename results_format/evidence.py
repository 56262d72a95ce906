"""What a claim's "holds" proves: its slack and its kill set, re-derived from the results files.

A claim that holds is worth the room its bound leaves and the bugs it catches:

- its **slack**: over its recorded cases, the largest share of the allowed room a measurement
  uses (:func:`case_use`), and its inverse, the factor by which the bound could shrink before
  the tightest case failed. How the share is read depends on the comparison:

  - a bound a paper states (``measured <= bound``, or ``>=``): ``measured / bound`` (``bound /
    measured`` for a lower bound); a statistical test against a one-sided bound uses the far end
    of its confidence interval (``high / bound``; ``bound / low``);
  - a statistical test against a two-sided region: the interval's half-width over the distance
    from the estimate to the region's edge, on the tighter side (the margin of the interval);
  - a fitted rate or exponent checked to a tolerance: ``|estimate - theory| / tolerance``; a
    one-sided exponent or slope (which may be negative) has no ratio: its margin ``bound -
    measured`` is kept instead;
  - an exact identity: ``measured / round-off bound``; a bound met only within the round-off
    its check allows (``measured >= bound``) uses all of its room (share 1); a bound of
    :data:`ROUND_OFF` or less is a round-off tolerance;
  - an exact count (``==``): no room at all (share 1).

  Only a bound a paper states is **loose** when its slack exceeds :data:`LOOSE_FACTOR`: a small
  share of a round-off tolerance or of a fit's tolerance means the measurement sits on the
  theory, not that the statement is weak. A loose claim names the companion claims that give it
  power (``power_from`` in its results file).

- its **kill set**: its own perturbation, caught or not (``power`` in its results file), and the
  mutants ``testbed mutate`` recorded as killed by it (``mutation/summary.json``'s
  ``killed_by``; a mutant stops at its first killer, cheapest claim first).

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.layout import MUTATION
from results_format.layout import SUMMARY

#: A bound a paper states is loose when it could shrink by more than this factor before the
#: tightest recorded case failed.
LOOSE_FACTOR = 10.0
#: A bound at or below this (and above the measurement) is a round-off tolerance, not a paper's
#: constant: float64 round-off of the quantities checked is 1e-16 relative, and a check that
#: compares a vanishing quantity with such a bound checks an identity.
ROUND_OFF = 1e-9
#: How a case's share of the room is read (see the module docstring).
BASES: tuple[str, ...] = ("bound", "interval", "fit", "exponent margin", "round-off", "count")


@dataclasses.dataclass(frozen=True)
class Slack:
    """A claim's slack: the tightest case's share of the allowed room (``use``) and how it is
    read (``basis``), or, for a one-sided exponent, its additive ``margin``."""

    basis: str
    case: str
    use: float | None = None
    margin: float | None = None

    @property
    def factor(self) -> float | None:
        """How many times the bound could shrink before the tightest case failed (infinite
        when no case uses any of the room); ``None`` for a margin."""
        if self.use is None:
            return None
        return math.inf if self.use <= 0 else 1.0 / self.use

    @property
    def loose(self) -> bool:
        """A bound a paper states that leaves more than :data:`LOOSE_FACTOR` times the room."""
        factor = self.factor
        return self.basis == "bound" and factor is not None and factor > LOOSE_FACTOR

    @property
    def short(self) -> str:
        """A table cell: ``"930x (bound), loose"``, ``"margin 0.05 (exponent margin)"``."""
        factor = self.factor
        if factor is None:
            return (
                f"margin {self.margin:.2g} ({self.basis})"
                if self.margin is not None
                else f"- ({self.basis})"
            )
        shown = "unbounded" if math.isinf(factor) else f"{factor:.3g}x"
        return f"{shown} ({self.basis})" + (", loose" if self.loose else "")

    @property
    def text(self) -> str:
        """``"13x (bound: largest measured/bound 0.075, on p.a)"`` and the like."""
        if self.use is None:
            return (
                f"margin {self.margin:.3g} ({self.basis}, on {self.case})"
                if self.margin is not None
                else f"no ratio ({self.basis})"
            )
        factor = self.factor
        shown = "unbounded" if factor is None or math.isinf(factor) else f"{factor:.3g}x"
        return f"{shown} ({self.basis}: largest share of the room {self.use:.3g}, on {self.case})"


def _finite(*values: Any) -> bool:
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values
    )


def _decision_use(d: Mapping[str, Any]) -> tuple[float, str] | None:
    """A statistical test's share of its allowed region (module docstring)."""
    e, low, high = d.get("estimate"), d.get("low"), d.get("high")
    lo, hi = d.get("region_low"), d.get("region_high")
    if (
        not _finite(e, low, high)
        or not isinstance(lo, (int, float))
        or not isinstance(hi, (int, float))
    ):
        return None
    e, low, high = float(e), float(low), float(high)  # type: ignore[arg-type]
    if lo == -math.inf and _finite(hi) and hi > 0 and low >= 0:
        return max(high, 0.0) / hi, "bound"
    if hi == math.inf and _finite(lo) and lo > 0 and low > 0:
        return lo / low, "bound"
    sides = []
    if _finite(hi) and hi > e:
        sides.append((high - e) / (hi - e))
    if _finite(lo) and lo < e:
        sides.append((e - low) / (e - lo))
    return (max(sides), "interval") if sides else None


def case_use(case: Mapping[str, Any], kind: str) -> tuple[float | None, float | None, str] | None:
    """``(use, margin, basis)`` of one recorded case of a claim of kind ``kind`` (the module
    docstring); ``None`` when the case holds no comparison that can be read."""
    decisions = case.get("decisions") or []
    if decisions:
        found = [
            u
            for d in decisions
            if isinstance(d, Mapping)
            for u in (_decision_use(d),)
            if u is not None
        ]
        if found:
            use, basis = max(found)
            return use, None, basis
    relation = str(case.get("relation") or "")
    measured, bound = case.get("measured"), case.get("bound")
    fit = case.get("fit")
    if isinstance(fit, Mapping) and _finite(
        fit.get("estimate"), fit.get("theory"), fit.get("tolerance")
    ):
        if "|" in relation:
            tolerance = float(fit["tolerance"])
            gap = abs(float(fit["estimate"]) - float(fit["theory"]))
            return (gap / tolerance if tolerance > 0 else 1.0), None, "fit"
        if _finite(measured, bound):
            return None, float(bound) - float(measured), "exponent margin"  # type: ignore[arg-type]
        return None
    if not _finite(measured, bound):
        return None
    measured, bound = float(measured), float(bound)  # type: ignore[arg-type]
    if "==" in relation:
        return 1.0, None, "count"
    if "(LHS - RHS) / RHS" in relation:  # the relative excess of a bound: LHS / RHS = 1 + it
        return max(1.0 + measured, 0.0), None, "bound"
    if kind == "exact_identity":
        return (max(measured, 0.0) / bound, None, "round-off") if bound > 0 else None
    if ">=" in relation and "<=" not in relation:
        return (bound / measured, None, "bound") if measured > 0 and bound > 0 else None
    if measured >= bound:  # at the bound, or above it by the round-off the check allows
        return 1.0, None, "bound"
    if bound <= ROUND_OFF:  # a tolerance at float64 round-off, not a paper's constant
        return (max(measured, 0.0) / bound, None, "round-off") if bound > 0 else None
    return max(measured, 0.0) / bound, None, "bound"


def claim_slack(record: Mapping[str, Any]) -> Slack | None:
    """The slack of a claim that holds (or holds once corrected), from its recorded cases: the
    case that uses the largest share of its room; with no share to read, the smallest margin;
    ``None`` for a claim that does not hold or records no readable case."""
    if record.get("verdict") not in ("holds", "holds once corrected"):
        return None
    kind = str(record.get("kind") or "")
    best: Slack | None = None
    for case in record.get("cases") or []:
        if not isinstance(case, Mapping) or case.get("outcome", "holds") != "holds":
            continue
        found = case_use(case, kind)
        if found is None:
            continue
        use, margin, basis = found
        slack = Slack(basis, str(case.get("problem_id")), use, margin)
        if best is None or _tighter(slack, best):
            best = slack
    return best


def _tighter(new: Slack, old: Slack) -> bool:
    if new.use is not None and old.use is not None:
        return new.use > old.use
    if new.use is None and old.use is None:
        return (new.margin or math.inf) < (old.margin or math.inf)
    return new.use is not None  # a share beats a margin


def companion_problem(record: Mapping[str, Any], known: Collection[str]) -> str | None:
    """Why a claim's record breaks the slack rule, or ``None``: a loose claim (slack above
    :data:`LOOSE_FACTOR` on a bound) that names no companion in ``power_from``, or any claim
    naming a companion that is not among ``known`` (the registered claim ids)."""
    companions = [str(c) for c in record.get("power_from") or []]
    unknown = [c for c in companions if c not in known]
    if unknown:
        return f"{record.get('id')}: power_from names {unknown[0]}, not a registered claim"
    slack = claim_slack(record)
    if slack is not None and slack.loose and not companions:
        return (
            f"{record.get('id')}: slack {slack.text} exceeds {LOOSE_FACTOR:g}x and no "
            "companion claim is named (power_from)"
        )
    return None


def mutation_kills(results_dir: Path) -> dict[str, list[str]] | None:
    """``{claim id: [mutants it killed]}`` from ``mutation/summary.json`` (``testbed mutate``);
    ``None`` when no mutation record is there or it cannot be read as one."""
    path = Path(results_dir) / MUTATION / SUMMARY
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("mutants"), list):
        return None
    kills: dict[str, list[str]] = {}
    for row in data["mutants"]:
        if not isinstance(row, dict) or row.get("status") != "killed":
            continue
        for killer in row.get("killed_by") or []:
            claim = str(killer).removesuffix(" (error)")
            kills.setdefault(claim, []).append(str(row.get("mutant")))
    return kills


def kill_set_text(record: Mapping[str, Any], kills: Mapping[str, Sequence[str]] | None) -> str:
    """The claim's own perturbation (caught or missed) and the mutants recorded as killed by it
    ("no mutant run" without mutation records)."""
    power = record.get("power")
    if isinstance(power, Mapping):
        own = (
            f"its perturbation {'caught' if power.get('caught') is True else 'MISSED'} "
            f"({power.get('name', '?')})"
        )
    elif record.get("verdict") == "fails as stated":
        own = "no perturbation (a refutation has a positive control instead)"
    else:  # a run on an enrolled variant: the perturbation runs on the claim's own estimator
        own = "no perturbation run on this estimator"
    if kills is None:
        mutants = "no mutant run"
    else:
        killed = list(kills.get(str(record.get("claim") or record.get("id")), []))
        mutants = (
            f"{len(killed)} mutant(s) killed first by it: {', '.join(killed)}"
            if killed
            else "no mutant killed first by it"
        )
    return f"{own}; {mutants}"


def evidence_text(record: Mapping[str, Any], kills: Mapping[str, Sequence[str]] | None) -> str:
    """Slack, loose-or-not with the companions, and kill set, in one line."""
    slack = claim_slack(record)
    if slack is None:
        return f"kill set: {kill_set_text(record, kills)}"
    companions = [str(c) for c in record.get("power_from") or []]
    loose = ""
    if slack.loose:
        loose = f"; loose (more than {LOOSE_FACTOR:g}x): its power comes from " + (
            ", ".join(companions) if companions else "NO companion named"
        )
    return f"slack {slack.text}{loose}; kill set: {kill_set_text(record, kills)}"


__all__ = [
    "BASES",
    "LOOSE_FACTOR",
    "ROUND_OFF",
    "Slack",
    "case_use",
    "claim_slack",
    "companion_problem",
    "evidence_text",
    "kill_set_text",
    "mutation_kills",
]
