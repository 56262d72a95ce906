"""The comparisons' table: every comparison, rule, role and seed, recorded and summarised.

``testbed check`` (through :func:`run_all`) runs each comparison of
:data:`~theory_checks.comparison.runs.TABLE` on the evaluation seeds, with the tuned and the
prescribed steps, writes one CSV per run under ``results/comparison/`` (resuming by
fingerprint) and the summary the report reads. Every definition it uses (the target, the
budget, the tuning, reaching) is :mod:`theory_checks.comparison.runs`'s, read from that module
when a run starts.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from problems import QuadraticBilevel
from results_format import atomic_write
from results_format.resume import fingerprint as fingerprint_of
from results_format.resume import is_fresh_file
from results_format.resume import read_fresh
from results_format.resume import write_fresh
from results_format.resume import write_json
from results_format.resume import write_stamped
from testbed.progress import Progress
from testbed.registry import get_estimator
from theory_checks.comparison import reaching
from theory_checks.comparison import runs as definitions
from theory_checks.units import driver_dtype
from theory_checks.units import require_dtype
from theory_checks.units import run_in_process

SEEDS = (0, 1, 2, 3, 4, 5)  # the table's evaluation problems (family seeds)
TUNING_SEEDS = (1000, 1001, 1002)  # the table's tuning problems: draws no evaluation uses
COLUMNS = (
    "comparison",
    "rule",
    "role",
    "algorithm",
    "problem_id",
    "seed",
    "step_multiple",
    "iteration",
    "comm_rounds",
    "oracle_calls",
    "floats_sent",
    "stationarity",
    "hypergradient_error",
    "suboptimality",
)


def _family_problem(comparison: definitions.Comparison, seed: int) -> Any:
    return QuadraticBilevel.random(seed=seed, **comparison.family)


def table_tuning(comparison: definitions.Comparison) -> dict[str, definitions.Tuning]:
    """The table's tuning of the candidate and of FedNest on the tuning problems."""
    problems = [_family_problem(comparison, seed) for seed in TUNING_SEEDS]
    out = {}
    for role, name, config in (
        ("candidate", comparison.candidate, comparison.candidate_config),
        ("baseline", definitions.BASELINE, comparison.baseline_config),
    ):
        baseline = int(role == "baseline")

        def rng_for(i: int, k: int, baseline: int = baseline) -> np.random.Generator:
            return np.random.default_rng([TUNING_SEEDS[i], k, baseline])

        build = functools.partial(definitions.build_algorithm, name, {})
        out[role] = definitions.tune(build, name, config, problems, rng_for)
    return out


def table_run(
    comparison: definitions.Comparison, rule: str, role: str, seed: int, multiple: float | None
) -> list[dict[str, Any]]:
    """Rows of one run of the table (``multiple``: the tuned ``c``; ``None``: prescribed)."""
    name = comparison.candidate if role == "candidate" else definitions.BASELINE
    config = comparison.candidate_config if role == "candidate" else comparison.baseline_config
    problem = _family_problem(comparison, seed)
    algorithm = definitions.build_algorithm(
        name, config, **definitions.step_kwargs(name, problem, multiple)
    )
    rng = np.random.default_rng([seed, int(role == "baseline")])
    reach = reaching.run_to_target(algorithm, problem, rng, record=True)
    common = {
        "comparison": comparison.key,
        "rule": rule,
        "role": role,
        "algorithm": name,
        "problem_id": problem.id,
        "seed": seed,
        "step_multiple": "prescribed" if multiple is None else multiple,
    }
    return [{**common, **row} for row in reach.rows]


