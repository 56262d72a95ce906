"""AggITD's constants as Xiao & Ji (ICML 2023) define them, its step rules, and its assumptions
and conditions as hypotheses on a case (:mod:`theory_checks.hypotheses`). Every AggITD check
takes its constants and step sizes from here, so a check and the assumptions it is judged
against use one definition.

Assumptions 1-4 (Sec. 4.1), with ``z = (x, y)``:

- **Assumption 1**: ``G_i(x, y; zeta)`` is ``mu``-strongly convex in ``y`` for *every* client
  and sample, so ``mu <= min_{i, zeta} lambda_min(grad^2_y G_i)``.
- **Assumption 2**: ``F_i(z; xi)`` is ``M``-Lipschitz (``||grad F_i|| <= M``, the full gradient
  in ``z``); ``grad F_i(.; xi)`` is ``L_f``-Lipschitz and ``grad G_i(.; zeta)`` is
  ``L_g``-Lipschitz, both in ``z`` jointly and per sample. So ``L_g >= max_{i, zeta}
  ||grad^2_z G_i||_2`` over the full ``(d_x + d_y)``-square Hessian, which exceeds both
  ``||grad^2_y G_i||`` and ``||grad^2_xy G_i||`` (and their maximum, the constant this testbed
  used before) whenever the cross derivative is non-zero.
- **Assumption 3**: ``grad^2_xy G_i`` and ``grad^2_y G_i`` are ``rho``-Lipschitz; the closed-form
  families' Hessians are constant, so ``rho = 0``.
- **Assumption 4**: oracle variances ``sigma_f^2, sigma_1^2`` and the dissimilarity
  ``E_i ||grad g_i(z) - grad g(z)||^2 <= sigma_2^2`` (full gradient in ``z``);
  ``sigma_g^2 = max(sigma_1^2, sigma_2^2)``.

A Lipschitz or strong-convexity constant is any valid bound: a statement must hold for every
valid choice, so the checks take the choice under which its bound is smallest (every AggITD bound
grows with ``L_g``, ``L_f``, ``M``, ``sigma_g`` and shrinks with ``mu``): the norms above, exact
on the quadratic families. ``M`` and ``sigma_2`` are finite on the whole space only when every
``f_i`` is affine and the clients differ by constants; read on a bounded region holding the
points a statement evaluates (the reading the proofs use: they bound ``||grad_y F||`` at the
iterates), every closed-form instance satisfies them, with ``M`` the maximum at those points
(:func:`gradient_bound`). Refutations whose statement allows it are shown with affine ``f_i``
(:data:`A2_M_GLOBAL`), inside the global reading too.

Step rules (Props. 1-2, Lemmas 1-3, Thm 1): ``lambda <= min{10, 1/L_g}``, ``beta_i = beta /
tau_i`` with ``beta <= min{1, lambda, 1/(6 L_g)}``; Lemma 3: ``alpha <= alpha_2 = 1/(324 M_f^2 +
6 M_f)``; Theorem 1: ``alpha_k = min{alpha_1, alpha_2, alpha_3, alpha_bar / sqrt(K)}`` and
``beta_k in [max{beta_bar alpha_k / N, lambda / 10}, min{1, lambda, 1/(6 L_g)}]`` (Appendix D.1,
:func:`theorem1_caps`). A check uses the step a case names (``neumann_step_size``,
``inner_step_size``, ``outer_step_size`` in its parameters) or else the largest the rule allows
(:func:`neumann_step`, :func:`inner_step`), and the hypotheses read the same functions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import torch

from problems import Batch
from theory_checks.exact_quantities import joint_hessians
from theory_checks.exact_quantities import outer_affine
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import at_least
from theory_checks.hypotheses import at_most

REF = "Xiao & Ji 2023"


@dataclasses.dataclass(frozen=True)
class AggITDConstants:
    """Assumptions 1-3's constants of one problem, and Lemma 4's constants built from them.

    Attributes:
        mu: Assumption 1's ``mu = min_{i, zeta} lambda_min(grad^2_y G_i)``.
        L_g: Assumption 2's ``L_g = max_{i, zeta} ||grad^2_z G_i||_2``, ``z = (x, y)`` jointly.
        L_f: Assumption 2's ``L_f = max_{i, xi} ||grad^2_z F_i||_2``.
        rho: Assumption 3's Hessian-Lipschitz constant (0 on the closed-form families).
    """

    mu: float
    L_g: float
    L_f: float
    rho: float = 0.0

    @property
    def kappa_g(self) -> float:
        """``kappa_g = L_g / mu`` (never defined in the paper; implied by ``L_y = O(kappa_g)``
        in Thm 1)."""
        return self.L_g / self.mu

    # Lemma 4 (Appendix D.1), M enters only through rho: with rho = 0 the M terms vanish
    @property
    def L_y(self) -> float:
        return self.L_g / self.mu

    @property
    def L_yx(self) -> float:
        rho, mu = self.rho, self.mu
        return (rho + rho * self.L_y) / mu + self.L_g * (rho + rho * self.L_y) / mu**2

    def M_f_at(self, M: float) -> float:
        """``M_f = L_f + L_g L_f / mu + (M / mu)(rho + L_g rho / mu)``."""
        return (
            self.L_f
            + self.L_g * self.L_f / self.mu
            + M / self.mu * (self.rho + self.L_g * self.rho / self.mu)
        )

    @property
    def M_f(self) -> float:
        """``M_f`` (``rho = 0``: the M term vanishes)."""
        if self.rho:
            raise ValueError("M_f depends on M when rho > 0: use M_f_at(M)")
        return self.M_f_at(0.0)

    @property
    def L_f_prime(self) -> float:
        """``L'_f = L_f + L_g (L_f + M_f) / mu`` (``rho = 0``)."""
        return self.L_f + self.L_g * (self.L_f + self.M_f) / self.mu

    @property
    def lambda_cap(self) -> float:
        """``min{10, 1/L_g}``: the largest Neumann step the propositions allow."""
        return min(10.0, 1.0 / self.L_g)

    def beta_cap(self, lam: float) -> float:
        """``min{1, lambda, 1/(6 L_g)}``: the largest inner step (Prop. 1, Lemma 3, Thm 1)."""
        return min(1.0, lam, 1.0 / (6.0 * self.L_g))

    @property
    def alpha_2(self) -> float:
        """``alpha_2 = 1/(324 M_f^2 + 6 M_f)``: Lemma 3's outer step cap, one of Theorem 1's."""
        return 1.0 / (324.0 * self.M_f**2 + 6.0 * self.M_f)

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self) | {"kappa_g": self.kappa_g}


