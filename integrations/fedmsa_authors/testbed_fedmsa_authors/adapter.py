r"""The FedMSA authors' bilevel code as a testbed estimator: FedMSA's BLO maps (paper eq. (10)),
global step (5) and local recursion (6)-(7) as their modules compute them (``ucr-optml/FedMSA``,
``core/Client.py``, ``core/BLOClient.py``, ``core/ClientManage_blo.py``).

Their BLO driver (``main_imbalance_blo.py:90-125``) runs, per round, ``ClientManage.fed_globhq``
(``core/ClientManage_blo.py:170-243``: every client's ``p_func(v)`` and ``s_func(v)``, the
momentum correction ``h_i = p_i + (1 - rho)(h_last - p_last_i)`` and likewise q, then their
averages) and ``ClientManage.fed_locals`` (lines 245-291: sampled clients run
``BLOClient.update_local(h, q, v)``, ``core/BLOClient.py:23-69``, K = ``--inner_ep`` SARAH steps
``x <- x - alpha h_k``, ``w <- w - beta q_k[0]``, ``v <- v - beta q_k[1]`` with ``h_k = p(z_k)
+ h_{k-1} - p(z_{k-1})``, and the server averages). The client maps (``core/Client.py``):

- ``s_func(v)`` (lines 121-135) = ``[grad_w g_i, grad^2_w g_i v - grad_w f_i]`` (eq. (10a));
- ``p_func(v)`` (lines 137-140) = ``hyper_grad(v)`` (lines 181-196) = ``direct - J_i v`` with
  ``J_i v = grad_x <grad_w g_i, v>``, where ``direct = grad_d_out_d_x(create_graph=False)``
  (lines 159-179) sits in a bare ``try``/``except`` that drops it on any error.

:meth:`AuthorsFedMSA.maps` and :meth:`AuthorsFedMSA.local_update` call those methods,
unmodified, on clients of their own ``BLOClient`` class;
:meth:`AuthorsFedMSA.library_hypergradient` is the BLO fixed point's direction ``mean_i
p_func_i(v*)`` at ``w = y*(x)``, ``v* = H_bar^{-1} grad_w f_bar`` (where ``mean_i s_func_i =
0``), which FedMSA's x-update follows.

The translation (nothing of their algorithm changed):

- **the network**: a module with one parameter, the inner variable ``w`` (the testbed's y: their
  ``gather_flat_weight(net.state_dict())``); its forward returns the rows ``[w, client id]`` for
  a batch of client ids;
- **the hyper-parameters**: ``hyper_param = {"x": Parameter(x)}`` (their imbalance experiment
  has ``{"dy", "ly", "wy"}``, ``main_imbalance_blo.py``; only entries with ``requires_grad``
  are x, ``core/function.py:54-67``);
- **the data**: client ``i``'s training and validation splits (``dict_users[i]``,
  ``dict_users[-i - 1]``) hold one sample, its id, with ``--local_bs 1``: every loader is one
  batch, so their per-batch means are the full local objectives (exact oracles);
- **the losses**: their ``Client.__init__`` sets ``self.loss_func`` (the inner loss, called as
  ``loss_func(logits, labels)``) and ``self.val_loss`` (the outer loss, called as
  ``val_loss(logits, labels)`` or with ``hyper_param=``); the adapter sets these two
  attributes of each client it builds to the problem's ``g_i`` and ``f_i`` at the client's
  current ``hyper_param["x"]`` and the rows the network returned (their experiment puts the
  loss-adjusted and the weighted cross-entropy there);
- **the parameters**: ``--alpha``, ``--beta``, ``--inner_ep`` (K), ``--momentum_rho`` from the
  claim; ``--gpu -1``; the rest their parser's defaults.

:meth:`AuthorsFedMSA.global_step` runs their ``ClientManage.fed_globhq`` (the momentum step (5))
from a previous round's ``(h, q, p_locals, s_locals)``, over every client (their driver's
``fed_globhq`` runs over ``client_idx``, all clients). ``fed_globhq`` builds its clients itself
(``core/ClientManage_blo.py:174-183``, ``Client(...)`` from that module's globals): for the
duration of the call only, that module's name ``Client`` is a subclass of their ``Client`` whose
``__init__`` runs theirs and then sets the two loss attributes as above, and is restored after.

Not run here: ``fed_globhq``'s first round (``last_s`` empty: v initialised with FedNest's
``fedIHGP``, the FedNest authors' code that ``fednest-authors`` verifies) and the averaging of
``fed_locals``; the claims decide the maps both use, the momentum step and the local recursion.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import sys
from collections.abc import Iterator
from typing import Any

import torch
from testbed_authors_checkout import parsed_options
from testbed_authors_checkout import their_output_silenced
from torch import nn

from problems import Problem
from testbed.library_adapter import GlobalObjectives
from testbed.library_adapter import LibraryEstimator
from testbed.library_adapter import dense_derivatives
from testbed_fedmsa_authors.authors_code import CODE


class ProblemNet(nn.Module):
    """``w`` = the inner variable; forward(ids) = the rows ``[w, id]`` of a batch."""

    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.w = nn.Parameter(w.detach().clone())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        return torch.cat([self.w.expand(n, -1), ids.reshape(n, 1).to(self.w.dtype)], dim=1)


def authors_arguments(
    alpha: float, beta: float, local_steps: int, rho: float, n_clients: int
) -> argparse.Namespace:
    """Their ``args_parser()`` with the adapter's settings on its command line."""
    return parsed_options(
        CODE.args_parser,
        "main_imbalance_blo.py",
        alpha=float(alpha),
        beta=float(beta),
        inner_ep=local_steps,
        momentum_rho=float(rho),
        num_users=n_clients,
    )


