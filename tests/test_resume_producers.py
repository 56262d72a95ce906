"""The producers resume through ``results_format.resume``: their fingerprints are the ones they
wrote before it (saved results stay fresh), and the ledgers' counts go into checkpoints through
their own ``state_dict`` / ``load_state_dict``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from results_format.layout import CALIBRATION
from results_format.resume import write_json
from results_format.validation import seal
from tests._python_runs import run_python
from tests._statistical_toy import PROFILE
from tests._statistical_toy import make_toy
from tests._statistical_toy import toy_claim
from theory_checks.calibration import calibrate_claim
from theory_checks.runner import claim_fingerprint


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_claim_fingerprints_are_the_ones_written_before():
    from theory_checks.claim import Perturbation
    from theory_checks.claim_results import claim_definition
    from theory_checks.profiles import PerProfile
    from theory_checks.registry import CLAIM_DB
    from theory_checks.runner import PROFILES

    for claim in CLAIM_DB:
        for profile in PROFILES.values():
            parts = claim_definition(claim, profile)
            # the hash the producers wrote before they resumed through results_format.resume
            assert claim_fingerprint(claim, profile) == _sha16("|".join(parts)), claim.id
            # hypotheses, readings, a stated scale and added parameters follow the eleven parts
            # below only where declared, so a claim without them keeps the fingerprint it had
            # before they existed
            optional = (claim.hypotheses, claim.readings, claim.scale, claim.added_parameters)
            assert len(parts) == 11 + sum(1 for declared in optional if declared), claim.id
    # the definition they hashed: these eleven parts first, written out for a claim whose every
    # field is known (id, reference, kind, statement, estimators, the check's qualified name, the
    # profile's cap on cases, decision, false-failure rate, perturbation, positive control)
    toy = toy_claim(estimators=("exact", "aid-fp"), max_examples=PerProfile(3, 7))
    perturbed = dataclasses.replace(
        toy,
        perturbation=Perturbation("off by two", "adds 2", make_toy(2.0)),
        positive_control=lambda: None,
    )
    for claim, tail in ((toy, ["", ""]), (perturbed, ["off by two", "control"])):
        for profile, cases in (("fast", "3"), ("thorough", "7")):
            assert claim_definition(claim, PROFILES[profile]) == [
                "toy.mean_below_bound",
                "test",
                "variance_bound",
                "E X <= 1",
                "exact,aid-fp",
                "toy_check",
                cases,
                "statistical",
                "0.001",
                *tail,
            ]


def test_comparison_fingerprints_are_the_ones_written_before():
    from theory_checks.comparison import reaching
    from theory_checks.comparison import runs as definitions
    from theory_checks.comparison import table as comparison_table

    tail = [repr(reaching.TARGET), repr(reaching.ROUND_BUDGET), repr(definitions.STEP_GRID)]
    for parts in (
        ("abc", "tuned", "candidate", 3, 0.25),
        ("x", "prescribed", "baseline", 0, None),
        (),
    ):
        assert comparison_table.fingerprint(*parts) == _sha16(
            "|".join([repr(p) for p in parts] + tail)
        )


def test_communication_fingerprint_is_the_one_written_before():
    from testbed.registry import ESTIMATOR_DB
    from testbed_app import communication

    infos = [i for i in ESTIMATOR_DB if i.role == "algorithm"]
    for chosen in (infos, infos[:2], []):
        text = (
            "|".join(
                f"{i.name}:{sorted(i.defaults.items())!r}:{i.cls.__qualname__}" for i in chosen
            )
            + f"|{communication.ITERATIONS}"
        )
        assert communication.fingerprint(chosen) == _sha16(text)


@pytest.mark.parametrize("name", ["aggitd_table2_iid_tau1.toml", "hgp_personalization.toml"])
def test_config_fingerprint_is_the_one_written_before(name):
    from testbed_app.experiments.config import as_dict
    from testbed_app.experiments.config import fingerprint
    from testbed_app.experiments.config import load_config
    from testbed_app.experiments.runner import RESUMABLE_CHANGES

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / name)
    assert fingerprint(config) == _sha16(json.dumps(as_dict(config), sort_keys=True, default=str))
    # what a resumed run may change: the description, the replication table, where and how
    # long it runs
    assert RESUMABLE_CHANGES == (
        "description",
        "replication",
        "run.steps",
        "run.device",
        "run.checkpoint_every",
    )
    content = {
        key: value
        for key, value in as_dict(config).items()
        if key not in ("description", "replication")
    }
    content["run"] = {
        key: value
        for key, value in content["run"].items()
        if key not in ("steps", "device", "checkpoint_every")
    }
    assert fingerprint(config, ignore=RESUMABLE_CHANGES) == _sha16(
        json.dumps(content, sort_keys=True, default=str)
    )


def test_calibration_resumes_only_the_seeds_of_this_definition_and_profile(tmp_path):
    claim = toy_claim()
    path = tmp_path / CALIBRATION / f"{claim.id}.json"

    def rerun(record: dict | str) -> list[int]:
        """The seeds of two that ``calibrate_claim`` runs again over ``record`` (it reports the
        seeds it runs, not those it resumes)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(record, str):
            path.write_text(record)
        else:
            write_json(path, record)
        ran: list[str] = []
        calibrate_claim(claim, 2, PROFILE, tmp_path, progress=ran.append, make=make_toy(0.0))
        return [int(re.search(r" seed (\d+):", line).group(1)) for line in ran]

    runs = [{"seed": 0, "verdict": "holds", "seconds": 1.0}, {"seed": 1}]
    fingerprint = claim_fingerprint(claim, PROFILE)
    record = {"claim": claim.id, "fingerprint": fingerprint, "profile": "fast", "runs": runs}
    assert rerun(record) == [0, 1]  # unsealed (edited, or an older testbed's): redone
    assert rerun(seal(record)) == [1]  # a record without its verdict is redone
    assert rerun(seal(record | {"fingerprint": "g"})) == [0, 1]
    assert rerun(seal(record | {"profile": "thorough"})) == [0, 1]
    assert rerun(seal(record | {"runs": "x"})) == [0, 1]
    assert rerun('{"torn') == [0, 1]


