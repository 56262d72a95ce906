"""Perturbations of HGP (Terashita & Hara): the smallest bug each HGP claim must catch.

Each is a subclass of the real estimator (or a view of the problem it runs on) with one
realistic mistake; the claims in :mod:`theory_checks.hgp`, :mod:`theory_checks.hgp.stochastic`
and :mod:`theory_checks.hgp.applications` name them, and ``theory_checks/test_claims.py``
asserts that each check catches its bug (the check's power). The sizes were chosen against the
checks' resolution: identities (1e-10) see a float32 round-off; bounds and rates see a 1e-3
step mismatch; the Monte Carlo checks see a factor-2 variance error or an off-by-one sampler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from problems import Batch
from testbed.decentralized.hgp import DecentralizedGradient, HyperGradientPush
from testbed.decentralized.pushsum import push_sum
from testbed.registry import get_estimator
from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import recast

# --------------------------------------------------------------------------- estimators


@dataclasses.dataclass(frozen=True)
class _Float32Messages(HyperGradientPush):
    """Every averaged vector passes through float32 (single-precision messages), the rest of
    the computation stays in float64."""

    def average_step(self, u: Any, w: Any, time: int, graph: Any, gledger: Any,
                 sledger: Any) -> Any:
        return super().average_step(u.float().double(), w, time, graph, gledger, sledger)


@dataclasses.dataclass(frozen=True)
class _OneStepShort(HyperGradientPush):
    """Each Push-Sum call runs S - 1 gossip steps (an off-by-one in the step loop) while the
    graph clock still advances by S."""

    def average_step(self, u: Any, w: Any, time: int, graph: Any, gledger: Any,
                 sledger: Any) -> Any:
        if not self.averaging_rule.gossips:
            return super().average_step(u, w, time, graph, gledger, sledger)
        mixings = graph.mixing(time, max(self.pushsum_steps - 1, 0))
        result = push_sum(u, mixings, gledger, w if self.keep_weights else None)
        return result.y, (result.omega if self.keep_weights else w), time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class _NoDebias(HyperGradientPush):
    """Push-Sum without the de-bias division (``u_bar = z`` instead of ``z / omega``)."""

    def average_step(self, u: Any, w: Any, time: int, graph: Any, gledger: Any,
                 sledger: Any) -> Any:
        if not self.averaging_rule.gossips:
            return super().average_step(u, w, time, graph, gledger, sledger)
        result = push_sum(u, graph.mixing(time, self.pushsum_steps), gledger)
        return result.z, w, time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class _NoAveraging(HyperGradientPush):
    """The averaging of u skipped (the Push-Sum call disabled, e.g. S read as 0): each client
    runs its own Neumann series, so v_i tends to LocalGrad instead of GlobalGrad."""

    def average_step(self, u: Any, w: Any, time: int, graph: Any, gledger: Any,
                 sledger: Any) -> Any:
        return u, w, time + self.pushsum_steps


@dataclasses.dataclass(frozen=True)
class _StepSlip(HyperGradientPush):
    """The v-update moves with ``(1 + slip) eta`` while the u-update uses eta (the two updates
    read the step from different places, one of them rounded or rescaled)."""

    slip: float = 1e-3

    def run(self, problem: Any, x: torch.Tensor, state: Any, rng: np.random.Generator,
            replicas: int = 1, track_consensus: bool = True) -> Any:
        out = super().run(problem, x, state, rng, replicas, track_consensus)
        # v^(m) - v^(0) = -eta sum_l J u_bar^(l): the slipped step scales exactly this part
        start = out.trajectory[:1]
        return out._replace(trajectory=start + (1.0 + self.slip) * (out.trajectory - start))


@dataclasses.dataclass(frozen=True)
class _HalfBatch(HyperGradientPush):
    """Draws ``b // 2`` samples per minibatch while reporting b (e.g. a batch split over two
    workers whose second half is dropped): the sampling variance doubles."""

    def run(self, problem: Any, x: torch.Tensor, state: Any, rng: np.random.Generator,
            replicas: int = 1, track_consensus: bool = True) -> Any:
        b = self.batch_size
        actual = dataclasses.replace(self, batch_size=None if b is None else max(1, b // 2))
        return HyperGradientPush.run(actual, problem, x, state, rng, replicas, track_consensus)


class _ProblemView:
    """The problem seen through one wrong piece of the stochastic oracle; everything else is
    the problem's own."""

    def __init__(self, problem: Any) -> None:
        object.__setattr__(self, "_problem", problem)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._problem, name)


