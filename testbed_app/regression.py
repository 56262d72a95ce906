"""Regression check of estimators and algorithms on a fixed grid, against committed baselines.

The grid and its metrics (closed-form problems x problem seeds x replicates; errors, costs,
variances, stationarity at fixed budgets) are :mod:`testbed_app.regression_grid`'s; this module
compares two measurements of it and keeps the committed baseline. A replicate that is not finite
(the run diverged, or the target was not reached) is shown as "diverged" / "not reached" with the
count, and a candidate with more such replicates than its reference is worse.

**The test** (:func:`compare`). Comparisons are paired by problem seed: candidate and reference
run on the same problems, so the spread between problems (which is large: one problem's error is
decades below another's) cancels, and only the replicate noise within a problem remains. For a
metric with replicates, with per-seed means ``m_s``, sample variances ``v_s`` and replicate
counts ``n_s`` on each side, the statistic is

.. math::

    D = \\frac1S \\sum_s (\\bar m^{new}_s - \\bar m^{ref}_s), \\qquad
    \\mathrm{Var}\\,D = \\frac1{S^2} \\sum_s \\Big(\\frac{v^{new}_s}{n^{new}_s}
        + \\frac{v^{ref}_s}{n^{ref}_s}\\Big),

a one-sided Welch t-test: the candidate is worse when ``D > t_{1 - a}(nu) sqrt(Var D)``, with
``nu`` the Welch-Satterthwaite degrees of freedom of that variance (Student t because 4
replicates give a noisy variance; the normal quantile would under-cover) and ``a`` the
family-wise false-failure rate :data:`FAMILY_WISE_FALSE_FAIL` divided by the number of
statistical comparisons (Bonferroni). The variance metric is itself a variance, so it is tested
with the F distribution: per seed ``v_s (n - 1) / sigma_s^2 ~ chi^2_{n-1}`` for Gaussian
estimates, the pooled ratio ``sum_s v^new_s / sum_s v^ref_s`` is F-distributed under "no change"
(Satterthwaite degrees of freedom when the seeds' variances differ; ``n - 1`` per seed even for a
vector, whose trace variance has more, which only makes the test conservative), and the candidate
is worse when the log10 ratio exceeds ``log10 F_{1 - a}``.

**Deterministic metrics** (zero replicate noise on both sides at every seed: counts, and errors of
estimators without randomness) get no statistical tolerance; they are reproducible bit for bit on
one machine, and across machines they differ only by float64 round-off. Counts and ratios of
counts are exact integers or one division (2.2e-16 relative), so :data:`DETERMINISTIC_RTOL`
(1e-12 relative) is ample. A log10 error differs across machines by ``log10(1 + r / e)``, with
``e`` the relative error and ``r`` = :data:`ROUNDOFF` (1e-13) the relative round-off of a computed
hypergradient on these problems (unit round-off 1.1e-16 amplified by kappa <= 10 and ~100
accumulated products); at the floor 1e-12 that is 0.04 decades, above 1e-9 below 1e-4 decades.
This round-off allowance is also added to the statistical tolerance of noisy log10 metrics.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from results_format.records import baseline_problem
from results_format.resume import write_json
from testbed.registry import BUILTIN
from testbed.registry import get_estimator
from testbed_app import regression_grid
from testbed_app.regression_grid import ERROR_FLOOR
from testbed_app.regression_grid import Execute
from testbed_app.regression_grid import Samples
from testbed_app.regression_grid import floored_log10
from testbed_app.regression_grid import measure_all

#: The committed baseline: ``reports/baselines/regress.json`` of the source tree, shipped in the
#: package as data of ``reports`` (``[tool.setuptools.package-data]``), so an installed testbed
#: (a wheel, tox's environments) finds it at the same place beside ``testbed_app``.
BASELINE = Path(__file__).resolve().parent.parent / "reports" / "baselines" / "regress.json"
BASELINE_FORMAT = 2  # 2: per-seed replicate values (paired test); 1 was pooled mean and se
FAMILY_WISE_FALSE_FAIL = 1e-3
DETERMINISTIC_RTOL = 1e-12
ROUNDOFF = 1e-13

FAILED_LABEL = {"rounds_to_target": "not reached"}  # other metrics: "diverged"


# ------------------------------------------------------------------------------- comparison


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One metric of ``name`` against ``reference`` on one problem kind.

    ``difference`` is the paired statistic (mean per-seed difference; for a variance the log10
    of the pooled ratio) and ``tolerance`` the largest difference that is not "worse".
    """

    name: str
    reference: str
    kind: str
    metric: str
    new: Samples
    ref: Samples
    difference: float
    tolerance: float
    test: str

    @property
    def worse(self) -> bool:
        if self.new.n_failed or self.ref.n_failed:
            return self.new.n_failed > self.ref.n_failed
        return self.difference > self.tolerance


