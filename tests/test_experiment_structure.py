"""How the experiments package is put together: the ``[algorithm]`` built once, and no import
loop among its modules."""

from __future__ import annotations

from pathlib import Path

import grimp  # import-linter's graph builder (the test extra installs it)
import pytest

from testbed_app.experiments import algorithm
from testbed_app.experiments import base
from testbed_app.experiments.config import ConfigError
from testbed_app.experiments.config import load_config
from testbed_app.experiments.registry import build_experiment

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", ["aggitd_table2_iid_tau1", "hgp_personalization"])
def test_the_algorithm_is_built_once_and_run_as_validated(name: str, monkeypatch) -> None:
    built = []

    def counting(table):
        built.append(dict(table))
        return algorithm.build_entry(table)

    monkeypatch.setattr(base, "build_entry", counting)
    config = load_config(CONFIGS / f"{name}.toml", {"run.steps": 1})
    experiment = build_experiment(config)
    assert len(built) == 1  # validation built it; the experiment took the same object
    if name.startswith("aggitd"):  # HGP's experiments derive their SGP variants from it
        assert experiment.algorithm is config.entry  # type: ignore[attr-defined]


def test_a_parameter_the_constructor_refuses_is_a_config_error(tmp_path: Path) -> None:
    # inner_steps = 0 is of the declared type (an integer >= 0, AggITD's N may be 0), but
    # FedNest's constructor wants T >= 1: validation runs the constructor's own checks
    text = (CONFIGS / "aggitd_table2_fednest_iid_tau1.toml").read_text()
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("inner_steps = 5 ", "inner_steps = 0 ", 1))
    with pytest.raises(
        ConfigError,
        match=r"bad.toml: \[algorithm\]: 'fednest' rejects these "
        r"parameters: .*inner_steps",
    ):
        load_config(path)


def test_no_import_loop_in_the_application() -> None:
    # function-local imports count too: main had one loop of 7 experiments modules through
    # config.py (config -> registry -> hgp/server -> hgp_common -> config)
    graph = grimp.build_graph("testbed_app")
    loops = [
        (a, b)
        for a in graph.modules
        for b in graph.find_modules_directly_imported_by(a)
        if graph.chain_exists(importer=b, imported=a)
    ]
    assert loops == []
