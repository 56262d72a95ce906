"""A deployed run's files: what each outer iteration cost and carried, and the iterates.

Under ``<results>/deploy/<name>/<engine>/`` the ServerApp writes, after every outer iteration
(each file atomically, so an interrupted or failed run keeps every iteration it finished):

- ``run.json``: the spec, the engine, Flower's version and the provenance, the status
  (``running``, ``completed``, ``lost: ...`` when a client was lost, ``failed: ...``), and one row
  per iteration: wall seconds of the iteration, of its rounds and of its sync, the ledger's
  counts (rounds, vectors, floats each way), what Flower carried (exchanges, Flower messages,
  arrays and floats each way), the paper's formula at this iteration, and whether the counts
  agree; ``lost`` names the round and the client when one was lost. Two counts were both called
  "messages" (210 and 160 in one run): the ledger's are vectors, one per vector a client sends
  or receives (``ledger.vectors``, the papers' unit; Flower carries each as one array), and
  Flower's are ``Message`` objects, an instruction or a reply that may carry several arrays or
  none, the iteration's sync included (``flower.flower_messages``); :data:`COUNTS`, written into
  the file as ``counts``, says what each count is;
- ``iterates.pt``: the outer iterate ``x`` and the inner one (``y``, or FedMSA's ``Z``) after
  each iteration, from iteration 0 (torch tensors, read back with ``weights_only=True``).
"""

from __future__ import annotations

import datetime
import io
import json
from pathlib import Path
from typing import Any

import torch

from results_format import atomic_write
from results_format import atomic_write_bytes
from results_format import json_default
from results_format.provenance import provenance
from testbed_app.flower import flower_version
from testbed_app.flower.spec import DeploySpec
from testbed_app.flower.transport import ClientLost
from testbed_app.flower.transport import Traffic

#: 2: the ledger's ``messages`` became ``vectors`` and Flower's ``flower_messages``
FORMAT = "testbed-deploy-2"
RUN_FILE = "run.json"
ITERATES_FILE = "iterates.pt"
#: Written by ``testbed deploy`` before the run starts: the config file it ran (resolved path).
SOURCE_FILE = "source.json"

#: What each count of an iteration's row is (``run.json``'s ``counts``).
COUNTS = {
    "ledger.rounds": "the testbed ledger's communication rounds (aggregations)",
    "ledger.vectors": "the ledger's messages: one per vector a client sends or receives; "
    "equals flower.vectors_down + flower.vectors_up",
    "ledger.floats_up, ledger.floats_down": "the floats in those vectors, each way",
    "flower.exchanges": "Flower exchanges (push, pull every reply) that carried a round's work",
    "flower.syncs": "exchanges that carried only vectors queued for the clients",
    "flower.flower_messages": "Flower Message objects, instructions and replies (the sync's "
    "included); one Message carries several arrays or none",
    "flower.vectors_down, flower.vectors_up": "the arrays in those Messages, each way",
    "flower.floats_down, flower.floats_up": "the floats in those arrays, each way",
}


def run_folder(results: Path, name: str, engine: str) -> Path:
    return Path(results) / "deploy" / name / engine


def inner_iterate(state: Any) -> torch.Tensor:
    """The inner iterate of a state: ``y`` (FedNest, FBO-AggITD) or ``Z`` (FedMSA)."""
    inner = getattr(state, "y", None)
    return state.Z if inner is None else inner


