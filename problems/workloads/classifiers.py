"""Classification networks as pure functions of one flat parameter vector, for HGP's per-client
problems on real data (:mod:`problems.workloads.decentralized`).

``logreg`` is softmax regression (the convex model of HGP sec. 5.2); ``cnn_smooth`` is the LeNet
layout of ``cnn`` with ``tanh`` instead of ReLU and average instead of max pooling: its loss is
twice continuously differentiable, so its Hessian and the influence function (an
implicit-function-theorem quantity) exist everywhere and a gradient-norm tolerance can be
reached. The ReLU/max-pool CNN's full-batch gradient jumps on kinks: at a model L-BFGS has driven
to a gradient norm of 0.026 (float64, weight decay 0.01), the first-order model of the gradient
along ``-grad`` has relative error 0.2 at distance 1e-2 and 178 at 1e-6, so its minima sit on
kinks and no tolerance below about 0.02 is reachable there. The other names are the networks of
:mod:`problems.workloads.models`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Sequence

import torch

from problems._base import ProblemError
from problems.workloads.models import MODEL_BUILDERS
from problems.workloads.models import FlatModel
from problems.workloads.models import build_network

CLASSIFIERS: tuple[str, ...] = ("logreg", "cnn_smooth", *MODEL_BUILDERS)


@dataclasses.dataclass(frozen=True, eq=False)
class Classifier:
    """A whole classification network as a pure function of one flat vector.

    ``apply(theta, inputs) -> logits`` (vmappable over both), ``n_params`` = len(theta),
    ``initial(seed)`` the seeded float32 initial vector. ``convex``: softmax regression, whose
    regularised cross entropy is strongly convex in theta.
    """

    name: str
    n_params: int
    apply: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    initial: Callable[[int], torch.Tensor]
    convex: bool = False


def build_classifier(model: str, input_shape: Sequence[int], n_classes: int) -> Classifier:
    """``"logreg"`` (softmax regression, the convex model of HGP sec. 5.2) or a network of
    :mod:`problems.workloads.models` (body and head as one vector ``[body; head]``)."""
    if model == "logreg":
        channels, height, width = (int(s) for s in input_shape)
        flat = FlatModel.from_module(
            torch.nn.Sequential(
                torch.nn.Flatten(start_dim=-3),
                torch.nn.Linear(channels * height * width, n_classes, dtype=torch.float32),
            )
        )
        return Classifier("logreg", flat.n_params, flat.apply, flat.initial, convex=True)
    if model == "cnn_smooth":
        channels, height, width = (int(s) for s in input_shape)
        flat = FlatModel.from_module(_smooth_cnn(channels, height, width, n_classes))
        return Classifier("cnn_smooth", flat.n_params, flat.apply, flat.initial)
    if model not in MODEL_BUILDERS:
        raise ProblemError(f"unknown model {model!r}; known: {', '.join(CLASSIFIERS)}")
    net = build_network(model, input_shape, n_classes)
    return Classifier(
        model, net.n_params, net.full_logits, lambda seed: torch.cat(net.initial(seed))
    )


def _smooth_cnn(channels: int, height: int, width: int, n_classes: int) -> torch.nn.Module:
    """``cnn``'s layout (5x5 same-padded convolutions with 6 and 16 channels, each followed by
    2x2 pooling, then 120-84-classes) with ``tanh`` and average pooling: a C-infinity loss."""
    if height < 4 or width < 4:
        raise ProblemError(f"cnn_smooth: needs inputs of at least 4x4 pixels, got {height}x{width}")
    nn, f32 = torch.nn, torch.float32
    return nn.Sequential(
        nn.Conv2d(channels, 6, 5, padding=2, dtype=f32),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5, padding=2, dtype=f32),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Flatten(start_dim=-3),
        nn.Linear(16 * (height // 4) * (width // 4), 120, dtype=f32),
        nn.Tanh(),
        nn.Linear(120, 84, dtype=f32),
        nn.Tanh(),
        nn.Linear(84, n_classes, dtype=f32),
    )


__all__ = ["CLASSIFIERS", "Classifier", "build_classifier"]
