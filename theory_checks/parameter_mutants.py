"""Generated perturbations: every numeric parameter of every registered estimator, pinned by its
own entry's claims (issue 32; ``testbed mutate --set generated``).

For each registry entry (:data:`testbed.registry.BUILTIN`) and each parameter it takes (its
``defaults``), the realistic bug of a parameter read in one place and run from another: a real
value (a step alpha, beta, lambda, eta; the momentum rho) halved and doubled, an integer (a count
N, T, tau, K, M, S; a batch size; a client count) one more and one less. Each is a
:class:`~theory_checks.mutation.Mutant` whose builder
(:func:`~theory_checks.perturbed_variants.parameter_variant`) records the true value, the one
the claim passes and computes its bound or reference with, and runs with the perturbed one;
a step left ``None`` (``1 / L`` from the problem) is resolved the way the part resolves it
(:func:`resolver`) and then perturbed.

Each generated mutant must be killed by the entry's own "holds" claims (those whose check
builds the entry through the builder it is given), or be declared equivalent in the paper's
mutants module (``PARAMETER_EQUIVALENTS``: the mutant's name and the argument why it cannot
change any answer). What is not generated is listed with its reason (:data:`NOT_GENERATED`): a
parameter that is not a number (a switch, a name, an index), a perturbed value that the entry
rejects, an entry no claim of its own can check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from testbed.algorithms.aggitd import DEFAULT_OUTER_STEP_SIZE
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.fednest import FedNest
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.personalization import HGPPersonalization
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.estimators.aggitd import AggITD
from testbed.estimators.fednest import FedIHGP
from testbed.estimators.fixed_point import FixedPoint
from testbed.estimators.solvers import GradientDescent
from testbed.estimators.solvers import Neumann
from testbed.estimators.solvers import default_step_size
from testbed.info import EstimatorInfo
from testbed.registry import BUILTIN
from theory_checks.aggitd import mutants as aggitd
from theory_checks.classical import mutants as classical
from theory_checks.fedmsa import mutants as fedmsa
from theory_checks.fednest import mutants as fednest
from theory_checks.fednest.updates import FEDIHGP_CALL
from theory_checks.fednest.updates import FEDNEST_ITERATION
from theory_checks.fednest.updates import LFEDNEST_ITERATION
from theory_checks.hgp import mutants as hgp
from theory_checks.hgp.recursion import STATIC_ITERATES
from theory_checks.mutation import Mutant
from theory_checks.mutation import can_kill
from theory_checks.mutation import checks_through_builder
from theory_checks.perturbed_variants import Resolver
from theory_checks.perturbed_variants import parameter_variant
from theory_checks.registry import claims_of

#: Each paper's declared equivalents: generated mutant -> why no answer can change.
EQUIVALENTS: dict[str, str] = {
    **classical.PARAMETER_EQUIVALENTS,
    **fednest.PARAMETER_EQUIVALENTS,
    **aggitd.PARAMETER_EQUIVALENTS,
    **fedmsa.PARAMETER_EQUIVALENTS,
    **hgp.PARAMETER_EQUIVALENTS,
}

#: The perturbations of a real parameter and of an integer one: (label, rule, words).
REAL_RULES: tuple[tuple[str, Callable[[Any], Any], str], ...] = (
    ("half", lambda v: v / 2, "halved"),
    ("double", lambda v: 2 * v, "doubled"),
)
INT_RULES: tuple[tuple[str, Callable[[Any], Any], str], ...] = (
    ("plus1", lambda v: v + 1, "one more"),
    ("minus1", lambda v: v - 1, "one less"),
)

#: Parameters whose default is ``None`` and that are a number when a check gives one: steps
#: (``None``: resolved from the problem, :func:`resolver`) and counts (``None``: an exact
#: solver or a full batch, where the count does not exist and the case runs as built).
REAL_WHEN_GIVEN = ("inner_step_size", "neumann_step_size", "outer_step_size")
INT_WHEN_GIVEN = ("batch_size", "inner_steps")

#: Parameters that are not numbers to perturb, with the reason.
NOT_NUMBERS: dict[str, str] = {
    "participation": "None means every client: a fraction or a count is a sampling design the "
    "client-sampling claims pass themselves, not a value to misread",
    "graph_seed": "a seed choosing which graph of the family is drawn: the paper's results hold "
    "on every graph of the family, so a claim holds on seed + 1 as on seed and "
    "none can (or should) pin it",
    "index": "a truncation index chosen by the check (None: drawn), not a value the "
    "estimator can misread",
}

#: An algorithm's fields that the run's federated context reads as its configuration
#: (:func:`testbed.algorithms.base.run_algorithm`), not the algorithm's own methods.
HARNESS_FIELDS = ("participation", "batch_size")
HARNESS_REASON = (
    "read by the run's federated context as its configuration (run_algorithm "
    "builds the context from the algorithm's participation and batch size): the "
    "value recorded is the value run, so a perturbation that records one value "
    "and runs another has no place to live"
)

# How each part resolves a ``None`` step at run time (the part's own rule), so that the
# perturbation of a step left to the problem is the perturbation of the step it runs with.
_RESOLVERS: dict[tuple[type, str], Resolver] = {
    (GradientDescent, "step_size"): lambda p, pb: default_step_size(pb, "GradientDescent"),
    (Neumann, "step_size"): lambda p, pb: default_step_size(pb, "Neumann"),
    (FixedPoint, "step_size"): lambda p, pb: default_step_size(pb, "FixedPoint"),
    (FedIHGP, "inner_step_size"): lambda p, pb: p.steps(pb)[0],
    (FedIHGP, "neumann_step_size"): lambda p, pb: p.steps(pb)[1],
    (AggITD, "inner_step_size"): lambda p, pb: p.step_sizes(pb)[0],
    (AggITD, "neumann_step_size"): lambda p, pb: p.step_sizes(pb)[1],
    (FBOAggITD, "inner_step_size"): lambda p, pb: p.estimator.step_sizes(pb)[0],
    (FBOAggITD, "neumann_step_size"): lambda p, pb: p.estimator.step_sizes(pb)[1],
    (FBOAggITD, "outer_step_size"): lambda p, pb: DEFAULT_OUTER_STEP_SIZE,
    (FedNest, "inner_step_size"): lambda p, pb: p.resolve_steps(pb).inner,
    (FedNest, "outer_step_size"): lambda p, pb: p.resolve_steps(pb).outer,
    (FedNest, "neumann_step_size"): lambda p, pb: p.resolve_steps(pb).neumann,
    (HyperGradientPush, "neumann_step_size"): lambda p, pb: p.step_size(pb),
    (StochasticGradientPush, "step_size"): lambda p, pb: p.gamma(pb, 0),
    (HGPPersonalization, "outer_step_size"): lambda p, pb: p.step_size(pb),
}


def resolver(cls: type, field: str) -> Resolver | None:
    """The rule by which ``cls`` (or the nearest of its bases in the table) resolves a ``None``
    ``field``; ``None`` where a ``None`` is not a step (an exact solver, a full batch)."""
    for base in cls.__mro__:
        if (base, field) in _RESOLVERS:
            return _RESOLVERS[(base, field)]
    return None


@dataclasses.dataclass(frozen=True)
class NotGenerated:
    """A parameter (or a whole entry: ``keyword`` "*") without generated perturbations, and
    why."""

    entry: str
    keyword: str
    reason: str


def killing_claims(entry: str) -> list[str]:
    """The entry's own "holds" claims that check it through the builder a mutant replaces."""
    return [c.id for c in claims_of(entry) if can_kill(c) and checks_through_builder(c, entry)]


