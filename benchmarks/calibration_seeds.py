"""Cost of a calibration in its seeds: ``testbed calibrate --seeds 300`` against ``--seeds 10``
(issue 37; target: at most 5x for each statistical claim).

    python benchmarks/calibration_seeds.py [--claim ID ...] [--small 10] [--large 300]
        [--repeats 1] [--compare 16] [--profile fast] [--out results/benchmarks] [--keep FOLDER]

For each claim, runs ``testbed calibrate --claim ID --seeds SMALL`` and then ``--seeds LARGE``,
each a fresh process into a fresh results folder (imports, case drawing and the record writes
included, as a user runs it), one after the other, and records both wall times, their ratio and
the load average before and after each. With ``--repeats N`` the pair runs N times in turn and
each size keeps its fastest time (all are recorded): on a shared machine a run is slowed by the
other jobs, never sped up, so the fastest is the least disturbed (the same code read 6.5x and
then 3.9x for one claim in single runs). With ``--compare N`` it also times, in one process,
seeds ``0..N-1`` unbatched (one :class:`~theory_checks.calibration.CalibrationTask` per seed)
and batched (one :class:`~theory_checks.calibration.CalibrationBlock`), and checks their
records are equal but for ``seconds``. ``--profile thorough`` times the claims decided there
(FedNest's K-rate claims). ``--keep FOLDER`` keeps each claim's large run, a results folder
``FOLDER/<claim>`` (a calibration table that ``testbed audit`` can re-derive; the folder must
not exist yet, so that no run resumes from an earlier one). Writes
``<out>/calibration_seeds.json``.

Not part of ``tox -e bench``: the large runs take minutes per claim.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results_format import atomic_write

# The statistical claims of the fast profile, every one with its replicates on one axis: HGP's
# stacked runs (theory_checks.hgp.common), the (14b) check's batched FedIHGP runs
# (fednest.lemma22), Theorem 1's batched FBO-AggITD runs (aggitd.thm1,
# testbed.algorithms.aggitd_replicates) and the comparisons' stacked problems
# (theory_checks.comparison.batched). FedNest's K-rate claims are decided on the thorough
# profile (--profile thorough --claim ...).
DEFAULT_CLAIMS = (
    "hgp.noise.sqrt_eta",
    "hgp.stochastic.unbiased",
    "hgp.theorem1.noise_exponent_b",
    "hgp.theorem1.high_probability_bound",
    "fednest.lemma22.abs_error_per_sample",
    "fednest.lemma22.abs_error_as_stated",
    "aggitd.thm1.rate_in_K",
    "comparison.aggitd_fewer_rounds_than_fednest",
    "comparison.fedmsa_tenfold_fewer_rounds",
    "comparison.lfednest_fewer_rounds_homogeneous",
)


def _load() -> float:
    return os.getloadavg()[0]


def _calibrate(claim: str, seeds: int, results: Path, profile: str) -> float:
    command = [
        sys.executable,
        "-m",
        "testbed_app",
        "calibrate",
        "--claim",
        claim,
        "--seeds",
        str(seeds),
        "--results",
        str(results),
        "--profile",
        profile,
        "--quiet",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1) or _seeds_recorded(results, claim) != seeds:
        # 1 is also the exit of a claim whose seeds are inconsistent with its stated rate, a
        # timing still; a run that crashed exits 1 too, and records fewer seeds than asked
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return seconds


def fastest_of(repeats: int, sizes: dict[str, int], run: Any) -> dict[str, dict[str, Any]]:
    """``run(name, seeds, attempt)`` (wall seconds) for each size, ``repeats`` times in turn
    (small, large, small, large, ...): per size the fastest time, every time, and the load
    average before the first run and after the last."""
    times: dict[str, list[float]] = {name: [] for name in sizes}
    loads: dict[str, list[float]] = {name: [] for name in sizes}
    for attempt in range(repeats):
        for name, seeds in sizes.items():
            loads[name].append(_load())
            times[name].append(run(name, seeds, attempt))
            loads[name].append(_load())
    return {
        name: {
            "seeds": seeds,
            "seconds": min(times[name]),
            "all_seconds": times[name],
            "load_before": loads[name][0],
            "load_after": loads[name][-1],
        }
        for name, seeds in sizes.items()
    }


def _seeds_recorded(results: Path, claim: str) -> int:
    """The seeds ``claim``'s row of the run's ``calibration/summary.json`` counts (0 without)."""
    try:
        summary = json.loads((results / "calibration" / "summary.json").read_text("utf-8"))
        rows = [row for row in summary["claims"] if row["claim"] == claim]
        return int(rows[0]["seeds"]) if rows else 0
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _compare(claim_id: str, seeds: int, profile_name: str) -> dict[str, Any]:
    import torch

    from theory_checks.calibration import CalibrationBlock
    from theory_checks.calibration import CalibrationTask
    from theory_checks.registry import get_claim
    from theory_checks.runner import get_profile

    torch.set_default_dtype(torch.float64)
    claim, profile = get_claim(claim_id), get_profile(profile_name)
    start = time.perf_counter()
    alone = [CalibrationTask(claim.id, k, profile, claim=claim)() for k in range(seeds)]
    unbatched = time.perf_counter() - start
    start = time.perf_counter()
    block = CalibrationBlock(claim.id, tuple(range(seeds)), profile, claim=claim)()
    batched = time.perf_counter() - start

    def records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    return {
        "seeds": seeds,
        "unbatched_seconds": unbatched,
        "batched_seconds": batched,
        "speedup": unbatched / batched,
        "records_equal": records(alone) == records(block),
    }


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``claim`` is ``None`` when none is named (then :data:`DEFAULT_CLAIMS`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # "extend": ``--claim A B`` and ``--claim A --claim B`` both run A and B
    parser.add_argument("--claim", nargs="+", action="extend", default=None)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--large", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1, metavar="N")
    parser.add_argument("--compare", type=int, default=0, metavar="N")
    parser.add_argument("--profile", choices=("fast", "thorough"), default="fast")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    parser.add_argument("--keep", type=Path, default=None, metavar="FOLDER")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep}: exists; name a new folder (a kept run must not resume)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    rows = []
    for claim in args.claim or DEFAULT_CLAIMS:

        def run(name: str, seeds: int, attempt: int, claim: str = claim) -> float:
            with tempfile.TemporaryDirectory() as folder:
                results = Path(folder)
                if name == "large" and attempt == 0 and args.keep is not None:
                    results = args.keep / claim  # the first large run is the kept one
                    results.mkdir(parents=True)
                return _calibrate(claim, seeds, results, args.profile)

        sizes = {"small": args.small, "large": args.large}
        row: dict[str, Any] = {"claim": claim, **fastest_of(args.repeats, sizes, run)}
        row["ratio"] = row["large"]["seconds"] / row["small"]["seconds"]
        row["within_5x"] = row["ratio"] <= 5.0
        if args.compare:
            row["in_process"] = _compare(claim, args.compare, args.profile)
        print(json.dumps(row), flush=True)
        rows.append(row)
    payload = {
        "benchmark": "calibration_seeds",
        "profile": args.profile,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "repeats": args.repeats,
        "claims": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out / "calibration_seeds.json", json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
