"""Validation helpers shared by the problem families: every error names the problem it comes from.

Shapes, finiteness, symmetry and positive definiteness of the arrays that define a problem (a
chunk of matrices at a time, so no pass holds a stack-sized temporary), the knobs of a recipe
(integers, dimensions, seeds, condition numbers, sizes, non-negative and positive numbers), and
the per-sample arrays of a finite sample set checked against their client arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from problems._base import ProblemError
from problems._base import as_tensor


def check_finite(name: str, problem: str, array: torch.Tensor) -> None:
    if array.ndim == 0 or array.numel() == 0:
        finite = bool(torch.isfinite(array).all())
    else:
        step = chunk_size(array)
        finite = all(
            bool(torch.isfinite(array[s : s + step]).all())
            for s in range(0, int(array.shape[0]), step)
        )
    if not finite:
        raise ProblemError(f"{problem}: array {name!r} has NaN or inf entries")


def check_shape(name: str, problem: str, array: torch.Tensor, shape: tuple[int, ...]) -> None:
    if tuple(array.shape) != shape:
        raise ProblemError(
            f"{problem}: array {name!r} has shape {tuple(array.shape)}, expected {shape}"
        )


#: Matrices per chunk in the validation and construction passes over a stack ``(M, d, d)``: a
#: pass never holds more than this many matrices' worth of temporaries. Why 2**25 bytes: 32 MiB is
#: large enough that the per-chunk overhead is nothing (a few hundred chunks at M = 10,000,
#: d = 200) and small enough that temporaries stay far below the arrays themselves.
CHUNK_BYTES = 1 << 25


def chunk_size(array: torch.Tensor) -> int:
    """Leading-axis entries of ``array`` per chunk (see :data:`CHUNK_BYTES`)."""
    return max(1, CHUNK_BYTES // max(1, array[:1].numel() * array.element_size()))


def asymmetry(array: torch.Tensor) -> float:
    """``max |a - a^T|`` over a stack of square matrices, one chunk at a time (no full-size
    temporary)."""
    step = chunk_size(array)
    worst = 0.0
    for start in range(0, int(array.shape[0]), step):
        part = array[start : start + step]
        worst = max(worst, float((part - part.transpose(-1, -2)).abs().max()))
    return worst


def abs_max(array: torch.Tensor) -> float:
    """``max |a|``, one chunk at a time."""
    if array.numel() == 0:
        return 0.0
    if array.ndim == 0:
        return float(array.abs())
    step = chunk_size(array)
    return max(float(array[s : s + step].abs().max()) for s in range(0, int(array.shape[0]), step))


def spectral_norms(array: torch.Tensor) -> torch.Tensor:
    """``||a_i||_2`` of every matrix in a stack ``(M, m, n)``, one chunk at a time (the batched
    SVD copies its input)."""
    step = chunk_size(array)
    return torch.cat(
        [
            torch.linalg.matrix_norm(array[s : s + step], ord=2)
            for s in range(0, int(array.shape[0]), step)
        ]
    )


def per_problem(
    array: torch.Tensor, reduce: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """``reduce`` (a reduction of a chunk ``(k, ...)`` to ``(k,)``) of every entry of the
    leading axis of ``array`` (the problems of a batch), one chunk of problems at a time."""
    step = chunk_size(array)
    return torch.cat([reduce(array[s : s + step]) for s in range(0, int(array.shape[0]), step)])


def _amax_after_first(values: torch.Tensor) -> torch.Tensor:
    return values.reshape(values.shape[0], -1).amax(dim=1)


def abs_maxima(array: torch.Tensor) -> torch.Tensor:
    """:func:`abs_max` of every problem of a batch ``(R, ...)``: ``(R,)`` (a maximum: the same
    float whatever the order it is taken in)."""
    return per_problem(array, lambda part: _amax_after_first(part.abs()))


def asymmetries(array: torch.Tensor) -> torch.Tensor:
    """:func:`asymmetry` of every problem of a batch of stacks ``(R, ..., d, d)``: ``(R,)``."""
    return per_problem(array, lambda part: _amax_after_first((part - part.transpose(-1, -2)).abs()))


#: Why 1e-10: the arrays are float64 and built symmetric; an asymmetry above this relative to
#: the array's largest entry (at least 1) is input error, not round-off.
SYMMETRY_RTOL = 1e-10


def check_symmetric(name: str, problem: str, array: torch.Tensor) -> float:
    """Raise unless every matrix is symmetric up to round-off; return ``max |a - a^T|``."""
    scale = max(1.0, abs_max(array))
    gap = asymmetry(array)
    if gap > SYMMETRY_RTOL * scale:
        raise ProblemError(f"{problem}: array {name!r} must be symmetric")
    return gap


def check_symmetric_together(name: str, problem: str, array: torch.Tensor) -> None:
    """:func:`check_symmetric` of every problem of a batch ``(R, ..., d, d)``, each against its
    own scale (the same floats and comparisons as alone); raises the first failing problem's
    error."""
    scales = abs_maxima(array).clamp(min=1.0)
    if bool((asymmetries(array) > SYMMETRY_RTOL * scales).any()):
        raise ProblemError(f"{problem}: array {name!r} must be symmetric")


#: Relative asymmetry up to which a symmetric operator is applied as stored. Why 1e-14: built
#: problems are symmetric to a few ulps (``root (I + S) root`` leaves ~6e-16 at d = 200), where
#: ``a^T v`` and the loss's ``sym(a) v`` differ by round-off; input that is symmetric only to the
#: 1e-10 that :func:`check_symmetric` accepts would move the closed-form oracles by up to that
#: much, so it is applied through a symmetrised copy instead.
SYMMETRIC_RTOL = 1e-14


def symmetric_operator(array: torch.Tensor, gap: float | None = None) -> torch.Tensor:
    """``array`` itself when it is symmetric to round-off, else ``(a + a^T) / 2`` (a copy).

    The closed-form oracles apply a symmetric matrix ``a`` as ``v^T a`` (rows of ``a`` streamed
    in order, the fast batched product on the CPU); the loss ``1/2 y^T a y`` has Hessian
    ``sym(a)``, so this keeps the two equal to round-off.
    """
    gap = asymmetry(array) if gap is None else gap
    return operator_of(array, gap <= SYMMETRIC_RTOL * max(1.0, abs_max(array)))


def operator_of(array: torch.Tensor, as_stored: bool) -> torch.Tensor:
    """``array`` itself when it is symmetric to round-off (``as_stored``), else
    ``(a + a^T) / 2``: :func:`symmetric_operator` with that decision made."""
    return array if as_stored else 0.5 * (array + array.transpose(-1, -2))


def symmetric_to_round_off(array: torch.Tensor) -> list[bool]:
    """For every problem of a batch ``(R, ..., d, d)``, whether :func:`symmetric_operator`
    applies its stack as stored (the same comparison of the same floats)."""
    gaps = asymmetries(array)
    return (gaps <= SYMMETRIC_RTOL * abs_maxima(array).clamp(min=1.0)).tolist()


def check_positive_definite(
    name: str, problem: str, array: torch.Tensor, *, together: bool = False
) -> torch.Tensor:
    """Raise unless every matrix in the stack is symmetric positive definite; return eigenvalues.

    The eigenvalues are computed a chunk of matrices at a time (LAPACK overwrites a copy of its
    input, so one batched call would need a temporary as large as the whole stack; CPU LAPACK
    runs its routine on each matrix of a batch as on that matrix alone). ``together``: the
    stacks of a batch of problems ``(R, ...)``, each checked symmetric against its own scale
    (:func:`check_symmetric_together`).
    """
    (check_symmetric_together if together else check_symmetric)(name, problem, array)
    if array.ndim == 2:
        eigenvalues = torch.linalg.eigvalsh(array)
    else:
        flat = array.reshape(-1, *array.shape[-2:])
        step = chunk_size(flat)
        eigenvalues = torch.cat(
            [torch.linalg.eigvalsh(flat[s : s + step]) for s in range(0, int(flat.shape[0]), step)]
        ).reshape(*array.shape[:-1])
    lowest = float(eigenvalues.min())
    if lowest <= 0.0:
        raise ProblemError(
            f"{problem}: inner Hessian {name!r} is not positive definite "
            f"(smallest eigenvalue {lowest:.3g})"
        )
    return eigenvalues


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def check_int(problem: str, name: str, value: object, minimum: int | None = 0) -> None:
    """An integer (not a bool, float or string) ``>= minimum`` (any integer: ``None``)."""
    if not _is_int(value):
        what = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise ProblemError(f"{problem}: {name} must be {what}, got {value!r}")
    if minimum is not None and int(value) < minimum:  # type: ignore[call-overload]
        raise ProblemError(f"{problem}: {name} must be an integer >= {minimum}, got {value!r}")


def check_dims(problem: str, dims: object, minimum_length: int = 1) -> tuple[int, ...]:
    """A sequence of at least ``minimum_length`` integers ``>= 1`` (not a string, not floats:
    ``dims = (2.5, 3)`` used to build dimension 2), as a tuple."""
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence):
        raise ProblemError(f"{problem}: dims must be a sequence of integers >= 1, got {dims!r}")
    if len(dims) < minimum_length or not all(
        _is_int(d) and int(d) >= 1  # type: ignore[call-overload]
        for d in dims
    ):
        raise ProblemError(
            f"{problem}: dims must be {minimum_length} or more integers >= 1, got {tuple(dims)!r}"
        )
    return tuple(int(d) for d in dims)  # type: ignore[call-overload]


def check_clients(problem: str, n_clients: int) -> None:
    if not _is_int(n_clients):
        raise ProblemError(f"{problem}: n_clients must be an integer >= 1, got {n_clients!r}")
    if n_clients < 1:
        raise ProblemError(f"{problem}: needs at least one client, got {n_clients}")


def check_seed(problem: str, seed: object) -> None:
    """A seed numpy accepts: an integer >= 0 or a sequence of them."""
    values = list(seed) if isinstance(seed, (list, tuple)) else [seed]
    if not values or not all(_is_int(v) and int(v) >= 0 for v in values):  # type: ignore
        raise ProblemError(
            f"{problem}: seed must be an integer >= 0 (or a sequence of them), got {seed!r}"
        )


#: Largest condition number a closed-form problem accepts. Why 1e12: the exact answers are
#: float64 linear solves whose relative error is about kappa * 1e-16, so beyond 1e12 the
#: "exact" reference keeps fewer than 4 correct digits and every check against it is void
#: (and at 1e300 the spectrum itself overflows).
MAX_CONDITION_NUMBER = 1e12


def check_condition_number(problem: str, condition_number: float) -> None:
    if not _is_real(condition_number):
        raise ProblemError(
            f"{problem}: condition number must be a number >= 1, got {condition_number!r}"
        )
    if not math.isfinite(condition_number) or condition_number < 1.0:
        raise ProblemError(
            f"{problem}: condition number must be a finite number >= 1, got {condition_number}"
        )
    if condition_number > MAX_CONDITION_NUMBER:
        raise ProblemError(
            f"{problem}: condition number {condition_number:.3g} is above "
            f"{MAX_CONDITION_NUMBER:.0e}: float64 solves would leave the exact answers with "
            "no correct digits"
        )


#: Most float64 numbers a drawn problem's arrays may hold: 2^27, 1 GiB. Why: the exact answers
#: are dense solves of ``O(d^3)`` work on every client's matrices, so a dimension in the
#: thousands already takes minutes per case; every recipe the claims, configs and benchmarks
#: draw holds below 10^7 numbers, and ``QuadraticBilevel.random(1, 10**6, 10**6, ...)`` would
#: ask numpy for 7.28 TiB without this bound.
MAX_FLOATS = 2**27


def check_size(problem: str, floats: int, what: str) -> None:
    """A draw whose arrays hold ``floats`` numbers (``what``: the formula in words) within
    :data:`MAX_FLOATS`, checked before anything is allocated."""
    if floats > MAX_FLOATS:
        raise ProblemError(
            f"{problem}: its arrays, about {what}, make {floats:,} float64 numbers "
            f"({floats * 8 / 2**30:,.1f} GiB), above the limit of {MAX_FLOATS:,} (1 GiB) for a "
            "closed-form problem; choose smaller dimensions, clients or samples"
        )


def check_nonnegative(
    problem: str, name: str, value: float, error: type[ProblemError] = ProblemError
) -> float:
    """A finite real number ``>= 0`` (not a bool or a string), returned as a float.

    The one rule for every non-negative knob of the problems and the workloads (a workload raises
    its :class:`~problems.workloads.WorkloadError` through ``error``).
    """
    if not _is_real(value):
        raise error(f"{problem}: {name} must be a number >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0.0:
        raise error(f"{problem}: {name} must be finite and >= 0, got {value}")
    return float(value)


def check_positive(problem: str, name: str, value: float) -> float:
    """A finite real number ``> 0`` (not a bool or a string), returned as a float."""
    if not _is_real(value) or not math.isfinite(value) or value <= 0.0:
        raise ProblemError(f"{problem}: {name} must be a positive number, got {value}")
    return float(value)


def check_arrays(
    problem: str,
    given: dict[str, Any],
    shapes: dict[str, str],
    symmetric: tuple[str, ...] = (),
    *,
    together: bool = False,
) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """The arrays that define a problem, as float64 tensors (:func:`as_tensor`), checked.

    ``shapes[k]`` names the axes of array ``given[k]`` (``"M dy dx"``); an axis takes its size
    from the first array that has it, and every later array must agree. The first axis of every
    array is the client axis (at least one client). Every entry must be finite, and the arrays in
    ``symmetric`` stacks of symmetric matrices. ``together``: every array holds a batch of
    problems' arrays on a leading axis before those named, each problem checked as it is alone
    (its symmetry against its own scale: :func:`check_symmetric_together`).

    Returns:
        ``(tensors, sizes)``: the tensors by name and the size of every named axis.
    """
    arrays = {key: as_tensor(value) for key, value in given.items()}
    for key, array in arrays.items():
        check_finite(key, problem, array)
    sizes: dict[str, int] = {}
    lead = 1 if together else 0
    for key, axes in shapes.items():
        names = axes.split()
        if arrays[key].ndim != len(names) + lead:
            raise ProblemError(f"{problem}: array {key!r} must have shape ({', '.join(names)})")
        for axis, size in zip(names, arrays[key].shape[lead:], strict=True):
            sizes.setdefault(axis, int(size))
        expected = (*arrays[key].shape[:lead], *(sizes[axis] for axis in names))
        check_shape(key, problem, arrays[key], tuple(expected))
    check_clients(problem, sizes[next(iter(shapes.values())).split()[0]])
    for key in symmetric:
        (check_symmetric_together if together else check_symmetric)(key, problem, arrays[key])
    return arrays, sizes


def check_samples(
    problem: str,
    given: dict[str, Any],
    clients: dict[str, torch.Tensor],
    positive_definite: str | None = None,
) -> tuple[int, dict[str, torch.Tensor]]:
    """The per-sample arrays of a problem's finite sample sets, checked against its client arrays.

    ``given[k]`` (``None`` when not given) holds the samples of client array ``clients[k]``: shape
    ``(M, n, ...)`` for a client array ``(M, ...)``, with the same ``n >= 1`` for every array, and
    a mean over the ``n`` samples equal to the client array (so a minibatch oracle is unbiased);
    the matrices of ``given[positive_definite]`` must be symmetric positive definite. Give every
    array or none.

    Returns:
        ``(n, {"<k>_samples": tensor})``; ``(0, {})`` when none is given.
    """
    names = tuple(f"{key}_samples" for key in given)
    present = [value is not None for value in given.values()]
    if not any(present):
        return 0, {}
    if not all(present):
        raise ProblemError(f"{problem}: give all of {names} or none of them")
    samples = {key: as_tensor(value) for key, value in given.items()}
    first = next(iter(given))
    n = int(samples[first].shape[1]) if samples[first].ndim == clients[first].ndim + 1 else -1
    for key, name in zip(given, names, strict=True):
        check_finite(name, problem, samples[key])
        base = clients[key]
        check_shape(name, problem, samples[key], (int(base.shape[0]), n, *base.shape[1:]))
    if n < 1:
        raise ProblemError(f"{problem}: sample arrays need at least one sample per client")
    if positive_definite is not None:
        check_positive_definite(f"{positive_definite}_samples", problem, samples[positive_definite])
    for key, name in zip(given, names, strict=True):
        base = clients[key]
        gap = float((samples[key].mean(dim=1) - base).abs().max())
        # Why 1e-9: sample means are built to equal the client arrays up to float64 round-off
        # on O(1) entries; a larger gap means a biased oracle.
        if gap > 1e-9 * max(1.0, float(base.abs().max())):
            raise ProblemError(
                f"{problem}: mean of {name!r} over samples differs from the client array "
                f"by {gap:.3g}; the stochastic oracle would be biased"
            )
    return n, {name: samples[key] for key, name in zip(given, names, strict=True)}
