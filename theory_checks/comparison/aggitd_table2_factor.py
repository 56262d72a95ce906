r"""A paper's headline round savings, decided under its own protocol at the closest scale the
data allow: rounds to 90% test accuracy on an MLP, candidate against FedNest.

**AggITD Table 2** (MNIST, MLP hyper-representation, SVRG-type, 100 clients with C = 0.1):
FBO-AggITD reaches 90% test accuracy in 2.49-3.13 times fewer communication rounds than FedNest,
per setting (iid / non-iid, tau = 1 / 5; "more than 2-3 times fewer"). (FedMSA's Fig. 4 factor
needs no such claim: at the closest scale its FedNest baseline does not reach 90% within 2,100
rounds while FedMSA does within 28, a factor above 75; the replication configs record both, and
``comparison.fedmsa_tenfold_fewer_rounds`` decides the tenfold on closed-form problems.)

A paper's table number is a measurement at the paper's scale; the closed-form comparisons
(:mod:`theory_checks.comparison.common`) measure another quantity on another problem, so they
decide the weaker per-iteration readings and never these numbers. Here each setting is run as
the paper ran it, at the closest scale the offline data allow (scikit-learn's 8x8 digits instead
of MNIST, 20 clients with 10 per round instead of 100 with 10, full local batches: the
differences are the claim's ``scale``), with the paper's step sizes, over several seeds (the
workload's split, initial point and the participants). The settings are the replication
configs' (``configs/aggitd_table2_*.toml``, ``configs/fedmsa*_rounds_to_90.toml``; a test keeps
them equal).

**What is measured.** For a seed, each algorithm runs its outer iterations; ``R`` is the
communication rounds at the first evaluation with test accuracy >= 0.9 (the replication's
``rounds_to_accuracy``). The factor is ``R_FedNest / R_candidate``. A run that never reaches
gives a bound: a candidate that misses after ``B_c`` rounds makes the factor at most
``R_FedNest / B_c``; a FedNest that misses after ``B_F`` rounds makes it at least
``B_F / R_candidate``. **The claim holds on a setting when some seed's factor certainly reaches
the bound** (the reading most charitable to the paper, which reports one run), fails when every
seed's factor is certainly below it (a refutation needs every seed), and a setting where runs
that never reached leave the factor on both sides is not measured (rejected, not counted).

**The parameter that decides it.** AggITD does not report the HessIV length ``T`` of its FedNest
runs, and FedNest spends ``2N + T + 3`` rounds per iteration against FBO-AggITD's ``2N + 3``:
the factor grows with ``T``. The claim is read at the values FedNest's own code runs
(:data:`FEDNEST_T`: ucr-optml/FedNest's ``--neumann`` default 5, used by its Fig. 2
hyper-representation runs; 3 in its ``reproduce/fig3.sh`` and in FedMSA's FedNest baseline) and
at ``T = 25``, a value no public run uses: on the fast profile's row (non-iid, tau = 5, seed 0;
FBO-AggITD 507 rounds) FedNest needs 900, 752 and 1634 rounds at T = 5, 3 and 25, factors 1.78,
1.48 and 3.22 against Table 2's 2.49; on the other rows (seed 0) 1.20-1.36 at T = 5 and 3 and
2.71-2.83 at T = 25, above 2 everywhere, above the printed factor on the non-iid tau = 1 row
(2.71 >= 2.65) and below it on the iid rows (2.71 < 3.13, 2.83 < 3.08). So the claim is a
replication record whose verdict the unreported ``T`` decides, not a refutation: it holds under
the readings with ``T = 25`` and names the readings with ``T = 5`` and ``T = 3`` that fail.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems.workloads import WorkloadRecipe
from results_format.verdicts import ABOUT_TABLE
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.base import model_point
from testbed.federation.context import FederatedContext
from testbed.registry import get_estimator
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import PerProfile
from theory_checks.claim import Perturbation
from theory_checks.claim import SeriesPoint
from theory_checks.claim import known_case
from theory_checks.hypotheses import Reading
from theory_checks.perturbed_variants import registry_variant

THRESHOLD = 0.9  # test accuracy, the papers' "rounds to 90%"


@dataclasses.dataclass(frozen=True)
class Run:
    """One algorithm as the paper's setting runs it: registry name, parameters, iterations."""

    algorithm: str
    params: Mapping[str, Any]
    iterations: int


