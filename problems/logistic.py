"""Per-client logistic regression with per-client hyperparameters (HGP eq. 11 and eq. 12).

Client ``i`` holds ``N`` training pairs ``(a_ik, z_ik)`` and ``N_val`` validation pairs, with the
shared linear model ``y`` (the paper's x) and ``ell(z, s) = softplus(s) - z s`` (binary cross
entropy on the logit ``s``). Two hyperparameter modes:

- ``hyper="decay"`` (eq. 11, per-coordinate weight decay, log-parametrised so any real lambda is
  admissible): ``g_i = 1/N sum_k ell(z_ik, a_ik^T y) + mu/2 ||y||^2
  + 1/2 sum_j exp(lambda_ij) y_j^2`` with ``lambda_i`` in ``R^d``;
- ``hyper="weights"`` (eq. 12, influence): ``g_i = 1/N sum_k lambda_ik ell(z_ik, a_ik^T y)
  + mu/2 ||y||^2`` with ``lambda_i`` in ``R^N``, evaluated at ``lambda = 1``; ``-<d_lambda F>_ik``
  is the linear estimate of the change of ``F = sum_i f_i`` when sample k of client i is removed.

``f_i = 1/N_val sum_k ell(z^val_ik, a^val_ik^T y)`` (deterministic). As everywhere in the testbed
``g = mean_i g_i``, ``f = mean_i f_i``, ``h(x) = f(x, y*(x))`` with ``x = [lambda_1; ...]``.

Exact answers: ``y*(x)`` by damped Newton on ``sum_i g_i`` to machine precision, then the
hypergradient by one linear solve there: ``GlobalGrad_i = e_i - J_i (sum_k H_k)^{-1} sum_k c_k``
(HGP Sec. 3.3) and ``grad h = GlobalGrad / n``. The ridge ``mu > 0`` makes every sample Hessian
positive definite (per-sample strong convexity, the alpha of Assumption 3).
"""

from __future__ import annotations

from typing import Any
from typing import Literal

import numpy as np
import torch

from problems._base import Batch
from problems._base import ProblemConstants
from problems._base import ProblemError
from problems._base import ProblemKind
from problems._rows import rows
from problems.checks import check_arrays
from problems.family import ProblemFamily
from problems.family import recipe_rng
from problems.per_client import take_blocks

HyperMode = Literal["decay", "weights"]
_SHAPES = {
    "features": "n N d",
    "labels": "n N",
    "val_features": "n N_val d",
    "val_labels": "n N_val",
}

# Why 100: damped Newton on a strongly convex, smooth objective needs a handful of damped steps
# and then converges quadratically (each step doubles the correct digits), so 10-15 iterations
# reach float64 precision from y = 0 on these problems; 100 is a cap that only a broken problem
# reaches, and reaching it raises instead of returning an inexact "exact" answer.
NEWTON_MAX_ITERATIONS = 100
# Why 1e-8, then two more full steps: in the quadratic-convergence region the error after a step
# is O(step^2), so a relative step of 1e-8 leaves ~1e-16 (float64 round-off) after the next full
# step; the second extra step absorbs the constant in O(.) and any round-off in the solve. A
# fixed tiny tolerance on the step itself is not used because round-off in the gradient keeps the
# computed step at ~eps * cond(H), which may never go below a bare eps threshold.
NEWTON_STEP_RTOL = 1e-8
NEWTON_FINAL_STEPS = 2