def _roundoff_tolerance(metric: str, ref: float, new: float) -> float:
    """Allowance for cross-machine float64 round-off (see the module docstring)."""
    if metric.startswith("log10_"):
        floor = 2 * math.log10(ERROR_FLOOR) if "variance" in metric else math.log10(ERROR_FLOOR)
        low = max(min(ref, new), floor)
        factor = 2.0 if "variance" in metric else 1.0  # a variance carries the error twice
        return factor * math.log10(1.0 + ROUNDOFF / 10.0 ** (low / factor))
    return DETERMINISTIC_RTOL * max(1.0, abs(ref))


def _paired(new: Samples, ref: Samples) -> tuple[float, float, float]:
    """``(D, Var D, Welch-Satterthwaite df)`` of the paired per-seed mean difference."""
    if len(new.per_seed) != len(ref.per_seed):
        raise ValueError(
            f"cannot pair {len(new.per_seed)} problem seeds with "
            f"{len(ref.per_seed)}; were they measured on the same grid?"
        )
    diffs, terms, dfs = [], [], []
    for a, b in zip(new.per_seed, ref.per_seed, strict=True):
        diffs.append(float(np.mean(a)) - float(np.mean(b)))
        for side in (a, b):
            w = float(np.var(side, ddof=1)) / len(side) if len(side) > 1 else 0.0
            terms.append(w)
            dfs.append(max(len(side) - 1, 1))
    S = len(diffs)
    var = sum(terms) / S**2
    denom = sum(w**2 / d for w, d in zip(terms, dfs, strict=True))
    df = (sum(terms) ** 2 / denom) if denom > 0 else math.inf
    return float(np.mean(diffs)), var, df


def _pooled_variance(s: Samples) -> tuple[float, float]:
    """Mean per-seed variance and its Satterthwaite degrees of freedom."""
    values = [seed[0] for seed in s.per_seed]
    total = sum(values)
    denom = sum(v**2 / s.df for v in values)
    return total / len(values), (total**2 / denom if denom > 0 else math.inf)


def _test(metric: str, new: Samples, ref: Samples, level: float) -> tuple[float, float, str]:
    """``(difference, tolerance, test name)`` at one-sided level ``level``."""
    if new.n_failed or ref.n_failed:  # decided by the failure counts (Comparison.worse)
        return math.nan, math.nan, "failures"
    roundoff = _roundoff_tolerance(metric, ref.mean, new.mean)
    if new.statistic == "variance":
        (v_new, df_new), (v_ref, df_ref) = _pooled_variance(new), _pooled_variance(ref)
        floor = ERROR_FLOOR**2
        difference = floored_log10(v_new, floor) - floored_log10(v_ref, floor)
        if new.deterministic and ref.deterministic:
            return difference, roundoff, "round-off"
        if ref.deterministic:  # the reference has no noise: any above the floor is worse
            return difference, roundoff, "round-off"
        quantile = float(stats.f.ppf(1.0 - level, min(df_new, 1e6), min(df_ref, 1e6)))
        return difference, math.log10(quantile) + roundoff, "F"
    difference, var, df = _paired(new, ref)
    if var == 0.0:
        return difference, roundoff, "round-off"
    t = float(stats.t.ppf(1.0 - level, min(df, 1e6)))
    return difference, t * math.sqrt(var) + roundoff, "paired t"


