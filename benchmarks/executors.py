"""Wall time of the claim checks on the local executor and on Ray with 1 and 2 workers (issue 15).

    python benchmarks/executors.py [--profile thorough] [--out results/executors] [--claim ID]

Runs ``testbed check --profile PROFILE --claims-only`` (the claim runs ``tox -e theory`` checks,
on that profile) three times, one after the other, each into a fresh results folder: in this
process (``--executor local``), and on a Ray instance on this machine started beforehand with
1 and then 2 CPUs (``ray start --head --num-cpus N``; one task per CPU, so 1 and 2 workers,
``--address auto``). Ray's start is outside the timing (on a cluster it is up already). It
writes ``<out>/executors.json``: each mode's wall time, its ratio to the local one, the load
average before and after it, and whether its results files equal the local run's (wall times
and metadata aside, as in ``tests/test_executors.py``).

Needs Ray (``pip install 'hypergradient-testbed[ray]'``). Run it where Ray may listen: on a
machine whose Ray would advertise an outside address, inside a loopback-only namespace::

    unshare -n sh -c 'ip link set lo up && python benchmarks/executors.py'

Not part of ``tox -e bench`` (it takes three times the profile's check time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results_format import atomic_write

TIMING = re.compile(rb'"seconds": [-+.0-9eE]+')
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): TIMING.sub(b'"seconds": 0', p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "metadata.json"
    }


def _ray(*args: str) -> None:
    ray = Path(sys.executable).with_name("ray")
    subprocess.run(
        [str(ray), *args], check=True, env={**os.environ, **RAY_ENV}, stdout=subprocess.DEVNULL
    )


def _check(profile: str, results: Path, extra: list[str]) -> float:
    command = [
        sys.executable,
        "-m",
        "testbed_app",
        "check",
        "--profile",
        profile,
        "--claims-only",
        "--quiet",
        "--results",
        str(results),
        *extra,
    ]
    tic = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, **RAY_ENV}, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - tic
    if done.returncode not in (0, 1):  # 1: a claim fails as stated, a verdict, not an error
        raise SystemExit(f"{' '.join(command)} exited with {done.returncode}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="thorough", choices=("fast", "thorough"))
    parser.add_argument("--out", default="results/executors")
    parser.add_argument(
        "--claim",
        action="append",
        default=[],
        help="only this claim (repeatable; a quick trial of the script)",
    )
    args = parser.parse_args()
    modes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="executors-bench-") as tmp:
        for name, cpus in (("local", 0), ("ray, 1 worker", 1), ("ray, 2 workers", 2)):
            results = Path(tmp) / name.replace(", ", "-").replace(" ", "")
            extra = [arg for claim in args.claim for arg in ("--claim", claim)]
            if cpus:
                _ray(
                    "start",
                    "--head",
                    f"--num-cpus={cpus}",
                    "--node-ip-address=127.0.0.1",
                    "--include-dashboard=false",
                    "--disable-usage-stats",
                )
                extra += ["--executor", "ray", "--address", "auto"]
            load_before = os.getloadavg()[0]
            try:
                seconds = _check(args.profile, results, extra)
            finally:
                if cpus:
                    _ray("stop", "--force")
            modes.append(
                {
                    "mode": name,
                    "seconds": round(seconds, 1),
                    "load_average_before": round(load_before, 2),
                    "load_average_after": round(os.getloadavg()[0], 2),
                    "same_files_as_local": _files(results) == _files(Path(tmp) / "local"),
                }
            )
            print(modes[-1], flush=True)
    local = modes[0]["seconds"]
    for mode in modes:
        mode["ratio_to_local"] = round(mode["seconds"] / local, 3)
    record = {
        "benchmark": "executors",
        "profile": args.profile,
        "cpu_count": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "modes": modes,
    }
    atomic_write(Path(args.out) / "executors.json", json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
