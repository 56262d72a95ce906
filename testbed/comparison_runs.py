"""Rounds to reach a hypergradient error and an outer suboptimality: the papers vs the testbed.

FedNest, LFedNest, FBO-AggITD, FedMSA and HGP (its outer loop, HGP-PL) run at their registered
defaults on the same heterogeneous closed-form bilevel problems (the regression grid's
``bilevel`` problem at seeds :data:`SEEDS`), each from the problem's initial point until both
targets are reached or :data:`ROUND_BUDGET` communication rounds are spent. After every outer
iteration k the run records, against cumulative rounds and oracle calls,

- the relative hypergradient error ``||h_k - grad h(x_{k-1})|| / ||grad h(x_0)||`` of the
  direction ``h_k`` the algorithm stepped along from ``x_{k-1}`` (HGP-PL exposes no ``h``: its
  step is ``x_k = x_{k-1} - alpha n h_k``, so ``h_k = (x_{k-1} - x_k) / (alpha n)``);
- the relative outer suboptimality ``(h(x_k) - h*) / (h(x_0) - h*)``.

The rounds to reach :data:`ERROR_TARGET` and :data:`SUBOPTIMALITY_TARGET` are compared with the
papers' claims (the ratio to FedNest on the same problem):

- AggITD (Xiao & Ji 2023, Table 1, Sec. 5): FBO-AggITD needs fewer rounds than FedNest
  (per iteration ``2N + 3`` against FedNest's ``2N + T + 3``), ratio < 1;
- FedMSA (abstract, Fig. 1(a)): "order-of-magnitude savings in communication rounds", ratio
  <= 0.1;
- LFedNest and HGP: no quantitative claim against FedNest (HGP counts gossip steps over a
  graph, not server rounds).

``testbed check`` writes ``results/comparison/rounds_to_error.csv`` (one row per algorithm,
problem seed and iteration) and ``results/comparison/rounds_to_error.json`` (rounds to each target
and the ratios against the claims). Each (algorithm, seed) run is written under
``results/comparison/runs/`` as soon as it finishes, so an interrupted run resumes.

.. warning:: The papers tuned step sizes per method on their own tasks; here every algorithm
   runs at its registered defaults, so the ratios speak for those settings only.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

ALGORITHMS = ("fednest", "lfednest", "fbo-aggitd", "fedmsa", "hgp-personalization")
BASELINE = "fednest"
SEEDS = (0, 1, 2)
# Why these numbers: at the registered defaults on this grid (partial participation) the
# algorithms level off at relative hypergradient errors ~0.1 and suboptimalities ~1e-2 (FedNest
# reaches 0.13 and 8e-3 within 600 rounds, LFedNest levels at 0.1 and 1.1e-2); tighter targets
# would leave every algorithm but FedMSA "not reached" and the comparison empty. 600 rounds give
# FedNest (~20 rounds per iteration) ~30 iterations and keep the step under a minute.
ROUND_BUDGET = 600
ERROR_TARGET = 1e-1  # relative hypergradient error
SUBOPTIMALITY_TARGET = 1e-2  # relative suboptimality (h(x_k) - h*) / (h(x_0) - h*)
COLUMNS = ("algorithm", "problem_id", "seed", "iteration", "comm_rounds", "oracle_calls",
           "floats_sent", "hypergradient_error", "suboptimality")
PAPER_CLAIMS: dict[str, dict[str, Any]] = {
    "fbo-aggitd": {"bound": 1.0, "claim": "fewer rounds than FedNest (ratio < 1)",
                   "source": "AggITD (Xiao & Ji 2023), Table 1 and Sec. 5"},
    "fedmsa": {"bound": 0.1, "claim": "order-of-magnitude savings over FedNest (ratio <= 0.1)",
               "source": "FedMSA (Tarzanagh et al. 2023), abstract and Fig. 1(a)"},
}
SUBDIR = "comparison"


def _direction(algorithm: Any, problem: Any, before: Any, after: Any) -> torch.Tensor | None:
    """The hypergradient estimate the step from ``before`` to ``after`` used."""
    h = getattr(after, "h", None)
    if h is not None:
        return h
    step_size = getattr(algorithm, "step_size", None)
    if step_size is None:
        return None
    return (before.x - after.x) / (step_size(problem) * problem.n_clients)


def trajectory(name: str, seed: int) -> list[dict[str, Any]]:
    """Rows of one run (iteration 0 first) until both targets are met or the budget is spent."""
    from testbed._algorithms.base import iterate_within_rounds
    from testbed.registry import get_estimator
    from testbed.regression import grid_problems

    problem = grid_problems(seed)["bilevel"]
    algorithm = get_estimator(name).build()
    h_star = float(problem.outer_objective(problem.outer_minimizer()))
    rows: list[dict[str, Any]] = []
    start_gap = start_grad = math.nan
    before = None
    for record in iterate_within_rounds(algorithm, problem, np.random.default_rng([seed, 0]),
                                        ROUND_BUDGET):
        gap = float(problem.outer_objective(record.x)) - h_star
        if before is None:
            start_gap = gap
            start_grad = max(float(problem.exact_hypergradient(record.x).norm()), 1e-300)
            error = math.nan
        else:
            grad = problem.exact_hypergradient(before.x)
            h = _direction(algorithm, problem, before, record.state)
            error = math.nan if h is None else float((h - grad).norm()) / start_grad
        calls = record.calls
        rows.append({"algorithm": name, "problem_id": problem.id, "seed": seed,
                     "iteration": record.iteration, "comm_rounds": calls.comm_rounds,
                     "oracle_calls": calls.oracle_calls, "floats_sent": calls.floats_sent,
                     "hypergradient_error": error, "suboptimality": gap / start_gap})
        before = record.state
        if not (math.isfinite(rows[-1]["suboptimality"]) and torch.isfinite(record.x).all()):
            break  # diverged: the rows so far say so
        if _first(rows, "hypergradient_error", ERROR_TARGET) is not None and \
                _first(rows, "suboptimality", SUBOPTIMALITY_TARGET) is not None:
            break
    return rows


def _first(rows: list[dict[str, Any]], column: str, target: float) -> float | None:
    """Cumulative rounds at the first iteration whose ``column`` is at most ``target``."""
    for r in rows:
        value = float(r[column])
        if math.isfinite(value) and value <= target:
            return float(r["comm_rounds"])
    return None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds to each target per algorithm and seed, and the ratios against the claims."""
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        runs.setdefault((str(r["algorithm"]), int(r["seed"])), []).append(r)
    per_run = []
    for (name, seed), run in sorted(runs.items()):
        per_run.append({
            "algorithm": name, "seed": seed, "problem_id": run[0]["problem_id"],
            "rounds_spent": max(float(r["comm_rounds"]) for r in run),
            "rounds_to_error": _first(run, "hypergradient_error", ERROR_TARGET),
            "rounds_to_suboptimality": _first(run, "suboptimality", SUBOPTIMALITY_TARGET),
            "diverged": not math.isfinite(float(run[-1]["suboptimality"])),
        })
    index = {(p["algorithm"], p["seed"]): p for p in per_run}
    ratios = []
    for p in per_run:
        base = index.get((BASELINE, p["seed"]))
        if base is None or p["algorithm"] == BASELINE:
            continue
        for target in ("rounds_to_error", "rounds_to_suboptimality"):
            mine, theirs = p[target], base[target]
            if mine is None and theirs is None:
                ratio, note = None, "neither reaches the target"
            elif mine is None:
                ratio, note = None, f"{p['algorithm']} does not reach the target"
            elif theirs is None:
                # FedNest's true count exceeds its budget: the ratio is at most this
                ratio, note = mine / base["rounds_spent"], "upper bound (FedNest not reached)"
            else:
                ratio, note = mine / theirs, ""
            claim = PAPER_CLAIMS.get(p["algorithm"])
            holds = None
            if claim is not None and mine is None and theirs is not None:
                holds = False
            elif claim is not None and ratio is not None:
                holds = ratio < claim["bound"] if claim["bound"] == 1.0 else \
                    ratio <= claim["bound"]
            ratios.append({"algorithm": p["algorithm"], "seed": p["seed"], "target": target,
                           "ratio_to_fednest": ratio, "note": note,
                           "paper_claim": claim["claim"] if claim else None,
                           "paper_bound": claim["bound"] if claim else None,
                           "paper_source": claim["source"] if claim else None,
                           "claim_holds": holds})
    return {"algorithms": list(ALGORITHMS), "baseline": BASELINE, "seeds": list(SEEDS),
            "round_budget": ROUND_BUDGET, "error_target": ERROR_TARGET,
            "suboptimality_target": SUBOPTIMALITY_TARGET, "runs": per_run, "ratios": ratios}


