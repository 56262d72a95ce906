"""Input validation and divergence detection shared by every estimator and outer algorithm.

One place checks what a caller hands the public entry points (``Estimator.estimate``,
``OuterAlgorithm.step``, ``run_algorithm``): :func:`check_point` compares ``x`` with the
problem's own starting point (type, shape, dtype, device, finiteness) and says what it expected.
:func:`check_stable_step` refuses a step size outside the stability region that the problem's
constants give, and :func:`check_estimate` refuses a non-finite estimate, so no estimator
returns a silently divergent number.

The base classes call these from their public entry points, around the hooks a subclass
implements (``Estimator.init`` and ``Estimator.estimate`` around ``initial_state`` and
``compute``; ``OuterAlgorithm.step`` around ``advance``); no estimator copies them.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

import torch


class InputError(ValueError):
    """An argument that does not fit the problem (shape, dtype, device, type, NaN)."""


class DivergenceError(ValueError):
    """A step outside the stability region, or iterates that became non-finite or exploded."""


#: How far an iterate may move away before a run counts as diverged: ``||x_k|| >
#: GROWTH_FACTOR * max(1, ||x_0||)``. Why 1e12: the testbed's problems have optima of norm
#: O(1)-O(1e3) and legitimate runs move O(1) factors; an iterate 1e12 times past its start is
#: on its way to overflow (float32 overflows at 3e38, a few dozen geometric steps further).
GROWTH_FACTOR = 1e12

# problem -> (dim_x, dtype, device, constants or None); keyed by id with a weak reference, so
# a freed problem's entry is dropped and a new object at the same address is not confused.
_SPECS: dict[int, tuple[weakref.ref[Any], dict[str, Any]]] = {}


def check_positive_int(value: int, name: str, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_step(value: float | None, name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(
            f"{name} must be a positive finite number, got {value!r} (a {type(value).__name__})"
        )
    if not (value > 0.0 and value < float("inf")):
        raise InputError(f"{name} must be a positive finite number, got {value!r}")


def check_local_steps(local_steps: Any) -> None:
    """``tau``: an int >= 1 for every client, or a non-empty sequence of per-client ints >= 1
    (device heterogeneity); the one rule of FedNest, AggITD and every algorithm with local
    steps."""
    if isinstance(local_steps, int) and not isinstance(local_steps, bool):
        check_positive_int(local_steps, "local_steps", minimum=1)
        return
    if (
        isinstance(local_steps, (bool, str, bytes))
        or not isinstance(local_steps, Sequence)
        or not local_steps
    ):
        raise InputError(
            f"local_steps must be an int >= 1 or a non-empty sequence of them, got {local_steps!r}"
        )
    for tau in local_steps:
        check_positive_int(tau, "local_steps[i]", minimum=1)


S = TypeVar("S")


def resolve_strategy(value: Any, table: Mapping[str, S], kind: type, name: str) -> S:
    """The strategy object of a strategy field: ``value`` itself when it is a ``kind``, else the
    entry of ``table`` it names (a strategy field accepts a name too, e.g. FedNest's
    ``inner_method="sgd"``, as configs give it)."""
    if isinstance(value, kind):
        return value  # type: ignore[return-value]
    if isinstance(value, str) and value in table:
        return table[value]
    names = [repr(key) for key in table]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    raise InputError(f"{name} must be {listed} (or a {kind.__name__}), got {value!r}")


def _problem_facts(problem: Any) -> dict[str, Any]:
    key = id(problem)
    hit = _SPECS.get(key)
    if hit is not None and hit[0]() is problem:
        return hit[1]
    initial = getattr(problem, "initial_point", None)
    if initial is not None:
        x0 = initial()[0]
        dtype, device = x0.dtype, x0.device
    else:  # e.g. RiskAverse (FedMSA's multi-level problem): float64 on the CPU, as built
        dtype = getattr(problem, "dtype", torch.float64)
        device = torch.device(getattr(problem, "device", "cpu"))
    facts: dict[str, Any] = {
        "dim_x": int(problem.dim_x),
        "dtype": dtype,
        "device": device,
        "constants": None,
    }

    def forget(_: object, key: int = key) -> None:
        _SPECS.pop(key, None)

    try:
        ref = weakref.ref(problem, forget)
    except TypeError:  # an object that cannot be weakly referenced: do not cache it
        return facts
    _SPECS[key] = (ref, facts)
    return facts


def problem_constants(problem: Any) -> Any:
    """The problem's :class:`~problems.ProblemConstants` (cached), or ``None`` without them."""
    constants = getattr(problem, "constants", None)
    if constants is None:
        return None
    facts = _problem_facts(problem)
    if facts["constants"] is None:
        facts["constants"] = constants()
    return facts["constants"]


#: What the estimators and algorithms read of a problem before anything else.
PROBLEM_ATTRIBUTES = ("kind", "dim_x", "n_clients")