@dataclasses.dataclass(frozen=True)
class Setting:
    """One row of a paper's headline: the workload, the candidate's and FedNest's runs, and the
    paper's numbers (``paper_factor = R_FedNest / R_candidate``)."""

    name: str
    workload: WorkloadRecipe
    candidate: Run
    baseline: Run
    paper_rounds: tuple[float, float]  # (candidate, FedNest), as the paper reports them
    paper_factor: float


def _table2(scheme: str, tau: int, paper: tuple[float, float]) -> Setting:
    """AggITD Table 2, one row (configs/aggitd_table2_{,fednest_}<scheme>_tau<tau>.toml)."""
    split: dict[str, Any] = (
        {"scheme": "iid", "n_clients": 20}
        if scheme == "iid"
        else {"scheme": "shards", "shards_per_client": 2, "n_clients": 20}
    )
    validation = 0.5 if scheme == "iid" else 0.2
    iterations = 300 if tau == 1 else 60
    # FBO-AggITD steps tau beta and tau alpha (Algs. 2 and 4 step beta / tau, alpha / tau), so
    # its local steps equal the unscaled (0.003, 0.01) FedNest takes
    candidate = Run(
        "fbo-aggitd",
        {
            "inner_steps": 5,
            "local_steps": tau,
            "inner_step_size": 0.003 * tau,
            "outer_step_size": 0.01 * tau,
            "neumann_step_size": 0.01,
            "participation": 0.5,
        },
        iterations,
    )
    baseline = Run(
        "fednest",
        {
            "inner_steps": 5,
            "neumann_terms": 5,
            "local_steps": tau,
            "inner_step_size": 0.003,
            "outer_step_size": 0.01,
            "neumann_step_size": 0.01,
            "truncation": "deterministic",
            "scale_by_steps": False,
            "participation": 0.5,
        },
        iterations,
    )
    workload = WorkloadRecipe(
        "hyper_representation", "digits", split, {"validation_fraction": validation}
    )
    return Setting(
        f"{'non-iid' if scheme != 'iid' else 'iid'}, tau = {tau}",
        workload,
        candidate,
        baseline,
        paper,
        paper[1] / paper[0],
    )


TABLE2 = {
    "iid_tau1": _table2("iid", 1, (530, 1630)),
    "iid_tau5": _table2("iid", 5, (195, 610)),
    "noniid_tau1": _table2("noniid", 1, (520, 1380)),
    "noniid_tau5": _table2("noniid", 5, (305, 760)),
}

SETTINGS = dict(TABLE2)


@dataclasses.dataclass(frozen=True)
class Reach:
    """One run to the threshold: ``rounds`` at the first evaluation at or above it (``None``
    when never), the rounds spent, and the final test accuracy."""

    rounds: float | None
    budget: float
    final_accuracy: float


# Runs are deterministic given (algorithm as built, workload, seed): the readings of a claim, its
# confirmation and a replay measure the same runs again and reuse them.
_RUNS: dict[tuple[str, str, int], Reach] = {}


def run_to_threshold(algorithm: Any, workload: WorkloadRecipe, seed: int, iterations: int) -> Reach:
    """Run ``algorithm`` on the workload of ``seed`` for ``iterations`` outer iterations,
    evaluating the test accuracy after each (the replication configs' ``eval_every = 1``)."""
    recipe = workload.with_seed(seed)
    key = (repr(algorithm), recipe.id + repr(sorted(recipe.options.items())), iterations)
    if key in _RUNS:
        return _RUNS[key]
    problem = recipe.build()
    ctx = FederatedContext(
        problem, np.random.default_rng(seed), algorithm.participation, algorithm.batch_size
    )
    algorithm.check_problem(problem)
    state = algorithm.init(problem)
    reached, accuracy = None, math.nan
    for _ in range(iterations):
        state = algorithm.step(ctx, state)
        x, y = model_point(state, problem.dim_y)
        with torch.no_grad():
            accuracy = float(problem.evaluate(x, y)["test_accuracy"])
        if not math.isfinite(accuracy):
            break
        if reached is None and accuracy >= THRESHOLD:
            reached = float(ctx.calls().comm_rounds)
    result = Reach(reached, float(ctx.calls().comm_rounds), accuracy)
    _RUNS[key] = result
    return result


