"""Per-client problems on real data for HGP's experiments (Terashita & Hara, sec. 5.2 and 5.3).

Paper letters -> testbed (docs/glossary.md): the paper's shared model x is our inner variable
``y`` (a flat parameter vector, ``dim_y`` = d_x), client i's hyperparameter lambda_i is block i
of our outer variable ``x = [lambda_1; ...; lambda_n]`` (``dim_hyper`` = d_lambda). Every problem
here has the per-client interface that :class:`testbed.decentralized.HyperGradientPush` and
:class:`testbed.decentralized.StochasticGradientPush` use (``kind``, ``n_clients``, ``dim_x``,
``dim_y``, ``dim_hyper``, ``hyper_blocks``, row-separable ``inner_loss`` / ``outer_loss``,
``sample_batch``, ``initial_point``), so those algorithms run on them unchanged.

Client data are :class:`~problems.workloads._client_data.ClientSamples` (padded to a common
length ``N`` with weights ``1/N_i`` on real samples, 0 on padding); a minibatch draws uniformly
from the client's own ``N_i`` samples (unbiased for the full local loss). Every per-client
evaluation is one ``torch.func.vmap`` over the stacked rows; there is no loop over clients.

- :class:`InfluenceProblem` (sec. 5.2, eq. 12): per-sample loss weights
  ``g_i(y, lambda_i) = 1/N_i sum_k lambda_ik ell(xi_ik, y) + wd/2 ||y||^2`` evaluated at
  ``lambda = 1``, ``f_i`` = client i's validation cross entropy, ``F = sum_i f_i`` (the global
  validation loss). ``-<d_lambda F>_ik`` is the linear prediction of
  ``F(lambda - e_ik) - F(lambda)``, the change when sample k of client i is dropped (its weight
  set to 0; with the mean-reduced g_i this keeps the denominator N_i, which Sec. 5.2 does not
  discuss).
- :class:`PersonalizationProblem` (sec. 5.3): HGP-PL multiplies the model's logits by
  ``n_classes * softmax(lambda_i)`` (the authors' code's scaling, hitachi-rd-cv/pdbo-hgp, so the
  mask is 1 at ``lambda = 0``), HGP-MTL mixes ``K`` models' class probabilities with weights
  ``softmax(lambda_i)`` (the code's NLL of the mixture). ``g_i`` = training cross entropy of the
  personalized prediction + ``wd/2 ||y||^2``; ``f_i`` = the same cross entropy on the outer data
  (the code uses the training set) + ``rho/2 ||lambda_i||^2`` (Table 6).

Exact answers for the convex case (``model="logreg"``, softmax regression with ``wd > 0``):
``y*(x)`` by damped Newton on ``sum_i g_i`` in the working dtype, GlobalGrad
``<d_lambda F>_i = e_i - J_i (sum_k H_k)^{-1} sum_k c_k`` (Sec. 3.3) by one linear solve.

The influence protocol's numerical tools (used by ``testbed_app.experiments.hgp``): Hessian-vector
products of ``G = sum_i g_i`` (:meth:`InfluenceProblem.total_hvp`), the largest eigenvalue by
seeded power iteration (:func:`largest_eigenvalue`), the smallest by Lanczos
(:func:`smallest_eigenvalue`, scipy's ``eigsh`` on a ``LinearOperator`` of HVPs), full-batch
gradient descent to a stated gradient-norm tolerance (:func:`descend`), and Hessian damping
(:meth:`InfluenceProblem.with_damping`: ``delta I`` added to every ``grad^2_y g_i`` and nothing
else, for an averaged Hessian that is indefinite at a network's trained model).

``cnn_smooth`` is the LeNet layout of ``cnn`` with ``tanh`` instead of ReLU and average instead
of max pooling: its loss is twice continuously differentiable, so its Hessian and the influence
function (an implicit-function-theorem quantity) exist everywhere and a gradient-norm tolerance can
be reached. The ReLU/max-pool CNN's full-batch gradient jumps on kinks: at a model L-BFGS has
driven to a gradient norm of 0.026 (float64, weight decay 0.01), the first-order model of the
gradient along ``-grad`` has relative error 0.2 at distance 1e-2 and 178 at 1e-6, so its minima sit
on kinks and no tolerance below about 0.02 is reachable there.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from problems._base import Batch, ProblemError, ProblemKind
from problems.logistic import NEWTON_FINAL_STEPS, NEWTON_MAX_ITERATIONS, NEWTON_STEP_RTOL
from problems.workloads._client_data import ClientSamples
from problems.workloads.models import MODEL_BUILDERS, FlatModel, build_network
from problems.workloads.spectral import (  # re-exported: the influence protocol's tools
    LANCZOS_TOL,
    POWER_ITERATIONS,
    POWER_RTOL,
    Descent,
    DescentDiverged,
    SpectralEstimate,
    descend,
    largest_eigenvalue,
    momentum_bound,
    power_iteration,
    smallest_eigenvalue,
)

PersonalizationMode = Literal["pl", "mtl"]
CLASSIFIERS: tuple[str, ...] = ("logreg", "cnn_smooth", *MODEL_BUILDERS)


@dataclasses.dataclass(frozen=True, eq=False)
class Classifier:
    """A whole classification network as a pure function of one flat vector.

    ``apply(theta, inputs) -> logits`` (vmappable over both), ``n_params`` = len(theta),
    ``initial(seed)`` the seeded float32 initial vector. ``convex``: softmax regression, whose
    regularised cross entropy is strongly convex in theta.
    """

    name: str
    n_params: int
    apply: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    initial: Callable[[int], torch.Tensor]
    convex: bool = False


def build_classifier(model: str, input_shape: Sequence[int], n_classes: int) -> Classifier:
    """``"logreg"`` (softmax regression, the convex model of HGP sec. 5.2) or a network of
    :mod:`problems.workloads.models` (body and head as one vector ``[body; head]``)."""
    if model == "logreg":
        channels, height, width = (int(s) for s in input_shape)
        flat = FlatModel.from_module(
            torch.nn.Sequential(
                torch.nn.Flatten(start_dim=-3),
                torch.nn.Linear(channels * height * width, n_classes, dtype=torch.float32),
            )
        )
        return Classifier("logreg", flat.n_params, flat.apply, flat.initial, convex=True)
    if model == "cnn_smooth":
        channels, height, width = (int(s) for s in input_shape)
        flat = FlatModel.from_module(_smooth_cnn(channels, height, width, n_classes))
        return Classifier("cnn_smooth", flat.n_params, flat.apply, flat.initial)
    if model not in MODEL_BUILDERS:
        raise ProblemError(f"unknown model {model!r}; known: {', '.join(CLASSIFIERS)}")
    net = build_network(model, input_shape, n_classes)
    return Classifier(
        model, net.n_params, net.full_logits, lambda seed: torch.cat(net.initial(seed))
    )


def _smooth_cnn(channels: int, height: int, width: int, n_classes: int) -> torch.nn.Module:
    """``cnn``'s layout (5x5 same-padded convolutions with 6 and 16 channels, each followed by
    2x2 pooling, then 120-84-classes) with ``tanh`` and average pooling: a C-infinity loss."""
    if height < 4 or width < 4:
        raise ProblemError(f"cnn_smooth: needs inputs of at least 4x4 pixels, got {height}x{width}")
    nn, f32 = torch.nn, torch.float32
    return nn.Sequential(
        nn.Conv2d(channels, 6, 5, padding=2, dtype=f32),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5, padding=2, dtype=f32),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Flatten(start_dim=-3),
        nn.Linear(16 * (height // 4) * (width // 4), 120, dtype=f32),
        nn.Tanh(),
        nn.Linear(120, 84, dtype=f32),
        nn.Tanh(),
        nn.Linear(84, n_classes, dtype=f32),
    )


def own_blocks(x: torch.Tensor, clients: torch.Tensor, n: int, block: int) -> torch.Tensor:
    """Row c: block ``clients[c]`` (size ``block``) of ``x[c]`` (x is ``(C, n * block)``)."""
    count = x.shape[0]
    index = torch.arange(count, device=x.device) * n + clients.to(x.device)
    return x.reshape(count * n, block).index_select(0, index)


def _rows(value: torch.Tensor, count: int) -> torch.Tensor:
    return value.expand(count, -1) if value.ndim == 1 else value


def client_samples(
    images: torch.Tensor,
    labels: torch.Tensor,
    index_sets: Sequence[np.ndarray],
    what: str,
    *,
    dtype: torch.dtype,
    device: torch.device | str,
) -> ClientSamples:
    """Every client's samples ``images[index_sets[i]]``, padded, in ``dtype`` on ``device``.

    The images are cast first, so the weights ``1/N_i`` are computed in ``dtype`` (casting a
    float32 ``1/N_i`` afterwards would keep its float32 rounding).
    """
    return ClientSamples.stack(
        images.to(device=device, dtype=dtype),
        labels.to(device),
        [np.asarray(ix, dtype=np.int64) for ix in index_sets],
        what,
    )


# ------------------------------------------------------------------------------ the base class


class _PerClientClassification(abc.ABC):
    """Shared machinery: per-row losses by vmap, minibatches, global sums over clients.

    Subclasses define :meth:`_sample_losses` (per-sample losses of one row from its model
    parameters and its lambda_i), :meth:`_sample_weights` and :meth:`_outer_penalty`.
    """

    kind: ProblemKind = "bilevel"

    def __init__(
        self,
        net: Classifier,
        train: ClientSamples,
        outer: ClientSamples,
        *,
        dim_y: int,
        dim_hyper: int,
        weight_decay: float,
        seed: int,
        name: str,
    ) -> None:
        if train.n_clients != outer.n_clients:
            raise ProblemError(
                f"{name}: train data has {train.n_clients} clients, outer data {outer.n_clients}"
            )
        if not (math.isfinite(weight_decay) and weight_decay >= 0.0):
            raise ProblemError(f"{name}: weight_decay must be finite and >= 0, got {weight_decay}")
        self.net, self.train, self.outer = net, train, outer
        self.name, self.seed = name, seed
        self.n_clients = train.n_clients
        self.dim_y, self.dim_hyper = dim_y, dim_hyper
        self.dim_x = self.n_clients * dim_hyper
        self.weight_decay = float(weight_decay)
        self.dtype, self.device = train.inputs.dtype, train.inputs.device

    # ----------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def _sample_losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """Per-sample losses of one row from its model parameters ``y`` and its ``lambda_i``."""

    def _sample_weights(
        self, lam: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor | None
    ) -> torch.Tensor:
        """Per-sample weights of g_i (``1/N_i`` or ``1/b``, times any sample hyperparameter)."""
        return weights

    def _outer_penalty(self, lam: torch.Tensor) -> torch.Tensor:
        return torch.zeros(lam.shape[0], dtype=lam.dtype, device=lam.device)

    # ----------------------------------------------------------------- interface
    @property
    def id(self) -> str:
        return (
            f"{self.name}.{self.net.name}.n{self.n_clients}.dy{self.dim_y}"
            f".dl{self.dim_hyper}.seed{self.seed}"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, dtype={self.dtype}, device={self.device})"

    def hyper_blocks(self, x: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        return own_blocks(x, clients, self.n_clients, self.dim_hyper)

    def _losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """``(C, N)`` per-sample losses, one vmapped call over the C rows."""
        out: torch.Tensor = torch.func.vmap(self._sample_losses)(y, lam, inputs, labels)
        return out

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i(y_c, lambda_i)`` per evaluated client (full local loss or minibatch mean)."""
        clients = clients.to(self.device)
        lam = self.hyper_blocks(x, clients)
        positions = None if batch is None else batch.indices.to(self.device)
        if positions is None:
            inputs, labels, weights = self.train.full(clients)
        else:
            inputs, labels, weights = self.train.picked(clients, positions)
        weights = self._sample_weights(lam, weights, positions)
        losses = self._losses(y, lam, inputs, labels)
        return (weights * losses).sum(-1) + 0.5 * self.weight_decay * (y * y).sum(-1)

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i(y_c, lambda_i)``: mean loss on client i's outer data (+ the lambda penalty);
        deterministic (HGP samples only the Jacobians of g, Alg. 2), ``batch`` is ignored."""
        clients = clients.to(self.device)
        lam = self.hyper_blocks(x, clients)
        inputs, labels, weights = self.outer.full(clients)
        losses = self._losses(y, lam, inputs, labels)
        return (weights * losses).sum(-1) + self._outer_penalty(lam)

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch:
        """Uniform draws with replacement from each evaluated client's own ``N_i`` samples."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ProblemError(
                f"{self.name}: batch size must be an integer >= 1, got {batch_size!r}"
            )
        sizes = self.train.counts.cpu().numpy()[clients.cpu().numpy()]
        draws = rng.integers(0, sizes[:, None], size=(int(clients.shape[0]), batch_size))
        return Batch(torch.as_tensor(draws, dtype=torch.long))

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._initial_hyper(), self._initial_model()

    def _initial_hyper(self) -> torch.Tensor:
        return torch.zeros(self.dim_x, dtype=self.dtype, device=self.device)

    def _initial_model(self) -> torch.Tensor:
        return self.net.initial(self.seed).to(device=self.device, dtype=self.dtype)

    # ----------------------------------------------------------------- global quantities
    def _all(self) -> torch.Tensor:
        return torch.arange(self.n_clients, device=self.device)

    def total_inner(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``G(y) = sum_i g_i(y, lambda_i)`` at one shared model ``y (dim_y,)``."""
        n = self.n_clients
        return self.inner_loss(_rows(x, n), _rows(y, n), self._all(), None).sum()

    def total_outer(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``F = sum_i f_i(y, lambda_i)`` at one shared model ``y (dim_y,)`` (the paper's f)."""
        n = self.n_clients
        return self.outer_loss(_rows(x, n), _rows(y, n), self._all(), None).sum()


# ------------------------------------------------------------------------------ influence


class InfluenceProblem(_PerClientClassification):
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

    def _sample_losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        return F.cross_entropy(self.net.apply(y, inputs), labels, reduction="none")

    def _sample_weights(
        self, lam: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor | None
    ) -> torch.Tensor:
        return weights * (lam if positions is None else lam.gather(1, positions))

    @property
    def sample_mask(self) -> torch.Tensor:
        """``(n, N)`` booleans: True where ``lambda_ik`` weighs a real sample (padding is inert:
        its weight in g_i is 0, so its influence is exactly 0)."""
        return self.train.weights > 0

    def _initial_hyper(self) -> torch.Tensor:
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
        weights = self._sample_weights(
            self.hyper_blocks(_rows(x, n), self._all()), self.train.weights, None
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
        n, clients = self.n_clients, self._all()
        hess = self.inner_hessian(x, y)
        c = torch.func.grad(lambda v: self.total_outer(x, v))(y)
        adjoint = torch.linalg.solve(hess, c)
        xs = _rows(x, n).clone().requires_grad_(True)
        ys = _rows(y, n).clone().requires_grad_(True)
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


# ------------------------------------------------------------------------------ personalization


class PersonalizationProblem(_PerClientClassification):
    """HGP-PL (``mode="pl"``) or HGP-MTL (``mode="mtl"``); see the module docstring.

    Args:
        net: one model; MTL stacks ``learners`` copies of it in ``y`` (each its own seed).
        train: the clients' training samples (``g_i``); outer: ``f_i``'s samples.
        mode: ``"pl"`` or ``"mtl"``.
        n_classes: classes (PL's ``lambda_i`` has one entry per class).
        weight_decay: L2 on the model in g_i (paper: 0.001).
        outer_l2: ``rho`` on ``lambda_i`` in f_i (Table 6: 0.001 or 0.01).
        learners: MTL's number of models (paper: 3).
        evaluation: held-out sample sets by name (e.g. ``{"test": ..., "val": ...}``) for
            :meth:`evaluate`.
    """

    def __init__(
        self,
        net: Classifier,
        train: ClientSamples,
        outer: ClientSamples,
        *,
        mode: PersonalizationMode,
        n_classes: int,
        weight_decay: float = 1e-3,
        outer_l2: float = 1e-3,
        learners: int = 3,
        seed: int = 0,
        evaluation: dict[str, ClientSamples] | None = None,
    ) -> None:
        if mode not in ("pl", "mtl"):
            raise ProblemError(f"personalization mode must be 'pl' or 'mtl', got {mode!r}")
        if mode == "mtl" and (
            isinstance(learners, bool) or not isinstance(learners, int) or learners < 2
        ):
            raise ProblemError(f"HGP-MTL needs an integer learners >= 2, got {learners!r}")
        if not (math.isfinite(outer_l2) and outer_l2 >= 0.0):
            raise ProblemError(f"outer_l2 must be finite and >= 0, got {outer_l2}")
        self.mode, self.n_classes = mode, n_classes
        self.learners = learners if mode == "mtl" else 1
        super().__init__(
            net,
            train,
            outer,
            dim_y=net.n_params * self.learners,
            dim_hyper=n_classes if mode == "pl" else self.learners,
            weight_decay=weight_decay,
            seed=seed,
            name=f"hgp.personalization.{mode}",
        )
        self.outer_l2 = float(outer_l2)
        self.evaluation = dict(evaluation or {})

    def _initial_model(self) -> torch.Tensor:
        """The learners' seeded initial vectors (seeds ``seed, seed + 1, ...``)."""
        return torch.cat([self.net.initial(self.seed + k) for k in range(self.learners)]).to(
            device=self.device, dtype=self.dtype
        )

    def _log_probs(self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Log class probabilities of one client's personalized predictor:
        PL ``log_softmax(logits * C softmax(lambda))``; MTL
        ``log sum_k softmax(lambda)_k softmax(logits_k)`` (a logsumexp, stable)."""
        if self.mode == "pl":
            logits = self.net.apply(y, inputs) * (self.n_classes * torch.softmax(lam, -1))
            return torch.log_softmax(logits, -1)
        parts = y.reshape(self.learners, self.net.n_params)
        per_learner = torch.stack(
            [torch.log_softmax(self.net.apply(p, inputs), -1) for p in parts]
        )  # (K, N, classes)
        return torch.logsumexp(per_learner + torch.log_softmax(lam, -1)[:, None, None], 0)

    def _sample_losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        return F.nll_loss(self._log_probs(y, lam, inputs), labels, reduction="none")

    def _outer_penalty(self, lam: torch.Tensor) -> torch.Tensor:
        return 0.5 * self.outer_l2 * (lam * lam).sum(-1)

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """Personalized accuracy of every client's own model row and lambda_i on each held-out
        set: ``<set>_accuracy`` (mean over clients weighted by local size, Table 2's first
        figure), ``<set>_p10`` (10th percentile of the per-client accuracies, its second) and
        ``<set>_loss`` (mean negative log-likelihood)."""
        n = self.n_clients
        clients = self._all()
        lam = self.hyper_blocks(_rows(x, n), clients)
        ys = _rows(y, n)
        out: dict[str, float] = {}
        for label, data in self.evaluation.items():
            inputs, labels, weights = data.full(clients)
            real = (weights > 0).to(self.dtype)
            log_probs = torch.func.vmap(self._log_probs)(ys, lam, inputs)
            correct = (log_probs.argmax(-1) == labels).to(self.dtype) * real
            nll = -log_probs.gather(-1, labels[..., None])[..., 0] * real
            sizes = data.counts.to(self.dtype)
            per_client = (correct.sum(-1) / sizes).cpu().numpy()
            out[f"{label}_accuracy"] = float(correct.sum() / sizes.sum())
            out[f"{label}_p10"] = float(np.percentile(per_client, 10))
            out[f"{label}_loss"] = float(nll.sum() / sizes.sum())
        return out


__all__ = [
    "CLASSIFIERS",
    "Classifier",
    "Descent",
    "DescentDiverged",
    "InfluenceProblem",
    "LANCZOS_TOL",
    "POWER_ITERATIONS",
    "POWER_RTOL",
    "PersonalizationProblem",
    "SpectralEstimate",
    "build_classifier",
    "client_samples",
    "descend",
    "largest_eigenvalue",
    "momentum_bound",
    "own_blocks",
    "power_iteration",
    "smallest_eigenvalue",
]
