"""Deployed on Flower, every server-based algorithm computes the batched simulation's iterates and
carries the ledger's messages: FedNest's five Table 2 variants (FedInn / LFedInn with FedOut
(FedIHGP) / LFedOut / the minimax FedOut), FBO-AggITD and its SGD variant, FedMSA (bilevel,
minimax, generalised, multi-level) on closed-form problems, under full and seeded partial
participation; the digits MLP workloads in float32.

The ServerApp and ClientApp are the engines' (``serve``, ``make_client_app``); the grid is
:class:`~tests.flower.direct_grid.DirectGrid`, which passes every message through Flower's
serialization in this process (``test_engines.py`` runs the same apps on Flower's simulation
engine and on a local deployment).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flower import ONLY_IN_TOX_FLOWER

pytestmark = ONLY_IN_TOX_FLOWER
pytest.importorskip("flwr", reason="tox -e flower installs Flower (the [flower] extra)")

from problems import LinearCompositional  # noqa: E402
from problems import QuadraticBilevel  # noqa: E402
from problems import QuadraticMinimax  # noqa: E402
from testbed_app.flower.compare import compare  # noqa: E402
from testbed_app.flower.spec import DeploySpec  # noqa: E402
from testbed_app.flower.spec import load_spec  # noqa: E402
from tests.flower.direct_grid import carried_floats  # noqa: E402
from tests.flower.direct_grid import run_direct  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

PROBLEMS = {
    "bilevel": QuadraticBilevel.random(5, 3, 4, 10.0, 0.3, seed=1),
    "minimax": QuadraticMinimax.random(5, 3, 4, 10.0, 0.3, seed=2),
    "compositional": LinearCompositional.random(5, [2, 3], seed=3, heterogeneity=0.2),
    "multilevel": LinearCompositional.random(5, [2, 3, 4], seed=3, heterogeneity=0.2),
}
# why these sizes: 5 clients, T = 2, N = 3 (FedNest) or N = 2 (AggITD) and 3 outer iterations
# exercise every round kind, a partial client set that changes between rounds (0.6 of 5 = 3
# clients), and warm starts across iterations, in about a second per case
FEDNEST = {"inner_steps": 2, "neumann_terms": 3}
AGGITD = {"inner_steps": 2, "outer_step_size": 0.05}
CASES = [
    *[
        (name, kind, part, FEDNEST)
        for name in ("fednest", "fednest-sgd", "lfednest", "lfednest-svrg")
        for kind in ("bilevel", "minimax", "compositional")
        for part in (None, 0.6)
    ],
    ("fednest", "bilevel", None, {**FEDNEST, "truncation": "deterministic"}),
    ("fednest", "bilevel", 0.6, {**FEDNEST, "local_steps": [1, 2, 3, 1, 2]}),
    *[("fednest-minimax", "minimax", part, FEDNEST) for part in (None, 0.6)],
    *[
        (name, kind, part, AGGITD)
        for name in ("fbo-aggitd", "fbo-aggitd-sgd")
        for kind in ("bilevel", "minimax", "compositional")
        for part in (None, 0.6)
    ],
    ("fbo-aggitd", "bilevel", 0.6, {**AGGITD, "expectation": True}),
    *[
        (name, kind, part, {"local_steps": 2})
        for name in ("fedmsa", "fedmsa-generalised")
        for kind in ("bilevel", "minimax")
        for part in (1, 0.6)
    ],
    *[("fedmsa-mco", "multilevel", part, {"local_steps": 2}) for part in (1, 0.6)],
]


def _spec(name: str, kind: str, participation: float | None, extra: dict) -> DeploySpec:
    params = {"name": name, **extra}
    if participation is not None:
        params["participation"] = participation
    return DeploySpec(
        f"{name}-{kind}-{participation}",
        {"closed_form": PROBLEMS[kind].spec()},
        params,
        steps=3,
        seed=7,
    )


@pytest.mark.parametrize(
    "name, kind, participation, extra",
    CASES,
    ids=[f"{c[0]}-{c[1]}-{c[2]}-{len(c[3])}" for c in CASES],
)
def test_closed_form_iterates_and_counts_equal_the_simulation(
    tmp_path, name, kind, participation, extra
):
    spec = _spec(name, kind, participation, extra)
    record, iterates, grid = run_direct(spec, tmp_path)
    assert record["status"] == "completed"
    comparison = compare(spec, record, iterates)
    # float64 round-off: 1e-12 of the scale (TOLERANCE's comment says why)
    assert comparison["dtype"] == "float64" and comparison["tolerance"] == 1e-12
    assert comparison["worst_relative"] <= 1e-12, comparison["iterations"]
    rows = record["iterations"]
    assert len(rows) == spec.steps
    for row in rows:
        ledger, flower = row["ledger"], row["flower"]
        # one exchange per aggregation round, one array per ledger message, the same floats
        assert flower["exchanges"] == ledger["rounds"] == (row["formula"] or ledger["rounds"])
        assert flower["vectors_down"] + flower["vectors_up"] == ledger["vectors"]
        # the two counts once both called "messages" are named apart, and the file says which
        # is which (Flower's Messages include the sync's and may carry several arrays)
        assert "messages" not in ledger and "messages" not in flower
        assert flower["flower_messages"] >= 2 * flower["exchanges"]
        described = {name for names in record["counts"] for name in names.split(", ")}
        assert {f"ledger.{k}" for k in ledger} | {f"flower.{k}" for k in flower} <= described
        assert (flower["floats_up"], flower["floats_down"]) == (
            ledger["floats_up"],
            ledger["floats_down"],
        )
        assert row["counts_agree"] and row["formula_agrees"]
    # what the clients received, counted from the messages themselves, is the ledger's
    assert carried_floats(grid) == sum(row["ledger"]["floats_down"] for row in rows)
    kinds = {m.metadata.message_type for m in grid.delivered}
    assert kinds <= {"query.hello", "query.sync"} | {f"train.{k}" for k in _work_kinds()}
    assert any(kind.startswith("train.") for kind in kinds)


def _work_kinds() -> set[str]:
    from testbed.federation.client_work import WORK_KINDS

    return set(WORK_KINDS)


@pytest.mark.parametrize(
    "name, formula", [("fednest", 2 * 2 + 3 + 3), ("fbo-aggitd", 2 * 2 + 3), ("fedmsa", 2)]
)
def test_rounds_per_iteration_are_the_papers(tmp_path, name, formula):
    """FedNest 2T + N + 3 (deterministic truncation), FBO-AggITD 2N + 3, FedMSA 2: exchanges
    per outer iteration on Flower."""
    extra = (
        {**FEDNEST, "truncation": "deterministic"}
        if name == "fednest"
        else AGGITD
        if name == "fbo-aggitd"
        else {"local_steps": 2}
    )
    record, _, _ = run_direct(_spec(name, "bilevel", None, extra), tmp_path)
    assert [row["flower"]["exchanges"] for row in record["iterations"]] == [formula] * 3
    assert [row["formula"] for row in record["iterations"]] == [formula] * 3


@pytest.mark.parametrize(
    "config",
    [
        "aggitd_table2_iid_tau1.toml",
        "fednest_hyper_representation.toml",
        "fedmsa_rounds_to_90.toml",
    ],
)
def test_digits_mlp_iterates_equal_the_simulation_in_float32(tmp_path, config):
    spec = load_spec(CONFIGS / config, steps=2)
    record, iterates, _ = run_direct(spec, tmp_path)
    assert record["status"] == "completed"
    comparison = compare(spec, record, iterates)
    assert comparison["dtype"] == "float32"
    assert comparison["worst_relative"] <= 1e-4  # TOLERANCE[float32], its comment says why
    assert comparison["same_numbers"] and comparison["same_counts"]