def _ell(z: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softplus(s) - z * s


def _floats(spec: dict[str, Any]) -> int:
    """The float64 numbers a drawn problem holds: per client and example the inputs and the
    temporary of the labels' models (``dim`` each), the logit and the label."""
    return spec["components"] * spec["dim"] + spec["n_clients"] * (
        spec["n_train"] + spec["n_val"]
    ) * 2 * (spec["dim"] + 1)


class PerClientLogistic(ProblemFamily):
    """Per-client logistic regression; see the module docstring.

    Args:
        features: ``(n, N, d)`` training inputs; labels: ``(n, N)`` in {0, 1};
        val_features: ``(n, N_val, d)``; val_labels: ``(n, N_val)``;
        mu: ridge > 0; hyper: ``"decay"`` or ``"weights"``.
    """

    ID_TEMPLATES = {
        "PerClientLogistic.random": (
            "perclient.logistic.{hyper}.n{n_clients}.d{dim}.N{n_train}.mu{mu:g}.seed{seed}"
        ),
    }
    INLINE_ID = "perclient.logistic.{hyper}.n{n_clients}.d{dim_y}.inline"

    kind: ProblemKind = "bilevel"

    def __init__(
        self,
        features: Any,
        labels: Any,
        val_features: Any,
        val_labels: Any,
        *,
        mu: float = 0.1,
        hyper: HyperMode = "decay",
        name: str = "PerClientLogistic",
        spec: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        given = {
            "features": features,
            "labels": labels,
            "val_features": val_features,
            "val_labels": val_labels,
        }
        arrays, sizes = check_arrays(name, given, _SHAPES)
        self.a, self.z = arrays["features"], arrays["labels"]
        self.a_val, self.z_val = arrays["val_features"], arrays["val_labels"]
        n, N, d = sizes["n"], sizes["N"], sizes["d"]
        if not mu > 0.0:
            raise ProblemError(f"{name}: mu must be > 0 (per-sample strong convexity), got {mu}")
        if hyper not in ("decay", "weights"):
            raise ProblemError(f"{name}: hyper must be 'decay' or 'weights', got {hyper!r}")
        self.mu, self.hyper = float(mu), hyper
        self.n_clients, self.dim_y, self.n_samples = n, d, N
        self.dim_hyper = d if hyper == "decay" else N
        self.dim_x = n * self.dim_hyper
        self._spec = spec or {"family": "PerClientLogistic", "arrays": "inline"}

    @classmethod
    def random(
        cls,
        n_clients: int = 3,
        dim: int = 5,
        n_train: int = 100,
        n_val: int = 100,
        seed: int = 0,
        *,
        mu: float = 0.1,
        hyper: HyperMode = "decay",
        components: int = 3,
        concentration: float = 0.4,
    ) -> PerClientLogistic:
        """The synthetic heterogeneous data of HGP sec. 5.1 (the FedEM generator the paper uses).

        ``components`` label models ``theta_m ~ U(-1, 1)^dim``; client mixture weights
        ``~ Dir(concentration)``; inputs ``~ U(-1, 1)^dim``; label
        ``round(sigmoid(theta^T a + N(0, 0.1^2)))`` with theta of the sample's component.
        """
        label = "PerClientLogistic.random"
        spec = {
            "family": label,
            "n_clients": n_clients,
            "dim": dim,
            "n_train": n_train,
            "n_val": n_val,
            "seed": seed,
            "mu": mu,
            "hyper": hyper,
            "components": components,
            "concentration": concentration,
        }
        rng = recipe_rng(
            spec,
            dims=("dim", "n_train", "n_val", "components"),
            positive=("mu", "concentration"),
            size=(_floats, "n_clients x (n_train + n_val) x 2 (dim + 1)"),
        )
        theta = rng.uniform(-1.0, 1.0, size=(components, dim))
        weights = rng.dirichlet(np.full(components, concentration), size=n_clients)

        def draw(count: int) -> tuple[np.ndarray, np.ndarray]:
            comp = np.stack([rng.choice(components, size=count, p=w) for w in weights])
            a = rng.uniform(-1.0, 1.0, size=(n_clients, count, dim))
            logits = np.einsum("ckd,ckd->ck", a, theta[comp])
            logits += 0.1 * rng.standard_normal(logits.shape)
            return a, np.round(1.0 / (1.0 + np.exp(-logits)))

        a, z = draw(n_train)
        a_val, z_val = draw(n_val)
        return cls(a, z, a_val, z_val, mu=mu, hyper=hyper, name=label, spec=spec)

    # ------------------------------------------------------------------ identity
    def to_arrays(self) -> dict[str, np.ndarray]:
        return {
            "features": self.a.cpu().numpy().copy(),
            "labels": self.z.cpu().numpy().copy(),
            "val_features": self.a_val.cpu().numpy().copy(),
            "val_labels": self.z_val.cpu().numpy().copy(),
        }

    # ------------------------------------------------------------------ oracle interface
    def hyper_blocks(self, x: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        return take_blocks(x, clients, self.n_clients, self.dim_hyper)

    def _regulariser(self, y: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
        reg = 0.5 * self.mu * (y * y).sum(-1)
        if self.hyper == "decay":
            reg = reg + 0.5 * (torch.exp(lam) * y * y).sum(-1)
        return reg

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i`` per evaluated client; a minibatch averages the drawn samples' losses."""
        lam = self.hyper_blocks(x, clients)
        if batch is None:
            a, z = rows(self.a, clients), rows(self.z, clients)
            w = lam if self.hyper == "weights" else torch.ones_like(z)
        else:
            idx = batch.indices
            flat = (clients[:, None] * self.n_samples + idx).reshape(-1)
            a = self.a.reshape(-1, self.dim_y).index_select(0, flat).reshape(*idx.shape, -1)
            z = self.z.reshape(-1).index_select(0, flat).reshape(idx.shape)
            w = lam.gather(1, idx) if self.hyper == "weights" else torch.ones_like(z)
        losses = _ell(z, torch.einsum("ckd,cd->ck", a, y))
        return (w * losses).mean(-1) + self._regulariser(y, lam)

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i`` per evaluated client: validation cross entropy (``batch`` is ignored)."""
        s = torch.einsum("ckd,cd->ck", rows(self.a_val, clients), y)
        return _ell(rows(self.z_val, clients), s).mean(-1)

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``lambda = 0`` (decay: unit decay ``exp(0)``) or ``lambda = 1`` (weights)."""
        fill = 0.0 if self.hyper == "decay" else 1.0
        return (
            torch.full((self.dim_x,), fill, dtype=torch.float64, device=self.device),
            torch.zeros(self.dim_y, dtype=torch.float64, device=self.device),
        )

    # ------------------------------------------------------------------ exact answers
    def _lam(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.n_clients, self.dim_hyper)

    def _sample_weights(self, lam: torch.Tensor) -> torch.Tensor:
        return lam if self.hyper == "weights" else torch.ones_like(self.z)

    def _inner_derivatives(
        self, lam: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-client gradients ``(n, d)`` and Hessians ``(n, d, d)`` of g_i at y (closed form)."""
        w = self._sample_weights(lam)
        s = torch.einsum("ckd,d->ck", self.a, y)
        p = torch.sigmoid(s)
        N = self.n_samples
        grad = torch.einsum("ck,ckd->cd", w * (p - self.z), self.a) / N + self.mu * y
        curv = w * p * (1 - p)
        hess = torch.einsum("ck,ckd,cke->cde", curv, self.a, self.a) / N
        hess = hess + self.mu * torch.eye(self.dim_y, dtype=torch.float64, device=self.device)
        if self.hyper == "decay":
            decay = torch.exp(lam)
            grad = grad + decay * y
            hess = hess + torch.diag_embed(decay)
        return grad, hess

    def exact_inner_solution(self, x: torch.Tensor) -> torch.Tensor:
        """``argmin_y sum_i g_i`` by damped Newton (Armijo backtracking) to machine precision.

        Raises:
            ProblemError: if Newton has not converged after :data:`NEWTON_MAX_ITERATIONS`.
        """
        lam = self._lam(x)
        y = torch.zeros(self.dim_y, dtype=torch.float64, device=self.device)

        def total(v: torch.Tensor) -> float:
            s = torch.einsum("ckd,d->ck", self.a, v)
            loss = (self._sample_weights(lam) * _ell(self.z, s)).mean(-1).sum()
            rows = v.expand(self.n_clients, -1)
            return float(loss + self._regulariser(rows, lam).sum())

        for _ in range(NEWTON_MAX_ITERATIONS):
            grad, hess = self._inner_derivatives(lam, y)
            g, H = grad.sum(0), hess.sum(0)
            step = torch.linalg.solve(H, g)
            if float(step.norm()) <= NEWTON_STEP_RTOL * (1.0 + float(y.norm())):
                y = y - step
                for _ in range(NEWTON_FINAL_STEPS):
                    grad, hess = self._inner_derivatives(lam, y)
                    y = y - torch.linalg.solve(hess.sum(0), grad.sum(0))
                return y
            t, f0, slope = 1.0, total(y), float(g @ step)
            # Armijo backtracking, halving; 60 halvings reach t ~ 1e-18 (below any useful step).
            for _ in range(60):
                if total(y - t * step) <= f0 - 0.25 * t * slope:
                    break
                t *= 0.5
            y = y - t * step
        raise ProblemError(
            f"{self.name}: Newton did not converge in {NEWTON_MAX_ITERATIONS} iterations"
        )

    def client_blocks(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Paper-convention blocks at ``y*(x)``: H (n,d,d), J (n,dl,d), c (n,d), e (n,dl)."""
        lam = self._lam(x)
        y = self.exact_inner_solution(x)
        _, H = self._inner_derivatives(lam, y)
        if self.hyper == "weights":
            s = torch.einsum("ckd,d->ck", self.a, y)
            J = (torch.sigmoid(s) - self.z)[..., None] * self.a / self.n_samples
        else:
            J = torch.diag_embed(torch.exp(lam) * y)
        s_val = torch.einsum("ckd,d->ck", self.a_val, y)
        c = torch.einsum("ck,ckd->cd", torch.sigmoid(s_val) - self.z_val, self.a_val)
        c = c / self.a_val.shape[1]
        e = torch.zeros_like(lam)
        return {"H": H, "J": J, "c": c, "e": e, "y": y}

    def global_grad(self, x: torch.Tensor) -> torch.Tensor:
        """``(n, dl)`` GlobalGrad ``<d_lambda F>_i = e_i - J_i (sum H)^{-1} sum c`` (a solve)."""
        blk = self.client_blocks(x)
        adjoint = torch.linalg.solve(blk["H"].sum(0), blk["c"].sum(0))
        return blk["e"] - torch.einsum("kij,j->ki", blk["J"], adjoint)

    def exact_hypergradient(self, x: torch.Tensor) -> torch.Tensor:
        return self.global_grad(x).reshape(-1) / self.n_clients

    def total_outer(self, x: torch.Tensor) -> torch.Tensor:
        """``F(lambda) = sum_i f_i(y*(lambda))`` (the paper's outer cost)."""
        y = self.exact_inner_solution(x)
        return _ell(self.z_val, torch.einsum("ckd,d->ck", self.a_val, y)).mean(-1).sum()

    def outer_objective(self, x: torch.Tensor) -> torch.Tensor:
        return self.total_outer(x) / self.n_clients

    def removal_effects(self, x: torch.Tensor, client: int, samples: torch.Tensor) -> torch.Tensor:
        """Actual ``F(lambda with lambda_ik = 0) - F(lambda)`` for each k (retraining by Newton).

        Only meaningful in ``hyper="weights"`` mode (removing sample k of client i).
        """
        removed = client * self.n_samples + torch.as_tensor(samples, dtype=torch.long)
        return self.all_removal_effects(x, removed).reshape(-1)

    def all_removal_effects(
        self, x: torch.Tensor, removed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Actual ``F(lambda with lambda_ik = 0) - F(lambda)`` (retraining without sample k of
        client i, by Newton) for the flat indices ``removed`` (``i N + k``; default every
        sample: ``(n, N)``), all retrainings at once.

        Each retraining is damped Newton on its own ``sum_i g_i`` (the weights with one entry
        zeroed), batched over the removals (one ``(R, d, d)`` solve per iteration) and started
        from ``y*(x)``, which is ``O(1/N)`` from each retrained optimum: the same minimisers as
        :meth:`exact_inner_solution` from zero (same convergence rule and final full steps),
        in a few iterations instead of one Newton run per sample.
        """
        if self.hyper != "weights":
            raise ProblemError(f"{self.name}: removal needs hyper='weights'")
        n, N = self.n_clients, self.n_samples
        flat = (
            torch.arange(n * N)
            if removed is None
            else torch.as_tensor(removed, dtype=torch.long).reshape(-1)
        )
        weights = self._lam(x).reshape(1, n * N).repeat(len(flat), 1)
        weights[torch.arange(len(flat)), flat] = 0.0
        weights = weights.reshape(-1, n, N)
        y = self._retrain(weights, self.exact_inner_solution(x))
        s_val = torch.einsum("ckd,rd->rck", self.a_val, y)
        effects = _ell(self.z_val, s_val).mean(-1).sum(-1) - self.total_outer(x)
        return effects.reshape(n, N) if removed is None else effects

    def _retrain(self, weights: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """``argmin_y sum_i [1/N sum_k w_rik ell(z_ik, a_ik^T y) + mu/2 ||y||^2]`` for every
        row r of ``weights`` ``(R, n, N)``: batched damped Newton from ``start`` (module
        constants as in :meth:`exact_inner_solution`)."""
        n, N, d = self.n_clients, self.n_samples, self.dim_y
        ridge = n * self.mu
        eye = torch.eye(d, dtype=torch.float64)
        y = start.expand(weights.shape[0], d).clone()

        # every sample as a row: (n N, d) inputs, their outer products (n N, d d), and the
        # weights (R, n N), so each Newton quantity is one matrix product over the samples
        a = self.a.reshape(n * N, d)
        outer = (a[:, :, None] * a[:, None, :]).reshape(n * N, d * d)
        z, w = self.z.reshape(n * N), weights.reshape(-1, n * N)

        def total(v: torch.Tensor) -> torch.Tensor:
            return (w * _ell(z, v @ a.T)).sum(-1) / N + 0.5 * ridge * (v * v).sum(-1)

        def newton(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            """The gradients and Newton steps of every row at ``v``."""
            p = torch.sigmoid(v @ a.T)
            grad = (w * (p - z)) @ a / N + ridge * v
            hess = ((w * p * (1 - p)) @ outer / N).reshape(-1, d, d)
            return grad, torch.linalg.solve(hess + ridge * eye, grad)

        for _ in range(NEWTON_MAX_ITERATIONS):
            grad, step = newton(y)
            active = step.norm(dim=-1) > NEWTON_STEP_RTOL * (1.0 + y.norm(dim=-1))
            if not bool(active.any()):
                y = y - step
                for _ in range(NEWTON_FINAL_STEPS):
                    y = y - newton(y)[1]
                return y
            # Armijo backtracking, halving, on the rows still moving (as exact_inner_solution
            # does). A row whose Newton decrement g^T H^-1 g is below 1e-12 of its objective is
            # in Newton's quadratic region, where a full step is safe and a decrease that small
            # is below float64's resolution of the objective (Armijo could only refuse it):
            # it takes its full step, as does a row already converged.
            t = torch.ones(y.shape[0], dtype=torch.float64)
            f0, slope = total(y), (grad * step).sum(-1)
            full = ~active | (slope <= 1e-12 * (1.0 + f0.abs()))
            for _ in range(60):
                ok = full | (total(y - t[:, None] * step) <= f0 - 0.25 * t * slope)
                if bool(ok.all()):
                    break
                t = torch.where(ok, t, 0.5 * t)
            y = y - t[:, None] * step
        raise ProblemError(
            f"{self.name}: batched Newton did not converge in {NEWTON_MAX_ITERATIONS} iterations"
        )

    def constants(self) -> ProblemConstants:
        """Constants at the initial point ``x0`` and ``y*(x0)`` (the Hessian depends on y)."""
        x0 = self.initial_point()[0]
        blk = self.client_blocks(x0)
        H_bar = blk["H"].mean(0)
        eig = torch.linalg.eigvalsh(H_bar)
        client_eig = torch.linalg.eigvalsh(blk["H"])
        cross = torch.cat(list(blk["J"]), 0) / self.n_clients
        zero = torch.zeros(self.dim_y, dtype=torch.float64, device=self.device)
        grad, _ = self._inner_derivatives(self._lam(x0), zero)
        dev = grad - grad.mean(0)
        return ProblemConstants(
            mu=float(eig.min()),
            L=float(eig.max()),
            mu_clients=float(client_eig.min()),
            L_clients=float(client_eig.max()),
            cross_norm=float(torch.linalg.matrix_norm(cross, ord=2)),
            outer_grad_y_lipschitz=0.25
            * float(
                torch.linalg.matrix_norm(
                    torch.einsum("ckd,cke->de", self.a_val, self.a_val)
                    / (self.a_val.shape[1] * self.n_clients),
                    ord=2,
                )
            ),
            outer_grad_x_lipschitz=0.0,
            hessian_heterogeneity=float(torch.linalg.matrix_norm(blk["H"] - H_bar, ord=2).max()),
            gradient_heterogeneity=float(torch.sqrt((dev**2).sum(-1).mean())),
        )
