"""Plugins (testbed/plugins.py, theory_checks/registry.py, testbed verify): an installed package's
estimator is seen like a built-in, a broken copy of it fails verify with the claim named, and a
malformed plugin is a clear error that leaves the built-ins working."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json

import pytest

from testbed import plugins
from testbed import registry
from testbed_app.cli import main
from tests._cli_runs import verify_argv
from theory_checks import registry as claim_registry

EXAMPLE = importlib.util.find_spec("my_estimator") is not None
needs_example = pytest.mark.skipif(
    not EXAMPLE,
    reason="examples/my_estimator is not installed (tox installs it; by hand: "
    "pip install --no-deps -e examples/my_estimator)",
)


@pytest.fixture
def restore_registry():
    saved = list(registry.ESTIMATOR_DB)
    yield
    registry.ESTIMATOR_DB[:] = saved


@needs_example
def test_the_installed_example_is_listed_and_verified(capsys, tmp_path, restore_registry):
    assert main(["list"]) == 0
    assert "my-horner-aid" in capsys.readouterr().out
    status = main(["verify", "my-horner-aid", "--results", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out
    for claim in (
        "classical.neumann.error_identity",
        "classical.neumann.error_bound",
        "classical.neumann.decay_rate",
        "classical.gd.linear_rate",
    ):
        assert f"{claim}@my-horner-aid" in out
    assert "NO" not in out.split("report:")[0]
    report = (tmp_path / "report" / "index.html").read_text()
    # the verify report is about the target: its runs in their own section, and no paper's
    # claims listed as "not checked"
    assert 'id="outside"' in report and "plugin my-estimator: my-horner-aid" in report
    assert 'data-paper="Classical"' not in report and "not checked" not in report


@needs_example
def test_plugin_runs_are_reported_apart_from_the_papers_counts(tmp_path, restore_registry):
    """tox installs examples/my_estimator into every environment, and its runs of the classical
    claims were counted with the papers' (a newcomer got 108 claims and 75 holds where the
    README says 104 and 71): each run records its origin, and the report lists the plugin's
    runs in a section of their own, outside every paper's count."""
    from reports.build import build_report
    from testbed.registry import BUILTIN
    from theory_checks.registry import BUILTIN_CLAIMS
    from theory_checks.runner import enrolled_variants

    claim, results = "classical.neumann.error_identity", tmp_path / "results"
    assert (
        main(["check", "--claim", claim, "--results", str(results), "--quiet", "--profile", "fast"])
        == 0
    )
    origin = {
        path.stem: json.loads(path.read_text())["origin"]
        for path in (results / "claims").glob("*.json")
    }
    assert origin == {
        claim: "built-in",
        f"{claim}@aid-fp": "built-in",
        f"{claim}@my-horner-aid": "plugin my-estimator",
    }
    text = build_report(results, tmp_path / "out").read_text()
    papers, outside = text.split('id="outside"')[0], text.split('id="outside"')[1]
    glance_end = outside.index("</section>")
    assert f"{claim}@my-horner-aid" not in papers.split('id="at-a-glance"')[1]
    assert f"{claim}@my-horner-aid" in outside[:glance_end]
    assert "plugin my-estimator: my-horner-aid" in outside[:glance_end]
    # the papers' sentence counts the built-in runs only, the claims of the papers, the
    # comparisons and the aid-fp variant's run apart (results_format.populations)
    comparisons = sum(c.id.startswith("comparison.") for c in BUILTIN_CLAIMS)
    own = {info.name for info in BUILTIN}  # the testbed's variants, not the plugin's
    variants = sum(name in own for c in BUILTIN_CLAIMS for name in enrolled_variants(c))
    assert (
        f"{len(BUILTIN_CLAIMS) - comparisons} claims of the papers (1 checked), "
        f"{comparisons} comparisons (0 checked), {variants} runs on enrolled variants "
        "(1 checked): 2 as the testbed expects" in papers
    )


@needs_example
def test_a_broken_copy_fails_verify_naming_the_claim(
    capsys, tmp_path, restore_registry, monkeypatch
):
    from tests import plugin_doubles

    monkeypatch.setattr(plugin_doubles, "BROKEN", plugin_doubles.broken_copy(), raising=False)
    status = main(
        verify_argv(tmp_path, "tests.plugin_doubles:BROKEN", "classical.neumann.error_identity")
    )
    captured = capsys.readouterr()
    assert status == 1
    assert "classical.neumann.error_identity@my-horner-aid-broken: fails as stated" in captured.err


def _entry(name: str, value: str, group: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=group)


MALFORMED = {
    "testbed.estimators": [
        _entry("no-module", "no_such_package_xyz.entries:ENTRY", "testbed.estimators"),
        _entry("not-info", "math:pi", "testbed.estimators"),
        _entry("clash", "tests.plugin_doubles:CLASH", "testbed.estimators"),
        _entry("wrong-class", "tests.plugin_doubles:WRONG_CLASS", "testbed.estimators"),
    ],
    "testbed.claims": [_entry("claims-of-nobody", "math:tau", "testbed.claims")],
}