def _sample_batches(problem: Any) -> list[Any]:
    n = int(getattr(problem, "n_samples", 0) or 0)
    return (
        [None]
        if n == 0
        else [None]
        + [Batch(torch.full((problem.n_clients, 1), j, dtype=torch.long)) for j in range(n)]
    )


def _hessian_stack(problem: Any, which: str) -> torch.Tensor:
    """Every client's (and, with samples, every sample's) Hessian in ``z``: ``(., d, d)``."""
    full = joint_hessians(problem, which)
    if not int(getattr(problem, "n_samples", 0) or 0):
        return full
    per_sample = joint_hessians(problem, which, per_sample=True)
    return torch.cat([full, per_sample.flatten(0, 1)])


def aggitd_constants(problem: Any) -> AggITDConstants:
    """Assumptions 1-3's constants of ``problem`` (exact on the closed-form families)."""
    g = _hessian_stack(problem, "g")
    dx = problem.dim_x
    y_block = g[:, dx:, dx:]
    mu = float(torch.linalg.eigvalsh(0.5 * (y_block + y_block.transpose(1, 2))).min())
    return AggITDConstants(
        mu=mu,
        L_g=float(torch.linalg.matrix_norm(g, ord=2).max()),
        L_f=float(torch.linalg.matrix_norm(_hessian_stack(problem, "f"), ord=2).max()),
    )


