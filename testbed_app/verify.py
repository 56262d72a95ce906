"""``testbed verify TARGET``: check one estimator, built in or from a researcher's own package,
against every claim it declares, and optionally against the estimator it improves.

The target is a registry name (a built-in, or a plugin's entry name) or ``module:object`` naming
an :class:`~testbed.EstimatorInfo` that need not be installed as a plugin. Its claims are those
that name it and those its entry enrolls in (:func:`theory_checks.registry.claims_of`); each is
decided by the same runner as ``testbed check`` (deterministic claims to round-off, statistical
ones at their stated false-failure rate), so a verdict of ``verify`` means what a verdict of
``check`` means.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.verdicts import readings_text
from testbed import plugins
from testbed.info import EstimatorInfo
from testbed.names import did_you_mean
from testbed.names import shown
from testbed.registry import ESTIMATOR_DB
from theory_checks.claim_batch import run_claim_runs
from theory_checks.profiles import Profile
from theory_checks.registry import claims_of
from theory_checks.registry import get_claim
from theory_checks.runner import claim_runs


class VerifyError(ValueError):
    """A target that cannot be verified, with the reason."""


def resolve_target(target: str | EstimatorInfo) -> EstimatorInfo:
    """The registry entry ``target`` names, registering a ``module:object`` entry (checked like
    a plugin's) for this process when it is not registered yet."""

    registered = {info.name: info for info in ESTIMATOR_DB}
    if isinstance(target, EstimatorInfo):
        info = target
    elif target in registered:
        return registered[target]
    elif ":" in target:
        module_name, _, attribute = target.partition(":")
        with plugins.user_interrupts() as pressed:
            try:
                info = getattr(importlib.import_module(module_name), attribute)
            except plugins.PLUGIN_FAILURES as error:  # its import runs the user's code
                plugins.reraise_user_interrupt(pressed, error)  # a Ctrl-C: exit 130
                raise VerifyError(
                    f"cannot load {target!r}: {_failure(module_name, error)}"
                ) from None
    else:
        # a plugin's entry point names its entries or is the prefix of their names
        # ("torchopt" for "torchopt-implicit-cg")
        missing = plugins.left_out(target)
        hint = f"; {missing}" if missing else ""
        raise VerifyError(
            f"no estimator named {shown(target)}{did_you_mean(target, registered)}; "
            f"`testbed list` shows every registered estimator{hint}"
        )
    if registered.get(str(getattr(info, "name", ""))) is info:
        return info
    try:
        plugins.check_entry(info, getattr(info, "role", "estimator"), registered)
    except plugins.PluginError as error:
        raise VerifyError(f"{target!r} cannot be verified: {error}") from error
    ESTIMATOR_DB.append(info)
    ESTIMATOR_DB.sort(key=lambda entry: entry.name)
    return info


def _failure(module: str, error: BaseException) -> str:
    """One line on why importing a target's module failed."""
    if isinstance(error, SystemExit):
        return f"module {module!r} called sys.exit({error.code!r}) when imported"
    if isinstance(error, KeyboardInterrupt):
        return f"module {module!r} raised KeyboardInterrupt when imported"
    if isinstance(error, SyntaxError):
        return (
            f"module {module!r} has a syntax error: {error.msg} ({error.filename}, line "
            f"{error.lineno})"
        )
    if isinstance(error, (ImportError, AttributeError)):
        return f"{type(error).__name__}: {error}"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"module {module!r} raised {type(error).__name__} when imported: {text}"


def target_runs(name: str, claim_ids: Sequence[str] | None = None) -> list[Any]:
    """``(claim, estimator)`` runs that check ``name``: its own claims on it, the claims it is
    enrolled in on it, and claims that name it beside another estimator (comparisons) as the
    claim runs them."""

    claims = [get_claim(c) for c in claim_ids] if claim_ids else list(claims_of(name))
    if not claims:
        raise VerifyError(
            f"{name!r} declares no claim: name it in a claim's estimators or list "
            "claims in its entry's enrolled_claims"
        )
    runs = [
        (c, e)
        for c, e in claim_runs(claims)
        if e == name or (name in c.estimators and e == c.estimators[0])
    ]
    foreign = [c.id for c in claims if not any(run[0] is c for run in runs)]
    if foreign:
        raise VerifyError(f"{name!r} is neither named by nor enrolled in: {', '.join(foreign)}")
    return runs


def verify(
    target: str | EstimatorInfo,
    results: Path,
    profile: Profile,
    claim_ids: Sequence[str] | None = None,
    resume: bool = True,
    progress: bool = True,
) -> tuple[EstimatorInfo, list[dict[str, Any]]]:
    """Run the target's claims into ``results`` (resuming); its entry and the run summaries."""

    info = resolve_target(target)
    runs = target_runs(info.name, claim_ids)
    # the results are about the target: its report lists no other claim
    return info, run_claim_runs(runs, results, profile, resume, progress, only_these=True)


def failures(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """Runs whose verdict is not the expected one (an "undecided" included: the budget did not
    establish the claim), with the verdict."""
    return [
        f"{s['id']}: {s['verdict']} (expected {s['expected']})"
        + (f"; readings: {readings_text(s['readings'])}" if s.get("readings") else "")
        for s in summaries
        if not s["as_expected"]
    ]


def verdict_table(summaries: Sequence[dict[str, Any]]) -> str:
    width = max([len(s["id"]) for s in summaries] + [5])
    lines = [
        f"{'claim':{width}s}  {'verdict':22s} {'expected':9s} cases  as expected",
        "-" * (width + 50),
    ]
    for s in summaries:
        lines.append(
            f"{s['id']:{width}s}  {s['verdict']:22s} {s['expected']:9s} "
            f"{s['n_cases']:5d}  {'yes' if s['as_expected'] else 'NO'}"
        )
        if s.get("readings"):  # the verdict under each reading, by name
            lines.append(f"{'':{width}s}  readings: {readings_text(s['readings'])}")
    return "\n".join(lines)


__all__ = ["VerifyError", "failures", "resolve_target", "target_runs", "verdict_table", "verify"]
