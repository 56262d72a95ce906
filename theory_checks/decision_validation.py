"""The decision procedures validated on synthetic data at the boundary of their null hypotheses.

A statistical claim is recorded "fails as stated" when a test's interval lies wholly outside the
region the claim allows (:mod:`theory_checks.decision`); each :class:`~theory_checks.decision.
Evidence` promises that this happens to a true claim with probability at most the rate it is
decided at. This module measures that promise where it is hardest to keep: the true value sits
exactly on the region's edge. For an evidence class, a data model and a per-test rate ``r`` it
draws ``draws`` independent samples of ``n`` values, decides the test "mean <= true mean" (side
``upper``) or "mean >= true mean" (side ``lower``) with the class itself, and counts failures.
The count is binomial: its Clopper-Pearson interval says what the draws can resolve. With
``draws = DRAWS_PER_RATE / r`` a correct procedure shows about ``DRAWS_PER_RATE`` failures or
fewer, and an interval whose lower end exceeds ``r`` shows the procedure failing its promise.

What the rows say (docs/deciding.md): Hoeffding, empirical Bernstein and
Clopper-Pearson keep their rate on every bounded model (they assume nothing else); Student-t
(``batch_evidence``) keeps it on normal data, its model, and exceeds it on one side of skewed
data: for right-skewed values the test "mean >= bound" fails a true claim far more often than
``r`` (exponential values, n = 30: about 13 times at r = 1e-3), while "mean <= bound" is
conservative. Claims that decide Student-t tests feed it means of many samples per replicate,
and a failure is confirmed on fresh seeds with four times the samples before it is recorded.

``python -m theory_checks.decision_validation`` prints the table.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Literal

import numpy as np

from theory_checks.decision import Binomial
from theory_checks.decision import EmpiricalBernstein
from theory_checks.decision import Hoeffding
from theory_checks.decision import StudentT
from theory_checks.decision import clopper_pearson

Side = Literal["upper", "lower"]

# Why 40: at draws = 40 / r a procedure exactly at its rate shows ~40 failures, whose 95%
# Clopper-Pearson interval is about [0.71 r, 1.36 r]; one leaking twice its rate shows ~80,
# whose interval starts above r. Fewer draws could not tell the two apart.
DRAWS_PER_RATE = 40


@dataclasses.dataclass(frozen=True)
class DataModel:
    """Values a statistic may take: a sampler, its true mean and, when bounded, its range."""

    name: str
    sample: Callable[[np.random.Generator, tuple[int, int]], np.ndarray]
    mean: float
    value_range: float | None = None


DATA_MODELS = {
    "normal": DataModel("normal", lambda rng, shape: rng.standard_normal(shape), 0.0),
    "uniform": DataModel("uniform", lambda rng, shape: rng.random(shape), 0.5, 1.0),
    # Bernoulli(0.05): bounded and strongly skewed, the shape of a rare-event indicator
    "bernoulli(0.05)": DataModel(
        "bernoulli(0.05)", lambda rng, shape: (rng.random(shape) < 0.05).astype(float), 0.05, 1.0
    ),
    "exponential": DataModel("exponential", lambda rng, shape: rng.exponential(1.0, shape), 1.0),
}


def _student_t(values: np.ndarray, model: DataModel, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """``batch_evidence``'s bounds for every row at once: the class's own half width at unit
    standard error, scaled by each row's."""
    n = values.shape[1]
    means = values.mean(axis=1)
    half = StudentT(0.0, 1.0, n - 1).half_width(rate) * values.std(axis=1, ddof=1) / math.sqrt(n)
    return means - half, means + half


def _hoeffding(values: np.ndarray, model: DataModel, rate: float) -> tuple[np.ndarray, np.ndarray]:
    assert model.value_range is not None
    means = values.mean(axis=1)
    half = Hoeffding(0.0, model.value_range, values.shape[1]).half_width(rate)
    return means - half, means + half