def test_malformed_plugins_are_named_and_the_built_ins_still_work(monkeypatch, capsys):
    builtin = {info.name for info in registry.BUILTIN}
    monkeypatch.setattr(plugins, "entry_points", lambda group: MALFORMED.get(group, []))
    try:
        problems = registry.refresh_plugins() + claim_registry.refresh_claim_plugins()
        reasons = {p.entry_point: p.reason for p in problems}
        assert set(reasons) == {"no-module", "not-info", "clash", "wrong-class", "claims-of-nobody"}
        assert "does not import: ModuleNotFoundError" in reasons["no-module"]
        assert "is a float, not a testbed.EstimatorInfo" in reasons["not-info"]
        assert "'aid-cg' is already registered" in reasons["clash"]
        assert "does not subclass testbed's Estimator" in reasons["wrong-class"]
        assert "holds a float, not a Claim" in reasons["claims-of-nobody"]
        assert all(p.package for p in problems)
        assert {info.name for info in registry.ESTIMATOR_DB} == builtin
        assert len(claim_registry.CLAIM_DB) == len(claim_registry.BUILTIN_CLAIMS)
        assert main(["list"]) == 0
        err = capsys.readouterr().err
        assert "plugin 'clash' of package 'tests'" in err
        assert main(["verify", "no-module", "--quiet"]) == 2
        assert "no estimator named 'no-module'" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        registry.refresh_plugins()
        claim_registry.refresh_claim_plugins()


@needs_example
def test_verify_against_adds_the_regression_comparison(capsys, tmp_path, restore_registry):
    status = main(
        verify_argv(
            tmp_path,
            "my-horner-aid",
            "classical.neumann.error_identity",
            "--against",
            "aid-neumann",
        )
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "against aid-neumann:" in out and "0 worse" in out


def _verify_error(tmp_path, capsys, estimator: str, claim: str) -> str:
    """``testbed verify ESTIMATOR --claim CLAIM``'s error: exit 2 and one line, returned."""
    status = main(verify_argv(tmp_path, estimator, claim))
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    return err


def test_an_estimator_whose_output_has_another_shape_is_named_with_claim_and_shapes(
    capsys, tmp_path, restore_registry
):
    """`testbed verify` of an AggITD with one inner step more said only "operands could not be
    broadcast together with shapes (32,) (31,)": the line names the claim and the estimator."""
    err = _verify_error(
        tmp_path, capsys, "tests.plugin_doubles:AGGITD_ONE_MORE_STEP", "aggitd.lower.contraction"
    )
    assert err.startswith(
        "testbed: error: claim aggitd.lower.contraction on estimator "
        "aggitd-one-more-step: the check could not use the estimator's output"
    )
    assert "shapes (32,) (31,)" in err and "it expects what aggitd returns" in err


# ------------------------------------------------------------------------------ at run time


def test_a_plugin_estimator_raising_at_run_time_is_one_line(capsys, tmp_path, restore_registry):
    """An estimator's ``estimate`` raising ZeroDivisionError ended in a traceback (issue 33):
    one line naming the code it comes from, the claim, the estimator and the exception."""
    err = _verify_error(
        tmp_path, capsys, "tests.plugin_doubles:DIVIDES_BY_ZERO", "classical.cg.exact_after_dim_y"
    )
    assert err.startswith(
        "testbed: error: code from outside the testbed (tests): claim "
        "classical.cg.exact_after_dim_y on estimator divides-by-zero raised "
        "ZeroDivisionError: division by zero (at "
    )
    assert "plugin_doubles.py:" in err


def test_a_plugin_claim_raising_at_run_time_is_one_line(monkeypatch, capsys, tmp_path):
    """A plugin claim's check raising ZeroDivisionError: one line naming the plugin package,
    the claim and the exception."""
    entry = _entry("zero-claims", "tests.plugin_doubles:ZERO_DIVISION_CLAIMS", "testbed.claims")
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [entry] if group == "testbed.claims" else []
    )
    try:
        assert claim_registry.refresh_claim_plugins() == []
        status = main(
            ["check", "--claim", "plugin.zero_division", "--results", str(tmp_path), "--quiet"]
        )
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1, err
        assert err.startswith(
            "testbed: error: plugin tests: claim plugin.zero_division on "
            "estimator aid-cg raised ZeroDivisionError: division by zero (at "
        )
        assert not (tmp_path / "claims" / "plugin.zero_division.json").exists()
    finally:
        monkeypatch.undo()
        claim_registry.refresh_claim_plugins()


def test_regress_of_a_plugin_estimator_raising_is_one_line(capsys, restore_registry, monkeypatch):
    from testbed_app import regression_grid
    from tests import plugin_doubles

    monkeypatch.setattr(regression_grid, "PROBLEM_SEEDS", (0,))
    registry.ESTIMATOR_DB.append(plugin_doubles.DIVIDES_BY_ZERO)
    assert (
        main(["regress", "--estimator", "divides-by-zero", "--against", "aid-cg", "--quiet"]) == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(
        "testbed: error: code from outside the testbed (tests): estimator "
        "divides-by-zero raised ZeroDivisionError: division by zero on the "
        "regression grid (bilevel problem, seed 0) (at "
    )


def test_run_of_a_config_whose_plugin_algorithm_raises_is_one_line(
    capsys, tmp_path, restore_registry
):
    from tests import plugin_doubles
    from tests.test_experiments import write

    registry.ESTIMATOR_DB.append(plugin_doubles.STEP_RAISES)
    path = write(tmp_path, {"algorithm.name": "fednest-step-raises", "run.steps": 2})
    assert main(["run", str(path), "--results", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(
        f"testbed: error: {path}: [algorithm] fednest-step-raises (code from "
        "outside the testbed) raised ZeroDivisionError: division by zero (at "
    )
