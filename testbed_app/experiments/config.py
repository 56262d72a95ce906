"""Load an experiment config (TOML) and reject a bad one before any work starts.

:func:`load_config` reads ``configs/<experiment>.toml`` with :mod:`tomllib`, applies command-line
overrides (``{"run.steps": 5, "run.device": "cuda"}``), checks every section and key, fills the
defaults in, and returns an :class:`~testbed_app.experiments.base.ExperimentConfig` whose
sections are plain dicts. What it rejects, always naming the file and the key:

- unknown sections and keys, with a "did you mean" suggestion;
- impossible values (steps < 1, a test fraction outside (0, 1), more clients than training
  samples, an unknown dataset, split scheme, workload kind or algorithm, an algorithm parameter
  that is not in the registry entry's defaults, workload options the builder does not declare);
- a missing dataset folder for mnist / fashion-mnist / cifar10 (the loader's
  :class:`~problems.workloads.data.DatasetError`, with the file name in front);
- ``device = "cuda"`` on a machine without CUDA.

The dataset is loaded (cached, :func:`load_data`) and split (:func:`split_data`) during
validation: both are cheap next to a run and are the only way to know that the folder holds
valid files and that the split is possible. :func:`dump_toml` writes a validated config back as
TOML (the ``config.toml`` of a run); loading it gives the same config.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import tomllib
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tomli_w

from results_format.paths import name_problem
from results_format.resume import fingerprint as fingerprint_of
from testbed.names import did_you_mean
from testbed_app.experiments.base import ExperimentConfig

PAPERS: tuple[str, ...] = ("FedNest", "AggITD", "FedMSA", "HGP")
DEVICES: tuple[str, ...] = ("cpu", "cuda")
DTYPES: tuple[str, ...] = ("float32", "float64")

#: Replication metric kinds (see :mod:`testbed_app.experiments.replication`).
REPLICATION_METRICS: tuple[str, ...] = (
    "rounds_to_accuracy",   # communication rounds until test accuracy first reaches threshold
    "final_test_accuracy",  # the last evaluated test accuracy
    "final_metric",         # the last non-NaN value of the metrics column named by ``column``
)

_REQUIRED = object()  # marks a key without a default

#: Limits that catch absurd values before a run starts. Why these numbers:
#: - MAX_STEPS: the papers run at most a few thousand outer iterations; one iteration of the
#:   smallest workload takes ~0.1 s on 2 cores, so 1e6 is already more than a day and 1e13
#:   (accepted before, "ETA 5e9 hours") is a typo.
#: - MAX_STEP_SIZE: the configs use steps of 0.003-0.05 on losses that are means over samples;
#:   a step above 1e4 overflows float32 iterates within a few steps (no paper uses one above 1).
#: - MAX_ITERATIONS: inner steps, Neumann terms and gossip steps per outer iteration; the
#:   papers use at most a few hundred, 1e5 would take hours per outer iteration.
MAX_STEPS = 1_000_000
MAX_STEP_SIZE = 1e4
MAX_ITERATIONS = 100_000
MAX_BATCH_SIZE = 1_000_000


class ConfigError(ValueError):
    """A config that cannot be run; the message names the file, the section and the key."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _positive_int(value: Any) -> bool:
    return _is_int(value) and value >= 1


