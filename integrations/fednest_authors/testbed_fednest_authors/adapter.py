r"""The authors' FedNest code as a testbed estimator: FedIHGP and FedOut as their modules
compute them (``ucr-optml/FedNest``, ``core/ClientManage_hr.py`` and ``core/Client_hr.py``).

Their hyper-representation code runs FedOut (``ClientManageHR.fed_out``, lines 143-173) as:

1. ``p = self.fedIHGP(client_locals)`` (lines 72-104): each client's ``grad_d_out_d_y``
   averaged by ``FedAvgP``; then, for ``hvp_method = "global_batch"`` (their default), ``N =
   --neumann`` rounds in which every client returns ``client.hvp_iter(p, hlr)``
   (``Client_hr.py:104-117``) and the server averages ``p_locals``;
2. ``hg_glob = FedAvgP([client.hyper_grad(p) ...])``: ``hyper_grad`` is
   ``grad_x f_i - hlr * grad^2_xy g_i p`` (``Client_hr.py:140-154``);
3. ``outer_tau`` calls of ``client.hyper_svrg_update(hg_glob)`` per client
   (``x_{i,nu+1} = x_{i,nu} - hlr (grad_x f_i(x_{i,nu}) - grad_x f_i(x) + hg_glob)``, lines
   162-172) and ``FedAvgP`` of the clients' displacements ``x - x_{i,tau}``.

The adapter runs those calls of theirs, in that order, on clients of their own ``Client`` class:
:meth:`AuthorsFedNest.library_hypergradient` is steps 1-2 (FedIHGP and the hypergradient
round, the estimate ``hg_glob``) and :meth:`AuthorsFedNest.fed_out` steps 1-3 (their
``fed_out`` body with the clients built here, since ``fed_out`` builds its own clients with
their cross-entropy losses).

The translation (nothing of their algorithm changed):

- **the network**: a module with two parameters, ``body`` (the outer variable x: not named
  "header", so their code treats it as the hyper-parameter) and ``header`` (the inner variable
  y); its forward returns the rows ``[x, y, client id]`` for a batch of client ids;
- **the data**: client ``i``'s training and validation splits (``dict_users[i]``,
  ``dict_users[-i - 1]``) hold one sample, its id, and ``--local_bs 1``: every loader is one
  batch, so their per-batch means are the full local objectives (exact oracles);
- **the losses**: their ``Client.__init__`` sets ``self.loss_func`` (the inner loss, called as
  ``loss_func(logits, labels, header_params)``) and ``self.val_loss`` (the outer loss,
  ``val_loss(logits, labels)``); the adapter sets these two attributes of each client it builds
  to the problem's ``g_i`` and ``f_i`` evaluated at the rows the network returned (their
  hyper-representation experiment puts cross-entropy there);
- **the parameters**: ``--neumann N`` = ``neumann_terms``; ``--hlr`` = ``neumann_step_size``
  (their Neumann scale, also their outer step; ``None``: ``1 / l_{g,1}`` with ``l_{g,1} =
  max_i lambda_max(H_i)``); ``--outer_tau`` = ``outer_local_steps``; ``--hvp_method
  global_batch``; ``--gpu -1``; the rest their parser's defaults.

Full participation: every client is in ``client_locals``. ``inner_steps`` must be 0 (the state's
``y`` is used: their FedInn is not run) or ``None`` (the exact ``y*(x)``).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import torch
from testbed_authors_checkout import parsed_options
from testbed_authors_checkout import their_output_silenced

from problems import Problem
from testbed.library_adapter import GlobalObjectives
from testbed.library_adapter import LibraryEstimator
from testbed_fednest_authors.authors_code import CODE


class ProblemNet(torch.nn.Module):
    """``body`` = x, ``header`` = y; forward(ids) = the rows ``[x, y, id]`` of a batch."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        super().__init__()
        self.body = torch.nn.Parameter(x.detach().clone())
        self.header = torch.nn.Parameter(y.detach().clone())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        return torch.cat(
            [
                self.body.expand(n, -1),
                self.header.expand(n, -1),
                ids.reshape(n, 1).to(self.body.dtype),
            ],
            dim=1,
        )


def split_rows(
    problem: Problem, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x rows, y rows, client ids)`` of the network's output."""
    dx, dy = problem.dim_x, problem.dim_y
    return rows[:, :dx], rows[:, dx : dx + dy], rows[:, dx + dy].round().long()


