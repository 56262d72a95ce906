"""Time per FedNest iteration (T = 1, N = 5, tau = 5, SVRG, 784-200-10 MLP hyper-representation, 100
clients of MNIST-shaped data) against the authors' code driven through its own modules; target:
>= 3x on CPU at 1 thread.

The authors' hyper-representation experiment (``main_hr.py`` of ucr-optml/FedNest) runs one outer
iteration as ``inner_ep`` FedInn calls (``ClientManageHR.fed_in``) and one FedOut
(``ClientManageHR.fed_out``: FedIHGP, the hypergradient round and ``outer_tau`` SVRG outer
steps), then ``assign_hyper_gradient`` and an SGD step on the representation. This benchmark
drives exactly that loop body, through the authors' modules imported unmodified from a folder
the user names, and the testbed's :class:`~testbed.FedNest` on
:func:`~problems.workloads.hyper_representation.build_hyper_representation`, on the same
in-memory data, and reports the time per iteration of each (median of interleaved repeats,
torch on 1 thread). Test evaluation and logging, which the authors' loop does after each
iteration, are left out of both.

Same work on both sides (the authors' defaults, ``utils/options.py``):

- 100 clients of an MNIST-shaped set (28 x 28 images, 10 classes, 600 per client: 300 to train,
  300 to validate, as ``mnist_iid_normal`` splits them), the 784-200-10 MLP with the hidden layer
  as outer variable and the output layer (``header``) as inner variable, the norm regulariser
  ``0.05 sum ||W||`` (``cross_entropy_reg``; the testbed's ``regularization="norm"``), float32;
- ``inner_ep = T = 1``, ``neumann = N = 5``, ``local_ep = outer_tau = tau = 5``, SVRG at both
  levels, ``hvp_method="global_batch"``: 2T + N + 3 = 10 communication rounds per iteration;
- ``local_bs`` = a client's whole training part (300), so every local step of the authors' code
  is one full-batch step, as the testbed's exact local objectives are (with their default
  ``local_bs = 10`` an epoch is 30 minibatch steps: a different algorithm, not timed here);
- ``frac``: 10 or 100 clients per round (the testbed's ``participation`` count).

Per client and iteration both sides make 11 inner gradients (FedInn: the snapshot and 5 x 2
SVRG gradients), one ``grad_y f``, N Hessian-vector products, one mixed product and 11 outer
gradients (FedOut: ``grad_x f`` and 5 x 2 SVRG gradients); the authors' code also rebuilds the
inner gradient's graph twice and copies the network per client, which is part of what it costs.
The two iterates are not compared: the authors' FedIHGP averages every client's partial sum
from all earlier Neumann steps (``p_locals`` is not reset), and their MLP has dropout, so their
numbers differ from Alg. 3's by design (``core/ClientManage_hr.py``); the work does not.

The data are random images of MNIST's shape (the arithmetic does not depend on the pixels; real
MNIST cannot be downloaded here). Two imports the authors' modules make and never use
(``from cv2 import log``, ``from importlib_metadata import requires``) are given empty stand-ins
when those packages are not installed; nothing else of theirs is changed. The loader that imports
them is the adapters' (:mod:`testbed_authors_checkout`, ``integrations/authors_checkout``), not
the testbed's.

Reproduce (target, issue 12: the testbed >= 3x per iteration on CPU at 1 thread)::

    git clone https://github.com/ucr-optml/FedNest /path/to/FedNest
    pip install --no-deps integrations/authors_checkout   # the loader (tox installs it)
    python benchmarks/authors_fednest.py --authors-repo /path/to/FedNest

or set ``FEDNEST_AUTHORS_REPO`` for ``benchmarks/run.py``. Without the authors' code the file
records the testbed's side alone and says how to add theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import os
import sys
import types
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import Row
from _common import Settings
from _common import Target
from _common import add_arguments
from _common import default_dtype
from _common import description
from _common import interleaved
from _common import run_benchmark
from _common import speedup
from _common import target
from closed_form_rounds import one_round
from testbed_authors_checkout import FEDNEST
from testbed_authors_checkout import AuthorsCodeError
from testbed_authors_checkout import checkout
from testbed_authors_checkout import import_authors_code
from testbed_authors_checkout import named_checkout

from problems.workloads import Dataset
from problems.workloads import build_workload
from testbed.algorithms.fednest import FedNest

NAME = "authors_fednest"
DESCRIPTION = description(__doc__)
TARGET_SPEEDUP = 3.0
#: The authors' objects this benchmark uses, by module (relative to their repository root).
AUTHORS_OBJECTS = {
    "ClientManageHR": "core.ClientManage_hr:ClientManageHR",
    "assign_hyper_gradient": "core.function:assign_hyper_gradient",
    "build_model": "models.ModelBuilder:build_model",
    "args_parser": "utils.options:args_parser",
}
CLIENTS, QUICK_CLIENTS = 100, 4
PER_CLIENT, QUICK_PER_CLIENT = 600, 20  # MNIST's 60,000 training images over 100 clients
CLIENTS_PER_ROUND = (10, 100)
CLASSES, SHAPE = 10, (1, 28, 28)
# Why these values: the authors' defaults (utils/options.py); quick mode shrinks N and tau.
INNER_STEPS, NEUMANN_TERMS, LOCAL_STEPS = 1, 5, 5
QUICK_NEUMANN_TERMS, QUICK_LOCAL_STEPS = 2, 2
INNER_LR, HYPER_LR = 0.003, 0.01  # options.py: --lr 0.003, --hlr 0.01 (also the Neumann scale)


# --------------------------------------------------------------------------- the data


def mnist_shaped(clients: int, per_client: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``clients * per_client`` random images in ``[0, 1]`` of MNIST's shape, labels 0..9."""
    generator = torch.Generator().manual_seed(seed)
    n = clients * per_client
    images = torch.rand((n, *SHAPE), generator=generator, dtype=torch.float32)
    labels = torch.randint(0, CLASSES, (n,), generator=generator)
    return images, labels


