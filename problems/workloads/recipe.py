"""A workload as a recipe: what builds it, with an id and a spec like the closed-form families'.

A claim decided on a workload (a paper's table number checked under the paper's protocol at the
closest scale the data allow) draws its cases as recipes, not as built workloads: a recipe is a
few fields, its :meth:`WorkloadRecipe.spec` is saved with a counterexample and rebuilds it
(:func:`problems.from_spec`, family ``"WorkloadRecipe"``), and :meth:`WorkloadRecipe.build`
builds the workload once per process (the last few are cached).

>>> r = WorkloadRecipe("hyper_representation", "digits", {"scheme": "iid", "n_clients": 4},
...                    {"validation_fraction": 0.5}, seed=0)
>>> r.id
'recipe.hyper_representation.digits.mlp.iid.m4.seed0'
>>> r.build().n_clients
4
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from problems.workloads._workload import ClientWorkload
from problems.workloads.registry import build_workload

# Why 4: a claim's readings rebuild the same few workloads in turn; more would hold several
# hundred MB of features for no reuse.
_CACHE_SIZE = 4
_BUILT: dict[str, ClientWorkload] = {}


@dataclasses.dataclass(frozen=True)
class WorkloadRecipe:
    """The arguments of :func:`~problems.workloads.registry.build_workload` (float32, CPU)."""

    kind: str
    dataset: str
    split: Mapping[str, Any]
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 0
    model: str = "mlp"

    @property
    def id(self) -> str:
        return (
            f"recipe.{self.kind}.{self.dataset}.{self.model}.{self.split.get('scheme')}"
            f".m{self.split.get('n_clients')}.seed{self.seed}"
        )

    def spec(self) -> dict[str, Any]:
        return {
            "family": "WorkloadRecipe",
            "kind": self.kind,
            "dataset": self.dataset,
            "split": dict(self.split),
            "options": dict(self.options),
            "seed": self.seed,
            "model": self.model,
        }

    def with_seed(self, seed: int) -> WorkloadRecipe:
        return dataclasses.replace(self, seed=int(seed))

    def build(self) -> ClientWorkload:
        """The workload (built once per process while among the last few used)."""
        key = json.dumps(self.spec(), sort_keys=True)
        if key not in _BUILT:
            workload = build_workload(
                self.kind,
                self.dataset,
                dict(self.split),
                model=self.model,
                seed=self.seed,
                **dict(self.options),
            )
            while len(_BUILT) >= _CACHE_SIZE:
                _BUILT.pop(next(iter(_BUILT)))
            _BUILT[key] = workload
        return _BUILT[key]


__all__ = ["WorkloadRecipe"]