def compare(
    new: dict[str, dict[str, dict[str, Samples]]],
    reference: dict[str, dict[str, dict[str, Samples]]],
    pairs: list[tuple[str, str]],
) -> list[Comparison]:
    """Compare ``new[name]`` with ``reference[ref_name]`` for each ``(name, ref_name)`` pair,
    on every kind and metric both hold (:func:`not_covered` names the others); a metric
    measured on another number of problem seeds is a ValueError naming it."""
    keys = [
        (n, r, kind, metric)
        for n, r in pairs
        if r in reference
        for kind in new[n]
        if kind in reference[r]
        for metric in new[n][kind]
        if metric in reference[r][kind]
    ]
    for n, r, kind, metric in keys:
        a, b = new[n][kind][metric], reference[r][kind][metric]
        if len(a.per_seed) != len(b.per_seed):
            raise ValueError(
                f"{n} {kind} {metric}: cannot pair {len(a.per_seed)} problem "
                f"seeds with the reference's {len(b.per_seed)} ({r}); were they "
                "measured on the same grid?"
            )
    statistical = [
        k
        for k in keys
        if not (new[k[0]][k[2]][k[3]].deterministic and reference[k[1]][k[2]][k[3]].deterministic)
        and not (new[k[0]][k[2]][k[3]].n_failed or reference[k[1]][k[2]][k[3]].n_failed)
    ]
    level = FAMILY_WISE_FALSE_FAIL / max(len(statistical), 1)  # Bonferroni, one-sided
    out = []
    for n, r, kind, metric in keys:
        a, b = new[n][kind][metric], reference[r][kind][metric]
        difference, tolerance, test = _test(metric, a, b, level)
        out.append(Comparison(n, r, kind, metric, a, b, difference, tolerance, test))
    return out


def not_covered(
    new: dict[str, dict[str, dict[str, Samples]]],
    reference: dict[str, dict[str, dict[str, Samples]]],
    pairs: list[tuple[str, str]],
    seeds: Sequence[int],
    reference_seeds: Sequence[int],
) -> list[tuple[str, str, str, str]]:
    """``(name, kind, metric, why)`` of every measured metric the reference cannot be compared
    with: a kind or metric it lacks (a baseline from another version), or a metric measured on
    other problem seeds (``seeds``: this run's, ``reference_seeds``: the baseline's)."""
    out = []
    for n, r in pairs:
        for kind, metrics in new[n].items():
            for metric, samples in metrics.items():
                ref = reference.get(r, {}).get(kind, {}).get(metric)
                if ref is None:
                    what = "problem kind" if kind not in reference.get(r, {}) else "metric"
                    out.append((n, kind, metric, f"no such {what} in the baseline"))
                    continue
                ours = list(seeds)[: len(samples.per_seed)]
                theirs = list(reference_seeds)[: len(ref.per_seed)]
                if len(ref.per_seed) != len(reference_seeds):
                    theirs = list(range(len(ref.per_seed)))  # the file's list does not fit
                if ours != theirs or len(samples.per_seed) != len(ref.per_seed):
                    missing = [k for k in ours if k not in theirs]
                    why = (
                        f"problem seed(s) {', '.join(map(str, missing))} not in the "
                        if missing
                        else "problem seeds paired differently with the "
                    )
                    out.append(
                        (
                            n,
                            kind,
                            metric,
                            f"{why}baseline's "
                            f"({', '.join(map(str, theirs)) or 'none'}; this run: "
                            f"{', '.join(map(str, ours))})",
                        )
                    )
    return out


def _shown(s: Samples, metric: str) -> str:
    if s.n_failed:
        return f"{FAILED_LABEL.get(metric, 'diverged')} {s.n_failed}/{s.n}"
    return f"{s.mean:.5g}"


def _num(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3g}"


