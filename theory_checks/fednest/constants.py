"""FedNest's constants as Tarzanagh et al. (ICML 2022) define them, and its assumptions and
conditions as hypotheses on a case (:mod:`theory_checks.hypotheses`). Every FedNest check takes
its constants from here, so a check and the assumptions it is judged against use one definition.

Assumptions A and B (Sec. 2.1):

- **A1**: for all i, ``f_i(z)``, ``grad f_i(z)``, ``grad g_i(z)``, ``grad^2 g_i(z)`` are
  ``l_{f,0}``-, ``l_{f,1}``-, ``l_{g,1}``-, ``l_{g,2}``-Lipschitz in ``z = (x, y)`` jointly. So
  ``l_{g,1} >= max_i ||grad^2 g_i(z)||_2`` over the full ``(d_x + d_y)``-square Hessian, which
  exceeds the ``y`` block ``max_i lambda_max(grad^2_y g_i)`` whenever the cross derivative is
  non-zero; ``l_{f,1} >= max_i ||grad^2 f_i(z)||_2``; ``l_{f,0} >= sup ||grad f_i||``.
- **A2**: every ``g_i(x, .)`` is ``mu_g``-strongly convex; ``kappa_g = l_{g,1} / mu_g``.
- **B1-B2**: unbiased stochastic oracles with bounded variances; the closed-form families'
  finite, centred sample sets satisfy both by construction (``problems.quadratic_bilevel``).

Two readings of A1-A2 for a statement about stochastic Hessians (:data:`ASSUMPTION_READINGS`,
case parameter ``assumptions``). As stated (Sec. 3, "Assumption A ... For all i"), A1-A2 are
about ``g_i(x, y) := E_zeta[g_i(x, y; zeta)]`` (eq. (7)), the expected function: its Hessian
bounds say nothing of one sample's. Lemma 2.2's (14b) bounds ``E_W||H^{-1} - H_hat||``, where
``H_hat`` (13b) multiplies factors ``I - (1/l_{g,1}) grad^2_y g_i(x, y; zeta_{i,n})`` built from
samples: its bound ``2/mu_g`` follows when every factor has norm ``<= 1 - mu_g/l_{g,1}``, i.e.
when A1-A2 hold for every sample function ``g_i(.; zeta)`` (the reading of Ghadimi & Wang 2018,
whose stochastic Neumann estimator (13b) is; this reading rests on the statement and (13b), not
on the steps of Lemma 2.2's proof in the paper's appendix). :func:`sample_constants` gives the
constants under that reading, from the sample Hessians as A1 and A2 define them.

A Lipschitz constant is any upper bound: the statements hold (or fail) for every valid choice,
and the checks take the smallest valid one (the norms above), the choice under which the bounds
are tightest and FedIHGP's scale ``1/l_{g,1}`` is largest. On the quadratic families the Hessians
are constant, so these are exact. ``l_{f,0}`` is finite on the whole space only when every
``f_i`` is affine (:data:`A1_F_LIPSCHITZ_GLOBAL`); read on a bounded region containing the
points a statement is evaluated at (the reading the convergence analysis uses, and the only one
consistent with A2 in the minimax case, where ``f = -g`` is strongly concave), every smooth
``f_i`` satisfies it. Refutations whose statement allows it are shown with affine ``f_i``, inside
the global reading too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from theory_checks.exact_quantities import joint_hessians
from theory_checks.exact_quantities import spectral_norm_max
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import at_least
from theory_checks.hypotheses import at_most

REF = "Tarzanagh et al. 2022"


@dataclasses.dataclass(frozen=True)
class FedNestConstants:
    """A1-A2's constants of one problem (module docstring).

    Attributes:
        l_g1: A1's ``l_{g,1} = max_i ||grad^2 g_i(z)||_2``, jointly in ``z = (x, y)``.
        l_f1: A1's ``l_{f,1} = max_i ||grad^2 f_i(z)||_2``.
        mu_g: A2's ``mu_g = min_i lambda_min(grad^2_y g_i)``.
        l_g1_y: ``max_i lambda_max(grad^2_y g_i)``, the ``y`` block alone: a lower bound of
            ``l_{g,1}``, not A1's constant (kept to show the difference).
    """

    l_g1: float
    l_f1: float
    mu_g: float
    l_g1_y: float

    def as_dict(self) -> dict[str, float]:
        """The constants and A2's ``kappa_g = l_{g,1} / mu_g``, as the bounds read them."""
        return dataclasses.asdict(self) | {"kappa_g": self.l_g1 / self.mu_g}


