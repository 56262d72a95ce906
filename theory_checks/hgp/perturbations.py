"""Perturbations of HGP (Terashita & Hara) that several results share, and the wrong estimators
they or other results' perturbations build.

A perturbation is the smallest realistic bug a claim must catch: a subclass of the real
estimator (or a view of the problem it runs on) with one mistake. A perturbation that one result
uses is defined in that result's module (``theory_checks/hgp/<result>.py``) from the pieces here;
``theory_checks/test_claims.py`` asserts that each check catches its bug (the check's power).
The sizes were chosen against the checks' resolution: identities (1e-10) see a float32
round-off; bounds and rates see a 1e-3 step mismatch; the Monte Carlo checks see a factor-2
variance error or an off-by-one sampler.

Here: float32 messages (Lemma 1 and the exact-averaging identity), a minibatch of b/2
(Cor. 2's exponent and D4), the slipped v step (:class:`StepSlip`: Cor. 1, Thm 1's rates,
Thm 2) and the wrong stochastic oracles (:class:`ViewedProblem`: D3 and Thm 1's bound).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from problems import Batch
from testbed.decentralized.hgp import HGPRun
from testbed.decentralized.hgp import HyperGradientPush
from testbed.registry import get_estimator
from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import recast

# --------------------------------------------------------------------------- estimators


@dataclasses.dataclass(frozen=True)
class _Float32Messages(HyperGradientPush):
    """Every averaged vector passes through float32 (single-precision messages), the rest of
    the computation stays in float64."""

    def average_step(self, u: Any, *rest: Any) -> Any:
        return super().average_step(u.float().double(), *rest)  # rest: weights, clock, ledgers


@dataclasses.dataclass(frozen=True)
class AroundRun(HyperGradientPush):
    """HGP (Alg. 2) with one mistake around its real run: the run given a wrong configuration or
    problem (:meth:`run_as`), or its result changed after it (:meth:`after_run`), each as given
    unless a bug overrides it; the run's other arguments pass through unchanged."""

    def run_as(self, problem: Any) -> tuple[HyperGradientPush, Any]:
        """The configuration and the problem the real run is given (this one, ``problem``)."""
        return self, problem

    def after_run(self, out: HGPRun, problem: Any) -> HGPRun:
        """The run's result as returned (as computed)."""
        del problem  # as computed
        return out

    def run(self, problem: Any, *args: Any, **kwargs: Any) -> HGPRun:
        config, seen = self.run_as(problem)
        return self.after_run(HyperGradientPush.run(config, seen, *args, **kwargs), problem)


def v_part_scaled(out: HGPRun, factor: float) -> HGPRun:
    """``out`` with ``v^(m) - v^(0) = -eta sum_l J u_bar^(l)`` multiplied by ``factor``: the
    v-update run with ``factor * eta`` while the u-update uses eta."""
    start = out.trajectory[:1]
    return out._replace(trajectory=start + factor * (out.trajectory - start))


@dataclasses.dataclass(frozen=True)
class StepSlip(AroundRun):
    """The v-update moves with ``(1 + slip) eta`` while the u-update uses eta (the two updates
    read the step from different places, one of them rounded or rescaled)."""

    slip: float = 1e-3

    def after_run(self, out: HGPRun, problem: Any) -> HGPRun:
        del problem  # the slipped step scales the v part of any run
        return v_part_scaled(out, 1.0 + self.slip)


@dataclasses.dataclass(frozen=True)
class _HalfBatch(AroundRun):
    """Draws ``b // 2`` samples per minibatch while reporting b (e.g. a batch split over two
    workers whose second half is dropped): the sampling variance doubles."""

    def run_as(self, problem: Any) -> tuple[HyperGradientPush, Any]:
        b = self.batch_size
        return dataclasses.replace(self, batch_size=None if b is None else max(1, b // 2)), problem


class _ProblemView:
    """The problem seen through one wrong piece of the stochastic oracle; everything else is
    the problem's own."""

    def __init__(self, problem: Any) -> None:
        object.__setattr__(self, "_problem", problem)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._problem, name)


class HalfSampleView(_ProblemView):
    """Minibatch indices from ``rng.integers(0, N // 2)`` (the bound of a train/validation split
    of the sample set applied to the whole set): only the first half is ever drawn."""

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch:
        N = int(self._problem.n_samples)
        indices = rng.integers(0, max(N // 2, 1), size=(int(clients.shape[0]), batch_size))
        return Batch(torch.as_tensor(indices, dtype=torch.long))


class SumReductionView(_ProblemView):
    """A minibatch loss reduced by sum instead of mean (``reduction="sum"``): the sampled
    Hessians and Jacobians are b times too large."""

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        value = self._problem.inner_loss(x, y, clients, batch)
        return value if batch is None else value * batch.indices.shape[1]


@dataclasses.dataclass(frozen=True)
class ViewedProblem(AroundRun):
    """HGP run on a view of the problem (``view`` names it: ``"half_sample"``, a sampler that
    draws from the first half of each sample set; ``"sum"``, a minibatch loss summed)."""

    view: str = ""

    def run_as(self, problem: Any) -> tuple[HyperGradientPush, Any]:
        return self, {"half_sample": HalfSampleView, "sum": SumReductionView}[self.view](problem)


# --------------------------------------------------------------------------- builders


def swap(name: str, cls: type, **fixed: Any) -> Callable[..., Any]:
    """Builder of registry entry ``name`` with its estimator replaced by ``cls`` (same fields,
    plus ``fixed``); for the personalization algorithm, its inner HGP estimator."""

    def make(**kw: Any) -> Any:
        est = get_estimator(name).build(**kw)
        if hasattr(est, "estimator"):  # the personalization algorithm
            return dataclasses.replace(est, estimator=recast(est.estimator, cls, **fixed))
        return recast(est, cls, **fixed)

    return make


def step_slip(entry: str, slow: bool = False) -> Perturbation:
    """The v step slipped by 1e-3 (:class:`StepSlip`) in registry entry ``entry``: the
    perturbation of the bounds and rates checked down to their geometric terms (Cor. 1 on
    ``hgp``, Thm 1's rate in M on ``hgp-exact-averaging`` and in S on ``hgp-static``)."""
    return Perturbation(
        "v step (1 + 1e-3) eta",
        "the v-update uses (1 + 1e-3) eta while the u-update uses eta (the step read from two "
        "places, one rescaled): the fixed point moves by 1e-3 of the indirect term J H^-1 c, a "
        "floor far above the geometric terms these bounds and rates are checked down to",
        swap(entry, StepSlip),
        slow=slow,
    )


# --------------------------------------------------------------------------- perturbations

FLOAT32_MESSAGES = Perturbation(
    "float32 messages",
    "every averaged vector u is rounded to float32 before averaging (single-precision "
    "messages), everything else in float64: a relative error ~6e-8 per step, the smallest "
    "realistic numerical bug, 500x above the identities' 1e-10 round-off tolerance",
    swap("hgp-exact-averaging", _Float32Messages),
)

HALF_BATCH = Perturbation(
    "minibatch of b/2 samples",
    "each minibatch draws b // 2 samples while reporting b (half a split batch dropped): the "
    "sampling variance of v^(M) doubles at leading order (ratio >= 2 to the exact variance), "
    "the realistic factor-2 variance error; the exponent in b or eta is unchanged, so only the "
    "estimator-vs-exact conformance can see it",
    swap("hgp-stochastic", _HalfBatch),
)
