"""The schema of an experiment config: every section's keys, their defaults and the test each
value must pass, with the file and the key in every error.

This module checks values only (types, ranges, choices among fixed names); what needs the
data, the workload registry or the algorithm's constructor is checked by
:mod:`testbed_app.experiments.config`, which loads and validates a whole config with these
tables. What it rejects, always naming the file and the key:

- unknown sections and keys, with a "did you mean" suggestion (:func:`fill`, :func:`unknown`);
- impossible values (steps < 1, a test fraction outside (0, 1), a seed < 0, a step size above
  :data:`MAX_STEP_SIZE`, ...), including each ``[algorithm]`` parameter's declared type
  (:data:`ALGORITHM_PARAMETERS`);
- ``device = "cuda"`` on a machine without CUDA (:func:`check_device`);
- a ``[replication]`` table without what its metric needs (:func:`check_replication`).

``[run] rounds``, the old name of ``[run] steps``, is read with a warning (:func:`renamed_steps`).

>>> fill("c.toml", "run", {"steps": 3}, RUN_KEYS)["checkpoint_every"]
10
>>> fill("c.toml", "run", {"step": 3}, RUN_KEYS)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
testbed_app.experiments.errors.ConfigError: c.toml: [run]: unknown key 'step' (did you mean ...
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import torch

from results_format.paths import name_problem
from testbed.names import did_you_mean
from testbed_app.experiments.errors import ConfigError
from testbed_app.experiments.errors import DeprecatedName

PAPERS: tuple[str, ...] = ("FedNest", "AggITD", "FedMSA", "HGP")
DEVICES: tuple[str, ...] = ("cpu", "cuda")
DTYPES: tuple[str, ...] = ("float32", "float64")

#: Replication metric kinds (see :mod:`testbed_app.experiments.replication`).
REPLICATION_METRICS: tuple[str, ...] = (
    "rounds_to_accuracy",  # communication rounds until test accuracy first reaches threshold
    "final_test_accuracy",  # the last evaluated test accuracy
    "final_metric",  # the last non-NaN value of the metrics column named by ``column``
)

REQUIRED = object()  # marks a key without a default

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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive_int(value: Any) -> bool:
    return _is_int(value) and value >= 1


def _nonnegative_int(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


@dataclasses.dataclass(frozen=True)
class Key:
    """One allowed key: its default (or ``REQUIRED``) and the test its value must pass."""

    default: Any
    check: Callable[[Any], bool]
    expect: str  # what a valid value is, for the error message


TOP_KEYS = {
    "name": Key(
        REQUIRED,
        lambda v: name_problem(v) is None,
        "a plain folder name (it names the run folder runs/<name>/)",
    ),
    "paper": Key(REQUIRED, lambda v: v in PAPERS, f"one of {list(PAPERS)}"),
    "description": Key("", lambda v: isinstance(v, str), "a string"),
}

DATA_KEYS = {
    "dataset": Key("digits", _text, "a dataset name"),  # checked against DATASETS below
    "root": Key(None, _text, "a folder path"),
    "test_fraction": Key(0.25, lambda v: _is_number(v) and 0.0 < v < 1.0, "a number in (0, 1)"),
    "seed": Key(0, _nonnegative_int, "an integer >= 0"),
    "limit": Key(None, _positive_int, "a positive integer (keep that many training samples)"),
}

# Scheme parameters are checked against split_clients' keyword parameters and by its own checks.
SPLIT_KEYS = {
    "scheme": Key("iid", _text, "a split scheme"),
    "n_clients": Key(REQUIRED, _positive_int, "a positive integer"),
}

WORKLOAD_KEYS = {
    "kind": Key(REQUIRED, _text, "a workload kind"),
    "model": Key("mlp", _text, "a model name"),
}

RUN_KEYS = {
    "steps": Key(
        REQUIRED,
        lambda v: _positive_int(v) and v <= MAX_STEPS,
        f"a positive integer <= {MAX_STEPS:,} (outer iterations)",
    ),
    "eval_every": Key(
        1, lambda v: _positive_int(v) and v <= MAX_STEPS, f"a positive integer <= {MAX_STEPS:,}"
    ),
    "checkpoint_every": Key(
        10, lambda v: _positive_int(v) and v <= MAX_STEPS, f"a positive integer <= {MAX_STEPS:,}"
    ),
    "seed": Key(0, _nonnegative_int, "an integer >= 0"),
    "device": Key("cpu", lambda v: v in DEVICES, f"one of {list(DEVICES)}"),
    "dtype": Key("float32", lambda v: v in DTYPES, f"one of {list(DTYPES)}"),
    # TF32 on a GPU (testbed.precision): off unless a config asks; changes the numbers, so a
    # checkpoint of one setting does not resume under the other
    "tf32": Key(False, lambda v: isinstance(v, bool), "true or false"),
}

ROW_KEYS = {
    "setting": Key("", lambda v: isinstance(v, str), "a string"),
    "metric": Key(
        REQUIRED, lambda v: v in REPLICATION_METRICS, f"one of {list(REPLICATION_METRICS)}"
    ),
    "threshold": Key(
        None, lambda v: _is_number(v) and 0.0 < v <= 1.0, "a test accuracy in (0, 1], e.g. 0.9"
    ),
    "column": Key(None, _text, "the name of a metrics column, e.g. r2"),
    "paper_value": Key(None, lambda v: _is_number(v) or isinstance(v, str), "a number or a string"),
    "unit": Key(None, lambda v: isinstance(v, str), "a string"),
    "label": Key(None, _text, "a string naming the metric in the report"),
}

REPLICATION_KEYS = {
    "table": Key(REQUIRED, _text, 'a string, e.g. "AggITD Table 2"'),
    "differences": Key(
        REQUIRED, _text, "a string stating how the setting differs from the paper's"
    ),
    **ROW_KEYS,
    # further rows of the same table (same setting and differences unless given)
    "extra_rows": Key(
        [],
        lambda v: isinstance(v, list) and all(isinstance(r, dict) for r in v),
        "an array of tables ([[replication.extra_rows]])",
    ),
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
ALGORITHM_PARAMETERS: dict[str, Key] = {
    **{
        name: Key(None, _step_size, f"a positive number <= {MAX_STEP_SIZE:g}")
        for name in ("inner_step_size", "outer_step_size", "neumann_step_size")
    },
    **{
        name: Key(None, _iterations, f"an integer in [0, {MAX_ITERATIONS:,}]")
        for name in ("inner_steps", "neumann_terms", "cg_iterations", "pushsum_steps")
    },
    "local_steps": Key(
        None,
        _local_steps,
        f"an integer in [1, {MAX_ITERATIONS:,}] or an array of them (one per client)",
    ),
    "batch_size": Key(
        None,
        lambda v: _positive_int(v) and v <= MAX_BATCH_SIZE,
        f"a positive integer <= {MAX_BATCH_SIZE:,}",
    ),
    "participation": Key(
        None, _participation, "a fraction in (0, 1] or a positive integer count of clients"
    ),
    "momentum": Key(None, lambda v: _is_number(v) and 0.0 < v <= 1.0, "a number in (0, 1]"),
    "graph_seed": Key(None, _nonnegative_int, "an integer >= 0"),
    "index": Key(None, _nonnegative_int, "an integer >= 0"),
    **{
        name: Key(None, lambda v: isinstance(v, bool), "true or false")
        for name in ("expectation", "keep_weights", "shared_sample", "scale_by_steps")
    },
    **{
        name: Key(None, _text, "a string")
        for name in (
            "averaging",
            "graph_family",
            "lower_solver",
            "semantics",
            "sgp_variant",
            "truncation",
        )
    },
}


def by_default(default: Any) -> Key | None:
    """The check a parameter gets from the type of its registry default (None: any)."""
    if isinstance(default, bool):
        return Key(None, lambda v: isinstance(v, bool), "true or false")
    if isinstance(default, int):
        return Key(None, _is_int, "an integer")
    if isinstance(default, float):
        return Key(None, _is_number, "a finite number")
    if isinstance(default, str):
        return Key(None, _text, "a string")
    return None


# --------------------------------------------------------------------------------- errors


def where(source: str, section: str | None, key: str | None = None) -> str:
    """``file: [section] key``, the place an error names."""
    place = source
    if section:
        place += f": [{section}]"
    if key:
        place += f" {key}"
    return place


def _suggest(word: str, known: Any) -> str:
    return did_you_mean(word, known, n=1)


def unknown(
    source: str, section: str | None, key: str, known: Any, what: str = "key"
) -> ConfigError:
    """The error of an unknown key (or section, ``what``), with a suggestion."""
    return ConfigError(
        f"{where(source, section)}: unknown {what} {key!r}"
        f"{_suggest(key, known)}; known: {sorted(known)}"
    )


def fill(
    source: str,
    section: str | None,
    given: Mapping[str, Any],
    keys: Mapping[str, Key],
    extra: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Check ``given`` against ``keys`` (plus free-form ``extra`` names) and fill defaults."""
    for key in given:
        if key not in keys and key not in extra:
            raise unknown(source, section, key, set(keys) | extra)
    out: dict[str, Any] = {}
    for key, spec in keys.items():
        if key not in given:
            if spec.default is REQUIRED:
                raise ConfigError(
                    f"{where(source, section, key)}: missing (expected {spec.expect})"
                )
            out[key] = spec.default
            continue
        value = given[key]
        if not spec.check(value):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            reason = name_problem(value) if keys is TOP_KEYS and key == "name" else None
            raise ConfigError(
                f"{where(source, section, key)}: expected {spec.expect}, "
                f"got {shown}" + (f" ({reason})" if reason else "")
            )
        out[key] = value
    out.update({key: value for key, value in given.items() if key in extra})
    return out