def fednest_constants(problem: Any) -> FedNestConstants:
    """A1-A2's constants of ``problem`` (exact on the quadratic families)."""
    return _from_inner_hessians(problem, joint_hessians(problem, "g"))


def sample_constants(problem: Any) -> FedNestConstants:
    """A1-A2's constants with the assumptions applied to every sample function ``g_i(z;
    zeta)`` (the per-sample reading, module docstring): ``l_{g,1} = max_{i, zeta} ||grad^2
    g_i(z; zeta)||_2`` jointly in ``z = (x, y)`` (A1 per sample), ``mu_g = min_{i, zeta}
    lambda_min(grad^2_y g_i(z; zeta))`` (A2 per sample), ``l_g1_y`` the largest sample
    eigenvalue of the ``y`` block, and ``l_{f,1}`` A1's (the outer samples play no part in
    (14b)). Exact on the quadratic families, whose sample Hessians are constant; a problem
    built without samples has none (``ValueError``)."""
    return _from_inner_hessians(problem, joint_hessians(problem, "g", per_sample=True))


def _from_inner_hessians(problem: Any, g: torch.Tensor) -> FedNestConstants:
    """A1-A2's constants from the joint Hessians ``g`` of the inner losses in ``z = (x, y)``
    (``(M, d, d)`` per client or ``(M, n, d, d)`` per client and sample): ``l_{g,1}`` their
    largest norm, ``mu_g`` and ``l_g1_y`` the extreme eigenvalues of their ``y`` blocks, and A1's
    ``l_{f,1}`` of ``problem``'s outer losses."""
    dx = problem.dim_x
    y_block = torch.linalg.eigvalsh(0.5 * (g[..., dx:, dx:] + g[..., dx:, dx:].transpose(-1, -2)))
    return FedNestConstants(
        l_g1=spectral_norm_max(g),
        l_f1=spectral_norm_max(joint_hessians(problem, "f")),
        mu_g=float(y_block.min()),
        l_g1_y=float(y_block.max()),
    )


#: The readings of A1-A2 for a statement about stochastic Hessians (``params["assumptions"]``,
#: module docstring): on the expected function ``g_i = E_zeta g_i(.; zeta)`` (as stated, the
#: default) or on every sample function (as Lemma 2.2's (14b) needs them).
ASSUMPTION_READINGS = {
    "expected": "A1-A2 on g_i(x, y) = E_zeta g_i(x, y; zeta), as Assumption A states them",
    "each_sample": "A1-A2 on every sample function g_i(x, y; zeta), as (14b)'s bound uses them",
}


def assumption_constants(case: Any) -> FedNestConstants:
    """A1-A2's constants of the case's problem under the case's reading of the assumptions
    (:data:`ASSUMPTION_READINGS`: :func:`fednest_constants` unless ``params["assumptions"]``
    says ``"each_sample"``, then :func:`sample_constants`)."""
    reading = case.params.get("assumptions", "expected")
    if reading not in ASSUMPTION_READINGS:
        raise ValueError(f"unknown reading of A1-A2: {reading!r}")
    return (
        sample_constants(case.problem)
        if reading == "each_sample"
        else fednest_constants(case.problem)
    )


#: The readings of ``l_{g,1}`` a claim may be checked under (``params["l_g1"]``): A1's
#: definition, the default, and the ``y`` block alone, which the compositional text of Sec. 2.4
#: uses (``l_{g,1} = 1`` for ``g_i = (1/2)||y - r_i(x)||^2``, whose joint constant is
#: ``1 + ||grad r_i||^2``).
L_G1_READINGS = {
    "joint": "A1 as defined: grad g_i Lipschitz in z = (x, y) jointly",
    "y_block": "the y block alone, max_i lambda_max(grad^2_y g_i) (Sec. 2.4's l_{g,1} = 1)",
}


def inner_smoothness(problem: Any) -> float:
    """``max_i lambda_max(grad^2_y g_i)``: the smoothness of every ``g_i`` in ``y``, whose inverse
    is the inner gradient step the checks take for FedInn (A1 gives ``<= l_{g,1}``; the step
    conditions (16) of Thm 3.1 leave the constants open)."""
    return fednest_constants(problem).l_g1_y


