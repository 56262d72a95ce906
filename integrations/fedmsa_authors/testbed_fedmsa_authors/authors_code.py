"""The FedMSA authors' code (ucr-optml/FedMSA) from the checkout ``FEDMSA_AUTHORS_REPO`` names,
located, checked and imported unmodified by the authors'-code loader
(:func:`testbed_authors_checkout.load`, ``integrations/authors_checkout``). Nothing of theirs is
copied into this package.

Their tree is a copy of FedNest's (top-level ``core``, ``utils``, ``models``): it cannot share a
process with the FedNest authors' code, and the loader refuses to shadow one with the other (one
``testbed verify`` per codebase). Their ``core/ClientManage*.py`` import ``cv2.log`` and never
use it: an empty stand-in when OpenCV is absent (the adapter imports ``core/ClientManage_blo.py``
with ``utils/Fed.py``, ``core/SGDClient.py`` and ``core/SVRGClient.py``, ``core/BLOClient.py``,
``core/Client.py``, ``core/function.py``, ``utils/svrg.py`` and ``utils/options.py``, which run
unchanged on Python 3.11, torch 2.13 and numpy 2). The FedMCO notebook's functions come from the
same checkout (:mod:`testbed_fedmsa_authors.mco`).
"""

from __future__ import annotations

from testbed_authors_checkout import Codebase
from testbed_authors_checkout import load

FEDMSA = Codebase(
    "ucr-optml/FedMSA",
    "FEDMSA_AUTHORS_REPO",
    ("core", "utils", "models"),
    unused_imports={"cv2": ("log",)},
)
#: The authors' objects the adapter uses, by module (relative to their repository root).
AUTHORS_OBJECTS = {
    "BLOClient": "core.BLOClient:BLOClient",
    "ClientManage": "core.ClientManage_blo:ClientManage",
    "args_parser": "utils.options:args_parser",
}
CODE = load(AUTHORS_OBJECTS, FEDMSA)