def format_table(rows: list[Comparison]) -> str:
    head = (
        f"{'entry':22s} {'vs':22s} {'problem':14s} {'metric':30s} {'new':>16s} "
        f"{'reference':>16s} {'difference':>11s} {'tolerance':>10s} {'test':10s} verdict"
    )
    lines = [head, "-" * len(head)]
    for c in rows:
        verdict = "WORSE" if c.worse else "ok"
        diff = _num(c.difference)
        lines.append(
            f"{c.name:22s} {c.reference:22s} {c.kind:14s} {c.metric:30s} "
            f"{_shown(c.new, c.metric):>16s} {_shown(c.ref, c.metric):>16s} "
            f"{diff:>11s} {_num(c.tolerance):>10s} {c.test:10s} {verdict}"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------- baseline io


def _encode(s: Samples) -> dict[str, Any]:
    return {
        "per_seed": [[v if math.isfinite(v) else None for v in seed] for seed in s.per_seed],
        "statistic": s.statistic,
        "df": s.df,
    }


def _decode(data: dict[str, Any]) -> Samples:
    per_seed = tuple(
        tuple(math.inf if v is None else float(v) for v in seed) for seed in data["per_seed"]
    )
    return Samples(per_seed, data.get("statistic", "mean"), int(data.get("df", 0)))


def save(results: dict[str, dict[str, dict[str, Samples]]], path: Path) -> None:
    data = {
        "format": BASELINE_FORMAT,
        "problem_seeds": list(regression_grid.PROBLEM_SEEDS),
        "replicates": regression_grid.REPLICATES,
        "entries": {
            name: {
                kind: {m: _encode(s) for m, s in metrics.items()} for kind, metrics in kinds.items()
            }
            for name, kinds in sorted(results.items())
        },
    }
    write_json(path, data, indent=1, sort_keys=True, newline=True)


def load(path: Path) -> dict[str, dict[str, dict[str, Samples]]]:
    """The baseline at ``path``; a missing file is an error that never suggests writing a new
    one (``--update-baseline`` records this machine's measurements as the reference: a
    deliberate change, not a way to make a missing baseline appear)."""
    return _read(path)[0]


#: The baseline formats, by number: what each holds per metric.
FORMATS = {
    1: "a pooled mean and standard error per metric",
    2: "each problem seed's replicate values, compared paired by problem seed",
}


def _older_format(data: Any) -> int | None:
    """The format number of a baseline in another format than :data:`BASELINE_FORMAT`, or
    None: a ``format`` field of another number, or format 1's layout (no ``format`` field;
    entry -> kind -> metric -> ``{"mean", "se", "n"}``)."""
    if not isinstance(data, dict):
        return None
    declared = data.get("format")
    if isinstance(declared, int) and not isinstance(declared, bool):
        return None if declared == BASELINE_FORMAT else declared
    if declared is None and "entries" not in data:
        samples = [
            m
            for kinds in data.values()
            if isinstance(kinds, dict)
            for metrics in kinds.values()
            if isinstance(metrics, dict)
            for m in metrics.values()
        ]
        if samples and all(isinstance(m, dict) and {"mean", "se"} <= set(m) for m in samples):
            return 1
    return None


def _read(path: Path) -> tuple[dict[str, dict[str, dict[str, Samples]]], list[int]]:
    """:func:`load`'s entries and the problem seeds the baseline was measured on (its
    ``problem_seeds``; positions 0, 1, ... when it names none)."""
    if not path.exists():
        where = (
            "the committed baseline ships with the testbed (reports/baselines/regress.json "
            "beside testbed_app); reinstall the package"
            if path == BASELINE
            else "name an existing baseline with --baseline FILE"
        )
        raise FileNotFoundError(
            f"no regression baseline at {path}: {where}, or compare two entries with "
            "--estimator A --against B"
        )
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"baseline {path} is not JSON ({error})") from None
    older = _older_format(data)  # before the schema: "per_seed is missing" named no format
    if older is not None:
        held = FORMATS.get(older, "a format this testbed does not know")
        raise ValueError(
            f"baseline {path} is in format {older} ({held}); this testbed reads "
            f"format {BASELINE_FORMAT} ({FORMATS[BASELINE_FORMAT]}): rewrite it "
            "with `testbed regress --update-baseline`"
        )
    problem = baseline_problem(data)
    if problem is not None:
        raise ValueError(f"baseline {path} cannot be compared with: {problem}")
    if data.get("format") != BASELINE_FORMAT:
        raise ValueError(
            f"baseline {path} has format {data.get('format', 1)}, this testbed reads "
            f"format {BASELINE_FORMAT}; rewrite it with "
            "`testbed regress --update-baseline`"
        )
    seeds = data.get("problem_seeds")
    if not (
        isinstance(seeds, list)
        and all(isinstance(k, int) and not isinstance(k, bool) for k in seeds)
    ):
        seeds = []
    entries = {
        name: {kind: {m: _decode(s) for m, s in metrics.items()} for kind, metrics in kinds.items()}
        for name, kinds in data["entries"].items()
    }
    return entries, list(seeds)


def baseline_entries(path: Path = BASELINE) -> list[str]:
    """Names of the entries a baseline file holds."""
    return sorted(json.loads(path.read_text()).get("entries", {}))


def check_options(estimator: str | None, against: str | None) -> None:
    """``--against`` needs ``--estimator`` (the entry compared with it)."""
    if against and not estimator:
        raise ValueError(
            "--against compares one entry with another: name the entry to "
            "compare with --estimator NAME"
        )