def factor_range(candidate: Reach, baseline: Reach) -> tuple[float, float]:
    """``[low, high]`` of ``R_FedNest / R_candidate`` given what the runs reached (module
    docstring): exact when both reached, a bound when one did not, ``[0, inf]`` when neither."""
    if candidate.rounds is not None and baseline.rounds is not None:
        value = baseline.rounds / candidate.rounds
        return value, value
    if candidate.rounds is None and baseline.rounds is not None:
        return 0.0, baseline.rounds / candidate.budget
    if candidate.rounds is not None and baseline.rounds is None:
        return baseline.budget / candidate.rounds, math.inf
    return 0.0, math.inf


#: The readings of a headline's factor (``params["reading"]``): the setting's own number as the
#: paper prints it, and the text's looser words.
READING_BOUNDS: dict[str, Callable[[Setting], float]] = {
    "as printed": lambda s: s.paper_factor,
    "more than 2": lambda s: 2.0,  # AggITD: "more than 2-3 times fewer"
}


#: FedNest's HessIV length T (``neumann_terms``), which AggITD does not report, at the values the
#: claim is read at: FedNest's code default (ucr-optml/FedNest utils/options.py ``--neumann 5``,
#: its Fig. 2 hyper-representation runs), its Fig. 3 script's (reproduce/fig3.sh ``--neumann 3``,
#: also FedMSA's FedNest baseline), and 25, which no public run uses: there FedNest spends
#: 2N + T + 3 = 38 rounds per iteration against FBO-AggITD's 13 (the value that makes the factor).
FEDNEST_T: dict[str, int] = {
    "FedNest's code default": 5,
    "FedNest's Fig. 3 script": 3,
    "no public run": 25,
}


def baseline_params(setting: Setting, case: Case) -> dict[str, Any]:
    """FedNest's parameters in ``case``: the setting's, with the HessIV length ``T``
    (``neumann_terms``) a case may set (``params["fednest_neumann_terms"]``): AggITD does not
    report the T of its FedNest runs; the settings take FedNest's code default, 5."""
    params = dict(setting.baseline.params)
    if "fednest_neumann_terms" in case.params:
        params["neumann_terms"] = int(case.params["fednest_neumann_terms"])
    return params


