"""FedMSA Theorem 3.1's momentum ``rho = Theta(1/R)`` against its proof's choices (Sec. 3,
App. B.2, Cor. C.1).

The theorem states the rate

    E||P(x~)||^2 + ||Z~ - Z*(x~)||^2 = O(tau/R + 1/(sqrt(K) R) + sigma^2/(MKR)
                                         + (sigma/(MKR))^{2/3})                          (49)

with ``rho = Theta(1/R)`` for Algorithm 1 as boxed, whose round 0 draws the batch b of every
round. Its proof (App. B.2) takes an initial batch ``b_0 = KR`` and ``rho = max(1/R, rho_2)``
with ``rho_2 ~ R^{-2/3}``. Started at the fixed point ``(x*, Z*(x*))``, the deterministic terms
vanish and the criterion is the noise part, whose slowest term decays like ``R^{-2/3}``:

- :data:`AS_STATED` (expected to fail): ``b_0 = b = 1``, ``rho = 1/R`` or ``4/R`` (two readings
  of Theta's constant), one client (A5 per client, as printed);
- :data:`INITIAL_BATCH`: the same ``rho = 1/R`` with ``b_0 = KR`` (B0_PROOF): the hypothesis the
  statement lacks;
- :data:`PROOF_CHOICE`: the proof's ``rho = max(1/R, R^{-2/3})`` and ``b_0 = KR``.

Each checks the exact exponent in R of ``E`` of the criterion (:func:`_check_rho`) <= -2/3 +
0.1 over ``R_0 (1, 2, 4, 8)``, K = 1, batch 1, additive noise only. Exact expectations: eq. (5)
is affine in rho, so the round is identified at two momenta (:data:`_RHO_ANCHORS`) and
interpolated, each rho validated on a random round; mean and covariance of the state then
propagate exactly (:mod:`theory_checks.fedmsa.common`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from problems import QuadraticBilevel
from problems import strategies
from results_format.verdicts import ABOUT_RESULT
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import PerProfile
from theory_checks.claim import Perturbation
from theory_checks.claim import bilevel_spec
from theory_checks.claim import known_case
from theory_checks.fedmsa.claim_makers import exponent_claim
from theory_checks.fedmsa.common import EXPONENT_TOL
from theory_checks.fedmsa.common import THEORY_M_EXPONENT
from theory_checks.fedmsa.common import build
from theory_checks.fedmsa.common import exponent_measurement
from theory_checks.fedmsa.common import fixed_point
from theory_checks.fedmsa.common import msa_radius
from theory_checks.fedmsa.common import start_point
from theory_checks.fedmsa.common import state_sizes
from theory_checks.fedmsa.constants import A1_UNIQUE_FIXED_POINT
from theory_checks.fedmsa.constants import A5_AVERAGED
from theory_checks.fedmsa.constants import A5_PER_CLIENT
from theory_checks.fedmsa.constants import B0_PROOF
from theory_checks.fedmsa.constants import THEOREM31_STEPS
from theory_checks.fedmsa.constants import theorem31_steps
from theory_checks.fedmsa.moments import Branch
from theory_checks.fedmsa.moments import Layout
from theory_checks.fedmsa.moments import criterion_form
from theory_checks.fedmsa.moments import expected_criteria
from theory_checks.fedmsa.moments import identify_round
from theory_checks.fedmsa.moments import validate_round
from theory_checks.fedmsa.perturbations import fresh_sample_at_old_point
from theory_checks.hypotheses import Reading

# Why rho identified at 1/4 and 3/4: eq. (5) is affine in rho, so the round at any rho is an
# entry-wise interpolation of the two (checked by a validation round at every rho used);
# rho = 1 is avoided because the algorithm skips the previous point there.
_RHO_ANCHORS = (0.25, 0.75)
# Why the largest R is capped: the moment recursion costs ~50 us per round and client; R_max =
# 8 R_0 with R_0 <= 256 keeps a case under a second.
_R0_CAP = 256


def _r_grid(radius: float) -> tuple[int, ...]:
    """``R_0 (1, 2, 4, 8)`` with ``R_0`` the power of two >= max(32, 4 horizons), a horizon
    being the ``6 / (1 - radius)`` rounds the noise-free iteration (K = 1) needs to forget its
    start (e^-6): past it only the momentum's memory ~ 1/rho bends the curve."""
    horizon = 6.0 / max(1.0 - radius, 1e-12)
    r0 = 2 ** int(math.ceil(math.log2(max(32.0, 4.0 * horizon))))
    if r0 > _R0_CAP:
        raise NotMeasurable(f"slow contraction (radius {radius:.3f}): R_0 = {r0} rounds")
    return tuple(r0 * f for f in (1, 2, 4, 8))


