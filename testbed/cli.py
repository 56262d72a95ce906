"""The ``testbed`` command: list, check, report.

Examples::

    testbed list                        # problems, estimators and claims with references
    testbed check --profile fast        # run every claim check, write results/, print verdicts
    testbed check --claim classical.gd.linear_rate --profile thorough
    testbed calibrate --seeds 20        # observed false-failure rates of statistical claims
    testbed report                      # build reports/output/ from results/
    testbed regress                     # compare every estimator with the committed baseline
    testbed regress --estimator NEW --against OLD   # is a variant no worse than OLD?
    testbed run configs/aggitd_table2_iid_tau1.toml --rounds 20   # one paper experiment
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_list(args: argparse.Namespace) -> int:
    from problems import PROBLEM_DB
    from testbed.registry import ESTIMATOR_DB
    from theory_checks.registry import CLAIM_DB

    print("Problems:")
    for p in PROBLEM_DB:
        print(f"  {p.name:28s} {p.kind:14s} {p.reference}")
    print("\nEstimators:")
    for e in ESTIMATOR_DB:
        kinds = ",".join(sorted(e.supports))
        print(f"  {e.name:28s} {e.paper:10s} {e.reference}  [{kinds}]")
    print("\nClaims:")
    for c in CLAIM_DB:
        print(f"  {c.id:40s} {c.kind:18s} {c.reference}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    import os

    import torch

    if args.profile:
        # set before the claims are imported: costly claims size their Monte Carlo designs and
        # case counts from the profile when they are built (theory_checks.runner.per_profile)
        os.environ["TESTBED_PROFILE"] = args.profile
    from theory_checks.registry import CLAIM_DB, get_claim
    from theory_checks.runner import get_profile, run_claims

    torch.set_default_dtype(torch.float64)
    claims = [get_claim(c) for c in args.claim] if args.claim else list(CLAIM_DB)
    profile = get_profile(args.profile)
    summaries = run_claims(claims, Path(args.results), profile, resume=not args.fresh,
                           progress=not args.quiet)
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
    print(f"\n{len(summaries)} claims checked ({profile.name} profile): {_counts(summaries)}; "
          f"results in {args.results}")
    if not args.claim and not args.claims_only:
        _measure_report_tables(Path(args.results), resume=not args.fresh, progress=not args.quiet)
    return _exit_status(summaries)


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
    import os

    import torch

    if args.profile:
        os.environ["TESTBED_PROFILE"] = args.profile
    from tqdm import tqdm

    from theory_checks.calibration import calibrate, format_table
    from theory_checks.registry import CLAIM_DB, get_claim
    from theory_checks.runner import get_profile

    torch.set_default_dtype(torch.float64)
    claims = [get_claim(c) for c in args.claim] if args.claim else list(CLAIM_DB)
    deterministic = [c.id for c in claims if not c.statistical]
    if args.claim and deterministic:
        raise ValueError(f"deterministic claim(s) have nothing to calibrate: "
                         f"{', '.join(deterministic)}")
    statistical = [c for c in claims if c.statistical]
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    bar = tqdm(total=len(statistical) * args.seeds, desc="calibrate", unit="run",
               disable=args.quiet)

    def progress(message: str) -> None:
        bar.update(1)
        bar.set_postfix_str(message)

    summaries = calibrate(statistical, args.seeds, get_profile(args.profile),
                          Path(args.results), progress)
    bar.close()
    print(format_table(summaries))
    print(f"\nresults in {Path(args.results) / 'calibration'}")
    return 0 if all(s.consistent for s in summaries) else 1


def _cmd_run(args: argparse.Namespace) -> int:
    from testbed.experiments.config import load_config
    from testbed.experiments.runner import run_experiment

    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    overrides = {"run.device": args.device, "run.rounds": args.rounds}
    paths = [p for arg in map(Path, args.config)
             for p in (sorted(arg.glob("*.toml")) if arg.is_dir() else [arg])]
    configs = [load_config(path, overrides) for path in paths]  # every error before any run
    for config in configs:
        summary = run_experiment(config, Path(args.results), fresh=args.fresh,
                                 progress=not args.quiet)
        last = summary["last_row"] or {}
        print(f"{summary['name']}: {summary['steps']} steps, "
              f"{int(last.get('rounds', 0))} rounds, results in {summary['run_dir']}")
        if summary["replication"]:
            print(f"  replication rows: {summary['replication']}")
    return 0


def _measure_report_tables(results: Path, resume: bool, progress: bool) -> None:
    """The report's measured tables: communication per iteration and rounds to error."""
    from testbed import communication, comparison_runs

    print(f"communication table: {communication.write_table(results, resume, progress)}")
    print(f"rounds to error: {comparison_runs.run_all(results, resume, progress)}")