class _HalfSampleView(_ProblemView):
    """Minibatch indices from ``rng.integers(0, N // 2)`` (the bound of a train/validation split
    of the sample set applied to the whole set): only the first half is ever drawn."""

    def sample_batch(self, rng: np.random.Generator, clients: torch.Tensor,
                     batch_size: int) -> Batch:
        N = int(self._problem.n_samples)
        indices = rng.integers(0, max(N // 2, 1), size=(int(clients.shape[0]), batch_size))
        return Batch(torch.as_tensor(indices, dtype=torch.long))


class _SumReductionView(_ProblemView):
    """A minibatch loss reduced by sum instead of mean (``reduction="sum"``): the sampled
    Hessians and Jacobians are b times too large."""

    def inner_loss(self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor,
                   batch: Batch | None) -> torch.Tensor:
        value = self._problem.inner_loss(x, y, clients, batch)
        return value if batch is None else value * batch.indices.shape[1]


@dataclasses.dataclass(frozen=True)
class _ViewedProblem(HyperGradientPush):
    """HGP run on a :class:`_ProblemView` of the problem (``view`` names the class)."""

    view: str = ""

    def run(self, problem: Any, x: torch.Tensor, state: Any, rng: np.random.Generator,
            replicas: int = 1, track_consensus: bool = True) -> Any:
        viewed = {"half_sample": _HalfSampleView, "sum": _SumReductionView}[self.view](problem)
        return super().run(viewed, x, state, rng, replicas, track_consensus)


@dataclasses.dataclass(frozen=True)
class _Leaky(HyperGradientPush):
    """Also gossips the hyperparameter-sized v once (which must never leave a client)."""

    def run(self, problem: Any, x: torch.Tensor, state: Any, rng: np.random.Generator,
            replicas: int = 1, track_consensus: bool = True) -> Any:
        out = super().run(problem, x, state, rng, replicas, track_consensus)
        if out.graph_ledger is not None:
            graph = self.graph(problem.n_clients)
            out.graph_ledger.gossip(out.trajectory[-1, 0], graph.mixing(0, 1))
        return out


@dataclasses.dataclass(frozen=True)
class _Float32GlobalGrad(DecentralizedGradient):
    """GlobalGrad returned through a float32 tensor (a dtype slip in the reference)."""

    def per_client(self, problem: Any, x: torch.Tensor) -> torch.Tensor:
        return super().per_client(problem, x).float().double()


# --------------------------------------------------------------------------- builders


def _swap(name: str, cls: type, **fixed: Any) -> Callable[..., Any]:
    """Builder of registry entry ``name`` with its estimator replaced by ``cls`` (same fields,
    plus ``fixed``); for the personalization algorithm, its inner HGP estimator."""

    def make(**kw: Any) -> Any:
        est = get_estimator(name).build(**kw)
        if hasattr(est, "estimator"):  # the personalization algorithm
            return dataclasses.replace(est, estimator=recast(est.estimator, cls, **fixed))
        return recast(est, cls, **fixed)

    return make


def _float32_global(**kw: Any) -> Any:
    return _Float32GlobalGrad("global")


# --------------------------------------------------------------------------- perturbations

FLOAT32_MESSAGES = Perturbation(
    "float32 messages",
    "every averaged vector u is rounded to float32 before averaging (single-precision "
    "messages), everything else in float64: a relative error ~6e-8 per step, the smallest "
    "realistic numerical bug, 500x above the identities' 1e-10 round-off tolerance",
    _swap("hgp-exact-averaging", _Float32Messages),
)

PUSHSUM_ONE_STEP_SHORT = Perturbation(
    "Push-Sum runs S - 1 steps",
    "each Push-Sum call gossips S - 1 times while the graph clock advances by S (an off-by-one "
    "in the step loop): the consensus error is the one of S - 1 steps, a factor of about "
    "1/tau too large, or no consensus at S = 1; the corrected Lemma 2 bound "
    "(n - 1) tau(A(S:1)) / delta_S is nearly tight (0.8 of it on mixing graphs, equal on an "
    "edgeless step), so one missing step violates it",
    _swap("hgp", _OneStepShort),
)

NO_DEBIAS = Perturbation(
    "Push-Sum without de-bias",
    "Push-Sum returns the numerators z instead of z / omega (the de-bias division forgotten): "
    "exact on doubly stochastic steps, an O(1) consensus bias on directed graphs whose weights "
    "drift from 1",
    _swap("hgp", _NoDebias),
)

STEP_SLIP = Perturbation(
    "v step (1 + 1e-3) eta",
    "the v-update uses (1 + 1e-3) eta while the u-update uses eta (the step read from two "
    "places, one rescaled): the fixed point moves by 1e-3 of the indirect term J H^-1 c, a "
    "floor far above the geometric terms these bounds and rates are checked down to",
    _swap("hgp", _StepSlip),
)

STEP_SLIP_EXACT = dataclasses.replace(
    STEP_SLIP, build=_swap("hgp-exact-averaging", _StepSlip))

# Why slow: each case runs six long static-network floors (~8 s on one core for the search)
STEP_SLIP_STATIC = dataclasses.replace(STEP_SLIP, build=_swap("hgp-static", _StepSlip),
                                       slow=True)

STEP_SLIP_THM2 = Perturbation(
    "v step (1 + 1e-2) eta",
    "the v-update uses 1.01 eta while the u-update uses eta: at ||y_hat - y*|| = 1e-3 Thm 2's "
    "corrected bound leaves a slack of about 2 (beta/alpha) nu_f 1e-3, of the order of 1e-3 of "
    "the indirect term, so 1e-2 is the smallest slip that reliably exceeds it",
    _swap("hgp-exact-averaging", _StepSlip, slip=1e-2),
    slow=True,  # ~4 s on one core: hypergradient shrinking of the found case
)

HALF_BATCH = Perturbation(
    "minibatch of b/2 samples",
    "each minibatch draws b // 2 samples while reporting b (half a split batch dropped): the "
    "sampling variance of v^(M) doubles at leading order (ratio >= 2 to the exact variance), "
    "the realistic factor-2 variance error; the exponent in b or eta is unchanged, so only the "
    "estimator-vs-exact conformance can see it",
    _swap("hgp-stochastic", _HalfBatch),
)

HALF_SAMPLER = Perturbation(
    "sampler draws from half the sample set",
    "minibatch indices from rng.integers(0, N // 2) (a split's bound applied to the whole "
    "set): the sampled Hessians and Jacobians are centred on the first 8 of 16 samples, not on "
    "the client's objective; exact bias 0.5-2.4 of the noise sd on the largest coordinate "
    "(noise_moments with sample_indices). The subtler off-by-one integers(0, N - 1) biases by "
    "0.16-0.56 sd: at the 0.25-sd margin it is caught only on some b = 4 cases and only after "
    "~30 s of replicas, so it is not the perturbation the default run relies on",
    _swap("hgp-stochastic", _ViewedProblem, view="half_sample"),
)

SUM_REDUCTION = Perturbation(
    "minibatch loss summed, not averaged",
    "the minibatch inner loss is reduced by sum instead of mean: at b = 4 the sampled Hessian "
    "is 4 H, I - eta H_b expands and the error grows geometrically. Thm 1's bound is 49x-940x "
    "the empirical 0.9-quantile on the drawn cases, so no bug smaller than such an inflation "
    "(a factor-2 variance, a small bias) can violate it: this is the realistic bug of that size",
    _swap("hgp-stochastic", _ViewedProblem, view="sum"),
)

EXACT_AVERAGING = Perturbation(
    "graph ignored (exact averaging)",
    "the estimator averages exactly whatever the graph (the Push-Sum call bypassed): it "
    "converges on a sequence that violates Assumption 1, which the negative control must notice",
    _swap("hgp", HyperGradientPush, averaging="exact"),
    slow=True,  # ~4 s on one core: two long runs per case plus shrinking
)

FLOAT32_GLOBALGRAD = Perturbation(
    "GlobalGrad through float32",
    "the reference GlobalGrad is returned through a float32 tensor (a dtype slip): relative "
    "error ~6e-8, above the identities' 1e-10 tolerance and below the 1e-6 finite-difference "
    "one, so only the exact identical-client identities can catch it",
    _float32_global,
)

LEAKY = Perturbation(
    "v gossiped once",
    "the hyperparameter-sized v is gossiped once besides the Push-Sum messages (a debugging "
    "all-reduce left in): one extra payload size in the ledger",
    _swap("hgp", _Leaky),
)


NO_AVERAGING_PERSONALIZATION = Perturbation(
    "u not averaged",
    "HGP-PL whose hypergradient skips the averaging of u (the Push-Sum call disabled): each "
    "client follows LocalGrad e_i - J_i H_i^-1 c_i instead of GlobalGrad, the confusion the "
    "paper's taxonomy (sec. 4) warns about. The claim compares final gains after K = 10 steps, "
    "by which exact descent has converged on these problems, so a bug that only slows the "
    "iteration (a step n times too short) is invisible; the smallest bug that matters moves the "
    "fixed point, and this is the realistic one",
    _swap("hgp-personalization", _NoAveraging),
    slow=True,  # ~20 s on one core: whole HGP-PL runs, and shrinking of the found case
)
