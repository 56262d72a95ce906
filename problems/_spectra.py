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
        out[start:start + step] -= mean
    largest = max(float(np.linalg.norm(m, 2)) for m in out) if count > 1 else 0.0
    if largest == 0.0 or spread == 0.0:
        out.fill(0.0)
        return
    factor = spread / largest
    for start in range(0, count, step):
        out[start:start + step] *= factor


def centered_symmetric_spread(
    rng: np.random.Generator, count: int, dim: int, spread: float,
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
        part = out[start:start + step]
        rng.standard_normal(part.shape, out=part)
        part[...] = 0.5 * (part + np.swapaxes(part, 1, 2))
    _center_and_scale(out, spread)
    return out


def centered_matrix_spread(
    rng: np.random.Generator, count: int, shape: tuple[int, int], spread: float,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``count`` matrices that sum to zero, scaled so the largest spectral norm is ``spread``."""
    out = np.empty((count, *shape)) if out is None else out
    step = _step(out)
    for start in range(0, count, step):
        part = out[start:start + step]
        rng.standard_normal(part.shape, out=part)
    _center_and_scale(out, spread)
    return out


def sandwich(root: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """``root @ (I + spread_i) @ root`` for every matrix of the stack, in place (chunked)."""
    eye = np.eye(root.shape[0])
    step = _step(spread)
    for start in range(0, spread.shape[0], step):
        part = spread[start:start + step]
        part[...] = root @ (eye + part) @ root
    return spread


def add_base(base: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """``base[None] + spread`` in place (chunked)."""
    step = _step(spread)
    for start in range(0, spread.shape[0], step):
        part = spread[start:start + step]
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