def _gradients(problem: Any, which: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``grad_z`` of every client's (and sample's) ``f_i`` or ``g_i`` at ``(x, y)``: ``(., d)``."""
    m, dx = problem.n_clients, problem.dim_x
    clients = torch.arange(m)
    loss_fn = problem.outer_loss if which == "f" else problem.inner_loss
    out = []
    for batch in _sample_batches(problem):
        z = torch.cat([x, y]).expand(m, -1).clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss_fn(z[:, :dx], z[:, dx:], clients, batch).sum(), z)
        out.append(grad.detach())
    return torch.cat(out)


def gradient_bound(problem: Any, points: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Assumption 2's ``M`` on the region of ``points``: ``max ||grad_z F_i(x, y; xi)||`` over
    clients, samples and the given points (``||grad F_i||`` is convex in ``(x, y)`` on the
    quadratic families, so this is the maximum over their convex hull too)."""
    return max(float(_gradients(problem, "f", x, y).norm(dim=-1).max()) for x, y in points)


def dissimilarity_sq(problem: Any, x: torch.Tensor, y: torch.Tensor) -> float:
    """Assumption 4's ``E_i ||grad g_i(z) - grad g(z)||^2`` at ``z = (x, y)`` (full gradient
    in ``z``, mean over the clients; exact oracles, so ``sigma_g^2 = sigma_2^2``)."""
    g = _gradients(problem, "g", x, y)[: problem.n_clients]
    return float(((g - g.mean(0)) ** 2).sum(-1).mean())


# --------------------------------------------------------------------------- step rules


def neumann_step(case: Any) -> float:
    """The HessIV step ``lambda`` of a case: its ``neumann_step_size``, else ``min{10, 1/L_g}``
    (the largest the propositions allow)."""
    step = case.params.get("neumann_step_size")
    return float(step) if step else aggitd_constants(case.problem).lambda_cap


def inner_step(case: Any) -> float:
    """The inner step ``beta`` of a case: its ``inner_step_size``, else ``min{1, lambda,
    1/(6 L_g)}``."""
    step = case.params.get("inner_step_size")
    return float(step) if step else aggitd_constants(case.problem).beta_cap(neumann_step(case))


def theorem1_caps(
    c: AggITDConstants, inner_steps: int, lam: float, alpha: float = 0.0
) -> dict[str, float]:
    """Appendix D.1's ``alpha_1, alpha_2, alpha_3`` and ``beta_bar`` with ``rho = 0`` (the
    terms in ``L_yx`` and ``rho^2`` vanish); ``alpha`` enters ``beta_bar`` through
    ``alpha_2 / 3`` only, so the caps do not depend on it."""
    n, a2 = inner_steps, c.alpha_2
    beta_bar = (
        c.M_f * c.L_y * a2 / 2.0
        + 11.0 * c.M_f * c.L_y
        + (6.0 + a2 / 3.0) * (n + 1) * lam * c.L_y * c.L_g**2 / c.M_f * 6.0 * c.L_f**2 / c.mu
    ) / c.mu
    a1 = 1.0 / (8.0 * c.L_f_prime + 16.0 * c.M_f * c.L_y)
    a3 = n * c.beta_cap(lam) / (2.0 * beta_bar) if n else math.inf
    return {"alpha_1": a1, "alpha_2": a2, "alpha_3": a3, "beta_bar": beta_bar}


def theorem1_inner_steps(case: Any) -> int:
    """``N`` of a case: its ``inner_steps``, else Corollary 1's ``N = O(kappa_g)`` as ``c
    ceil(kappa_g)`` with ``c`` the case's ``inner_steps_per_kappa`` (default 1)."""
    steps = case.params.get("inner_steps")
    if steps is not None:
        return int(steps)
    per_kappa = int(case.params.get("inner_steps_per_kappa", 1))
    return per_kappa * math.ceil(aggitd_constants(case.problem).kappa_g)