def client_indices(clients: int, per_client: int, seed: int = 0) -> dict[int, np.ndarray]:
    """The authors' ``dict_users``: client ``i``'s training indices under ``i`` and its
    validation indices under ``-i - 1`` (``mnist_iid_normal``), half and half."""
    order = np.random.default_rng(seed).permutation(clients * per_client)
    half = per_client // 2
    users: dict[int, np.ndarray] = {}
    for i in range(clients):
        block = order[i * per_client : (i + 1) * per_client]
        users[i], users[-i - 1] = block[:half], block[half:]
    return users


# --------------------------------------------------------------------------- the testbed's side


def testbed_iteration(
    images: torch.Tensor, labels: torch.Tensor, clients: int, per_round: int, quick: bool
) -> Callable[[], Any]:
    """One FedNest iteration of the testbed on the data, as a call (fresh context each time)."""
    dataset = Dataset(
        "mnist-shaped",
        images,
        labels,
        images[:CLASSES],
        labels[:CLASSES],
        CLASSES,
        source="random images of MNIST's shape",
    )
    problem = build_workload(
        "hyper_representation",
        dataset,
        {"scheme": "iid", "n_clients": clients},
        model="mlp",
        seed=0,
        dtype=torch.float32,
        validation_fraction=0.5,
        regularization="norm",
        regularization_strength=0.1,
        normalize=False,
    )
    fednest = FedNest(
        inner_steps=INNER_STEPS,
        neumann_terms=QUICK_NEUMANN_TERMS if quick else NEUMANN_TERMS,
        local_steps=QUICK_LOCAL_STEPS if quick else LOCAL_STEPS,
        truncation="deterministic",
        inner_step_size=INNER_LR,
        outer_step_size=HYPER_LR,
        neumann_step_size=HYPER_LR,
        scale_by_steps=False,
        participation=per_round,
    )
    state = fednest.init(problem)
    return functools.partial(one_round, fednest, problem, state)


# --------------------------------------------------------------------------- the authors' side


def authors_repo(path: str | os.PathLike[str] | None) -> Path | None:
    """The authors' repository folder (``path`` or ``$FEDNEST_AUTHORS_REPO``), or ``None``.

    Raises :class:`~testbed_authors_checkout.AuthorsCodeError` when a folder is named but lacks
    their modules.
    """
    named = path if path is not None else named_checkout()
    return None if named is None else checkout(named, AUTHORS_OBJECTS)


def authors_arguments(
    code: types.SimpleNamespace, clients: int, per_round: int, batch: int, quick: bool
) -> argparse.Namespace:
    """Their ``args_parser()`` with this benchmark's settings on its command line."""
    argv = [
        "main_hr.py",
        "--num_users",
        str(clients),
        "--frac",
        str(per_round / clients),
        "--local_bs",
        str(batch),
        "--gpu",
        "-1",
        "--optim",
        "svrg",
        "--model",
        "mlp",
        "--dataset",
        "mnist",
        "--iid",
        "--hvp_method",
        "global_batch",
        "--inner_ep",
        str(INNER_STEPS),
        "--neumann",
        str(QUICK_NEUMANN_TERMS if quick else NEUMANN_TERMS),
        "--local_ep",
        str(QUICK_LOCAL_STEPS if quick else LOCAL_STEPS),
        "--outer_tau",
        str(QUICK_LOCAL_STEPS if quick else LOCAL_STEPS),
        "--lr",
        str(INNER_LR),
        "--hlr",
        str(HYPER_LR),
    ]
    saved = sys.argv
    sys.argv = argv
    try:
        args = code.args_parser()
    finally:
        sys.argv = saved
    args.img_size = torch.Size(SHAPE)  # what their load_data sets
    return args


