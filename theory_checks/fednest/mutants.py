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
from theory_checks.mutation import Mutant
from theory_checks.perturbed_variants import part_variant
from theory_checks.perturbed_variants import registry_variant

# --------------------------------------------------------------------------- the catalogue

FEDINN_ENTRIES = ("fednest", "fednest-minimax", "lfednest-svrg")
FEDOUT_ENTRIES = ("fednest", "fednest-sgd")
LFEDOUT_ENTRIES = ("lfednest", "lfednest-svrg")
FEDAVG_ENTRIES = ("lfednest", "fednest-sgd")
FEDNEST_VARIANTS = ("fednest", "fednest-sgd", "lfednest", "lfednest-svrg", "fednest-minimax")
IHGP_IDENTITY = lemma22.INVERSE_HESSIAN_IDENTITY.id
FEDINN_RATE = fedinn_result.LINEAR_RATE.id


def _on(entries: tuple[str, ...], field: str, cls: type, **fixed: Any) -> dict[str, Any]:
    return {entry: part_variant(entry, field, cls, **fixed) for entry in entries}


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


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "fedihgp.terms_plus_one",
        "FedIHGP",
        "count",
        "FedIHGP built with N + 1 terms where N was asked for (N' from 0..N, scale (N + 1)/l)",
        _ihgp_terms_shifted(1),
        first=(IHGP_IDENTITY,),
        cheap=True,
    ),
    Mutant(
        "fedihgp.scale_n_plus_one",
        "FedIHGP",
        "normalisation",
        "p_0 scaled by (N + 1)/l instead of N/l (N' counted on 0..N)",
        _ihgp(perturb.ScaledIHGP),
        first=(IHGP_IDENTITY,),
    ),
    Mutant(
        "fedihgp.step_halved",
        "FedIHGP",
        "step",
        "the Neumann step 1/(2l) while 1/l is reported",
        _ihgp(ScaledStepIHGP, factor=0.5),
        first=(IHGP_IDENTITY,),
    ),
    Mutant(
        "fedihgp.step_doubled",
        "FedIHGP",
        "step",
        "the Neumann step 2/l (l read for g/2)",
        _ihgp(ScaledStepIHGP, factor=2.0),
        first=(IHGP_IDENTITY,),
    ),
    Mutant(
        "fedihgp.p0_summed",
        "FedIHGP",
        "normalisation",
        "p_0 summed over the subset, not averaged (a missing 1/|S_0|)",
        _ihgp(SummedIHGP),
        first=(IHGP_IDENTITY,),
    ),
    Mutant(
        "fedihgp.same_subset",
        "FedIHGP",
        "stale",
        "every Hessian round reuses the subset S_0 drawn for p_0",
        _ihgp(perturb.SameSubsetIHGP),
        first=(ihgp.CLIENT_SAMPLING_VARIANCE.id,),
    ),
    Mutant(
        "fedihgp.subset_ignored",
        "FedIHGP",
        "per_client",
        "the subset S_0 is drawn, then every client is averaged",
        _ihgp(perturb.AllClientsIHGP),
        first=(ihgp.CLIENT_SAMPLING_VARIANCE.id,),
    ),
    Mutant(
        "fedihgp.indirect_sign_flipped",
        "FedIHGP",
        "correction",
        "the direction adds J_i p instead of subtracting it",
        _ihgp(FlippedIndirectIHGP),
        first=(compositional.SINGLE_TERM_UNBIASED.id,),
    ),
    Mutant(
        "fedinn.local_step_extra",
        "FedInn",
        "count",
        "FedInn runs tau_i + 1 local steps (every variant that runs FedInn)",
        _on(FEDINN_ENTRIES, "inner_method", ShiftedLocalFedInn, shift=1),
        first=(compositional.ONE_CALL_EXACT.id, FEDINN_RATE),
        cheap=True,
    ),
    Mutant(
        "fedinn.local_step_missing",
        "FedInn",
        "count",
        "FedInn runs tau_i - 1 local steps (at least one)",
        _on(FEDINN_ENTRIES, "inner_method", ShiftedLocalFedInn, shift=-1),
        first=(FEDINN_RATE,),
    ),
    Mutant(
        "fedinn.step_doubled",
        "FedInn",
        "step",
        "FedInn steps 2 beta",
        _on(FEDINN_ENTRIES, "inner_method", ScaledStepFedInn, factor=2.0),
        first=(FEDINN_RATE,),
    ),
    Mutant(
        "fedinn.step_halved",
        "FedInn",
        "step",
        "FedInn steps beta / 2",
        _on(FEDINN_ENTRIES, "inner_method", ScaledStepFedInn, factor=0.5),
        first=(FEDINN_RATE,),
    ),
    Mutant(
        "fedinn.missing_1_over_tau",
        "FedInn",
        "normalisation",
        "FedInn's local step beta where Thm 3.1's rule gives beta / tau_i",
        _on(FEDINN_ENTRIES, "inner_method", UnscaledFedInn),
        first=(FEDINN_RATE, fedinn_result.TAU_EXPONENT.id),
    ),
    Mutant(
        "fedinn.correction_dropped",
        "FedInn",
        "correction",
        "FedInn without its control variate (a FedAvg step)",
        _on(FEDINN_ENTRIES, "inner_method", UncorrectedFedInn),
        first=(FEDINN_RATE,),
    ),
    Mutant(
        "fedinn.correction_sign_flipped",
        "FedInn",
        "correction",
        "the control variate subtracts the averaged gradient q instead of adding it",
        _on(FEDINN_ENTRIES, "inner_method", FlippedCorrectionFedInn),
        first=(FEDINN_RATE,),
    ),
    Mutant(
        "lfedinn.local_step_extra",
        "LFedInn (FedAvg)",
        "count",
        "LFedInn runs tau_i + 1 local steps",
        _on(FEDAVG_ENTRIES, "inner_method", ShiftedLocalLFedInn, shift=1),
        first=(fedavg.BIASED_FIXED_POINT.id,),
    ),
    Mutant(
        "lfedinn.secretly_corrected",
        "LFedInn (FedAvg)",
        "correction",
        "the FedAvg baseline runs FedInn's control variate",
        _on(FEDAVG_ENTRIES, "inner_method", CorrectedLFedInn),
        first=(fedavg.BIASED_FIXED_POINT.id,),
    ),
    Mutant(
        "fedout.ihgp_terms_plus_one",
        "FedOut",
        "count",
        "FedOut's FedIHGP runs N + 1 terms while N is reported",
        _on(FEDOUT_ENTRIES, "outer_method", ShiftedTermsFedOut, shift=1),
        first=(rounds.FEDNEST.id, thm31.STATIONARITY_FLOOR.id),
    ),
    Mutant(
        "fedout.ihgp_terms_minus_one",
        "FedOut",
        "count",
        "FedOut's FedIHGP runs N - 1 terms while N is reported",
        _on(FEDOUT_ENTRIES, "outer_method", ShiftedTermsFedOut, shift=-1),
        first=(rounds.FEDNEST.id, thm31.STATIONARITY_FLOOR.id),
    ),
    Mutant(
        "fedout.ihgp_step_halved",
        "FedOut",
        "step",
        "FedOut's FedIHGP steps 1/(2l) while 1/l is reported",
        _on(FEDOUT_ENTRIES, "outer_method", ScaledNeumannFedOut, factor=0.5),
        first=(thm31.STATIONARITY_FLOOR.id,),
    ),
    Mutant(
        "fedout.indirect_sign_flipped",
        "FedOut",
        "correction",
        "FedOut adds the indirect part (p used with the wrong sign)",
        _on(FEDOUT_ENTRIES, "outer_method", FlippedIndirectFedOut),
        first=(thm31.STATIONARITY_FLOOR.id,),
    ),
    Mutant(
        "fedout.correction_dropped",
        "FedOut",
        "correction",
        "FedOut's local x-steps without the drift correction (each client along its own "
        "grad_x f_i; h computed, not used), in the fedout routine FedOut and the minimax "
        "FedOut share",
        {
            **_on(FEDOUT_ENTRIES, "outer_method", UncorrectedFedOut),
            **_on(("fednest-minimax",), "outer_method", UncorrectedMinimaxFedOut),
        },
        first=(thm31.STATIONARITY_FLOOR.id,),
    ),
    Mutant(
        "fedout.missing_1_over_tau",
        "FedOut",
        "normalisation",
        "FedOut's local x-step alpha where the rule gives alpha / tau_i, in the fedout "
        "routine FedOut and the minimax FedOut share",
        {
            **_on(FEDOUT_ENTRIES, "outer_method", UnscaledFedOut),
            **_on(("fednest-minimax",), "outer_method", UnscaledMinimaxFedOut),
        },
        first=(minimax.SYNTHETIC_LINEAR_RATE.id,),
    ),
    Mutant(
        "fednest.stale_inner_iterate",
        "FedNest outer loop",
        "stale",
        "the outer update runs at y^k instead of the y^{k+1} the inner calls computed "
        "(FedNest.step, shared by every variant)",
        {name: registry_variant(name, StaleInnerFedNest) for name in FEDNEST_VARIANTS},
        first=(minimax.SYNTHETIC_LINEAR_RATE.id,),
    ),
    Mutant(
        "fednest.extra_round",
        "FedNest outer loop",
        "count",
        "each outer iteration aggregates once more than Table 2's formula",
        {name: registry_variant(name, perturb.ExtraRound) for name in FEDNEST_VARIANTS},
        first=(rounds.FEDNEST.id,),
    ),
    Mutant(
        "lfedout.terms_minus_one",
        "LFedOut (local Neumann)",
        "count",
        "LFedOut's local Neumann series runs N - 1 terms",
        _on(LFEDOUT_ENTRIES, "outer_method", ShiftedTermsLFedOut, shift=-1),
        first=(lfednest.HETEROGENEITY_BIAS.id,),
    ),
    Mutant(
        "lfedout.step_halved",
        "LFedOut (local Neumann)",
        "step",
        "LFedOut's local Neumann series steps 1/(2l)",
        _on(LFEDOUT_ENTRIES, "outer_method", ScaledNeumannLFedOut, factor=0.5),
        first=(lfednest.HETEROGENEITY_BIAS.id,),
    ),
    Mutant(
        "minimax.outer_step_doubled",
        "FedNest minimax",
        "step",
        "the minimax FedOut steps 2 alpha",
        _on(("fednest-minimax",), "outer_method", ScaledStepMinimaxFedOut, factor=2.0),
        first=(minimax.SYNTHETIC_LINEAR_RATE.id,),
    ),
    Mutant(
        "minimax.ascent_step_halved",
        "FedNest minimax",
        "step",
        "the minimax FedInn ascent on y steps beta / 2",
        _on(("fednest-minimax",), "inner_method", ScaledStepFedInn, factor=0.5),
        first=(minimax.SYNTHETIC_LINEAR_RATE.id,),
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
    **{
        f"param.fednest-minimax.{keyword}.{way}": (
            "fednest-minimax's outer update (MinimaxFedOut, Sec. 2.5 eq. (12)) drops the indirect "
            "term: no Neumann series runs, so its N and lambda are never read by any code the "
            "entry runs"
        )
        for keyword, ways in (
            ("neumann_terms", ("plus1", "minus1")),
            ("neumann_step_size", ("half", "double")),
        )
        for way in ways
    },
    **{
        f"param.fednest-sgd.{keyword}.{way}": (
            "fednest-sgd's claims check its inner FedAvg fixed point (fednest.fedavg."
            "biased_fixed_point, one inner update) and its rounds per iteration, neither of which "
            "an outer or a Neumann step enters; its FedOut is fednest's, whose steps are pinned "
            "there (fednest.thm31.stationarity_floor, fednest.thm31.floor_slope_in_n)"
        )
        for keyword, ways in (
            ("outer_step_size", ("half", "double")),
            ("neumann_step_size", ("half", "double")),
        )
        for way in ways
    },
    **{
        f"param.lfednest-svrg.{keyword}.{way}": (
            "lfednest-svrg's one claim (fednest.rounds.lfednest_svrg) counts the rounds of an "
            "iteration (FedInn's 2T and LFedOut's one), which neither a step size, nor "
            "LFedOut's local Neumann count, nor the local-step count enters; its FedInn is pinned "
            "on fednest and its LFedOut on "
            "lfednest (fednest.lfednest.heterogeneity_bias)"
        )
        for keyword, ways in (
            ("neumann_terms", ("plus1", "minus1")),
            ("local_steps", ("plus1", "minus1")),
            ("inner_step_size", ("half", "double")),
            ("outer_step_size", ("half", "double")),
            ("neumann_step_size", ("half", "double")),
        )
        for way in ways
    },
}
