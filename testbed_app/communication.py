"""Communication per outer iteration of every registered algorithm, against its paper's formula.

For each registered algorithm (``role == "algorithm"``) at its registered defaults, a short run
on the regression grid's problem (:func:`testbed_app.regression.grid_problems`, seed 0, the first
kind it supports) records from the ledger the rounds of every outer iteration and the floats sent
each way, next to the formula of its paper with the parameters substituted:

=====================  ==========================================================  ============
algorithm (class)      formula (rounds per outer iteration)                        source
=====================  ==========================================================  ============
FedNest, svrg/svrg     ``2T + N + 3`` (deterministic N); ``2T + N' + 3`` (random)  FedNest Tab. 2
FedNest, svrg/local    ``2T + 1``  (LFedNest_SVRG)                                 FedNest Tab. 2
FedNest, sgd/svrg      ``T + N + 3`` (FedNest_SGD; ``T + N' + 3`` random)          FedNest Tab. 2
FedNest, sgd/local     ``T + 1`` (LFedNest)                                        FedNest Tab. 2
FedNest, minimax       ``2T + 2``                                                  FedNest 2.5
FBO-AggITD             ``2N + 3`` (FedSVRG lower level); ``N + 3`` (SGD)           AggITD Tab. 1
FedMSA                 ``2`` (one local round + one aggregation)                   FedMSA Sec. 3
HGP-PL                 ``M S + T`` gossip steps (M Neumann terms x S Push-Sum      HGP Alg. 2
                       steps, plus T SGP steps of the inner solve)
=====================  ==========================================================  ============

With FedNest's random truncation the formula is evaluated at each iteration's drawn ``N'``
(Alg. 3 as listed uses ``N' + 1`` rounds; the paper's ``2T + N + 3`` is then an upper bound,
the erratum checked by ``fednest.rounds.paper_count_random``). An algorithm of a class not listed
here gets its ``rounds_per_iteration()`` if it declares one, marked "declared, no paper formula".
``testbed check`` writes the table to ``results/communication.json``; the report reads it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from results_format import atomic_write
from testbed.info import EstimatorInfo

ITERATIONS = 5  # why 5: random N' varies per iteration; five show the spread in a second
FILE = "communication.json"
KIND_ORDER = ("bilevel", "minimax", "compositional")


@dataclasses.dataclass(frozen=True)
class Formula:
    """A paper's rounds-per-iteration formula with its parameters substituted."""

    text: str
    parameters: dict[str, int]
    source: str
    value: int | None  # None when it varies per iteration (random N')
    note: str = ""


def paper_formula(algorithm: Any) -> Formula | None:
    """The paper's formula for ``algorithm`` (an :class:`OuterAlgorithm`), or None."""
    from testbed.algorithms.aggitd import FBOAggITD
    from testbed.algorithms.fedmsa import FedMSA
    from testbed.algorithms.fednest import FedNest
    from testbed.decentralized.personalization import HGPPersonalization

    if isinstance(algorithm, FedNest):
        T, N = algorithm.inner_steps, algorithm.neumann_terms
        inner = "2T" if algorithm.inner_method == "svrg" else "T"
        random = algorithm.truncation == "random"
        if algorithm.outer_method == "svrg":
            text = f"{inner} + N' + 3" if random else f"{inner} + N + 3"
            params = {"T": T, "N": N}
        elif algorithm.outer_method == "local":
            text, params = f"{inner} + 1", {"T": T}
        else:
            text, params = f"{inner} + 2", {"T": T}
        value = None if "N'" in text else algorithm.rounds_per_iteration()
        stated = text.replace("N'", "N")
        note = (f"N' drawn per iteration (Alg. 3); the paper's {stated} is an upper bound"
                if value is None else "")
        return Formula(text, params, "FedNest (Tarzanagh et al. 2022), Table 2 / Sec. 2.5",
                       value, note)
    if isinstance(algorithm, FBOAggITD):
        svrg = algorithm.lower_solver == "svrg"
        return Formula("2N + 3" if svrg else "N + 3", {"N": algorithm.inner_steps},
                       "AggITD (Xiao & Ji 2023), Table 1" + ("" if svrg else "; Fig. 4 SGD"),
                       algorithm.rounds_per_iteration())
    if isinstance(algorithm, FedMSA):
        value = algorithm.rounds_per_iteration()
        if value is None:
            return None
        return Formula("2", {}, "FedMSA (Tarzanagh et al. 2023), Sec. 3", value)
    if isinstance(algorithm, HGPPersonalization):
        est = algorithm.estimator
        steps = int(getattr(est.inner, "steps", 0))
        M, S = est.neumann_terms, est.pushsum_steps
        return Formula("M S + T", {"M": M, "S": S, "T": steps},
                       "HGP (Terashita & Hara), Alg. 2 with SGP inner solve", M * S + steps,
                       "gossip steps over the graph, not server rounds")
    return None


