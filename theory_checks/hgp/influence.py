"""HGP's decentralized influence estimation (Sec. 5.2, eq. 12, Table 4).

With ``g_i = 1/N sum_k lambda_ik ell(xi_ik, x) + mu/2 ||x||^2`` (eq. 12: per-sample loss weights
as hyperparameters) evaluated at ``lambda = 1``, the k-th entry of ``<-d_lambda F>_i`` is the
linear (first-order) estimate of the change of ``F = sum_i f_i`` when sample k of client i is
removed (``lambda_ik: 1 -> 0``). Table 4 reports R^2 = 0.99 between HGP's estimates and
retraining without each of the 50 samples with the largest estimates (logistic regression).
Two claims:

- ``hgp.influence.r2`` (the estimator): HGP's estimate against the exact influence ``-<d_lambda
  F>_ik`` (a linear solve), R^2 >= 0.99 over every sample: what HGP itself contributes;
- ``hgp.influence.r2_retraining`` (Table 4's number): HGP's estimate against retraining without
  each of the 50 samples with the largest predicted ``|influence|``, R^2 >= 0.99, at Table 4's
  scale (:data:`TABLE4_SCALE`, the hypothesis :data:`TABLE4_SETTING`) over several data draws,
  in four readings (which 50 samples; how "0.99" is read). R^2 there measures HGP's error plus
  the first-order approximation's, whose remainder is ``O(1/N^2)`` per removal: it is small at
  the paper's 100 samples per client and large at 30.

Hypotheses: Assumption 1, Assumption 2 (the ridge ``mu``), ``0 < eta alpha < 1`` and the step
condition (HGP runs at eta = 1/L). Perturbation of both: Push-Sum without its de-bias.

The retrainings and the exact influences depend only on the problem, HGP's estimate on the
problem and the estimator: both are cached (:func:`influence_draw`), so the claim's readings
and its perturbation reuse them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any
from typing import cast

import numpy as np
from hypothesis import strategies as st

from problems import PerClientLogistic
from problems import from_spec
from problems import strategies
from results_format.verdicts import ABOUT_TABLE
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.influence_metrics import r_squared
from testbed.decentralized.pushsum import push_sum
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.claim import SeriesPoint
from theory_checks.hgp.common import fresh_state
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import terms_for
from theory_checks.hgp.constants import REF
from theory_checks.hgp.constants import deterministic_contractions
from theory_checks.hgp.constants import eta_alpha_below_one
from theory_checks.hgp.constants import network_assumptions
from theory_checks.hgp.constants import step_condition
from theory_checks.hgp.constants import step_size
from theory_checks.hgp.perturbations import swap
from theory_checks.hypotheses import AddedParameter
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import Reading
from theory_checks.profiles import PerProfile

#: Table 4's logistic-regression setting (Sec. 5.1, 5.2 and App. A.1-A.2): 3 clients, inputs in
#: R^5, 100 training and 100 validation samples per client, the FedEM-style synthetic data with
#: 3 components and Dirichlet concentration 0.4; per-sample loss weights as hyperparameters.
TABLE4_SCALE: dict[str, Any] = {
    "n_clients": 3,
    "dim": 5,
    "n_train": 100,
    "n_val": 100,
    "components": 3,
    "concentration": 0.4,
    "hyper": "weights",
}
#: Sec. 5.2: "We selected the 50 elements with the largest absolute values".
TOP = 50
#: The ridge the paper leaves open: 0.01 is the authors' code's weight decay
#: (hitachi-rd-cv/pdbo-hgp, ClassifierBase(weight_decay=1e-2), infl_toy config), the other two
#: those of an independent replication of Sec. 5.2.
RIDGES = (0.01, 0.125, 0.5)
#: Why S = 30 and rho_bar^M <= 1e-8: HGP's estimate is then within ~1e-8 (relative) of the exact
#: influence on these 3-client directed graphs (details.hgp_relative_error), far below any R^2
#: difference; the paper's M = 500, S = 100, eta = 1 reach the same fixed point (Lemma 1: it is
#: eta-free) 15x more slowly.
PUSHSUM_STEPS = 30
TRUNCATION = 1e-8
#: Draws of the data per case: a few on the fast profile, more on the thorough one.
DRAWS = PerProfile(fast=3, thorough=5)


@dataclasses.dataclass(frozen=True)
class InfluenceDraw:
    """One draw of the influence experiment: ``(n, N)`` arrays of HGP's estimate ``-v``, the
    exact influence ``-<d_lambda F>`` and the retrained change ``F(lambda_ik = 0) - F``."""

    predicted: np.ndarray
    exact: np.ndarray
    actual: np.ndarray
    neumann_terms: int
    eta: float

    @property
    def hgp_relative_error(self) -> float:
        """``||HGP - exact|| / ||exact||`` over every sample."""
        return float(np.linalg.norm(self.predicted - self.exact) / np.linalg.norm(self.exact))


def top_samples(predicted: np.ndarray, selection: str, top: int = TOP) -> np.ndarray:
    """Flat indices ``i N + k`` of the ``top`` largest ``|predicted|``: over all clients
    (``"global"``, the authors' code's ``argsort`` over the concatenated hypergradients) or the
    ``top`` of each client's own (``"per_client"``, ``<-d_lambda f>_i`` read per client)."""
    n, N = predicted.shape
    if selection == "global":
        return np.argsort(-np.abs(predicted).ravel(), kind="stable")[:top]
    if selection == "per_client":
        return np.concatenate(
            [i * N + np.argsort(-np.abs(predicted[i]), kind="stable")[:top] for i in range(n)]
        )
    raise ValueError(f"selection must be 'global' or 'per_client', got {selection!r}")


