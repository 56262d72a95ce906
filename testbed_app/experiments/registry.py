"""Which experiment runs a config: dispatch on ``[workload] kind``.

``EXPERIMENT_BUILDERS[kind](config, device)`` builds the :class:`~testbed_app.experiments.base.
Experiment` of a validated config; :func:`workload_options` gives the ``[workload]`` keys (besides
``kind`` and ``model``) that kind accepts, which the config loader checks before any work:

- server-based kinds (``hyper_representation``, ``loss_tuning``): the workload's options,
  :func:`problems.workloads.registry.workload_options`;
- decentralized HGP kinds: the ``OPTIONS`` set declared next to each builder in
  :mod:`testbed_app.experiments.hgp`.
"""

from __future__ import annotations

from collections.abc import Callable

from problems.workloads import registry
from testbed_app.experiments.base import Experiment
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.hgp import build_hgp_influence
from testbed_app.experiments.hgp import build_hgp_personalization
from testbed_app.experiments.server import build_server_experiment

Builder = Callable[[ExperimentConfig, "str | None"], Experiment]

SERVER_KINDS: tuple[str, ...] = ("hyper_representation", "loss_tuning")

EXPERIMENT_BUILDERS: dict[str, Builder] = {
    "hyper_representation": build_server_experiment,
    "loss_tuning": build_server_experiment,
    "hgp_personalization": build_hgp_personalization,
    "hgp_influence": build_hgp_influence,
}


def workload_options(kind: str) -> frozenset[str]:
    """The ``[workload]`` keys, besides ``kind`` and ``model``, that ``kind`` accepts."""
    if kind in SERVER_KINDS:
        # data_root is the [data] root of the config (the runner passes the loaded dataset)
        return frozenset(registry.workload_options(kind)) - {"data_root"}
    if kind not in EXPERIMENT_BUILDERS:
        raise KeyError(
            f"no experiment builder for workload kind {kind!r}; known: "
            f"{sorted(EXPERIMENT_BUILDERS)}"
        )
    return frozenset(getattr(EXPERIMENT_BUILDERS[kind], "OPTIONS", frozenset()))


def build_experiment(config: ExperimentConfig, device: str | None = None) -> Experiment:
    """The experiment of a validated config (``device`` overrides ``[run] device``)."""
    return EXPERIMENT_BUILDERS[config.workload["kind"]](config, device)