def l_g1(case: Any) -> float:
    """``l_{g,1}`` of the case's problem under the case's reading of it (:data:`L_G1_READINGS`;
    A1's joint constant unless ``params["l_g1"]`` says ``"y_block"``)."""
    reading = case.params.get("l_g1", "joint")
    if reading not in L_G1_READINGS:
        raise ValueError(f"unknown reading of l_{{g,1}}: {reading!r}")
    constants = fednest_constants(case.problem)
    return constants.l_g1 if reading == "joint" else constants.l_g1_y


def neumann_scale(case: Any) -> float:
    """The scale ``l`` of FedIHGP's factors ``I - H/l`` (Alg. 3: ``1/l_{g,1}``) in ``case``: the
    inverse of its ``neumann_step_size`` when the case sets one, else :func:`l_g1` (under the
    per-sample reading of A1-A2, :data:`ASSUMPTION_READINGS`, the per-sample ``l_{g,1}`` of
    :func:`sample_constants`, at least A1's: a Lipschitz constant of every sample's gradient is
    one of their mean's)."""
    step = case.params.get("neumann_step_size")
    if step:
        return 1.0 / float(step)
    if case.params.get("assumptions", "expected") == "each_sample":
        constants = sample_constants(case.problem)
        per_sample = (
            constants.l_g1 if case.params.get("l_g1", "joint") == "joint" else constants.l_g1_y
        )
        # >= A1's constant in exact arithmetic; the max keeps a case whose samples equal their
        # mean (no Hessian noise) from falling outside A1 by a rounding of 1e-16
        return max(per_sample, l_g1(case))
    return l_g1(case)


#: A1 for FedIHGP's scale: the ``l_{g,1}`` Alg. 3 divides by is a Lipschitz constant of
#: ``grad g_i`` in ``z = (x, y)`` (or, under the y-block reading, of ``grad_y g_i`` in ``y``).
A1_NEUMANN_SCALE = Hypothesis(
    "A1 (l_{g,1})",
    "FedIHGP's scale l >= l_{g,1} = max_i ||grad^2 g_i(z)||_2, z = (x, y) jointly (y block "
    "under that reading)",
    f"{REF}, Assumption A1; Alg. 3",
    lambda case: at_least(neumann_scale(case), l_g1(case)),
)

#: A2: every client's inner objective strongly convex in y.
A2_STRONG_CONVEXITY = Hypothesis(
    "A2",
    "mu_g = min_i lambda_min(grad^2_y g_i) > 0 (margin mu_g / l_{g,1})",
    f"{REF}, Assumption A2",
    lambda case: (lambda c: c.mu_g / c.l_g1)(fednest_constants(case.problem)),
)

#: A2 for every sample function: the per-sample reading's A2 (:data:`ASSUMPTION_READINGS`).
#: Declared by claims checked under both readings: the cases of the expected-Hessian reading
#: satisfy it too, so a refutation there does not come from a nonconvex sample.
A2_EACH_SAMPLE = Hypothesis(
    "A2 (each sample)",
    "every sample Hessian grad^2_y g_i(x, y; zeta) >= mu_s I with mu_s = min_{i, zeta} "
    "lambda_min > 0 (margin mu_s / l_s, l_s the per-sample l_{g,1})",
    f"{REF}, Assumption A2 applied to g_i(x, y; zeta) (Lemma 2.2, (14b))",
    lambda case: (lambda c: c.mu_g / c.l_g1)(sample_constants(case.problem)),
)

#: A1 for f read on the whole space: ``f_i`` Lipschitz everywhere, i.e. affine.
A1_F_LIPSCHITZ_GLOBAL = Hypothesis(
    "A1 (l_{f,0}, whole space)",
    "f_i is Lipschitz on all of R^(dx+dy): grad^2 f_i = 0 (margin -l_{f,1})",
    f"{REF}, Assumption A1 read globally",
    lambda case: at_most(fednest_constants(case.problem).l_f1, 0.0),
)

#: The hypotheses of Lemma 2.2 (A1-A2; B by construction), with FedIHGP's scale.
LEMMA22 = (A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY)

__all__ = [
    "A1_F_LIPSCHITZ_GLOBAL",
    "A1_NEUMANN_SCALE",
    "A2_EACH_SAMPLE",
    "A2_STRONG_CONVEXITY",
    "ASSUMPTION_READINGS",
    "FedNestConstants",
    "L_G1_READINGS",
    "LEMMA22",
    "REF",
    "assumption_constants",
    "fednest_constants",
    "inner_smoothness",
    "l_g1",
    "neumann_scale",
    "sample_constants",
]
