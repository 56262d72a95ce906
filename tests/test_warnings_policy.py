"""pyproject's ``filterwarnings``: the project's own warnings are errors, other code's are not.

pytest-benchmark 4.0 (installed on a GPU machine's image) warns at start-up that benchmarks are
disabled under xdist; with ``filterwarnings = error`` that warning ended ``pytest -n 2`` in an
INTERNALERROR before its first test. These tests read the filters pytest has in force during a
test; ``tox -e py`` also runs a few tests with pytest-benchmark 4.0 installed beside the suite.
"""

from __future__ import annotations

import os
import warnings

import pytest


def _warn_from(module: str, category: type[Warning] = UserWarning) -> None:
    """A warning attributed to ``module``, as ``warnings.warn`` in that module would make."""
    warnings.warn_explicit(
        "a test warning", category, f"{module.replace('.', '/')}.py", 1, module=module, registry={}
    )


@pytest.mark.parametrize(
    "module",
    [
        "testbed.estimators.validation",
        "testbed_app.cli",
        "problems._base",
        "theory_checks.runner",
        "results_format.resume",
        "reports.build",
        "tests.test_x",
        "conftest",
        "my_estimator.horner",
        "testbed_torchopt.adapter",
        "_common",
        "closed_form_rounds",
    ],
)
def test_the_projects_own_warnings_are_errors(module: str) -> None:
    with pytest.raises(UserWarning, match="a test warning"):
        _warn_from(module)
    with pytest.raises(DeprecationWarning):
        _warn_from(module, DeprecationWarning)


@pytest.mark.parametrize(
    "module",
    [
        "pytest_benchmark.logger",
        "xdist.plugin",
        "matplotlib.cbook",
        "torch.nn.modules.module",
        "testbedx",
        "problemset.thing",
    ],
)
def test_other_codes_warnings_are_shown_not_raised(module: str) -> None:
    # catch_warnings(record=True) keeps the filters in force (pytest.warns would replace them
    # by "always" and pass whatever they say)
    with warnings.catch_warnings(record=True) as caught:
        _warn_from(module)
    assert [str(w.message) for w in caught] == ["a test warning"]


def test_the_other_plugin_is_loaded_where_the_run_expects_it(request) -> None:
    """In ``tox -e py``'s step with pytest-benchmark 4.0 (``TESTBED_EXPECT_PLUGIN=benchmark``)
    the plugin must really be loaded, or that step would show nothing."""
    expected = os.environ.get("TESTBED_EXPECT_PLUGIN")
    if not expected:
        pytest.skip("only in the run with another pytest plugin installed (tox -e py)")
    assert request.config.pluginmanager.has_plugin(expected)
