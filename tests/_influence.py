"""The small influence problems the HGP workload tests share (iid digits clients, float64) and
a small config of each HGP experiment."""

from __future__ import annotations

from typing import Any

import torch

from problems.workloads.classifiers import build_classifier
from problems.workloads.data import load_dataset
from problems.workloads.decentralized import client_samples
from problems.workloads.influence import InfluenceProblem
from problems.workloads.splits import split_clients
from testbed_app.experiments.base import ExperimentConfig

DIGITS = load_dataset("digits", test_fraction=0.25, seed=0)

#: An influence workload on a small network (an MLP), with caps far below what stationarity
#: needs: what checks the plumbing, and that a cap that stops a run is recorded as "not reached"
NETWORK = {
    "model": "mlp",
    "retrain_steps": 3,
    "train_refine_steps": 5,
    "jitter_count": 1,
    "train_grad_tol": 1e-12,
    "retrain_grad_tol": 1e-12,
}


def influence_problem(
    n_clients: int, per_client: int, *, model: str = "logreg", weight_decay: float = 0.05
) -> InfluenceProblem:
    """Equal-size iid clients drawn from the first ``n_clients * 2 * per_client`` digits:
    ``per_client`` training and as many validation digits each."""
    pool = 2 * n_clients * per_client
    split = split_clients(DIGITS.train_y[:pool], n_clients, "iid", seed=0)
    train, val = split.holdout(0.5, seed=0)
    net = build_classifier(model, DIGITS.input_shape, DIGITS.n_classes)

    def samples(part: Any) -> Any:
        return client_samples(
            DIGITS.train_x, DIGITS.train_y, part.indices, "t", dtype=torch.float64, device="cpu"
        )

    return InfluenceProblem(net, samples(train), samples(val), weight_decay=weight_decay)


def experiment_config(kind: str, **changes: Any) -> ExperimentConfig:
    """A small HGP experiment config of ``kind`` (``"hgp_influence"``: softmax regression, 4
    clients sharing 160 digits, top 4, 2 retrainings per step; ``"hgp_personalization"``), with
    ``{section: {key: value}}`` changes merged into its sections."""
    algorithm = {
        "name": "hgp-practical" if kind == "hgp_personalization" else "hgp",
        "neumann_terms": 3,
        "pushsum_steps": 2,
        "neumann_step_size": 0.1,
        "inner_steps": 4,
        "inner_step_size": 0.1,
        "sgp_variant": "nedic",
    }
    if kind == "hgp_personalization":
        algorithm["batch_size"] = 4
        workload: dict[str, Any] = {
            "kind": kind,
            "model": "logreg",
            "learners": 2,
            "sgp_batch_size": 8,
        }
    else:
        workload = {
            "kind": kind,
            "model": "logreg",
            "top_k": 4,
            "retrain_per_step": 2,
            "weight_decay": 0.05,
        }
    fields: dict[str, Any] = dict(
        name="hgp-test",
        paper="HGP",
        description="",
        data={"dataset": "digits", "root": None, "test_fraction": 0.25, "seed": 0, "limit": 160},
        split={"scheme": "iid", "n_clients": 4},
        workload=workload,
        algorithm=algorithm,
        run={
            "steps": 3,
            "eval_every": 1,
            "checkpoint_every": 1,
            "seed": 0,
            "device": "cpu",
            "dtype": "float32",
        },
    )
    for section, values in changes.items():
        fields[section] = {**fields[section], **values} if isinstance(values, dict) else values
    return ExperimentConfig(**fields)