def _empirical_bernstein(
    values: np.ndarray, model: DataModel, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    assert model.value_range is not None
    n = values.shape[1]
    rows = [
        EmpiricalBernstein(float(m), float(v), model.value_range, n)
        for m, v in zip(values.mean(axis=1), values.var(axis=1, ddof=1), strict=True)
    ]
    return np.array([e.lower(rate) for e in rows]), np.array([e.upper(rate) for e in rows])


def _clopper_pearson(
    values: np.ndarray, model: DataModel, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    n = values.shape[1]

    @functools.cache
    def bounds(successes: int) -> tuple[float, float]:
        evidence = Binomial(successes, n)
        return evidence.lower(rate), evidence.upper(rate)

    found = [bounds(int(s)) for s in values.sum(axis=1).round()]
    return np.array([b[0] for b in found]), np.array([b[1] for b in found])


#: Each evidence class's bounds over a batch of samples, and the data models it is valid for.
EVIDENCE: dict[str, tuple[Callable[..., tuple[np.ndarray, np.ndarray]], tuple[str, ...]]] = {
    "student-t (batch_evidence)": (_student_t, ("normal",)),
    "hoeffding": (_hoeffding, ("uniform", "bernoulli(0.05)")),
    "empirical bernstein": (_empirical_bernstein, ("uniform", "bernoulli(0.05)")),
    "clopper-pearson": (_clopper_pearson, ("bernoulli(0.05)",)),
}


@dataclasses.dataclass(frozen=True)
class ValidationRow:
    """One evidence class on one data model at the edge of one side, decided at ``rate``."""

    evidence: str
    model: str
    n: int
    side: Side
    rate: float
    draws: int
    failures: int
    ci_low: float
    ci_high: float
    model_is_valid: bool

    @property
    def keeps_rate(self) -> bool:
        """The draws do not show the rate exceeded (the interval's lower end is at most it)."""
        return self.ci_low <= self.rate

    @property
    def resolves(self) -> bool:
        """Enough draws to resolve the rate (about :data:`DRAWS_PER_RATE` expected failures)."""
        return self.draws * self.rate >= DRAWS_PER_RATE


def validate(
    evidence: str,
    model: str,
    n: int,
    side: Side,
    rate: float,
    draws: int | None = None,
    seed: int = 0,
) -> ValidationRow:
    """Failures of ``evidence`` on ``model`` at the edge of ``side`` over ``draws`` samples of
    ``n`` values (default ``DRAWS_PER_RATE / rate``), decided at ``rate`` as the runner does
    (:meth:`~theory_checks.decision.StatTest.decide`: the test fails when the bound on the far
    side passes the edge)."""
    bounds_of, valid_models = EVIDENCE[evidence]
    data = DATA_MODELS[model]
    draws = int(math.ceil(DRAWS_PER_RATE / rate)) if draws is None else int(draws)
    rng = np.random.default_rng([seed, n, int(round(-math.log10(rate) * 100))])
    # a one-sided region spends the whole rate on its one side, and fails when the bound on the
    # far side passes the edge: StatTest.decide's rule, applied to every draw at once
    lower, upper = bounds_of(data.sample(rng, (draws, n)), data, rate)
    failed = lower > data.mean if side == "upper" else upper < data.mean
    failures = int(failed.sum())
    low, high = clopper_pearson(failures, draws, 0.025)
    return ValidationRow(
        evidence, model, n, side, rate, draws, failures, low, high, model in valid_models
    )


def table(rate: float = 1e-3, n_values: tuple[int, ...] = (5, 30)) -> list[ValidationRow]:
    """Every evidence class on its valid models and on the skewed unbounded model, both sides."""
    rows = []
    for evidence, (_, valid) in EVIDENCE.items():
        models = (*valid, "exponential") if evidence.startswith("student") else valid
        for model in models:
            for n in n_values:
                for side in ("upper", "lower"):
                    rows.append(validate(evidence, model, n, side, rate))  # type: ignore[arg-type]
    return rows


def format_rows(rows: list[ValidationRow]) -> str:
    lines = [
        "evidence                    model            n  side   rate    draws  fails  "
        "observed [95% CI]            keeps rate"
    ]
    for r in rows:
        lines.append(
            f"{r.evidence:27s} {r.model:15s} {r.n:3d}  {r.side:5s} {r.rate:.0e} "
            f"{r.draws:7d} {r.failures:6d}  {r.failures / r.draws:.2e} [{r.ci_low:.2e}, "
            f"{r.ci_high:.2e}]  {'yes' if r.keeps_rate else 'NO'}"
            f"{'' if r.model_is_valid else ' (outside its model)'}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_rows(table()))
