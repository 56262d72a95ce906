"""HGP's averaging rules (testbed.decentralized.averaging) and the registry's defaults read from
the dataclass fields (testbed.info.field_defaults)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from problems import PerClientQuadratic
from testbed import AveragingRule
from testbed import ExactAveraging
from testbed import HyperGradientPush
from testbed import PushSumAveraging
from testbed import ServerAveraging
from testbed.decentralized.averaging import AVERAGING_RULES
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.info import field_defaults
from testbed.registry import get_estimator

RULES = [
    ("pushsum", PushSumAveraging()),
    ("exact", ExactAveraging()),
    ("server", ServerAveraging()),
]


def _problem() -> PerClientQuadratic:
    """Three clients with noisy minibatch Jacobians (the stochastic form needs samples)."""
    return PerClientQuadratic.random(
        3, 2, 2, 3.0, 5, hessian_heterogeneity=0.3, n_samples=6, hessian_noise=0.1, cross_noise=0.2
    )


def test_names_resolve_through_one_table():
    assert {name: type(rule) for name, rule in AVERAGING_RULES.items()} == {
        "pushsum": PushSumAveraging,
        "exact": ExactAveraging,
        "server": ServerAveraging,
    }
    assert HyperGradientPush().averaging_rule == PushSumAveraging()
    rule = ServerAveraging()
    assert HyperGradientPush(averaging=rule).averaging_rule is rule
    assert all(isinstance(r, AveragingRule) for r in AVERAGING_RULES.values())


@pytest.mark.parametrize("name, rule", RULES)
@pytest.mark.parametrize("batch_size", [None, 2])
def test_names_and_rules_give_the_same_estimate_and_counts(name, rule, batch_size):
    problem = _problem()
    by_name = HyperGradientPush(
        neumann_terms=5,
        pushsum_steps=2,
        averaging=name,
        batch_size=batch_size,
        inner=StochasticGradientPush(3),
    )
    by_rule = dataclasses.replace(by_name, averaging=rule)
    x = torch.linspace(-1.0, 1.0, problem.dim_x, dtype=torch.float64)
    a = by_name.estimate(problem, x, by_name.init(problem), np.random.default_rng(1))
    b = by_rule.estimate(problem, x, by_rule.init(problem), np.random.default_rng(1))
    assert torch.equal(a.value, b.value) and a.calls == b.calls
    assert a.aux["consensus_errors"] == b.aux["consensus_errors"]
    assert bool(a.aux["consensus_errors"]) == rule.gossips
    for ledger in ("graph_ledger", "server_ledger"):
        assert (a.aux[ledger] is None) == (b.aux[ledger] is None)
    assert (a.aux["graph_ledger"] is not None) == (name == "pushsum")
    assert (a.aux["server_ledger"] is not None) == (name == "server")
    if name == "server":
        assert a.aux["server_ledger"].rounds == b.aux["server_ledger"].rounds == 5


@pytest.mark.parametrize("name, rule", RULES)
def test_a_rule_owns_its_operator(name, rule):
    problem = _problem()
    est = HyperGradientPush(pushsum_steps=3, averaging=name)
    graph = est.graph(problem.n_clients)
    for time in (0, 3):
        operator = rule.operator(graph, time, steps=3, keep_weights=False)
        np.testing.assert_array_equal(operator, est.averaging_operator(graph, time))
        np.testing.assert_allclose(operator.sum(axis=1), 1.0, atol=1e-12)  # row-stochastic
        if name != "pushsum":
            np.testing.assert_allclose(operator, 1.0 / problem.n_clients, atol=1e-15)


def test_a_rule_makes_the_ledgers_it_uses():
    assert PushSumAveraging().ledgers(3).graph is not None
    assert PushSumAveraging().ledgers(3).server is None
    assert ServerAveraging().ledgers(3).server is not None
    assert ExactAveraging().ledgers(3) == (None, None)


@pytest.mark.parametrize("value", ["gossip", PushSumAveraging, 1])
def test_unknown_rules_are_refused(value):
    with pytest.raises(ValueError, match="averaging"):
        HyperGradientPush(averaging=value)  # type: ignore[arg-type]


def test_field_defaults_read_and_rename_the_fields():
    assert field_defaults(StochasticGradientPush, "steps", variant="sgp_variant") == {
        "steps": 200,
        "sgp_variant": "assran",
    }
    with pytest.raises(TypeError, match="no field"):
        field_defaults(StochasticGradientPush, "nope")


def test_registry_defaults_follow_the_fields():
    """Each HGP entry's defaults are HyperGradientPush's fields (less the fixed ones) with its
    settings on top, and its build passes them on."""
    info = get_estimator("hgp-stochastic")
    fields = {f.name: f.default for f in dataclasses.fields(HyperGradientPush)}
    for key, value in info.defaults.items():
        if key in fields and key not in info.settings:
            assert value == fields[key], key
    est = info.build(inner_steps=7)
    assert est.inner == StochasticGradientPush(7) and est.batch_size == 4
    assert get_estimator("hgp-centralized").build().averaging_rule == ServerAveraging()
