"""The arithmetic of :mod:`problems._spectra` on a batch of draws at once, the same floats.

Each function takes the standard normal draws of ``R`` problems stacked on leading axes (every
problem's from its own generator, :func:`normals`) and does to each problem's slice what its
:mod:`problems._spectra` counterpart does to that problem's draw alone, with one call over the
batch where that gives the same floats:

- elementwise arithmetic (IEEE operations, the same for every element wherever it sits);
- LAPACK per matrix: NumPy's ``qr``, ``eigh`` and ``svd`` (hence ``norm(., 2)``) run their
  routine on each matrix of a stack as on that matrix alone;
- BLAS per matrix: NumPy's stacked ``matmul`` calls the routine of a 2-D product on each
  matrix pair (``a @ a^T`` included, which it hands to ``syrk`` in both forms);
- client means added client by client in index order, as :func:`problems._spectra.client_mean`
  adds them; NumPy's ``mean`` over an axis of a stack whose earlier axes are problems walks that
  axis as it does on one problem's array;
- maxima (spectral norms, scales), which are the same float in any order.

``tests/test_draws_together.py`` compares every array with the problem drawn alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def normals(
    rngs: Sequence[np.random.Generator], shapes: Sequence[tuple[int, ...]]
) -> list[np.ndarray]:
    """``out[k][r]``: generator ``rngs[r]``'s standard normal draw of shape ``shapes[k]``, each
    generator drawing its shapes in their order (the stream of the one-by-one draw: a
    generator fills an array in C order, so one call of a shape gives the numbers of the
    chunked calls that fill it)."""
    out = [np.empty((len(rngs), *shape)) for shape in shapes]
    for r, rng in enumerate(rngs):
        for stack, shape in zip(out, shapes, strict=True):
            rng.standard_normal(shape, out=stack[r])
    return out


def transposed(stack: np.ndarray) -> np.ndarray:
    """Every matrix of a stack transposed (a view)."""
    return np.swapaxes(stack, -1, -2)


def spectral_norms(stack: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(a, 2)`` of every matrix of a stack: ``stack.shape[:-2]``."""
    return np.linalg.norm(stack, 2, axis=(-2, -1))


def spd_with_spectrum(gaussians: np.ndarray, eigenvalues: np.ndarray) -> np.ndarray:
    """:func:`problems._spectra.spd_with_spectrum` of each ``(d, d)`` Gaussian draw of
    ``gaussians (R, d, d)``: the Haar basis from its QR factorisation (signs fixed by ``R``'s
    diagonal), then ``Q diag(eigenvalues) Q^T`` symmetrised."""
    q, r = np.linalg.qr(gaussians)
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    matrix = (q * eigenvalues) @ transposed(q)
    return 0.5 * (matrix + transposed(matrix))


def symmetric_sqrt(matrices: np.ndarray) -> np.ndarray:
    """:func:`problems._spectra.symmetric_sqrt` of every matrix of a stack."""
    eigenvalues, vectors = np.linalg.eigh(matrices)
    return (vectors * np.sqrt(eigenvalues)[..., None, :]) @ transposed(vectors)


def center_and_scale(out: np.ndarray, spread: float | np.ndarray, axis: int) -> None:
    """:func:`problems._spectra._center_and_scale` of every stack ``out[b]`` (``b`` the
    ``axis`` leading indices; the stack's matrices along ``axis``), in place: minus its mean
    (added matrix by matrix in index order), then scaled so its largest spectral norm is
    ``spread`` (a float, or one per stack, shaped like ``out.shape[:axis]``); all zeros where
    that norm or ``spread`` is zero, or the stack has one matrix."""
    count = out.shape[axis]
    total = np.zeros((*out.shape[:axis], 1, *out.shape[axis + 1 :]))
    for i in range(count):
        total[(slice(None),) * axis + (0,)] += out[(slice(None),) * axis + (i,)]
    total /= count
    out -= total
    batch = out.shape[:axis]
    largest = spectral_norms(out).max(axis=-1) if count > 1 else np.zeros(batch)
    spread = np.broadcast_to(np.asarray(spread, dtype=np.float64), batch)
    zero = (largest == 0.0) | (spread == 0.0)
    factor = spread / np.where(zero, 1.0, largest)
    out *= factor.reshape(*batch, *(1,) * (out.ndim - axis))
    out[zero] = 0.0


def centered_symmetric_spread(
    draws: np.ndarray, spread: float | np.ndarray, axis: int
) -> np.ndarray:
    """:func:`problems._spectra.centered_symmetric_spread` of every stack of ``draws`` (its
    matrices along ``axis``), built in the draws' memory."""
    draws[...] = 0.5 * (draws + transposed(draws))
    center_and_scale(draws, spread, axis)
    return draws


def centered_matrix_spread(draws: np.ndarray, spreads: np.ndarray) -> np.ndarray:
    """:func:`problems._spectra.centered_matrix_spread` of every stack ``draws[r]`` (its
    matrices along axis 1), scaled to ``spreads[r]``, built in the draws' memory."""
    center_and_scale(draws, spreads, 1)
    return draws


def relative_sizes(bases: np.ndarray, fraction: float) -> np.ndarray:
    """:func:`problems._spectra.relative_size` of every matrix of ``bases (R, m, n)``."""
    return fraction * np.maximum(spectral_norms(bases), 1e-12)


def sandwich(roots: np.ndarray, spreads: np.ndarray) -> np.ndarray:
    """:func:`problems._spectra.sandwich` of every ``spreads[r]`` with its ``roots[r]``, in
    place: ``root (I + S_i) root``."""
    root = roots[:, None]
    spreads[...] = root @ (np.eye(roots.shape[-1]) + spreads) @ root
    return spreads


def centered_vector_spread(raw: np.ndarray, spread: float) -> np.ndarray:
    """:func:`problems._spectra.centered_vector_spread` of every ``raw[r] (count, dim)``:
    centred over the count axis, scaled to root-mean-square norm ``spread``."""
    raw -= raw.mean(axis=1, keepdims=True)
    count = raw.shape[1]
    rms = np.sqrt(np.mean(np.sum(raw**2, axis=2), axis=1)) if count > 1 else np.zeros(len(raw))
    zero = (rms == 0.0) | (spread == 0.0)
    out = raw * (spread / np.where(zero, 1.0, rms))[:, None, None]
    out[zero] = 0.0
    return out


def centered_noise(draws: np.ndarray, scale: float) -> np.ndarray:
    """:func:`problems._rows.centered_noise` of every ``draws[r] (M, n, ...)``: scaled, then
    centred over the sample axis."""
    noise = draws * scale
    if noise.shape[2] > 0:
        noise -= noise.mean(axis=2, keepdims=True)
    return noise
