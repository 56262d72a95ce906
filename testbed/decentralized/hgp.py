"""Hyper-Gradient Push (HGP; Terashita & Hara, Alg. 2, eq. 10) and the reference gradients.

Paper letters -> testbed: the paper's inner model x is our y (``d_x`` = ``dim_y``), its
hyperparameters ``lambda_i`` are the blocks of our outer variable x; ``M`` = ``neumann_terms``,
``S`` = ``pushsum_steps``, ``eta`` = ``neumann_step_size``, ``b`` = ``batch_size``.

With ``H_i = grad^2_y g_i``, ``J_i = grad^2_{y lambda_i} g_i`` (paper's transposed convention,
``d_lambda x d_y``), ``u_i^(0) = grad_y f_i``, ``v_i^(0) = grad_{lambda_i} f_i`` at the client's
inner iterate, client i runs (eq. 10 with Theta replaced by an averaging operator):

.. math::

    \\bar u^{(m-1)} &= \\mathrm{Avg}(u^{(m-1)}), \\\\
    v_i^{(m)} &= v_i^{(m-1)} - \\eta\\, \\hat J_i^{(m)} \\bar u_i^{(m-1)}, \\qquad
    u_i^{(m)} = \\bar u_i^{(m-1)} - \\eta\\, \\hat H_i^{(m)} \\bar u_i^{(m-1)},

for ``m = 1..M``, and ``v_i^(M)`` estimates GlobalGrad ``<d_lambda F>_i`` with ``F = sum_k f_k``
(eq. 9 / Lemma 1; Sec. 3.3). The testbed's hypergradient of ``h = mean_k f_k`` is
``GlobalGrad / n``, which is what :meth:`HyperGradientPush.estimate` returns as ``value``.

``Avg`` is the estimator's averaging rule (:mod:`testbed.decentralized.averaging`; the
``averaging`` field takes a rule object or its name):

- :class:`PushSumAveraging` (``"pushsum"``): S Push-Sum steps (Alg. 1) on the graph sequence,
  through the graph ledger (the static-network variant is this with
  ``graph_family="static_undirected"``, W^S);
- :class:`ExactAveraging` (``"exact"``): the exact averaging operator Theta (eq. 9-10 as
  written; notes D2);
- :class:`ServerAveraging` (``"server"``): the centralized variant: a server averages (one
  round of the server ledger).

Forms: deterministic (``batch_size=None``; Cor. 1), stochastic (minibatch ``b``, independent
samples for ``J`` and ``H``; Thm 1 / Cor. 2), and the paper's "practical" form (sec. 5.3:
``shared_sample`` one sample for both, ``keep_weights`` Push-Sum weights not re-initialised).
Only ``d_y + 1`` floats per edge per step are communicated; ``v_i`` and Hessians stay local.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import ClassVar
from typing import Literal
from typing import NamedTuple

import numpy as np
import torch

from problems import Batch
from problems import Problem
from testbed.calls import CallCounter
from testbed.decentralized.averaging import AVERAGING_RULES
from testbed.decentralized.averaging import Averaged
from testbed.decentralized.averaging import AveragingInputs
from testbed.decentralized.averaging import AveragingRule
from testbed.decentralized.averaging import Ledgers
from testbed.decentralized.averaging import measured_operator
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.pushsum import consensus_error
from testbed.decentralized.replica_rows import Order
from testbed.decentralized.replica_rows import ReplicaRows
from testbed.decentralized.replica_rows import order_of
from testbed.decentralized.sgp import ExactConsensus
from testbed.decentralized.sgp import InnerRunInputs
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.defaults import EDGE_PROBABILITY
from testbed.defaults import HGP_NEUMANN_TERMS
from testbed.defaults import HGP_PUSHSUM_STEPS
from testbed.estimators.base import Estimate
from testbed.estimators.base import Estimator
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import resolve_strategy
from testbed.federation.ledger import Ledger
from testbed.oracles import Oracles

Averaging = Literal["pushsum", "exact", "server"]


class HGPState(NamedTuple):
    """Per-client inner iterates ``y (n, dy)``, Push-Sum weights ``omega (n,)``, next graph step.

    Passing the same state twice replays the same graph segments (graphs are seeded by their
    own sequence, never by the data generator).
    """

    y: torch.Tensor
    omega: torch.Tensor
    time: int


class HGPRun(NamedTuple):
    """One (possibly replicated) HGP run.

    Attributes:
        trajectory: ``(M + 1, R, n, dl)``: ``v^(m)`` of every replica and client.
        consensus_errors: ``c^(m) = sigma_max(Theta_hat^(m) - Theta)`` per m (pushsum only).
        state: the state after the run.
        y: the per-client inner iterates used.
        graph_ledger: the ledger of the gossip (None for exact / server averaging).
        server_ledger: the server ledger (centralized variant only).
        calls: oracle calls and communication.
    """

    trajectory: torch.Tensor
    consensus_errors: list[float]
    state: HGPState
    y: torch.Tensor
    graph_ledger: GraphLedger | None
    server_ledger: Ledger | None
    calls: Any


def is_per_client(problem: Any) -> bool:
    return hasattr(problem, "dim_hyper") and hasattr(problem, "hyper_blocks")


def own_blocks(problem: Any, rows: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
    """``(C, dx) -> (C, dl)``: row c's block of its client ``clients[c]`` (its own lambda_i).

    Client i's losses depend on x only through lambda_i, so every other block of its derivative
    is zero; taking the own block is a local operation. A problem whose x is shared by all
    clients is read as every client holding its own copy ``x_i = x`` (the whole row), so that
    ``grad h = (1/n) sum_i GlobalGrad_i``.
    """
    if not is_per_client(problem):
        return rows
    n, dl = problem.n_clients, problem.dim_hyper
    count = rows.shape[0]
    rows_index = torch.arange(count, device=rows.device)
    # row c, block clients[c]: flat index c n + clients[c]; index_select because advanced
    # indexing is ~100x slower on small tensors
    index = rows_index * n + clients.to(rows.device)
    return rows.reshape(count * n, dl).index_select(0, index)


def hypergradient_from_blocks(problem: Any, v: torch.Tensor) -> torch.Tensor:
    """The testbed's ``grad h`` (mean convention) from GlobalGrad estimates ``v (n, dl)``:
    stacked blocks / n for per-client problems, ``sum_i v_i / n`` for a shared x."""
    if is_per_client(problem):
        return v.reshape(-1) / problem.n_clients
    return v.sum(0) / problem.n_clients


def _joint_products(
    problem: Any,
    x: torch.Tensor,
    y_rows: torch.Tensor,
    u: torch.Tensor,
    clients: torch.Tensor,
    batch: Batch | None,
    counter: CallCounter,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grad^2_xy g_i u_i, grad^2_y g_i u_i)`` from one double-backward on the same sample.

    The authors' code's recipe (hitachi-rd-cv/pdbo-hgp): differentiate ``<grad_y g_i, u_i>`` with
    respect to x and y at once; counted as one HVP and one mixed product per client, like two oracle
    calls.
    """
    count = int(clients.shape[0])
    xs = x.expand(count, -1).detach().clone().requires_grad_(True)
    ys = y_rows.detach().clone().requires_grad_(True)
    loss = problem.inner_loss(xs, ys, clients, batch).sum()
    (gy,) = torch.autograd.grad(loss, (ys,), create_graph=True)
    jx, hy = torch.autograd.grad((gy * u.detach()).sum(), (xs, ys), allow_unused=True)
    counter.add("hvp", count)
    counter.add("jvp", count)
    return (
        torch.zeros_like(xs) if jx is None else jx.detach(),
        torch.zeros_like(ys) if hy is None else hy.detach(),
    )


