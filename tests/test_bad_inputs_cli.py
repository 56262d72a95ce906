"""Bad configs and arguments on the command line: every one is a single line naming the file
and the key (or the argument) and what was expected, exit status 2, nothing written; Ctrl-C says
how to resume; internal errors keep their traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed_app.cli import main
from testbed_app.experiments import segments
from tests.test_experiments import write

# (label, edits of the tiny config, the key the message must name, what it must say)
BAD_CONFIGS = [
    (
        "string where a step size goes",
        {"algorithm.outer_step_size": "0.1"},
        "[algorithm] outer_step_size",
        "expected a positive number",
    ),
    (
        "string where an iteration count goes",
        {"algorithm.inner_steps": "5"},
        "[algorithm] inner_steps",
        "expected an integer in [0, 100,000]",
    ),
    (
        "fractional local steps",
        {"algorithm.local_steps": 2.5},
        "[algorithm] local_steps",
        "expected an integer in [1, 100,000]",
    ),
    (
        "absurd step size 1e30",
        {"algorithm.outer_step_size": 1e30},
        "[algorithm] outer_step_size",
        "<= 10000",
    ),
    (
        "negative step size",
        {"algorithm.neumann_step_size": -0.1},
        "[algorithm] neumann_step_size",
        "expected a positive number",
    ),
    (
        "number where a choice goes",
        {"algorithm.truncation": 5},
        "[algorithm] truncation",
        "expected a string",
    ),
    (
        "unknown choice",
        {"algorithm.truncation": "sometimes"},
        "[algorithm]",
        "truncation must be one of",
    ),
    (
        "string where a bool goes",
        {"algorithm.scale_by_steps": "yes"},
        "[algorithm] scale_by_steps",
        "expected true or false",
    ),
    (
        "zero participation",
        {"algorithm.participation": 0},
        "[algorithm] participation",
        "a fraction in (0, 1]",
    ),
    (
        "string where a split knob goes",
        {"split.scheme": "dirichlet", "split.alpha": "0.5"},
        "[split]",
        "alpha must be a number",
    ),
    (
        "fractional shards",
        {"split.scheme": "shards", "split.shards_per_client": 2.5},
        "[split]",
        "shards_per_client must be an integer >= 1",
    ),
    (
        "fractional client count",
        {"split.n_clients": 2.5},
        "[split] n_clients",
        "expected a positive integer",
    ),
    (
        "string client count",
        {"split.n_clients": "4"},
        "[split] n_clients",
        "expected a positive integer",
    ),
    ("negative seed", {"run.seed": -1}, "[run] seed", "expected an integer >= 0"),
    ("steps = 10**13", {"run.steps": 10**13}, "[run] steps", "<= 1,000,000"),
    ("steps = 1e13 (a float)", {"run.steps": 1e13}, "[run] steps", "a positive integer"),
    (
        "checkpoint_every = 0",
        {"run.checkpoint_every": 0},
        "[run] checkpoint_every",
        "a positive integer",
    ),
    (
        "string test fraction",
        {"data.test_fraction": "0.25"},
        "[data] test_fraction",
        "a number in (0, 1)",
    ),
    (
        "string workload option",
        {"workload.validation_fraction": "0.5"},
        "[workload] validation_fraction",
        "expected a finite number",
    ),
    (
        "number where the model name goes",
        {"workload.model": 3},
        "[workload] model",
        "expected a model name",
    ),
    ("a path as the run name", {"name": "../escape"}, "name", "it holds a path separator"),
    (
        "accuracy threshold above 1",
        {"replication.threshold": 2},
        "[replication] threshold",
        "a test accuracy in (0, 1]",
    ),
    ("a section that is not a table", {"run": 5}, "[run] must be a table", ""),
]


@pytest.mark.parametrize(
    ("label", "edits", "key", "expected"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS]
)
def test_bad_config_is_one_line_with_file_and_key(tmp_path, capsys, label, edits, key, expected):
    path = write(tmp_path, edits)
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith("testbed: error: ") and str(path) in err, err
    assert key in err and expected in err, err
    assert not results.exists()  # every error comes before any file is written


@pytest.mark.parametrize(
    ("label", "text", "expected"),
    [
        ("not TOML", "name = [unclosed\n", "not valid TOML"),
        ("empty file", "", "name: missing (expected a plain folder name"),
        ("binary garbage", "\x00\x01\x02", "not valid TOML"),
    ],
)
def test_unparsable_config_files_are_named(tmp_path, capsys, label, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["run", str(path), "--results", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) in err and expected in err and err.count("\n") == 0, err


def test_missing_config_and_empty_folder_are_named(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.toml"), "--quiet"]) == 2
    assert "nope.toml: no such config file" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["run", str(tmp_path / "empty"), "--quiet"]) == 2
    assert "a folder without config files" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--threads", "0"],
        ["--threads", "-2"],
        ["--steps", "0"],
        ["--steps", "abc"],
        ["--device", "tpu"],
    ],
    ids=["threads 0", "threads -2", "steps 0", "steps abc", "device tpu"],
)
def test_bad_arguments_are_usage_errors(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(["run", str(write(tmp_path)), "--quiet", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert argv[0] in err and (
        "positive integer" in err
        or "invalid choice" in err
        or "expected an integer in [1, 1,024]" in err
    ), err


def test_fresh_and_recover_together_is_an_error(tmp_path, capsys):
    path = write(tmp_path)
    assert (
        main(
            ["run", str(path), "--fresh", "--recover", "--quiet", "--results", str(tmp_path / "r")]
        )
        == 2
    )
    assert "--fresh and --recover exclude each other" in capsys.readouterr().err


def test_unknown_claim_and_estimator_entry_are_one_line(capsys):
    assert main(["check", "--claim", "no.such.claim", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("testbed: error: no claim 'no.such.claim'") and err.count("\n") == 1


def test_ctrl_c_says_how_to_resume(tmp_path, capsys, monkeypatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(segments, "run_experiment", interrupt)  # what `testbed run` calls
    assert main(["run", str(write(tmp_path)), "--quiet", "--results", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "interrupted; rerun the same command to resume" in err and "Traceback" not in err


def test_internal_errors_keep_their_traceback(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(segments, "run_experiment", broken)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        main(["run", str(write(tmp_path)), "--quiet", "--results", str(tmp_path)])


def test_report_of_a_missing_results_folder_is_one_line(tmp_path, capsys):
    assert (
        main(
            [
                "report",
                "--results",
                str(tmp_path / "none"),
                "--out",
                str(tmp_path / "out"),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "does not exist" in err and str(Path(tmp_path)) in err


# ------------------------------------------------------------------------------ bounds (issue 33)

LONG = "x" * 100_000  # a 100,000-character argument: echoed whole in a 100 kB line before
DEPLOY = ["deploy", "configs/deploy/fednest_quadratic.toml"]
TIMEOUT = "argument --timeout: expected a number in (0, 86400],"
CPUS_PER_CLIENT = "argument --cpus-per-client: expected an integer in [1, 1,024],"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        *[
            ([*DEPLOY, "--timeout", value], f"{TIMEOUT} got {value}")
            for value in ("-5", "0", "1e9", "nan")
        ],
        *[
            ([*DEPLOY, "--cpus-per-client", value], f"{CPUS_PER_CLIENT} got {value!r}")
            for value in ("inf", "0.5")
        ],
        (
            [*DEPLOY, "--gpus-per-client", "-1"],
            "argument --gpus-per-client: expected a number in [0, 64], got -1",
        ),
        (
            ["check", "--jobs", "100000"],
            "argument --jobs: expected an integer in [1, 256], got 100,000",
        ),
        (
            ["check", "--max-retries", "-1"],
            "argument --max-retries: expected an integer in [0, 100], got -1",
        ),
        (
            ["check", "--executor", "ray", "--cpus-per-task", "5000"],
            "argument --cpus-per-task: expected an integer in [1, 1,024], got 5,000",
        ),
        (
            ["run", "configs/", "--threads", "100000000"],
            "argument --threads: expected an integer in [1, 1,024], got 100,000,000",
        ),
        (["calibrate", "--seeds", "0"], "argument --seeds: expected a positive integer, got 0"),
        (["calibrate", "--seeds", "-5"], "argument --seeds: expected a positive integer, got -5"),
        (["check", "--claim", LONG], "ids and names have at most 200 characters"),
        (["mutate", "--mutant", LONG], "ids and names have at most 200 characters"),
        (["verify", LONG], "ids and names have at most 200 characters"),
        (["check", "--profile", LONG], "invalid choice: 'xxxxxxxxx"),
    ],
    ids=[
        "timeout -5",
        "timeout 0",
        "timeout 1e9",
        "timeout nan",
        "cpus inf",
        "cpus 0.5",
        "gpus -1",
        "jobs 1e5",
        "retries -1",
        "cpus-per-task 5000",
        "threads 1e8",
        "seeds 0",
        "seeds -5",
        "claim 1e5 chars",
        "mutant 1e5 chars",
        "verify 1e5 chars",
        "profile 1e5 chars",
    ],
)
def test_numeric_options_and_ids_are_bounded_with_the_bound_named(capsys, argv, says):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert len(err.splitlines()[-1]) < 300  # the value's echo is bounded


def test_calibrate_refuses_a_billion_seeds_before_any_work(tmp_path, capsys):
    """``calibrate --seeds 1000000000`` built 10^9 tasks first (2.47 GB after 53 s, no seed
    run): refused at once, the bound and why named."""
    assert main(["calibrate", "--seeds", "1000000000", "--results", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--seeds 1,000,000,000 is above 100,000" in err
    assert not any(tmp_path.iterdir())


def test_calibration_tasks_are_built_as_they_run():
    """The pending seeds are a sequence whose tasks are built when asked for: its memory does
    not grow with --seeds, and resumed seeds are skipped in order."""
    import tracemalloc

    from theory_checks.calibration import PendingTasks
    from theory_checks.registry import CLAIM_DB
    from theory_checks.runner import get_profile

    claims = [c for c in CLAIM_DB if c.statistical][:2]
    profile = get_profile("fast")
    tracemalloc.start()
    tasks = PendingTasks(
        claims, 10**9, profile, "float64", None, {claims[0].id: [0, 2, 5], claims[1].id: [1]}
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 100_000  # bytes: the recorded seeds', not 10^9 tasks'
    assert len(tasks) == 2 * 10**9 - 4
    assert [tasks[i].seed for i in range(5)] == [1, 3, 4, 6, 7]
    first_of_second = 10**9 - 3
    assert tasks[first_of_second].claim_id == claims[1].id
    assert [tasks[first_of_second + i].seed for i in range(3)] == [0, 2, 3]
    assert tasks[-1].seed == 10**9 - 1 and tasks[-1].claim_id == claims[1].id
    with pytest.raises(IndexError):
        tasks[len(tasks)]


def test_deploy_steps_are_bounded_as_a_runs(capsys):
    """``deploy --steps 10000000000000`` on a closed-form config was accepted (a run's steps
    are at most 1,000,000)."""
    assert (
        main(["deploy", "configs/deploy/fednest_quadratic.toml", "--steps", "10000000000000"]) == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[run] steps: expected a positive integer <= 1,000,000" in err
