"""higher's unrolled differentiation as a testbed registry entry (``testbed.estimators``): the
ITD claims and the GD rate of its differentiable SGD, at the claims' T and beta = 1/L."""

from __future__ import annotations

import functools
from importlib.metadata import version

from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo
from testbed_higher.adapter import HigherUnrolled

ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="higher-unrolled",
        cls=HigherUnrolled,
        paper="higher",
        reference=(
            f"higher {version('higher')}: innerloop_ctx(copy_initial_weights=True) with "
            "torch.optim.SGD (DifferentiableSGD), ITD"
        ),
        supports=ALL_KINDS,
        make=functools.partial(HigherUnrolled),
        enrolled_claims=(
            "classical.itd.error_identity",
            "classical.itd.error_bound",
            "classical.gd.linear_rate",
        ),
    ),
]