def _per_run(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows grouped by run (comparison, rule, role, seed), in that order: each
    run's rounds to the target (:func:`first_reached`), capped, and whether it diverged."""
    runs: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        if not r.get("comparison") or r.get("stationarity") in (None, ""):
            continue  # a row of the earlier table (no comparison, no stationarity): not ours
        runs.setdefault(
            (str(r["comparison"]), str(r["rule"]), str(r["role"]), int(r["seed"])), []
        ).append(r)
    per_run = []
    for (key, rule, role, seed), run in sorted(runs.items()):
        run.sort(key=lambda r: int(r["iteration"]))
        reached = definitions.first_reached(run)
        per_run.append(
            {
                "comparison": key,
                "rule": rule,
                "role": role,
                "algorithm": run[0]["algorithm"],
                "seed": seed,
                "problem_id": run[0]["problem_id"],
                "step_multiple": run[0]["step_multiple"],
                "rounds_spent": float(run[-1]["comm_rounds"]),
                "rounds_to_target": reached,
                "capped_rounds": reaching.CAP if reached is None else min(reached, reaching.CAP),
                "diverged": not math.isfinite(float(run[-1]["stationarity"]))
                or float(run[-1]["stationarity"]) >= reaching.DIVERGED,
                # the old report's columns: the one target is the stationarity target
                "rounds_to_error": reached,
                "rounds_to_suboptimality": reached,
            }
        )
    return per_run


def _seed_note(candidate: str, cand: dict[str, Any], base: dict[str, Any], trivial: bool) -> str:
    """Why a seed's ratio is not a plain ratio of rounds: a run capped, or FedNest solving the
    problem in one outer iteration (``trivial``: outside the claims' population)."""
    note = (
        "neither reaches the target (both capped)"
        if cand["rounds_to_target"] is None and base["rounds_to_target"] is None
        else f"{candidate} does not reach (capped)"
        if cand["rounds_to_target"] is None
        else "FedNest does not reach (capped)"
        if base["rounds_to_target"] is None
        else ""
    )
    if trivial:
        note = "; ".join(
            n
            for n in (
                note,
                "FedNest solves it in one outer iteration: outside the claims' population",
            )
            if n
        )
    return note


def _ratio_summary(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """The geometric mean of the seeds' ratios and its 95% interval over the claims' population
    (the seeds FedNest does not solve in one outer iteration), and over every seed."""
    summary: dict[str, Any] = {
        "geometric_mean_ratio": None,
        "interval_95": None,
        "geometric_mean_ratio_all": None,
    }
    population = [s for s in per_seed if not s["fednest_one_iteration"]]
    if population:
        mean, low, high = definitions.log_ratio_evidence_interval(
            math.log(s["ratio"]) for s in population
        )
        summary.update(
            {
                "geometric_mean_ratio": math.exp(mean),
                "interval_95": None if math.isnan(low) else [math.exp(low), math.exp(high)],
            }
        )
    if per_seed:
        summary["geometric_mean_ratio_all"] = math.exp(
            float(np.mean([math.log(s["ratio"]) for s in per_seed]))
        )
    return summary


def _ratio_row(
    key: str, comparison: Any, rule: str, seed: int, ratio: float, note: str
) -> dict[str, Any]:
    """A seed's ratio in the earlier table's schema (``ratios``), with the paper's claim and
    whether the ratio is within it."""
    return {
        "algorithm": comparison.candidate,
        "seed": seed,
        "comparison": key,
        "rule": rule,
        "target": "rounds_to_target",
        "ratio_to_fednest": ratio,
        "note": note,
        "paper_claim": comparison.claim,
        "paper_bound": comparison.bound,
        "paper_source": comparison.source,
        "claim_holds": ratio < comparison.bound
        if comparison.bound == 1.0
        else ratio <= comparison.bound,
    }


def _comparison_header(
    key: str, comparison: Any, rule: str, tuning: Mapping[str, Any]
) -> dict[str, Any]:
    """What a comparison's entry says of its definition: the algorithms, the paper's claim
    and bound, the setting, the configurations and the tuning under ``rule``."""
    return {
        "comparison": key,
        "rule": rule,
        "candidate": comparison.candidate,
        "baseline": definitions.BASELINE,
        "bound": comparison.bound,
        "claim": comparison.claim,
        "source": comparison.source,
        "setting": comparison.setting,
        "candidate_config": dict(comparison.candidate_config),
        "baseline_config": dict(comparison.baseline_config),
        "rounds_per_iteration": {
            "candidate": comparison.candidate_rounds_per_iteration(),
            "baseline": comparison.baseline_rounds_per_iteration(),
        },
        "family": dict(comparison.family),
        "tuning": dict(tuning),
        "claimed": key in definitions.COMPARISONS,
    }


def summarise(
    rows: list[dict[str, Any]],
    tunings: Mapping[str, Mapping[str, Any]] | None = None,
    one_iteration: Mapping[str, Mapping[int, bool]] | None = None,
) -> dict[str, Any]:
    """Rounds to the target per run, per-problem ratios and their geometric mean with a 95%
    interval, per comparison and step rule; also the old keys (``runs``, ``ratios``).

    ``one_iteration[key][seed]``: FedNest solves that problem in one outer iteration, so it is
    outside the claims' population (:func:`draw_problem`); the geometric mean and its interval
    are over the other seeds (``geometric_mean_ratio_all``: over every seed)."""
    per_run = _per_run(rows)
    index = {(p["comparison"], p["rule"], p["role"], p["seed"]): p for p in per_run}
    comparisons = []
    ratios = []
    for key, comparison in definitions.TABLE.items():
        for rule in definitions.RULES:
            per_seed = []
            for seed in sorted(
                {p["seed"] for p in per_run if p["comparison"] == key and p["rule"] == rule}
            ):
                cand = index.get((key, rule, "candidate", seed))
                base = index.get((key, rule, "baseline", seed))
                if cand is None or base is None:
                    continue
                ratio = cand["capped_rounds"] / base["capped_rounds"]
                trivial = bool((one_iteration or {}).get(key, {}).get(seed, False))
                note = _seed_note(comparison.candidate, cand, base, trivial)
                per_seed.append(
                    {
                        "seed": seed,
                        "candidate_rounds": cand["rounds_to_target"],
                        "baseline_rounds": base["rounds_to_target"],
                        "ratio": ratio,
                        "fednest_one_iteration": trivial,
                        "note": note,
                    }
                )
                ratios.append(_ratio_row(key, comparison, rule, seed, ratio, note))
            tuning = (tunings or {}).get(key, {}) if rule == "tuned" else {}
            comparisons.append(
                {
                    **_comparison_header(key, comparison, rule, tuning),
                    "per_seed": per_seed,
                    **_ratio_summary(per_seed),
                }
            )
    return {
        "target": {
            "quantity": "relative stationarity ||grad h(x_k)|| / ||grad h(x_0)||",
            "value": reaching.TARGET,
            "reached": "the rounds R at the end of the first iteration from which the "
            "relative stationarity stays <= the target at every later "
            "iteration, held through round 2R within the budget",
            "round_budget": reaching.ROUND_BUDGET,
            "cap": reaching.CAP,
        },
        "tuning_rule": {
            "grid": list(definitions.STEP_GRID),
            "step": "alpha = c / L_h; inner and Neumann/ITD steps 1 / l_g,1",
            "selection": "c minimising the total R over the tuning problems "
            f"(seeds {list(TUNING_SEEDS)}), ties: the smaller c",
        },
        "comparisons": comparisons,
        # keys of the earlier table, kept so that readers of the old schema still render
        "algorithms": sorted({p["algorithm"] for p in per_run}),
        "baseline": definitions.BASELINE,
        "seeds": list(SEEDS),
        "round_budget": reaching.ROUND_BUDGET,
        "error_target": reaching.TARGET,
        "suboptimality_target": reaching.TARGET,
        "runs": per_run,
        "ratios": ratios,
    }


def fingerprint(*parts: Any) -> str:
    """Changes with the definitions (target, budget, grid) and the run's own parameters."""
    return fingerprint_of(
        *(repr(p) for p in (*parts, reaching.TARGET, reaching.ROUND_BUDGET, definitions.STEP_GRID))
    )


def _comparison_fingerprint(comparison: definitions.Comparison) -> str:
    defaults = [
        sorted(get_estimator(n).defaults.items())
        for n in (comparison.candidate, definitions.BASELINE)
    ]
    return fingerprint(dataclasses.asdict(comparison), defaults, SEEDS, TUNING_SEEDS)


def _csv_text(rows: list[dict[str, Any]]) -> str:
    with io.StringIO(newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
        return handle.getvalue()


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write(path, _csv_text(rows))


def _read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


#: How the comparison's JSON files are written (``json.dumps`` options).
JSON_OPTIONS: dict[str, Any] = {"indent": 1, "allow_nan": False}


def _atomic_json(path: Path, data: Any) -> None:
    write_json(path, data, **JSON_OPTIONS)


def _tuning_record(comparison: definitions.Comparison) -> dict[str, Any]:
    """What ``runs/<key>@tuning.json`` holds besides its fingerprint: each role's tuning and
    which evaluation problems FedNest solves in one outer iteration."""
    return {
        **{role: t.describe() for role, t in table_tuning(comparison).items()},
        "one_iteration": {
            str(seed): definitions.solved_in_one_iteration(
                comparison, _family_problem(comparison, seed)
            )
            for seed in SEEDS
        },
    }


@dataclasses.dataclass(frozen=True)
class TuningTask:
    """The tuning record of one comparison of :data:`~theory_checks.comparison.runs.TABLE`, a
    unit of work for an executor (``testbed_app.executors``): it names the comparison by key,
    so it pickles to a worker, and carries the driver's torch default dtype (checked there)."""

    key: str
    default_dtype: str = "float64"

    def __call__(self) -> dict[str, Any]:
        require_dtype(self.default_dtype)
        return _tuning_record(definitions.TABLE[self.key])


@dataclasses.dataclass(frozen=True)
class TableRunTask:
    """One run of the table (comparison key, step rule, role, evaluation seed, step multiple)
    as a unit of work: calling it gives the run's CSV text."""

    key: str
    rule: str
    role: str
    seed: int
    multiple: float | None
    default_dtype: str = "float64"

    def __call__(self) -> str:
        require_dtype(self.default_dtype)
        return _csv_text(
            table_run(definitions.TABLE[self.key], self.rule, self.role, self.seed, self.multiple)
        )


def run_all(
    results_dir: Path,
    resume: bool = True,
    progress: bool = True,
    execute: Callable[[Sequence[Callable[[], Any]]], Iterable[tuple[int, Any]]] | None = None,
) -> Path:
    """Run (or resume) every comparison, both step rules, every seed; write the CSV and the
    summary JSON (``comparison/rounds_to_error.{csv,json}``, the earlier names).

    The tunings and then the runs go through ``execute`` (an executor's ``run``; in this
    process by default); the driver writes what comes back, each file atomically with its
    fingerprint, so the files do not depend on where the work ran and an interrupted table
    resumes."""
    execute = execute or run_in_process
    dtype = driver_dtype()
    out = Path(results_dir) / definitions.SUBDIR
    tuning_paths = {key: out / "runs" / f"{key}@tuning.json" for key in definitions.TABLE}
    tuning_stamps = {key: _comparison_fingerprint(c) for key, c in definitions.TABLE.items()}
    records: dict[str, dict[str, Any]] = {}
    for key, path in tuning_paths.items():
        saved = read_fresh(path, tuning_stamps[key], sealed=True) if resume else None
        if saved is not None:
            records[key] = saved
    missing = [key for key in definitions.TABLE if key not in records]
    tuning_tasks = [TuningTask(key, dtype) for key in missing]
    for index, computed in Progress(
        execute(tuning_tasks),
        total=len(tuning_tasks),
        desc="rounds to target: tuning",
        unit="comparison",
        enabled=progress and bool(tuning_tasks),
    ):
        key = missing[index]
        records[key] = write_fresh(tuning_paths[key], tuning_stamps[key], computed, **JSON_OPTIONS)
    tunings = {
        key: {role: records[key][role] for role in ("candidate", "baseline")}
        for key in definitions.TABLE
    }
    trivial = {
        key: {int(seed): flag for seed, flag in records[key]["one_iteration"].items()}
        for key in definitions.TABLE
    }

    runs = []  # (path, stamp, task) in table order
    for key in definitions.TABLE:
        for rule in definitions.RULES:
            for role in ("candidate", "baseline"):
                for seed in SEEDS:
                    multiple = tunings[key][role]["multiple"] if rule == "tuned" else None
                    if rule == "tuned" and multiple is None:
                        multiple = 1.0  # no grid step reached on the tuning problem: the c
                    path = out / "runs" / f"{key}@{rule}@{role}@{seed}.csv"
                    stamp = fingerprint(tuning_stamps[key], rule, role, seed, multiple)
                    runs.append((path, stamp, TableRunTask(key, rule, role, seed, multiple, dtype)))
    pending = [
        i for i, (path, stamp, _) in enumerate(runs) if not (resume and is_fresh_file(path, stamp))
    ]

    def name(task: TableRunTask) -> str:
        return f"{task.key} {task.rule} {task.role} seed {task.seed}"

    with Progress(
        total=len(pending),
        desc="rounds to target",
        unit="run",
        enabled=progress and bool(pending),
        names=[name(runs[i][2]) for i in pending],
    ) as bar:  # names the run running
        for index, text in execute([runs[i][2] for i in pending]):
            path, stamp, task = runs[pending[index]]
            write_stamped(path, text, stamp)
            bar.finish(name(task))
    rows = [row for path, _, _ in runs for row in _read_csv(path)]
    _write_csv(out / "rounds_to_error.csv", rows)
    summary = out / "rounds_to_error.json"
    _atomic_json(summary, summarise(rows, tunings, trivial))
    return summary
