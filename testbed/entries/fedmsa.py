"""Registry entries for the FedMSA algorithms (Tarzanagh, Li, Sharma, Oymak 2023)."""

from __future__ import annotations

import functools
from typing import Any

from testbed.algorithms.fedmsa import FedMSA
from testbed.algorithms.fedmsa_maps import BilevelMaps
from testbed.algorithms.fedmsa_maps import CompositionalMaps
from testbed.info import EstimatorInfo
from testbed.info import field_defaults

_REFERENCE = "Tarzanagh, Li, Sharma, Oymak 2023 (arXiv 2306.01648), Algorithm 1, eqs. (5)-(6)"

# Defaults are FedMSA's dataclass fields; each make sets the maps. The settings the two paper
# variants share where they differ from the fields: rho = 0.1, K = 4 local steps.
_PAPER = {"momentum": 0.1, "local_steps": 4}

_entry = functools.partial(
    EstimatorInfo, cls=FedMSA, paper="FedMSA", fixed=("maps",), role="algorithm"
)


def _bilevel(**kw: Any) -> FedMSA:
    return FedMSA(maps=BilevelMaps(), **kw)


def _compositional(semantics: str, **kw: Any) -> FedMSA:
    return FedMSA(maps=CompositionalMaps(semantics), **kw)  # type: ignore[arg-type]


ENTRIES: list[EstimatorInfo] = [
    _entry(
        name="fedmsa",
        reference=_REFERENCE + "; bilevel maps eq. (10) (corrected 10a)",
        supports=BilevelMaps.kinds,
        make=_bilevel,
        settings=_PAPER,
    ),
    _entry(
        name="fedmsa-generalised",
        reference=_REFERENCE + "; generalised variant of the Conclusion as run in the authors' "
        "code (ucr-optml/FedMSA): 10% of clients do local steps and are "
        "averaged, constant rho = 0.5, full-batch maps, alpha = 0.05, beta = 0.1",
        supports=BilevelMaps.kinds,
        make=_bilevel,
        settings={"local_steps": 4, "participation": 0.1},
        no_claims_reason="The paper proves nothing for the averaged multi-client local phase "
        "(its Conclusion only conjectures it); its algebra is tested in "
        "tests/test_fedmsa.py.",
    ),
    _entry(
        name="fedmsa-mco",
        reference=_REFERENCE + "; multi-level compositional maps eq. (11) (FedMCO, App. D)",
        supports=CompositionalMaps.kinds,
        make=_compositional,
        settings={**_PAPER, **field_defaults(CompositionalMaps, "semantics")},
    ),
]
