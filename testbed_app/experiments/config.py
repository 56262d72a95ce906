"""Load an experiment config (TOML) and reject a bad one before any work starts.

:func:`load_config` reads ``configs/<experiment>.toml``
(:func:`~testbed_app.experiments.config_toml.read_toml`), applies command-line overrides
(``{"run.steps": 5, "run.device": "cuda"}``), checks every section and key against the schema
(:mod:`testbed_app.experiments.schema`: unknown keys with a "did you mean", impossible values,
``device = "cuda"`` without CUDA), fills the defaults in, and then checks what needs more than
the schema, always naming the file and the key:

- the dataset: an unknown name, a missing or invalid folder for mnist / fashion-mnist / cifar10
  (the loader's :class:`~problems.workloads.data.DatasetError`, with the file name in front);
  it is loaded (cached, :func:`~testbed_app.experiments.data.load_data`) and split during
  validation, both cheap next to a run and the only way to know that the folder holds valid
  files and that the split is possible (more clients than training samples, a scheme's
  parameters);
- the workload: a kind no experiment builds, options its builder does not declare, of another
  type than their defaults (:mod:`testbed_app.experiments.registry`);
- the algorithm: an unregistered name, a parameter its entry does not have or of the wrong
  type, and what its constructor refuses. The constructor runs once: the validated
  :class:`~testbed_app.experiments.base.ExperimentConfig` keeps the built object
  (:attr:`~testbed_app.experiments.base.ExperimentConfig.entry`), which the run uses.

It returns the config with its sections as plain dicts; writing it back as TOML is
:func:`~testbed_app.experiments.config_toml.dump_toml`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from problems.workloads import registry as workloads
from problems.workloads.data import DATASETS
from problems.workloads.data import Dataset
from problems.workloads.data import DatasetError
from problems.workloads.splits import SCHEMES
from testbed import plugins
from testbed.registry import ESTIMATOR_DB
from testbed_app.experiments.algorithm import build_entry
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.config_toml import apply_overrides
from testbed_app.experiments.config_toml import as_dict
from testbed_app.experiments.config_toml import dump_toml
from testbed_app.experiments.config_toml import fingerprint
from testbed_app.experiments.config_toml import read_toml
from testbed_app.experiments.config_toml import to_toml
from testbed_app.experiments.data import load_data
from testbed_app.experiments.data import scheme_parameters
from testbed_app.experiments.data import split_data
from testbed_app.experiments.errors import ConfigError
from testbed_app.experiments.errors import DeprecatedName
from testbed_app.experiments.registry import EXPERIMENT_BUILDERS
from testbed_app.experiments.registry import SERVER_KINDS
from testbed_app.experiments.registry import workload_options
from testbed_app.experiments.schema import DATA_KEYS
from testbed_app.experiments.schema import RUN_KEYS
from testbed_app.experiments.schema import SECTIONS
from testbed_app.experiments.schema import SPLIT_KEYS
from testbed_app.experiments.schema import TOP_KEYS
from testbed_app.experiments.schema import WORKLOAD_KEYS
from testbed_app.experiments.schema import by_default
from testbed_app.experiments.schema import check_algorithm_parameters
from testbed_app.experiments.schema import check_device
from testbed_app.experiments.schema import check_replication
from testbed_app.experiments.schema import choice
from testbed_app.experiments.schema import fill
from testbed_app.experiments.schema import is_positive_int
from testbed_app.experiments.schema import is_text
from testbed_app.experiments.schema import renamed_steps
from testbed_app.experiments.schema import unknown
from testbed_app.experiments.schema import where


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
        raw["run"] = renamed_steps(str(path), raw["run"])
    file_steps = raw["run"].get("steps") if isinstance(raw.get("run"), dict) else None
    return validate(
        apply_overrides(raw, overrides),
        source=str(path),
        path=path,
        horizon=file_steps if is_positive_int(file_steps) else None,
    )


def validate(
    raw: Mapping[str, Any],
    source: str = "<config>",
    path: Path | None = None,
    horizon: int | None = None,
) -> ExperimentConfig:
    """Check a config given as a dict (the parsed TOML) and return it with defaults filled in
    and its algorithm built (``horizon``: ``[run] steps`` as the file gives it, see
    :attr:`~testbed_app.experiments.base.ExperimentConfig.horizon`)."""
    for key, value in raw.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: [{key}] must be a table, got {value!r}")
        elif key not in TOP_KEYS:
            error = unknown(source, None, key, set(TOP_KEYS) | set(SECTIONS), "section or key")
            if key == "problem":  # the closed-form table of a deploy config (configs/deploy/)
                raise ConfigError(
                    f"{error}; a [problem] table makes this a deploy config: "
                    f"`testbed deploy {source}` runs it on Flower"
                )
            raise error
    top = fill(source, None, {k: v for k, v in raw.items() if k in TOP_KEYS}, TOP_KEYS)
    for section in ("data", "split", "workload", "algorithm", "run"):
        if section not in raw:
            raise ConfigError(f"{source}: missing section [{section}]")
    run = fill(source, "run", renamed_steps(source, raw["run"]), RUN_KEYS)
    check_device(source, run["device"])
    data = _check_data(source, raw["data"])
    split = _check_split(source, raw["split"], data, run["seed"])
    workload = _check_workload(source, raw["workload"])
    algorithm = _check_algorithm_table(source, raw["algorithm"])
    replication = check_replication(source, raw["replication"]) if "replication" in raw else None
    config = ExperimentConfig(
        name=top["name"],
        paper=top["paper"],
        description=top["description"],
        data=data,
        split=split,
        workload=workload,
        algorithm=algorithm,
        run=run,
        replication=replication,
        path=path,
        horizon=horizon,
    )
    try:
        config.entry  # noqa: B018 - built once here, kept by the config for the run
    except (ValueError, TypeError) as error:
        raise _refused(source, algorithm["name"], error) from None
    return config


def _check_data(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    data = fill(source, "data", given, DATA_KEYS)
    choice(source, "data", "dataset", data["dataset"], DATASETS)
    return data


def _check_split(
    source: str, given: Mapping[str, Any], data: Mapping[str, Any], run_seed: int
) -> dict[str, Any]:
    split = fill(source, "split", given, SPLIT_KEYS, frozenset(scheme_parameters()))
    choice(source, "split", "scheme", split["scheme"], SCHEMES)
    dataset = _load(source, data)
    n_train = int(dataset.train_y.shape[0])
    if split["n_clients"] > n_train:
        raise ConfigError(
            f"{where(source, 'split', 'n_clients')}: {split['n_clients']} "
            f"clients but only {n_train} training samples in "
            f"{data['dataset']!r}"
        )
    try:
        split_data(split, dataset, seed=run_seed)
    except ValueError as error:
        raise ConfigError(f"{where(source, 'split')}: {error}") from None
    return split


def _load(source: str, data: Mapping[str, Any]) -> Dataset:
    try:
        return load_data(data)
    except DatasetError as error:
        raise ConfigError(f"{where(source, 'data', 'root')}: {error}") from None


def _check_workload(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    kind = given.get("kind")
    if isinstance(kind, str):
        choice(source, "workload", "kind", kind, EXPERIMENT_BUILDERS)
        options = workload_options(kind)
    else:
        options = frozenset()
    workload = fill(source, "workload", given, WORKLOAD_KEYS, options)
    defaults = workload_defaults(str(kind))
    for key in options & set(given):
        spec = by_default(defaults.get(key))
        if spec is not None and not spec.check(given[key]):
            raise ConfigError(
                f"{where(source, 'workload', key)}: expected {spec.expect}, got {given[key]!r}"
            )
    return workload


def workload_defaults(kind: str) -> dict[str, Any]:
    """The server workloads' option defaults (their types are the options' declared types);
    empty for other kinds."""
    if kind not in SERVER_KINDS:
        return {}
    return dict(workloads.workload_options(kind))


def _check_algorithm_table(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The ``[algorithm]`` table checked without building it: a registered name, parameters
    its entry has, values of their declared types."""
    name = given.get("name")
    if not isinstance(name, str) or not is_text(name):
        raise ConfigError(
            f"{where(source, 'algorithm', 'name')}: expected a registered "
            f"name (`testbed list`), got {name!r}"
        )
    known = {info.name: info for info in ESTIMATOR_DB}
    missing = plugins.left_out(name) if name not in known else None
    if missing is not None:  # the reason, not only "unknown value"
        raise ConfigError(
            f"{where(source, 'algorithm', 'name')}: {name!r} is not registered: {missing}"
        )
    choice(source, "algorithm", "name", name, known)
    params = {key: value for key, value in given.items() if key != "name"}
    check_algorithm_parameters(source, name, params, known[name].defaults)
    return {"name": name, **params}


def _refused(source: str, name: str, error: Exception) -> ConfigError:
    return ConfigError(f"{where(source, 'algorithm')}: {name!r} rejects these parameters: {error}")


def check_algorithm(source: str, given: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The ``[algorithm]`` table checked: a registered name, parameters its entry has, values
    of the right type that its constructor accepts (``testbed deploy`` checks its tables
    with it; a config's validation keeps the object it builds)."""
    table = _check_algorithm_table(source, given)
    try:
        build_entry(table)
    except (ValueError, TypeError) as error:
        raise _refused(source, table["name"], error) from None
    return table


__all__ = [
    "ConfigError",
    "DeprecatedName",
    "ExperimentConfig",
    "apply_overrides",
    "as_dict",
    "check_algorithm",
    "dump_toml",
    "fingerprint",
    "load_config",
    "load_data",
    "read_toml",
    "scheme_parameters",
    "split_data",
    "to_toml",
    "validate",
    "workload_defaults",
]