def theorem1_outer_step(case: Any) -> float:
    """Theorem 1's largest constant outer step ``min{alpha_1, alpha_2, alpha_3}`` for a case's
    ``N`` and ``lambda``, unless the case names its ``outer_step_size``."""
    step = case.params.get("outer_step_size")
    if step:
        return float(step)
    caps = theorem1_caps(
        aggitd_constants(case.problem), theorem1_inner_steps(case), neumann_step(case)
    )
    return min(caps["alpha_1"], caps["alpha_2"], caps["alpha_3"])


def lemma3_outer_step(case: Any) -> float:
    """Lemma 3's largest outer step ``alpha_2``, unless the case names its ``outer_step_size``."""
    step = case.params.get("outer_step_size")
    return float(step) if step else aggitd_constants(case.problem).alpha_2


# --------------------------------------------------------------------------- hypotheses


def _margin_mu(case: Any) -> float:
    c = aggitd_constants(case.problem)
    return c.mu / c.L_g


#: Assumption 1: every client's and sample's inner objective strongly convex in y.
A1_STRONG_CONVEXITY = Hypothesis(
    "Assumption 1",
    "mu = min_{i, zeta} lambda_min(grad^2_y G_i) > 0, per client and sample (margin mu / L_g)",
    f"{REF}, Assumption 1",
    _margin_mu,
)

#: The Neumann step cap of Props. 1-2, Lemmas 1-3 and Theorem 1, with Assumption 2's L_g.
LAMBDA_CAP = Hypothesis(
    "lambda cap",
    "lambda <= min{10, 1/L_g}, L_g = max_{i, zeta} ||grad^2_z G_i||, z = (x, y) jointly "
    "(Assumption 2)",
    f"{REF}, Props. 1-2, Lemmas 1-3, Thm 1",
    lambda case: at_most(neumann_step(case), aggitd_constants(case.problem).lambda_cap),
)

#: The inner step cap of Prop. 1, Lemma 3 and Theorem 1 (with beta_i = beta / tau_i, which the
#: algorithm applies).
BETA_CAP = Hypothesis(
    "beta cap",
    "beta <= min{1, lambda, 1/(6 L_g)}, beta_i = beta / tau_i",
    f"{REF}, Prop. 1, Lemma 3, Thm 1 (eqs. 14-15)",
    lambda case: at_most(
        inner_step(case), aggitd_constants(case.problem).beta_cap(neumann_step(case))
    ),
)

#: Assumption 2's M on the whole space: F_i Lipschitz everywhere, i.e. every f_i affine.
A2_M_GLOBAL = Hypothesis(
    "Assumption 2 (M, whole space)",
    "F_i is M-Lipschitz on all of R^(dx+dy): grad^2 F_i = 0, f_i affine (margin -L_f)",
    f"{REF}, Assumption 2 read globally",
    lambda case: at_most(aggitd_constants(case.problem).L_f, 0.0),
)

#: Lemma 3's outer step cap.
LEMMA3_ALPHA_CAP = Hypothesis(
    "Lemma 3 alpha cap",
    "alpha <= alpha_2 = 1/(324 M_f^2 + 6 M_f), M_f = L_f + L_g L_f / mu (rho = 0)",
    f"{REF}, Lemma 3 / Lemma 7",
    lambda case: at_most(lemma3_outer_step(case), aggitd_constants(case.problem).alpha_2),
)


def _theorem1_alpha_margin(case: Any) -> float:
    caps = theorem1_caps(
        aggitd_constants(case.problem), theorem1_inner_steps(case), neumann_step(case)
    )
    return at_most(
        theorem1_outer_step(case), min(caps["alpha_1"], caps["alpha_2"], caps["alpha_3"])
    )