def check_problem_object(problem: Any, who: str) -> None:
    """Raise :class:`InputError` unless ``problem`` is a testbed problem (without the check,
    ``None`` or another object fails with "'NoneType' object has no attribute 'dim_x'" from
    deep inside)."""
    if any(not hasattr(problem, name) for name in PROBLEM_ATTRIBUTES):
        raise InputError(
            f"{who}: problem must be a testbed problem (for example "
            "problems.QuadraticBilevel.random(...)); got a "
            f"{type(problem).__module__}.{type(problem).__name__}"
        )


def check_inner_form(problem: Any, who: str) -> None:
    """Raise :class:`InputError` unless ``problem`` has an inner variable ``y``
    (``initial_point()``): a multi-level compositional problem such as ``RiskAverse`` has none,
    and FedNest, AggITD and AID on it would fail with "no attribute 'initial_point'"."""
    if not hasattr(problem, "initial_point"):
        name = getattr(problem, "name", type(problem).__name__)
        raise InputError(
            f"{who} needs a problem with an inner variable y (initial_point()); "
            f"{name} is a {getattr(problem, 'n_levels', 'multi')}-level "
            "compositional problem without one: FedMSA's multi-level form "
            "(fedmsa-mco) runs on it"
        )


def check_rng(rng: Any, who: str) -> None:
    """Raise :class:`InputError` for a missing generator (without the check, ``rng=None``
    fails with "'NoneType' object has no attribute 'integers'" at the first draw, or passes
    unseen where no draw happens)."""
    # None only: checks pass stand-ins (a fixed index; a guard that fails on any draw), and
    # looking at an attribute of the guard would count as a draw
    if rng is None:
        raise InputError(
            f"{who}: rng must be a numpy.random.Generator "
            "(numpy.random.default_rng(seed)); got None"
        )


def check_state(expected: Any, state: Any, problem: Any, who: str) -> None:
    """Raise :class:`InputError` when ``state`` does not fit ``problem``: a tensor of another
    shape, dtype or device than in ``expected`` (a fresh initial state for ``problem``) at the
    same place. Without the check, a state from another problem fails with "Expected size
    for first two dimensions of batch2 tensor to be: [3, 4] but got: [3, 3]"."""
    name = getattr(problem, "id", type(problem).__name__)

    def walk(want: Any, got: Any, where: str) -> None:
        if isinstance(want, torch.Tensor):
            if (
                not isinstance(got, torch.Tensor)
                or got.shape != want.shape
                or got.dtype != want.dtype
                or not _same_device(got.device, want.device)
            ):
                shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
                raise InputError(
                    f"{who}: the state does not fit problem {name}: {where} is "
                    f"{shape}, the problem's is {tuple(want.shape)} "
                    f"({want.dtype}); make the state with init(problem)"
                )
        elif (
            dataclasses.is_dataclass(want)
            and not isinstance(want, type)
            and type(got) is type(want)
        ):
            for field in dataclasses.fields(want):
                walk(
                    getattr(want, field.name),
                    getattr(got, field.name),
                    f"{where}.{field.name}" if where else field.name,
                )
        elif isinstance(want, tuple) and isinstance(got, tuple) and len(want) == len(got):
            fields = getattr(want, "_fields", None) or [f"[{i}]" for i in range(len(want))]
            for field, w, g in zip(fields, want, got, strict=True):
                walk(w, g, f"{where}.{field}" if where else str(field))
        elif isinstance(want, tuple):
            raise InputError(
                f"{who}: the state does not fit problem {name}: expected a "
                f"{type(want).__name__} (from init(problem)), got a "
                f"{type(got).__name__}"
            )

    walk(expected, state, "")


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def check_point(problem: Any, x: Any, what: str = "x") -> None:
    """Raise :class:`InputError` unless ``x`` is an outer point of ``problem``.

    Expected: a ``torch.Tensor`` of shape ``(dim_x,)`` in the problem's dtype, on its device,
    with finite entries (the dtype and device of ``problem.initial_point()[0]``).
    """
    facts = _problem_facts(problem)
    name = getattr(problem, "id", type(problem).__name__)
    expected = (
        f"a torch.Tensor of shape ({facts['dim_x']},), dtype {facts['dtype']}, on {facts['device']}"
    )
    if not isinstance(x, torch.Tensor):
        hint = (
            f"; convert it with torch.as_tensor({what}, dtype={facts['dtype']})"
            if hasattr(x, "__len__")
            else ""
        )
        raise InputError(
            f"{what} must be {expected} for problem {name}; got a "
            f"{type(x).__module__}.{type(x).__name__}{hint}"
        )
    if tuple(x.shape) != (facts["dim_x"],):
        raise InputError(
            f"{what} must be {expected} for problem {name}; got shape {tuple(x.shape)}"
        )
    if x.dtype != facts["dtype"]:
        raise InputError(f"{what} must be {expected} for problem {name}; got dtype {x.dtype}")
    if not _same_device(x.device, facts["device"]):
        raise InputError(f"{what} must be {expected} for problem {name}; got device {x.device}")
    finite = torch.isfinite(x)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        raise InputError(
            f"{what} has {bad} NaN or infinite entr{'y' if bad == 1 else 'ies'} "
            f"(problem {name}); a hypergradient is defined only at a finite point"
        )