def _cmd_report(args: argparse.Namespace) -> int:
    from reports.build import build_report

    index = build_report(Path(args.results), Path(args.out))
    print(f"report written: {index}")
    return 0


def _cmd_regress(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from testbed import regression

    torch.set_default_dtype(torch.float64)
    bar = tqdm(desc="regress", unit="run", disable=args.quiet)

    def progress(message: str) -> None:
        bar.update(1)
        bar.set_postfix_str(message)

    baseline = Path(args.baseline) if args.baseline else regression.BASELINE
    passed, table = regression.run(args.estimator, args.against, args.update_baseline,
                                   baseline, Path(args.out) if args.out else None, progress)
    bar.close()
    print(table)
    return 0 if passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="testbed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="registered problems, estimators and claims").set_defaults(
        func=_cmd_list)
    check = sub.add_parser("check", help="run the claim checks and write results")
    check.add_argument("--profile", choices=("fast", "thorough"), default=None,
                       help="fast (default, or $TESTBED_PROFILE) or thorough")
    check.add_argument("--claim", action="append", help="check only this claim (repeatable)")
    check.add_argument("--results", default="results", help="results directory")
    check.add_argument("--fresh", action="store_true", help="rerun claims already done")
    check.add_argument("--quiet", action="store_true", help="no progress bar")
    check.add_argument("--claims-only", action="store_true",
                       help="skip the communication and rounds-to-error measurements")
    check.set_defaults(func=_cmd_check)
    calibrate = sub.add_parser(
        "calibrate", help="observed false-failure rates of the statistical claims over seeds")
    calibrate.add_argument("--claim", action="append",
                           help="calibrate only this statistical claim (repeatable)")
    calibrate.add_argument("--seeds", type=int, default=20,
                           help="independent Monte Carlo seeds per claim (default 20)")
    calibrate.add_argument("--profile", choices=("fast", "thorough"), default=None,
                           help="fast (default, or $TESTBED_PROFILE) or thorough")
    calibrate.add_argument("--results", default="results", help="results directory")
    calibrate.add_argument("--quiet", action="store_true", help="no progress bar")
    calibrate.set_defaults(func=_cmd_calibrate)
    run = sub.add_parser("run", help="run experiment configs (TOML), resuming by default")
    run.add_argument("config", nargs="+",
                     help="experiment config file(s) or folder(s) of them, e.g. configs/")
    run.add_argument("--device", choices=("cpu", "cuda"), help="override [run] device")
    run.add_argument("--rounds", type=int, help="override [run] rounds (outer iterations)")
    run.add_argument("--results", default="results", help="results directory")
    run.add_argument("--fresh", action="store_true", help="ignore checkpoints, start over")
    run.add_argument("--threads", type=int,
                     help="torch CPU threads (1 is fastest for the small digits models)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(func=_cmd_run)
    report = sub.add_parser("report", help="build the empirical-vs-theory report")
    report.add_argument("--results", default="results", help="results directory")
    report.add_argument("--out", default="reports/output", help="output directory")
    report.set_defaults(func=_cmd_report)
    regress = sub.add_parser("regress", help="compare estimators with committed baselines")
    regress.add_argument("--estimator", help="check only this registered entry")
    regress.add_argument("--against", help="compare --estimator with this entry, not a baseline")
    regress.add_argument("--update-baseline", action="store_true",
                         help="rewrite the baseline with the new measurements")
    regress.add_argument("--baseline",
                         help="baseline file (default reports/baselines/regress.json)")
    regress.add_argument("--out", help="also write the measurements to this JSON file")
    regress.add_argument("--quiet", action="store_true", help="no progress bar")
    regress.set_defaults(func=_cmd_regress)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (KeyError, ValueError, FileNotFoundError) as error:
        print(f"testbed: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
