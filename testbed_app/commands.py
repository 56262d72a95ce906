"""What each ``testbed`` command does, once :mod:`testbed_app.cli` has parsed its arguments.

The command line (:mod:`testbed_app.cli`) builds the parser and turns errors into one line; it
imports this module only after parsing, so that ``testbed --help`` and a bad option answer
without importing torch. :func:`execute` sets the precision policy and the device, then runs the
command's handler in :data:`HANDLERS`, each a function ``(args) -> exit status``.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from problems import PROBLEM_DB
from problems.workloads.data import DATASETS
from problems.workloads.splits import SCHEMES, split_clients
from reports.build import build_report
from results_format.claim_file import read_claim_file
from results_format.evidence import evidence_text, mutation_kills
from results_format.layout import CALIBRATION, CLAIMS, REPORT
from results_format.paths import output_folder
from results_format.populations import POPULATIONS, counted
from results_format.populations import population as population_of
from results_format.verdicts import (
    ERRATUM,
    SUBSTANTIVE,
    TABLE_NUMBER,
    added_parameters_text,
    readings_text,
    refutation_class,
    refutation_counts,
)
from testbed import plugins
from testbed.devices import use_device
from testbed.precision import set_precision
from testbed.progress import Progress
from testbed.registry import ESTIMATOR_DB
from testbed_app import audit, communication, mutate, regression
from testbed_app import verify as verifying
from testbed_app.executors import Executor, make_executor
from testbed_app.experiments import schema
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.config import load_config, workload_defaults
from testbed_app.experiments.errors import DeprecatedName
from testbed_app.experiments.registry import EXPERIMENT_BUILDERS, workload_options
from testbed_app.experiments.run_folders import check_run_folders
from testbed_app.experiments.segments import SegmentResult, iter_experiments, run_experiments
from testbed_app.flower import command as deploy
from testbed_app.report_command import report_command
from testbed_app.threads import claim_threads, use_threads, workload_threads
from theory_checks.calibration import calibrate, check_seeds, format_table
from theory_checks.claim import VERDICTS, Claim
from theory_checks.comparison import table as comparison_table
from theory_checks.registry import (
    BUILT_IN,
    CLAIM_DB,
    claim_plugin_problems,
    defined_in,
    get_claim,
    run_origin,
)
from theory_checks.runner import claim_runs, get_profile, run_claims


def execute(args: argparse.Namespace) -> int:
    """Run the parsed command ``args.command``; its exit status.

    Every command that computes (all but ``list`` and ``report``, which set ``computes=False``)
    runs under the precision policy of :mod:`testbed.precision`: TF32 off unless ``--tf32``
    (or, for ``run``, a config's ``[run] tf32``) asks for it; ``--device`` chooses where the
    claims compute (:mod:`testbed.devices`)."""
    if getattr(args, "computes", True):
        set_precision(bool(getattr(args, "tf32", False)))
    if getattr(args, "compute_device", None):
        if getattr(args, "executor", "local") != "local" and args.compute_device != "cpu":
            raise ValueError(
                "--device cuda runs on this machine's GPU: use it with the "
                "local executor (--jobs N), not --executor ray"
            )
        use_device(args.compute_device)
    return int(HANDLERS[args.command](args))


def _error_text(error: BaseException) -> str:
    # a KeyError's str() is the repr of its key ("'as_expected'"); show its text instead
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)


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
        for claim in _named_claims(args.claim):
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


def check_command(args: argparse.Namespace) -> int:
    """``testbed check``: run the claims, write results, print each verdict; the exit status of
    :func:`_exit_status`."""
    torch.set_default_dtype(torch.float64)
    claims = _named_claims(args.claim)
    profile = get_profile(args.profile)
    _folder(args.results, "--results")  # a file or a link loop: one line, before any work
    # a claim file that cannot be believed is named in one line and rerun (run_claims)
    threads = use_threads(claim_threads(args.threads))
    with _executor(args, threads) as executor:  # one Ray instance for the claims and tables
        summaries = run_claims(
            claims,
            Path(args.results),
            profile,
            resume=not args.fresh,
            progress=not args.quiet,
            execute=executor.run,
        )
        _print_verdicts(summaries, args, profile.name)
        if not args.claim and not args.claims_only:
            _measure_report_tables(Path(args.results), not args.fresh, not args.quiet, executor)
    return _exit_status(summaries)


def _named_claims(ids: list[str] | None) -> list[Any]:
    """The claims ``--claim`` names (each once, in the order given), every registered claim
    without it; every unknown id in one line, each with its "did you mean"."""
    if not ids:
        return list(CLAIM_DB)
    claims, unknown = [], []
    for claim_id in dict.fromkeys(ids):
        try:
            claims.append(get_claim(claim_id))
        except KeyError as error:
            unknown.append(_error_text(error).removesuffix("; `testbed list` shows every claim"))
    if unknown:
        raise KeyError("; ".join(unknown) + "; `testbed list` shows every claim")
    return claims


def _print_verdicts(summaries: list[dict], args: argparse.Namespace, profile: str) -> None:
    """The verdict table ``testbed check`` prints."""
    width = max(len(s["id"]) for s in summaries)
    print(f"\n{'claim':{width}s}  {'verdict':22s} cases  expected  power  control")
    for s in summaries:
        mark = "yes" if s["as_expected"] else "NO"
        power = s.get("power") or {}
        control = s.get("positive_control") or {}
        caught = "-" if not power else ("caught" if power.get("caught") else "MISSED")
        held = "-" if not control else ("holds" if control.get("holds") else "FAILS")
        refutes = f"  ({refutation_class(s['about'])})" if s["verdict"] == "fails as stated" else ""
        print(
            f"{s['id']:{width}s}  {s['verdict']:22s} {s['n_cases']:5d}  {mark:8s}  "
            f"{caught:6s} {held}{refutes}"
        )
        if s.get("readings"):  # the verdict under each reading, by name
            print(f"{'':{width}s}  readings: {readings_text(s['readings'])}")
        if s.get("added_parameters"):  # how the verdict depends on what the testbed adds
            print(
                f"{'':{width}s}  added by the testbed: "
                f"{added_parameters_text(s['added_parameters'])}"
            )
        if s["counterexample"]:
            print(f"{'':{width}s}  counterexample: {Path(args.results) / s['counterexample']}")
            if not s["n_cases"]:  # "cases 0" beside a refutation: say what decided it
                print(f"{'':{width}s}  {_decided_by(s)}")
    # the claims of the papers, the comparisons and the runs on enrolled variants, counted
    # apart (results_format.populations: the report and `testbed list` count them so too)
    own = [s for s in summaries if s.get("origin", "built-in") == "built-in"]
    groups = {
        population: [s for s in own if population_of(s["id"]) == population]
        for population in POPULATIONS
    }
    checked = "; ".join(
        f"{counted(len(group), population)} ({_counts(group)})"
        for population, group in groups.items()
        if group
    )
    print(
        f"\nChecked on the {profile} profile: {checked or 'nothing of the testbed'}; "
        f"results in {args.results}"
    )
    claims = [s for s in own if population_of(s["id"]) == POPULATIONS[0]]
    if any(s["verdict"] == "fails as stated" for s in claims):
        print(f"of those failing as stated: {refutations_line(claims)}")
    outside = [s for s in summaries if s.get("origin", "built-in") != "built-in"]
    if outside:  # plugins', integrations': never in the papers' counts
        origins = ", ".join(sorted({str(s["origin"]) for s in outside}))
        print(
            f"{len(outside)} runs of estimators or claims from outside the testbed "
            f"({origins}): {_counts(outside)}"
        )


def _decided_by(summary: dict) -> str:
    """What decided a refutation no case held before: the claim's saved counterexample, which
    is replayed before any drawn case, or its first drawn case (the check stops at the first
    failure)."""
    claim = next((c for c in CLAIM_DB if c.id == summary.get("claim", summary["id"])), None)
    if claim is not None and claim.examples:
        return (
            "decided by its saved counterexample, replayed before any drawn case (the "
            "check stops at the first failure)"
        )
    return "decided by the first case drawn, which failed (the check stops at the first failure)"


def _executor(args: argparse.Namespace, threads: int) -> Executor:
    """The executor ``--executor``, ``--jobs``, ``--address`` ... name
    (:mod:`testbed_app.executors`), its local workers with ``threads`` torch threads each."""
    if args.executor == "ray" and args.threads is not None:
        raise ValueError(
            "--threads is for --executor local: a Ray task's torch threads are its --cpus-per-task"
        )
    return make_executor(
        args.executor,
        args.jobs,
        args.address,
        args.cpus_per_task,
        args.max_retries,
        threads=threads,
    )


def _folder(path: str, option: str) -> Path:
    """``--results`` / ``--out``: a folder or absent (:func:`results_format.paths.output_folder`;
    a file or a link loop is one line, exit 2)."""
    return output_folder(Path(path), option)


def _counts(summaries: list[dict]) -> str:
    counts = {v: sum(1 for s in summaries if s["verdict"] == v) for v in VERDICTS}
    return ", ".join(f"{n} {v}" for v, n in counts.items())


def refutations_line(summaries: list[dict]) -> str:
    """The "fails as stated" verdicts by what the claims check: substantive refutations of
    stated results apart from errata (proof steps, printed formulas, informal sentences) and
    from experiment table numbers (:func:`results_format.verdicts.refutation_class`)."""
    counts = refutation_counts(summaries)
    return (
        f"{counts[SUBSTANTIVE]} substantive refutation(s) of a stated result, "
        f"{counts[ERRATUM]} erratum/errata (a proof step, printed formula or informal "
        f"sentence), {counts[TABLE_NUMBER]} experiment table number(s)"
    )


def _exit_status(summaries: list[dict]) -> int:
    """0: every verdict as expected and every power run and positive control as required;
    1: a decided verdict differs from the expected one, a perturbation was missed or a positive
    control failed; 3: the only departures are "undecided" verdicts where a decision was
    expected (the budget did not decide: rerun with --profile thorough)."""
    wrong = [s for s in summaries if not s["as_expected"] and s["verdict"] != "undecided"]
    missed = [s for s in summaries if (s.get("power") or {}).get("caught") is False]
    control = [s for s in summaries if (s.get("positive_control") or {}).get("holds") is False]
    undecided = [s for s in summaries if not s["as_expected"] and s["verdict"] == "undecided"]
    for label, group in (
        ("verdict(s) differ from what the testbed expects", wrong),
        ("perturbation(s) not caught", missed),
        ("positive control(s) not holding", control),
        ("claim(s) undecided where the profile should decide", undecided),
    ):
        if group:
            print(f"{len(group)} {label}: {', '.join(s['id'] for s in group)}", file=sys.stderr)
    if wrong or missed or control:
        return 1
    return 3 if undecided else 0


def calibrate_command(args: argparse.Namespace) -> int:
    """``testbed calibrate``: observed false-failure rates of the statistical claims over
    ``--seeds``; 0 when each is consistent with its stated rate, else 1."""
    torch.set_default_dtype(torch.float64)
    claims = _named_claims(args.claim)
    deterministic = [c.id for c in claims if not c.statistical]
    if args.claim and deterministic:
        raise ValueError(
            f"deterministic claim(s) have nothing to calibrate: {', '.join(deterministic)}"
        )
    statistical = [c for c in claims if c.statistical]
    check_seeds(args.seeds)  # at most calibration.MAX_SEEDS, named
    executor = _executor(args, use_threads(claim_threads(args.threads)))  # before the bar
    bar = Progress(
        total=len(statistical) * args.seeds, desc="calibrate", unit="run", enabled=not args.quiet
    )

    def progress(message: str) -> None:
        bar.set_postfix_str(f"last done: {message}", refresh=False)
        bar.update(1)

    summaries = calibrate(
        statistical,
        args.seeds,
        get_profile(args.profile),
        _folder(args.results, "--results"),
        progress,
        execute=executor.run,
    )
    bar.close()
    print(format_table(summaries))
    print(f"\nresults in {Path(args.results) / CALIBRATION}")
    return 0 if all(s.consistent for s in summaries) else 1


def run_command(args: argparse.Namespace) -> int:
    """``testbed run``: run experiment configs (resuming); 1 when a run diverged, else 0."""
    threads = use_threads(workload_threads(args.threads, args.jobs))
    if args.rounds is not None:
        if args.steps is not None:
            raise ValueError("--rounds is the old name of --steps; give --steps alone")
        warnings.warn(
            "--rounds is the old name of --steps (outer iterations; a round is a "
            "communication round); use --steps",
            DeprecatedName,
            stacklevel=1,
        )
    overrides = {
        "run.device": args.device,
        "run.steps": args.steps if args.steps is not None else args.rounds,
        "run.tf32": True if args.tf32 else None,
    }
    paths = []
    for arg in map(Path, args.config):
        if arg.is_dir():
            found = sorted(arg.glob("*.toml"))
            if not found:
                raise FileNotFoundError(f"{arg}: a folder without config files (*.toml)")
            paths += found
        else:
            paths.append(arg)
    configs = [load_config(path, overrides) for path in paths]  # every error before any run
    if args.fresh and args.recover:
        raise ValueError(
            "--fresh and --recover exclude each other: --fresh deletes the run "
            "folder, --recover keeps it and resumes from its last good state"
        )
    # one folder per config, each its own config's: refused before any work, nothing deleted
    check_run_folders(configs, _folder(args.results, "--results"), args.fresh)
    if args.executor == "local" and args.jobs == 1:  # in this process: one segment per run
        summaries: Iterator[dict[str, Any]] = (
            summary
            for _, summary in iter_experiments(
                configs,
                Path(args.results),
                fresh=args.fresh,
                recover=args.recover,
                progress=not args.quiet,
            )
        )
    else:
        summaries = iter(_run_on_executor(configs, args, threads))
    status = 0
    for summary in summaries:
        last = summary["last_row"] or {}
        state = "" if summary["status"] == "completed" else f" ({summary['status']})"
        print(
            f"{summary['name']}: {summary['steps']} steps, "
            f"{int(last.get('rounds', 0))} communication rounds, results in "
            f"{summary['run_dir']}{state}"
        )
        if summary["replication"]:
            print(f"  replication rows: {summary['replication']}")
        if summary["status"].startswith("diverged"):
            status = 1
    return status


def _run_on_executor(
    configs: list[ExperimentConfig], args: argparse.Namespace, threads: int
) -> list[dict[str, Any]]:
    """``testbed run`` through ``--jobs N`` or ``--executor ray``: each config a chain of
    segments between checkpoints, the configs side by side, one progress bar over all steps
    (:mod:`testbed_app.experiments.segments`)."""
    executor = _executor(args, threads)  # a bad option is reported before the bar starts
    bar = Progress(
        total=sum(int(c.run["steps"]) for c in configs),
        desc="run: outer steps",
        unit="step",
        enabled=not args.quiet,
    )
    seen: dict[int, int] = {}

    def on_segment(index: int, result: SegmentResult) -> None:
        summary = result.summary
        for message in summary["notes"]:
            print(f"{summary['name']}: {message}", file=sys.stderr)
        before = seen.get(index, int(summary["resumed_from"]))
        if index not in seen:
            bar.update(before)  # steps done before this run (resumed)
        seen[index] = int(summary["steps"])
        bar.update(max(seen[index] - before, 0))
        bar.set_postfix_str(f"{summary['name']}: {summary['status']}")

    try:
        return run_experiments(
            configs,
            Path(args.results),
            executor.run,
            fresh=args.fresh,
            recover=args.recover,
            segment_steps=args.segment_steps,
            on_segment=on_segment,
        )
    finally:
        bar.close()


def _measure_report_tables(results: Path, resume: bool, progress: bool, executor: Executor) -> None:
    """The report's measured tables: communication per iteration and rounds to error, their
    units of work through ``executor`` as the claims'."""
    print(
        f"communication table: {communication.write_table(results, resume, progress, executor.run)}"
    )
    print(f"rounds to error: {comparison_table.run_all(results, resume, progress, executor.run)}")


def regress_command(args: argparse.Namespace) -> int:
    """``testbed regress``: compare entries with the baseline (or ``--against`` another); 0
    when none is worse, else 1 (also when the baseline does not cover every measured metric:
    :func:`testbed_app.regression.not_covered`)."""
    torch.set_default_dtype(torch.float64)
    regression.check_options(args.estimator, args.against)  # before the bar starts
    if args.out and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a folder; name the JSON file to write")
    executor = _executor(args, use_threads(claim_threads(args.threads)))  # before the bar
    bars: list[Any] = []

    def progress(message: str) -> None:
        # the bar starts with the first grid cell measured: a missing baseline (read before
        # any measurement) is an error line of its own, with no bar before it
        if not bars:
            bars.append(Progress(desc="regress", unit="grid cell", enabled=not args.quiet))
        bars[0].set_postfix_str(f"last done: {message}", refresh=False)
        bars[0].update(1)

    baseline = Path(args.baseline) if args.baseline else regression.BASELINE
    try:
        passed, table = regression.run(
            args.estimator,
            args.against,
            args.update_baseline,
            baseline,
            Path(args.out) if args.out else None,
            progress,
            execute=executor.run,
        )
    finally:
        for bar in bars:
            bar.close()  # an error line after it starts on a line of its own
    print(table)
    return 0 if passed else 1


def verify_command(args: argparse.Namespace) -> int:
    """``testbed verify``: one estimator's declared claims, then ``--against`` and the report;
    1 when a declared claim does not hold or it is worse, else 0."""
    torch.set_default_dtype(torch.float64)
    use_threads(claim_threads(args.threads))
    info = verifying.resolve_target(args.target)
    results = _folder(args.results or str(Path("results") / "verify" / info.name), "--results")
    info, summaries = verifying.verify(
        info, results, args.profile, args.claim, resume=args.resume, progress=not args.quiet
    )
    print(f"\n{info.name} ({info.paper}; {info.reference})")
    print(verifying.verdict_table(summaries))
    status = 0
    if args.against:
        passed, table = regression.run(info.name, args.against)
        print(f"\nagainst {args.against}:\n{table}")
        status = 0 if passed else 1
    if not args.no_report:
        index = build_report(results, results / REPORT)
        print(f"\nreport: {index}")
    failed = verifying.failures(summaries)
    if failed:
        print(f"{len(failed)} declared claim(s) not holding: " + "; ".join(failed), file=sys.stderr)
        return 1
    return status


#: The handler of each command of :data:`testbed_app.cli.COMMANDS`.
HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": list_command,
    "check": check_command,
    "calibrate": calibrate_command,
    "run": run_command,
    "report": report_command,
    "regress": regress_command,
    "verify": verify_command,
    "mutate": mutate.mutate_command,
    "audit": audit.audit_command,
    "deploy": deploy.deploy_command,
}
