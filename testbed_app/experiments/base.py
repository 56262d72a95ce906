"""The contract between ``testbed run``, the experiments it drives and the report.

An :class:`Experiment` is a stateful object that advances one outer iteration (one server-based
outer step, or one decentralized round of HGP/SGP) per :meth:`Experiment.step` and returns the
metrics of that step as one flat row. The runner (``testbed_app.experiments.runner``) owns progress
bars, results files, checkpoints and resumption; an experiment only has to make its whole state
(iterates, algorithm state, random generators, counters) round-trip through
:meth:`Experiment.state_dict` / :meth:`Experiment.load_state_dict` so that a resumed run produces
the same numbers as an uninterrupted one.

Files a run writes under ``<results>/runs/<experiment name>/``:

- ``config.toml``: the validated config as run (with ``--steps`` / ``--device`` overrides);
- ``metrics.csv``: one :class:`MetricRow` per step, appended and flushed as the run goes;
- ``split.json``: the client split and each client's label histogram;
- ``checkpoint.pt``: the latest state (written atomically: temporary file, then rename);
- ``metadata.json``: git commit, package versions, seed, device, machine.

Optional attributes the runner reads where an experiment has them: ``initial_metrics`` (the
metrics at the starting point) and ``chance_accuracy`` (``1 / n_classes``), the references of
the divergence watch (:mod:`testbed_app.experiments.divergence`); ``on_phase`` and ``phase``,
for an experiment whose steps are long: the runner sets ``on_phase`` to a
:class:`~testbed_app.experiments.step_pieces.StepPieces` that the experiment calls as pieces of a
step begin and finish (progress, a checkpoint after each finished piece), and ``phase`` names
the finished pieces a restored state holds (a resumed run says so). A step may raise
:class:`~testbed_app.experiments.divergence.Diverged` when a phase inside it diverged.

Replication rows, the report's "paper vs testbed" tables, go to
``<results>/replication/<experiment name>.json`` in the
:data:`results_format.REPLICATION_SCHEMA` form, and benchmark results to
``<results>/bench/<benchmark>.json`` in the :data:`results_format.BENCH_SCHEMA` form.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any
from typing import Protocol
from typing import runtime_checkable

from testbed_app.experiments.algorithm import build_entry

#: Keys every metrics row has (experiments may add more, e.g. ``test_loss``, ``r2``).
METRIC_KEYS: tuple[str, ...] = (
    "step",  # outer iteration (server-based) or gossip round (decentralized), from 1
    "rounds",  # cumulative communication rounds (ledger)
    "floats_sent",  # cumulative floats sent by all clients (ledger)
    "test_accuracy",  # accuracy on the held-out test set (NaN when not evaluated this step)
)

MetricRow = dict[str, float]


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """A validated experiment config (one TOML file under ``configs/``).

    The TOML layout, one table per attribute::

        name = "aggitd-table2-iid-tau1"     # also the results folder name
        paper = "AggITD"                    # FedNest | AggITD | FedMSA | HGP
        description = "..."
        [data]        dataset = "digits" | "mnist" | "fashion-mnist" | "cifar10", root = "...",
                      test_fraction, seed
        [split]       scheme = "iid" | "shards" | "dirichlet" | "dominant" | "long_tail",
                      n_clients, and the scheme's parameters
        [workload]    kind = "hyper_representation" | "loss_tuning" | "hgp_personalization"
                      | "hgp_influence", model = "mlp" | "cnn" | "logreg", and the kind's options
        [algorithm]   name = a registered estimator/algorithm name (``testbed list``), and
                      overrides of its registry defaults
        [run]         steps (outer iterations), eval_every, checkpoint_every, seed,
                      device = "cpu" | "cuda", dtype = "float32" | "float64"
        [replication] (optional) table, setting, metric, threshold, paper_value, unit,
                      differences

    Sections are plain dicts after validation (unknown keys and impossible values are rejected
    before any work starts, with the file and key named in the error).
    """

    name: str
    paper: str
    description: str
    data: dict[str, Any]
    split: dict[str, Any]
    workload: dict[str, Any]
    algorithm: dict[str, Any]
    run: dict[str, Any]
    replication: dict[str, Any] | None = None
    path: Path | None = None
    #: ``[run] steps`` as the file gives it, before a ``--steps`` override: a run that stops
    #: short of it is partial (its replication record says so). ``None``: same as ``steps``.
    horizon: int | None = dataclasses.field(default=None, compare=False)

    @functools.cached_property
    def entry(self) -> Any:
        """The registered estimator or outer algorithm ``[algorithm]`` names, built once
        (:func:`~testbed_app.experiments.algorithm.build_entry`): validation builds it to run
        the constructor's checks, and the experiment runs this object."""
        return build_entry(self.algorithm)


@runtime_checkable
class Experiment(Protocol):
    """One configured experiment; built by the runner from a validated config."""

    name: str

    def step(self) -> MetricRow:
        """Advance one outer iteration / round and return its metrics (see METRIC_KEYS)."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (tensors, rng states, counters)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