def _check_rho(case: Case, make: Callable[..., Any], proof_choice: bool) -> Measurement:
    """The noise part of the output-rule criterion against R, exact, with ``rho = 1/R`` (times
    the case's ``rho_constant``, Theta(1/R)'s constant) or the proof's ``max(1/R, R^{-2/3})``
    (``proof_choice``), and the round-0 batch of the case's ``initial_batch``: ``"b"``
    (Algorithm 1's box: the batch b = 1 of every round) or ``"KR"`` (the proof's b_0 = K R).
    Steps from :func:`~theory_checks.fedmsa.constants.theorem31_steps` (inside Lemmas B.1-B.2)."""
    problem = case.problem
    K = 1
    alpha, beta = theorem31_steps(case)
    radius = msa_radius(problem, alpha, beta)
    if radius >= 0.999:
        raise NotMeasurable(f"centralised MSA does not contract at these steps ({radius:.4f})")
    x0, Z0 = fixed_point(problem)
    offset = float(case.params.get("offset", 0.0))
    if offset:
        direction = start_point(problem, case.params["seed"])
        x0 = x0 + offset * direction / direction.norm()
    n = max(problem.n_samples, 1)
    dx, dz = state_sizes(problem)
    layout = Layout(dx, dz)
    rng = np.random.default_rng(case.params["seed"])
    initial_batch = case.params.get("initial_batch", "b")
    rho_constant = float(case.params.get("rho_constant", 1.0))

    def alg_at(rho: float, batch: int = 1) -> Any:
        return build(
            make,
            problem,
            local_steps=K,
            momentum=rho,
            outer_step_size=alpha,
            inner_step_size=beta,
            batch_size=batch,
        )

    start = alg_at(_RHO_ANCHORS[0]).state_at(problem, x0, Z0)
    first = identify_round(alg_at(_RHO_ANCHORS[0]), problem, layout, n, start=start)
    validate_round(alg_at(_RHO_ANCHORS[0]), problem, layout, first, n, rng, start)
    anchors = [identify_round(alg_at(r), problem, layout, n) for r in _RHO_ANCHORS]
    G, g = criterion_form(problem, layout)
    grid = _r_grid(radius)
    values, rhos = [], []
    for R in grid:
        # Thm 3.1: rho = Theta(1/R). The proof: rho = max(1/R, rho_2) with rho_2 ~ R^{-2/3}.
        rho = max(1.0 / R, R ** (-2.0 / 3.0)) if proof_choice else min(1.0, rho_constant / R)
        w = (rho - _RHO_ANCHORS[0]) / (_RHO_ANCHORS[1] - _RHO_ANCHORS[0])
        rest = [Branch.mix(a, b, w) for a, b in zip(*anchors, strict=True)]
        validate_round(alg_at(rho), problem, layout, rest, n, rng)
        round0 = first
        if initial_batch == "KR":
            round0 = [b.rebatched(K * R) for b in first]
            alg0 = alg_at(rho, K * R)
            validate_round(alg0, problem, layout, round0, n, rng, alg0.state_at(problem, x0, Z0))
        values.append(expected_criteria(round0, rest, R, G, g, layout)[-1])
        rhos.append(rho)
    return exponent_measurement(
        "exponent of E criterion in R",
        grid,
        values,
        THEORY_M_EXPONENT,
        THEORY_M_EXPONENT + EXPONENT_TOL,
        {
            "K": K,
            "alpha": alpha,
            "beta": beta,
            "radius": radius,
            "rho": rhos,
            "offset": offset,
            "initial_batch": initial_batch,
            "proof_choice": proof_choice,
        },
        "rounds R",
    )


