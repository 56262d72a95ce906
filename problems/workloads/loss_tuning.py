r"""Federated loss-function tuning on long-tailed data (FedNest Sec. 4.2 / Fig. 3; FedMSA Sec. 4).

The training pool is long-tailed (class ``c`` keeps ``ceil(n_max r^{c/(C-1)})`` images,
``r = imbalance_ratio``; FedNest's MNIST: ``r = 0.01``, 6000 down to 60 images), split over the
clients, and each client holds out a validation part of its own (imbalanced) samples. Following
AutoBalance and the authors' code (FedNest Sec. 4.2, FedMSA Sec. 4), the outer variable is a
VS-loss parametrisation with one multiplicative and one additive logit adjustment per class,
``x = [d; l] in R^{2C}`` (both 0 initially), and the inner variable is the whole network ``y``:

.. math::

    g_i(x, y) &= \frac{1}{|D^{tr}_i|} \sum_{(u, c) \in D^{tr}_i}
        \mathrm{CE}\big(z(u; y) \odot \sigma(d) + l,\ c\big) + \frac{\lambda}{2} \|y\|^2, \\
    f_i(x, y) &= \frac{1}{|D^{val}_i|} \sum_{(u, c) \in D^{val}_i}
        w_c\, \mathrm{CE}\big(z(u; y),\ c\big), \qquad w_c = \frac{1}{C \pi_c},

with ``z(u; y)`` the network's logits, ``sigma`` the logistic function and ``pi_c`` the share of
class ``c`` in the clients' pooled samples. With these weights the expected validation loss is the
*class-balanced* loss ``(1/C) sum_c E[CE | class c]`` (AutoBalance's objective); the authors
normalise ``w`` to unit Euclidean norm instead, which only rescales ``f`` (a step size absorbs it).
``f`` depends on ``x`` only through ``y*(x)``: ``grad_x f_i = 0`` and the hypergradient is purely
indirect (FedMSA Sec. 4). Test metrics use the plain logits ``z`` on the balanced test set.

The inner problem (a whole MLP) is not convex; ``lambda > 0`` (``inner_regularization``) adds
curvature but no global strong convexity. The authors' code has no regulariser (default 0).

Validation share: 20% (FedNest Sec. 4.2 text, FedMSA code).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
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
from problems.workloads.splits import long_tail_indices


class LossTuning(ClientWorkload):
    """Loss-function tuning workload; see the module docstring.

    Build it with :func:`build_loss_tuning` (or the registry's ``build_workload``).

    Attributes:
        class_weights: ``w_c = 1 / (C pi_c)`` of the balanced validation loss.
    """

    def __init__(
        self, *, class_weights: torch.Tensor, inner_regularization: float, **kwargs: Any
    ) -> None:
        super().__init__(name="loss_tuning", **kwargs)
        self.class_weights = class_weights
        self.inner_regularization = inner_regularization

    def _extra_tensors(self) -> tuple[str, ...]:
        return ("class_weights",)

    def adjusted_logits(self, x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """VS-loss logits ``z * sigmoid(d) + l`` with ``x = [d; l]``."""
        n_classes = self.network.n_classes
        return logits * torch.sigmoid(x[:n_classes]) + x[n_classes:]

    def inner_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """``g_i``'s logits: the adjusted ones."""
        return self.adjusted_logits(x, self.network.full_logits(y, inputs))

    def outer_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """``f_i``'s logits: the plain ones."""
        return self.network.full_logits(y, inputs)

    def validation_weights(self, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``w_c`` times the sample weights: the balanced validation loss."""
        return weights * self.class_weights[labels]

    def regularizer(self, y: torch.Tensor) -> torch.Tensor:
        """``lambda/2 ||y||^2``."""
        return 0.5 * self.inner_regularization * (y * y).sum()

    def test_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return self.network.full_logits(y, inputs)


def _long_tailed_split(
    split: ClientSplit | Mapping[str, Any],
    labels: np.ndarray,
    n_classes: int,
    imbalance_ratio: float | None,
    head_class_size: int | None,
    seed: int,
) -> ClientSplit:
    """The split of the long-tailed pool, with indices into the whole training set."""
    if isinstance(split, ClientSplit):
        if imbalance_ratio is not None:
            raise WorkloadError(
                "a ClientSplit already fixes every client's samples; pass "
                "imbalance_ratio=None with it (or give a split spec)"
            )
        return split
    if imbalance_ratio is None:
        return resolve_split(split, labels, n_classes, seed)
    if isinstance(split, Mapping) and split.get("scheme") == "long_tail":
        raise WorkloadError(
            "loss_tuning draws the long tail itself (imbalance_ratio); split the "
            "long-tailed pool with scheme 'iid' (or shards, dirichlet, "
            "dominant), not 'long_tail'"
        )
    pool = long_tail_indices(labels, n_classes, imbalance_ratio, seed=seed, n_max=head_class_size)
    inner = resolve_split(split, labels[pool], n_classes, seed)
    params = {**inner.params, "imbalance_ratio": imbalance_ratio, "n_long_tail": int(pool.size)}
    return ClientSplit(inner.scheme, params, inner.seed, tuple(pool[ix] for ix in inner.indices))


def build_loss_tuning(
    dataset: Dataset | str,
    split: ClientSplit | Mapping[str, Any],
    *,
    model: str | Network = "mlp",
    seed: int = 0,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | str = torch.float32,
    validation_fraction: float = 0.2,
    imbalance_ratio: float | None = 0.01,
    head_class_size: int | None = None,
    inner_regularization: float = 0.0,
    normalize: bool = True,
    data_root: str | Path | None = None,
) -> LossTuning:
    """Build the loss-tuning workload.

    Args:
        dataset: a loaded :class:`~problems.workloads.data.Dataset` or a dataset name.
        split: a spec ``{"scheme": ..., "n_clients": ..., **knobs}`` applied to the long-tailed
            pool, or a :class:`~problems.workloads.splits.ClientSplit` of the whole training set
            (then ``imbalance_ratio`` must be ``None``: the split already chose the samples).
        model: ``"mlp"`` (the authors' code), ``"mlp3"`` (the paper's 784-200-100-10), ``"cnn"``
            or a built network; all of it is the inner variable.
        seed: seeds the long tail, the split, the hold-out and the initial network.
        device, dtype: where and in what precision the workload computes (float32 default).
        validation_fraction: each client's validation share (paper: 0.2).
        imbalance_ratio: tail/head ratio ``r`` of the long tail (paper: 0.01); ``None`` keeps
            the training set as it is.
        head_class_size: ``n_max`` of the profile (paper: 6000 on MNIST); ``None``: the smallest
            class count, so the profile holds exactly.
        inner_regularization: ``lambda`` of ``lambda/2 ||y||^2`` in ``g_i``.
        normalize: standardise images with the training set's per-channel mean and std.
        data_root: folder of the dataset files when ``dataset`` is a name.
    """
    strength = check_nonnegative(
        "loss_tuning", "inner_regularization", inner_regularization, WorkloadError
    )
    resolved = resolve_inputs(dataset, model, dtype, device, data_root)
    data, network, dtype, device = resolved
    labels = data.train_y.cpu().numpy()
    client_split = _long_tailed_split(
        split, labels, data.n_classes, imbalance_ratio, head_class_size, seed
    )
    counts = np.bincount(labels[client_split.assigned()], minlength=data.n_classes)
    if (counts == 0).any():
        raise WorkloadError(
            f"loss_tuning: classes {np.flatnonzero(counts == 0).tolist()} have no "
            "sample on any client, so the balanced loss is undefined; use a "
            "larger imbalance_ratio or head_class_size"
        )
    parts = assemble(
        resolved,
        client_split,
        validation_fraction=validation_fraction,
        normalize=normalize,
        seed=seed,
        what="loss_tuning",
    )
    shares = counts / counts.sum()
    class_weights = torch.as_tensor(1.0 / (data.n_classes * shares), dtype=dtype, device=device)
    body, head = network.initial(seed)
    x0 = torch.zeros(2 * data.n_classes, dtype=dtype, device=device)
    return LossTuning(
        **parts.arguments(
            network,
            x0,
            torch.cat([body, head]),
            imbalance_ratio=imbalance_ratio,
            head_class_size=head_class_size,
            class_counts=counts.tolist(),
            inner_regularization=strength,
        ),
        class_weights=class_weights,
        inner_regularization=strength,
    )
