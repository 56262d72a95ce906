"""``testbed list``: the problems, estimators (plugins' included, and the plugins left out, with
their reasons) and claims with their references; ``--verbose`` adds parameters, defaults and the
experiment configs' keys; ``--claim`` describes claims with the evidence of a results folder."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from problems import PROBLEM_DB
from problems.workloads.data import DATASETS
from problems.workloads.splits import SCHEMES
from problems.workloads.splits import split_clients
from results_format.claim_file import read_claim_file
from results_format.evidence import evidence_text
from results_format.evidence import mutation_kills
from results_format.layout import CLAIMS
from results_format.populations import POPULATIONS
from results_format.populations import counted
from results_format.populations import population as population_of
from results_format.verdicts import refutation_class
from testbed import plugins
from testbed.registry import ESTIMATOR_DB
from testbed_app.command_inputs import named_claims
from testbed_app.experiments import schema
from testbed_app.experiments.config import workload_defaults
from testbed_app.experiments.registry import EXPERIMENT_BUILDERS
from testbed_app.experiments.registry import workload_options
from theory_checks.claim import Claim
from theory_checks.registry import BUILT_IN
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import claim_plugin_problems
from theory_checks.registry import defined_in
from theory_checks.registry import run_origin
from theory_checks.runner import claim_runs


def _parameters(function: object) -> str:
    """``name=default, ...`` of a callable's parameters (``name`` alone when required)."""
    try:
        signature = inspect.signature(function)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(parameters not introspectable)"
    parts = [
        name if p.default is inspect.Parameter.empty else f"{name}={p.default!r}"
        for name, p in signature.parameters.items()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return ", ".join(parts) if parts else "(no parameters)"


def list_command(args: argparse.Namespace) -> int:
    """``testbed list``: problems, estimators and claims with their references (``--verbose``:
    parameters, defaults and the experiment configs' keys); 0."""
    verbose = getattr(args, "verbose", False)
    if getattr(args, "claim", None):
        results = Path(getattr(args, "results", None) or "results")
        kills = mutation_kills(results)
        for claim in named_claims(args.claim):
            print(f"{claim.id}  ({claim.kind}; {claim.reference})")
            _describe_claim(claim)
            print(f"      {evidence_line(claim, results, kills)}")
        return 0
    print("Problems:")
    for p in PROBLEM_DB:
        print(f"  {p.name:28s} {p.kind:14s} {p.reference}")
        if verbose:
            print(f"      parameters: {_parameters(p.build)}")
    print("\nEstimators:")
    for e in ESTIMATOR_DB:
        kinds = ",".join(sorted(e.supports))
        print(f"  {e.name:28s} {e.paper:10s} {e.reference}  [{kinds}]")
        if verbose:
            params = ", ".join(f"{k}={v!r}" for k, v in e.defaults.items()) or "(none)"
            print(f"      role: {e.role}; parameters (defaults): {params}")
    _print_plugin_problems()
    _list_claims(verbose)
    if verbose:
        _list_workloads()
    return 0


def _list_claims(verbose: bool) -> None:
    """The claims of the papers, the comparisons and the runs on enrolled variants, each under
    a heading with its count (:mod:`results_format.populations`: the vocabulary of ``check``
    and the report); a plugin's claims and runs under a heading of their own."""
    listed: dict[str, list[tuple[str, Claim]]] = {population: [] for population in POPULATIONS}
    outside = []
    for claim, estimator in claim_runs(CLAIM_DB):
        run_id = claim.id if estimator == claim.estimators[0] else f"{claim.id}@{estimator}"
        if run_origin(claim, estimator) == BUILT_IN:
            listed[population_of(run_id)].append((run_id, claim))
        else:
            outside.append((run_id, claim, run_origin(claim, estimator)))
    for population, members in listed.items():
        if not members:
            continue
        print(f"\n{counted(len(members), population)}:")
        for run_id, claim in members:
            print(f"  {run_id:40s} {claim.kind:18s} {claim.about:21s} {claim.reference}")
            if verbose and "@" not in run_id:
                _describe_claim(claim)
    if outside:
        print(f"\n{len(outside)} runs of estimators or claims from outside the testbed:")
        for run_id, claim, origin in outside:
            print(f"  {run_id:40s} {claim.kind:18s} {claim.about:21s} {origin}")


def _describe_claim(c: Claim) -> None:
    """The claim's statement, where it is defined, estimators, decision, perturbation and
    control (``testbed list --verbose`` and ``--claim``)."""
    print(f"      {c.statement}")
    print(f"      defined in: {defined_in(c)}")
    print(f"      estimators: {', '.join(c.estimators)}; expected: {c.expected}")
    refuted = refutation_class(c.about)
    print(
        f"      checks: a {c.about} (refuted, it counts as {'an' if refuted[0] in 'ae' else 'a'}"
        f" {refuted})" + (f"; serves {c.serves}" if c.serves else "")
    )
    if c.power_from:
        print(f"      companions that give its bound power: {', '.join(c.power_from)}")
    decision = (
        f"statistical at false-failure rate {c.false_fail_rate:g}"
        if c.statistical
        else "deterministic"
    )
    print(
        f"      decision: {decision}"
        + (f"; undecided by design on: {', '.join(c.undecided_on)}" if c.undecided_on else "")
    )
    for r in c.readings:
        outcome = (
            f"expected: {'fails as stated' if r.expected == 'fails' else 'holds'}"
            if r.expected
            else "checked"
        )
        print(f'      reading "{r.name}" ({outcome}): {r.statement}')
    for p in c.added_parameters:
        print(
            f"      added by the testbed: {p.name} ({p.statement}); the claim's cases use "
            f"{', '.join(map(str, p.checked))}; each run also measures it at "
            f"{', '.join(map(str, p.values))}"
        )
    if c.perturbation is not None:
        print(f"      perturbation it must catch: {c.perturbation.name}")
    if c.positive_control is not None:
        print("      positive control: a case inside its conditions where it holds")


def evidence_line(claim: Claim, results: Path, kills: dict[str, list[str]] | None) -> str:
    """What the claim's trusted results file under ``results`` shows of its "holds": verdict,
    slack, companions and kill set (:mod:`results_format.evidence`); without a trusted file,
    the command that measures it."""
    path = results / CLAIMS / f"{claim.id}.json"
    record, reason = read_claim_file(path, results) if path.is_file() else (None, None)
    if record is None:
        why = f"its results file is {reason}" if reason else f"no results file in {results}"
        return (
            f"evidence: {why}; `testbed check --claim {claim.id} --results {results}` measures it"
        )
    return (
        f"evidence ({record['profile']} profile, {record['verdict']}): "
        f"{evidence_text(record, kills)}"
    )


def _print_plugin_problems() -> None:
    """The plugins left out, on stderr (the built-ins are listed regardless)."""
    for problem in plugins.problems() + claim_plugin_problems():
        print(f"testbed: warning: {problem}", file=sys.stderr)


def _list_workloads() -> None:
    """``testbed run``'s config vocabulary: datasets, split schemes, workload kinds, limits."""
    print("\nExperiment configs (testbed run):")
    print(
        f"  [data] dataset: {', '.join(sorted(DATASETS))}; defaults: "
        + ", ".join(f"{k}={v.default!r}" for k, v in schema.DATA_KEYS.items())
    )
    print(f"  [split] scheme: {', '.join(SCHEMES)}; parameters: {_parameters(split_clients)}")
    print(
        "  [run] defaults: "
        + ", ".join(
            f"{k}={'(required)' if v.default is schema.REQUIRED else repr(v.default)}"
            for k, v in schema.RUN_KEYS.items()
        )
    )
    print(
        f"  limits: steps <= {schema.MAX_STEPS:,}, step sizes <= {schema.MAX_STEP_SIZE:g}, "
        f"iterations per step <= {schema.MAX_ITERATIONS:,}"
    )
    for kind in EXPERIMENT_BUILDERS:
        defaults = workload_defaults(kind)
        options = (
            ", ".join(
                f"{name}={defaults[name]!r}" if name in defaults else name
                for name in sorted(workload_options(kind))
            )
            or "(none)"
        )
        print(f"  [workload] kind = {kind!r}: options {options}")


__all__ = ["evidence_line", "list_command"]
