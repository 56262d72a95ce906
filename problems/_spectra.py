"""Random matrices with a controlled spectrum (float64, seeded NumPy generators only).

The stacked spreads (:func:`centered_symmetric_spread`, :func:`centered_matrix_spread`) are built
in place, a chunk of matrices at a time, into one output array: drawing, symmetrising, centring
and scaling never hold a second array of the stack's size, so a problem of M = 10,000 clients at
d = 200 (3.2 GB per stack) is built within its own size. The numbers are those of the
straightforward whole-array formulas: the generator fills the array in the same order, each step
is elementwise, and the client mean is accumulated client by client in index order, which is the
order NumPy's ``mean(axis=0)`` adds in (``tests/test_quadratic_bilevel.py`` checks bitwise
equality with the whole-array formulas).
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: Matrices per chunk: at most 2**25 bytes (32 MiB) of temporaries per step.
CHUNK_BYTES = 1 << 25


def _step(array: np.ndarray) -> int:
    per_item = int(np.prod(array.shape[1:], dtype=np.int64)) * array.itemsize
    return max(1, CHUNK_BYTES // max(1, per_item))


def random_orthogonal(rng: np.random.Generator, dim: int) -> np.ndarray:
    """Haar-distributed orthogonal matrix from the QR factorisation of a Gaussian matrix."""
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    return q * np.sign(np.diag(r))


def spd_with_spectrum(rng: np.random.Generator, eigenvalues: np.ndarray) -> np.ndarray:
    """Symmetric positive definite matrix ``Q diag(eigenvalues) Q^T`` with a random basis Q."""
    q = random_orthogonal(rng, eigenvalues.shape[0])
    matrix = (q * eigenvalues) @ q.T
    return 0.5 * (matrix + matrix.T)


def log_spaced_spectrum(dim: int, mu: float, condition_number: float) -> np.ndarray:
    """``dim`` eigenvalues log-spaced in ``[mu, mu * condition_number]``, both ends included."""
    if dim == 1:
        return np.array([mu], dtype=np.float64)
    return mu * np.logspace(0.0, np.log10(condition_number), dim)


def symmetric_sqrt(matrix: np.ndarray) -> np.ndarray:
    eigenvalues, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(eigenvalues)) @ vectors.T


def client_mean(stack: np.ndarray) -> np.ndarray:
    """``stack.mean(axis=0, keepdims=True)`` accumulated one client at a time (same numbers: NumPy
    reduces a leading axis by adding whole rows in index order), without a temporary."""
    total = np.zeros((1, *stack.shape[1:]), dtype=stack.dtype)
    for row in stack:
        total[0] += row
    total /= stack.shape[0]
    return total


def _center_and_scale(out: np.ndarray, spread: float) -> None:
    """Subtract the client mean, then scale so the largest spectral norm is ``spread``."""
    count = out.shape[0]
    mean = client_mean(out)
    step = _step(out)
    for start in range(0, count, step):
        out[start : start + step] -= mean
    # the spectral norms a chunk of matrices per call: the batched SVD runs LAPACK's routine on
    # each matrix as the call on that matrix alone does (the same floats, tested)
    largest = (
        max(
            float(np.linalg.norm(out[start : start + step], 2, axis=(1, 2)).max())
            for start in range(0, count, step)
        )
        if count > 1
        else 0.0
    )
    if largest == 0.0 or spread == 0.0:
        out.fill(0.0)
        return
    factor = spread / largest
    for start in range(0, count, step):
        out[start : start + step] *= factor


def centered_symmetric_spread(
    rng: np.random.Generator,
    count: int,
    dim: int,
    spread: float,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``count`` symmetric matrices that sum to zero, scaled so the largest has norm ``spread``.

    Returns an array of shape ``(count, dim, dim)`` (``out`` when given, a float64 C-contiguous
    array of that shape). With ``count == 1`` or ``spread == 0`` every matrix is zero: one client
    cannot differ from the mean.
    """
    out = np.empty((count, dim, dim)) if out is None else out
    step = _step(out)
    for start in range(0, count, step):
        part = out[start : start + step]
        rng.standard_normal(part.shape, out=part)
        part[...] = 0.5 * (part + np.swapaxes(part, 1, 2))
    _center_and_scale(out, spread)
    return out


