"""Whose a run folder is: ``<results>/runs/<name>/`` belongs to one config, checked before any
work, and deleted by ``--fresh`` only when it is that config's.

A run folder is its config's when its recorded ``config.toml`` is this config (its resolved
content: the file as loaded, with the command line's overrides, leaving out the keys a
resumption may change, :data:`~testbed_app.experiments.config_toml.RESUMABLE_CHANGES`), or its
``metadata.json`` records this very config file (``config_file``: the file's resolved absolute
path, so an edited config, or the same one with another ``--steps``, keeps its folder, while
``B/config.toml`` with ``A/config.toml``'s ``name`` does not get it: comparing file names
alone would let B's ``--fresh`` delete A's run). Two configs with one ``name`` in a command, or a
folder of another config, are refused with a :class:`ConfigError` naming both, and nothing is
deleted. A process writing a run folder holds its lock (:func:`run_lock`,
:mod:`results_format.locks`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from results_format.layout import RUN_CONFIG
from results_format.layout import RUN_METADATA
from results_format.layout import run_folder
from results_format.paths import UnsafePath
from results_format.paths import inside
from results_format.paths import plain_name
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.config_toml import computation
from testbed_app.experiments.config_toml import dump_toml
from testbed_app.experiments.errors import ConfigError


def run_dir(config: ExperimentConfig, results: Path) -> Path:
    """``<results>/runs/<name>``; a name that is not a plain folder name is refused."""
    source = str(config.path) if config.path else "<config>"
    return run_folder(Path(results), plain_name(config.name, f"{source}: name"))


def run_lock(config: ExperimentConfig, results: Path) -> tuple[str, str]:
    """The lock of ``config``'s run folder (:mod:`results_format.locks`)."""
    return f"run-{config.name}", f"the run folder {run_dir(config, results)}"


def config_file(path: Path | str) -> str:
    """The config file ``path`` as a run records it (``metadata.json``'s ``config_file``): its
    resolved absolute path, which names one file whatever the working directory."""
    return str(Path(path).resolve())


def _same_file(metadata: dict, path: Path) -> bool:
    """Whether the run that wrote ``metadata`` ran the config file ``path``: its recorded
    ``config_file`` is this file's resolved path. A run recorded before ``config_file``
    existed names the file as it was given (``config``), resolved here against the working
    directory: the same file when the command runs where it ran."""
    recorded = metadata.get("config_file")
    if not isinstance(recorded, str):
        recorded = metadata.get("config")
    if not isinstance(recorded, str):
        return False
    return config_file(recorded) == config_file(path)


def folder_owner_problem(config: ExperimentConfig, results: Path, fresh: bool) -> str | None:
    """Why ``config`` may not use (``fresh``: delete) its run folder: its recorded
    ``config.toml`` is not this config (resolved content) and its ``metadata.json`` records
    another config file (resolved path: an edited config stays its folder's, a file of the
    same name in another folder does not); with ``fresh``, also a folder the testbed cannot
    tell is this config's (no readable metadata, or no config path to compare)."""
    folder = run_dir(config, results)
    if not folder.exists():
        return None
    if not folder.is_dir():
        return f"{folder} is a file, not a run folder; move it away"
    try:  # inside the results folder once links are followed (a link planted at runs/ is not)
        inside(Path(results), folder.parent.relative_to(results).as_posix(), "the run folders")
    except UnsafePath as error:
        return f"{error}. Nothing was deleted"
    try:
        recorded_config = computation((folder / RUN_CONFIG).read_text())
    except (OSError, UnicodeDecodeError):
        recorded_config = None
    if recorded_config is not None and recorded_config == computation(dump_toml(config)):
        return None  # the config as recorded computes the run being run
    try:
        metadata = json.loads((folder / RUN_METADATA).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        metadata = None
    if not isinstance(metadata, dict):
        metadata = {}
    recorded = metadata.get("config")
    if isinstance(recorded, str) and config.path is not None:
        if _same_file(metadata, Path(config.path)):
            return None
        return (
            f"{folder} holds the run of {recorded}, not of {config.path} (both configs have "
            f"name = {config.name!r}); give one of them another name, or move the folder "
            "away. Nothing was deleted"
        )
    if fresh and (recorded is not None or config.path is not None):
        return (
            f"--fresh: {folder} is not recorded as a run of {config.path or config.name} "
            "(its metadata.json names no config file); delete it by hand if it should go. "
            "Nothing was deleted"
        )
    return None


def check_run_folders(configs: Sequence[ExperimentConfig], results: Path, fresh: bool) -> None:
    """Before any work: no two configs share a run folder, and each run folder is its
    config's (:func:`folder_owner_problem`); :class:`ConfigError` naming both otherwise."""
    by_name: dict[str, list[ExperimentConfig]] = {}
    for config in configs:
        run_dir(config, results)  # the name is a plain folder name
        by_name.setdefault(config.name, []).append(config)
    for name, group in by_name.items():
        if len(group) > 1:
            files = ", ".join(str(c.path or "<config>") for c in group)
            raise ConfigError(
                f"{files}: {len(group)} configs have name = {name!r}, so their "
                "runs would share one run folder; give each its own name"
            )
    for config in configs:
        problem = folder_owner_problem(config, results, fresh)
        if problem is not None:
            raise ConfigError(problem)


def remove_run_folder(config: ExperimentConfig, results: Path) -> None:
    """``--fresh``: delete ``config``'s run folder, only when it is this config's
    (:func:`folder_owner_problem`; :class:`ConfigError` otherwise, nothing deleted)."""
    problem = folder_owner_problem(config, results, fresh=True)
    if problem is not None:
        raise ConfigError(problem)
    folder = run_dir(config, results)
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)
    elif folder.is_symlink():
        folder.unlink()  # the link, never what it points to
