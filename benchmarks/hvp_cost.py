"""Hessian-vector product time relative to an inner gradient on each workload (target <= 3), and
per-client oracle calls of one hypergradient against the papers' minimum.

Part 1, time: on each workload, the batched Hessian-vector product ``grad^2_y g_i v`` (and the
mixed product ``grad^2_xy g_i v``) of :class:`testbed.Oracles` against the inner gradient
``grad_y g_i`` over the same clients. Reverse-over-reverse autodiff costs a small constant
number of gradient evaluations (Pearlmutter 1994; Griewank & Walther's cheap-gradient bound);
target (issue 6): HVP time at most 3x the gradient's.

Part 2, counts: per-client oracle calls of one hypergradient (the :class:`~testbed.CallCounter`
through ``Estimate.calls``, divided by M under full participation) against the minimum that each
paper's algorithm needs, with ``T`` inner FedInn calls, ``tau`` local steps, ``N`` Neumann terms
or inner steps and the drawn truncation index:

- FedIHGP (FedNest Algs. 2-4): FedInn ``T (1 + 2 tau)`` inner gradients (the
  anchor ``q_i`` plus two evaluations per SVRG local step, the same sample at both points);
  2 outer gradients (``grad_y f_i`` for ``p_0`` and ``grad_x f_i`` in FedOut, separate samples);
  ``N'`` HVPs; 1 mixed product.
- AggITD (Alg. 1 with Alg. 2; Table 1): ``N + 2 N tau`` inner gradients (the anchors ``q^t``
  for ``t < N``; the printed ``q_i^N`` is never used), 2 outer gradients (``grad_y F`` at
  ``y^Q``, ``grad_x F`` at ``y^N``), ``N - Q`` HVPs, 1 mixed product.
- HGP (Alg. 2: M HVPs and M cross-JVPs per client): 1 outer gradient (``u^(0)``
  and ``v^(0)`` from one backward pass), ``M`` HVPs and ``M`` mixed products, no inner
  gradients (the inner solution is given).

    python benchmarks/hvp_cost.py [--quick] [--out DIR] [--device cpu|cuda]
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
from _common import Row
from _common import Sized
from _common import Target
from _common import cli
from _common import description
from _common import target
from _common import time_call
from _workloads import Workload
from _workloads import closed_form_workload
from _workloads import neural_workloads

from problems import PerClientQuadratic
from problems import Problem
from problems import QuadraticBilevel
from testbed import Calls
from testbed import Oracles
from testbed import get_estimator

NAME = "hvp_cost"
DESCRIPTION = description(__doc__)
TARGET_HVP_RATIO = 3.0
# Why 0.2 s (torch's own default for blocked_autorange): each call is milliseconds, so the
# Timer's blocks hold many calls and 0.2 s of them give a median that is stable on a shared
# machine. Quick: one warm-up call, one timed call.
MIN_RUN_S = Sized(full=0.2, quick=0.0)


# ------------------------------------------------------------------------------- part 1


def oracle_timings(workload: Workload, quick: bool) -> Row:
    problem, device = workload.problem, workload.device
    oracles = Oracles(problem)
    x, y = (t.to(device) for t in workload.point)
    clients = torch.arange(problem.n_clients, device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    v = torch.randn(problem.n_clients, problem.dim_y, generator=gen, device=device, dtype=y.dtype)
    batch = workload.batch(clients)
    calls: dict[str, Callable[[], object]] = {
        "grad_inner": lambda: oracles.grad_inner(x, y, clients, batch),
        "grad_outer": lambda: oracles.grad_outer(x, y, clients, batch),
        "hvp_inner": lambda: oracles.hvp_inner(x, y, v, clients, batch),
        "jvp_inner_xy": lambda: oracles.jvp_inner_xy(x, y, v, clients, batch),
    }
    seconds = {
        name: time_call(fn, min_run_time=MIN_RUN_S(quick)).median for name, fn in calls.items()
    }
    return {
        "workload": workload.name,
        "device": device,
        "clients": problem.n_clients,
        "dim_x": problem.dim_x,
        "dim_y": problem.dim_y,
        **{f"{name}_s": value for name, value in seconds.items()},
        "hvp_over_grad": seconds["hvp_inner"] / seconds["grad_inner"],
        "jvp_over_grad": seconds["jvp_inner_xy"] / seconds["grad_inner"],
    }


# ------------------------------------------------------------------------------- part 2


def minimum_calls(estimator: str, params: dict[str, int]) -> Calls:
    """Per-client oracle calls the paper's algorithm needs (formulas in the module docstring)."""
    if estimator == "fedihgp":
        T, tau = params["inner_steps"], params["local_steps"]
        return Calls(grad_g=T * (1 + 2 * tau), grad_f=2, hvp=params["truncation_index"], jvp=1)
    if estimator == "aggitd":
        N, tau = params["inner_steps"], params["local_steps"]
        return Calls(grad_g=N + 2 * N * tau, grad_f=2, hvp=N - params["index"], jvp=1)
    if estimator == "hgp":
        M = params["neumann_terms"]
        return Calls(grad_f=1, hvp=M, jvp=M)
    raise KeyError(f"no minimum call count for {estimator!r}")