def run(
    estimator: str | None = None,
    against: str | None = None,
    update_baseline: bool = False,
    baseline: Path = BASELINE,
    out: Path | None = None,
    progress: Callable[[str], None] | None = None,
    execute: Execute | None = None,
) -> tuple[bool, str]:
    """Measure (the grid cells through ``execute``, in this process by default), compare and
    report. Returns ``(passed, readable table)``: not passed when a comparison is worse, an
    entry has no baseline, or the baseline does not cover a measured metric (a kind or metric it
    lacks, other problem seeds: :func:`not_covered`, each named in the table's last lines)."""

    # every built-in entry by default; a plugin's by --estimator (compared with --against)
    names: Iterable[str] = [estimator] if estimator else [info.name for info in BUILTIN]
    names = list(names) + ([against] if against else [])
    check_options(estimator, against)
    infos = [get_estimator(name) for name in dict.fromkeys(names)]
    # the baseline is read (and checked) before any measurement: a missing, unreadable or
    # malformed one is reported at once, not after minutes of work
    reference, reference_seeds = _read(baseline) if not (update_baseline or against) else (None, [])
    results = measure_all(infos, progress, execute)
    if out is not None:
        save(results, out)
    if update_baseline:
        merged = load(baseline) if (baseline.exists() and estimator) else {}
        merged.update(results)
        save(merged, baseline)
        return True, f"baseline written: {baseline} ({len(results)} entries)"
    if against:
        rows = compare(results, results, [(str(estimator), against)])
    else:
        assert reference is not None
        rows, refusal = compare_with_baseline(results, reference, reference_seeds, baseline)
        if refusal:
            return False, refusal
    return summarise(rows)


def compare_with_baseline(
    results: dict[str, dict[str, dict[str, Samples]]],
    reference: dict[str, dict[str, dict[str, Samples]]],
    reference_seeds: Sequence[int],
    baseline: Path,
) -> tuple[list[Comparison], str | None]:
    """The comparisons of ``results`` with the baseline's ``reference`` (read from
    ``baseline``, whose problem seeds are ``reference_seeds``), and the table of a run that is
    not a pass whatever they say: a built-in entry without a baseline, or measurements the
    baseline does not cover (:func:`not_covered`); ``None`` when neither."""
    builtin = {info.name for info in BUILTIN}
    # a plugin's entry has no committed baseline: it is compared with --against instead
    missing = [n for n in results if n not in reference and n in builtin]
    pairs = [(n, n) for n in results if n in reference]
    uncovered = not_covered(
        results,
        reference,
        pairs,
        regression_grid.PROBLEM_SEEDS,
        reference_seeds or range(len(regression_grid.PROBLEM_SEEDS)),
    )
    skipped = {(n, kind, metric) for n, kind, metric, _ in uncovered}
    covered = {
        n: {
            kind: {m: s for m, s in metrics.items() if (n, kind, m) not in skipped}
            for kind, metrics in reference[n].items()
        }
        for n, _ in pairs
    }
    rows = compare(results, covered, pairs)
    if missing:
        return rows, (
            format_table(rows)
            + "\n\nno baseline for: "
            + ", ".join(missing)
            + "\n(run `testbed regress --update-baseline` to add them)"
        )
    if uncovered:
        # never "0 worse" over a part of the run: a baseline from another version lacks a
        # metric, or holds other problem seeds, and the run is not a pass
        worse = [r for r in rows if r.worse]
        return rows, (
            format_table(rows) + f"\n\n{len(rows)} comparisons, {len(worse)} "
            f"worse; NOT a pass: the baseline {baseline} does not cover "
            f"{len(uncovered)} of the {len(rows) + len(uncovered)} measurements "
            "(rewrite it with `testbed regress --update-baseline` once the "
            "change is meant):\n"
            + "\n".join(
                f"  not compared: {n} {kind} {metric}: {why}" for n, kind, metric, why in uncovered
            )
        )
    return rows, None


def summarise(rows: list[Comparison]) -> tuple[bool, str]:
    """``(passed, the table with a summary)``: passed when no comparison is worse."""
    worse = [r for r in rows if r.worse]
    n_stat = sum(1 for r in rows if r.test in ("paired t", "F"))
    summary = (
        f"\n{len(rows)} comparisons ({n_stat} statistical, paired by problem seed; "
        f"{len(rows) - n_stat} deterministic or with failed replicates), {len(worse)} worse "
        f"(family-wise false-failure rate {FAMILY_WISE_FALSE_FAIL:g}, Bonferroni)"
    )
    if worse:
        summary += "\nworse: " + ", ".join(f"{r.name} {r.kind} {r.metric}" for r in worse)
    return not worse, format_table(rows) + summary