def parameter_kind(keyword: str, default: Any) -> str | None:
    """ "real", "int", or ``None`` (not a number to perturb)."""
    if isinstance(default, bool):
        return None
    if keyword in NOT_NUMBERS:
        return None
    if keyword.endswith("step_size") or keyword == "momentum":
        return "real" if default is None or isinstance(default, (int, float)) else None
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "real"
    if default is None and keyword in REAL_WHEN_GIVEN:
        return "real"
    if default is None and keyword in INT_WHEN_GIVEN:
        return "int"
    return None


#: Claims each entry's generated mutants try first (``Mutant.first``): the exact claim of the
#: entry's printed update, which measures any parameter it runs with against the formula (a
#: kill by a measurement, before a claim whose guard refuses the mutant: FedIHGP with N - 1
#: terms is refused by the claims that ask for ``N' = N - 1``). A fixed table: the order is
#: deterministic.
FIRST: dict[str, tuple[str, ...]] = {
    "fedihgp": (FEDIHGP_CALL.id,),
    "fednest": (FEDNEST_ITERATION.id,),
    "lfednest": (LFEDNEST_ITERATION.id,),
    "hgp-static": (STATIC_ITERATES.id,),
}


# Values that locate a keyword whose value is None in the built object (two valid values of
# its kind, far from any default, so the two builds differ exactly where it lands).
_PROBES = {"real": (0.0123, 0.0234), "int": (2, 3)}


