r"""The HGP authors' code as a testbed estimator: Alg. 2 (Hyper-Gradient Push) as their modules
compute it (``hitachi-rd-cv/pdbo-hgp``, ``lib_task/hyper_gradient_push.py`` and
``module_torch/hgp.py``), on the testbed's per-client problems and graph sequences.

Their driver ``hyper_gradient_push`` (``lib_task/hyper_gradient_push.py:13-102``) builds one
``HyperGradEstimator`` per node (``module_torch/hgp.py:20``) and, after ``init_hypergrads`` (u = w
= the outer gradient in x, v = the outer gradient in lambda, ``hgp.py:90-102``), runs for m = 1..M
(``--depth``): ``init_s`` (w <- u), the Push-Sum weight reset to 1 when ``init_debias_weight``
(lines 70-75), S (``n_push``) Push-Sum steps in which every node sends ``p * w`` and ``p *
weight`` to each out-neighbour (``send_hgp_msgs``/``mix_s``/``step_s``, ``hgp.py:117-157``; ``p``
from the node's gossip object, ``gossip_protocol.py:49-60``), then ``step_m``
(``hgp.py:159-214``): ``v <- v - dumping * J w / weight`` and ``u <- (w - dumping * H w) /
weight``, with ``H w`` and ``J w`` one double-backward of the inner loss (their
``mygrad``/``myjvp``, ``lib_common/torch/autograd.py``). :meth:`AuthorsHGP.run` calls that
driver, unmodified, and reads ``v^(m)`` from its logger (``save_intermediate_hypergradients``).

The translation (nothing of their algorithm changed):

- **the problem**: client i is an object with the attributes their estimator reads (``model``,
  ``innerparameters``, ``hyperparameters``, ``gossip``, ``hyperparameter_module``); its model's
  ``loss(inputs)`` is the problem's inner loss ``g_i(lambda_i, y_i)`` and
  ``eval_metric_sum_from_x_y`` its outer loss ``f_i(lambda_i, y_i)``, on one sample per client
  (their loaders hold one batch, so every product is the exact local one); the inner parameter
  is the client's inner iterate ``y_i`` (the paper's x_i), the hyper-parameter its own block
  ``lambda_i`` of the testbed's x. Their ``Client`` (``module_torch/client.py``) builds models
  from their model zoo and is not used; its ``debias_parameters`` is a no-op here, the iterate
  handed over being already de-biased;
- **the scale**: ``compute_outer_gradients`` divides the outer loss by the number of nodes
  (``hgp.py:66``: their objective is the client mean); the testbed's trajectory is in the
  paper's sum convention ``F = sum_k f_k`` (eq. 2, GlobalGrad), so their ``v`` is multiplied by
  n. ``v^(0)`` is not logged by their driver; it is their ``compute_outer_gradients`` on the
  same clients;
- **the graph**: their driver asks its graph object for ``sample()`` and ``are_connected(i)``
  (``communication_graph.py:21-23``); :class:`ReplayGraph`, a subclass of their
  ``DynamicGraphBase``, replays the testbed's seeded :class:`~testbed.decentralized.graphs.
  GraphSequence` from the state's graph clock (``is_connected(j, i)`` is the testbed's edge
  ``j -> i``), so the claims compute their bounds on the graphs their code gossiped over. Every
  family gossips with their ``GossipNormalize`` (p = 1/|N_out|, Alg. 1) except
  ``static_undirected``, whose Metropolis weights W go to their ``GossipGivenWeights`` (column
  i of W as node i's ``p_vec``, the FixU setting); their own random graph classes are not
  used (see "what cannot run");
- **exact averaging** (``averaging="exact"`` or ``"server"``): their driver on their
  ``GraphFullyConnected`` with ``n_push = 1``: one Push-Sum step on the complete graph is the
  averaging operator Theta itself (p = 1/n from every node), so the claims about eq. (10) with
  exact Theta read their ``step_m`` recursion;
- **the parameters**: ``depth`` = M (``neumann_terms``), ``n_push`` = S (``pushsum_steps``),
  ``dumping`` = eta (``neumann_step_size``; None: 1/L), ``init_debias_weight`` True,
  ``independent-jacobs`` True and ``use_true_expected_edges`` / ``use_true_debias_weights``
  False (the settings of their error experiments, ``config/paper/error_synth_fullbatch.py:
  69-73``), ``seed`` None (their driver would seed the global generators);
- **the inner problem**: their SGP (``lib_task/stochastic_gradient_push.py``) is not run: the
  inner iterate is the testbed's (the exact consensus solution, or the state's per-client
  ``y`` with ``inner_steps=0``), as HGP takes it as given (Alg. 2's input).

**torch shim**: their estimator wraps its products in ``torch.backends.cudnn.flags(enabled=...)``
(``hgp.py:63,166,179,193``), which reads cuDNN's legacy TF32 boolean; torch >= 2.9 refuses that
read once the per-operator precision flags are set, as the testbed's precision policy sets them
(:mod:`testbed.precision`). While their code runs, the adapter sets the legacy boolean to the
policy's value (:func:`legacy_cudnn_flags`; on the CPU cuDNN computes nothing either way) and
re-applies the policy after.

Their ``HyperGradEstimator`` asserts ``0 <= dumping <= 1`` (``hgp.py:23``); a case with a
larger eta is outside what their code accepts and is not measured (``NotMeasurable``).

:meth:`AuthorsHGP.average_step` (one averaging call on arbitrary vectors, which the testbed uses
to measure the operator ``Theta_hat`` their gossip applies: Lemma 2's consensus error) runs
their driver's S-loop (``hyper_gradient_push.py:77-91``) with their message functions on
estimators whose inner parameter is the vector averaged.

What cannot run on current libraries, and what is verified instead: their random graph classes
(``StochasticDirectedGraph``, ``StochasticBidirectedGraph``, ``GraphErdosRenyi``) call
``networkx.from_numpy_matrix`` (``communication_graph.py:71,171,197``), removed in networkx
3.0, and draw edges from numpy's global generator; the adapter hands their gossip the testbed's
graph sequence through their ``DynamicGraphBase`` instead. Their stochastic form (minibatch
Jacobians from their loaders) and SGP are not run.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from testbed_authors_checkout import their_output_silenced
from torch import nn

from testbed.calls import CallCounter
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import HGPRun
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.hgp import is_per_client
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.pushsum import consensus_error
from testbed.decentralized.sgp import counted_inner_run
from testbed.federation.ledger import Ledger
from testbed.precision import precision_record
from testbed.precision import set_precision
from testbed_hgp_authors.authors_code import CODE
from theory_checks.claim import NotMeasurable

#: Their metric name: any string (their model API takes it; the adapter's model ignores it).
METRIC = "loss"


@contextlib.contextmanager
def legacy_cudnn_flags() -> Iterator[None]:
    """cuDNN's legacy TF32 boolean set to the precision policy's value while the block runs
    (their ``torch.backends.cudnn.flags`` reads it), the policy re-applied after."""
    tf32 = bool(precision_record()["tf32"])
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        set_precision(tf32)


class ReplayGraph(CODE.DynamicGraphBase):  # type: ignore[misc, name-defined]
    """Their graph interface (``sample()``, ``is_connected(from, to)``) on the testbed's graph
    sequence from graph step ``start``: the k-th ``sample()`` loads step ``start + k - 1``."""

    def __init__(self, graph: GraphSequence, start: int) -> None:
        super().__init__(graph.n)
        self.sequence, self.next_step = graph, start
        self.edges: np.ndarray | None = None

    def sample(self) -> None:
        self.edges = self.sequence.edges(self.next_step, 1)[0]
        self.next_step += 1

    def is_connected(self, from_node: int, to_node: int) -> torch.Tensor:
        assert self.edges is not None, "sample() first"
        return self.one if self.edges[to_node, from_node] else self.zero


class NoHyperLoss(nn.Module):
    """Their ``hyperparameter_module`` API: ``loss()`` with no graph (no regulariser on
    lambda beyond the problem's own outer loss)."""

    def loss(self) -> torch.Tensor:
        return torch.zeros(())


class ProblemModel(nn.Module):
    """Client i's losses in their model API: ``loss(inputs)`` = ``g_i``,
    ``eval_metric_sum_from_x_y`` = ``f_i``, at ``(x with lambda_i, y_i)``."""

    def __init__(
        self, problem: Any, client: int, x: torch.Tensor, y: torch.Tensor, hyper: nn.Parameter
    ) -> None:
        super().__init__()
        self.problem, self.client_id, self.x = problem, client, x.detach()
        self.y = nn.Parameter(y.detach().clone())
        self.hyper = [hyper]  # not a submodule parameter: their code separates the two

    def outer_point(self) -> torch.Tensor:
        """The testbed's x with this client's block replaced by the hyper-parameter."""
        if not is_per_client(self.problem):
            return self.hyper[0]
        blocks = list(self.x.reshape(self.problem.n_clients, -1))
        blocks[self.client_id] = self.hyper[0]
        return torch.cat(blocks)

    def _rows(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (self.outer_point()[None], self.y[None], torch.tensor([self.client_id]))

    def loss(self, inputs: Any, **unused: Any) -> torch.Tensor:
        return self.problem.inner_loss(*self._rows(), None).sum()

    def eval_metric_sum_from_x_y(self, metric: str, inputs: Any, labels: Any) -> torch.Tensor:
        return self.problem.outer_loss(*self._rows(), None).sum()


class ProblemClient(nn.Module):
    """The attributes their ``HyperGradEstimator`` reads from a client (``module_torch/
    client.py`` has them on their ``Client``), for testbed client i."""

    def __init__(
        self,
        gossip: Any,
        model: nn.Module | None,
        inner: list[nn.Parameter],
        hyper: list[nn.Parameter],
    ) -> None:
        super().__init__()
        self.gossip, self.model = gossip, model
        self.innerparameters = nn.ParameterList(inner)
        self.hyperparameters = nn.ParameterList(hyper)
        self.hyperparameter_module = NoHyperLoss()

    def estimate(self) -> None:
        """Their ``Client.estimate`` only switches off SGP's expected-edge bookkeeping."""

    def debias_parameters(self) -> None:
        """The inner iterate handed over is already de-biased (see the module docstring)."""

    def get_kwargs_loss(self, inputs: Any, idxs: Any) -> dict[str, Any]:
        return {}


class OneBatch:
    """A loader of one batch ``(sample, label, index)`` with a one-sample ``dataset``."""

    def __init__(self, client: int) -> None:
        self.dataset = [client]
        self.batch = (torch.tensor([float(client)]), torch.tensor([0]), torch.tensor([client]))

    def __iter__(self) -> Any:
        return iter([self.batch])


@dataclasses.dataclass(frozen=True)
class AuthorsHGP(HyperGradientPush):
    """HGP (Alg. 2) as the authors' ``hyper_gradient_push`` computes it; see the module
    docstring. The fields are :class:`~testbed.decentralized.hgp.HyperGradientPush`'s; the
    deterministic form only (``batch_size`` None, ``keep_weights`` and ``shared_sample``
    False: their ``init_debias_weight`` True and ``independent-jacobs`` True)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size is not None or self.keep_weights or self.shared_sample:
            raise ValueError(
                "the authors'-HGP adapter runs the deterministic form only "
                "(batch_size None, keep_weights and shared_sample False)"
            )

    # ------------------------------------------------------------------ their objects
    def exact(self) -> bool:
        """Exact averaging: their gossip on their complete graph, one step per call."""
        return not self.averaging_rule.gossips

    def their_graph(self, graph: GraphSequence, time: int) -> Any:
        if self.exact():
            return CODE.GraphFullyConnected(graph.n)
        return ReplayGraph(graph, time)

    def their_steps(self) -> int:
        return 1 if self.exact() else self.pushsum_steps

    def gossip(self, graph: GraphSequence, client: int) -> Any:
        """Their gossip object of node ``client``: ``GossipGivenWeights`` with column i of the
        Metropolis W on the static family, ``GossipNormalize`` (1/|N_out|) otherwise."""
        if graph.family == "static_undirected" and not self.exact():
            return CODE.GossipGivenWeights(graph.n, client, graph.static_weights()[:, client])
        return CODE.GossipNormalize(graph.n, client)

    def estimators(self, clients: list[ProblemClient], eta: float) -> list[Any]:
        return [
            CODE.HyperGradEstimator(client, OneBatch(i), OneBatch(i), eta, True)
            for i, client in enumerate(clients)
        ]

    # ------------------------------------------------------------------ the algorithm
    def check_step(self, eta: float) -> None:
        if not 0.0 <= eta <= 1.0:
            raise NotMeasurable(
                f"eta = {eta:.3g}: their HyperGradEstimator asserts 0 <= "
                "dumping <= 1 (module_torch/hgp.py:23)"
            )

    def run(
        self,
        problem: Any,
        x: torch.Tensor,
        state: HGPState,
        rng: np.random.Generator,
        replicas: int = 1,
        track_consensus: bool = True,
    ) -> HGPRun:
        if replicas != 1:
            raise ValueError("the authors'-HGP adapter runs one replica")
        n, M = problem.n_clients, self.neumann_terms
        eta = self.step_size(problem)
        self.check_step(eta)
        counter = CallCounter()
        graph = self.graph(n)
        inner = counted_inner_run(self.inner, problem, x, state, graph, counter, rng)
        y, time = inner.y, inner.time
        clients = []
        for i in range(n):
            own = x.reshape(n, -1)[i] if is_per_client(problem) else x
            hyper = nn.Parameter(own.detach().clone())
            model = ProblemModel(problem, i, x, y[i], hyper)
            clients.append(ProblemClient(self.gossip(graph, i), model, [model.y], [hyper]))
        keys = CODE.KeysOptionHGP
        option_hgp = {
            keys.DEPTH: M,
            keys.DUMPING: eta,
            keys.N_PUSH: self.their_steps(),
            keys.USE_TRUE_EXPECTED_EDGES: False,
            keys.USE_TRUE_DEBIAS_WEIGHTS: False,
            keys.INIT_DEBIAS_WEIGHT: True,
            keys.INDEPENDENT_JACOBS: True,
        }
        with their_output_silenced(), legacy_cudnn_flags():
            first = [
                e.compute_outer_gradients(METRIC)[1][0].detach().clone()
                for e in self.estimators(clients, eta)
            ]
            _, _, steps = CODE.hyper_gradient_push(
                clients=clients,
                graph=self.their_graph(graph, time),
                loaders_train=[OneBatch(i) for i in range(n)],
                loaders_valid=[OneBatch(i) for i in range(n)],
                option_eval_metric={CODE.KeysOptionEval.NAME: METRIC},
                n_steps=0,
                batch_sizes=[1] * n,
                lrs=[0.0] * n,
                option_train_significant={},
                option_hgp=option_hgp,
                seed=None,
                option_hgp_insignificant={CODE.KeysOptionHGPInsig.NAMES_METRIC_LOG: []},
                save_intermediate_hypergradients=True,
            )
        rows = [torch.stack(first)] + [torch.stack([node[0] for node in step]) for step in steps]
        trajectory = (n * torch.stack(rows))[:, None].detach()
        errors: list[float] = []
        S = self.their_steps()
        if self.averaging_rule.gossips and track_consensus:
            errors = [
                consensus_error(self.averaging_operator(graph, time + m * S)) for m in range(M)
            ]
        end = time + (0 if self.exact() else M * S)
        return HGPRun(
            trajectory, errors, HGPState(y, inner.omega, end), y, None, None, counter.snapshot()
        )

    def average_step(
        self,
        u: torch.Tensor,
        w: torch.Tensor,
        time: int,
        graph: GraphSequence,
        gledger: GraphLedger | None,
        sledger: Ledger | None,
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """One averaging call of their gossip on ``u (R, n, d)``: their driver's S-loop with
        their message functions (Push-Sum weights reset to 1, as ``init_debias_weight``)."""
        R, n, d = u.shape
        out = torch.empty_like(u)
        for r in range(R):
            clients = [
                ProblemClient(
                    self.gossip(graph, i), None, [nn.Parameter(torch.zeros(d, dtype=u.dtype))], []
                )
                for i in range(n)
            ]
            estimators = self.estimators(clients, 0.0)
            with torch.no_grad():
                for i, estimator in enumerate(estimators):
                    estimator.us[0].copy_(u[r, i])
                    estimator.init_s()
                    estimator.client.gossip.initialize_weight()
                    estimator.client.gossip.weight_updated = torch.zeros_like(
                        estimator.client.gossip.weight
                    )
            their_graph = self.their_graph(graph, time)
            for _ in range(self.their_steps()):
                their_graph.sample()
                for sender in estimators:
                    messages = sender.get_hgp_msg_generator(
                        their_graph.are_connected(sender.idx_node)
                    )
                    for receiver, message in zip(estimators, messages, strict=True):
                        receiver.mix_s(message)
                for estimator in estimators:
                    estimator.step_s()
            for i, estimator in enumerate(estimators):
                out[r, i] = (estimator.ws[0] / estimator.client.gossip.weight).detach()
        return out, w, time + (0 if self.exact() else self.their_steps())


__all__ = ["AuthorsHGP", "ProblemClient", "ProblemModel", "ReplayGraph"]
