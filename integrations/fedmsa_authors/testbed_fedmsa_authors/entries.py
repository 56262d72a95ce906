"""The FedMSA authors' code as a testbed registry entry (entry point ``testbed.estimators``); its
claims name it (``claims.toml``). Importing this needs ``FEDMSA_AUTHORS_REPO`` (a checkout of
ucr-optml/FedMSA): without it the plugin is left out with the line that says so."""

from __future__ import annotations

import functools

from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo
from testbed_fedmsa_authors.adapter import AuthorsFedMSA
from testbed_fedmsa_authors.authors_code import CODE
from testbed_fedmsa_authors.mco import NOTEBOOK
from testbed_fedmsa_authors.mco import AuthorsFedMCO

ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="fedmsa-authors",
        cls=AuthorsFedMSA,
        paper="FedMSA (authors' code)",
        reference=f"{CODE.source}: Client.p_func, Client.s_func, BLOClient.update_local, "
        "ClientManage.fed_globhq",
        supports=ALL_KINDS,
        make=functools.partial(AuthorsFedMSA),
    ),
    EstimatorInfo(
        name="fedmsa-authors-mco",
        cls=AuthorsFedMCO,
        paper="FedMSA (authors' code)",
        reference=f"{CODE.source}: {NOTEBOOK} p_func, s_func (JAX; the maps (11) on the "
        "risk-averse problem)",
        supports=frozenset({"compositional"}),
        make=functools.partial(AuthorsFedMCO),
    ),
]
