"""What a deployed run runs: the problem, the algorithm, the iterations; read from a TOML file.

A :class:`DeploySpec` is what the server and every client agree on, sent to them as JSON (Flower's
run config for ``flwr run``, or captured by the apps of a simulation). The server builds the
problem (for its starting point, dimensions and the step-size defaults the algorithm reads from
the problem's constants) and the algorithm; each client builds the same problem from the same
recipe and evaluates only its own client's row (:mod:`testbed_app.flower.client`).

``testbed deploy CONFIG`` reads either

- an experiment config of ``testbed run`` (``configs/*.toml``) whose workload is server-based
  (``hyper_representation`` or ``loss_tuning``: the digits MLP workloads), or
- a closed-form config (``configs/deploy/*.toml``): a ``[problem]`` table holding a closed-form
  family's recipe (its ``family``, e.g. ``"QuadraticBilevel.random"``, and its builder's
  arguments, as :meth:`spec` of the problem gives them), ``[algorithm]`` as in an experiment
  config, and ``[run]`` with ``steps`` (outer iterations) and ``seed`` (the server's
  generator: client sampling, FedNest's ``N'``); closed forms run in float64 on the CPU::

      name = "fednest-quadratic"
      [problem]
      family = "QuadraticBilevel.random"
      n_clients = 10
      dim_x = 5
      dim_y = 5
      condition_number = 10.0
      heterogeneity = 0.3
      [algorithm]
      name = "fednest"
      truncation = "deterministic"
      [run]
      steps = 3

A bad file, section or key is a :class:`~testbed_app.experiments.config.ConfigError` naming it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from problems import SPEC_BUILDERS
from problems import ProblemError
from problems import from_spec
from results_format.paths import name_problem
from testbed_app.experiments.config import ConfigError
from testbed_app.experiments.config import apply_overrides
from testbed_app.experiments.config import check_algorithm
from testbed_app.experiments.config import dump_toml
from testbed_app.experiments.config import load_config
from testbed_app.experiments.config import read_toml
from testbed_app.experiments.config import validate
from testbed_app.experiments.schema import MAX_STEPS
from testbed_app.experiments.server import build_algorithm
from testbed_app.experiments.server import build_problem

#: ``[run]`` keys of a closed-form deploy config: default, check, what a valid value is.
RUN_KEYS: dict[str, tuple[Any, str]] = {
    "steps": (None, f"a positive integer <= {MAX_STEPS:,} (outer iterations)"),
    "seed": (0, "an integer >= 0"),
}
TOP_KEYS = ("name", "description")
SERVER_KINDS = ("hyper_representation", "loss_tuning")


@dataclasses.dataclass(frozen=True)
class DeploySpec:
    """One deployed run.

    Attributes:
        name: names the results folder.
        problem: ``{"closed_form": recipe}`` (a :func:`problems.from_spec` recipe) or
            ``{"experiment": text}`` (a validated experiment config as TOML text).
        algorithm: ``{"name": registered algorithm, **parameters}``.
        steps: outer iterations K.
        seed: the server's generator (client sampling, FedNest's ``N'``).
        device: ``"cpu"`` or ``"cuda"`` (the server's and every client's).
    """

    name: str
    problem: dict[str, Any]
    algorithm: dict[str, Any]
    steps: int
    seed: int = 0
    device: str = "cpu"

    # ------------------------------------------------------------------ text
    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DeploySpec:
        try:
            content = json.loads(text)
            return cls(**content)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"not a deploy spec: {error}") from None

    # ------------------------------------------------------------------ building
    @property
    def exact(self) -> bool:
        """A closed-form problem in float64 (iterates compared to float64 round-off)."""
        return "closed_form" in self.problem

    @property
    def n_clients(self) -> int:
        if self.exact:
            return int(self.problem["closed_form"]["n_clients"])
        return int(self._experiment().split["n_clients"])

    def build_problem(self) -> Any:
        """The problem (every client's data; a client evaluates only its own row)."""
        if self.exact:
            return from_spec(dict(self.problem["closed_form"]))

        return build_problem(self._experiment(), self.device)

    def _experiment(self) -> Any:
        import tomllib

        return validate(tomllib.loads(self.problem["experiment"]), source=self.name)

    def build_algorithm(self) -> Any:
        algorithm = build_algorithm(dict(self.algorithm))
        formula = algorithm.rounds_formula()
        if formula is not None and formula.unit != "rounds":
            raise ConfigError(
                f"{self.name}: [algorithm] {self.algorithm['name']!r} is decentralized (its "
                f"clients gossip: {formula.unit}); testbed deploy runs the server-based "
                "algorithms (a Flower ServerApp aggregates)"
            )
        if algorithm.batch_size is not None:
            raise ConfigError(
                f"{self.name}: [algorithm] batch_size = {algorithm.batch_size}: a deployed run "
                "uses exact local objectives (in the simulation the server's generator draws "
                "every client's minibatch; deployed clients would draw their own, a different "
                "random stream); leave batch_size out"
            )
        return algorithm


def load_spec(
    path: str | Path,
    steps: int | None = None,
    device: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> DeploySpec:
    """The :class:`DeploySpec` of a deploy config or a server-based experiment config, with
    ``--steps`` / ``--device`` and ``{"section.key": value}`` overrides applied; every error
    names the file and the key."""

    path = Path(path)
    raw = apply_overrides(read_toml(path), overrides)
    if "problem" not in raw:
        config = load_config(path, {**(overrides or {}), "run.steps": steps, "run.device": device})
        if config.workload["kind"] not in SERVER_KINDS:
            raise ConfigError(
                f"{path}: [workload] kind = {config.workload['kind']!r} is "
                f"decentralized; testbed deploy runs server-based workloads "
                f"({', '.join(SERVER_KINDS)}) and closed-form configs"
            )

        spec = DeploySpec(
            config.name,
            {"experiment": dump_toml(config)},
            dict(config.algorithm),
            int(config.run["steps"]),
            int(config.run["seed"]),
            str(config.run["device"]),
        )
    else:
        spec = _closed_form(str(path), raw, steps, device)
    try:
        spec.build_algorithm()
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    return spec


def _closed_form(
    source: str, raw: Mapping[str, Any], steps: int | None, device: str | None
) -> DeploySpec:

    for key, value in raw.items():
        if key in ("problem", "algorithm", "run"):
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: [{key}] must be a table, got {value!r}")
        elif key not in TOP_KEYS:
            raise ConfigError(
                f"{source}: unknown key {key!r} (a closed-form deploy config has "
                f"{list(TOP_KEYS)} and the tables [problem], [algorithm], [run])"
            )
    # the rule of a run's name (a plain folder name: not "." or "..", no separator, NUL or
    # control character, at most 100 characters): `name = ".."` made --fresh delete
    # <results>/simulation/
    problem = name_problem(raw.get("name"))
    if problem is not None:
        shown = repr(raw.get("name"))
        raise ConfigError(
            f"{source}: name: expected a plain folder name (it names the results "
            f"folder), got {shown[:80] + '...' if len(shown) > 80 else shown} "
            f"({problem})"
        )
    name = raw["name"]
    for section in ("algorithm", "run"):
        if section not in raw:
            raise ConfigError(f"{source}: missing section [{section}]")
    recipe = dict(raw["problem"])
    problem = _problem(source, recipe)
    if device not in (None, "cpu"):
        raise ConfigError(
            f"{source}: --device {device}: closed-form problems run in float64 on "
            "the CPU here (the digits workloads take a device)"
        )
    run = _run(source, {**raw["run"], **({} if steps is None else {"steps": steps})})
    algorithm = check_algorithm(source, raw["algorithm"], problem.kind)
    return DeploySpec(name, {"closed_form": problem.spec()}, algorithm, run["steps"], run["seed"])


def _problem(source: str, recipe: dict[str, Any]) -> Any:
    family = recipe.get("family")
    if family not in SPEC_BUILDERS:
        raise ConfigError(
            f"{source}: [problem] family: expected one of {sorted(SPEC_BUILDERS)}, got {family!r}"
        )
    try:
        problem = from_spec(recipe)
    except (TypeError, ValueError, ProblemError) as error:
        raise ConfigError(
            f"{source}: [problem]: {family} rejects these arguments: {error}"
        ) from None
    if not hasattr(problem, "spec"):
        raise ConfigError(
            f"{source}: [problem]: {family} has no recipe (spec()) to send to the clients"
        )
    return problem


def _run(source: str, given: Mapping[str, Any]) -> dict[str, Any]:
    for key in given:
        if key not in RUN_KEYS:
            raise ConfigError(f"{source}: [run] {key}: unknown key; known: {sorted(RUN_KEYS)}")
    run = {key: given.get(key, default) for key, (default, _) in RUN_KEYS.items()}
    checks = {
        "steps": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_STEPS,
        "seed": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    }
    for key, check in checks.items():
        if not check(run[key]):
            raise ConfigError(
                f"{source}: [run] {key}: expected {RUN_KEYS[key][1]}, got {run[key]!r}"
            )
    return run


__all__ = ["DeploySpec", "load_spec"]