def _nonnegative_int(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


@dataclasses.dataclass(frozen=True)
class _Key:
    """One allowed key: its default (or ``_REQUIRED``) and the test its value must pass."""

    default: Any
    check: Callable[[Any], bool]
    expect: str  # what a valid value is, for the error message


_TOP = {
    "name": _Key(_REQUIRED, lambda v: name_problem(v) is None,
                 "a plain folder name (it names the run folder runs/<name>/)"),
    "paper": _Key(_REQUIRED, lambda v: v in PAPERS, f"one of {list(PAPERS)}"),
    "description": _Key("", lambda v: isinstance(v, str), "a string"),
}

_DATA = {
    "dataset": _Key("digits", _text, "a dataset name"),  # checked against DATASETS below
    "root": _Key(None, _text, "a folder path"),
    "test_fraction": _Key(0.25, lambda v: _is_number(v) and 0.0 < v < 1.0,
                          "a number in (0, 1)"),
    "seed": _Key(0, _nonnegative_int, "an integer >= 0"),
    "limit": _Key(None, _positive_int, "a positive integer (keep that many training samples)"),
}

# Scheme parameters are checked against split_clients' keyword parameters and by its own checks.
_SPLIT = {
    "scheme": _Key("iid", _text, "a split scheme"),
    "n_clients": _Key(_REQUIRED, _positive_int, "a positive integer"),
}

_WORKLOAD = {
    "kind": _Key(_REQUIRED, _text, "a workload kind"),
    "model": _Key("mlp", _text, "a model name"),
}

_RUN = {
    "steps": _Key(_REQUIRED, lambda v: _positive_int(v) and v <= MAX_STEPS,
                  f"a positive integer <= {MAX_STEPS:,} (outer iterations)"),
    "eval_every": _Key(1, lambda v: _positive_int(v) and v <= MAX_STEPS,
                       f"a positive integer <= {MAX_STEPS:,}"),
    "checkpoint_every": _Key(10, lambda v: _positive_int(v) and v <= MAX_STEPS,
                             f"a positive integer <= {MAX_STEPS:,}"),
    "seed": _Key(0, _nonnegative_int, "an integer >= 0"),
    "device": _Key("cpu", lambda v: v in DEVICES, f"one of {list(DEVICES)}"),
    "dtype": _Key("float32", lambda v: v in DTYPES, f"one of {list(DTYPES)}"),
    # TF32 on a GPU (testbed.precision): off unless a config asks; changes the numbers, so a
    # checkpoint of one setting does not resume under the other
    "tf32": _Key(False, lambda v: isinstance(v, bool), "true or false"),
}

_ROW = {
    "setting": _Key("", lambda v: isinstance(v, str), "a string"),
    "metric": _Key(_REQUIRED, lambda v: v in REPLICATION_METRICS,
                   f"one of {list(REPLICATION_METRICS)}"),
    "threshold": _Key(None, lambda v: _is_number(v) and 0.0 < v <= 1.0,
                      "a test accuracy in (0, 1], e.g. 0.9"),
    "column": _Key(None, _text, "the name of a metrics column, e.g. r2"),
    "paper_value": _Key(None, lambda v: _is_number(v) or isinstance(v, str),
                        "a number or a string"),
    "unit": _Key(None, lambda v: isinstance(v, str), "a string"),
    "label": _Key(None, _text, "a string naming the metric in the report"),
}

_REPLICATION = {
    "table": _Key(_REQUIRED, _text, "a string, e.g. \"AggITD Table 2\""),
    "differences": _Key(_REQUIRED, _text,
                        "a string stating how the setting differs from the paper's"),
    **_ROW,
    # further rows of the same table (same setting and differences unless given)
    "extra_rows": _Key([], lambda v: isinstance(v, list) and all(isinstance(r, dict) for r in v),
                       "an array of tables ([[replication.extra_rows]])"),
}

SECTIONS: tuple[str, ...] = ("data", "split", "workload", "algorithm", "run", "replication")


def _step_size(v: Any) -> bool:
    return _is_number(v) and 0.0 < v <= MAX_STEP_SIZE


def _iterations(v: Any) -> bool:
    return _nonnegative_int(v) and v <= MAX_ITERATIONS


def _local_steps(v: Any) -> bool:
    if isinstance(v, list):
        return bool(v) and all(_positive_int(t) and t <= MAX_ITERATIONS for t in v)
    return _positive_int(v) and v <= MAX_ITERATIONS


def _participation(v: Any) -> bool:
    return (_is_number(v) and 0.0 < v <= 1.0) or (_positive_int(v))


#: The declared type of every ``[algorithm]`` parameter name the registry uses (which of them
#: an algorithm takes is its registry entry's ``defaults``). A name missing here is checked
#: against the type of its default.
ALGORITHM_PARAMETERS: dict[str, _Key] = {
    **{name: _Key(None, _step_size, f"a positive number <= {MAX_STEP_SIZE:g}")
       for name in ("inner_step_size", "outer_step_size", "neumann_step_size")},
    **{name: _Key(None, _iterations, f"an integer in [0, {MAX_ITERATIONS:,}]")
       for name in ("inner_steps", "neumann_terms", "cg_iterations", "pushsum_steps")},
    "local_steps": _Key(None, _local_steps, f"an integer in [1, {MAX_ITERATIONS:,}] or an "
                        "array of them (one per client)"),
    "batch_size": _Key(None, lambda v: _positive_int(v) and v <= MAX_BATCH_SIZE,
                       f"a positive integer <= {MAX_BATCH_SIZE:,}"),
    "participation": _Key(None, _participation,
                          "a fraction in (0, 1] or a positive integer count of clients"),
    "momentum": _Key(None, lambda v: _is_number(v) and 0.0 < v <= 1.0, "a number in (0, 1]"),
    "graph_seed": _Key(None, _nonnegative_int, "an integer >= 0"),
    "index": _Key(None, _nonnegative_int, "an integer >= 0"),
    **{name: _Key(None, lambda v: isinstance(v, bool), "true or false")
       for name in ("expectation", "keep_weights", "shared_sample", "scale_by_steps")},
    **{name: _Key(None, _text, "a string")
       for name in ("averaging", "graph_family", "lower_solver", "semantics", "sgp_variant",
                    "truncation")},
}


def _by_default(default: Any) -> _Key | None:
    """The check a parameter gets from the type of its registry default (None: any)."""
    if isinstance(default, bool):
        return _Key(None, lambda v: isinstance(v, bool), "true or false")
    if isinstance(default, int):
        return _Key(None, _is_int, "an integer")
    if isinstance(default, float):
        return _Key(None, _is_number, "a finite number")
    if isinstance(default, str):
        return _Key(None, _text, "a string")
    return None


# --------------------------------------------------------------------------------- errors


def _where(source: str, section: str | None, key: str | None = None) -> str:
    place = source
    if section:
        place += f": [{section}]"
    if key:
        place += f" {key}"
    return place


def _suggest(word: str, known: Any) -> str:
    return did_you_mean(word, known, n=1)


def _unknown(source: str, section: str | None, key: str, known: Any, what: str = "key") -> \
        ConfigError:
    return ConfigError(f"{_where(source, section)}: unknown {what} {key!r}"
                       f"{_suggest(key, known)}; known: {sorted(known)}")


def _fill(source: str, section: str | None, given: Mapping[str, Any], keys: Mapping[str, _Key],
          extra: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Check ``given`` against ``keys`` (plus free-form ``extra`` names) and fill defaults."""
    for key in given:
        if key not in keys and key not in extra:
            raise _unknown(source, section, key, set(keys) | extra)
    out: dict[str, Any] = {}
    for key, spec in keys.items():
        if key not in given:
            if spec.default is _REQUIRED:
                raise ConfigError(f"{_where(source, section, key)}: missing (expected "
                                  f"{spec.expect})")
            out[key] = spec.default
            continue
        value = given[key]
        if not spec.check(value):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            reason = name_problem(value) if keys is _TOP and key == "name" else None
            raise ConfigError(f"{_where(source, section, key)}: expected {spec.expect}, "
                              f"got {shown}" + (f" ({reason})" if reason else ""))
        out[key] = value
    out.update({key: value for key, value in given.items() if key in extra})
    return out


def _choice(source: str, section: str, key: str, value: str, known: Any) -> None:
    if value not in known:
        raise ConfigError(f"{_where(source, section, key)}: unknown value {value!r}"
                          f"{_suggest(value, known)}; known: {sorted(known)}")


# --------------------------------------------------------------------------------- loading


def read_toml(path: str | Path) -> dict[str, Any]:
    """The TOML file as a dict; a missing file or a syntax error names the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a folder, not a config file") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        text = data.decode()
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: {_undecodable(data, error)}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None


def _undecodable(data: bytes, error: UnicodeDecodeError) -> str:
    """Where a config's bytes are not UTF-8: the line, and the key when the line has one."""
    line = data[:error.start].count(b"\n") + 1
    text = data.split(b"\n")[line - 1].decode(errors="replace")
    key = text.split("=", 1)[0].strip() if "=" in text else ""
    place = f"line {line}" + (f", key {key!r}" if key else "")
    return f"{place}: not valid UTF-8 (byte 0x{data[error.start]:02x}); save the file as UTF-8"


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``raw`` with ``{"section.key": value}`` overrides applied (``None`` values are skipped)."""
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in raw.items()}
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        if section == "run" and key == DEPRECATED_RUN_KEY:
            key = "steps"  # a caller's override under the old name
        if not key:
            out[section] = value
            continue
        table = out.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"override {dotted!r}: {section!r} is not a table")
        table[key] = value
    return out


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ExperimentConfig:
    """Read, override and validate the config at ``path``.

    Args:
        path: a TOML file (layout in :class:`~testbed_app.experiments.base.ExperimentConfig`).
        overrides: ``{"section.key": value}``, e.g. ``{"run.steps": 5}`` from ``--steps 5``.

    Raises:
        ConfigError: the first problem found, naming the file, the section and the key.
    """
    path = Path(path)
    raw = read_toml(path)
    if isinstance(raw.get("run"), dict):
        raw["run"] = _renamed_steps(str(path), raw["run"])
    config = validate(apply_overrides(raw, overrides), source=str(path), path=path)
    file_steps = raw["run"].get("steps")
    horizon = file_steps if _positive_int(file_steps) else None
    return dataclasses.replace(config, horizon=horizon)


def validate(raw: Mapping[str, Any], source: str = "<config>",
             path: Path | None = None) -> ExperimentConfig:
    """Check a config given as a dict (the parsed TOML) and return it with defaults filled in."""
    for key, value in raw.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: [{key}] must be a table, got {value!r}")
        elif key not in _TOP:
            raise _unknown(source, None, key, set(_TOP) | set(SECTIONS), "section or key")
    top = _fill(source, None, {k: v for k, v in raw.items() if k in _TOP}, _TOP)
    for section in ("data", "split", "workload", "algorithm", "run"):
        if section not in raw:
            raise ConfigError(f"{source}: missing section [{section}]")
    run = _fill(source, "run", _renamed_steps(source, raw["run"]), _RUN)
    _check_device(source, run["device"])
    data = _check_data(source, raw["data"])
    split = _check_split(source, raw["split"], data, run["seed"])
    workload = _check_workload(source, raw["workload"])
    algorithm = check_algorithm(source, raw["algorithm"], workload["kind"])
    replication = (_check_replication(source, raw["replication"]) if "replication" in raw
                   else None)
    return ExperimentConfig(name=top["name"], paper=top["paper"],
                            description=top["description"], data=data, split=split,
                            workload=workload, algorithm=algorithm, run=run,
                            replication=replication, path=path)


#: ``[run] rounds``, the old name of ``[run] steps``: it counted outer iterations, while
#: everywhere else (the ledger, metrics.csv, the papers' formulas) a round is one
#: communication round. Still read, with a warning, so older configs run unchanged.
DEPRECATED_RUN_KEY = "rounds"


class DeprecatedName(FutureWarning):
    """An option or config key under its old name (the command line prints it as one
    ``testbed: warning:`` line)."""


def _renamed_steps(source: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """``[run]`` with the old key ``rounds`` read as ``steps`` (a warning naming the file); both
    at once is an error."""
    run = dict(run)
    if DEPRECATED_RUN_KEY not in run:
        return run
    if "steps" in run:
        raise ConfigError(f"{_where(source, 'run', 'rounds')}: both [run] steps and its old name "
                          "rounds are set; keep steps (outer iterations)")
    warnings.warn(f"{_where(source, 'run', 'rounds')} is the old name of [run] steps (outer "
                  "iterations; a round is a communication round); rename it to steps",
                  DeprecatedName, stacklevel=3)
    run["steps"] = run.pop(DEPRECATED_RUN_KEY)
    return run


def _check_device(source: str, device: str) -> None:
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"{_where(source, 'run', 'device')}: 'cuda' requested but this "
                              "machine has no CUDA device (torch.cuda.is_available() is False); "
                              "use --device cpu")


def _check_data(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    from problems.workloads.data import DATASETS

    data = _fill(source, "data", given, _DATA)
    _choice(source, "data", "dataset", data["dataset"], DATASETS)
    return data


def _check_split(source: str, given: Mapping[str, Any], data: Mapping[str, Any],
                 run_seed: int) -> dict[str, Any]:
    from problems.workloads.splits import SCHEMES

    split = _fill(source, "split", given, _SPLIT, frozenset(scheme_parameters()))
    _choice(source, "split", "scheme", split["scheme"], SCHEMES)
    dataset = _load(source, data)
    n_train = int(dataset.train_y.shape[0])
    if split["n_clients"] > n_train:
        raise ConfigError(f"{_where(source, 'split', 'n_clients')}: {split['n_clients']} "
                          f"clients but only {n_train} training samples in "
                          f"{data['dataset']!r}")
    try:
        split_data(split, dataset, seed=run_seed)
    except ValueError as error:
        raise ConfigError(f"{_where(source, 'split')}: {error}") from None
    return split


def _check_workload(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    from testbed_app.experiments.registry import EXPERIMENT_BUILDERS, workload_options

    kind = given.get("kind")
    if isinstance(kind, str):
        _choice(source, "workload", "kind", kind, EXPERIMENT_BUILDERS)
        options = workload_options(kind)
    else:
        options = frozenset()
    workload = _fill(source, "workload", given, _WORKLOAD, options)
    defaults = _workload_defaults(str(kind))
    for key in options & set(given):
        spec = _by_default(defaults.get(key))
        if spec is not None and not spec.check(given[key]):
            raise ConfigError(f"{_where(source, 'workload', key)}: expected {spec.expect}, "
                              f"got {given[key]!r}")
    return workload


def _workload_defaults(kind: str) -> dict[str, Any]:
    """The server workloads' option defaults (their types are the options' declared types)."""
    from testbed_app.experiments.registry import SERVER_KINDS

    if kind not in SERVER_KINDS:
        return {}
    from problems.workloads import registry

    return dict(registry.workload_options(kind))


def check_algorithm(source: str, given: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The ``[algorithm]`` table checked: a registered name, parameters its entry has, values
    of the right type that its constructor accepts (also read by ``testbed deploy``)."""
    from testbed.registry import ESTIMATOR_DB

    name = given.get("name")
    if not isinstance(name, str) or not _text(name):
        raise ConfigError(f"{_where(source, 'algorithm', 'name')}: expected a registered "
                          f"name (`testbed list`), got {name!r}")
    known = {info.name: info for info in ESTIMATOR_DB}
    _choice(source, "algorithm", "name", name, known)
    params = {key: value for key, value in given.items() if key != "name"}
    defaults = known[name].defaults
    for key, value in params.items():
        if key not in defaults:
            raise ConfigError(f"{_where(source, 'algorithm', key)}: {name!r} has no parameter "
                              f"{key!r}{_suggest(key, defaults)}; its parameters: "
                              f"{sorted(defaults)}")
        spec = ALGORITHM_PARAMETERS.get(key) or _by_default(defaults[key])
        if spec is not None and not spec.check(value):
            raise ConfigError(f"{_where(source, 'algorithm', key)}: expected {spec.expect}, "
                              f"got {value!r}")
    # the constructor's own checks (ranges that depend on other parameters, choices)
    built = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    try:
        known[name].build(**built)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{_where(source, 'algorithm')}: {name!r} rejects these parameters: "
                          f"{error}") from None
    return {"name": name, **params}