def call_cases(quick: bool) -> list[tuple[str, Problem, dict[str, int]]]:
    """(estimator, problem, parameters): the registry's defaults, smaller in quick mode."""
    clients = 4 if quick else 10
    bilevel = QuadraticBilevel.random(clients, 3, 4, 10.0, 0.3, seed=0)
    per_client = PerClientQuadratic.random(clients, 2, 3, 5.0, 0, outer_coupling=0.5)
    fedihgp = {"inner_steps": 5, "local_steps": 5, "neumann_terms": 20}
    aggitd = {"inner_steps": 10, "local_steps": 1}
    hgp = {"neumann_terms": 50}
    if quick:
        fedihgp, aggitd, hgp = (
            {k: min(v, 3) for k, v in d.items()} for d in (fedihgp, aggitd, hgp)
        )
    return [("fedihgp", bilevel, fedihgp), ("aggitd", bilevel, aggitd), ("hgp", per_client, hgp)]


def calls_per_hypergradient(quick: bool) -> tuple[list[Row], list[Target]]:
    rows: list[Row] = []
    targets: list[Target] = []
    for seed, (name, problem, params) in enumerate(call_cases(quick)):
        estimator = get_estimator(name).build(**params)
        x = problem.initial_point()[0]
        out = estimator.estimate(problem, x, estimator.init(problem), np.random.default_rng(seed))
        drawn = {k: int(out.aux[k]) for k in ("truncation_index", "index") if k in out.aux}
        minimum = minimum_calls(name, {**params, **drawn})
        measured = {k: v / problem.n_clients for k, v in out.calls.as_dict().items()}
        rows.append(
            {
                "estimator": name,
                "clients": problem.n_clients,
                **{f"param_{k}": v for k, v in {**params, **drawn}.items()},
                **{f"{k}_per_client": measured[k] for k in ("grad_f", "grad_g", "hvp", "jvp")},
                **{f"minimum_{k}": getattr(minimum, k) for k in ("grad_f", "grad_g", "hvp", "jvp")},
                "oracle_calls_per_client": measured["oracle_calls"],
                "minimum_oracle_calls": minimum.oracle_calls,
                "comm_rounds": out.calls.comm_rounds,
            }
        )
        targets.append(
            target(
                f"{name}: oracle calls per client per hypergradient (minimum "
                f"{minimum.oracle_calls})",
                measured["oracle_calls"],
                minimum.oracle_calls,
                "at_most",
            )
        )
    return rows, targets


def measure(quick: bool, device_list: list[str]) -> tuple[list[Row], list[Target]]:
    rows: list[Row] = []
    targets: list[Target] = []
    workloads = [closed_form_workload(quick)] + [
        w for device in device_list for w in neural_workloads(quick, device)
    ]
    for workload in workloads:
        row = oracle_timings(workload, quick)
        rows.append({"part": "time", **row})
        targets.append(
            target(
                f"{workload.name} on {workload.device}: HVP / gradient time",
                float(row["hvp_over_grad"]),
                TARGET_HVP_RATIO,
                "at_most",
            )
        )
    call_rows, call_targets = calls_per_hypergradient(quick)
    rows += [{"part": "calls", **row} for row in call_rows]
    return rows, targets + call_targets


def main(argv: list[str] | None = None) -> int:
    return cli(NAME, DESCRIPTION, measure, argv)


if __name__ == "__main__":
    sys.exit(main())