def _closed_form_products(problem: Any) -> Any:
    """``problem.curvature_products`` where its class gives them for the loss it has: the class
    that defines them also defines the inner loss in use. A subclass that changes the loss, or a
    view of the problem that only forwards attributes (a perturbation's wrong oracle), is
    differentiated through its own loss. None otherwise."""
    cls = type(problem)
    owner = next((c for c in cls.__mro__ if "curvature_products" in vars(c)), None)
    if owner is None or getattr(cls, "inner_loss", None) is not getattr(owner, "inner_loss", None):
        return None
    return problem.curvature_products


def _step_products(
    oracles: Oracles,
    x: torch.Tensor,
    y_rows: torch.Tensor,
    u: torch.Tensor,
    clients: torch.Tensor,
    batches: tuple[Batch | None, Batch | None],
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step's ``(J_i u_i, H_i u_i)``, the first as each row's own block (:func:`own_blocks`),
    on the batches ``(for J, for H)`` (one object: the same sample for both).

    A problem with the products in closed form (``curvature_products``, e.g.
    :meth:`problems.PerClientQuadratic.curvature_products`: the same numbers as the loss's
    autodiff, without its graph or the arrays the products do not read) gives them directly;
    otherwise the oracles (a double backward per product, or one for both on a shared sample,
    :func:`_joint_products`). Counted as one HVP and one mixed product per row either way."""
    problem, counter, (batch_j, batch_h) = oracles.problem, oracles.counter, batches
    closed_form = _closed_form_products(problem)
    if closed_form is not None:
        count = int(clients.shape[0])
        counter.add("hvp", count)
        counter.add("jvp", count)
        return closed_form(u, clients, batch_j, batch_h)
    if batch_j is batch_h:
        jv, hv = _joint_products(problem, x, y_rows, u, clients, batch_j, counter)
    else:
        jv = oracles.jvp_inner_xy(x, y_rows, u, clients, batch_j)
        hv = oracles.hvp_inner(x, y_rows, u, clients, batch_h)
    return own_blocks(problem, jv, clients), hv


@dataclasses.dataclass(frozen=True)
class HyperGradientPush(Estimator):
    """HGP (Alg. 2); see the module docstring.

    Args:
        neumann_terms: M >= 0 fixed-point iterations (M Push-Sum calls).
        pushsum_steps: S >= 0 Push-Sum steps per call.
        neumann_step_size: eta; ``1 / L_clients`` when None (so ``||I - eta H_k|| <= 1 - eta
            alpha``, the condition the proofs use, App. C.2).
        averaging: the averaging rule: :class:`PushSumAveraging` (``"pushsum"``),
            :class:`ExactAveraging` (``"exact"``) or :class:`ServerAveraging` (``"server"``), a
            rule object or its name.
        graph_family, graph_seed, edge_probability: the graph sequence (pushsum only).
        batch_size: b for the stochastic form (None: exact Jacobians).
        shared_sample: one minibatch for both J and H (practical form (a)).
        keep_weights: Push-Sum weights carried over, not reset to 1 (practical form (b)).
        inner: :class:`ExactConsensus` or :class:`StochasticGradientPush` (warm-started from the
            state; ``steps=0`` evaluates at the state's iterates).
    """

    supports: ClassVar[frozenset[str]] = frozenset({"bilevel"})
    neumann_terms: int = HGP_NEUMANN_TERMS
    pushsum_steps: int = HGP_PUSHSUM_STEPS
    neumann_step_size: float | None = None
    averaging: Averaging | AveragingRule = "pushsum"
    graph_family: str = "random_directed"
    graph_seed: int = 0
    edge_probability: tuple[float, float] = EDGE_PROBABILITY
    batch_size: int | None = None
    shared_sample: bool = False
    keep_weights: bool = False
    inner: ExactConsensus | StochasticGradientPush = dataclasses.field(
        default_factory=ExactConsensus
    )

    def __post_init__(self) -> None:
        check_positive_int(self.neumann_terms, "neumann_terms", minimum=0)
        check_positive_int(self.pushsum_steps, "pushsum_steps", minimum=0)
        if self.batch_size is not None:
            check_positive_int(self.batch_size, "batch_size", minimum=1)
        _ = self.averaging_rule  # an unknown rule name fails where it is given
        if self.neumann_step_size is not None and not self.neumann_step_size > 0:
            raise ValueError(f"neumann_step_size must be > 0, got {self.neumann_step_size}")

    # ------------------------------------------------------------------ helpers
    @property
    def averaging_rule(self) -> AveragingRule:
        """The averaging rule (``averaging`` resolved)."""
        return resolve_strategy(self.averaging, AVERAGING_RULES, AveragingRule, "averaging")

    def graph(self, n: int) -> GraphSequence:
        low, high = self.edge_probability
        return GraphSequence(self.graph_family, n, self.graph_seed, low, high)

    def step_size(self, problem: Any) -> float:
        if self.neumann_step_size is not None:
            return float(self.neumann_step_size)
        return 1.0 / float(problem.constants().L_clients)

    def initial_state(self, problem: Problem) -> HGPState:
        y0 = problem.initial_point()[1]
        n = problem.n_clients
        return HGPState(
            y0.expand(n, -1).clone(), torch.ones(n, dtype=y0.dtype, device=y0.device), 0
        )

    # ------------------------------------------------------------------ the algorithm
    def run(
        self,
        problem: Any,
        x: torch.Tensor,
        state: HGPState,
        rng: np.random.Generator,
        replicas: int = 1,
        track_consensus: bool = True,
        keep_trajectory: bool = True,
    ) -> HGPRun:
        """Run HGP; ``replicas`` independent copies share the graphs and the inner solution.

        ``track_consensus`` records ``c^(m)`` (an extra n x n Push-Sum per call; off for long
        replicated runs that do not need it). Without ``keep_trajectory`` the run's
        ``trajectory`` holds ``v^(M)`` alone, ``(1, R, n, dl)`` (a replicated check reads only
        that: the other steps were 3% of a stacked run, copied and stacked).

        The copies are stacked on the client axis, so one oracle call evaluates every client of
        every replica, as rows in the order the vectors lie in: replica-major (row ``r n + i``
        is client i of replica r) or, after Push-Sum's row form, client-major
        (:mod:`testbed.decentralized.replica_rows`; the same numbers). The averaging is one
        ``(R, n, d)`` call per step.
        """
        check_positive_int(replicas, "replicas", minimum=1)
        n, R, M = problem.n_clients, replicas, self.neumann_terms
        counter = CallCounter()
        oracles = Oracles(problem, counter)
        graph = self.graph(n)
        rule = self.averaging_rule
        gledger, sledger = rule.ledgers(n, counter)
        # the inner solver gossips through the rule's graph ledger, or its own (same counter)
        ledger = gledger or GraphLedger(n, counter)
        inner = self.inner.run(
            InnerRunInputs(
                problem, x, state.y, state.omega, state.time, graph, oracles, ledger, rng
            )
        )
        y, omega, time = inner.y, inner.omega, inner.time
        if not self.keep_weights:
            omega = torch.ones(n, dtype=y.dtype, device=y.device)
        eta = self.step_size(problem)
        # every replica starts from the same point (x, y): one outer gradient per client,
        # counted once per replica
        every_client = torch.arange(n)
        grad_x, grad_y = oracles.grad_outer(x, y, every_client)
        counter.add("grad_f", (R - 1) * n)
        u = grad_y.expand(R, n, -1)
        v = own_blocks(problem, grad_x, every_client).expand(R, n, -1)
        trajectory = [v.clone()]
        stacked = ReplicaRows(n, R)
        y_rows: dict[Order, torch.Tensor] = {}
        errors: list[float] = []
        w = omega.expand(R, n).clone()
        for _ in range(M):
            if rule.gossips and track_consensus:
                errors.append(
                    consensus_error(
                        self.averaging_operator(graph, time, w[0] if self.keep_weights else None)
                    )
                )
            u_bar, w, time = self.average_step(u, w, time, graph, gledger, sledger)
            # the rows in the order u_bar lies in (replica_rows: the same numbers, no copies)
            order = order_of(u_bar)
            clients = stacked.clients(order)
            if order not in y_rows:
                y_rows[order] = stacked.per_client(y, order)
            batches = self._step_batches(problem, rng, stacked, order)
            flat = stacked.rows(u_bar, order)
            jv, hv = _step_products(oracles, x, y_rows[order], flat, clients, batches)
            v = v - eta * stacked.vectors(jv, order)
            u = u_bar - eta * stacked.vectors(hv, order)
            if keep_trajectory:
                trajectory.append(v.clone())
        new_state = HGPState(y, w[0].clone() if self.keep_weights else inner.omega, time)
        kept = torch.stack(trajectory) if keep_trajectory else v[None]
        return HGPRun(kept, errors, new_state, y, gledger, sledger, counter.snapshot())

    def _step_batches(
        self, problem: Any, rng: np.random.Generator, stacked: ReplicaRows, order: Order
    ) -> tuple[Batch | None, Batch | None]:
        """One step's minibatches ``(for J, for H)`` (Alg. 2), drawn for the replica-major rows
        (the order of every replica's stream) and moved to ``order``; in the practical form one
        object for both (a shared sample)."""
        if self.batch_size is None:
            return None, None
        drawn = stacked.clients("replica")
        batch_j = stacked.batch(problem.sample_batch(rng, drawn, self.batch_size), order)
        if self.shared_sample:
            return batch_j, batch_j
        return batch_j, stacked.batch(problem.sample_batch(rng, drawn, self.batch_size), order)

    def average_step(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        gledger: GraphLedger | None,
        sledger: Ledger | None,
    ) -> Averaged:
        """One averaging call of the rule on ``u (R, n, d)``: ``(u_bar, weights, next graph
        step)``; the one place :meth:`run` and :meth:`averaging_operator` average through."""
        ledgers = Ledgers(gledger, sledger)
        return self.averaging_rule.average(
            AveragingInputs(u, w, time, graph, ledgers, self.pushsum_steps, self.keep_weights)
        )

    def averaging_operator(
        self, graph: GraphSequence, time: int, omega: torch.Tensor | None = None
    ) -> np.ndarray:
        """The ``(n, n)`` operator this estimator's averaging applies at graph step ``time``.

        Measured by averaging the identity basis with the estimator's own :meth:`average_step`
        (through throwaway ledgers), so it is what the estimator does, not what it should do:
        ``Theta_hat^(m) = diag(P 1)^{-1} P`` for Alg. 1 (Sec. 2.1), Theta for exact averaging.
        """
        ledgers = self.averaging_rule.ledgers(graph.n)
        return measured_operator(
            lambda u, w: self.average_step(u, w, time, graph, *ledgers)[0], graph.n, omega
        )

    def compute(
        self, problem: Problem, x: torch.Tensor, state: HGPState, rng: np.random.Generator
    ) -> Estimate:
        out = self.run(problem, x, state, rng)
        v = out.trajectory[-1, 0]
        aux = {
            "v": v,
            "trajectory": out.trajectory[:, 0],
            "consensus_errors": out.consensus_errors,
            "y": out.y,
            "graph_ledger": out.graph_ledger,
            "server_ledger": out.server_ledger,
        }
        return Estimate(hypergradient_from_blocks(problem, v), out.state, out.calls, aux)


# ------------------------------------------------------------------------------ references

Quantity = Literal["global", "client", "local"]


def oracle_blocks(problem: Any, x: torch.Tensor, y_rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Paper-convention blocks read through (uncounted) oracles at per-client points ``y_rows``.

    ``H (n, dy, dy)``, ``J (n, dl, dy)``, ``c (n, dy)``, ``e (n, dl)``, with each client's own
    block of x (the whole x when it is shared; see :func:`own_blocks`). Exact for closed-form
    problems, whose Hessians and cross Jacobians do not depend on y.
    """
    oracles = Oracles(problem)
    n, dy = problem.n_clients, problem.dim_y
    clients = torch.arange(n)
    eye = torch.eye(dy, dtype=torch.float64)
    H = torch.stack([oracles.hvp_inner(x, y_rows, e.expand(n, -1), clients) for e in eye], -1)
    J = torch.stack(
        [
            own_blocks(problem, oracles.jvp_inner_xy(x, y_rows, e.expand(n, -1), clients), clients)
            for e in eye
        ],
        -1,
    )
    gx, gy = oracles.grad_outer(x, y_rows, clients)
    return {
        "H": 0.5 * (H + H.transpose(1, 2)),
        "J": J,
        "c": gy,
        "e": own_blocks(problem, gx, clients),
        "y": y_rows,
    }


@dataclasses.dataclass(frozen=True)
class DecentralizedGradient(Estimator):
    """The three hypergradients of HGP's taxonomy (sec. 4, Table 1), in closed form.

    With the paper's blocks at the consensus optimum ``y*`` (``F = sum_k f_k``):

    - ``"global"``: GlobalGrad ``e_i - J_i (sum_k H_k)^{-1} sum_k c_k`` = ``<d_lambda F>_i``
      (what HGP estimates; equals the testbed's exact hypergradient times n);
    - ``"client"``: ClientGrad ``e_i - J_i (sum_k H_k)^{-1} c_i`` = ``d_{lambda_i} f_i(y*)``;
    - ``"local"``: LocalGrad ``e_i - J_i H_i^{-1} c_i`` at client i's own optimum
      ``argmin_y g_i`` (blocks there).

    Per-client problems give their blocks (``client_blocks``/``local_blocks``); for a problem
    whose x is shared the blocks are read through oracles with every client holding its own copy
    of x, and client i's optimum is ``y* - H_i^{-1} grad_y g_i(y*)`` (one Newton step, exact for
    the quadratic inner problems of the closed-form families). ``value`` is the testbed's mean
    convention (:func:`hypergradient_from_blocks`).
    """

    supports: ClassVar[frozenset[str]] = frozenset({"bilevel"})
    quantity: Quantity = "global"

    def __post_init__(self) -> None:
        if self.quantity not in ("global", "client", "local"):
            raise ValueError(f"quantity must be global, client or local; got {self.quantity!r}")

    def initial_state(self, problem: Problem) -> None:
        if not hasattr(problem, "exact_inner_solution"):
            raise ValueError(
                f"{self.quantity} gradient needs a closed-form problem; "
                f"{type(problem).__name__} has no exact_inner_solution"
            )
        if (
            self.quantity == "local"
            and is_per_client(problem)
            and not hasattr(problem, "local_blocks")
        ):
            raise ValueError(
                f"local gradient needs local_blocks(); {type(problem).__name__} has none"
            )

    def blocks(self, problem: Any, x: torch.Tensor, local: bool) -> dict[str, torch.Tensor]:
        if is_per_client(problem):
            return problem.local_blocks(x) if local else problem.client_blocks(x)
        n = problem.n_clients
        rows = problem.exact_inner_solution(x).expand(n, -1).clone()
        if local:
            blk = oracle_blocks(problem, x, rows)
            grads = Oracles(problem).grad_inner(x, rows, torch.arange(n))
            rows = rows - torch.linalg.solve(blk["H"], grads[..., None])[..., 0]
        return oracle_blocks(problem, x, rows)

    def per_client(self, problem: Any, x: torch.Tensor) -> torch.Tensor:
        """``(n, dl)`` in the paper's sum convention."""
        if self.quantity == "local":
            blk = self.blocks(problem, x, local=True)
            adjoint = torch.linalg.solve(blk["H"], blk["c"][..., None])[..., 0]
            return blk["e"] - torch.einsum("kij,kj->ki", blk["J"], adjoint)
        blk = self.blocks(problem, x, local=False)
        H_sum = blk["H"].sum(0)
        if self.quantity == "global":
            adjoint = torch.linalg.solve(H_sum, blk["c"].sum(0))
            return blk["e"] - torch.einsum("kij,j->ki", blk["J"], adjoint)
        adjoints = torch.linalg.solve(H_sum, blk["c"].T).T
        return blk["e"] - torch.einsum("kij,kj->ki", blk["J"], adjoints)

    def compute(
        self, problem: Problem, x: torch.Tensor, state: None, rng: np.random.Generator
    ) -> Estimate:
        value = self.per_client(problem, x)
        return Estimate(
            hypergradient_from_blocks(problem, value), state, CallCounter().snapshot(), {"v": value}
        )