def check_rho_as_stated(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """rho = c/R (c: the case's ``rho_constant``, 1 by default) and the case's round-0 batch
    (Algorithm 1's box unless the case names ``initial_batch = "KR"``): exponent in R <= -2/3."""
    return _check_rho(case, make, proof_choice=False)


def check_rho_proof_choice(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """rho = max(1/R, R^{-2/3}) and b_0 = K R (the proof's choices): exponent in R <= -2/3."""
    return _check_rho(case, make, proof_choice=True)


def noisy_cases(initial_batch: str = "b", max_clients: int | None = None) -> PerProfile:
    """Additive noise only (hessian_noise = 0): Lemma B.5's mean-Lipschitz step condition is
    void, the momentum error obeys d_r = (1 - rho) d_{r-1} + rho eps_r exactly, and the rounds
    are affine in the samples' noise (the exact moments apply). Why M <= 2 and dimensions <= 2
    on the fast profile: the identification runs 3 M (D + 1 + 2 (M + 1)(n - 1)) rounds. The
    cases carry the round-0 batch rule ``initial_batch`` (``"b"``: Algorithm 1's box; ``"KR"``:
    the proof's b_0 = K R). One strategy per profile."""

    def build(fast: bool) -> st.SearchStrategy[Case]:
        clients = max_clients or (2 if fast else 3)
        size: dict[str, Any] = {
            "max_clients": clients,
            "max_dim": 2 if fast else 3,
            "kappa": (1.0, 2.0),
            "max_hessian_heterogeneity": 0.3,
            "n_samples": 3,
            "gradient_noise": 1.0,
        }
        problem = st.one_of(
            strategies.quadratic_bilevel(**size), strategies.quadratic_minimax(**size)
        )
        return st.builds(
            lambda p, seed: Case(p, {"seed": seed, "offset": 0.0, "initial_batch": initial_batch}),
            problem,
            strategies.SEEDS,
        )

    return PerProfile(functools.partial(build, fast=True), functools.partial(build, fast=False))


def noise_free_control() -> Callable[[], Case]:
    """Inside Theorem 3.1's conditions (one client: A5 holds per client) with sigma = 0
    (gradient noise 0 on the same sample sets), started off the fixed point: only the
    deterministic terms tau/R + 1/(sqrt(K) R) remain, the criterion decays like 1/R and the
    same check says "holds"."""
    problem = QuadraticBilevel.random(
        1, 1, 2, 2.0, seed=3, gradient_heterogeneity=0.5, n_samples=3, gradient_noise=0.0
    )
    return known_case(problem.spec(), {"seed": 0, "offset": 1.0})


# =============================================================================== S


# Positive control of the rho claims: sigma = 0 from an offset start (module docstring).
NOISE_FREE_CONTROL = noise_free_control()


# What every claim of this result shares.
rho_claim = exponent_claim.but(about=ABOUT_RESULT, max_examples=PerProfile(2, 8))


AS_STATED = rho_claim(
    id="fedmsa.rho.as_stated",
    reference=(
        "Theorem 3.1 and Cor. C.1 (rho = Theta(1/R)) for Algorithm 1 as boxed, whose "
        "round 0 draws the batch b of every round: without the proof's initial batch b_0 "
        "= KR (App. B.2)"
    ),
    statement=(
        "without the proof's initial batch b_0 = KR (Algorithm 1's box: b_0 = b = 1), rho "
        "= Theta(1/R): the output-rule criterion is O(tau/R + 1/(sqrt(K) R) + "
        "sigma^2/(MKR) + (sigma/(MKR))^{2/3}), so its exact expectation decays in R at "
        "least like R^{-2/3}: exponent <= -2/3 + 0.1"
    ),
    strategy=noisy_cases(max_clients=1),
    check=check_rho_as_stated,
    hypotheses=(A1_UNIQUE_FIXED_POINT, A5_PER_CLIENT, THEOREM31_STEPS),
    expected="fails",
    notes=(
        "Refuted, and the hypothesis it is about is the initial batch, not rho: Algorithm 1's "
        "box has no b_0, and with b_0 = b the round-0 momentum error survives (1 - 1/R)^R ~ "
        "e^{-1} of its size through every round, so the noise part of the criterion does not "
        "decay in R (exact exponent 0.008 over R = 32..256 on the saved case at rho = 1/R, "
        "-0.019 at rho = 4/R). With the proof's b_0 = KR and the same rho = 1/R it decays "
        "with exponent -0.98 (fedmsa.rho.initial_batch): rho = Theta(1/R) is not at fault, "
        "the missing hypothesis b_0 = KR (App. B.2) is. Inside every explicit condition with "
        "the paper's constants: one client (A5 holds per client, as printed), steps capped by "
        "Lemma B.1 (beta <= lambda/(2 L_s)) and Lemma B.2 (alpha <= 1/(2 L_z1^2)). Read with "
        "Theta's constant 1 and 4; both fail. Positive control: sigma = 0 from an offset "
        "start (only the deterministic terms): exponent -1, holds. Started at the fixed point "
        "(x*, Z*(x*)), so the deterministic terms of Thm 3.1 vanish and the criterion is the "
        "noise part; additive noise only (3 samples per client, gradient noise 1), K = 1, "
        "batch 1, R in R_0 (1, 2, 4, 8) with R_0 >= 32 and >= 4 contraction horizons. The "
        "theorem's slowest noise term is (sigma/(MKR))^{2/3}. Exact expectations (module "
        "docstring): each round of the registered algorithm is identified as an affine map of "
        "the state plus one term per minibatch slot, in a context that fixes the local client "
        "and every slot's sample, and validated on a random round to 1e-8; mean and "
        "covariance then propagate exactly (a mixture over the local client), so the verdict "
        "is a float64 computation with no sampling error."
    ),
    readings=(
        Reading(
            "rho = 1/R",
            "rho = 1/R (Theta(1/R) with constant 1), b_0 = b = 1",
            {"rho_constant": 1.0},
        ),
        Reading(
            "rho = 4/R",
            "rho = 4/R (Theta(1/R) with constant 4), b_0 = b = 1",
            {"rho_constant": 4.0},
        ),
    ),
    positive_control=NOISE_FREE_CONTROL,
    # The counterexample hypothesis found (saved as data): tried first on every run.
    examples=(
        known_case(
            bilevel_spec(n_samples=3, gradient_noise=1.0),
            {"seed": 0, "offset": 0.0},
        ),
    ),
)


INITIAL_BATCH_PERTURBATION = Perturbation(
    name="fresh sample at the previous point",
    description=(
        "Eqs. (5)-(6) evaluate p(x_{r-1}; xi) on another sample than p(x_r; xi) (a "
        "second draw instead of reusing xi): the STORM difference no longer cancels "
        "the noise, the momentum error's variance grows like sigma^2/rho = sigma^2 "
        "R, and the criterion grows with R. A one-line bug that keeps every "
        "estimate unbiased."
    ),
    build=fresh_sample_at_old_point,
    max_examples=1,
)


# What the corrections of fedmsa.rho.as_stated share: the proof's initial batch b_0 = KR.
with_initial_batch_claim = rho_claim.but(
    strategy=noisy_cases(initial_batch="KR"),
    hypotheses=(A1_UNIQUE_FIXED_POINT, A5_AVERAGED, THEOREM31_STEPS, B0_PROOF),
    corrects=AS_STATED.id,
)


INITIAL_BATCH = with_initial_batch_claim(
    id="fedmsa.rho.initial_batch",
    reference=(
        "Theorem 3.1 (rho = Theta(1/R)) with the proof's initial batch b_0 = KR (App. "
        "B.2, final parameter choice)"
    ),
    statement=(
        "rho = 1/R and the initial batch b_0 = K R: the noise part of the criterion "
        "decays in R at least like R^{-2/3}: exact exponent of its expectation <= -2/3 + "
        "0.1"
    ),
    check=check_rho_as_stated,
    notes=(
        "The hypothesis fedmsa.rho.as_stated lacks, alone: the same rho = 1/R and the same "
        "check, with the round-0 batch b_0 = KR. Exact exponent -0.98 over R = 32..256 on "
        "fedmsa.rho.as_stated's saved case (-0.97, -0.99, -0.99 per octave): the round-0 "
        "error sigma^2/(M b_0) that rho = 1/R carries through every round now shrinks like "
        "1/R. Started at the fixed point, additive noise only, K = 1, batch 1, steps inside "
        "Lemmas B.1-B.2, exact expectations (see fedmsa.rho.as_stated)."
    ),
    perturbation=INITIAL_BATCH_PERTURBATION,
)


PROOF_CHOICE_PERTURBATION = Perturbation(
    name="fresh sample at the previous point",
    description=(
        "Eqs. (5)-(6) evaluate p(x_{r-1}; xi) on another sample than p(x_r; xi) (a "
        "second draw instead of reusing xi): the STORM difference no longer cancels "
        "the noise, the momentum error's variance grows like sigma^2/rho instead of "
        "rho sigma^2, and the criterion grows with R. A one-line bug that keeps "
        "every estimate unbiased."
    ),
    build=fresh_sample_at_old_point,
    max_examples=1,
)


PROOF_CHOICE = with_initial_batch_claim(
    id="fedmsa.rho.proof_choice",
    reference=(
        "Theorem 3.1's proof (App. B.2, final parameter choice: rho = max(1/R, rho_2), "
        "rho_2 ~ R^{-2/3}, b_0 = KR)"
    ),
    statement=(
        "rho = max(1/R, R^{-2/3}) and an initial batch b_0 = K R: the noise part of the "
        "criterion decays in R at least like R^{-2/3}: exact exponent of its expectation "
        "<= -2/3 + 0.1"
    ),
    check=check_rho_proof_choice,
    notes=(
        "rho_2 is taken with constant 1 (the proof's constant has Delta_W = W_0 - W_R, which "
        "is ~0 from the fixed point). Exact exponents -0.59 to -0.66 over R = 16..1024; the "
        "approach to -2/3 is slow (relative corrections ~ horizon / R). Started at the fixed "
        "point (x*, Z*(x*)), so the deterministic terms of Thm 3.1 vanish and the criterion "
        "is the noise part; additive noise only (3 samples per client, gradient noise 1), K = "
        "1, batch 1, R in R_0 (1, 2, 4, 8) with R_0 >= 32 and >= 4 contraction horizons, "
        "steps inside Lemmas B.1-B.2. The theorem's slowest noise term is "
        "(sigma/(MKR))^{2/3}. Exact expectations (module docstring): each round of the "
        "registered algorithm is identified as an affine map of the state plus one term per "
        "minibatch slot, in a context that fixes the local client and every slot's sample, "
        "and validated on a random round to 1e-8; mean and covariance then propagate exactly "
        "(a mixture over the local client), so the verdict is a float64 computation with no "
        "sampling error."
    ),
    perturbation=PROOF_CHOICE_PERTURBATION,
)


CLAIMS: tuple[Claim, ...] = (
    AS_STATED,
    INITIAL_BATCH,
    PROOF_CHOICE,
)
