"""The draws of :meth:`problems.QuadraticBilevel.random`: one problem's client arrays from its
generator (:func:`draw_blocks`), or many problems' of one recipe at once, each from its own
generator, the arithmetic on the stacks (:func:`draw_blocks_together`, the same floats:
``tests/test_drawsspectra_together.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from problems import _spectra
from problems import spectra_together
from problems._base import Owned
from problems._rows import samples_around
from problems.family import inner_hessians


def draw_blocks(rng: np.random.Generator, spec: dict[str, Any]) -> tuple[tuple[Any, ...], dict]:
    """The draws of :meth:`problems.QuadraticBilevel.random` for its ``spec``, in its stream's
    order: the constructor's arrays ``(A, B, b, C, D, c, E, e)`` and its sample sets. ``B`` and
    ``C, D, E`` are scaled by ``cross_scale`` and ``outer_curvature`` after every draw, so the
    generator's stream is the same whatever the scales."""
    hessians = inner_hessians(rng, spec)
    A = hessians.stack
    M, dx, dy, n_samples = spec["n_clients"], spec["dim_x"], spec["dim_y"], spec["n_samples"]
    hh, gh = spec["hessian_heterogeneity"], spec["gradient_heterogeneity"]
    B_bar = rng.standard_normal((dy, dx)) / math.sqrt(dy)
    C_half = rng.standard_normal((dy, dy)) / math.sqrt(dy)
    C_bar = C_half @ C_half.T / max(1.0, float(np.linalg.norm(C_half @ C_half.T, 2)))
    D_bar = 0.5 * rng.standard_normal((dy, dx)) / math.sqrt(dy)
    E_bar = np.eye(dx)
    # B_i, C_i, D_i spread by the same relative amount h as the inner Hessians
    B = _spectra.spread_around(rng, B_bar, M, _spectra.relative_size(B_bar, hh))
    C = _spectra.spread_around(rng, C_bar, M, _spectra.relative_size(C_bar, hh), symmetric=True)
    D = _spectra.spread_around(rng, D_bar, M, _spectra.relative_size(D_bar, hh))
    E = np.broadcast_to(E_bar, (M, dx, dx)).copy()
    b = _spectra.around_gaussian(rng, M, dy, gh)
    c = _spectra.around_gaussian(rng, M, dy, gh)
    e = _spectra.around_gaussian(rng, M, dx, gh)

    samples: dict[str, Any] = {}
    if n_samples > 0:
        samples["A_samples"] = hessians.samples(rng, n_samples, spec["hessian_noise"])
        for key, base in (("b", b), ("c", c), ("e", e)):
            samples[f"{key}_samples"] = samples_around(rng, base, n_samples, spec["gradient_noise"])
    cross, curvature = spec.get("cross_scale", 1.0), spec.get("outer_curvature", 1.0)
    B, C, D, E = B * cross, C * curvature, D * curvature, E * curvature
    arrays = (Owned(A), Owned(B), b, Owned(C), Owned(D), c, Owned(E), e)
    return arrays, {k: Owned(v) for k, v in samples.items()}


def draw_blocks_together(
    rngs: Sequence[np.random.Generator], spec: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, np.ndarray]]:
    """:func:`draw_blocks` of every generator of ``rngs`` for the same ``spec`` but its seed,
    stacked on a leading problem axis: each generator draws what :func:`draw_blocks` draws from
    it, in its order (every draw has a shape fixed by the spec, whatever the numbers drawn
    before), and the arithmetic runs on the stacks (:mod:`problems.spectra_together`: the same
    floats). The arrays wrapped in :class:`~problems._base.Owned` where :func:`draw_blocks`
    wraps them."""
    M, dx, dy, n = spec["n_clients"], spec["dim_x"], spec["dim_y"], spec["n_samples"]
    hh, gh = spec["hessian_heterogeneity"], spec["gradient_heterogeneity"]
    # draw_blocks' stream: A_bar's basis and the S_i (inner_hessians), B_bar, C_half, D_bar,
    # the spreads of B, C, D, then b, c, e (a mean, then the spread), then the samples: the
    # Hessian noise (when there are two samples or more) and the noise on b, c, e
    shapes = [(dy, dy), (M, dy, dy), (dy, dx), (dy, dy), (dy, dx), (M, dy, dx), (M, dy, dy)]
    shapes += [(M, dy, dx), (dy,), (M, dy), (dy,), (M, dy), (dx,), (M, dx)]
    if n > 0:
        shapes += [(M, n, dy, dy)] if n >= 2 else []
        shapes += [(M, n, dy), (M, n, dy), (M, n, dx)]
    draws = iter(spectra_together.normals(rngs, shapes))
    basis, spread = next(draws), next(draws)
    spectrum = _spectra.log_spaced_spectrum(dy, spec["mu"], spec["condition_number"])
    root = spectra_together.symmetric_sqrt(spectra_together.spd_with_spectrum(basis, spectrum))
    spectra_together.centered_symmetric_spread(spread, hh, axis=1)
    A = spectra_together.sandwich(root, spread.copy() if n > 0 else spread)
    B_bar = next(draws) / math.sqrt(dy)
    C_half = next(draws) / math.sqrt(dy)
    C_bar = (C_half @ spectra_together.transposed(C_half)) / np.maximum(
        1.0, spectra_together.spectral_norms(C_half @ spectra_together.transposed(C_half))
    )[:, None, None]
    D_bar = 0.5 * next(draws) / math.sqrt(dy)
    # B_i, C_i, D_i spread by the same relative amount h as the inner Hessians
    B = B_bar[:, None] + spectra_together.centered_matrix_spread(
        next(draws), spectra_together.relative_sizes(B_bar, hh)
    )
    C = C_bar[:, None] + spectra_together.centered_symmetric_spread(
        next(draws), spectra_together.relative_sizes(C_bar, hh), axis=1
    )
    D = D_bar[:, None] + spectra_together.centered_matrix_spread(
        next(draws), spectra_together.relative_sizes(D_bar, hh)
    )
    E = np.broadcast_to(np.eye(dx), (len(rngs), M, dx, dx)).copy()
    b, c, e = (
        next(draws)[:, None] + spectra_together.centered_vector_spread(next(draws), gh)
        for _ in "bce"
    )

    samples: dict[str, np.ndarray] = {}
    if n > 0:
        noise = (
            spectra_together.centered_symmetric_spread(next(draws), spec["hessian_noise"], axis=2)
            if n >= 2
            else np.zeros((len(rngs), M, n, dy, dy))
        )
        roots = root[:, None, None]
        samples["A_samples"] = roots @ (np.eye(dy) + spread[:, :, None] + noise) @ roots
        for key, base in (("b", b), ("c", c), ("e", e)):
            samples[f"{key}_samples"] = base[:, :, None] + spectra_together.centered_noise(
                next(draws), spec["gradient_noise"]
            )
    cross, curvature = spec.get("cross_scale", 1.0), spec.get("outer_curvature", 1.0)
    B, C, D, E = B * cross, C * curvature, D * curvature, E * curvature
    arrays = (Owned(A), Owned(B), b, Owned(C), Owned(D), c, Owned(E), e)
    return arrays, samples
