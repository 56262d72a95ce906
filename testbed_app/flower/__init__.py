"""The server-based algorithms as a real federated deployment on Flower (``testbed deploy``).

FedNest (FedInn / FedIHGP / FedOut and the other Table 2 variants), FBO-AggITD and FedMSA run as
a Flower ``ServerApp`` and ``ClientApp``: the server is the algorithm's own outer loop and
aggregation steps, each client runs the same per-client code as the batched simulation on its own
data (:mod:`testbed.federation.client_work`), and every vector the ledger counts travels as an
array in a Flower message. Two engines: Flower's simulation engine (clients as Ray actors) and a
SuperLink with one SuperNode process per client on this machine (:mod:`.engines`).

Modules: :mod:`.spec` (what runs), :mod:`.codec` (a work as a message), :mod:`.transport` (the
server's side), :mod:`.client` (a client's side), :mod:`.apps` (the ServerApp and ClientApp),
:mod:`.records` (the run's files), :mod:`.engines` (starting and stopping Flower),
:mod:`.command` (``testbed deploy``).

Flower is an optional extra: ``pip install 'hypergradient-testbed[flower]'``. Flower's usage
telemetry and update check are turned off wherever the testbed imports or starts Flower
(``FLWR_TELEMETRY_ENABLED=0``, ``FLWR_DISABLE_UPDATE_CHECK=1``, set here before Flower is
imported), as Ray's usage stats are; and Ray gets the behaviour its FutureWarning announces
(``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0``: an actor without GPUs keeps ``CUDA_VISIBLE_DEVICES``
as it is), which Ray otherwise asks for on every start. The processes the testbed starts get
these in their environment (:data:`FLOWER_ENV`); the simulation engine's Ray starts in one of
them.
"""

from __future__ import annotations

import importlib.util
import os
from importlib import metadata

#: The one line that says how to get Flower.
INSTALL_HINT = "pip install 'hypergradient-testbed[flower]'"

#: ``testbed deploy --engine``: the command line's name of each engine -> Flower's.
ENGINES = {"simulation": "simulation", "local": "deployment"}

#: Environment for every Flower process the testbed imports or starts.
FLOWER_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
}

for _key, _value in FLOWER_ENV.items():
    os.environ.setdefault(_key, _value)


class FlowerMissing(ValueError):
    """Flower (the optional extra) is not installed; the message says how to install it."""


def require_flower() -> None:
    """Raise :class:`FlowerMissing` (one line: how to install it) when ``flwr`` is absent."""
    if importlib.util.find_spec("flwr") is None:
        raise FlowerMissing(
            f"testbed deploy needs Flower (flwr), which is not installed: {INSTALL_HINT}"
        )


def flower_version() -> str:
    try:
        return metadata.version("flwr")
    except metadata.PackageNotFoundError:
        return "not installed"


__all__ = [
    "ENGINES",
    "FLOWER_ENV",
    "INSTALL_HINT",
    "FlowerMissing",
    "flower_version",
    "require_flower",
]