def _per_iteration_formula(formula: Formula, state: Any) -> int | None:
    """The formula at one iteration (random ``N'`` from the state), or its fixed value."""
    if formula.value is not None:
        return formula.value
    index = getattr(state, "truncation_index", None)
    if index is None:
        return None
    T, inner = formula.parameters["T"], formula.text.split(" + ")[0]
    return (2 * T if inner == "2T" else T) + int(index) + 3


def measure(info: EstimatorInfo) -> dict[str, Any]:
    """One row of the table: ledger rounds per iteration against the paper's formula."""
    from testbed.algorithms.base import run_algorithm
    from testbed_app.regression import grid_problems

    kind = next(k for k in KIND_ORDER if k in info.supports)
    problem = grid_problems(0)[kind]
    algorithm = info.build()
    records = run_algorithm(algorithm, problem, ITERATIONS, np.random.default_rng(0))
    rounds = [b.calls.comm_rounds - a.calls.comm_rounds
              for a, b in zip(records[:-1], records[1:], strict=True)]
    last = records[-1].calls
    formula = paper_formula(algorithm)
    expected: list[int | None] = []
    if formula is not None:
        expected = [_per_iteration_formula(formula, r.state) for r in records[1:]]
    declared = algorithm.rounds_per_iteration()
    agrees = (all(e == m for e, m in zip(expected, rounds, strict=True))
              if expected and None not in expected else None)
    total = max(last.comm_rounds, 1)
    return {
        "algorithm": info.name, "paper": info.paper, "reference": info.reference,
        "problem_kind": kind, "problem_id": problem.id,
        "formula": formula.text if formula else None,
        "formula_parameters": formula.parameters if formula else {},
        "formula_source": formula.source if formula else None,
        "formula_value": formula.value if formula else declared,
        "formula_per_iteration": expected,
        "declared": declared,
        "measured_rounds": rounds,
        "agrees": agrees,
        "floats_per_round": last.floats_sent / total,
        "floats_up_per_round": last.floats_up / total,
        "floats_down_per_round": last.floats_down / total,
        "floats_per_iteration": last.floats_sent / ITERATIONS,
        "note": (formula.note if formula else
                 "declared by rounds_per_iteration(), no paper formula" if declared is not None
                 else "no formula stated"),
    }


def fingerprint(infos: Sequence[EstimatorInfo]) -> str:
    """Changes when the algorithms or their defaults change, so stale tables are redone."""
    text = "|".join(f"{i.name}:{sorted(i.defaults.items())!r}:{i.cls.__qualname__}"
                    for i in infos) + f"|{ITERATIONS}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_table(results_dir: Path, resume: bool = True, progress: bool = True) -> Path:
    """Measure every registered algorithm and write ``results/communication.json``."""
    from tqdm import tqdm

    from testbed.registry import ESTIMATOR_DB

    infos = [i for i in ESTIMATOR_DB if i.role == "algorithm"]
    path = Path(results_dir) / FILE
    stamp = fingerprint(infos)
    if resume and path.exists():
        try:
            if json.loads(path.read_text()).get("fingerprint") == stamp:
                return path
        except json.JSONDecodeError:
            pass
    rows = [measure(i) for i in tqdm(infos, desc="communication", unit="algorithm",
                                     disable=not progress)]
    payload = {"fingerprint": stamp, "iterations": ITERATIONS, "seed": 0, "rows": rows}
    atomic_write(path, json.dumps(payload, indent=1))
    return path