def retraining_r2(draw: InfluenceDraw, selection: str, top: int = TOP) -> float:
    """Table 4's R^2 (``1 - SS_res / SS_tot``) of HGP's estimates against retraining on the
    selected samples."""
    chosen = top_samples(draw.predicted, selection, top)
    return r_squared(draw.actual.ravel()[chosen], draw.predicted.ravel()[chosen])


@functools.lru_cache(maxsize=64)
def _exact_and_actual(spec: str) -> tuple[np.ndarray, np.ndarray]:
    problem: Any = from_spec(json.loads(spec))
    x = problem.initial_point()[0]
    return ((-problem.global_grad(x)).cpu().numpy(), problem.all_removal_effects(x).cpu().numpy())


@functools.lru_cache(maxsize=64)
def _hgp_estimate(spec: str, estimator: Any) -> np.ndarray:
    problem: Any = from_spec(json.loads(spec))
    out = estimator.run(
        problem,
        problem.initial_point()[0],
        fresh_state(problem),
        np.random.default_rng(0),
        track_consensus=False,
    )
    return (-out.trajectory[-1, 0]).cpu().numpy()


def influence_draw(
    problem: PerClientLogistic, make: Callable[..., Any], graph_seed: int, eta: float
) -> InfluenceDraw:
    """HGP at ``eta`` with M until ``rho_bar^M <= 1e-8`` and S = 30 on the graph sequence
    ``graph_seed``, the exact influences and every retraining, on ``problem`` (cached)."""
    x = problem.initial_point()[0]
    rho_bar = deterministic_contractions(problem.client_blocks(x), eta)["rho_bar"]
    M = terms_for(rho_bar, TRUNCATION, 2000)
    estimator = make(
        neumann_terms=M, pushsum_steps=PUSHSUM_STEPS, neumann_step_size=eta, graph_seed=graph_seed
    )
    spec = json.dumps(problem.spec(), sort_keys=True)
    exact, actual = _exact_and_actual(spec)
    return InfluenceDraw(_hgp_estimate(spec, estimator), exact, actual, M, eta)


# --------------------------------------------------------------------------- hgp.influence.r2