def authors_arguments(neumann: int, hlr: float, outer_tau: int) -> argparse.Namespace:
    """Their ``args_parser()`` with the adapter's settings on its command line."""
    return parsed_options(
        CODE.args_parser,
        "main_hr.py",
        hvp_method="global_batch",
        neumann=neumann,
        hlr=float(hlr),
        outer_tau=outer_tau,
    )


def default_hlr(problem: Problem, step: float | None) -> float:
    """``step``, or ``1 / l_{g,1}`` with ``l_{g,1} = max_i lambda_max(H_i)``."""
    if step is not None:
        return float(step)
    return 1.0 / float(problem.constants().L_clients)  # type: ignore[attr-defined]


@dataclasses.dataclass(frozen=True)
class AuthorsFedNest(LibraryEstimator):
    """FedNest's hypergradient (FedIHGP + the hypergradient round) and FedOut as the authors'
    modules compute them.

    Args:
        neumann_terms: N, their ``--neumann`` (Neumann rounds of FedIHGP).
        neumann_step_size: their ``--hlr`` (``None``: 1/l_{g,1}).
        outer_local_steps: their ``--outer_tau`` (FedOut's SVRG steps per client).
        inner_steps: 0 (the state's y) or ``None`` (y*(x)); their FedInn is not run.
    """

    inner_steps: int | None = 0
    neumann_terms: int = 5
    neumann_step_size: float | None = None
    outer_local_steps: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_given_inner_point("the authors' FedInn")
        self.require_counts("neumann_terms", "outer_local_steps")

    def clients(
        self, problem: Problem, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[Any, list[Any], argparse.Namespace, GlobalObjectives]:
        """Their ``ClientManageHR`` and one of their ``Client`` per testbed client, full
        participation, with the problem's losses in the two loss attributes."""
        hlr = default_hlr(problem, self.neumann_step_size)
        args = authors_arguments(self.neumann_terms, hlr, self.outer_local_steps)
        net = ProblemNet(x, y)
        ids = range(problem.n_clients)
        dataset = [(torch.tensor([float(i)]), torch.tensor(0)) for i in ids]
        dict_users: dict[int, list[int]] = {}
        for i in ids:
            dict_users[i] = dict_users[-i - 1] = [i]
        hyper_param = [net.body]
        objectives = GlobalObjectives(problem)

        def inner_loss(logits: torch.Tensor, labels: Any, params: Any = None) -> torch.Tensor:
            xs, ys, who = split_rows(problem, logits)
            objectives.evaluations["g"] += 1
            return problem.inner_loss(xs, ys, who, None).mean()

        def outer_loss(logits: torch.Tensor, labels: Any) -> torch.Tensor:
            xs, ys, who = split_rows(problem, logits)
            objectives.evaluations["f"] += 1
            return problem.outer_loss(xs, ys, who, None).mean()

        with their_output_silenced():
            manager = CODE.ClientManageHR(args, net, list(ids), dataset, dict_users, hyper_param)
            clients = []
            for i in ids:
                client = CODE.Client(args, i, net, dataset, dict_users, hyper_param)
                client.loss_func, client.val_loss = inner_loss, outer_loss
                clients.append(client)
        return manager, clients, args, objectives

    def fedihgp_round(
        self, problem: Problem, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, list[Any], Any, argparse.Namespace, GlobalObjectives]:
        """``fed_out`` lines 153-160: their FedIHGP, then their hypergradient round."""
        manager, clients, args, objectives = self.clients(problem, x, y)
        with their_output_silenced():
            p = manager.fedIHGP(clients)
            hg = CODE.FedAvgP([client.hyper_grad(p.clone()) for client in clients], args)
        return hg.detach(), p.detach(), clients, manager, args, objectives

    def library_hypergradient(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        hg, p, *_, theirs = self.fedihgp_round(problem, x, y0)
        objectives.evaluations.update(theirs.evaluations)
        return hg, y0, {"p": p, "hlr": default_hlr(problem, self.neumann_step_size)}

    def fed_out(
        self, problem: Problem, x: torch.Tensor, y: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """``fed_out`` lines 153-171 on these clients: ``p``, ``hg_glob``, and ``x^+ = x -
        FedAvgP(displacements)`` after ``outer_tau`` SVRG steps per client."""
        hg, p, clients, _, args, _ = self.fedihgp_round(problem, x, y)
        with their_output_silenced():
            displacements = []
            for client in clients:
                for _ in range(args.outer_tau):
                    h = client.hyper_svrg_update(hg)
                displacements.append(h)
            moved = CODE.FedAvgP(displacements, args)
        return {"p": p, "h": hg, "x_plus": (x - moved).detach()}


__all__ = ["AuthorsFedNest", "ProblemNet", "authors_arguments", "split_rows"]
