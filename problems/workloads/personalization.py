"""HGP's personalization problems on real data (Terashita & Hara, sec. 5.3).

HGP-PL multiplies the model's logits by ``n_classes * softmax(lambda_i)`` (the authors' code's
scaling, hitachi-rd-cv/pdbo-hgp, so the mask is 1 at ``lambda = 0``), HGP-MTL mixes ``K``
models' class probabilities with weights ``softmax(lambda_i)`` (the code's NLL of the mixture).
``g_i`` = training cross entropy of the personalized prediction + ``wd/2 ||y||^2``; ``f_i`` =
the same cross entropy on the outer data (the code uses the training set) + ``rho/2
||lambda_i||^2`` (Table 6). The letters and the per-client interface are those of
:mod:`problems.workloads.decentralized`.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from problems._base import ProblemError
from problems.workloads._client_data import ClientSamples
from problems.workloads.classifiers import Classifier
from problems.workloads.decentralized import PerClientClassification
from problems.workloads.decentralized import replicated

PersonalizationMode = Literal["pl", "mtl"]


class PersonalizationProblem(PerClientClassification):
    """HGP-PL (``mode="pl"``) or HGP-MTL (``mode="mtl"``); see the module docstring.

    Args:
        net: one model; MTL stacks ``learners`` copies of it in ``y`` (each its own seed).
        train: the clients' training samples (``g_i``); outer: ``f_i``'s samples.
        mode: ``"pl"`` or ``"mtl"``.
        n_classes: classes (PL's ``lambda_i`` has one entry per class).
        weight_decay: L2 on the model in g_i (paper: 0.001).
        outer_l2: ``rho`` on ``lambda_i`` in f_i (Table 6: 0.001 or 0.01).
        learners: MTL's number of models (paper: 3).
        evaluation: held-out sample sets by name (e.g. ``{"test": ..., "val": ...}``) for
            :meth:`evaluate`.
    """

    def __init__(
        self,
        net: Classifier,
        train: ClientSamples,
        outer: ClientSamples,
        *,
        mode: PersonalizationMode,
        n_classes: int,
        weight_decay: float = 1e-3,
        outer_l2: float = 1e-3,
        learners: int = 3,
        seed: int = 0,
        evaluation: dict[str, ClientSamples] | None = None,
    ) -> None:
        if mode not in ("pl", "mtl"):
            raise ProblemError(f"personalization mode must be 'pl' or 'mtl', got {mode!r}")
        if mode == "mtl" and (
            isinstance(learners, bool) or not isinstance(learners, int) or learners < 2
        ):
            raise ProblemError(f"HGP-MTL needs an integer learners >= 2, got {learners!r}")
        if not (math.isfinite(outer_l2) and outer_l2 >= 0.0):
            raise ProblemError(f"outer_l2 must be finite and >= 0, got {outer_l2}")
        self.mode, self.n_classes = mode, n_classes
        self.learners = learners if mode == "mtl" else 1
        super().__init__(
            net,
            train,
            outer,
            dim_y=net.n_params * self.learners,
            dim_hyper=n_classes if mode == "pl" else self.learners,
            weight_decay=weight_decay,
            seed=seed,
            name=f"hgp.personalization.{mode}",
        )
        self.outer_l2 = float(outer_l2)
        self.evaluation = dict(evaluation or {})

    def initial_model(self) -> torch.Tensor:
        """The learners' seeded initial vectors (seeds ``seed, seed + 1, ...``)."""
        return torch.cat([self.net.initial(self.seed + k) for k in range(self.learners)]).to(
            device=self.device, dtype=self.dtype
        )

    def _log_probs(self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Log class probabilities of one client's personalized predictor:
        PL ``log_softmax(logits * C softmax(lambda))``; MTL
        ``log sum_k softmax(lambda)_k softmax(logits_k)`` (a logsumexp, stable)."""
        if self.mode == "pl":
            logits = self.net.apply(y, inputs) * (self.n_classes * torch.softmax(lam, -1))
            return torch.log_softmax(logits, -1)
        parts = y.reshape(self.learners, self.net.n_params)
        per_learner = torch.stack(
            [torch.log_softmax(self.net.apply(p, inputs), -1) for p in parts]
        )  # (K, N, classes)
        return torch.logsumexp(per_learner + torch.log_softmax(lam, -1)[:, None, None], 0)

    def sample_losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        return F.nll_loss(self._log_probs(y, lam, inputs), labels, reduction="none")

    def outer_penalty(self, lam: torch.Tensor) -> torch.Tensor:
        return 0.5 * self.outer_l2 * (lam * lam).sum(-1)

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """Personalized accuracy of every client's own model row and lambda_i on each held-out
        set: ``<set>_accuracy`` (mean over clients weighted by local size, Table 2's first
        figure), ``<set>_p10`` (10th percentile of the per-client accuracies, its second) and
        ``<set>_loss`` (mean negative log-likelihood)."""
        n = self.n_clients
        clients = self.every_client()
        lam = self.hyper_blocks(replicated(x, n), clients)
        ys = replicated(y, n)
        out: dict[str, float] = {}
        for label, data in self.evaluation.items():
            inputs, labels, weights = data.full(clients)
            real = (weights > 0).to(self.dtype)
            log_probs = torch.func.vmap(self._log_probs)(ys, lam, inputs)
            correct = (log_probs.argmax(-1) == labels).to(self.dtype) * real
            nll = -log_probs.gather(-1, labels[..., None])[..., 0] * real
            sizes = data.counts.to(self.dtype)
            per_client = (correct.sum(-1) / sizes).cpu().numpy()
            out[f"{label}_accuracy"] = float(correct.sum() / sizes.sum())
            out[f"{label}_p10"] = float(np.percentile(per_client, 10))
            out[f"{label}_loss"] = float(nll.sum() / sizes.sum())
        return out


__all__ = ["PersonalizationMode", "PersonalizationProblem"]
