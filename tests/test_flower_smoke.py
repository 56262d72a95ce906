"""``testbed deploy`` in the default run: without Flower it says in one line how to install it;
with Flower, one tiny deployed run on an in-process grid computes the simulation's iterates and
carries the ledger's counts (``tox -e flower`` runs the full suite, ``tests/flower``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from testbed_app.cli import main

HAS_FLOWER = importlib.util.find_spec("flwr") is not None
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "deploy" / "fednest_quadratic.toml"


@pytest.mark.skipif(HAS_FLOWER, reason="Flower is installed here (the message is for its absence)")
def test_without_flower_deploy_says_how_to_install_it(capsys, tmp_path):
    assert main(["deploy", str(CONFIG), "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "pip install 'hypergradient-testbed[flower]'" in err
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.skipif(
    not HAS_FLOWER,
    reason="Flower is not installed (tox -e flower installs the "
    "[flower] extra and runs tests/flower)",
)
def test_a_tiny_deployed_run_has_the_simulations_numbers_and_counts(tmp_path):
    from problems import QuadraticBilevel
    from testbed_app.flower.compare import compare
    from testbed_app.flower.spec import DeploySpec
    from tests.flower.direct_grid import run_direct

    problem = QuadraticBilevel.random(2, 2, 2, 5.0, 0.3, seed=0)
    spec = DeploySpec(
        "smoke",
        {"closed_form": problem.spec()},
        {"name": "lfednest", "inner_steps": 1, "neumann_terms": 2},
        1,
        0,
    )
    record, iterates, _ = run_direct(spec, tmp_path)
    comparison = compare(spec, record, iterates)
    assert comparison["worst_relative"] <= 1e-12 and comparison["same_counts"]
    assert record["iterations"][0]["flower"]["exchanges"] == 1 + 1  # LFedNest: T + 1 rounds