def _check_replication(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    table = _fill(source, "replication", given, _REPLICATION)
    _check_row(source, "replication", table)
    rows = []
    for i, row in enumerate(table["extra_rows"]):
        section = f"replication.extra_rows[{i}]"
        filled = _fill(source, section, row, {**_ROW, "differences": _Key(
            None, _text, "a string")})
        _check_row(source, section, filled)
        rows.append(filled)
    table["extra_rows"] = rows
    return table


def _check_row(source: str, section: str, row: Mapping[str, Any]) -> None:
    if row["metric"] == "rounds_to_accuracy" and row["threshold"] is None:
        raise ConfigError(f"{_where(source, section, 'threshold')}: missing; "
                          "rounds_to_accuracy needs a test-accuracy threshold, e.g. 0.9")
    if row["metric"] == "final_metric" and row["column"] is None:
        raise ConfigError(f"{_where(source, section, 'column')}: missing; final_metric needs "
                          "the metrics column to report, e.g. \"r2\"")


# --------------------------------------------------------------------------------- data


def scheme_parameters() -> tuple[str, ...]:
    """Keyword parameters of :func:`problems.workloads.splits.split_clients` (``alpha``, ...)."""
    import inspect

    from problems.workloads.splits import split_clients

    return tuple(name for name, p in inspect.signature(split_clients).parameters.items()
                 if p.kind is inspect.Parameter.KEYWORD_ONLY
                 and name not in ("seed", "n_classes"))  # both set by the runner


@functools.lru_cache(maxsize=4)
def _load_cached(name: str, root: str | None, test_fraction: float, seed: int,
                 limit: int | None) -> Any:
    from problems.workloads.data import load_dataset

    return load_dataset(name, root, test_fraction=test_fraction, seed=seed, limit=limit)


def load_data(data: Mapping[str, Any]) -> Any:
    """The :class:`~problems.workloads.data.Dataset` of a validated ``[data]`` section.

    Cached (the last few datasets), so validation and the run load the files once.
    """
    return _load_cached(data["dataset"], data["root"], float(data["test_fraction"]),
                        int(data["seed"]), data["limit"])


def _load(source: str, data: Mapping[str, Any]) -> Any:
    from problems.workloads.data import DatasetError

    try:
        return load_data(data)
    except DatasetError as error:
        raise ConfigError(f"{_where(source, 'data', 'root')}: {error}") from None


def split_data(split: Mapping[str, Any], dataset: Any, *, seed: int) -> Any:
    """The :class:`~problems.workloads.splits.ClientSplit` of a validated ``[split]`` section.

    The split's seed is the run's seed (``[run] seed``), as in the workloads' builders.
    """
    from problems.workloads.splits import split_clients

    params = {key: value for key, value in split.items() if key not in ("scheme", "n_clients")}
    return split_clients(dataset.train_y, split["n_clients"], split["scheme"], seed=seed,
                         n_classes=dataset.n_classes, **params)


# --------------------------------------------------------------------------------- writing


def as_dict(config: ExperimentConfig) -> dict[str, Any]:
    """The config as the TOML layout (top-level keys, then one table per section)."""
    out: dict[str, Any] = {"name": config.name, "paper": config.paper,
                           "description": config.description}
    for section in SECTIONS:
        table = getattr(config, section)
        if table is not None:
            out[section] = dict(table)
    return out


def fingerprint(config: ExperimentConfig, ignore: tuple[str, ...] = ()) -> str:
    """A hash of the config, leaving out the ``"section.key"`` (or whole ``"section"``) names
    in ``ignore``."""
    content = as_dict(config)
    for dotted in ignore:
        section, _, key = dotted.partition(".")
        if key:
            content.get(section, {}).pop(key, None)
        else:
            content.pop(section, None)
    return fingerprint_of(json.dumps(content, sort_keys=True, default=str))


def _without_unset(value: Any) -> Any:
    """``value`` with the ``None`` entries (not set; TOML has no null) of its tables and arrays
    of tables left out."""
    if isinstance(value, Mapping):
        return {k: _without_unset(v) for k, v in value.items() if v is not None}
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return [_without_unset(v) for v in value]
    return value


def to_toml(content: Mapping[str, Any]) -> str:
    """TOML text of a config layout (top-level keys, then one table per section; a table's
    list of tables, such as ``extra_rows``, as an array of tables), written by ``tomli_w``.
    ``None`` values are left out, and so are a section's empty lists (they load back as the
    default)."""
    content = {key: {k: v for k, v in value.items() if v != []} if isinstance(value, Mapping)
               else value for key, value in content.items()}
    return tomli_w.dumps(_without_unset(content))


def dump_toml(config: ExperimentConfig) -> str:
    """The validated config as TOML text; :func:`load_config` of it gives the same config."""
    return to_toml(as_dict(config))
