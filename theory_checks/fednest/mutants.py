"""Mutants of FedNest (Tarzanagh et al., ICML 2022): realistic bugs in FedInn (Alg. 4), LFedInn,
FedIHGP (Alg. 3), FedOut (Alg. 2), LFedOut (local Neumann), the minimax form and the outer loop,
which ``testbed mutate`` runs against the FedNest claims (:mod:`theory_checks.mutation`).

FedNest's variants are pairs of update strategies, so a bug in FedInn or FedOut is a subclass of
that strategy with one mistake, put in the built algorithm's ``inner_method`` / ``outer_method``
(:func:`~theory_checks.perturbed_variants.part_variant`); a bug in the estimator FedIHGP is a
subclass of it (:func:`~theory_checks.perturbed_variants.registry_variant`). The compositional
path is FedNest on compositional problems: its bugs are FedInn's and FedIHGP's, run against the
compositional claims too. The wrong parts live in :mod:`theory_checks.fednest.wrong_parts`.
"""

from __future__ import annotations

from typing import Any

from testbed.estimators.fednest import FedIHGP
from testbed.registry import get_estimator
from theory_checks.fednest import compositional
from theory_checks.fednest import fedavg
from theory_checks.fednest import fedinn as fedinn_result
from theory_checks.fednest import ihgp
from theory_checks.fednest import lemma22
from theory_checks.fednest import lfednest
from theory_checks.fednest import minimax
from theory_checks.fednest import perturbations as perturb
from theory_checks.fednest import rounds
from theory_checks.fednest import thm31
from theory_checks.fednest.wrong_parts import CorrectedLFedInn
from theory_checks.fednest.wrong_parts import FlippedCorrectionFedInn
from theory_checks.fednest.wrong_parts import FlippedIndirectFedOut
from theory_checks.fednest.wrong_parts import FlippedIndirectIHGP
from theory_checks.fednest.wrong_parts import ScaledNeumannFedOut
from theory_checks.fednest.wrong_parts import ScaledNeumannLFedOut
from theory_checks.fednest.wrong_parts import ScaledStepFedInn
from theory_checks.fednest.wrong_parts import ScaledStepIHGP
from theory_checks.fednest.wrong_parts import ScaledStepMinimaxFedOut
from theory_checks.fednest.wrong_parts import ShiftedLocalFedInn
from theory_checks.fednest.wrong_parts import ShiftedLocalLFedInn
from theory_checks.fednest.wrong_parts import ShiftedTermsFedOut
from theory_checks.fednest.wrong_parts import ShiftedTermsLFedOut
from theory_checks.fednest.wrong_parts import StaleInnerFedNest
from theory_checks.fednest.wrong_parts import SummedIHGP
from theory_checks.fednest.wrong_parts import UncorrectedFedInn
from theory_checks.fednest.wrong_parts import UncorrectedFedOut
from theory_checks.fednest.wrong_parts import UncorrectedMinimaxFedOut
from theory_checks.fednest.wrong_parts import UnscaledFedInn
from theory_checks.fednest.wrong_parts import UnscaledFedOut
from theory_checks.fednest.wrong_parts import UnscaledMinimaxFedOut
from theory_checks.mutation import COUNT_WAYS
from theory_checks.mutation import STEP_WAYS
from theory_checks.mutation import Mutant
from theory_checks.mutation import MutantFamily
from theory_checks.mutation import declared_equivalents
from theory_checks.perturbed_variants import part_variants
from theory_checks.perturbed_variants import registry_variant

# --------------------------------------------------------------------------- the catalogue

FEDINN_ENTRIES = ("fednest", "fednest-minimax", "lfednest-svrg")
FEDOUT_ENTRIES = ("fednest", "fednest-sgd")
LFEDOUT_ENTRIES = ("lfednest", "lfednest-svrg")
FEDAVG_ENTRIES = ("lfednest", "fednest-sgd")
FEDNEST_VARIANTS = ("fednest", "fednest-sgd", "lfednest", "lfednest-svrg", "fednest-minimax")
IHGP_IDENTITY = lemma22.INVERSE_HESSIAN_IDENTITY.id
FEDINN_RATE = fedinn_result.LINEAR_RATE.id


