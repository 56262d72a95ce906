"""The authors' FedNest code as a testbed registry entry (entry point ``testbed.estimators``);
its claims name it (``claims.toml``). Importing this needs ``FEDNEST_AUTHORS_REPO`` (a checkout
of ucr-optml/FedNest): without it the plugin is left out with the line that says so."""

from __future__ import annotations

import functools

from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo
from testbed_fednest_authors.adapter import AuthorsFedNest
from testbed_fednest_authors.authors_code import CODE

ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="fednest-authors",
        cls=AuthorsFedNest,
        paper="FedNest (authors' code)",
        reference=f"{CODE.source}: ClientManageHR.fedIHGP (global_batch), Client.hyper_grad, "
        "Client.hyper_svrg_update",
        supports=ALL_KINDS,
        make=functools.partial(AuthorsFedNest),
    ),
]
