"""`testbed regress`: a no-worse variant passes, a deliberately worse one fails, baselines
round-trip, and the committed baseline covers every registered entry."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from testbed import registry
from testbed.estimators.solvers import Neumann
from testbed_app import regression
from testbed_app import regression_grid
from testbed_app.cli import main
from tests._python_runs import run_python


@pytest.fixture
def small_grid(monkeypatch):
    # Why one seed and two replicates: the comparison logic is under test, not the numbers.
    monkeypatch.setattr(regression_grid, "PROBLEM_SEEDS", (0,))
    monkeypatch.setattr(regression_grid, "REPLICATES", 2)


@pytest.fixture
def worse_variant(monkeypatch):
    """`aid-neumann` with a third of its Neumann terms: a variant that is genuinely worse."""
    base = registry.get_estimator("aid-neumann")

    def make(**kw):
        est = base.build(**kw)
        terms = max(1, est.linear_solver.terms // 3)
        return dataclasses.replace(est, linear_solver=Neumann(terms, est.linear_solver.step_size))

    worse = dataclasses.replace(
        base, name="aid-neumann-worse", make=make, no_claims_reason="test double"
    )
    monkeypatch.setattr(registry, "ESTIMATOR_DB", [*registry.ESTIMATOR_DB, worse])
    return worse


def test_worse_variant_fails_against_the_estimator_it_claims_to_improve(small_grid, worse_variant):
    passed, table = regression.run(estimator="aid-neumann-worse", against="aid-neumann")
    assert not passed
    worse = [line for line in table.splitlines() if line.endswith("WORSE")]
    # fewer Neumann terms: a larger error where the Neumann series has not converged (on the
    # compositional problem both are at the round-off floor, and rightly not flagged)
    assert {line.split()[3] for line in worse} >= {"log10_error"}
    assert {line.split()[2] for line in worse} == {"bilevel", "minimax"}


def test_example_variant_is_no_worse_than_neumann(small_grid):
    passed, table = regression.run(estimator="aid-fp", against="aid-neumann")
    assert passed, table


def test_baseline_round_trip_and_regression_detection(
    small_grid, worse_variant, tmp_path, monkeypatch
):
    baseline = tmp_path / "baseline.json"
    passed, message = regression.run(
        estimator="aid-neumann", update_baseline=True, baseline=baseline
    )
    assert passed and baseline.exists()
    passed, table = regression.run(estimator="aid-neumann", baseline=baseline)
    assert passed, table
    # the same name now builds the worse estimator: the baseline catches it
    db = [
        dataclasses.replace(worse_variant, name="aid-neumann") if i.name == "aid-neumann" else i
        for i in registry.ESTIMATOR_DB
    ]
    monkeypatch.setattr(registry, "ESTIMATOR_DB", db)
    passed, table = regression.run(estimator="aid-neumann", baseline=baseline)
    assert not passed and "WORSE" in table


def test_missing_baseline_is_a_clear_error_that_never_suggests_writing_one(tmp_path, capsys):
    """From a wheel the baseline was missing and the error suggested `--update-baseline`, which
    would silently make a new baseline instead of using the committed one; it came after 22-24
    s of measuring, printed on the progress bar's line."""
    with pytest.raises(FileNotFoundError, match="no regression baseline at") as info:
        regression.load(tmp_path / "nope.json")
    assert "--update-baseline" not in str(info.value)
    assert "--baseline FILE" in str(info.value)
    code = main(
        ["regress", "--estimator", "aid-neumann", "--baseline", str(tmp_path / "nope.json")]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("testbed: error: no regression baseline at"), err
    assert err.count("\n") == 1 and "regress:" not in err and "--update-baseline" not in err


def test_the_committed_baseline_ships_in_the_wheel(tmp_path):
    """`tox -e regress` runs the installed wheel: the wheel holds reports/baselines/regress.json
    at the path testbed_app.regression.BASELINE takes from an installed package, and reading
    it from an unpacked wheel (not this editable checkout) works."""
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # why --no-build-isolation: setuptools is in the environment, and isolation would fetch it
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path / "dist"),
            str(root),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    wheel = next((tmp_path / "dist").glob("hypergradient_testbed-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        assert "reports/baselines/regress.json" in archive.namelist()
        archive.extractall(tmp_path / "site")
    code = (
        "import json, testbed_app.regression as r; "
        "print(r.BASELINE); print(len(r.baseline_entries()))"
    )
    out = run_python(
        code, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}
    ).stdout
    path, entries = out.split()
    assert Path(path).is_relative_to(tmp_path / "site") and int(entries) == len(
        regression.baseline_entries()
    )


def test_committed_baseline_covers_every_built_in_entry():
    # (an installed plugin's entry has none: it is compared with --against)
    stored = regression.baseline_entries()
    missing = [info.name for info in registry.BUILTIN if info.name not in stored]
    assert not missing, (
        f"no committed baseline for {missing}: run `testbed regress "
        "--update-baseline` and commit reports/baselines/regress.json"
    )


# --------------------------------------------------------------------------- the test itself

S = regression_grid.Samples


def _table(new: S, ref: S, metric: str = "log10_error") -> regression.Comparison:
    (row,) = regression.compare(
        {"a": {"k": {metric: new}}}, {"b": {"k": {metric: ref}}}, [("a", "b")]
    )
    return row


def test_pairing_by_problem_seed_uses_the_within_problem_noise():
    # Seeds differ by decades, replicates by ~0.01: a shift of 0.2 decades on every problem is
    # far outside the replicate noise, though well inside the spread between problems (the old
    # unpaired standard error over seeds and replicates would have let it pass).
    ref = S(
        ((-1.00, -1.01, -0.99, -1.00), (-5.00, -5.01, -4.99, -5.00), (-9.00, -9.01, -8.99, -9.00))
    )
    shifted = S(tuple(tuple(v + 0.2 for v in seed) for seed in ref.per_seed))
    row = _table(shifted, ref)
    assert row.test == "paired t" and row.worse
    assert row.difference == pytest.approx(0.2)
    assert 0.0 < row.tolerance < 0.2
    assert not _table(ref, ref).worse
    # noise of the same size as the shift: not significant
    noisy = S(
        tuple(
            tuple(v + d for v, d in zip(seed, (0.3, -0.3, 0.3, -0.3), strict=True))
            for seed in ref.per_seed
        )
    )
    assert not _table(
        S(tuple(tuple(v + 0.2 for v in seed) for seed in noisy.per_seed)), noisy
    ).worse


def test_deterministic_metrics_get_a_round_off_tolerance():
    calls = S(((100.0,) * 4, (120.0,) * 4))
    row = _table(calls, calls, "oracle_calls")
    assert row.test == "round-off" and not row.worse
    assert row.tolerance == pytest.approx(regression.DETERMINISTIC_RTOL * 110)  # mean 110
    assert _table(S(((101.0,) * 4, (120.0,) * 4)), calls, "oracle_calls").worse
    # a log10 error at the floor may move by log10(1 + 1e-13 / 1e-12) = 0.041 decades
    floor = S(((-12.0,) * 4,))
    assert not _table(S(((-11.97,) * 4,)), floor).worse
    assert _table(S(((-11.9,) * 4,)), floor).worse
    # far above the floor the allowance is tiny
    assert _table(S(((-2.0 + 1e-9,) * 4,)), S(((-2.0,) * 4,))).tolerance < 1e-10


def test_divergence_is_shown_and_counted():
    finite = S(((0.5, 0.6, 0.5, 0.6),))
    diverged = S(((0.5, math.inf, 0.5, math.inf),))
    row = _table(diverged, finite, "log10_stationarity_at_rounds")
    assert row.worse
    text = regression.format_table([row])
    assert "diverged 2/4" in text and "WORSE" in text
    assert not _table(diverged, diverged, "log10_stationarity_at_rounds").worse
    assert not _table(finite, diverged, "log10_stationarity_at_rounds").worse
    late = _table(S(((math.inf,) * 4,)), S(((300.0,) * 4,)), "rounds_to_target")
    assert late.worse and "not reached 4/4" in regression.format_table([late])


def test_variance_is_tested_with_the_f_distribution():
    ref = S(((1e-3,), (1e-5,), (1e-2,)), "variance", 3)
    row = _table(ref, ref, "log10_variance_mb")
    assert row.test == "F" and not row.worse
    # F(9, 9) at a one-sided 1e-3: a ratio below ~10 is noise, a thousandfold is not
    assert 1.0 < row.tolerance < 2.0
    assert not _table(S(((3e-3,), (3e-5,), (3e-2,)), "variance", 3), ref).worse
    assert _table(S(((1.0,), (1e-2,), (10.0,)), "variance", 3), ref).worse
    # a deterministic reference that becomes noisy is worse
    zero = S(((0.0,), (0.0,), (0.0,)), "variance", 3)
    assert _table(ref, zero, "log10_variance_mb").worse
    assert not _table(zero, zero, "log10_variance_mb").worse


def test_baseline_file_round_trips_failures_and_rejects_old_formats(tmp_path):
    data = {"e": {"bilevel": {"m": S(((1.0, math.inf),)), "v": S(((2.0,),), "variance", 3)}}}
    path = tmp_path / "b.json"
    regression.save(data, path)
    assert regression.load(path) == data
    assert regression.baseline_entries(path) == ["e"]
    path.write_text(json.dumps({"e": {}}))  # the format before the format field
    with pytest.raises(ValueError, match="cannot be compared with: format is missing"):
        regression.load(path)


def test_pairing_needs_the_same_grid():
    with pytest.raises(ValueError, match="same grid"):
        _table(S(((1.0, 1.1),)), S(((1.0, 1.1), (2.0, 2.1))))


# ------------------------------------------------------------------------------ coverage (issue 33)


@pytest.fixture
def aid_cg_baseline(small_grid, tmp_path):
    """A baseline of aid-cg on the small grid, as a file to edit."""
    baseline = tmp_path / "baseline.json"
    assert regression.run(estimator="aid-cg", update_baseline=True, baseline=baseline)[0]
    return baseline


def test_a_baseline_without_a_metric_is_not_a_pass(aid_cg_baseline, capsys):
    """A baseline from another version lacks a metric: it was skipped ("17 comparisons, 0
    worse", exit 0, where 18 exist); now named, and the run is not a pass (exit 1)."""
    data = json.loads(aid_cg_baseline.read_text())
    del data["entries"]["aid-cg"]["bilevel"]["log10_error"]
    del data["entries"]["aid-cg"]["minimax"]
    aid_cg_baseline.write_text(json.dumps(data))
    capsys.readouterr()
    assert (
        main(["regress", "--estimator", "aid-cg", "--baseline", str(aid_cg_baseline), "--quiet"])
        == 1
    )
    out = capsys.readouterr().out
    assert f"NOT a pass: the baseline {aid_cg_baseline} does not cover" in out
    assert "not compared: aid-cg bilevel log10_error: no such metric in the baseline" in out
    assert "not compared: aid-cg minimax log10_error: no such problem kind in the baseline" in out
    assert "0 worse (" not in out


def test_a_baseline_of_other_problem_seeds_names_them(aid_cg_baseline, monkeypatch, capsys):
    """A baseline measured on problem seed 0 against a run on seeds 0 and 1: "cannot pair 2
    problem seeds with 1" named neither the file nor the metric."""
    monkeypatch.setattr(regression_grid, "PROBLEM_SEEDS", (0, 1))
    capsys.readouterr()
    assert (
        main(["regress", "--estimator", "aid-cg", "--baseline", str(aid_cg_baseline), "--quiet"])
        == 1
    )
    out = capsys.readouterr().out
    assert str(aid_cg_baseline) in out
    assert (
        "not compared: aid-cg bilevel log10_error: problem seed(s) 1 not in the baseline's "
        "(0; this run: 0, 1)"
    ) in out


def test_compare_names_the_metric_it_cannot_pair():
    new = {"e": {"bilevel": {"m": S(((1.0, 1.1), (2.0, 2.1)))}}}
    ref = {"e": {"bilevel": {"m": S(((1.0, 1.1),))}}}
    with pytest.raises(
        ValueError,
        match=r"e bilevel m: cannot pair 2 problem seeds with the "
        r"reference's 1 \(e\)",
    ):
        regression.compare(new, ref, [("e", "e")])


@pytest.mark.parametrize("layout", ["declared", "before the format field"])
def test_a_baseline_in_the_older_format_names_the_format(tmp_path, capsys, layout):
    sample = {"mean": -0.63, "n": 12, "se": 0.15}
    entries = {"aid-cg": {"bilevel": {"log10_error": sample}}}
    data = {"format": 1, "entries": entries} if layout == "declared" else entries
    baseline = tmp_path / "old.json"
    baseline.write_text(json.dumps(data))
    assert main(["regress", "--estimator", "aid-cg", "--baseline", str(baseline), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "per_seed is missing" not in err
    assert (
        f"baseline {baseline} is in format 1 (a pooled mean and standard error per "
        "metric); this testbed reads format 2"
    ) in err