def _ihgp(cls: type, **fixed: Any) -> dict[str, Any]:
    return {"fedihgp": registry_variant("fedihgp", cls, **fixed)}


def _ihgp_terms_shifted(shift: int) -> dict[str, Any]:
    """FedIHGP built with ``N + shift`` terms where the caller asked for N (the count passed on
    wrongly): every part of it, the draw of N', its scale and its path, is that of N + shift."""

    def make(**kw: Any) -> FedIHGP:
        info = get_estimator("fedihgp")
        terms = kw.get("neumann_terms", info.defaults["neumann_terms"])
        return info.build(**{**kw, "neumann_terms": max(terms + shift, 1)})

    return {"fedihgp": make}


FEDIHGP = MutantFamily("FedIHGP", first=(IHGP_IDENTITY,))
FEDINN = MutantFamily("FedInn", first=(FEDINN_RATE,))
LFEDINN = MutantFamily("LFedInn (FedAvg)", first=(fedavg.BIASED_FIXED_POINT.id,))
FEDOUT = MutantFamily("FedOut", first=(thm31.STATIONARITY_FLOOR.id,))
OUTER_LOOP = MutantFamily("FedNest outer loop", first=(minimax.SYNTHETIC_LINEAR_RATE.id,))
LFEDOUT = MutantFamily("LFedOut (local Neumann)", first=(lfednest.HETEROGENEITY_BIAS.id,))
MINIMAX = MutantFamily("FedNest minimax", first=(minimax.SYNTHETIC_LINEAR_RATE.id,))