def _why_invalid(info: EstimatorInfo, keyword: str, value: Any) -> str:
    """Why the entry rejects ``keyword = value`` ("" when it builds)."""
    try:
        info.build(**{keyword: value})
    except (ValueError, TypeError) as error:
        return f"{keyword} = {value!r} is rejected: {str(error)[:160]}"
    return ""


def generate(
    entries: tuple[EstimatorInfo, ...] = tuple(BUILTIN),
) -> tuple[tuple[Mutant, ...], tuple[NotGenerated, ...]]:
    """The generated mutants of ``entries`` and what is not generated, with the reason."""
    mutants: list[Mutant] = []
    skipped: list[NotGenerated] = []
    for info in entries:
        if not killing_claims(info.name):
            skipped.append(NotGenerated(info.name, "*", _why_unchecked(info)))
            continue
        for keyword, default in info.defaults.items():
            if info.role == "algorithm" and keyword in HARNESS_FIELDS:
                skipped.append(NotGenerated(info.name, keyword, HARNESS_REASON))
                continue
            kind = parameter_kind(keyword, default)
            if kind is None:
                skipped.append(
                    NotGenerated(
                        info.name,
                        keyword,
                        NOT_NUMBERS.get(keyword, f"not a number ({default!r}: a switch or a name)"),
                    )
                )
                continue
            for label, rule, words in REAL_RULES if kind == "real" else INT_RULES:
                why = "" if default is None else _why_invalid(info, keyword, rule(default))
                name = f"param.{info.name}.{keyword}.{label}"
                if why:
                    skipped.append(NotGenerated(info.name, f"{keyword}.{label}", why))
                    continue
                mutants.append(
                    Mutant(
                        name,
                        f"{info.name} parameters",
                        "count" if kind == "int" else "step",
                        f"{info.name} runs with {keyword} {words} while the true {keyword} is "
                        "recorded",
                        {
                            info.name: parameter_variant(
                                info.name, keyword, rule, _PROBES[kind], resolver
                            )
                        },
                        first=FIRST.get(info.name, ()),
                        equivalent=EQUIVALENTS.get(name, ""),
                    )
                )
    return tuple(mutants), tuple(skipped)


def _why_unchecked(info: EstimatorInfo) -> str:
    if info.no_claims_reason:
        return "no claim checks the entry: " + info.no_claims_reason
    named = [c.id for c in claims_of(info.name)]
    return (
        'no "holds" claim of its own checks the entry through its builder (its claims: '
        + (", ".join(named) or "none")
        + "); the estimator it varies is pinned by its own"
    )


GENERATED, NOT_GENERATED = generate()

#: Generated mutants that survive their entry's suite and are not equivalent: a parameter no
#: claim of the entry pins yet, with the claim that would (they stay "survived" in ``testbed
#: mutate``; the slow test expects them to survive, strictly, so pinning one shows). None today:
#: the last six (FedNest's alpha / 2; LFedNest's beta / 2, alpha / 2 and tau - 1; hgp-static's
#: M +- 1) are killed by ``fednest.updates.*`` and ``hgp.recursion.static_iterates``.
OPEN: dict[str, str] = {}


def unknown_equivalents() -> list[str]:
    """Names in a paper's ``PARAMETER_EQUIVALENTS`` that no generated mutant has (a stale
    entry of the table)."""
    return sorted(set(EQUIVALENTS) - {m.name for m in GENERATED})


__all__ = [
    "EQUIVALENTS",
    "FIRST",
    "GENERATED",
    "NOT_GENERATED",
    "OPEN",
    "NotGenerated",
    "generate",
    "killing_claims",
    "parameter_kind",
    "resolver",
    "unknown_equivalents",
]
