r"""Federated hyper-representation learning (FedNest Sec. 4.1 / Fig. 2; AggITD Sec. 5, Table 2).

The network is a representation ``phi(u; x)`` (the body: the MLP's hidden layer, 157,000 numbers
on MNIST, or the CNN's convolutions and first dense layer) followed by a head ``psi(.; y)`` (the
output layer, 2,010 numbers on MNIST; the CNN's last two dense layers). With client ``i``'s
samples split into a training part ``D^tr_i`` and a validation part ``D^val_i``:

.. math::

    f_i(x, y) &= \frac{1}{|D^{val}_i|} \sum_{(u, c) \in D^{val}_i}
                 \mathrm{CE}\big(\psi(\phi(u; x); y), c\big), \\
    g_i(x, y) &= \frac{1}{|D^{tr}_i|} \sum_{(u, c) \in D^{tr}_i}
                 \mathrm{CE}\big(\psi(\phi(u; x); y), c\big) + R(y),

the outer variable is the shared representation ``x`` and the inner variable the head ``y``
(FedNest Sec. 4.1 and its code: the hidden layer is outer, the output layer inner), and the problem
is ``min_x f(x, y*(x))`` with ``y*(x) = argmin_y g(x, y)``, ``f = mean_i f_i``, ``g = mean_i g_i``.

The regulariser ``R``:

- ``"squared"`` (default): ``R(y) = lambda/2 ||y||^2``. The cross-entropy of a linear head is
  convex in ``y``, so ``g`` is ``lambda``-strongly convex in ``y``: the setting of FedNest's
  Assumption A2 and AggITD's Assumption 1 under which ``y*(x)`` and the hypergradient exist.
- ``"norm"``: ``R(y) = lambda/2 sum_W ||W||_F`` over the head's weight and bias, the authors'
  code (``0.5 * 0.1 * sum ||W||``, ucr-optml/FedNest). It is *not* strongly convex (FedNest's
  Assumption A2 is violated); kept so the authors' objective can be run.

For the CNN the head has a hidden ReLU layer, so ``g`` is not convex in ``y`` either way.

Validation share: FedNest's text splits each client's data evenly (300 + 300 images), its non-iid
code holds out 20%; ``validation_fraction`` (default 0.5, the paper's text) chooses.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from problems.checks import check_nonnegative
from problems.workloads._assemble import WorkloadError
from problems.workloads._assemble import assemble
from problems.workloads._assemble import resolve_inputs
from problems.workloads._assemble import resolve_split
from problems.workloads._workload import ClientWorkload
from problems.workloads.data import Dataset
from problems.workloads.models import Network
from problems.workloads.splits import ClientSplit

REGULARIZATIONS: tuple[str, ...] = ("squared", "norm")


class HyperRepresentation(ClientWorkload):
    """Hyper-representation workload; see the module docstring.

    Build it with :func:`build_hyper_representation` (or the registry's ``build_workload``).
    """

    def __init__(
        self, *, regularization: str, regularization_strength: float, **kwargs: Any
    ) -> None:
        super().__init__(name="hyper_representation", **kwargs)
        self.regularization = regularization
        self.regularization_strength = regularization_strength

    def regularizer(self, y: torch.Tensor) -> torch.Tensor:
        """``R(y)``: ``lambda/2 ||y||^2`` or ``lambda/2 sum_W ||W||_F``."""
        if self.regularization == "squared":
            return 0.5 * self.regularization_strength * (y * y).sum()
        tensors = self.network.head.unflatten(y).values()
        return (
            0.5
            * self.regularization_strength
            * sum(
                (torch.linalg.vector_norm(w) for w in tensors),
                torch.zeros((), dtype=y.dtype, device=y.device),
            )
        )

    # the logits factor through the body's features phi(u; x) (see ClientWorkload: the features
    # of a fixed x are computed once and reused while only y-derivatives are taken)
    def feature_row(self, x: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """``phi(u; x)``: the body's representation of one client's inputs."""
        return self.network.features(x, inputs)

    def head_logits(self, y: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """``psi(phi; y)``: the head's logits on the features."""
        return self.network.head.apply(y, features)

    def inner_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return self.head_logits(y, self.feature_row(x, inputs))

    def test_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return self.network.logits(x, y, inputs)


def build_hyper_representation(
    dataset: Dataset | str,
    split: ClientSplit | Mapping[str, Any],
    *,
    model: str | Network = "mlp",
    seed: int = 0,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | str = torch.float32,
    validation_fraction: float = 0.5,
    regularization: str = "squared",
    regularization_strength: float = 0.1,
    normalize: bool = True,
    data_root: str | Path | None = None,
) -> HyperRepresentation:
    """Build the hyper-representation workload.

    Args:
        dataset: a loaded :class:`~problems.workloads.data.Dataset` or a dataset name.
        split: a :class:`~problems.workloads.splits.ClientSplit` of the training set, or a spec
            ``{"scheme": ..., "n_clients": ..., **knobs}`` drawn with ``seed``.
        model: ``"mlp"`` (input-200-classes), ``"mlp3"``, ``"cnn"``, or a built network.
        seed: seeds the split, the validation hold-out and the initial point.
        device, dtype: where and in what precision the workload computes (float32 default).
        validation_fraction: each client's validation share.
        regularization, regularization_strength: ``R`` and its ``lambda`` (module docstring).
        normalize: standardise images with the training set's per-channel mean and std.
        data_root: folder of the dataset files when ``dataset`` is a name.
    """
    if regularization not in REGULARIZATIONS:
        raise WorkloadError(
            f"regularization must be one of {REGULARIZATIONS}, got {regularization!r}"
        )
    strength = check_nonnegative(
        "hyper_representation", "regularization_strength", regularization_strength, WorkloadError
    )
    resolved = resolve_inputs(dataset, model, dtype, device, data_root)
    data, network, dtype, device = resolved
    if network.body.n_params == 0:
        raise WorkloadError(
            f"hyper_representation: model {network.name!r} has no "
            "representation layers to learn as the outer variable"
        )
    client_split = resolve_split(split, data.train_y.cpu().numpy(), data.n_classes, seed)
    parts = assemble(
        resolved,
        client_split,
        validation_fraction=validation_fraction,
        normalize=normalize,
        seed=seed,
        what="hyper_representation",
    )
    body, head = network.initial(seed)
    return HyperRepresentation(
        **parts.arguments(
            network, body, head, regularization=regularization, regularization_strength=strength
        ),
        regularization=regularization,
        regularization_strength=strength,
    )
