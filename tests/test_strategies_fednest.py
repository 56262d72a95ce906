"""FedNest's update strategies (testbed.algorithms.fednest_updates): a variant is a pair of
strategy objects, and the old names resolve to the same objects, iterates, counts and Table 2
formula."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from problems import QuadraticMinimax
from testbed import FederatedContext
from testbed import FedNest
from testbed import run_algorithm
from testbed.algorithms import fednest_updates as updates
from testbed.algorithms.fednest_updates import FedInn
from testbed.algorithms.fednest_updates import FedOut
from testbed.algorithms.fednest_updates import LFedInn
from testbed.algorithms.fednest_updates import LFedOut
from testbed.algorithms.fednest_updates import MinimaxFedOut

# (inner name, outer name, strategies, Table 2's text with random / deterministic truncation)
VARIANTS = [
    ("svrg", "svrg", (FedInn(), FedOut()), "2T + N' + 3", "2T + N + 3"),
    ("sgd", "local", (LFedInn(), LFedOut()), "T + 1", "T + 1"),
    ("sgd", "svrg", (LFedInn(), FedOut()), "T + N' + 3", "T + N + 3"),
    ("svrg", "local", (FedInn(), LFedOut()), "2T + 1", "2T + 1"),
    ("svrg", "minimax", (FedInn(), MinimaxFedOut()), "2T + 2", "2T + 2"),
]


def _problem(outer: str) -> QuadraticBilevel | QuadraticMinimax:
    if outer == "minimax":
        return QuadraticMinimax.random(3, 2, 3, 4.0, seed=1)
    return QuadraticBilevel.random(
        3, 2, 3, 4.0, seed=1, hessian_heterogeneity=0.5, gradient_heterogeneity=1.0
    )


def _by_name_and_by_object(
    inner: str, outer: str, strategies: tuple, **settings: object
) -> tuple[FedNest, FedNest]:
    """FedNest with ``settings`` and the variant named ``(inner, outer)``, and the same with the
    variant's strategy objects in place of the names."""
    by_name = FedNest(inner_method=inner, outer_method=outer, **settings)
    by_object = dataclasses.replace(by_name, inner_method=strategies[0], outer_method=strategies[1])
    return by_name, by_object


def test_names_resolve_through_one_table():
    assert {name: type(s) for name, s in updates.INNER_UPDATES.items()} == {
        "svrg": FedInn,
        "sgd": LFedInn,
    }
    assert {name: type(s) for name, s in updates.OUTER_UPDATES.items()} == {
        "svrg": FedOut,
        "local": LFedOut,
        "minimax": MinimaxFedOut,
    }
    algo = FedNest(inner_method="sgd", outer_method="local")
    assert algo.inner_rule == LFedInn() and algo.outer_rule == LFedOut()
    objects = FedNest(inner_method=LFedInn(), outer_method=LFedOut())
    assert objects.inner_rule is objects.inner_method
    assert isinstance(objects.inner_rule, updates.InnerUpdate)
    assert isinstance(objects.outer_rule, updates.OuterUpdate)


@pytest.mark.parametrize("inner, outer, strategies, random_text, deterministic_text", VARIANTS)
def test_names_and_objects_give_the_same_formula(
    inner, outer, strategies, random_text, deterministic_text
):
    for truncation, text in (("random", random_text), ("deterministic", deterministic_text)):
        by_name, by_object = _by_name_and_by_object(
            inner, outer, strategies, inner_steps=3, neumann_terms=4, truncation=truncation
        )
        formula = by_name.rounds_formula()
        assert formula.text == text
        assert by_object.rounds_formula() == formula
        assert by_object.rounds_per_iteration() == by_name.rounds_per_iteration()
        assert ("N" in formula.parameters) == (outer == "svrg")


@pytest.mark.parametrize("inner, outer, strategies, random_text, deterministic_text", VARIANTS)
def test_names_and_objects_give_the_same_iterates_and_counts(
    inner, outer, strategies, random_text, deterministic_text
):
    p = _problem(outer)
    by_name, by_object = _by_name_and_by_object(
        inner, outer, strategies, inner_steps=2, neumann_terms=3, local_steps=2, participation=2
    )
    a = run_algorithm(by_name, p, 3, np.random.default_rng(5))
    b = run_algorithm(by_object, p, 3, np.random.default_rng(5))
    for ra, rb in zip(a, b, strict=True):
        assert torch.equal(ra.x, rb.x) and torch.equal(ra.state.y, rb.state.y)
        assert ra.state.rounds == rb.state.rounds
        assert ra.state.truncation_index == rb.state.truncation_index
        assert ra.calls == rb.calls


def test_step_counts_its_rounds_through_the_context():
    p = _problem("svrg")
    algo = FedNest(inner_steps=2, neumann_terms=3, truncation="deterministic")
    ctx = FederatedContext(p, np.random.default_rng(0))
    state = algo.init(p)
    for _ in range(2):
        before = ctx.rounds_so_far()
        state = algo.step(ctx, state)
        assert ctx.rounds_so_far() - before == state.rounds == algo.rounds_per_iteration()
    assert ctx.rounds_so_far() == ctx.ledger.rounds == ctx.calls().comm_rounds


@pytest.mark.parametrize(
    "field, value",
    [
        ("inner_method", "adam"),
        ("outer_method", "joint"),
        ("inner_method", FedOut()),
        ("outer_method", FedInn()),
    ],
)
def test_unknown_names_and_wrong_strategies_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        FedNest(**{field: value})


def test_minimax_outer_update_checks_the_problem():
    with pytest.raises(ValueError, match="minimax"):
        MinimaxFedOut().check_problem(_problem("svrg"))
    with pytest.raises(ValueError, match="minimax"):
        FedNest(outer_method=MinimaxFedOut()).init(_problem("svrg"))
    MinimaxFedOut().check_problem(_problem("minimax"))  # valid there


def test_a_new_outer_strategy_is_a_small_class():
    """A strategy that is not in the table plugs in by object: here FedOut with its two rounds
    and FedIHGP's, written as a subclass that only renames itself."""

    @dataclasses.dataclass(frozen=True)
    class Renamed(FedOut):
        pass

    p = _problem("svrg")
    base = FedNest(inner_steps=1, neumann_terms=2)
    a = run_algorithm(base, p, 2, np.random.default_rng(3))
    b = run_algorithm(
        dataclasses.replace(base, outer_method=Renamed()), p, 2, np.random.default_rng(3)
    )
    assert torch.equal(a[-1].x, b[-1].x) and a[-1].calls == b[-1].calls