def choice(source: str, section: str, key: str, value: str, known: Any) -> None:
    """``value`` is one of ``known`` (an error with a suggestion otherwise)."""
    if value not in known:
        raise ConfigError(
            f"{where(source, section, key)}: unknown value {value!r}"
            f"{_suggest(value, known)}; known: {sorted(known)}"
        )


def is_positive_int(value: Any) -> bool:
    """An ``int`` (not a ``bool``) >= 1."""
    return _positive_int(value)


def is_text(value: Any) -> bool:
    """A string with something besides white space."""
    return _text(value)


#: ``[run] rounds``, the old name of ``[run] steps``: it counted outer iterations, while
#: everywhere else (the ledger, metrics.csv, the papers' formulas) a round is one
#: communication round. Still read, with a warning, so older configs run unchanged.
DEPRECATED_RUN_KEY = "rounds"


def renamed_steps(source: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """``[run]`` with the old key ``rounds`` read as ``steps`` (a warning naming the file); both
    at once is an error."""
    run = dict(run)
    if DEPRECATED_RUN_KEY not in run:
        return run
    if "steps" in run:
        raise ConfigError(
            f"{where(source, 'run', 'rounds')}: both [run] steps and its old name "
            "rounds are set; keep steps (outer iterations)"
        )
    warnings.warn(
        f"{where(source, 'run', 'rounds')} is the old name of [run] steps (outer "
        "iterations; a round is a communication round); rename it to steps",
        DeprecatedName,
        stacklevel=3,
    )
    run["steps"] = run.pop(DEPRECATED_RUN_KEY)
    return run


def check_device(source: str, device: str) -> None:
    """``device = "cuda"`` only where torch sees a CUDA device."""
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"{where(source, 'run', 'device')}: 'cuda' requested but this "
                "machine has no CUDA device (torch.cuda.is_available() is False); "
                "use --device cpu"
            )