def check_stable_step(step: float | None, problem: Any, what: str) -> None:
    """Refuse a step ``>= 2 / L`` when the problem knows ``L`` (its inner smoothness).

    A gradient step or a Neumann term with step ``s`` multiplies the error by ``I - s H``,
    whose spectral radius is below 1 exactly when ``0 < s < 2 / L`` for ``mu I <= H <= L I``;
    at or beyond ``2 / L`` the mode at ``L`` does not decay and the result diverges.
    """
    if step is None:
        return
    constants = problem_constants(problem)
    if constants is None:
        return
    L = float(constants.L)
    check_step_below(
        step,
        2.0 / L,
        what,
        problem,
        f"(0, 2/L) = (0, {2.0 / L:.6g})",
        f"L = {L:.6g}",
        f"the default 1/L = {1.0 / L:.6g}",
    )


def check_step_below(
    step: float, bound: float, what: str, problem: Any, region: str, constant: str, default: str
) -> None:
    """Refuse ``step >= bound`` (the end of a stability region): one line naming the step, the
    region, the problem and its constant, and the default step."""
    if not step < bound:
        raise DivergenceError(
            f"{what} = {step:.6g} is outside the stability region {region} of problem "
            f"{getattr(problem, 'id', type(problem).__name__)} ({constant}): the iteration "
            f"would diverge; use a step below {bound:.6g} ({default})"
        )


def check_stable_steps(estimator: Any, problem: Any) -> None:
    """:func:`check_stable_step` on every step size an estimator is configured with: its
    ``neumann_step_size``, and the ``step_size`` of its inner solver and of its linear solver
    (Neumann, fixed point). The solvers themselves stay plain building blocks (tests compare
    them with federated loops at any step); the estimators' entry point refuses."""
    name = type(estimator).__name__
    check_stable_step(
        getattr(estimator, "neumann_step_size", None), problem, f"{name}.neumann_step_size"
    )
    for part in ("inner", "linear_solver"):
        solver = getattr(estimator, part, None)
        # the classical solvers (GradientDescent, Neumann, FixedPoint) take a step on the
        # global H; HGP's SGP (testbed.decentralized) too: on a complete graph its mixing
        # averages the clients' steps, y <- y - gamma mean_i grad g_i(y), gradient descent on
        # the mean with step gamma, so gamma >= 2/L diverges whatever the graph (sparser graphs
        # only shrink the stable steps: a client's step is gamma / omega_i)
        if not type(solver).__module__.startswith(("testbed.estimators", "testbed.decentralized")):
            continue
        step = getattr(solver, "step_size", None)
        if isinstance(step, (int, float)) and not isinstance(step, bool):
            check_stable_step(
                float(step), problem, f"{name}.{part}.step_size ({type(solver).__name__})"
            )


def check_estimate(problem: Any, value: Any, who: str) -> None:
    """A hypergradient estimate has the shape of x and finite entries, or this raises."""
    facts = _problem_facts(problem)
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != (facts["dim_x"],):
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise RuntimeError(
            f"{who} returned an estimate of shape {shape}, expected "
            f"({facts['dim_x']},): an internal error"
        )
    if not bool(torch.isfinite(value).all()):
        raise DivergenceError(
            f"{who}: the estimate is not finite (NaN or inf): the iteration diverged; check "
            "the step sizes against 2/L and the number of terms"
        )


def check_iterate(x: torch.Tensor, x0_norm: float, step: int, who: str) -> None:
    """Raise ``DivergenceError("diverged at step k")`` for a non-finite or exploded iterate."""
    if not bool(torch.isfinite(x).all()):
        raise DivergenceError(f"{who} diverged at step {step}: the iterate x is not finite")
    norm = float(x.norm())
    limit = GROWTH_FACTOR * max(1.0, x0_norm)
    if not math.isfinite(norm) or norm > limit:
        raise DivergenceError(
            f"{who} diverged at step {step}: ||x|| = {norm:.3g} grew past "
            f"{GROWTH_FACTOR:.0e} x max(1, ||x_0||) = {limit:.3g}"
        )


def rows_to_check(x: torch.Tensor, x0_norm: float) -> list[int]:
    """The rows of a stack of iterates ``x`` (``(R, d)``, one per replicate of a batched run)
    that :func:`check_iterate` could refuse: a row not finite, or whose batched norm is not
    below the limit by a relative margin of 1e-9. A batched norm may differ from the row's own
    ``float(x_r.norm())`` in its last bits only, far less than the margin, so a row not picked
    passes the check; a picked row is decided by :func:`check_iterate` itself, on its own norm
    (the batched runs of FedNest and FBO-AggITD refuse exactly the rows their unbatched runs
    refuse)."""
    limit = GROWTH_FACTOR * max(1.0, x0_norm)
    norms = torch.linalg.vector_norm(x, dim=1)
    picked = ~(norms <= limit * (1.0 - 1e-9)) | ~torch.isfinite(x).all(dim=1)
    return [int(r) for r in picked.nonzero().flatten().tolist()]
