"""`testbed run`: config validation, the runner's files, exact resumption, replication rows."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from results_format import REPLICATION_SCHEMA
from testbed_app.cli import main
from testbed_app.experiments import runner
from testbed_app.experiments.base import METRIC_KEYS
from testbed_app.experiments.config import ConfigError
from testbed_app.experiments.config import dump_toml
from testbed_app.experiments.config import load_config
from testbed_app.experiments.config import to_toml
from testbed_app.experiments.replication import measure
from testbed_app.experiments.replication import replication_rows
from testbed_app.experiments.replication import rounds_to_accuracy
from testbed_app.experiments.server import ServerExperiment

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.toml"))

# A tiny server experiment: 4 clients on digits, FedNest with one inner step, one Neumann term and
# one local step (5 rounds or fewer per iteration), so a step takes a fraction of a second.
TINY: dict[str, Any] = {
    "name": "tiny",
    "paper": "FedNest",
    "description": "test run",
    "data": {"dataset": "digits", "limit": 400},
    "split": {"scheme": "iid", "n_clients": 4},
    "workload": {"kind": "hyper_representation", "model": "mlp"},
    "algorithm": {
        "name": "fednest",
        "inner_steps": 1,
        "neumann_terms": 1,
        "local_steps": 1,
        "inner_step_size": 0.05,
        "outer_step_size": 0.05,
        "neumann_step_size": 0.05,
    },
    "run": {"steps": 3, "checkpoint_every": 2, "seed": 3},
    "replication": {
        "table": "test table",
        "metric": "rounds_to_accuracy",
        "threshold": 0.1,
        "paper_value": 100,
        "differences": "a test",
        "extra_rows": [{"metric": "final_test_accuracy", "paper_value": 90.0}],
    },
}


def write(
    tmp_path: Path,
    edits: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    name: str = "config.toml",
) -> Path:
    """TINY with ``{"section.key": value}`` edits and ``"section.key"`` removals, as a file."""
    raw = copy.deepcopy(TINY)
    for dotted, value in (edits or {}).items():
        section, _, key = dotted.partition(".")
        if key:
            raw[section][key] = value
        else:
            raw[section] = value
    for dotted in drop:
        section, _, key = dotted.partition(".")
        del raw[section][key]
    path = tmp_path / name
    path.write_text(to_toml(raw))
    return path


# ------------------------------------------------------------------------------- validation


def test_unknown_key_is_named_with_file_section_and_suggestion(tmp_path):
    path = write(tmp_path, {"run.stepz": 5})
    with pytest.raises(
        ConfigError,
        match=r"config\.toml: \[run\]: unknown key 'stepz' "
        r"\(did you mean 'steps'\?\)",
    ):
        load_config(path)


def test_unknown_section_is_rejected(tmp_path):
    path = write(tmp_path, {"optimiser": {"lr": 0.1}})
    with pytest.raises(ConfigError, match="unknown section or key 'optimiser'"):
        load_config(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"run.steps": -3}, r"\[run\] steps: expected a positive integer"),
        ({"run.steps": 2.5}, r"\[run\] steps: expected a positive integer"),
        ({"run.dtype": "float16"}, r"\[run\] dtype"),
        ({"data.test_fraction": 1.5}, r"\[data\] test_fraction: expected a number in \(0, 1\)"),
        ({"split.n_clients": 401}, r"\[split\] n_clients: 401 clients but only 400 training"),
        (
            {"data.dataset": "mnits"},
            r"\[data\] dataset: unknown value 'mnits' \(did you mean "
            r"'mnist'\?\)",
        ),
        (
            {"split.scheme": "shard"},
            r"\[split\] scheme: unknown value 'shard' \(did you mean "
            r"'shards'\?\)",
        ),
        ({"split.alpha": -1.0, "split.scheme": "dirichlet"}, r"\[split\]: .*alpha"),
        ({"workload.kind": "hyper_representations"}, r"\[workload\] kind: unknown value"),
        (
            {"workload.regularisation": "squared"},
            r"\[workload\]: unknown key 'regularisation' "
            r"\(did you mean 'regularization'\?\)",
        ),
        (
            {"algorithm.name": "fednets"},
            r"\[algorithm\] name: unknown value 'fednets' \(did you "
            r"mean 'fednest'\?\)",
        ),
        (
            {"algorithm.neumann_term": 3},
            r"\[algorithm\] neumann_term: 'fednest' has no parameter "
            r"'neumann_term' \(did you mean 'neumann_terms'\?\)",
        ),
        ({"replication.metric": "rounds"}, r"\[replication\] metric"),
    ],
)
def test_impossible_values_are_rejected_with_file_and_key(tmp_path, edit, message):
    path = write(tmp_path, edit)
    with pytest.raises(ConfigError, match=str(path.name) + r".*" + message):
        load_config(path)


def test_missing_required_key_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"\[split\] n_clients: missing"):
        load_config(write(tmp_path, drop=("split.n_clients",)))


def test_rounds_to_accuracy_needs_a_threshold(tmp_path):
    with pytest.raises(ConfigError, match=r"\[replication\] threshold: missing"):
        load_config(write(tmp_path, drop=("replication.threshold",)))


def test_missing_dataset_folder_is_a_config_error(tmp_path):
    absent = tmp_path / "no-mnist-here"
    path = write(tmp_path, {"data.dataset": "mnist", "data.root": str(absent)})
    with pytest.raises(ConfigError, match=r"\[data\] root: .*no-mnist-here.*does not exist"):
        load_config(path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a CPU-only machine")
def test_cuda_without_cuda_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"\[run\] device: 'cuda' requested"):
        load_config(write(tmp_path), {"run.device": "cuda"})


def test_bad_config_fails_before_any_file_is_written(tmp_path, capsys):
    results = tmp_path / "results"
    code = main(
        [
            "run",
            str(write(tmp_path, {"algorithm.neumann_term": 3})),
            "--results",
            str(results),
            "--quiet",
        ]
    )
    assert code == 2
    assert "neumann_terms" in capsys.readouterr().err
    assert not results.exists()


def test_overrides_replace_keys(tmp_path):
    config = load_config(write(tmp_path), {"run.steps": 7, "run.device": None})
    assert config.run["steps"] == 7 and config.run["device"] == "cpu"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_validates_and_round_trips(path, tmp_path):
    config = load_config(path)
    assert config.replication is not None, "every paper config states the paper's number"
    copy_path = tmp_path / "copy.toml"
    copy_path.write_text(dump_toml(config))
    assert dataclasses.replace(load_config(copy_path), path=None) == dataclasses.replace(
        config, path=None
    )


def test_shipped_configs_cover_the_papers_with_distinct_names():
    configs = [load_config(path) for path in CONFIGS]
    names = [config.name for config in configs]
    assert len(set(names)) == len(names), "two configs would share a results folder"
    # a run folder (results/runs/<name>) is named as its config file is
    assert [(c.path.stem if c.path else None) for c in configs] == names
    assert {"AggITD", "FedNest", "FedMSA"} <= {config.paper for config in configs}
    # AggITD Table 2: FBO-AggITD and FedNest in each of the four settings
    table2 = [
        (c.algorithm["name"], c.split["scheme"], c.algorithm["local_steps"])
        for c in configs
        if c.name.startswith("aggitd_table2")
    ]
    assert sorted(table2) == sorted(
        (algorithm, scheme, tau)
        for algorithm in ("fbo-aggitd", "fednest")
        for scheme in ("iid", "shards")
        for tau in (1, 5)
    )


# ------------------------------------------------------------------------------- replication


def _row(step: int, rounds: int, accuracy: float, r2: float = math.nan) -> dict[str, float]:
    return {
        "step": float(step),
        "rounds": float(rounds),
        "floats_sent": 10.0 * step,
        "test_accuracy": accuracy,
        "r2": r2,
    }


HAND_MADE = [
    _row(1, 18, 0.52),
    _row(2, 36, math.nan),
    _row(3, 54, 0.905, 0.3),
    _row(4, 72, 0.89),
    _row(5, 90, 0.93, 0.7),
    _row(6, 108, math.nan),
]


def test_rounds_to_accuracy_is_the_first_row_reaching_the_threshold():
    assert rounds_to_accuracy(HAND_MADE, 0.9) == 54.0  # step 3, not step 5 (first crossing)
    assert rounds_to_accuracy(HAND_MADE, 0.93) == 90.0  # reaching exactly counts
    assert rounds_to_accuracy(HAND_MADE, 0.95) is None  # never reached


def test_final_metrics_skip_unevaluated_rows():
    assert measure(HAND_MADE, {"metric": "final_test_accuracy"}) == pytest.approx(93.0)
    assert measure(HAND_MADE, {"metric": "final_metric", "column": "r2"}) == 0.7
    with pytest.raises(KeyError, match="no column 'R2'"):
        measure(HAND_MADE, {"metric": "final_metric", "column": "R2"})


def test_replication_rows_follow_the_schema():
    table = {
        "table": "AggITD Table 2",
        "setting": "iid, tau = 1",
        "metric": "rounds_to_accuracy",
        "threshold": 0.9,
        "paper_value": 530,
        "unit": None,
        "label": None,
        "column": None,
        "differences": "digits",
        "extra_rows": [
            {
                "metric": "final_test_accuracy",
                "paper_value": 92.94,
                "setting": None,
                "threshold": None,
                "column": None,
                "unit": None,
                "label": None,
                "differences": None,
            }
        ],
    }
    rows = replication_rows(table, HAND_MADE)
    assert rows == [
        {
            "setting": "iid, tau = 1",
            "metric": "rounds to 90% test accuracy",
            "paper_value": 530,
            "testbed_value": 54.0,
            "unit": "communication rounds",
            "differences": "digits",
            "definition": {"metric": "rounds_to_accuracy", "threshold": 0.9},
        },
        {
            "setting": "iid, tau = 1",
            "metric": "final test accuracy",
            "paper_value": 92.94,
            "testbed_value": pytest.approx(93.0),
            "unit": "%",
            "differences": "digits",
            "definition": {"metric": "final_test_accuracy"},
        },
    ]


# ------------------------------------------------------------------------------- running


def test_three_step_run_writes_every_file(tmp_path):
    config = load_config(write(tmp_path))
    summary = runner.run_experiment(config, tmp_path / "results", progress=False)
    folder = tmp_path / "results" / "runs" / "tiny"
    for name in ("config.toml", "metrics.csv", "split.json", "checkpoint.pt", "metadata.json"):
        assert (folder / name).is_file(), name
    rows = runner.read_metrics(folder / "metrics.csv")
    assert [r["step"] for r in rows] == [1.0, 2.0, 3.0]
    assert set(METRIC_KEYS) <= set(rows[0])
    assert all(0.0 <= r["test_accuracy"] <= 1.0 for r in rows)
    # cumulative communication never decreases and grows every step
    assert all(
        b["rounds"] > a["rounds"] and b["floats_sent"] > a["floats_sent"]
        for a, b in zip(rows, rows[1:], strict=False)
    )
    split = json.loads((folder / "split.json").read_text())
    histogram = split["label_histogram"]
    assert len(histogram) == 4 and sum(map(sum, histogram)) == sum(split["sizes"])
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["seed"] == 3 and metadata["device"] == "cpu" and metadata["git_commit"]
    assert "torch" in metadata["versions"] and metadata["steps"] == 3
    reloaded = load_config(folder / "config.toml")
    assert dataclasses.replace(reloaded, path=None) == dataclasses.replace(config, path=None)
    record = json.loads((tmp_path / "results" / "replication" / "tiny.json").read_text())
    assert tuple(record) == REPLICATION_SCHEMA
    assert [row["testbed_value"] for row in record["rows"]] == [
        replication_rows(config.replication, rows)[0]["testbed_value"],
        pytest.approx(100 * rows[-1]["test_accuracy"]),
    ]
    assert summary["steps"] == 3 and summary["replication"] is not None


def test_accuracy_is_evaluated_every_eval_every_steps_and_at_the_end(tmp_path):
    config = load_config(write(tmp_path, {"run.eval_every": 2}))
    runner.run_experiment(config, tmp_path / "results", progress=False)
    rows = runner.read_metrics(tmp_path / "results" / "runs" / "tiny" / "metrics.csv")
    evaluated = [not math.isnan(r["test_accuracy"]) for r in rows]
    assert evaluated == [False, True, True]


def test_interrupted_and_resumed_run_equals_the_uninterrupted_one(tmp_path, monkeypatch):
    config = load_config(write(tmp_path, {"run.steps": 6, "run.checkpoint_every": 3}))
    runner.run_experiment(config, tmp_path / "straight", progress=False)

    original = ServerExperiment.step
    calls = {"n": 0}

    def interrupted(self: ServerExperiment) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] == 5:  # after the checkpoint at step 3 and the metrics row of step 4
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(ServerExperiment, "step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.run_experiment(config, tmp_path / "resumed", progress=False)
    partial = tmp_path / "resumed" / "runs" / "tiny" / "metrics.csv"
    assert len(runner.read_metrics(partial)) == 4  # step 4 is after the last checkpoint
    monkeypatch.setattr(ServerExperiment, "step", original)
    summary = runner.run_experiment(config, tmp_path / "resumed", progress=False)
    assert summary["resumed_from"] == 3
    straight = tmp_path / "straight" / "runs" / "tiny" / "metrics.csv"
    assert partial.read_bytes() == straight.read_bytes()
    assert (tmp_path / "resumed" / "replication" / "tiny.json").read_text().split('"rows"')[1] == (
        tmp_path / "straight" / "replication" / "tiny.json"
    ).read_text().split('"rows"')[1]


def test_longer_rounds_and_new_paper_values_continue_a_finished_run(tmp_path):
    short = load_config(write(tmp_path))
    runner.run_experiment(short, tmp_path / "results", progress=False)
    longer = load_config(write(tmp_path, {"replication.paper_value": 7}), {"run.steps": 4})
    summary = runner.run_experiment(longer, tmp_path / "results", progress=False)
    assert summary["resumed_from"] == 3 and summary["steps"] == 4


def test_checkpoint_of_another_config_is_refused(tmp_path):
    runner.run_experiment(load_config(write(tmp_path)), tmp_path / "results", progress=False)
    changed = load_config(write(tmp_path, {"algorithm.outer_step_size": 0.1}))
    with pytest.raises(ConfigError, match="different config.*--fresh"):
        runner.run_experiment(changed, tmp_path / "results", progress=False)
    summary = runner.run_experiment(changed, tmp_path / "results", fresh=True, progress=False)
    assert summary["resumed_from"] == 0 and summary["steps"] == 3


def test_cli_run_prints_where_the_results_are(tmp_path, capsys):
    code = main(
        [
            "run",
            str(write(tmp_path)),
            "--steps",
            "1",
            "--results",
            str(tmp_path / "results"),
            "--quiet",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "tiny: 1 steps" in out and "replication" in out
    assert "communication rounds, results in" in out  # a round is a communication round


def test_rounds_is_a_deprecated_name_of_steps_that_warns(tmp_path, capsys):
    """`--rounds` and `[run] rounds` counted outer iterations, while a round is a communication
    round everywhere else: both still work, each with one warning line naming the new name."""
    old = write(tmp_path, drop=("run.steps",), name="old.toml")
    old.write_text(old.read_text().replace("[run]\n", "[run]\nrounds = 2\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code = main(["run", str(old), "--rounds", "1", "--results", str(tmp_path / "r"), "--quiet"])
    assert code == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("testbed: warning:")] == [
        "testbed: warning: --rounds is the old name of --steps (outer iterations; a round is "
        "a communication round); use --steps",
        f"testbed: warning: {old}: [run] rounds is the old name of [run] steps (outer "
        "iterations; a round is a communication round); rename it to steps",
    ]
    config = json.loads((tmp_path / "r" / "runs" / "tiny" / "metadata.json").read_text())
    assert config["status"].startswith("partial: 1 of the config's 2 steps (--steps 1)")
    both = write(tmp_path, {"run.rounds": 2}, name="both.toml")
    assert main(["run", str(both), "--quiet", "--results", str(tmp_path / "r")]) == 2
    assert "both [run] steps and its old name rounds are set" in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert (
            main(
                [
                    "run",
                    str(write(tmp_path)),
                    "--steps",
                    "1",
                    "--rounds",
                    "1",
                    "--quiet",
                    "--results",
                    str(tmp_path / "r"),
                ]
            )
            == 2
        )
    assert "give --steps alone" in capsys.readouterr().err


def test_the_progress_bar_counts_outer_steps_and_names_communication_rounds(tmp_path, capsys):
    assert (
        main(["run", str(write(tmp_path)), "--steps", "2", "--results", str(tmp_path / "results")])
        == 0
    )
    err = capsys.readouterr().err
    # standard error is not a terminal here: summary lines, no redraws (testbed.progress)
    assert "tiny: outer steps: 2/2 step(s) done in " in err and "\r" not in err
    assert "comm. rounds=" in err and " rounds=" not in err.replace("comm. rounds=", "")


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_runs_two_steps(path, tmp_path):
    config = load_config(path, {"run.steps": 2})
    summary = runner.run_experiment(config, tmp_path, progress=False)
    assert summary["steps"] == 2
    assert set(METRIC_KEYS) <= set(summary["last_row"])