def check_headline(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """A setting of a paper's headline over the case's seeds: some seed's factor reaches the
    reading's bound (holds), or every seed's stays below it (fails)."""
    setting = SETTINGS[str(case.params["setting"])]
    bound = READING_BOUNDS[str(case.params.get("reading", "as printed"))](setting)
    seeds = [int(s) for s in case.params["seeds"]]
    rows: list[dict[str, Any]] = []
    ranges: list[tuple[float, float]] = []
    series = []
    for seed in seeds:
        candidate = run_to_threshold(
            make(**setting.candidate.params), setting.workload, seed, setting.candidate.iterations
        )
        baseline = run_to_threshold(
            get_estimator(setting.baseline.algorithm).build(**baseline_params(setting, case)),
            setting.workload,
            seed,
            setting.baseline.iterations,
        )
        low, high = factor_range(candidate, baseline)
        ranges.append((low, high))
        rows.append(
            {
                "seed": seed,
                "candidate_rounds": candidate.rounds,
                "candidate_budget": candidate.budget,
                "candidate_final_accuracy": candidate.final_accuracy,
                "fednest_rounds": baseline.rounds,
                "fednest_budget": baseline.budget,
                "fednest_final_accuracy": baseline.final_accuracy,
                "factor_low": low,
                "factor_high": high,
            }
        )
        shown = high if math.isfinite(high) else low
        series += [
            SeriesPoint("measured", "seed", seed, shown),
            SeriesPoint("bound", "seed", seed, bound),
        ]
    # some seed certainly reaches the bound: holds; every seed certainly below it: fails;
    # otherwise a run that never reached leaves the factor on both sides of the bound
    reaches = any(low >= bound for low, _ in ranges)
    below = all(high < bound for _, high in ranges)
    if not (reaches or below):
        raise NotMeasurable(
            f"runs that never reached 90% leave every seed's factor straddling {bound:g}: {ranges}"
        )
    best = max(low if reaches else high for low, high in ranges)
    return Measurement(
        best,
        bound,
        reaches,
        "largest factor over seeds >= (fails only when every seed is below)",
        series=tuple(series),
        details={
            "setting": setting.name,
            "paper_rounds": setting.paper_rounds,
            "paper_factor": setting.paper_factor,
            "threshold": THRESHOLD,
            "per_seed": rows,
            "factors": [low for low, _ in ranges],
        },
    )


def _cases(settings: tuple[str, ...], seeds: tuple[int, ...]) -> Callable[[], Any]:
    def build() -> st.SearchStrategy[Case]:
        return st.sampled_from(settings).map(
            lambda name: Case(SETTINGS[name].workload, {"setting": name, "seeds": seeds})
        )

    return build


# Cases of claim comparison.aggitd_table2_factor: the fast profile runs the saved case only (the
# cheapest row, tau = 5: 60 outer iterations, on seed 0: ~20 s of one core); the thorough one
# also draws every row on three seeds (max_examples).
table2_cases = _cases(tuple(TABLE2), (0, 1, 2))
table2_fast_case = known_case(
    TABLE2["noniid_tau5"].workload.spec(), {"setting": "noniid_tau5", "seeds": (0,)}
)


def _expected_outcome(bound: str, t: int) -> str | None:
    """What the testbed has established under a reading (seed 0 of every row): below both
    bounds at the T FedNest's code runs (factors 1.20-1.78); at T = 25 above 2 on every row
    (2.71-3.22) and the factor as printed reached on the non-iid rows (3.22 >= 2.49, 2.71 >=
    2.65) but not on the iid ones (2.71 < 3.13, 2.83 < 3.08), so that reading declares no
    outcome (the fast profile runs the non-iid tau = 5 row, where it holds)."""
    if t != FEDNEST_T["no public run"]:
        return "fails"
    return "holds" if bound == "more than 2" else None


# ==================================================================================== perturbation


@dataclasses.dataclass(frozen=True)
class PolledAggregation(FBOAggITD):
    """FBO-AggITD whose server collects every aggregation from the participants one at a time:
    a round per participant instead of one per aggregation (the same iterates, ``|S|`` times the
    rounds)."""

    def advance(self, ctx: FederatedContext, state: Any) -> Any:
        new = FBOAggITD.advance(self, ctx, state)
        everyone = torch.arange(ctx.problem.n_clients)
        extra = (ctx.sampler.per_round - 1) * self.rounds_per_iteration()  # type: ignore[union-attr]
        for _ in range(extra):  # the mean is discarded: rounds counted, iterates unchanged
            ctx.aggregate(new.x.expand(int(everyone.shape[0]), -1), everyone)
        return new


POLLED_AGGREGATION = Perturbation(
    "FBO-AggITD polls each participant",
    "every aggregation of FBO-AggITD costs one round per participant (10 in Table 2's setting) "
    "instead of one: the iterates are the same and the rounds to 90% ten times as many, so the "
    "factor falls below 1 under every reading (0.18 at T = 5, 0.32 at T = 25, where the true "
    "one is 3.22); a round count off by a constant factor is the bug a rounds comparison must "
    "see.",
    registry_variant("fbo-aggitd", PolledAggregation),
    max_examples=1,
    # the perturbed FBO-AggITD's run and FedNest's three (~40 s of one core): tox -e theory
    # and every `testbed check` run it, the default test run does not
    slow=True,
)


AGGITD_TABLE2_FACTOR = Claim(
    id="comparison.aggitd_table2_factor",
    paper="AggITD",
    reference=(
        "Xiao & Ji 2023, Table 2 (MNIST, MLP, SVRG-type, C = 0.1: FedNest / FBO-AggITD "
        "rounds to 90% test accuracy 1630/530, 610/195, 1380/520, 760/305) and Sec. 5 "
        "('more than 2-3 times fewer communication rounds')"
    ),
    kind="communication_count",
    about=ABOUT_TABLE,
    statement=(
        "FBO-AggITD reaches 90% test accuracy in fewer communication rounds than FedNest "
        "by Table 2's factor R_FedNest / R_FBO-AggITD (3.08, 3.13, 2.65, 2.49 for iid / "
        "non-iid, tau = 1 / 5), the hyper-representation MLP of Table 2 with the paper's "
        "steps"
    ),
    estimators=("fbo-aggitd", "fednest"),
    strategy=table2_cases,
    check=check_headline,
    examples=(table2_fast_case,),
    scale=(
        "digits 8x8 (1,347 training and 450 test images, 64 inputs; MNIST is not on this "
        "machine) instead of MNIST (60,000 / 10,000, 784 inputs), so the MLP is 64-200-10; 20 "
        "clients with 10 per round instead of 100 with 10 per round; full local batches "
        "instead of minibatches; squared L2 head regulariser 0.1 and no dropout; FedNest's T "
        "(the paper does not give it) read at 5, 3 and 25 (FEDNEST_T); evaluation after "
        "every outer iteration; 60 outer iterations at tau = 5 and 300 at tau = 1 (the "
        "paper's horizon: 2000 rounds); seeds 0-2 (the paper reports one run)"
    ),
    # Why these cases: a run of 60 outer iterations takes ~8 s of one core, 300 ~40 s; the fast
    # profile runs the cheapest row (non-iid, tau = 5) on two seeds, the thorough one every row on
    # three seeds.
    max_examples=PerProfile(0, 4),
    shrink=False,
    perturbation=POLLED_AGGREGATION,
    notes=(
        "Decided under Table 2's protocol, not on closed-form problems (where the ratio is "
        "the per-iteration 13/18 and says nothing about a table measured on MNIST: "
        "comparison.aggitd_fewer_rounds_than_fednest). Holds on a row when some seed's factor "
        "reaches the bound, fails when every seed's is below. Measured on digits (2026-11-26, "
        "seed 0): non-iid tau = 5: 900 / 507 = 1.78 (seeds 0-1: at most 1.78), iid tau = 5: "
        "720 / 533 = 1.35, iid tau = 1: 3672 / 2704 = 1.36, against 2.49, 3.13 and 3.08: "
        "FBO-AggITD needs about as many outer iterations as FedNest, so its saving is the "
        "per-iteration 18/13. The paper does not report FedNest's HessIV length T, and T "
        "decides the verdict: at FedNest's code default T = 5 and its Fig. 3 script's T = 3 "
        "the factor is below Table 2's under both readings of the factor; with T = 25 (no "
        "public run uses it) FedNest spends 38 rounds per iteration and the factor is "
        "reached with no saving in iterations. So this is a replication record that T "
        "decides, not a refutation: the verdict holds under the T = 25 readings and names "
        "the T = 5 and T = 3 readings that fail. The fast profile runs the one row on seed "
        "0 under every reading (the runs are shared between the readings of one T); the "
        "thorough profile every row on three seeds."
    ),
    readings=tuple(
        Reading(
            f"{bound}, T = {t} ({source})",
            f"{statement} with FedNest's HessIV length T = {t} ({source})",
            {"reading": bound, "fednest_neumann_terms": t},
            expected=_expected_outcome(bound, t),
        )
        for source, t in FEDNEST_T.items()
        for bound, statement in (
            ("as printed", "R_FedNest / R_FBO-AggITD >= the row's Table 2 factor (2.49-3.13)"),
            ("more than 2", "R_FedNest / R_FBO-AggITD > 2 (Sec. 5: 'more than 2-3 times fewer')"),
        )
    ),
)


CLAIMS: tuple[Claim, ...] = (AGGITD_TABLE2_FACTOR,)

__all__ = [
    "CLAIMS",
    "SETTINGS",
    "TABLE2",
    "THRESHOLD",
    "check_headline",
    "factor_range",
    "run_to_threshold",
]
