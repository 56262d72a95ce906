"""Mutants of FedMSA (Tarzanagh, Li, Sharma, Oymak 2023, Algorithm 1) and its multi-level
compositional form (FedMCO, eq. (11)): realistic bugs that ``testbed mutate`` runs against the
FedMSA claims (:mod:`theory_checks.mutation`).

A bug in the round (Algorithm 1's global step (5) or local recursion (6)) is a subclass of
:class:`~testbed.algorithms.fedmsa.FedMSA` and lives in both entries (``fedmsa`` and
``fedmsa-mco`` run the same round); a bug in the maps of eq. (10) or (11) is a subclass of the
maps, put in the built algorithm (:func:`~theory_checks.perturbed_variants.part_variant`). The
perturbation classes of :mod:`theory_checks.fedmsa.perturbations` that are one of these bugs
are reused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from testbed.algorithms.fedmsa import FedMSA
from testbed.algorithms.fedmsa_maps import GlobalStepInputs
from theory_checks.fedmsa import blo
from theory_checks.fedmsa import local
from theory_checks.fedmsa import mco
from theory_checks.fedmsa import perturbations as perturb
from theory_checks.fedmsa import rate
from theory_checks.fedmsa import rho
from theory_checks.fedmsa import tau_zero
from theory_checks.fedmsa.perturbations import WrongGlobalStep
from theory_checks.mutation import COUNT_WAYS
from theory_checks.mutation import STEP_WAYS
from theory_checks.mutation import Mutant
from theory_checks.mutation import MutantFamily
from theory_checks.mutation import declared_equivalents
from theory_checks.perturbed_variants import part_variant
from theory_checks.perturbed_variants import registry_variant

ENTRIES = ("fedmsa", "fedmsa-mco")
TELESCOPING = local.DETERMINISTIC_TELESCOPING.id
FIRST_STEP = local.FIRST_STEP_IS_GLOBAL_DIRECTION.id
CENTRALISED = tau_zero.EQUALS_CENTRALISED_MSA.id
PROOF_CHOICE = rho.PROOF_CHOICE.id
BLO_FIXED_POINT = blo.FIXED_POINT_IS_HYPERGRADIENT.id


@dataclasses.dataclass(frozen=True)
class ScaledOuterStep(FedMSA):
    """FedMSA stepping ``factor * alpha`` on x while alpha is reported."""

    factor: float = 2.0

    def advance(self, ctx: Any, state: Any) -> Any:
        scaled = dataclasses.replace(self, outer_step_size=self.factor * self.outer_step_size)
        return FedMSA.advance(scaled, ctx, state)


@dataclasses.dataclass(frozen=True)
class ScaledInnerStep(FedMSA):
    """FedMSA stepping ``factor * beta_n`` on every level while beta_n is reported."""

    factor: float = 0.5

    def _betas(self, problem: Any) -> torch.Tensor:
        return self.factor * super()._betas(problem)


@dataclasses.dataclass(frozen=True)
class MomentumDropped(FedMSA):
    """Eq. (5) without its momentum correction ``(1 - rho)(h_{r-1} - p(x_{r-1}))``: every
    round's global direction is the fresh estimate alone (rho read as 1)."""

    def advance(self, ctx: Any, state: Any) -> Any:
        return FedMSA.advance(dataclasses.replace(self, momentum=1.0), ctx, state)


@dataclasses.dataclass(frozen=True)
class MomentumSignFlipped(WrongGlobalStep):
    """Eq. (5)'s correction subtracted: ``h_r = p(x_r) - (1 - rho)(h_{r-1} - p(x_{r-1}))``
    (the global step run with ``2 - rho``, whose coefficient is ``-(1 - rho)``)."""

    def step_inputs(self, step: GlobalStepInputs) -> GlobalStepInputs:
        return step._replace(rho=2.0 - step.rho)


@dataclasses.dataclass(frozen=True)
class FrozenLocalDirections(FedMSA):
    """Recursion (6)'s correction ``p(x_k) - p(x_{k-1})`` taken at the current local point for
    both terms (an index slip), so every local step reuses the round's ``(h_r, q_r)``."""

    def correction_point(self, current: Any, previous: Any) -> Any:
        return current


