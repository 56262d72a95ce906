"""A deployment runs only what it can carry, and loses nothing when a client is lost.

- A client work travels as its settings plus the names of vectors the client was sent; a work
  of an unregistered class (a checked perturbation), a vector the client was never sent, and an
  aggregation of values no client uploaded (client work computed on the server) are refused
  with a message saying why, so a deployed run cannot quietly be a simulation.
- A client that stops answering mid-run (Flower's ``NODE_UNAVAILABLE``) ends the run with the
  round and the client named, every finished iteration kept in the run's files.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tests.flower import ONLY_IN_TOX_FLOWER

pytestmark = ONLY_IN_TOX_FLOWER
pytest.importorskip("flwr", reason="tox -e flower installs Flower (the [flower] extra)")

from problems import QuadraticBilevel  # noqa: E402
from testbed.algorithms.fednest import FedNest  # noqa: E402
from testbed.federation.client_work import ClientReply  # noqa: E402
from testbed.federation.local import InnerGradient  # noqa: E402
from testbed.federation.local import LocalIterates  # noqa: E402
from testbed.federation.local import OuterGradientXAt  # noqa: E402
from testbed_app.experiments.config import ConfigError  # noqa: E402
from testbed_app.flower.codec import NotDeployable  # noqa: E402
from testbed_app.flower.codec import decode_work  # noqa: E402
from testbed_app.flower.codec import encode_work  # noqa: E402
from testbed_app.flower.spec import DeploySpec  # noqa: E402
from testbed_app.flower.spec import load_spec  # noqa: E402
from testbed_app.flower.transport import ClientLost  # noqa: E402
from tests.flower.direct_grid import DirectGrid  # noqa: E402
from tests.flower.direct_grid import run_direct  # noqa: E402

PROBLEM = QuadraticBilevel.random(4, 3, 4, 10.0, 0.3, seed=1)
FEDNEST = {"name": "fednest", "inner_steps": 1, "neumann_terms": 2, "truncation": "deterministic"}


def _spec(**algorithm: object) -> DeploySpec:
    return DeploySpec("t", {"closed_form": PROBLEM.spec()}, {**FEDNEST, **algorithm}, 3, 0)


def test_a_work_travels_as_settings_and_names_and_comes_back_equal():
    x, y, h = torch.randn(3, dtype=torch.float64), torch.randn(4), torch.randn(3)
    work = LocalIterates(
        x, OuterGradientXAt(y), (1, 2, 3, 1), 0.1, global_direction=h, scale_by_steps=True
    )
    names = {id(x): "x", id(y): "y", id(h): "h"}
    text = encode_work(work, lambda tensor: names[id(tensor)])
    assert "0.1" in text and '"held": "h"' in text and "OuterGradientXAt" in text
    back = decode_work(text, {"x": x, "y": y, "h": h})
    assert back == dataclasses.replace(work, local_steps=(1, 2, 3, 1))
    with pytest.raises(NotDeployable, match="never sent"):
        decode_work(text, {"x": x, "y": y})
    with pytest.raises(NotDeployable, match="unknown client work kind 'nope'"):
        decode_work('{"work": "nope", "fields": {}}', {})


def test_a_subclass_of_a_work_or_of_a_portable_class_does_not_travel():
    @dataclasses.dataclass(frozen=True)
    class Perturbed(InnerGradient):
        def run(self, side, clients):  # pragma: no cover - never runs
            return ClientReply(())

    x = torch.zeros(3)
    with pytest.raises(NotDeployable, match="not the registered client work"):
        encode_work(Perturbed(x, x), lambda tensor: "x")

    @dataclasses.dataclass(frozen=True)
    class Shifted(OuterGradientXAt):
        pass

    with pytest.raises(NotDeployable, match="cannot travel"):
        encode_work(LocalIterates(x, Shifted(x), 1, 0.1), lambda tensor: "x")


@dataclasses.dataclass(frozen=True)
class _ComputesOnTheServer(FedNest):
    """A FedNest whose FedOut direction is computed by the server's own oracles (the step a
    simulation-only shortcut would take)."""

    def outer_update(self, ctx, x, y, steps):
        clients = ctx.participants()
        direct = ctx.oracles.grad_outer_x(x, y, clients, None)
        h = ctx.aggregate(direct, clients, "h")
        return x - steps.outer * h, h, None


@dataclasses.dataclass(frozen=True)
class _ForgetsToSend(FedNest):
    """A FedNest whose FedOut uses ``x`` without sending it to the FedOut clients."""

    def outer_update(self, ctx, x, y, steps):
        from testbed.estimators.fednest import OuterDirection

        clients = ctx.participants()
        fresh = x + 1.0  # a vector nobody was sent
        (uploads,) = ctx.run_clients(OuterDirection(fresh, y, None), clients).uploads
        h = ctx.aggregate(uploads, clients, "h")
        return x - steps.outer * h, h, None


@pytest.mark.parametrize(
    "algorithm, match",
    [
        (_ComputesOnTheServer(inner_steps=1, neumann_terms=2), "no client uploaded"),
        (_ForgetsToSend(inner_steps=1, neumann_terms=2), "never sent"),
    ],
)
def test_a_step_that_is_not_a_deployment_is_refused(tmp_path, monkeypatch, algorithm, match):
    spec = _spec()
    # the spec builds registered algorithms only; hand serve this one
    monkeypatch.setattr(DeploySpec, "build_algorithm", lambda self: algorithm)
    with pytest.raises(NotDeployable, match=match):
        run_direct(spec, tmp_path)


def test_fedmsas_exact_semantics_computes_its_chain_on_the_server_and_is_refused(tmp_path):
    """FedMSA-MCO with the "exact" semantics (products of server-averaged Jacobians, (Fed-MCO)'s
    gradient) aggregates a chain that its global step computes inline: not a deployment."""
    from problems import LinearCompositional

    problem = LinearCompositional.random(3, [2, 3, 4], seed=3, heterogeneity=0.2)
    spec = DeploySpec(
        "exact", {"closed_form": problem.spec()}, {"name": "fedmsa-mco", "semantics": "exact"}, 2, 0
    )
    with pytest.raises(NotDeployable, match="no client uploaded"):
        run_direct(spec, tmp_path)


def test_minibatches_and_decentralized_algorithms_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="exact local objectives"):
        _spec(batch_size=2).build_algorithm()
    spec = DeploySpec("hgp", {"closed_form": PROBLEM.spec()}, {"name": "hgp-personalization"}, 2, 0)
    with pytest.raises(ConfigError, match="decentralized"):
        spec.build_algorithm()


def test_a_lost_client_names_the_round_and_keeps_every_finished_iteration(tmp_path):
    from testbed_app.flower.apps import make_client_app

    spec = _spec(participation=None)
    grid = DirectGrid(make_client_app(spec), spec.n_clients)
    # client 2's SuperNode answers hello and the 7 rounds and the sync of iteration 1, then
    # stops (1 + 7 + 1 messages): it is lost in iteration 2's first round
    grid.lose_after = (1002, 9)
    with pytest.raises(ClientLost) as lost:
        run_direct(spec, tmp_path, grid)
    assert lost.value.client == 2 and lost.value.node == 1002
    from testbed_app.flower.records import read_run
    from testbed_app.flower.records import run_folder

    record, iterates = read_run(run_folder(tmp_path, spec.name, "direct"))
    assert record["status"].startswith("lost: outer iteration 2, round 1")
    assert record["lost"]["client"] == 2 and record["lost"]["iterations_completed"] == 1
    assert "Node Unavailable" in record["lost"]["reason"]
    assert len(record["iterations"]) == 1 and record["iterations"][0]["counts_agree"]
    assert len(iterates["x"]) == 2  # the start and iteration 1


def test_a_bad_deploy_config_is_one_error_naming_file_and_key(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text(
        'name = "b"\n[problem]\nfamily = "Quadratic"\n[algorithm]\nname = '
        '"fednest"\n[run]\nsteps = 2\n'
    )
    with pytest.raises(ConfigError, match=r"bad.toml: \[problem\] family: expected one of"):
        load_spec(config)
    config.write_text(
        'name = "b"\n[problem]\nfamily = "QuadraticBilevel.random"\nn_clients = 3'
        "\ndim_x = 2\ndim_y = 2\ncondition_number = 5.0\n[algorithm]\nname = "
        '"fednest"\n[run]\nsteps = 2\nspeed = 3\n'
    )
    with pytest.raises(ConfigError, match=r"\[run\] speed: unknown key"):
        load_spec(config)
    with pytest.raises(ConfigError, match="decentralized"):
        load_spec(Path(__file__).resolve().parents[2] / "configs" / "hgp_personalization.toml")
