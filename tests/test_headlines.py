"""AggITD's Table 2 headline under its protocol
(theory_checks/comparison/aggitd_table2_factor.py): the settings are the replication configs',
the factor's range follows what each run reached, and a workload recipe round-trips through its
spec."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from problems import from_spec
from theory_checks.comparison.aggitd_table2_factor import TABLE2
from theory_checks.comparison.aggitd_table2_factor import Reach
from theory_checks.comparison.aggitd_table2_factor import factor_range

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", sorted(TABLE2))
def test_settings_are_the_replication_configs(name):
    setting = TABLE2[name]
    for role, run in (("", setting.candidate), ("fednest_", setting.baseline)):
        config = tomllib.loads((CONFIGS / f"aggitd_table2_{role}{name}.toml").read_text())
        algorithm = dict(config["algorithm"])
        assert algorithm.pop("name") == run.algorithm
        assert algorithm == dict(run.params)
        assert config["run"]["steps"] == run.iterations
        assert config["split"] == dict(setting.workload.split)
        workload = dict(config["workload"])
        assert (workload.pop("kind"), workload.pop("model")) == (setting.workload.kind, "mlp")
        assert workload == dict(setting.workload.options)
        assert config["data"]["dataset"] == setting.workload.dataset
        assert config["replication"]["paper_value"] == (
            setting.paper_rounds[1] if role else setting.paper_rounds[0]
        )


def test_factor_range_follows_what_was_reached():
    def reach(rounds, budget):
        return Reach(rounds, budget, 0.9)

    assert factor_range(reach(500.0, 780.0), reach(900.0, 1080.0)) == (1.8, 1.8)
    # a candidate that never reaches: the factor is at most FedNest's rounds over its budget
    assert factor_range(reach(None, 780.0), reach(900.0, 1080.0)) == (0.0, 900.0 / 780.0)
    # a FedNest that never reaches: at least its budget over the candidate's rounds
    assert factor_range(reach(100.0, 780.0), reach(None, 1080.0)) == (10.8, math.inf)
    assert factor_range(reach(None, 780.0), reach(None, 1080.0)) == (0.0, math.inf)


def test_a_workload_recipe_round_trips_through_its_spec():
    recipe = TABLE2["noniid_tau5"].workload.with_seed(3)
    assert from_spec(recipe.spec()) == recipe
    assert recipe.id == "recipe.hyper_representation.digits.mlp.shards.m20.seed3"
