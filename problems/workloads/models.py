r"""Neural networks as pure functions of flat parameter vectors.

The estimators see every variable as one flat vector (``x`` of size ``dim_x``, ``y`` of size
``dim_y``). A :class:`FlatModel` turns a flat vector back into named parameter tensors and calls
its module through :func:`torch.func.functional_call`, so a network is the pure function

.. math::  (\theta, u) \mapsto \mathrm{net}(u; \theta), \qquad \theta \in \mathbb{R}^{n},

which :func:`torch.func.vmap` can batch over a client axis of parameters and inputs (one
``(C, n)`` stack of parameter vectors, one ``(C, n_samples, ...)`` stack of inputs).

A :class:`Network` is a *body* (the representation layers) followed by a *head*:
``logits = head(body(u; theta_body); theta_head)``. The hyper-representation workload optimises
the body as the outer variable and the head as the inner one (FedNest Sec. 4.1, AggITD Sec. 5:
"the hidden layer" / "the output head"); loss-function tuning trains the whole network as the
inner variable.

Architectures (the FedNest repository ucr-optml/FedNest, ``models/Nets.py``):

- ``"mlp"``: ``input -> 200 -> classes`` (784-200-10 on MNIST), body ``Linear + ReLU``, head the
  last ``Linear`` (the authors' ``layer_input`` / ``header`` split);
- ``"mlp3"``: ``input -> 200 -> 100 -> classes``, the "3-layer MLP" of FedNest Fig. 3;
- ``"linear"``: multinomial logistic regression (no body), for loss tuning with a convex inner
  problem;
- ``"cnn"``: the LeNet-style ``CNNMnist`` / ``CNNCifar``: two ``5x5`` convolutions (6 and 16
  channels) each with ReLU and ``2x2`` max pooling, ``fc -> 120`` in the body, head
  ``120 -> 84 -> classes`` (FedNest's ``header1/header2``, AggITD's "last two FC layers").
  The convolutions are zero-padded ("same" size) so 8x8 digits fit as well as 28x28 / 32x32.

.. warning::
   The authors' MLP has ``Dropout(0.5)`` after the first layer and keeps it active while taking
   gradients, Hessian- and Jacobian-vector products (ucr-optml/FedNest calls ``net0.train()``
   there). Here the networks have no dropout, so the oracles are deterministic functions of
   the parameters and the workloads' hypergradients can be checked against autodiff.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Sequence

import torch
from torch import nn

# The module templates are built in float32 on the CPU; their parameters are only used to read
# shapes and to draw the seeded initial values. functional_call replaces them on every call, so
# the dtype and device of a forward pass are those of the flat vector and the inputs.
_TEMPLATE_DTYPE = torch.float32


class ModelError(ValueError):
    """Raised for an unknown architecture or an input shape it cannot take."""


@dataclasses.dataclass(frozen=True, eq=False)
class FlatModel:
    """A module called with its parameters taken from one flat vector.

    Attributes:
        module: the template (parameters only give shapes and the seeded initialisation).
        names: parameter names in flattening order.
        shapes: their shapes.
    """

    module: nn.Module
    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]

    @classmethod
    def from_module(cls, module: nn.Module) -> FlatModel:
        if any(True for _ in module.buffers()):
            raise ModelError(
                "FlatModel needs a module without buffers (no batch norm): its "
                "forward pass must be a function of the parameters alone"
            )
        named = list(module.named_parameters())
        return cls(module, tuple(n for n, _ in named), tuple(p.shape for _, p in named))

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(math.prod(shape) for shape in self.shapes)

    @property
    def n_params(self) -> int:
        return sum(self.sizes)

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named parameter tensors viewing ``flat`` (shape ``(n_params,)``)."""
        if flat.shape != (self.n_params,):
            raise ModelError(
                f"expected a flat parameter vector of shape ({self.n_params},), "
                f"got {tuple(flat.shape)}"
            )
        pieces = torch.split(flat, list(self.sizes))
        return {
            name: piece.view(shape)
            for name, piece, shape in zip(self.names, pieces, self.shapes, strict=True)
        }

    def apply(self, flat: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """``module(inputs)`` with the parameters in ``flat``; vmappable over both."""
        return torch.func.functional_call(self.module, self.unflatten(flat), (inputs,))

    def initial(self, seed: int) -> torch.Tensor:
        """The module's own default initialisation (PyTorch's ``reset_parameters``), seeded.

        The global random state is saved and restored, so the draw does not disturb it; the
        values are drawn in float32 whatever the default dtype, so a seed gives the same
        numbers in every session (cast them with ``.to(dtype)``).
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for layer in self.module.modules():
                reset = getattr(layer, "reset_parameters", None)
                if callable(reset):
                    reset()
            params = [p.detach().reshape(-1) for p in self.module.parameters()]
        if not params:
            return torch.zeros(0, dtype=_TEMPLATE_DTYPE)
        return torch.cat(params).clone()


@dataclasses.dataclass(frozen=True, eq=False)
class Network:
    """Representation layers (``body``) followed by a classification ``head``.

    Attributes:
        name: architecture name (``"mlp"``, ``"mlp3"``, ``"cnn"``).
        input_shape: ``(channels, height, width)`` of one input.
        n_classes: number of output logits.
        body, head: the two pieces as flat models.
    """

    name: str
    input_shape: tuple[int, ...]
    n_classes: int
    body: FlatModel
    head: FlatModel

    @property
    def n_params(self) -> int:
        return self.body.n_params + self.head.n_params

    def features(self, body: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return self.body.apply(body, inputs)

    def logits(self, body: torch.Tensor, head: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """``head(body(inputs))`` with flat parameter vectors ``body`` and ``head``."""
        return self.head.apply(head, self.body.apply(body, inputs))

    def split(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(body, head)`` pieces of a whole-network vector ``[body; head]``."""
        return params[: self.body.n_params], params[self.body.n_params :]

    def full_logits(self, params: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Logits of the whole network from one vector ``[body; head]``."""
        body, head = self.split(params)
        return self.logits(body, head, inputs)

    def initial(self, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Seeded ``(body, head)`` initial vectors (float32; see :meth:`FlatModel.initial`)."""
        return self.body.initial(seed), self.head.initial(seed + 1)


def _linear(n_in: int, n_out: int) -> nn.Linear:
    return nn.Linear(n_in, n_out, dtype=_TEMPLATE_DTYPE)


def _check_input(name: str, input_shape: Sequence[int], n_classes: int) -> tuple[int, int, int]:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ModelError(
            f"{name}: input_shape must be (channels, height, width) with positive "
            f"sizes, got {tuple(input_shape)}"
        )
    if n_classes < 2:
        raise ModelError(f"{name}: needs at least 2 classes, got {n_classes}")
    return shape[0], shape[1], shape[2]


def mlp(
    input_shape: Sequence[int], n_classes: int, hidden: Sequence[int] = (200,), name: str = "mlp"
) -> Network:
    """``input -> hidden... -> classes`` with ReLU; the body is every layer but the last.

    ``hidden=()`` leaves a body without parameters (see :func:`linear`).
    """
    channels, height, width = _check_input(name, input_shape, n_classes)
    widths = [channels * height * width, *(int(h) for h in hidden)]
    if min(widths) < 1:
        raise ModelError(f"{name}: hidden widths must be positive, got {tuple(hidden)}")
    layers: list[nn.Module] = [nn.Flatten(start_dim=-3)]
    for n_in, n_out in zip(widths[:-1], widths[1:], strict=True):
        layers += [_linear(n_in, n_out), nn.ReLU()]
    body = nn.Sequential(*layers)
    head = _linear(widths[-1], n_classes)
    return Network(
        name,
        (channels, height, width),
        n_classes,
        FlatModel.from_module(body),
        FlatModel.from_module(head),
    )


def linear(input_shape: Sequence[int], n_classes: int) -> Network:
    """Multinomial logistic regression: no representation layers, the head is everything."""
    return mlp(input_shape, n_classes, hidden=(), name="linear")


def mlp3(input_shape: Sequence[int], n_classes: int) -> Network:
    """FedNest Fig. 3's "3-layer MLP": ``input -> 200 -> 100 -> classes``."""
    return mlp(input_shape, n_classes, hidden=(200, 100), name="mlp3")


class _Convolutions(nn.Module):
    """Two ``5x5`` same-padded convolutions with ReLU and ``2x2`` max pooling, then ``fc``.

    Works on ``(..., c, h, w)`` inputs with any number of leading batch axes (vmap adds none:
    it hides its axis), flattening the trailing three axes before the fully connected layer.
    """

    def __init__(self, channels: int, height: int, width: int, features: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=2, dtype=_TEMPLATE_DTYPE)
        self.conv2 = nn.Conv2d(6, 16, 5, padding=2, dtype=_TEMPLATE_DTYPE)
        self.fc = _linear(16 * (height // 4) * (width // 4), features)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        out = nn.functional.max_pool2d(torch.relu(self.conv1(inputs)), 2)
        out = nn.functional.max_pool2d(torch.relu(self.conv2(out)), 2)
        return torch.relu(self.fc(out.flatten(start_dim=-3)))


def cnn(input_shape: Sequence[int], n_classes: int) -> Network:
    """LeNet-style CNN (FedNest ``CNNMnist`` / ``CNNCifar``); head ``120 -> 84 -> classes``."""
    channels, height, width = _check_input("cnn", input_shape, n_classes)
    if height < 4 or width < 4:
        raise ModelError(
            f"cnn: needs inputs of at least 4x4 pixels (two 2x2 poolings), got {height}x{width}"
        )
    body = _Convolutions(channels, height, width, 120)
    head = nn.Sequential(_linear(120, 84), nn.ReLU(), _linear(84, n_classes))
    return Network(
        "cnn",
        (channels, height, width),
        n_classes,
        FlatModel.from_module(body),
        FlatModel.from_module(head),
    )


MODEL_BUILDERS: dict[str, Callable[[Sequence[int], int], Network]] = {
    "linear": linear,
    "mlp": mlp,
    "mlp3": mlp3,
    "cnn": cnn,
}


def build_network(model: str | Network, input_shape: Sequence[int], n_classes: int) -> Network:
    """The network named ``model`` for inputs of ``input_shape`` and ``n_classes`` classes.

    A :class:`Network` is returned as it is after checking that it fits the data.
    """
    if isinstance(model, Network):
        if tuple(model.input_shape) != tuple(input_shape) or model.n_classes != n_classes:
            raise ModelError(
                f"network {model.name!r} takes inputs {model.input_shape} with "
                f"{model.n_classes} classes; the data has {tuple(input_shape)} and "
                f"{n_classes}"
            )
        return model
    if model not in MODEL_BUILDERS:
        raise ModelError(f"unknown model {model!r}; known: {sorted(MODEL_BUILDERS)}")
    return MODEL_BUILDERS[model](input_shape, n_classes)


__all__ = [
    "MODEL_BUILDERS",
    "FlatModel",
    "ModelError",
    "Network",
    "build_network",
    "cnn",
    "linear",
    "mlp",
    "mlp3",
]
