"""An experiment config as TOML text: reading a file, command-line overrides, writing a
validated config back (a run's ``config.toml``) and its fingerprint.

:func:`read_toml` names the file in every error (missing, a folder, unreadable, not UTF-8,
not TOML); :func:`apply_overrides` applies ``{"section.key": value}`` overrides;
:func:`dump_toml` writes a validated config as TOML, which loads back as the same config;
:func:`fingerprint` hashes it (a checkpoint records it, so a resumption under another config is
refused).

>>> apply_overrides({"run": {"steps": 3}}, {"run.steps": 5, "run.device": None})
{'run': {'steps': 5}}
>>> print(to_toml({"name": "a", "run": {"steps": 5, "note": None}}), end="")
name = "a"
<BLANKLINE>
[run]
steps = 5
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from results_format.resume import fingerprint as fingerprint_of
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.errors import ConfigError
from testbed_app.experiments.schema import DEPRECATED_RUN_KEY
from testbed_app.experiments.schema import SECTIONS


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
    line = data[: error.start].count(b"\n") + 1
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


def as_dict(config: ExperimentConfig) -> dict[str, Any]:
    """The config as the TOML layout (top-level keys, then one table per section)."""
    out: dict[str, Any] = {
        "name": config.name,
        "paper": config.paper,
        "description": config.description,
    }
    for section in SECTIONS:
        table = getattr(config, section)
        if table is not None:
            out[section] = dict(table)
    return out


#: Config keys that may change between an interrupted run and its resumption: those that do
#: not change the computed metrics (the paper's numbers and texts, where and how long it runs).
RESUMABLE_CHANGES: tuple[str, ...] = (
    "description",
    "replication",
    "run.steps",
    "run.device",
    "run.checkpoint_every",
)


def computation(text: str) -> dict[str, Any] | None:
    """What a config's TOML text computes: its content without :data:`RESUMABLE_CHANGES`, and
    without ``[run] tf32`` when it is off (absent and false compute alike); None when the text
    is not TOML. Two configs compute the same run exactly when these are equal."""
    try:
        content = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, TypeError):
        return None
    run = content.get("run")
    tf32 = isinstance(run, dict) and bool(run.get("tf32"))
    for dotted in RESUMABLE_CHANGES + (() if tf32 else ("run.tf32",)):
        section, _, key = dotted.partition(".")
        if key:
            table = content.get(section)
            if isinstance(table, dict):
                table.pop(key, None)
        else:
            content.pop(section, None)
    return content


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
    content = {
        key: {k: v for k, v in value.items() if v != []} if isinstance(value, Mapping) else value
        for key, value in content.items()
    }
    return tomli_w.dumps(_without_unset(content))


def dump_toml(config: ExperimentConfig) -> str:
    """The validated config as TOML text; :func:`~testbed_app.experiments.config.load_config` of
    it gives the same config."""
    return to_toml(as_dict(config))