class RunRecorder:
    """Writes a run's files as it goes (see the module docstring)."""

    def __init__(
        self, folder: Path, spec: DeploySpec, engine: str, formula: str | None, n_clients: int
    ) -> None:

        self.folder = Path(folder)
        self.record: dict[str, Any] = {
            "format": FORMAT,
            "name": spec.name,
            "engine": engine,
            "spec": json.loads(spec.to_json()),
            "flwr": flower_version(),
            "provenance": provenance(),
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "clients": n_clients,
            "rounds_formula": formula,
            "status": "running",
            "counts": COUNTS,
            "iterations": [],
            "lost": None,
        }
        self.xs: list[torch.Tensor] = []
        self.inners: list[torch.Tensor] = []

    def start(self, state: Any) -> None:
        self._keep(state)
        self._write()

    def iteration(
        self,
        k: int,
        state: Any,
        ledger: dict[str, int],
        traffic: Traffic,
        formula: int | None,
        seconds: float,
    ) -> dict[str, Any]:
        """Record iteration ``k``; returns its row."""
        flower = {
            "exchanges": traffic.exchanges,
            "syncs": traffic.syncs,
            "flower_messages": traffic.messages,
            "vectors_down": traffic.vectors_down,
            "vectors_up": traffic.vectors_up,
            "floats_down": traffic.floats_down,
            "floats_up": traffic.floats_up,
        }
        row = {
            "iteration": k,
            "seconds": seconds,
            "seconds_rounds": traffic.seconds_exchanges,
            "seconds_sync": traffic.seconds_syncs,
            "seconds_per_round": traffic.seconds_exchanges / max(traffic.exchanges, 1),
            "ledger": ledger,
            "flower": flower,
            "formula": formula,
            "counts_agree": (
                traffic.exchanges == ledger["rounds"]
                and traffic.vectors_down + traffic.vectors_up == ledger["vectors"]
                and traffic.floats_down == ledger["floats_down"]
                and traffic.floats_up == ledger["floats_up"]
            ),
            "formula_agrees": formula is None or formula == ledger["rounds"],
        }
        self.record["iterations"].append(row)
        self._keep(state)
        self._write()
        return row

    def finish(self, oracle_calls: dict[str, int]) -> None:
        self.record["status"] = "completed"
        self.record["client_oracle_calls"] = dict(oracle_calls)
        self._write()

    def lost(self, error: ClientLost) -> None:
        self.record["status"] = f"lost: {error}"
        self.record["lost"] = {
            "round": error.round_label,
            "client": error.client,
            "node": error.node,
            "reason": error.reason,
            "iterations_completed": len(self.record["iterations"]),
        }
        self._write()

    def failed(self, error: BaseException) -> None:
        self.record["status"] = f"failed: {type(error).__name__}: {error}"
        self._write()

    def _keep(self, state: Any) -> None:
        self.xs.append(state.x.detach().cpu().clone())
        self.inners.append(inner_iterate(state).detach().cpu().clone())

    def _write(self) -> None:
        buffer = io.BytesIO()
        torch.save({"x": self.xs, "inner": self.inners}, buffer)
        atomic_write_bytes(self.folder / ITERATES_FILE, buffer.getvalue())
        atomic_write(
            self.folder / RUN_FILE, json.dumps(self.record, indent=1, default=json_default) + "\n"
        )


def record_source(folder: Path, config: str | Path) -> None:
    """``source.json``: the config file this run folder is written from (resolved path), so
    that ``--fresh`` of that file, edited, replaces it (:func:`folder_owner_problem`)."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(
        folder / SOURCE_FILE, json.dumps({"config_file": str(Path(config).resolve())}) + "\n"
    )


def _read_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _computation(spec: Any) -> Any:
    """A spec as the run it computes: its content without ``steps`` (``--steps`` may change)."""
    return (
        {key: value for key, value in spec.items() if key != "steps"}
        if isinstance(spec, dict)
        else None
    )


def folder_owner_problem(folder: Path, spec: DeploySpec, config: str | Path) -> str | None:
    """Why ``--fresh`` of the config file ``config`` (read as ``spec``) may not delete the run
    folder ``folder``, or None: the folder is this config's when its ``run.json`` records this
    spec (every key but ``steps``) or its ``source.json`` this config file (resolved path: an
    edited config replaces its own run). Anything else, a folder of another config of the
    same ``name`` or one the testbed did not record, is refused, and nothing is deleted."""
    recorded = _read_object(folder / RUN_FILE).get("spec")
    if recorded is not None and _computation(recorded) == _computation(json.loads(spec.to_json())):
        return None
    source = _read_object(folder / SOURCE_FILE).get("config_file")
    if isinstance(source, str) and source == str(Path(config).resolve()):
        return None
    if isinstance(source, str):
        return (
            f"--fresh: {folder} holds the run of {source}, not of {config} (both configs "
            f"have name = {spec.name!r}); give one of them another name, or move the folder "
            "away. Nothing was deleted"
        )
    return (
        f"--fresh: {folder} is not recorded as a run of {config} (its run.json records "
        "another spec and no config file); delete it by hand if it should go. Nothing was "
        "deleted"
    )


def read_run(folder: Path) -> tuple[dict[str, Any], dict[str, list[torch.Tensor]]]:
    """``run.json`` and the iterates of a run folder (``FileNotFoundError`` naming what is
    missing; a file that is not a run record is a ``ValueError``)."""
    path = Path(folder) / RUN_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no run record (the run did not start)")
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a run record ({error})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"{path}: not a run record of format {FORMAT}")
    iterates = torch.load(Path(folder) / ITERATES_FILE, weights_only=True)
    return record, iterates


__all__ = [
    "COUNTS",
    "RunRecorder",
    "folder_owner_problem",
    "inner_iterate",
    "read_run",
    "record_source",
    "run_folder",
]