MUTANTS: tuple[Mutant, ...] = (
    FEDIHGP.mutant(
        "fedihgp.terms_plus_one",
        "count",
        "FedIHGP built with N + 1 terms where N was asked for (N' from 0..N, scale (N + 1)/l)",
        _ihgp_terms_shifted(1),
        cheap=True,
    ),
    FEDIHGP.mutant(
        "fedihgp.scale_n_plus_one",
        "normalisation",
        "p_0 scaled by (N + 1)/l instead of N/l (N' counted on 0..N)",
        _ihgp(perturb.ScaledIHGP),
    ),
    FEDIHGP.mutant(
        "fedihgp.step_halved",
        "step",
        "the Neumann step 1/(2l) while 1/l is reported",
        _ihgp(ScaledStepIHGP, factor=0.5),
    ),
    FEDIHGP.mutant(
        "fedihgp.step_doubled",
        "step",
        "the Neumann step 2/l (l read for g/2)",
        _ihgp(ScaledStepIHGP, factor=2.0),
    ),
    FEDIHGP.mutant(
        "fedihgp.p0_summed",
        "normalisation",
        "p_0 summed over the subset, not averaged (a missing 1/|S_0|)",
        _ihgp(SummedIHGP),
    ),
    FEDIHGP.mutant(
        "fedihgp.same_subset",
        "stale",
        "every Hessian round reuses the subset S_0 drawn for p_0",
        _ihgp(perturb.SameSubsetIHGP),
        first=(ihgp.CLIENT_SAMPLING_VARIANCE.id,),
    ),
    FEDIHGP.mutant(
        "fedihgp.subset_ignored",
        "per_client",
        "the subset S_0 is drawn, then every client is averaged",
        _ihgp(perturb.AllClientsIHGP),
        first=(ihgp.CLIENT_SAMPLING_VARIANCE.id,),
    ),
    FEDIHGP.mutant(
        "fedihgp.indirect_sign_flipped",
        "correction",
        "the direction adds J_i p instead of subtracting it",
        _ihgp(FlippedIndirectIHGP),
        first=(compositional.SINGLE_TERM_UNBIASED.id,),
    ),
    FEDINN.mutant(
        "fedinn.local_step_extra",
        "count",
        "FedInn runs tau_i + 1 local steps (every variant that runs FedInn)",
        part_variants(FEDINN_ENTRIES, "inner_method", ShiftedLocalFedInn, shift=1),
        first=(compositional.ONE_CALL_EXACT.id, FEDINN_RATE),
        cheap=True,
    ),
    FEDINN.mutant(
        "fedinn.local_step_missing",
        "count",
        "FedInn runs tau_i - 1 local steps (at least one)",
        part_variants(FEDINN_ENTRIES, "inner_method", ShiftedLocalFedInn, shift=-1),
    ),
    FEDINN.mutant(
        "fedinn.step_doubled",
        "step",
        "FedInn steps 2 beta",
        part_variants(FEDINN_ENTRIES, "inner_method", ScaledStepFedInn, factor=2.0),
    ),
    FEDINN.mutant(
        "fedinn.step_halved",
        "step",
        "FedInn steps beta / 2",
        part_variants(FEDINN_ENTRIES, "inner_method", ScaledStepFedInn, factor=0.5),
    ),
    FEDINN.mutant(
        "fedinn.missing_1_over_tau",
        "normalisation",
        "FedInn's local step beta where Thm 3.1's rule gives beta / tau_i",
        part_variants(FEDINN_ENTRIES, "inner_method", UnscaledFedInn),
        first=(FEDINN_RATE, fedinn_result.TAU_EXPONENT.id),
    ),
    FEDINN.mutant(
        "fedinn.correction_dropped",
        "correction",
        "FedInn without its control variate (a FedAvg step)",
        part_variants(FEDINN_ENTRIES, "inner_method", UncorrectedFedInn),
    ),
    FEDINN.mutant(
        "fedinn.correction_sign_flipped",
        "correction",
        "the control variate subtracts the averaged gradient q instead of adding it",
        part_variants(FEDINN_ENTRIES, "inner_method", FlippedCorrectionFedInn),
    ),
    LFEDINN.mutant(
        "lfedinn.local_step_extra",
        "count",
        "LFedInn runs tau_i + 1 local steps",
        part_variants(FEDAVG_ENTRIES, "inner_method", ShiftedLocalLFedInn, shift=1),
    ),
    LFEDINN.mutant(
        "lfedinn.secretly_corrected",
        "correction",
        "the FedAvg baseline runs FedInn's control variate",
        part_variants(FEDAVG_ENTRIES, "inner_method", CorrectedLFedInn),
    ),
    FEDOUT.mutant(
        "fedout.ihgp_terms_plus_one",
        "count",
        "FedOut's FedIHGP runs N + 1 terms while N is reported",
        part_variants(FEDOUT_ENTRIES, "outer_method", ShiftedTermsFedOut, shift=1),
        first=(rounds.FEDNEST.id, thm31.STATIONARITY_FLOOR.id),
    ),
    FEDOUT.mutant(
        "fedout.ihgp_terms_minus_one",
        "count",
        "FedOut's FedIHGP runs N - 1 terms while N is reported",
        part_variants(FEDOUT_ENTRIES, "outer_method", ShiftedTermsFedOut, shift=-1),
        first=(rounds.FEDNEST.id, thm31.STATIONARITY_FLOOR.id),
    ),
    FEDOUT.mutant(
        "fedout.ihgp_step_halved",
        "step",
        "FedOut's FedIHGP steps 1/(2l) while 1/l is reported",
        part_variants(FEDOUT_ENTRIES, "outer_method", ScaledNeumannFedOut, factor=0.5),
    ),
    FEDOUT.mutant(
        "fedout.indirect_sign_flipped",
        "correction",
        "FedOut adds the indirect part (p used with the wrong sign)",
        part_variants(FEDOUT_ENTRIES, "outer_method", FlippedIndirectFedOut),
    ),
    FEDOUT.mutant(
        "fedout.correction_dropped",
        "correction",
        "FedOut's local x-steps without the drift correction (each client along its own "
        "grad_x f_i; h computed, not used), in the fedout routine FedOut and the minimax "
        "FedOut share",
        {
            **part_variants(FEDOUT_ENTRIES, "outer_method", UncorrectedFedOut),
            **part_variants(("fednest-minimax",), "outer_method", UncorrectedMinimaxFedOut),
        },
    ),
    FEDOUT.mutant(
        "fedout.missing_1_over_tau",
        "normalisation",
        "FedOut's local x-step alpha where the rule gives alpha / tau_i, in the fedout "
        "routine FedOut and the minimax FedOut share",
        {
            **part_variants(FEDOUT_ENTRIES, "outer_method", UnscaledFedOut),
            **part_variants(("fednest-minimax",), "outer_method", UnscaledMinimaxFedOut),
        },
        first=(minimax.SYNTHETIC_LINEAR_RATE.id,),
    ),
    OUTER_LOOP.mutant(
        "fednest.stale_inner_iterate",
        "stale",
        "the outer update runs at y^k instead of the y^{k+1} the inner calls computed "
        "(FedNest.step, shared by every variant)",
        {name: registry_variant(name, StaleInnerFedNest) for name in FEDNEST_VARIANTS},
    ),
    OUTER_LOOP.mutant(
        "fednest.extra_round",
        "count",
        "each outer iteration aggregates once more than Table 2's formula",
        {name: registry_variant(name, perturb.ExtraRound) for name in FEDNEST_VARIANTS},
        first=(rounds.FEDNEST.id,),
    ),
    LFEDOUT.mutant(
        "lfedout.terms_minus_one",
        "count",
        "LFedOut's local Neumann series runs N - 1 terms",
        part_variants(LFEDOUT_ENTRIES, "outer_method", ShiftedTermsLFedOut, shift=-1),
    ),
    LFEDOUT.mutant(
        "lfedout.step_halved",
        "step",
        "LFedOut's local Neumann series steps 1/(2l)",
        part_variants(LFEDOUT_ENTRIES, "outer_method", ScaledNeumannLFedOut, factor=0.5),
    ),
    MINIMAX.mutant(
        "minimax.outer_step_doubled",
        "step",
        "the minimax FedOut steps 2 alpha",
        part_variants(("fednest-minimax",), "outer_method", ScaledStepMinimaxFedOut, factor=2.0),
    ),
    MINIMAX.mutant(
        "minimax.ascent_step_halved",
        "step",
        "the minimax FedInn ascent on y steps beta / 2",
        part_variants(("fednest-minimax",), "inner_method", ScaledStepFedInn, factor=0.5),
    ),
)