def authors_iteration(
    code: types.SimpleNamespace,
    images: torch.Tensor,
    labels: torch.Tensor,
    clients: int,
    per_client: int,
    per_round: int,
    quick: bool,
) -> Callable[[], int]:
    """One iteration of the authors' ``main_hr.py`` loop body, as a call returning its rounds."""
    args = authors_arguments(code, clients, per_round, per_client // 2, quick)
    dataset = torch.utils.data.TensorDataset(images, labels)
    users = client_indices(clients, per_client)
    # their code allocates with torch's default dtype (run_benchmark sets float64); their runs
    # are float32, and their modules print progress, which the timing leaves out
    with default_dtype(torch.float32), contextlib.redirect_stdout(io.StringIO()):
        net = code.build_model(args)
    hyper_param = [w for name, w in net.named_parameters() if "header" not in name]
    hyper_optimizer = torch.optim.SGD(hyper_param, lr=1)
    generator = np.random.default_rng(0)

    def iteration() -> int:
        m = max(int(args.frac * args.num_users), 1)
        rounds = 0
        with default_dtype(torch.float32), contextlib.redirect_stdout(io.StringIO()):
            for _ in range(args.inner_ep):  # FedInn
                chosen = generator.choice(args.num_users, m, replace=False)
                manager = code.ClientManageHR(args, net, chosen, dataset, users, hyper_param)
                weights, _ = manager.fed_in()
                rounds += 2  # svrg: the snapshot round and the local-steps round
            net.load_state_dict(weights)
            chosen = generator.choice(args.num_users, m, replace=False)  # FedOut
            manager = code.ClientManageHR(args, net, chosen, dataset, users, hyper_param)
            hypergradient, outer_rounds = manager.fed_out()
            code.assign_hyper_gradient(hyper_param, hypergradient)
            hyper_optimizer.step()
        return rounds + int(outer_rounds)

    return iteration


# --------------------------------------------------------------------------- the benchmark


def measure(quick: bool, device_list: list[str]) -> tuple[list[Row], list[Target]]:
    if device_list != ["cpu"] and "cpu" not in device_list:
        raise SystemExit("authors_fednest compares CPU runs (the target is per iteration on CPU)")
    clients = QUICK_CLIENTS if quick else CLIENTS
    per_client = QUICK_PER_CLIENT if quick else PER_CLIENT
    images, labels = mnist_shaped(clients, per_client)
    repo = authors_repo(None)
    code = import_authors_code(repo, AUTHORS_OBJECTS) if repo is not None else None
    rows: list[Row] = []
    targets: list[Target] = []
    for per_round in (2, clients) if quick else CLIENTS_PER_ROUND:
        sides: dict[str, Callable[[], Any]] = {
            "testbed": testbed_iteration(images, labels, clients, per_round, quick)
        }
        if code is not None:
            sides["authors"] = authors_iteration(
                code, images, labels, clients, per_client, per_round, quick
            )
        timings = interleaved(sides, quick=quick, budget_s=120.0)
        ours = timings["testbed"]
        row: Row = {
            "clients": clients,
            "clients_per_round": per_round,
            "train_per_client": per_client // 2,
            "validation_per_client": per_client - per_client // 2,
            "dim_x": int(ours.result.x.numel()),
            "dim_y": int(ours.result.y.numel()),
            "testbed_iteration_s": ours.median,
            "testbed_rounds": int(ours.result.rounds),
            "repeats": ours.repeats,
        }
        if code is None:
            row["authors_code"] = (
                f"not found: pass --authors-repo PATH or set {FEDNEST.env} "
                "(git clone https://github.com/ucr-optml/FedNest)"
            )
        else:
            theirs = timings["authors"]
            ratio = speedup(theirs, ours)
            row.update(
                {
                    "authors_code": str(repo),
                    "authors_iteration_s": theirs.median,
                    "authors_rounds": int(theirs.result),
                    "speedup": ratio,
                }
            )
            if not quick:
                targets.append(
                    target(
                        f"FedNest iteration vs the authors' code, M = {clients}, {per_round} "
                        "clients per round, CPU, 1 thread",
                        ratio,
                        TARGET_SPEEDUP,
                        "at_least",
                    )
                )
        rows.append(row)
    return rows, targets


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=NAME, description=DESCRIPTION)
    add_arguments(parser)
    parser.add_argument(
        "--authors-repo",
        type=Path,
        default=None,
        help=f"a checkout of ucr-optml/FedNest (default: ${FEDNEST.env})",
    )
    args = parser.parse_args(argv)
    try:
        if args.authors_repo is not None:
            authors_repo(args.authors_repo)  # fail early, before any timing
            os.environ[FEDNEST.env] = str(args.authors_repo)
        settings = dataclasses.replace(Settings.from_args(args), device=args.device or "cpu")
        path = run_benchmark(NAME, DESCRIPTION, measure, settings)
    except AuthorsCodeError as error:
        print(f"{NAME}: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