@dataclasses.dataclass(frozen=True)
class SummedGlobal(WrongGlobalStep):
    """Eq. (5)'s server sums the M clients' estimates instead of averaging (a missing 1/M,
    the paper's (Fed-MSA) sum notation taken literally)."""

    def step_output(
        self, step: GlobalStepInputs, h: torch.Tensor, q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        M = float(step.ctx.problem.n_clients)
        return M * h, M * q


def _round(cls: type, **fixed: Any) -> dict[str, Any]:
    """A bug in the round: both entries."""
    return {entry: registry_variant(entry, cls, **fixed) for entry in ENTRIES}


def _bilevel_maps(cls: type) -> dict[str, Any]:
    return {"fedmsa": part_variant("fedmsa", "maps", cls)}


FEDMSA = MutantFamily("FedMSA", first=(TELESCOPING, CENTRALISED))
BILEVEL_MAPS = MutantFamily("FedMSA bilevel maps", first=(BLO_FIXED_POINT,))
MCO_MAPS = MutantFamily("FedMCO maps", first=(mco.EXACT_SEMANTICS_FIXED_POINT_STATIONARY.id,))

MUTANTS: tuple[Mutant, ...] = (
    FEDMSA.mutant(
        "fedmsa.local_step_extra",
        "count",
        "the local loop runs K + 1 steps in rounds r >= 1",
        _round(perturb.ExtraLocalStep),
        first=(CENTRALISED,),
        cheap=True,
    ),
    FEDMSA.mutant(
        "fedmsa.local_steps_ignored",
        "count",
        "one local step whatever K is",
        _round(perturb.IgnoresK),
        first=(TELESCOPING, FIRST_STEP),
    ),
    FEDMSA.mutant(
        "fedmsa.outer_step_doubled",
        "step",
        "x steps 2 alpha",
        _round(ScaledOuterStep, factor=2.0),
    ),
    FEDMSA.mutant(
        "fedmsa.outer_step_halved",
        "step",
        "x steps alpha / 2",
        _round(ScaledOuterStep, factor=0.5),
    ),
    FEDMSA.mutant(
        "fedmsa.inner_step_halved",
        "step",
        "every z^n steps beta_n / 2",
        _round(ScaledInnerStep, factor=0.5),
    ),
    FEDMSA.mutant(
        "fedmsa.inner_step_sign_flipped",
        "step",
        "z <- z + beta q (the other sign convention of the map)",
        _round(perturb.AscentOnZ),
    ),
    FEDMSA.mutant(
        "fedmsa.momentum_dropped",
        "correction",
        "eq. (5) without its momentum correction (rho read as 1)",
        _round(MomentumDropped),
        first=(PROOF_CHOICE,),
    ),
    FEDMSA.mutant(
        "fedmsa.momentum_sign_flipped",
        "correction",
        "eq. (5)'s momentum correction subtracted instead of added",
        _round(MomentumSignFlipped),
        first=(CENTRALISED, PROOF_CHOICE),
    ),
    FEDMSA.mutant(
        "fedmsa.local_directions_frozen",
        "stale",
        "recursion (6)'s correction p(x_k) - p(x_{k-1}) taken at x_k twice: every local "
        "step reuses the round's (h_r, q_r)",
        {entry: registry_variant(entry, FrozenLocalDirections) for entry in ENTRIES},
        first=(TELESCOPING,),
    ),
    FEDMSA.mutant(
        "fedmsa.stateful_client",
        "stale",
        "eq. (5)'s h_{r-1}, q_{r-1} taken from the client's last local state, not the "
        "previous global averages",
        _round(perturb.StatefulClient),
        first=(CENTRALISED, PROOF_CHOICE),
    ),
    FEDMSA.mutant(
        "fedmsa.one_client_global",
        "per_client",
        "the global step (5) uses client 0's maps instead of the average over M clients",
        _round(perturb.OneClientGlobal),
        first=(BLO_FIXED_POINT, CENTRALISED),
    ),
    FEDMSA.mutant(
        "fedmsa.global_summed",
        "normalisation",
        "the global step sums the M clients' estimates (a missing 1/M)",
        _round(SummedGlobal),
        first=(CENTRALISED,),
    ),
    BILEVEL_MAPS.mutant(
        "fedmsa.indirect_term_on_w",
        "stale",
        "(10b)'s indirect term evaluated on the w-block of z instead of the v-block",
        _bilevel_maps(perturb.IndirectTermOnW),
    ),
    BILEVEL_MAPS.mutant(
        "fedmsa.v_equation_sign",
        "correction",
        "(10a)'s v-block with eq. (1)'s sign convention (+ grad_w f)",
        _bilevel_maps(perturb.VEquationSignConvention),
    ),
    BILEVEL_MAPS.mutant(
        "fedmsa.fresh_sample_at_old_point",
        "correction",
        "the previous point of a difference in (5)-(6) gets the next sample instead of the "
        "same one",
        _bilevel_maps(perturb.FreshSampleAtOldPoint),
        first=(rate.TAU_STOCHASTIC.id, rate.M_STOCHASTIC.id),
    ),
    MCO_MAPS.mutant(
        "fedmsa-mco.paper_products",
        "per_client",
        "the 'exact' semantics evaluates the average of per-client Jacobian products "
        "(11b) instead of the product of averaged Jacobians",
        {"fedmsa-mco": part_variant("fedmsa-mco", "maps", perturb.AlwaysPaper)},
    ),
)


#: Generated parameter perturbations (:mod:`theory_checks.parameter_mutants`) that no claim can
#: tell from the original, with the argument why no answer can change.
PARAMETER_EQUIVALENTS: dict[str, str] = {
    **declared_equivalents(
        (
            "the one claim that runs the entry through its builder "
            "(fedmsa.mco.exact_semantics_fixed_point_stationary) starts FedMSA at the fixed point "
            "(x*, Z*), where every map P^m, S^m of the exact semantics is zero: every term of "
            "(5)-(6) vanishes, so no step, momentum or local-step count moves the iterates; the "
            "round's parameters are pinned on the fedmsa entry, which runs the same round"
        ),
        ("fedmsa-mco",),
        outer_step_size=STEP_WAYS,
        inner_step_size=STEP_WAYS,
        momentum=STEP_WAYS,
        local_steps=COUNT_WAYS,
    ),
}