@dataclasses.dataclass(frozen=True)
class AuthorsFedMSA(LibraryEstimator):
    """FedMSA's BLO maps and steps as the authors' modules compute them.

    Args:
        outer_step_size: alpha, their ``--alpha`` (step on x).
        inner_step_size: beta, their ``--beta`` (step on w and v).
        local_steps: K, their ``--inner_ep`` (SARAH steps per client).
        momentum: rho, their ``--momentum_rho``.
        inner_steps: None (the fixed point y*(x), v*) or 0 (the state's y, v* at it).
    """

    inner_steps: int | None = None
    inner_step_size: float | None = 0.1
    outer_step_size: float = 0.05
    local_steps: int = 3
    momentum: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_given_inner_point("the authors' inner training")
        self.require_counts("local_steps")

    # ------------------------------------------------------------------ their objects
    def arguments(self, problem: Problem) -> argparse.Namespace:
        return authors_arguments(
            self.outer_step_size,
            float(self.inner_step_size or 0.1),
            self.local_steps,
            self.momentum,
            problem.n_clients,
        )

    def setting(
        self, problem: Problem, x: torch.Tensor, w: torch.Tensor
    ) -> tuple[
        argparse.Namespace, nn.Module, list[Any], dict[int, list[int]], dict[str, nn.Parameter]
    ]:
        """Their ``args``, the network, the dataset, ``dict_users`` and ``hyper_param``."""
        ids = range(problem.n_clients)
        dataset = [(torch.tensor([float(i)]), torch.tensor(0)) for i in ids]
        dict_users: dict[int, list[int]] = {}
        for i in ids:
            dict_users[i] = dict_users[-i - 1] = [i]
        hyper_param = {"x": nn.Parameter(x.detach().clone())}
        return self.arguments(problem), ProblemNet(w), dataset, dict_users, hyper_param

    def with_losses(self, problem: Problem, client: Any) -> Any:
        """The client with the problem's ``g_i`` and ``f_i`` in its two loss attributes, read
        at its current ``hyper_param["x"]``."""
        dy = problem.dim_y

        def rows(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            n = logits.shape[0]
            return (
                client.hyper_param["x"].expand(n, -1),
                logits[:, :dy],
                logits[:, dy].round().long(),
            )

        def inner_loss(logits: torch.Tensor, labels: Any) -> torch.Tensor:
            return problem.inner_loss(*rows(logits), None).mean()

        def outer_loss(logits: torch.Tensor, labels: Any, hyper_param: Any = None) -> torch.Tensor:
            return problem.outer_loss(*rows(logits), None).mean()

        client.loss_func, client.val_loss = inner_loss, outer_loss
        return client

    def clients(
        self, problem: Problem, x: torch.Tensor, w: torch.Tensor, ids: list[int] | None = None
    ) -> tuple[list[Any], argparse.Namespace]:
        """Their ``BLOClient`` per client id (all by default), built as ``fed_locals`` builds
        them (a deep copy of the network each)."""
        args, net, dataset, dict_users, hyper_param = self.setting(problem, x, w)
        chosen = list(range(problem.n_clients)) if ids is None else ids
        with their_output_silenced():
            clients = [
                self.with_losses(
                    problem,
                    CODE.BLOClient(args, i, copy.deepcopy(net), dataset, dict_users, hyper_param),
                )
                for i in chosen
            ]
        return clients, args

    # ------------------------------------------------------------------ their calls
    def maps(
        self, problem: Problem, x: torch.Tensor, w: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every client's ``p_func(v)`` and ``s_func(v)`` at ``(x, w)``: ``(p (n, dx), s_w (n,
        dy), s_v (n, dy))``."""
        clients, _ = self.clients(problem, x, w)
        with their_output_silenced():
            p = [client.p_func(v.clone()).detach() for client in clients]
            s = [[part.detach() for part in client.s_func(v.clone())] for client in clients]
        return (
            torch.stack(p),
            torch.stack([pair[0] for pair in s]),
            torch.stack([pair[1] for pair in s]),
        )

    def local_update(
        self,
        problem: Problem,
        x: torch.Tensor,
        w: torch.Tensor,
        v: torch.Tensor,
        h: torch.Tensor,
        q: list[torch.Tensor],
        client: int,
    ) -> dict[str, torch.Tensor]:
        """Their ``BLOClient.update_local(h, q, v)`` for ``client``: ``x_K``, ``w_K``, ``v_K``."""
        (one,), _ = self.clients(problem, x, w, [client])
        with their_output_silenced():
            x_K, (w_K, v_K) = one.update_local(h.clone(), [part.clone() for part in q], v.clone())
        return {"x": x_K.detach(), "w": w_K.detach(), "v": v_K.detach()}

    @contextlib.contextmanager
    def their_manager_builds_problem_clients(self, problem: Problem) -> Iterator[None]:
        """Their ``core.ClientManage_blo.Client`` a subclass setting the problem's losses, for
        the block only (see the module docstring)."""
        module = sys.modules[CODE.ClientManage.__module__]
        theirs, adapter = module.Client, self

        class ProblemClient(theirs):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                adapter.with_losses(problem, self)

        module.Client = ProblemClient
        try:
            yield
        finally:
            module.Client = theirs

    def global_step(
        self,
        problem: Problem,
        x: torch.Tensor,
        w: torch.Tensor,
        v: torch.Tensor,
        last: dict[str, Any],
    ) -> dict[str, torch.Tensor]:
        """Their ``fed_globhq(rho, last_h, last_q, last_p, last_s, v)`` at ``(x, w)`` over every
        client, ``last`` = ``{"h", "q" (pair), "p" (per client), "s" (per client pairs)}``:
        ``{"h", "q_w", "q_v"}`` (their ``h_glob`` and ``q_glob``)."""
        args, net, dataset, dict_users, hyper_param = self.setting(problem, x, w)
        with their_output_silenced():
            manager = CODE.ClientManage(
                args, net, list(range(problem.n_clients)), dataset, dict_users, hyper_param
            )
            with self.their_manager_builds_problem_clients(problem):
                h, q, *_ = manager.fed_globhq(
                    self.momentum,
                    last["h"].clone(),
                    [part.clone() for part in last["q"]],
                    [p.clone() for p in last["p"]],
                    [[part.clone() for part in s] for s in last["s"]],
                    v.clone(),
                )
        return {"h": h.detach(), "q_w": q[0].detach(), "q_v": q[1].detach()}

    def library_hypergradient(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """``mean_i p_func_i(v*)`` at ``(x, y0)``, ``v* = H_bar^{-1} grad_w f_bar`` (the v of the
        fixed point ``mean_i s_func_i = 0``)."""
        d = dense_derivatives(problem, x, y0)
        v = torch.linalg.solve(d.H, d.grad_y_f)
        p, _, _ = self.maps(problem, x, y0, v)
        return p.mean(0), y0, {"v": v}


__all__ = ["AuthorsFedMSA", "ProblemNet", "authors_arguments"]
