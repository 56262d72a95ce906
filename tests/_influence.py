"""The small influence problems the HGP workload tests share: iid digits clients, float64."""

from __future__ import annotations

from typing import Any

import torch

from problems.workloads.data import load_dataset
from problems.workloads.decentralized import InfluenceProblem, build_classifier, client_samples
from problems.workloads.splits import split_clients

DIGITS = load_dataset("digits", test_fraction=0.25, seed=0)


def influence_problem(n_clients: int, per_client: int, *, model: str = "logreg",
                      weight_decay: float = 0.05) -> InfluenceProblem:
    """Equal-size iid clients drawn from the first ``n_clients * 2 * per_client`` digits:
    ``per_client`` training and as many validation digits each."""
    pool = 2 * n_clients * per_client
    split = split_clients(DIGITS.train_y[:pool], n_clients, "iid", seed=0)
    train, val = split.holdout(0.5, seed=0)
    net = build_classifier(model, DIGITS.input_shape, DIGITS.n_classes)

    def samples(part: Any) -> Any:
        return client_samples(DIGITS.train_x, DIGITS.train_y, part.indices, "t",
                              dtype=torch.float64, device="cpu")

    return InfluenceProblem(net, samples(train), samples(val), weight_decay=weight_decay)
