"""A noisy per-client quadratic and a stochastic HGP of either form, as the HGP claims draw
them (16 samples a client; minibatches of 1 for the independent form, of 4 shared by both
products with the weights kept for the practical form), for tests of replicated runs."""

from __future__ import annotations

import numpy as np
import torch

from problems import PerClientQuadratic
from testbed.decentralized import HGPState
from testbed.decentralized import HyperGradientPush


def noisy_problem(n: int, dy: int, seed: int) -> PerClientQuadratic:
    """``n`` clients, ``dy`` inner and 2 hyperparameter dimensions a client, sampled arrays."""
    return PerClientQuadratic.random(
        n, 2, dy, seed=seed, n_samples=16, hessian_noise=0.3, cross_noise=0.3, gradient_noise=0.3
    )


def stochastic_hgp(
    practical: bool, neumann_terms: int, pushsum_steps: int, graph_seed: int
) -> HyperGradientPush:
    return HyperGradientPush(
        neumann_terms=neumann_terms,
        pushsum_steps=pushsum_steps,
        batch_size=4 if practical else 1,
        shared_sample=practical,
        keep_weights=practical,
        graph_seed=graph_seed,
    )


def point(problem: PerClientQuadratic, seed: int) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(seed).standard_normal(problem.dim_x))


def start(problem: PerClientQuadratic) -> HGPState:
    """Every client at the problem's initial inner point, weights 1, graph step 0."""
    n, y0 = problem.n_clients, problem.initial_point()[1]
    return HGPState(y0.expand(n, -1).clone(), torch.ones(n, dtype=torch.float64), 0)
