"""The authors' FedNest code (ucr-optml/FedNest) from the checkout ``FEDNEST_AUTHORS_REPO``
names, located, checked and imported unmodified by the authors'-code loader
(:func:`testbed_authors_checkout.load`, ``integrations/authors_checkout``, which
``benchmarks/authors_fednest.py`` uses too). Nothing of theirs is copied into this package.
"""

from __future__ import annotations

from testbed_authors_checkout import FEDNEST
from testbed_authors_checkout import load

#: The authors' objects the adapter uses, by module (relative to their repository root).
AUTHORS_OBJECTS = {
    "ClientManageHR": "core.ClientManage_hr:ClientManageHR",
    "Client": "core.Client_hr:Client",
    "FedAvgP": "utils.Fed:FedAvgP",
    "args_parser": "utils.options:args_parser",
}
CODE = load(AUTHORS_OBJECTS, FEDNEST)
