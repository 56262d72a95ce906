"""``testbed report``: the empirical-vs-theory report of a results folder.

A command of its own module because it only reads results files (:mod:`reports`): the command
line (:mod:`testbed_app.cli`) runs it without importing torch or the claims, so that the report
starts in about a second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reports.build import build_report
from results_format.claim_file import NOT_A_CLAIM_RESULT
from results_format.claim_file import untrusted_claim_files
from results_format.layout import REPORT
from results_format.paths import output_folder
from testbed.progress import Progress


def report_command(args: argparse.Namespace) -> int:
    """``testbed report``: the report of ``--results`` into ``--out``, with a progress bar
    from the first claim drawn; 0 when written."""
    results = output_folder(Path(args.results), "--results")
    # no --out: the report goes next to its results (from the repository root, the old default
    # ./reports/output replaced the main job's report with that of whatever --results named)
    out = output_folder(Path(args.out) if args.out else results / REPORT, "--out")
    if not results.is_dir():
        raise FileNotFoundError(
            f"results directory {results} does not exist; run `testbed check "
            f"--results {results}` first to produce results"
        )
    for path, reason in untrusted_claim_files(results):
        shown = (
            "a foreign file: named in the report, not counted as a claim"
            if reason.startswith(NOT_A_CLAIM_RESULT)
            else "shown without its measurements"
        )
        print(f"testbed: warning: {path}: {reason}; {shown}", file=sys.stderr)
    bars: list[Any] = []

    def progress(total: int, claim_id: str) -> None:
        # the bar starts with the first claim drawn: a missing or empty results folder is an
        # error line of its own, with no empty bar before it
        if not bars:
            bars.append(
                Progress(
                    total=total,
                    desc="report: claims and figures",
                    unit="claim",
                    enabled=not args.quiet,
                )
            )
        bars[0].set_postfix_str(f"last written: {claim_id}", refresh=False)
        bars[0].update(1)

    try:
        index = build_report(results, out, progress)
    finally:
        for bar in bars:
            bar.close()
    print(f"report written: {index}")
    return 0