#: Generated parameter perturbations (:mod:`theory_checks.parameter_mutants`) that no claim can
#: tell from the original, with the argument why no answer can change.
PARAMETER_EQUIVALENTS: dict[str, str] = {
    "param.fedihgp.batch_size.plus1": (
        "the one claim of fedihgp that draws minibatches (fednest.lemma22.abs_error_*, at b = "
        "1) bounds E||H^-1 - H_hat|| by a bound every sample Hessian satisfies, so a mean of "
        "b + 1 samples satisfies it too and the verdict cannot change; every other claim runs "
        "exact oracles"
    ),
    "param.fedihgp.batch_size.minus1": (
        "the one claim of fedihgp that draws minibatches runs b = 1, where one less is no batch "
        "(the case runs as built); every other claim runs exact oracles"
    ),
    **declared_equivalents(
        (
            "fednest-minimax's outer update (MinimaxFedOut, Sec. 2.5 eq. (12)) drops the indirect "
            "term: no Neumann series runs, so its N and lambda are never read by any code the "
            "entry runs"
        ),
        ("fednest-minimax",),
        neumann_terms=COUNT_WAYS,
        neumann_step_size=STEP_WAYS,
    ),
    **declared_equivalents(
        (
            "fednest-sgd's claims check its inner FedAvg fixed point (fednest.fedavg."
            "biased_fixed_point, one inner update) and its rounds per iteration, neither of which "
            "an outer or a Neumann step enters; its FedOut is fednest's, whose steps are pinned "
            "there (fednest.thm31.stationarity_floor, fednest.thm31.floor_slope_in_n)"
        ),
        ("fednest-sgd",),
        outer_step_size=STEP_WAYS,
        neumann_step_size=STEP_WAYS,
    ),
    **declared_equivalents(
        (
            "lfednest-svrg's one claim (fednest.rounds.lfednest_svrg) counts the rounds of an "
            "iteration (FedInn's 2T and LFedOut's one), which neither a step size, nor "
            "LFedOut's local Neumann count, nor the local-step count enters; its FedInn is pinned "
            "on fednest and its LFedOut on "
            "lfednest (fednest.lfednest.heterogeneity_bias)"
        ),
        ("lfednest-svrg",),
        neumann_terms=COUNT_WAYS,
        local_steps=COUNT_WAYS,
        inner_step_size=STEP_WAYS,
        outer_step_size=STEP_WAYS,
        neumann_step_size=STEP_WAYS,
    ),
}