def centered_matrix_spread(
    rng: np.random.Generator,
    count: int,
    shape: tuple[int, int],
    spread: float,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``count`` matrices that sum to zero, scaled so the largest spectral norm is ``spread``."""
    out = np.empty((count, *shape)) if out is None else out
    step = _step(out)
    for start in range(0, count, step):
        part = out[start : start + step]
        rng.standard_normal(part.shape, out=part)
    _center_and_scale(out, spread)
    return out


def sandwich(root: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """``root @ (I + spread_i) @ root`` for every matrix of the stack, in place (chunked)."""
    eye = np.eye(root.shape[0])
    step = _step(spread)
    for start in range(0, spread.shape[0], step):
        part = spread[start : start + step]
        part[...] = root @ (eye + part) @ root
    return spread


def add_base(base: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """``base[None] + spread`` in place (chunked)."""
    step = _step(spread)
    for start in range(0, spread.shape[0], step):
        part = spread[start : start + step]
        part[...] = base[None] + part
    return spread


def centered_vector_spread(
    rng: np.random.Generator, count: int, shape: tuple[int, ...], spread: float
) -> np.ndarray:
    """``count`` arrays that sum to zero with root-mean-square Frobenius norm exactly ``spread``."""
    raw = rng.standard_normal((count, *shape))
    raw -= raw.mean(axis=0, keepdims=True)
    axes = tuple(range(1, raw.ndim))
    rms = float(np.sqrt(np.mean(np.sum(raw**2, axis=axes)))) if count > 1 else 0.0
    if rms == 0.0 or spread == 0.0:
        return np.zeros_like(raw)
    return raw * (spread / rms)


def around_gaussian(rng: np.random.Generator, count: int, dim: int, spread: float) -> np.ndarray:
    """``count`` vectors ``v + d_i``: a mean ``v ~ N(0, I_dim)`` drawn first, then deviations
    ``d_i`` that sum to zero with root-mean-square norm ``spread``
    (:func:`centered_vector_spread`)."""
    return rng.standard_normal(dim) + centered_vector_spread(rng, count, (dim,), spread)


def relative_size(base: np.ndarray, fraction: float) -> float:
    """``fraction * ||base||`` (spectral norm, floored at 1e-12): a spread relative to ``base``."""
    return fraction * max(float(np.linalg.norm(base, 2)), 1e-12)


def spread_around(
    rng: np.random.Generator,
    base: np.ndarray,
    count: int,
    spread: float,
    *,
    symmetric: bool = False,
) -> np.ndarray:
    """``count`` matrices ``base + D_i`` with ``sum_i D_i = 0`` and ``max_i ||D_i|| = spread``
    (symmetric ``D_i`` for a symmetric ``base``), built in place."""
    if symmetric:
        deviations = centered_symmetric_spread(rng, count, base.shape[0], spread)
    else:
        deviations = centered_matrix_spread(rng, count, base.shape, spread)
    return add_base(base, deviations)


def sample_spreads(
    rng: np.random.Generator,
    count: int,
    n_samples: int,
    shape: tuple[int, int],
    spread: float,
    *,
    symmetric: bool = False,
) -> np.ndarray:
    """``(count, n_samples, *shape)``: for each of ``count`` clients, ``n_samples`` deviations
    that sum to zero over the samples with largest spectral norm ``spread`` (symmetric ones for
    ``symmetric``). One sample cannot deviate from its own mean: zeros, and nothing is drawn."""
    if n_samples < 2:
        return np.zeros((count, n_samples, *shape))
    if symmetric:
        stacks = [
            centered_symmetric_spread(rng, n_samples, shape[0], spread) for _ in range(count)
        ]  # construction only; the oracles have no client loop
    else:
        stacks = [centered_matrix_spread(rng, n_samples, shape, spread) for _ in range(count)]
    return np.stack(stacks)


@dataclasses.dataclass(frozen=True)
class SpectralStack:
    """Client matrices ``H_i = R (I + S_i) R`` around a mean ``H_bar = R^2`` whose spectrum is
    log-spaced in ``[mu, kappa mu]`` (:func:`spectral_stack`).

    Attributes:
        root: ``R = H_bar^{1/2}``.
        spread: the ``S_i`` (``sum_i S_i = 0``), or ``None`` when ``stack`` was built in their
            memory.
        stack: ``(M, d, d)``, the ``H_i``.
    """

    root: np.ndarray
    spread: np.ndarray | None
    stack: np.ndarray

    def samples(self, rng: np.random.Generator, n_samples: int, noise: float) -> np.ndarray:
        """``(M, n, d, d)`` sample matrices ``R (I + S_i + N_ij) R`` with ``N_ij`` summing to
        zero over j and ``max ||N_ij|| = noise`` (:func:`sample_spreads`): each client's sample
        mean is its ``H_i``; ``h + noise < 1`` keeps every one positive definite."""
        assert self.spread is not None, "built without keeping the spread"
        count, dim = self.spread.shape[0], self.root.shape[0]
        deviations = sample_spreads(rng, count, n_samples, (dim, dim), noise, symmetric=True)
        return self.root @ (np.eye(dim) + self.spread[:, None] + deviations) @ self.root


def spectral_stack(
    rng: np.random.Generator,
    count: int,
    dim: int,
    mu: float,
    condition_number: float,
    spread: float,
    *,
    keep_spread: bool = True,
) -> SpectralStack:
    """The closed-form families' inner Hessians: a mean ``H_bar`` with eigenvalues log-spaced in
    ``[mu, kappa mu]`` in a random basis, and ``count`` client matrices
    ``H_i = H_bar^{1/2} (I + S_i) H_bar^{1/2}`` with ``sum_i S_i = 0`` and ``max_i ||S_i|| =
    spread`` (so the client mean is ``H_bar`` and every ``H_i`` has eigenvalues in
    ``[(1 - spread) mu, (1 + spread) kappa mu]``).

    Draw order: the basis of ``H_bar``, then the ``S_i``. Without ``keep_spread`` the ``H_i`` are
    built in the memory of the ``S_i`` (no stack-sized temporary; no sample matrices then).
    """
    root = symmetric_sqrt(spd_with_spectrum(rng, log_spaced_spectrum(dim, mu, condition_number)))
    deviations = centered_symmetric_spread(rng, count, dim, spread)
    stack = sandwich(root, deviations.copy() if keep_spread else deviations)
    return SpectralStack(root, deviations if keep_spread else None, stack)