def check_influence(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """HGP's estimate against the exact influence ``-<d_lambda F>_ik`` over every sample
    (R^2 >= 0.99); eta = 1/L (:func:`~theory_checks.hgp.constants.step_size`)."""
    draw = influence_draw(case.problem, make, int(case.params["graph_seed"]), step_size(case))
    r2 = r_squared(draw.exact.ravel(), draw.predicted.ravel())
    # Why 0.99: HGP's truncation and consensus errors are ~1e-8 here, so any shortfall is an
    # estimator error (the perturbation, Push-Sum without its de-bias, gives 0.5-0.9)
    return Measurement(
        r2,
        0.99,
        r2 >= 0.99,
        "R^2 vs exact >= 0.99",
        details={
            "hgp_relative_error": draw.hgp_relative_error,
            "neumann_terms": draw.neumann_terms,
            "eta": draw.eta,
        },
    )


def influence_cases() -> st.SearchStrategy[Case]:
    """Influence cases: per-client logistic regression problems and a graph seed."""
    return st.builds(
        lambda problem, gs: Case(problem, {"graph_seed": gs}),
        strategies.per_client_logistic(),
        st.integers(0, 2**16),
    )


# --------------------------------------------------------------------------- Table 4


def _scale_margin(case: Case) -> float:
    spec: dict[str, Any] = case.problem.spec()
    if spec.get("family") != "PerClientLogistic.random" or spec.get("hyper") != "weights":
        return -1.0
    return 0.0 - max(
        abs(float(spec[key]) - float(value)) / float(value)
        for key, value in TABLE4_SCALE.items()
        if key != "hyper"
    )


#: Table 4's scale as a condition on a case: a table's number is decided only at the setting it
#: was measured at (a toy-scale case is neither a pass nor a counterexample).
TABLE4_SETTING = Hypothesis(
    "Table 4 setting",
    "3 clients, d = 5, 100 training and 100 validation samples per client, "
    "FedEM-style data with 3 components and Dirichlet 0.4, per-sample loss weights (margin "
    "-max relative deviation; 0 at the setting)",
    f"{REF}, Sec. 5.1-5.2, App. A.1-A.2",
    _scale_margin,
)


def table4_draws(problem: PerClientLogistic, draws: int) -> list[PerClientLogistic]:
    """The case's problem and the ``draws - 1`` that follow it (data seeds ``seed + j``)."""
    spec: dict[str, Any] = problem.spec()
    return [problem] + [
        cast(PerClientLogistic, from_spec({**spec, "seed": int(spec["seed"]) + j}))
        for j in range(1, draws)
    ]


def check_r2_retraining(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Table 4's R^2 against retraining at Table 4's scale: the median over the case's data
    draws (``draws``: its problem and the next seeds) of the R^2 of HGP's estimate against
    retraining without each of the 50 samples with the largest ``|estimate|``, at least the
    reading's threshold.

    Readings (``case.params``): ``selection`` ``"global"`` (the 50 largest over all clients,
    the authors' code) or ``"per_client"`` (each client's 50; pooled R^2), and ``threshold``
    0.99 (as printed) or 0.985 (the printed 0.99 as a two-decimal rounding). The median, not
    every draw: Table 4 reports one run, whose setting the median's draw reproduces; the spread
    over draws is recorded (``details``). HGP runs at eta = 1/L (the case's
    :func:`~theory_checks.hgp.constants.step_size`) to within 1e-8 of its fixed point.
    """
    selection = str(case.params.get("selection", "global"))
    threshold = float(case.params.get("threshold", 0.99))
    graph_seed = int(case.params["graph_seed"])
    draws = table4_draws(case.problem, int(case.params["draws"]))
    per_draw, global_r2, client_r2, exact_r2, errors, terms = [], [], [], [], [], []
    for problem in draws:
        draw = influence_draw(problem, make, graph_seed, step_size(Case(problem, case.params)))
        per_draw.append(draw)
        global_r2.append(retraining_r2(draw, "global"))
        client_r2.append(retraining_r2(draw, "per_client"))
        exact_r2.append(r_squared(draw.exact.ravel(), draw.predicted.ravel()))
        errors.append(draw.hgp_relative_error)
        terms.append(draw.neumann_terms)
    values = global_r2 if selection == "global" else client_r2
    median = float(np.median(values))
    first = per_draw[0]
    chosen = top_samples(first.predicted, selection)
    series = tuple(
        SeriesPoint("measured", "actual", float(a), float(p))
        for a, p in zip(first.actual.ravel()[chosen], first.predicted.ravel()[chosen], strict=True)
    )
    return Measurement(
        median,
        threshold,
        median >= threshold,
        f"median over draws of R^2 vs retraining ({selection} top {TOP}) >=",
        series=series,
        details={
            "selection": selection,
            "r2_global": global_r2,
            "r2_per_client": client_r2,
            "r2_min": min(values),
            "r2_max": max(values),
            "r2_exact": exact_r2,
            "hgp_relative_error": max(errors),
            "ridge": case.problem.mu,
            "seeds": [int(p.spec()["seed"]) for p in draws],
            "neumann_terms": terms,
            "pushsum_steps": PUSHSUM_STEPS,
            "eta": [d.eta for d in per_draw],
            "graph_seed": graph_seed,
        },
    )


def table4_cases(draws: int) -> st.SearchStrategy[Case]:
    """Cases at Table 4's scale: a data seed, a ridge of :data:`RIDGES`, a graph seed; each
    case measures ``draws`` consecutive data seeds (``params["draws"]``)."""

    def build(seed: int, ridge: float, graph_seed: int) -> Case:
        return Case(table4_problem(seed, ridge), {"graph_seed": graph_seed, "draws": draws})

    return st.builds(build, st.integers(0, 2**16), st.sampled_from(RIDGES), st.integers(0, 2**16))


def table4_problem(seed: int, ridge: float) -> PerClientLogistic:
    """Table 4's logistic-regression problem (:data:`TABLE4_SCALE`) of data seed ``seed`` with
    the ridge ``mu = ridge``."""
    return PerClientLogistic.random(
        TABLE4_SCALE["n_clients"],
        TABLE4_SCALE["dim"],
        TABLE4_SCALE["n_train"],
        TABLE4_SCALE["n_val"],
        seed,
        mu=ridge,
        hyper="weights",
        components=TABLE4_SCALE["components"],
        concentration=TABLE4_SCALE["concentration"],
    )


#: The ridges measured beside the verdict on every run (:data:`RIDGE_ADDED`): below the
#: claim's, where R^2 falls, and the claim's own.
RIDGES_MEASURED = (0.001, *RIDGES)
#: Why six draws (data seeds 0-5, graph seed 0): at mu = 0.001 the fourth draw is the one whose
#: R^2 is 0.952 (the median of the six stays 0.993); six draws at the four ridges take ~15 s.
RIDGE_DRAWS = 6


def _at_ridge(ridge: float) -> Case:
    return Case(table4_problem(0, ridge), {"graph_seed": 0, "draws": RIDGE_DRAWS})


#: The ridge ``mu`` of ``g_i`` (Assumption 2's strong convexity): eq. (12) weighs the samples'
#: losses and has none, so the testbed adds it; measured beside the verdict on every run.
RIDGE_ADDED = AddedParameter(
    "ridge mu",
    "g_i = (1/N) sum_k lambda_ik ell(xi_ik, x) + (mu/2)||x||^2: eq. (12) has no ridge, the "
    "testbed adds one (Assumption 2 needs g_i strongly convex; 0.01 is the authors' code's "
    "weight decay, 0.125 and 0.5 the independent replication's); measured on data seeds 0-5",
    RIDGES,
    RIDGES_MEASURED,
    _at_ridge,
    shown=("r2_min",),
)


#: The cases of claim hgp.influence.r2_retraining, per profile: :data:`DRAWS` data seeds each
#: (fewer on the fast profile).
TABLE4_CASES = PerProfile(
    functools.partial(table4_cases, DRAWS.fast), functools.partial(table4_cases, DRAWS.thorough)
)

# --------------------------------------------------------------------------- perturbation


@dataclasses.dataclass(frozen=True)
class _NoDebias(HyperGradientPush):
    """Push-Sum without the de-bias division (``u_bar = z`` instead of ``z / omega``)."""

    def average_step(
        self, u: Any, w: Any, time: int, graph: Any, gledger: Any, sledger: Any
    ) -> Any:
        if not self.averaging_rule.gossips:
            return super().average_step(u, w, time, graph, gledger, sledger)
        result = push_sum(u, graph.mixing(time, self.pushsum_steps), gledger)
        return result.z, w, time + self.pushsum_steps


NO_DEBIAS = Perturbation(
    "Push-Sum without de-bias",
    "Push-Sum returns the numerators z instead of z / omega (the de-bias division forgotten): "
    "exact on doubly stochastic steps, an O(1) consensus bias on directed graphs whose weights "
    "drift from 1",
    swap("hgp", _NoDebias),
)

# --------------------------------------------------------------------------- the claims


# What every claim of this result shares.
influence_claim = hgp_claim.but(
    kind="bias_bound", about=ABOUT_TABLE, estimators=("hgp",), perturbation=NO_DEBIAS
)


#: The readings of which samples Table 4 ranks (``selection``, :func:`top_samples`): each one's
#: name and the samples its R^2 is taken over.
SELECTIONS = {
    "global": ("global top 50", "the 50 largest |estimates| over all clients"),
    "per_client": ("per-client top 50", "each client's 50 largest |<-d_lambda f>_i| (pooled)"),
}
#: The readings of Table 4's "0.99" (``threshold``): as printed, or as a two-decimal rounding.
THRESHOLDS = {0.99: ">= 0.99 as printed", 0.985: "0.99 as a two-decimal rounding (>= 0.985)"}


def table4_reading(selection: str, threshold: float, note: str = "") -> Reading:
    """Table 4's R^2 statement under one reading of the samples it ranks (``selection``,
    :data:`SELECTIONS`) and of its "0.99" (``threshold``, :data:`THRESHOLDS`); ``note``
    follows the samples in the statement."""
    name, samples = SELECTIONS[selection]
    return Reading(
        f"{name}, {THRESHOLDS[threshold]}",
        f"R^2 on {samples}{note} >= {threshold}",
        {"selection": selection, "threshold": threshold},
    )


R2 = influence_claim(
    id="hgp.influence.r2",
    reference="HGP sec. 5.2, eq. (12), Table 4 (logistic regression: R^2 0.99)",
    statement="R^2 of HGP's influence -<d_lambda F>_ik against the exact influence >= 0.99",
    strategy=influence_cases,
    check=check_influence,
    hypotheses=(*network_assumptions(), eta_alpha_below_one(), step_condition()),
    notes=(
        "What HGP contributes to Table 4's R^2: its estimate against the exact -<d_lambda "
        "F>_ik (a linear solve) over every sample, on small drawn problems (2-4 clients, "
        "30-60 samples); the table's number itself, against retraining, is "
        "hgp.influence.r2_retraining at the table's scale."
    ),
)


R2_RETRAINING = influence_claim(
    id="hgp.influence.r2_retraining",
    reference="HGP sec. 5.2, Table 4 (logistic regression: R^2 0.99 against retraining)",
    statement=(
        "at Table 4's scale (3 clients, d = 5, 100 + 100 samples per client, FedEM-style "
        "data), R^2 of HGP's influence against retraining without each of the 50 most "
        "influential samples >= 0.99 (median over data draws)"
    ),
    strategy=TABLE4_CASES,
    check=check_r2_retraining,
    # Why 1 case on the fast profile (3 data draws) and 4 on the thorough one (5 draws each): a
    # draw is one HGP run and 300 batched retrainings (~1 s on one core); 20 draws give the spread
    shrink=False,
    max_examples=PerProfile(1, 4),
    hypotheses=(TABLE4_SETTING, *network_assumptions(), eta_alpha_below_one(), step_condition()),
    scale=(
        "Table 4 / Sec. 5.1-5.2 as stated: 3 clients, d = 5, 100 training and 100 validation "
        "samples per client, FedEM-style synthetic data (3 components, Dirichlet 0.4), "
        "per-sample loss weights, top 50 removals, RandD graphs with edge probabilities "
        "U[0.4, 0.8]. Differences that remain: the ridge the paper leaves open (drawn from "
        "0.01, the authors' code's weight decay, 0.125 and 0.5; below 0.01 R^2 falls: at "
        "0.001 the median of 100 draws is 0.992 and 54% reach 0.99); no intercept (the "
        "labels' model has none); the inner solution and every retraining exact (Newton) "
        "instead of 5000 SGP steps; HGP at eta = 1/L to 1e-8 of its fixed point (S = 30) "
        "instead of M = 500, S = 100, eta = 1 (Lemma 1: the same fixed point); the FedEM "
        "generator as intended (the authors' code fills only the first component's labels); "
        "several data draws, not one."
    ),
    added_parameters=(RIDGE_ADDED,),
    notes=(
        "Decided at the table's scale over several data draws (median; the spread in details). "
        "Replication (independent numpy code, exact influence and Newton retraining, global top"
        " 50): ridge 0.01, 100 draws: median 0.9958, 5% quantile 0.9908, min 0.9763, 95% of "
        "draws >= 0.99, 98% >= 0.985; ridge 0.125 and 0.5, 30 draws each: min 0.9997 and "
        "0.9998. HGP itself is within 1e-9 of the exact influence (R^2 against it 1.000), so "
        "the shortfall where there is one is the first-order approximation's. The verdict "
        "depends on the ridge the testbed adds (RIDGE_ADDED, measured beside it on every run): "
        "on data seeds 0-5 (graph seed 0) the global-top-50 R^2 is 0.9984, 0.9985, 0.9986, "
        "0.9945, 0.9937, 0.9972 at mu = 0.01 and 0.9942, 0.9928, 0.9974, 0.952, 0.9899, 0.9940 "
        "at mu = 0.001 (median 0.9934: the median rule holds there, one draw in six does not). "
        "Replication record at a toy scale, not a refutation: until issue 22 this claim ran on "
        "2 clients x 30 samples, d = 2, top 10 and recorded 'fails as stated' on seed 0 (ridge "
        "0.125): R^2 0.982 against retraining, 1.000 against the exact influence; over 40 seeds"
        " there the exact influence's R^2 ranges from 0.199 to 0.9997 (85% >= 0.99): one "
        "removal of 30 moves the model by O(1/N) and the first-order estimate misses O(1/N^2). "
        "Such a case is now outside TABLE4_SETTING (rejected). Perturbation: Push-Sum without "
        "its de-bias (median 0.83-0.90 on the first draws)."
    ),
    readings=(
        table4_reading("global", 0.99, note=" (the authors' code)"),
        table4_reading("per_client", 0.99),
        table4_reading("global", 0.985),
        table4_reading("per_client", 0.985),
    ),
)


CLAIMS: tuple[Claim, ...] = (
    R2,
    R2_RETRAINING,
)