def fingerprint(name: str, seed: int) -> str:
    """Changes with the algorithm's defaults, the budget or the targets (stale runs redone)."""
    from testbed.registry import get_estimator

    info = get_estimator(name)
    text = (f"{name}|{seed}|{sorted(info.defaults.items())!r}|{ROUND_BUDGET}|{ERROR_TARGET}|"
            f"{SUBOPTIMALITY_TARGET}")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    os.replace(tmp, path)


def _read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def run_all(results_dir: Path, resume: bool = True, progress: bool = True) -> Path:
    """Run (or resume) every algorithm on every seed; write the CSV and the summary JSON."""
    from tqdm import tqdm

    out = Path(results_dir) / SUBDIR
    runs = [(name, seed) for name in ALGORITHMS for seed in SEEDS]
    rows: list[dict[str, Any]] = []
    bar = tqdm(runs, desc="rounds to error", unit="run", disable=not progress)
    for name, seed in bar:
        bar.set_postfix_str(f"{name} seed {seed}")
        path = out / "runs" / f"{name}@{seed}.csv"
        stamp = path.with_suffix(".fingerprint")
        if not (resume and path.exists() and stamp.exists()
                and stamp.read_text() == fingerprint(name, seed)):
            _write_csv(path, trajectory(name, seed))
            stamp.write_text(fingerprint(name, seed))
        rows.extend(_read_csv(path))
    _write_csv(out / "rounds_to_error.csv", rows)
    summary = out / "rounds_to_error.json"
    tmp = summary.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summarise(rows), indent=1))
    os.replace(tmp, summary)
    return summary