def _theorem1_beta_floor_margin(case: Any) -> float:
    c = aggitd_constants(case.problem)
    n, lam = theorem1_inner_steps(case), neumann_step(case)
    caps = theorem1_caps(c, n, lam)
    floor = max(caps["beta_bar"] * theorem1_outer_step(case) / n, lam / 10.0)
    return at_least(inner_step(case), floor)


def _bounded_below_margin(case: Any) -> float:
    """``lambda_min / lambda_max`` of ``grad^2 h`` (``h(x) = f(x, y*(x))`` is quadratic on the
    closed-form families: bounded below iff this is >= 0 and, when 0, the gradient's constant
    lies in the range; the margin treats the edge as inside)."""
    G, _ = outer_affine(case.problem)
    eig = torch.linalg.eigvalsh(G)
    return float(eig.min() / eig.abs().max())


#: Theorem 1's (and every descent analysis's) standing assumption: f bounded below, so W_0 - inf
#: W is finite (eq. (48) writes W_0, assuming f >= 0).
F_BOUNDED_BELOW = Hypothesis(
    "f bounded below",
    "inf_x h(x) > -infinity, h(x) = f(x, y*(x)): grad^2 h >= 0 (margin lambda_min / lambda_max)",
    f"{REF}, Thm 1, eq. (48) (W_0 - inf W finite)",
    _bounded_below_margin,
)

#: Theorem 1's outer step rule alpha_k = min{alpha_1, alpha_2, alpha_3, alpha_bar / sqrt(K)}.
THM1_ALPHA_RULE = Hypothesis(
    "Thm 1 alpha rule",
    "alpha_k <= min{alpha_1, alpha_2, alpha_3} (Appendix D.1, rho = 0)",
    f"{REF}, Thm 1 / Thm 2",
    _theorem1_alpha_margin,
)

#: Theorem 1's lower end of the inner step interval.
THM1_BETA_FLOOR = Hypothesis(
    "Thm 1 beta floor",
    "beta_k >= max{beta_bar alpha_k / N, lambda / 10}",
    f"{REF}, Thm 1 / Thm 2",
    _theorem1_beta_floor_margin,
)

#: Prop. 2's (its second moment does not involve the inner step beta).
PROP2 = (A1_STRONG_CONVEXITY, LAMBDA_CAP)
#: Prop. 2's proof as printed, read with Assumption 2's M on the whole space.
PROP2_PRINTED = (*PROP2, A2_M_GLOBAL)
#: The hypotheses every estimator-level claim is stated under (Props. 1-2, eqs. 5, 11, 14).
ESTIMATOR = (*PROP2, BETA_CAP)
#: Lemma 3's (and Theorem 2's restated D_h's).
LEMMA3 = (*ESTIMATOR, LEMMA3_ALPHA_CAP)
#: Theorem 1's and Corollary 1's.
THEOREM1 = (*ESTIMATOR, F_BOUNDED_BELOW, THM1_ALPHA_RULE, THM1_BETA_FLOOR)
#: Theorem 1's rate read at a tuned alpha_bar above its caps: its step rule is not assumed.
THEOREM1_TUNED = (*ESTIMATOR, F_BOUNDED_BELOW)

__all__ = [
    "A1_STRONG_CONVEXITY",
    "A2_M_GLOBAL",
    "AggITDConstants",
    "BETA_CAP",
    "ESTIMATOR",
    "F_BOUNDED_BELOW",
    "LAMBDA_CAP",
    "LEMMA3",
    "LEMMA3_ALPHA_CAP",
    "PROP2",
    "PROP2_PRINTED",
    "REF",
    "THEOREM1",
    "THEOREM1_TUNED",
    "THM1_ALPHA_RULE",
    "THM1_BETA_FLOOR",
    "aggitd_constants",
    "dissimilarity_sq",
    "gradient_bound",
    "inner_step",
    "lemma3_outer_step",
    "neumann_step",
    "theorem1_caps",
    "theorem1_inner_steps",
    "theorem1_outer_step",
]
