"""Compare two ``testbed check`` results folders, one computed on the CPU and one on CUDA.

    python benchmarks/compare_devices.py CPU_RESULTS CUDA_RESULTS [CUDA_RESULTS ...] [--json FILE]

The closed-form problems are float64 on both devices, so a claim's verdict, the verdict of its
power check (the mutant it must catch), its case counts and every case's outcome must be the same;
the measured numbers may differ by float64 round-off in a different order of summation. Each
claim file is read through :func:`results_format.claim_file.read_claim_file` (its seal and its
recomputed verdict checked) before it is compared; the CUDA side may be several folders (one per
paper, run side by side), read as one. Printed per claim where anything differs, then one summary
line: the claims compared, those differing, and the largest difference of a measured number on
the scale of the case, ``|a - b| / max(|a|, |b|, |bound|)`` (a measurement that is round-off
next to its bound, as an exact identity's, is compared on the bound's scale).

Exit status: 0 when every claim present in both folders agrees, 1 when one differs, 2 for a
folder that is not a results folder or a claim file that fails its check. A claim in only one
folder (a run stopped by a time limit) is listed, not counted as a difference.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.claim_file import read_claim_file
from results_format.layout import CLAIMS

#: What must be equal on the two devices, field by field.
SAME_FIELDS = ("verdict", "n_cases", "n_undecided", "n_unconfirmed", "n_outside_hypotheses")


class NotAResultsFolder(ValueError):
    """A folder without a ``claims/`` folder, or a claim file that fails its check."""


def read_claims(results: Path) -> dict[str, dict[str, Any]]:
    """The checked claim files of a results folder, by file name (claim, or claim@estimator)."""
    folder = results / CLAIMS
    if not folder.is_dir():
        raise NotAResultsFolder(
            f"{results}: no {CLAIMS}/ folder (not a testbed check results folder)"
        )
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        data, problem = read_claim_file(path, results)
        if problem is not None or data is None:
            raise NotAResultsFolder(f"{path}: {problem}")
        out[path.stem] = data
    return out


def _measured(case: Mapping[str, Any]) -> tuple[float, float] | None:
    """(measured, |bound|) of a case (0 without a numeric bound), or None where it has no
    measured number."""
    value, bound = case.get("measured"), case.get("bound")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    numeric = isinstance(bound, int | float) and not isinstance(bound, bool)
    return float(value), (abs(float(bound)) if numeric else 0.0)


def _gap(a: float, b: float, bound: float) -> float:
    """``|a - b| / max(|a|, |b|, bound)``: 0 when both are equal (infinite ones included), nan
    where a side is nan or infinite and the other is not."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    scale = max(abs(a), abs(b), bound)
    return abs(a - b) / scale if math.isfinite(scale) else math.nan


def compare_claim(cpu: Mapping[str, Any], cuda: Mapping[str, Any]) -> dict[str, Any]:
    """What differs between one claim's two files, and the largest measured gaps."""
    differences = [
        f"{field}: cpu {cpu.get(field)!r}, cuda {cuda.get(field)!r}"
        for field in SAME_FIELDS
        if cpu.get(field) != cuda.get(field)
    ]
    power_cpu, power_cuda = cpu.get("power") or {}, cuda.get("power") or {}
    if power_cpu.get("verdict") != power_cuda.get("verdict"):
        differences.append(
            f"power verdict: cpu {power_cpu.get('verdict')!r}, cuda {power_cuda.get('verdict')!r}"
        )
    cases_cpu, cases_cuda = cpu.get("cases") or [], cuda.get("cases") or []
    worst = 0.0
    for index, (a, b) in enumerate(zip(cases_cpu, cases_cuda, strict=False)):
        if a.get("problem_id") != b.get("problem_id") or a.get("params") != b.get("params"):
            differences.append(
                f"case {index}: drawn differently ({a.get('problem_id')} / {b.get('problem_id')})"
            )
            continue
        if a.get("outcome") != b.get("outcome"):
            differences.append(
                f"case {index} ({a.get('problem_id')}): outcome cpu "
                f"{a.get('outcome')!r}, cuda {b.get('outcome')!r}"
            )
        mine, theirs = _measured(a), _measured(b)
        if (mine is None) != (theirs is None):
            differences.append(f"case {index}: measured on one device only")
        if mine is None or theirs is None:
            continue
        gap = _gap(mine[0], theirs[0], max(mine[1], theirs[1]))
        if math.isnan(gap):
            differences.append(f"case {index}: measured cpu {mine[0]!r}, cuda {theirs[0]!r}")
            continue
        worst = max(worst, gap)
    return {"differences": differences, "max_difference": worst}


def read_several(folders: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """:func:`read_claims` of several folders as one; a claim file in two of them is refused."""
    out: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for name, data in read_claims(folder).items():
            if name in out:
                raise NotAResultsFolder(
                    f"{folder}: {CLAIMS}/{name}.json is also in another folder of the same side"
                )
            out[name] = data
    return out


def compare(cpu_results: Path, cuda_results: Path | Sequence[Path]) -> dict[str, Any]:
    """The comparison of the CPU's results folder with the CUDA one(s) (module docstring)."""
    folders = [cuda_results] if isinstance(cuda_results, Path) else list(cuda_results)
    cpu, cuda = read_claims(cpu_results), read_several(folders)
    both = sorted(set(cpu) & set(cuda))
    per_claim = {name: compare_claim(cpu[name], cuda[name]) for name in both}
    return {
        "compared": len(both),
        "only_cpu": sorted(set(cpu) - set(cuda)),
        "only_cuda": sorted(set(cuda) - set(cpu)),
        "differing": {name: c["differences"] for name, c in per_claim.items() if c["differences"]},
        "max_difference": max((c["max_difference"] for c in per_claim.values()), default=0.0),
        "verdicts": {name: [cpu[name]["verdict"], cuda[name]["verdict"]] for name in both},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cpu", type=Path, help="results folder of the CPU run")
    parser.add_argument("cuda", type=Path, nargs="+", help="results folder(s) of the CUDA run")
    parser.add_argument("--json", type=Path, help="also write the comparison to this file")
    args = parser.parse_args(argv)
    try:
        result = compare(args.cpu, args.cuda)
    except NotAResultsFolder as error:
        print(f"compare_devices: {error}", file=sys.stderr)
        return 2
    for name, differences in result["differing"].items():
        print(f"{name}: " + "; ".join(differences))
    for side in ("only_cpu", "only_cuda"):
        if result[side]:
            print(
                f"{side.replace('_', ' on the ')} ({len(result[side])}, not compared): "
                + ", ".join(result[side])
            )
    print(
        f"{result['compared']} claim files compared, {len(result['differing'])} differ; "
        f"largest measured difference {result['max_difference']:.3g} (relative to the larger "
        "of the two numbers and the bound)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 1 if result["differing"] else 0


if __name__ == "__main__":
    sys.exit(main())
