"""The testbed command line: list, check, calibrate, run, report, regress, verify, mutate,
deploy.

Examples (also shown by ``testbed --help``)::

    testbed list                        # problems, estimators and claims with references
    testbed check                       # every claim, the fast profile; results/, verdicts
    testbed check --claim classical.gd.linear_rate classical.cg.exact_after_dim_y   # two claims
    testbed check --jobs 2              # the claims over 2 local processes (same results)
    testbed check --profile thorough --claim fednest.thm31.k_rate_bilevel   # decides it
    testbed calibrate --seeds 20        # observed false-failure rates of statistical claims
    testbed report                      # build reports/output/ from results/
    testbed regress                     # compare every estimator with the committed baseline
    testbed regress --estimator NEW --against OLD   # is a variant no worse than OLD?
    testbed verify my-variant --against aid-neumann  # a plugin's verdicts, report, regression
    testbed mutate                      # realistic bugs against the claims: the mutation table
    testbed run configs/aggitd_table2_iid_tau1.toml --steps 20   # one paper experiment
    testbed run configs/ --executor ray --address auto   # every config, side by side on Ray
    testbed deploy configs/deploy/fednest_quadratic.toml --engine local   # FedNest on Flower
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from results_format.layout import CALIBRATION
from results_format.verdicts import untrusted_claim_files
from testbed_app.experiments.errors import DeprecatedName

if TYPE_CHECKING:
    from testbed_app.executors import Executor
    from testbed_app.experiments.base import ExperimentConfig


def _parameters(function: object) -> str:
    """``name=default, ...`` of a callable's parameters (``name`` alone when required)."""
    import inspect

    try:
        signature = inspect.signature(function)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(parameters not introspectable)"
    parts = [name if p.default is inspect.Parameter.empty else f"{name}={p.default!r}"
             for name, p in signature.parameters.items()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return ", ".join(parts) if parts else "(no parameters)"


def _cmd_list(args: argparse.Namespace) -> int:
    from problems import PROBLEM_DB
    from testbed.registry import ESTIMATOR_DB
    from theory_checks.registry import CLAIM_DB

    verbose = getattr(args, "verbose", False)
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
    print("\nClaims:")
    for c in CLAIM_DB:
        print(f"  {c.id:40s} {c.kind:18s} {c.reference}")
        if verbose:
            print(f"      {c.statement}")
            print(f"      estimators: {', '.join(c.estimators)}; expected: {c.expected}")
            decision = (f"statistical at false-failure rate {c.false_fail_rate:g}"
                        if c.statistical else "deterministic")
            print(f"      decision: {decision}"
                  + (f"; undecided by design on: {', '.join(c.undecided_on)}"
                     if c.undecided_on else ""))
            if c.perturbation is not None:
                print(f"      perturbation it must catch: {c.perturbation.name}")
            if c.positive_control is not None:
                print("      positive control: a case inside its conditions where it holds")
    if verbose:
        _list_workloads()
    return 0


def _print_plugin_problems() -> None:
    """The plugins left out, on stderr (the built-ins are listed regardless)."""
    from testbed import plugins
    from theory_checks.registry import claim_plugin_problems

    for problem in plugins.problems() + claim_plugin_problems():
        print(f"testbed: warning: {problem}", file=sys.stderr)


def _list_workloads() -> None:
    """``testbed run``'s config vocabulary: datasets, split schemes, workload kinds, limits."""
    from problems.workloads.data import DATASETS
    from problems.workloads.splits import SCHEMES, split_clients
    from testbed_app.experiments import schema
    from testbed_app.experiments.config import workload_defaults
    from testbed_app.experiments.registry import EXPERIMENT_BUILDERS, workload_options

    print("\nExperiment configs (testbed run):")
    print(f"  [data] dataset: {', '.join(sorted(DATASETS))}; defaults: "
          + ", ".join(f"{k}={v.default!r}" for k, v in schema.DATA_KEYS.items()))
    print(f"  [split] scheme: {', '.join(SCHEMES)}; parameters: {_parameters(split_clients)}")
    print("  [run] defaults: " + ", ".join(
        f"{k}={'(required)' if v.default is schema.REQUIRED else repr(v.default)}"
        for k, v in schema.RUN_KEYS.items()))
    print(f"  limits: steps <= {schema.MAX_STEPS:,}, step sizes <= {schema.MAX_STEP_SIZE:g}, "
          f"iterations per step <= {schema.MAX_ITERATIONS:,}")
    for kind in EXPERIMENT_BUILDERS:
        defaults = workload_defaults(kind)
        options = ", ".join(f"{name}={defaults[name]!r}" if name in defaults else name
                            for name in sorted(workload_options(kind))) or "(none)"
        print(f"  [workload] kind = {kind!r}: options {options}")


def _cmd_check(args: argparse.Namespace) -> int:

    import torch

    from theory_checks.runner import get_profile, run_claims

    torch.set_default_dtype(torch.float64)
    claims = _named_claims(args.claim)
    profile = get_profile(args.profile)
    ids = {c.id for c in claims}
    for path, reason in untrusted_claim_files(_folder(args.results, "--results")):
        if path.stem.split("@")[0] in ids:
            print(f"testbed: warning: {path}: {reason}; rerun", file=sys.stderr)
    with _executor(args) as executor:  # one Ray instance for the claims and the tables
        summaries = run_claims(claims, Path(args.results), profile, resume=not args.fresh,
                               progress=not args.quiet, execute=executor.run)
        _print_verdicts(summaries, args, profile.name)
        if not args.claim and not args.claims_only:
            _measure_report_tables(Path(args.results), not args.fresh, not args.quiet,
                                   executor)
    return _exit_status(summaries)


def _named_claims(ids: list[str] | None) -> list[Any]:
    """The claims ``--claim`` names (each once, in the order given), every registered claim
    without it; every unknown id in one line, each with its "did you mean"."""
    from theory_checks.registry import CLAIM_DB, get_claim

    if not ids:
        return list(CLAIM_DB)
    claims, unknown = [], []
    for claim_id in dict.fromkeys(ids):
        try:
            claims.append(get_claim(claim_id))
        except KeyError as error:
            unknown.append(_message(error).removesuffix("; `testbed list` shows every claim"))
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
        print(f"{s['id']:{width}s}  {s['verdict']:22s} {s['n_cases']:5d}  {mark:8s}  "
              f"{caught:6s} {held}")
        if s["counterexample"]:
            print(f"{'':{width}s}  counterexample: {Path(args.results) / s['counterexample']}")
    own = [s for s in summaries if s.get("origin", "built-in") == "built-in"]
    claims = [s for s in own if "@" not in s["id"]]  # a claim on the estimator it names
    variants = [s for s in own if "@" in s["id"]]  # on a registered variant enrolled in it
    also = f"; {len(variants)} runs on enrolled variants: {_counts(variants)}" if variants else ""
    print(f"\n{len(claims)} claims of the papers checked ({profile} profile): "
          f"{_counts(claims)}{also}; results in {args.results}")
    outside = [s for s in summaries if s.get("origin", "built-in") != "built-in"]
    if outside:  # plugins', integrations': never in the papers' counts
        origins = ", ".join(sorted({str(s["origin"]) for s in outside}))
        print(f"{len(outside)} runs of estimators or claims from outside the testbed "
              f"({origins}): {_counts(outside)}")


def _executor(args: argparse.Namespace) -> Executor:
    """The executor ``--executor``, ``--jobs``, ``--address`` ... name
    (:mod:`testbed_app.executors`)."""
    from testbed_app.executors import make_executor

    return make_executor(args.executor, args.jobs, args.address, args.cpus_per_task,
                         args.max_retries)


def _add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device``: where the claims' closed-form problems and estimators compute
    (:mod:`testbed.devices`; float64 on a GPU too)."""
    parser.add_argument("--device", dest="compute_device", choices=("cpu", "cuda"),
                        default=None, help="compute on this device (default: the CPU); the "
                        "closed-form problems stay float64 on a GPU")


def _add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Where the units of work run (README "Running on several machines")."""
    from testbed_app.executors import DEFAULT_RETRIES

    group = parser.add_argument_group("where the work runs")
    group.add_argument("--executor", choices=("local", "ray"), default="local",
                       help="local (default: this machine) or ray (a Ray cluster; needs the "
                            "optional extra hypergradient-testbed[ray])")
    group.add_argument("--jobs", type=_positive_int, default=1, metavar="N",
                       help="local executor: N worker processes (default 1: this process)")
    group.add_argument("--address", default=None,
                       help="ray executor: the cluster (auto, or ray://HOST:PORT); default: "
                            "start a Ray instance on this machine for the run")
    group.add_argument("--cpus-per-task", type=_positive_int, default=1, metavar="N",
                       help="ray executor: CPUs per task, also its torch thread count")
    group.add_argument("--max-retries", type=int, default=DEFAULT_RETRIES, metavar="N",
                       help="ray executor: retries of a task whose worker dies "
                            f"(default {DEFAULT_RETRIES})")


def _folder(path: str, option: str) -> Path:
    """``--results`` / ``--out``: a folder or absent (:func:`results_format.paths.output_folder`;
    a file or a link loop is one line, exit 2)."""
    from results_format.paths import output_folder

    return output_folder(Path(path), option)


def _counts(summaries: list[dict]) -> str:
    from theory_checks.claim import VERDICTS

    counts = {v: sum(1 for s in summaries if s["verdict"] == v) for v in VERDICTS}
    return ", ".join(f"{n} {v}" for v, n in counts.items())


def _exit_status(summaries: list[dict]) -> int:
    """0: every verdict as expected and every power run and positive control as required;
    1: a decided verdict differs from the expected one, a perturbation was missed or a positive
    control failed; 3: the only departures are "undecided" verdicts where a decision was
    expected (the budget did not decide: rerun with --profile thorough)."""
    wrong = [s for s in summaries if not s["as_expected"] and s["verdict"] != "undecided"]
    missed = [s for s in summaries if (s.get("power") or {}).get("caught") is False]
    control = [s for s in summaries if (s.get("positive_control") or {}).get("holds") is False]
    undecided = [s for s in summaries if not s["as_expected"] and s["verdict"] == "undecided"]
    for label, group in (("verdict(s) differ from what the testbed expects", wrong),
                         ("perturbation(s) not caught", missed),
                         ("positive control(s) not holding", control),
                         ("claim(s) undecided where the profile should decide", undecided)):
        if group:
            print(f"{len(group)} {label}: {', '.join(s['id'] for s in group)}", file=sys.stderr)
    if wrong or missed or control:
        return 1
    return 3 if undecided else 0


def _cmd_calibrate(args: argparse.Namespace) -> int:

    import torch
    from tqdm import tqdm

    from theory_checks.calibration import calibrate, format_table
    from theory_checks.runner import get_profile

    torch.set_default_dtype(torch.float64)
    claims = _named_claims(args.claim)
    deterministic = [c.id for c in claims if not c.statistical]
    if args.claim and deterministic:
        raise ValueError(f"deterministic claim(s) have nothing to calibrate: "
                         f"{', '.join(deterministic)}")
    statistical = [c for c in claims if c.statistical]
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    executor = _executor(args)  # a bad option is reported before the bar starts
    bar = tqdm(total=len(statistical) * args.seeds, desc="calibrate", unit="run",
               disable=args.quiet)

    def progress(message: str) -> None:
        bar.update(1)
        bar.set_postfix_str(message)

    summaries = calibrate(statistical, args.seeds, get_profile(args.profile),
                          _folder(args.results, "--results"), progress, execute=executor.run)
    bar.close()
    print(format_table(summaries))
    print(f"\nresults in {Path(args.results) / CALIBRATION}")
    return 0 if all(s.consistent for s in summaries) else 1


def _cmd_run(args: argparse.Namespace) -> int:
    from testbed_app.experiments.config import load_config
    from testbed_app.experiments.run_folders import check_run_folders
    from testbed_app.experiments.segments import iter_experiments

    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    if args.rounds is not None:
        if args.steps is not None:
            raise ValueError("--rounds is the old name of --steps; give --steps alone")
        warnings.warn("--rounds is the old name of --steps (outer iterations; a round is a "
                      "communication round); use --steps", DeprecatedName, stacklevel=1)
    overrides = {"run.device": args.device,
                 "run.steps": args.steps if args.steps is not None else args.rounds,
                 "run.tf32": True if args.tf32 else None}
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
        raise ValueError("--fresh and --recover exclude each other: --fresh deletes the run "
                         "folder, --recover keeps it and resumes from its last good state")
    # one folder per config, each its own config's: refused before any work, nothing deleted
    check_run_folders(configs, _folder(args.results, "--results"), args.fresh)
    if args.executor == "local" and args.jobs == 1:  # in this process: one segment per run
        summaries: Iterator[dict[str, Any]] = (
            summary for _, summary in iter_experiments(
                configs, Path(args.results), fresh=args.fresh, recover=args.recover,
                progress=not args.quiet))
    else:
        summaries = iter(_run_on_executor(configs, args))
    status = 0
    for summary in summaries:
        last = summary["last_row"] or {}
        state = "" if summary["status"] == "completed" else f" ({summary['status']})"
        print(f"{summary['name']}: {summary['steps']} steps, "
              f"{int(last.get('rounds', 0))} communication rounds, results in "
              f"{summary['run_dir']}{state}")
        if summary["replication"]:
            print(f"  replication rows: {summary['replication']}")
        if summary["status"].startswith("diverged"):
            status = 1
    return status


def _run_on_executor(configs: list[ExperimentConfig],
                     args: argparse.Namespace) -> list[dict[str, Any]]:
    """``testbed run`` through ``--jobs N`` or ``--executor ray``: each config a chain of
    segments between checkpoints, the configs side by side, one progress bar over all steps
    (:mod:`testbed_app.experiments.segments`)."""
    from tqdm import tqdm

    from testbed_app.experiments.segments import SegmentResult, run_experiments

    executor = _executor(args)  # a bad option is reported before the bar starts
    bar = tqdm(total=sum(int(c.run["steps"]) for c in configs), desc="run: outer steps",
               unit="step",
               disable=args.quiet)
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
        return run_experiments(configs, Path(args.results), executor.run,
                               fresh=args.fresh, recover=args.recover,
                               segment_steps=args.segment_steps, on_segment=on_segment)
    finally:
        bar.close()


def _measure_report_tables(results: Path, resume: bool, progress: bool,
                           executor: Executor) -> None:
    """The report's measured tables: communication per iteration and rounds to error, their
    units of work through ``executor`` as the claims'."""
    from testbed_app import communication
    from theory_checks.comparison import table as comparison_table

    print("communication table: "
          f"{communication.write_table(results, resume, progress, executor.run)}")
    print("rounds to error: "
          f"{comparison_table.run_all(results, resume, progress, executor.run)}")


def _cmd_report(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from reports import build

    results = _folder(args.results, "--results")
    _folder(args.out, "--out")
    if not results.is_dir():
        raise FileNotFoundError(f"results directory {results} does not exist; run `testbed check "
                                f"--results {results}` first to produce results")
    for path, reason in untrusted_claim_files(results):
        print(f"testbed: warning: {path}: {reason}; shown without its measurements",
              file=sys.stderr)
    bars: list[Any] = []

    def progress(total: int, claim_id: str) -> None:
        # the bar starts with the first claim drawn: a missing or empty results folder is an
        # error line of its own, with no empty bar before it
        if not bars:
            bars.append(tqdm(total=total, desc="report: claims and figures", unit="claim",
                             disable=args.quiet))
        bars[0].update(1)
        bars[0].set_postfix_str(claim_id)

    try:
        index = build.build_report(results, Path(args.out), progress)
    finally:
        for bar in bars:
            bar.close()
    print(f"report written: {index}")
    return 0


def _cmd_regress(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from testbed_app import regression

    torch.set_default_dtype(torch.float64)
    regression.check_options(args.estimator, args.against)  # before the bar starts
    if args.out and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a folder; name the JSON file to write")
    executor = _executor(args)  # a bad option is reported before the bar starts
    bars: list[Any] = []

    def progress(message: str) -> None:
        # the bar starts with the first grid cell measured: a missing baseline (read before
        # any measurement) is an error line of its own, with no bar before it
        if not bars:
            bars.append(tqdm(desc="regress", unit="grid cell", disable=args.quiet))
        bars[0].update(1)
        bars[0].set_postfix_str(message)

    baseline = Path(args.baseline) if args.baseline else regression.BASELINE
    try:
        passed, table = regression.run(args.estimator, args.against, args.update_baseline,
                                       baseline, Path(args.out) if args.out else None, progress,
                                       execute=executor.run)
    finally:
        for bar in bars:
            bar.close()  # an error line after it starts on a line of its own
    print(table)
    return 0 if passed else 1


def _cmd_verify(args: argparse.Namespace) -> int:
    import torch

    from testbed_app import verify as verifying

    torch.set_default_dtype(torch.float64)
    info = verifying.resolve_target(args.target)
    results = _folder(args.results or str(Path("results") / "verify" / info.name), "--results")
    info, summaries = verifying.verify(info, results, args.profile, args.claim,
                                       resume=args.resume, progress=not args.quiet)
    print(f"\n{info.name} ({info.paper}; {info.reference})")
    print(verifying.verdict_table(summaries))
    status = 0
    if args.against:
        from testbed_app import regression

        passed, table = regression.run(info.name, args.against)
        print(f"\nagainst {args.against}:\n{table}")
        status = 0 if passed else 1
    if not args.no_report:
        from reports.build import build_report

        index = build_report(results, results / "report")
        print(f"\nreport: {index}")
    failed = verifying.failures(summaries)
    if failed:
        print(f"{len(failed)} declared claim(s) not holding: " + "; ".join(failed),
              file=sys.stderr)
        return 1
    return status


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--threads 0`` and ``--steps -2`` are errors)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


#: Every command with its one line of help (``testbed --help`` lists them in this order).
COMMANDS = {
    "list": "registered problems, estimators and claims",
    "check": "run the claim checks, write results/, print each claim's verdict",
    "calibrate": "observed false-failure rates of the statistical claims over seeds",
    "run": "run experiment configs (TOML), resuming by default",
    "report": "build the empirical-vs-theory report from results/",
    "regress": "compare estimators with the committed regression baseline",
    "verify": "check one estimator (built in, a plugin's, or module:object) against its claims",
    "mutate": "run realistic bugs (mutants) against the claims: the checks' power",
    "deploy": "run a server algorithm on Flower (simulation engine, or SuperLink and "
              "SuperNodes) against the simulation",
}
DESCRIPTION = """\
The hypergradient testbed: checks the claims of the federated hypergradient papers
(FedNest, AggITD, FedMSA, HGP) on problems with exact answers, runs their experiments
and reports which claims hold.

commands (testbed COMMAND --help describes one):
""" + "\n".join(f"  {name:10s} {text}" for name, text in COMMANDS.items())
EXAMPLES = "examples:\n" + "\n".join(
    line.strip().removeprefix("testbed").join(("  testbed", "")) for line in
    (__doc__ or "").split("::", 1)[-1].strip().splitlines())


def _command(sub: Any, name: str) -> argparse.ArgumentParser:
    """The subcommand ``name`` with its line of :data:`COMMANDS` as its description."""
    parser: argparse.ArgumentParser = sub.add_parser(name, description=COMMANDS[name])
    return parser


def _add_claim_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--claim ID [ID ...]``, also repeatable (``--claim A --claim B``)."""
    parser.add_argument("--claim", action="extend", nargs="+", metavar="ID",
                        help=f"{what} (several ids after one --claim, or --claim repeated; "
                             "testbed list shows the ids)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="testbed", usage="testbed [-h] COMMAND ...",
                                     description=DESCRIPTION, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # the commands are listed in the description (one line each), not by argparse, which
    # wraps a command name longer than its help column onto a line of its own
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help=argparse.SUPPRESS)
    listing = _command(sub, "list")
    listing.add_argument("--verbose", "-v", action="store_true",
                         help="also each entry's parameters and defaults, and the config keys")
    listing.set_defaults(func=_cmd_list, computes=False)
    check = _command(sub, "check")
    check.add_argument("--profile", choices=("fast", "thorough"), default=None,
                       help="fast (default, or $TESTBED_PROFILE) or thorough")
    _add_claim_option(check, "check only these claims")
    check.add_argument("--results", default="results", help="results directory")
    check.add_argument("--fresh", action="store_true", help="rerun claims already done")
    check.add_argument("--quiet", action="store_true", help="no progress bar")
    check.add_argument("--claims-only", action="store_true",
                       help="skip the communication and rounds-to-error measurements")
    _add_device_option(check)
    _add_executor_options(check)
    check.set_defaults(func=_cmd_check)
    calibrate = _command(sub, "calibrate")
    _add_claim_option(calibrate, "calibrate only these statistical claims")
    calibrate.add_argument("--seeds", type=int, default=20,
                           help="independent Monte Carlo seeds per claim (default 20)")
    calibrate.add_argument("--profile", choices=("fast", "thorough"), default=None,
                           help="fast (default, or $TESTBED_PROFILE) or thorough")
    calibrate.add_argument("--results", default="results", help="results directory")
    calibrate.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_device_option(calibrate)
    _add_executor_options(calibrate)
    calibrate.set_defaults(func=_cmd_calibrate)
    run = _command(sub, "run")
    run.add_argument("config", nargs="+",
                     help="experiment config file(s) or folder(s) of them, e.g. configs/")
    run.add_argument("--device", choices=("cpu", "cuda"), help="override [run] device")
    run.add_argument("--steps", type=_positive_int, metavar="N",
                     help="override [run] steps (outer iterations); below the config's own "
                          "steps the replication record is marked partial")
    run.add_argument("--rounds", type=_positive_int, metavar="N",
                     help="deprecated: the old name of --steps (it counts outer iterations, "
                          "not communication rounds)")
    run.add_argument("--results", default="results", help="results directory")
    run.add_argument("--fresh", action="store_true",
                     help="delete the run folder (checkpoint and metrics) and start over")
    run.add_argument("--recover", action="store_true",
                     help="set a corrupt or foreign checkpoint aside and resume from the last "
                          "good state (previous checkpoint, else step 0), keeping metrics")
    run.add_argument("--threads", type=_positive_int, metavar="N",
                     help="torch CPU threads (1 is fastest for the small digits models)")
    run.add_argument("--segment-steps", type=_positive_int, metavar="N",
                     help="with --jobs N or --executor ray: steps per task (a task ends at "
                          "the first checkpoint N steps on; default: [run] checkpoint_every)")
    run.add_argument("--tf32", action="store_true",
                     help="override [run] tf32: allow TF32 on a GPU (default off)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_executor_options(run)
    run.set_defaults(func=_cmd_run)
    report = _command(sub, "report")
    report.add_argument("--results", default="results", help="results directory")
    report.add_argument("--out", default="reports/output", help="output directory")
    report.add_argument("--quiet", action="store_true", help="no progress bar")
    report.set_defaults(func=_cmd_report, computes=False)
    regress = _command(sub, "regress")
    regress.add_argument("--estimator", help="check only this registered entry")
    regress.add_argument("--against", help="compare --estimator with this entry, not a baseline")
    regress.add_argument("--update-baseline", action="store_true",
                         help="rewrite the baseline with the new measurements")
    regress.add_argument("--baseline",
                         help="baseline file (default reports/baselines/regress.json)")
    regress.add_argument("--out", help="also write the measurements to this JSON file")
    regress.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_device_option(regress)
    _add_executor_options(regress)
    regress.set_defaults(func=_cmd_regress)
    verify = _command(sub, "verify")
    verify.add_argument("target", help="registry/plugin name or module:object (an EstimatorInfo)")
    verify.add_argument("--against", help="also compare with this registered entry (regress)")
    _add_claim_option(verify, "only these claims")
    verify.add_argument("--profile", choices=("fast", "thorough"), default=None,
                        help="fast (default, or $TESTBED_PROFILE) or thorough")
    verify.add_argument("--results", help="results directory (default results/verify/NAME)")
    verify.add_argument("--resume", action="store_true",
                        help="reuse finished claims (off by default: the target's code may have "
                             "changed, and a claim's fingerprint does not cover it)")
    verify.add_argument("--no-report", action="store_true", help="skip the report")
    verify.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_device_option(verify)
    verify.set_defaults(func=_cmd_verify)
    from testbed_app import mutate
    from testbed_app.flower import command as deploy

    mutate.add_arguments(_command(sub, "mutate"))
    deploy.add_arguments(_command(sub, "deploy"))
    return parser


def _message(error: BaseException) -> str:
    # a KeyError's str() is the repr of its key ("'as_expected'"); show its text instead
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)


def _os_message(error: OSError) -> str:
    """One line for an :class:`OSError`: its file and the system's reason."""
    from results_format.writing import WriteFailed

    if isinstance(error, WriteFailed) or not error.strerror:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror}"


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a closed pipe does
    not print a traceback at exit."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


_SHOW_WARNING = warnings.showwarning


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, file: Any = None, line: str | None = None) -> None:
    """The testbed's own warnings (an option or config key under its old name) as one line
    ``testbed: warning: ...`` on stderr; any other warning as Python shows it."""
    if issubclass(category, DeprecatedName):
        print(f"testbed: warning: {message}", file=sys.stderr)
    else:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    """Run the command; user errors (a bad config, argument or results file) print one line
    ``testbed: error: ...`` and return 2; Ctrl-C returns 130 with how to resume; any other
    exception is an internal error and keeps its traceback.

    Every command that computes (all but ``list`` and ``report``, which set ``computes=False``)
    runs under the precision policy of :mod:`testbed.precision`: TF32 off unless ``--tf32``
    (or, for ``run``, a config's ``[run] tf32``) asks for it."""
    from results_format.locks import LockHeld

    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "computes", True):
            from testbed.precision import set_precision

            set_precision(bool(getattr(args, "tf32", False)))
        if getattr(args, "compute_device", None):
            from testbed.devices import use_device

            if getattr(args, "executor", "local") != "local" and args.compute_device != "cpu":
                raise ValueError("--device cuda runs on this machine's GPU: use it with the "
                                 "local executor (--jobs N), not --executor ray")
            use_device(args.compute_device)
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            return int(args.func(args))
    except KeyboardInterrupt:
        print("\ntestbed: interrupted; rerun the same command to resume (finished work is "
              "kept)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()  # the reader (`| head`) has what it wanted: exit quietly
        return 0
    except (KeyError, ValueError, LockHeld) as error:
        print(f"testbed: error: {_message(error)}", file=sys.stderr)
        return 2
    except OSError as error:
        # the machine's answer (a full disk, a read-only folder, a missing or unreadable
        # file): one line naming the file; a results file is written whole or not at all
        # (results_format.writing), so nothing half-written is left
        print(f"testbed: error: {_os_message(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