def check_algorithm_parameters(
    source: str, name: str, params: Mapping[str, Any], defaults: Mapping[str, Any]
) -> None:
    """Each ``[algorithm]`` parameter is one the entry ``name`` has (its registry
    ``defaults``), of its declared type (:data:`ALGORITHM_PARAMETERS`, else its default's)."""
    for key, value in params.items():
        if key not in defaults:
            raise ConfigError(
                f"{where(source, 'algorithm', key)}: {name!r} has no parameter "
                f"{key!r}{_suggest(key, defaults)}; its parameters: "
                f"{sorted(defaults)}"
            )
        spec = ALGORITHM_PARAMETERS.get(key) or by_default(defaults[key])
        if spec is not None and not spec.check(value):
            raise ConfigError(
                f"{where(source, 'algorithm', key)}: expected {spec.expect}, got {value!r}"
            )


def check_replication(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The ``[replication]`` table with its defaults, each row (and extra row) complete for
    its metric."""
    table = fill(source, "replication", given, REPLICATION_KEYS)
    _check_row(source, "replication", table)
    rows = []
    for i, row in enumerate(table["extra_rows"]):
        section = f"replication.extra_rows[{i}]"
        filled = fill(
            source, section, row, {**ROW_KEYS, "differences": Key(None, _text, "a string")}
        )
        _check_row(source, section, filled)
        rows.append(filled)
    table["extra_rows"] = rows
    return table


def _check_row(source: str, section: str, row: Mapping[str, Any]) -> None:
    if row["metric"] == "rounds_to_accuracy" and row["threshold"] is None:
        raise ConfigError(
            f"{where(source, section, 'threshold')}: missing; "
            "rounds_to_accuracy needs a test-accuracy threshold, e.g. 0.9"
        )
    if row["metric"] == "final_metric" and row["column"] is None:
        raise ConfigError(
            f"{where(source, section, 'column')}: missing; final_metric needs "
            'the metrics column to report, e.g. "r2"'
        )