def _partial_rounds(ledger, rng: np.random.Generator, rounds: int) -> None:
    for _ in range(rounds):
        clients = torch.as_tensor(rng.choice(ledger.n_clients, 3, replace=False))
        ledger.aggregate(torch.ones(3, 4), clients)
        ledger.send(torch.ones(2), clients)


def test_the_federated_ledger_round_trips_its_counts():
    from testbed.calls import CallCounter
    from testbed.federation.ledger import Ledger

    ledger = Ledger(6)
    _partial_rounds(ledger, np.random.default_rng(0), 5)  # client sets still pending
    state = ledger.state_dict()
    assert list(state) == ["rounds", "messages", "floats_up", "floats_down", "payload_sizes"]
    assert state["rounds"] == 5 and state["payload_sizes"] == [2, 4]
    restored = Ledger(6, CallCounter())
    _partial_rounds(restored, np.random.default_rng(1), 2)  # replaced, not added to
    restored.load_state_dict(state)
    for key, value in restored.state_dict().items():
        np.testing.assert_array_equal(value, state[key])
    state["floats_up"][0] += 1  # the saved arrays are copies
    assert restored.floats_up[0] != state["floats_up"][0]
    _partial_rounds(ledger, np.random.default_rng(2), 3)
    _partial_rounds(restored, np.random.default_rng(2), 3)
    np.testing.assert_array_equal(ledger.floats_down, restored.floats_down)
    assert restored.counter is not None and restored.counter.snapshot().comm_rounds == 5


def test_the_graph_ledger_round_trips_its_counts():
    from testbed.decentralized.ledger import GraphLedger

    ledger, mixing = GraphLedger(4), np.full((4, 4), 0.25)
    ledger.transmit(torch.ones(4, 3), mixing)
    state = ledger.state_dict()
    assert state["steps"] == 1 and state["payload_sizes"] == [3]
    restored = GraphLedger(4)
    restored.load_state_dict(state)
    for key, value in restored.state_dict().items():
        np.testing.assert_array_equal(value, state[key])
    ledger.transmit(torch.ones(4, 3), mixing)
    restored.transmit(torch.ones(4, 3), mixing)
    assert restored.total_floats == ledger.total_floats and restored.steps == 2
    with pytest.raises(ValueError):
        GraphLedger(5).load_state_dict(state)


def test_a_server_checkpoint_holds_the_ledgers_state_dict(tmp_path):
    from testbed_app.experiments.config import load_config
    from testbed_app.experiments.config import to_toml
    from testbed_app.experiments.server import ServerExperiment
    from tests.test_experiments import TINY

    path = tmp_path / "tiny.toml"
    path.write_text(to_toml({k: v for k, v in TINY.items() if k != "replication"}))
    config = load_config(path)
    experiment = ServerExperiment(config)
    experiment.step()
    saved = experiment.state_dict()
    assert list(saved["ledger"]) == [
        "rounds",
        "messages",
        "floats_up",
        "floats_down",
        "payload_sizes",
    ]
    resumed = ServerExperiment(config)
    resumed.load_state_dict(saved)
    for key, value in resumed.ctx.ledger.state_dict().items():
        np.testing.assert_array_equal(value, saved["ledger"][key])
    assert resumed.step() == experiment.step()


def test_a_runs_config_toml_is_the_same_text_in_every_process():
    import os
    import tomllib

    root = Path(__file__).resolve().parents[1]
    config = root / "configs" / "hgp_personalization.toml"
    code = (
        "import sys; from testbed_app.experiments.config import dump_toml, load_config; "
        f"sys.stdout.write(dump_toml(load_config({str(config)!r})))"
    )
    texts = {
        run_python(code, cwd=root, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2")
    }
    assert len(texts) == 1  # [workload] options in the config's order, not a set's
    from testbed_app.experiments.config import as_dict
    from testbed_app.experiments.config import load_config

    assert tomllib.loads(texts.pop())["workload"] == as_dict(load_config(config))["workload"]
