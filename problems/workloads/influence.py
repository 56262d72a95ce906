"""HGP's influence problem on real data (Terashita & Hara, sec. 5.2, eq. 12).

Per-sample loss weights ``g_i(y, lambda_i) = 1/N_i sum_k lambda_ik ell(xi_ik, y) + wd/2
||y||^2`` evaluated at ``lambda = 1``, ``f_i`` = client i's validation cross entropy, ``F =
sum_i f_i`` (the global validation loss). ``-<d_lambda F>_ik`` is the linear prediction of
``F(lambda - e_ik) - F(lambda)``, the change when sample k of client i is dropped (its weight set
to 0; with the mean-reduced g_i this keeps the denominator N_i, which Sec. 5.2 does not
discuss). The letters and the per-client interface are those of
:mod:`problems.workloads.decentralized`.

Exact answers for the convex case (``model="logreg"``, softmax regression with ``wd > 0``):
``y*(x)`` by damped Newton on ``sum_i g_i`` in the working dtype, GlobalGrad
``<d_lambda F>_i = e_i - J_i (sum_k H_k)^{-1} sum_k c_k`` (Sec. 3.3) by one linear solve.

What the influence protocol (``testbed_app.experiments.influence``) needs of the problem:
Hessian-vector products of ``G = sum_i g_i`` (:meth:`InfluenceProblem.total_hvp`) for the
eigenvalue estimates and descents of :mod:`problems.workloads.spectral`, and Hessian damping
(:meth:`InfluenceProblem.with_damping`: ``delta I`` added to every ``grad^2_y g_i`` and nothing
else, for an averaged Hessian that is indefinite at a network's trained model).
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F  # noqa: N812

from problems._base import Batch
from problems._base import ProblemError
from problems.logistic import NEWTON_FINAL_STEPS
from problems.logistic import NEWTON_MAX_ITERATIONS
from problems.logistic import NEWTON_STEP_RTOL
from problems.workloads._client_data import ClientSamples
from problems.workloads.classifiers import Classifier
from problems.workloads.decentralized import PerClientClassification
from problems.workloads.decentralized import own_blocks
from problems.workloads.decentralized import replicated


class InfluenceProblem(PerClientClassification):
    """Per-sample loss weights (eq. 12); see the module docstring.

    Args:
        net: the model (``"logreg"`` for the convex case, a CNN otherwise).
        train: the clients' training samples (their weights are the hyperparameters).
        validation: the clients' validation samples (``f_i``).
        weight_decay: ``wd`` of g_i (the paper's CNN: 0.001); ``> 0`` makes softmax
            regression strongly convex (its exact solve and influence are then well defined).
    """

    def __init__(
        self,
        net: Classifier,
        train: ClientSamples,
        validation: ClientSamples,
        *,
        weight_decay: float = 1e-3,
        seed: int = 0,
        hessian_damping: float = 0.0,
    ) -> None:
        super().__init__(
            net,
            train,
            validation,
            dim_y=net.n_params,
            dim_hyper=int(train.labels.shape[1]),
            weight_decay=weight_decay,
            seed=seed,
            name="hgp.influence",
        )
        if not (math.isfinite(hessian_damping) and hessian_damping >= 0.0):
            raise ProblemError(
                f"{self.name}: hessian_damping must be finite and >= 0, got {hessian_damping}"
            )
        self.hessian_damping = float(hessian_damping)

    # ----------------------------------------------------------------- damping
    def with_damping(self, delta: float) -> InfluenceProblem:
        """This problem with ``delta I`` added to every client's Hessian ``grad^2_y g_i`` (so
        to the averaged Hessian ``(1/n) sum_i H_i`` too), and nothing else changed.

        The term added to ``g_i`` is ``delta/2 ||y - stop_gradient(y)||^2``: its value and its
        gradient are exactly 0 (``y - y.detach()`` is 0), its Hessian is ``delta I``. So
        training, retraining, ``F`` and every gradient are those of the undamped problem; only
        Hessian-vector products (what HGP's Neumann series uses) see ``H_i + delta I``; the mixed
        Jacobian ``J_i`` is unchanged (the term does not depend on lambda).
        """
        if not (math.isfinite(delta) and delta >= 0.0):
            raise ProblemError(f"{self.name}: damping must be finite and >= 0, got {delta}")
        damped = copy.copy(self)
        damped.hessian_damping = float(delta)
        return damped

    @property
    def id(self) -> str:
        base = super().id
        return base if self.hessian_damping == 0.0 else f"{base}.damp{self.hessian_damping:g}"

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i`` of eq. 12, plus the zero-valued damping term of :meth:`with_damping`."""
        out = super().inner_loss(x, y, clients, batch)
        if self.hessian_damping == 0.0:
            return out
        shift = y - y.detach()
        return out + 0.5 * self.hessian_damping * (shift * shift).sum(-1)

    def total_hvp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``grad^2_y G(y) v`` for ``G = sum_i g_i`` at one shared model (damping included), by
        reverse-over-reverse differentiation (about twice a gradient's cost)."""
        y = y.detach().clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(self.total_inner(x.detach(), y), (y,), create_graph=True)
        (out,) = torch.autograd.grad((grad * v.to(y.dtype).detach()).sum(), (y,))
        return out.detach()

    def total_grad(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``grad_y G(y)`` at one shared model."""
        x = x.detach()
        return torch.func.grad(lambda w: self.total_inner(x, w))(y.detach()).detach()

    def sample_losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        return F.cross_entropy(self.net.apply(y, inputs), labels, reduction="none")

    def sample_weights(
        self, lam: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor | None
    ) -> torch.Tensor:
        return weights * (lam if positions is None else lam.gather(1, positions))

    @property
    def sample_mask(self) -> torch.Tensor:
        """``(n, N)`` booleans: True where ``lambda_ik`` weighs a real sample (padding is inert:
        its weight in g_i is 0, so its influence is exactly 0)."""
        return self.train.weights > 0

    def initial_hyper(self) -> torch.Tensor:
        """``lambda = 1`` on real samples (the paper's evaluation point), 0 on padding."""
        return self.sample_mask.to(self.dtype).reshape(-1)

    # ----------------------------------------------------------------- exact answers
    def _check_convex(self) -> None:
        if not self.net.convex or self.weight_decay <= 0.0:
            raise ProblemError(
                f"{self.name}: exact answers need the convex model (logreg) "
                f"with weight_decay > 0; this is {self.net.name!r} with "
                f"weight_decay={self.weight_decay}"
            )

    def inner_hessian(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``grad^2_y sum_i g_i`` of softmax regression in closed form, ``(dim_y, dim_y)``.

        With ``a~ = [a; 1]``, ``p = softmax(W a + b)`` and per-sample weights ``w_ik`` (the
        ``lambda_ik / N_i`` of eq. 12), the Hessian of the weighted cross entropy in the
        parameters ``(W, b)`` is ``sum w (diag(p) - p p^T) (x) a~ a~^T``, plus ``n wd I`` (each
        g_i carries ``wd/2 ||y||^2``). Built on the class-major augmented layout, then permuted
        to the flat order ``[W (row-major); b]``; a test checks it against autodiff. It is the
        undamped Hessian (the exact answers ignore :meth:`with_damping`).
        """
        self._check_convex()
        n, classes = self.n_clients, int(self.net.n_params // (self.train.inputs[0, 0].numel() + 1))
        weights = self.sample_weights(
            self.hyper_blocks(replicated(x, n), self.every_client()), self.train.weights, None
        ).reshape(-1)
        inputs = self.train.inputs.reshape(weights.shape[0], -1)
        features = torch.cat([inputs, torch.ones_like(inputs[:, :1])], 1)  # (K, D + 1)
        probs = torch.softmax(
            self.net.apply(y, self.train.inputs.reshape(-1, *self.train.inputs.shape[2:])), -1
        )  # (K, C)
        dim = features.shape[1]
        diagonal = torch.einsum("k,kc,kd,ke->cde", weights, probs, features, features)
        outer = (probs[:, :, None] * features[:, None, :]).reshape(-1, classes * dim)
        hess = -(outer.T * weights) @ outer
        blocks = hess.reshape(classes, dim, classes, dim)
        index = torch.arange(classes, device=self.device)
        blocks[index, :, index, :] += diagonal
        order = torch.cat(
            [
                (index[:, None] * dim + torch.arange(dim - 1, device=self.device)).reshape(-1),
                index * dim + dim - 1,
            ]
        )
        flat = blocks.reshape(classes * dim, classes * dim)[order][:, order]
        return flat + n * self.weight_decay * torch.eye(
            self.dim_y, dtype=self.dtype, device=self.device
        )

    def exact_inner_solution(
        self, x: torch.Tensor, start: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``argmin_y sum_i g_i`` by damped Newton (Armijo) to round-off; convex model only.

        Stopping rule and iteration cap are those of :mod:`problems.logistic` (quadratic
        convergence: a relative step of 1e-8, then two full steps, reaches round-off).
        """
        self._check_convex()
        x = x.detach()
        y = (
            torch.zeros(self.dim_y, dtype=self.dtype, device=self.device)
            if start is None
            else start.detach().clone()
        )

        def total(v: torch.Tensor) -> torch.Tensor:
            return self.total_inner(x, v)

        def newton_step(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            g = torch.func.grad(total)(v)
            return g, torch.linalg.solve(self.inner_hessian(x, v), g)

        for _ in range(NEWTON_MAX_ITERATIONS):
            g, step = newton_step(y)
            if float(step.norm()) <= NEWTON_STEP_RTOL * (1.0 + float(y.norm())):
                y = y - step
                for _ in range(NEWTON_FINAL_STEPS):
                    y = y - newton_step(y)[1]
                return y.detach()
            t, f0, slope = 1.0, float(total(y)), float(g @ step)
            # Armijo backtracking, halving; 60 halvings reach t ~ 1e-18 (below any useful step).
            for _ in range(60):
                if float(total(y - t * step)) <= f0 - 0.25 * t * slope:
                    break
                t *= 0.5
            y = y - t * step
        raise ProblemError(
            f"{self.name}: Newton did not converge in {NEWTON_MAX_ITERATIONS} iterations"
        )

    def exact_global_grad(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        """``(n, N)`` GlobalGrad ``<d_lambda F>_i = e_i - J_i (sum_k H_k)^{-1} sum_k c_k`` at
        ``y*(x)`` (Sec. 3.3, Table 1; ``e_i = 0`` here): one Hessian, one solve, one mixed
        product ``J_i a = grad_{lambda_i} <grad_y g_i, a>``."""
        self._check_convex()
        x = x.detach()
        y = self.exact_inner_solution(x) if y is None else y.detach()
        n, clients = self.n_clients, self.every_client()
        hess = self.inner_hessian(x, y)
        c = torch.func.grad(lambda v: self.total_outer(x, v))(y)
        adjoint = torch.linalg.solve(hess, c)
        xs = replicated(x, n).clone().requires_grad_(True)
        ys = replicated(y, n).clone().requires_grad_(True)
        (gy,) = torch.autograd.grad(
            self.inner_loss(xs, ys, clients, None).sum(), (ys,), create_graph=True
        )
        (jx,) = torch.autograd.grad((gy * adjoint).sum(), (xs,))
        return -own_blocks(jx, clients, n, self.dim_hyper).detach()

    def without(self, x: torch.Tensor, client: int, sample: int) -> torch.Tensor:
        """``x`` with ``lambda_ik = 0``: sample k of client i dropped from g_i."""
        if not bool(self.sample_mask[client, sample]):
            raise ProblemError(f"{self.name}: client {client} has no sample {sample}")
        lam = x.detach().reshape(self.n_clients, self.dim_hyper).clone()
        lam[client, sample] = 0.0
        return lam.reshape(-1)


__all__ = ["InfluenceProblem"]
