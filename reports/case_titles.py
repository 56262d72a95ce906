"""Human-readable names of a claim's cases: the problem's description, not its id.

A case's problem id (``quad.bilevel.m6.dx3.dy3.k2.36358.hh0.105375...``) is exact but unreadable
above a figure panel. Each case in a claim's JSON carries the ``spec`` that rebuilt its problem
(the family and its parameters) and the ``params`` of the measurement; :func:`case_title` turns
them into a short description ("Quadratic bilevel: 6 clients, dim x 3, dim y 3, kappa 2.36"),
and :func:`case_specs` finds the spec of each problem id that a claim's series mention.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from results_format.claim_record import ClaimRecord

# spec / params key -> the words shown (unknown keys: underscores become spaces)
KEY_LABELS = {
    "n_clients": "clients",
    "dim_x": "d_x",
    "dim_y": "d_y",
    "dim_hyper": "d_hyper",
    "condition_number": "κ",
    "hessian_heterogeneity": "Hessian het.",
    "gradient_heterogeneity": "gradient het.",
    "jacobian_heterogeneity": "Jacobian het.",
    "value_heterogeneity": "value het.",
    "target_heterogeneity": "target het.",
    "neumann_terms": "Neumann terms",
    "pushsum_steps": "Push-Sum steps",
    "n_samples": "samples",
}
# shown first, in this order; then the other keys alphabetically
LEADING_KEYS = ("n_clients", "dim", "dims", "dim_x", "dim_y", "dim_hyper", "condition_number")
# never shown: the family (it leads the title) and seeds (the problem id keeps them)
HIDDEN_KEYS = ("family",)


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    if abs(value) < 1e-3 or abs(value) >= 1e6:
        return f"{value:.2g}"
    return f"{value:.3g}"


def format_value(value: Any) -> str:
    """A parameter value, short: 3 significant figures, lists and strings as they are."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        x = float(value)
        return _number(x) if math.isfinite(x) else str(x)
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(format_value(v) for v in value) + ")"
    return str(value)


def family_name(family: str) -> str:
    """``QuadraticBilevel.random`` -> ``Quadratic bilevel``; other constructors stay named."""
    cls, _, constructor = family.partition(".")
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", cls).split()
    name = " ".join([words[0]] + [w.lower() for w in words[1:]]) if words else family
    if constructor and constructor != "random":
        name += f" ({constructor.replace('_', ' ')})"
    return name


#: heterogeneity and noise levels the strategies draw as subnormal numbers (1e-308) are zero
#: for every purpose a reader has; shown as "~0"
NEGLIGIBLE = 1e-12
QUIET_KEYS = ("noise", "heterogeneity", "n_samples", "coupling", "offset")


def _shown(key: str, value: Any) -> bool:
    if key in HIDDEN_KEYS or "seed" in key or value is None:
        return False
    # zero noise, heterogeneity and sample counts are the families' defaults: left out
    return not (
        any(q in key for q in QUIET_KEYS)
        and isinstance(value, (int, float))
        and float(value) == 0.0
    )


def _items(mapping: Mapping[str, Any]) -> list[str]:
    keys = [k for k in LEADING_KEYS if k in mapping]
    keys += sorted(k for k in mapping if k not in LEADING_KEYS)
    out = []
    for key in keys:
        value = mapping[key]
        if not _shown(key, value):
            continue
        if key == "n_clients":
            out.append(f"{format_value(value)} client{'' if value == 1 else 's'}")
        elif key == "n_samples":
            out.append(f"{format_value(value)} samples")
        elif (
            any(q in key for q in QUIET_KEYS)
            and isinstance(value, (int, float))
            and abs(float(value)) < NEGLIGIBLE
        ):
            out.append(f"{KEY_LABELS.get(key, key.replace('_', ' '))} ~0")
        else:
            out.append(f"{KEY_LABELS.get(key, key.replace('_', ' '))} {format_value(value)}")
    return out


def case_title(
    problem_id: str, spec: Mapping[str, Any] | None, params: Mapping[str, Any] | None = None
) -> str:
    """The case in words; the problem id itself when no spec is recorded."""
    if not isinstance(spec, Mapping) or not spec.get("family"):
        return problem_id
    parts = _items({k: v for k, v in spec.items() if k != "family"})
    if isinstance(params, Mapping):
        parts += _items(params)
    return family_name(str(spec["family"])) + (": " + ", ".join(parts) if parts else "")


def case_specs(claim: ClaimRecord) -> dict[str, Mapping[str, Any]]:
    """problem id -> spec, from the claim's cases and its positive control."""
    specs: dict[str, Mapping[str, Any]] = {}
    control = claim.positive_control
    candidates = list(claim.cases)
    if control is not None and control.case is not None:
        candidates.append(control.case)
    for case in candidates:
        if isinstance(case.spec, Mapping):
            specs.setdefault(case.problem_id, case.spec)
    return specs
