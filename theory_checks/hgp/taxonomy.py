"""HGP's hypergradient taxonomy (Sec. 4, Table 1): GlobalGrad, ClientGrad, LocalGrad.

In the personalized problem (client i owns ``lambda_i``, ``F = sum_k f_k``) three quantities
are called the hypergradient of client i (notation of :mod:`theory_checks.hgp`):

- GlobalGrad ``= d F / d lambda_i = e_i - J_i (sum_k H_k)^{-1} sum_k c_k`` (what HGP computes);
- ClientGrad ``= d f_i(y*(lambda)) / d lambda_i = e_i - J_i (sum_k H_k)^{-1} c_i``;
- LocalGrad ``= d f_i(y_i*(lambda_i)) / d lambda_i = e_i - J_i H_i^{-1} c_i`` (no federation).

With identical clients GlobalGrad = LocalGrad and ClientGrad = ``e + (GlobalGrad - e)/n``; with
heterogeneous clients the three differ.

Hypothesis: Assumption 2 (the inner solutions exist and the inverses are defined).

Checked (:func:`check_taxonomy`, ``hgp.taxonomy.closed_forms``): the three closed forms against
central finite differences of their definitions (1e-6), the identical-client identities (1e-10)
and, with heterogeneous clients, that the three differ. Perturbation: GlobalGrad returned
through float32.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import PerClientQuadratic
from problems import strategies
from results_format.verdicts import ABOUT_STEP
from testbed.decentralized.hgp import DecentralizedGradient
from testbed.registry import get_estimator
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import point
from theory_checks.hgp.constants import A2_STRONG_CONVEXITY
from theory_checks.tolerances import IDENTITY_RTOL


def _fd(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    # Why eps^(1/3): balances truncation and round-off of central differences.
    step = float(np.finfo(np.float64).eps) ** (1 / 3) * max(1.0, float(x.abs().max()))
    eye = torch.eye(x.shape[0], dtype=torch.float64)
    return torch.stack([(fn(x + step * e) - fn(x - step * e)) / (2 * step) for e in eye], -1)


def _identical(problem: PerClientQuadratic) -> PerClientQuadratic:
    rep = {
        k: getattr(problem, k)[:1].expand_as(getattr(problem, k)).clone()
        for k in ("A", "b", "C", "Q", "t", "P")
    }
    return PerClientQuadratic(
        rep["A"], rep["b"], rep["C"], rep["Q"], rep["t"], rep["P"], problem.rho
    )


def check_taxonomy(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """GlobalGrad / ClientGrad / LocalGrad (sec. 4) against finite differences of
    ``F``, ``f_i(y*(lambda))`` and ``f_i(y_i*(lambda_i))``; with identical clients
    GlobalGrad = LocalGrad and ClientGrad = e + (GlobalGrad - e) / n (1e-10); with heterogeneous
    clients the three differ."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    n, dl = problem.n_clients, problem.dim_hyper
    quantities = {
        "global": make(),
        "client": get_estimator("hgp-clientgrad").build(),
        "local": get_estimator("hgp-localgrad").build(),
    }
    values = {}
    for name, est in quantities.items():
        values[name] = est.estimate(problem, x, est.init(problem), np.random.default_rng(0)).aux[
            "v"
        ]
    clients = torch.arange(n)

    def f_rows(lam: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return problem.outer_loss(lam.expand(n, -1), y, clients, None)

    def client_f(lam: torch.Tensor) -> torch.Tensor:
        return f_rows(lam, problem.exact_inner_solution(lam).expand(n, -1))

    def local_f(lam: torch.Tensor) -> torch.Tensor:
        return f_rows(lam, problem.local_blocks(lam)["y"])

    fd_global = _fd(lambda lam: client_f(lam).sum(), x).reshape(n, dl)
    own = torch.arange(n)
    fd_client = _fd(client_f, x).reshape(n, n, dl)[own, own]
    fd_local = _fd(local_f, x).reshape(n, n, dl)[own, own]
    unit = float(fd_global.norm()) + 1.0
    # Why 1e-6: central differences of quadratics are exact up to round-off / step ~ 1e-10.
    fd_error = (
        max(
            float((values["global"] - fd_global).norm()),
            float((values["client"] - fd_client).norm()),
            float((values["local"] - fd_local).norm()),
        )
        / unit
    )
    same = _identical(problem)
    x_same = x.reshape(n, dl)[:1].expand(n, -1).reshape(-1)  # identical lambda_i too
    g = make().per_client(same, x_same)
    c = quantities["client"].per_client(same, x_same)
    loc = quantities["local"].per_client(same, x_same)
    e = same.client_blocks(x_same)["e"]
    identity = max(float((g - loc).norm()), float((c - (e + (g - e) / n)).norm())) / (
        float(g.norm()) + 1.0
    )
    gaps = [
        float((values[a] - values[b]).norm()) / unit
        for a, b in (("global", "client"), ("global", "local"), ("client", "local"))
    ]
    passed = fd_error <= 1e-6 and identity <= IDENTITY_RTOL and min(gaps) > 1e-6
    return Measurement(
        max(fd_error, identity),
        1e-6,
        passed,
        "finite differences and identical-client identities; the three differ",
        details={"fd_error": fd_error, "identity": identity, "gaps": gaps},
    )


def taxonomy_cases() -> st.SearchStrategy[Case]:
    """Cases for the hypergradient taxonomy (global, per-client, local quantities): heterogeneous
    clients with an outer coupling, and a point."""
    return st.builds(
        lambda problem, seed: Case(problem, {"point_seed": seed}),
        strategies.per_client_quadratic(
            hessian_heterogeneity=(0.2, 0.5), outer_coupling=(0.2, 1.0)
        ),
        strategies.SEEDS,
    )


# --------------------------------------------------------------------------- perturbation


@dataclasses.dataclass(frozen=True)
class _Float32GlobalGrad(DecentralizedGradient):
    """GlobalGrad returned through a float32 tensor (a dtype slip in the reference)."""

    def per_client(self, problem: Any, x: torch.Tensor) -> torch.Tensor:
        return super().per_client(problem, x).float().double()


def _float32_global(**kw: Any) -> Any:
    return _Float32GlobalGrad("global")


FLOAT32_GLOBALGRAD = Perturbation(
    "GlobalGrad through float32",
    "the reference GlobalGrad is returned through a float32 tensor (a dtype slip): relative "
    "error ~6e-8, above the identities' 1e-10 tolerance and below the 1e-6 finite-difference "
    "one, so only the exact identical-client identities can catch it",
    _float32_global,
)

# --------------------------------------------------------------------------- the claim


CLOSED_FORMS = hgp_claim(
    id="hgp.taxonomy.closed_forms",
    reference="HGP sec. 4 and Table 1 (GlobalGrad, ClientGrad, LocalGrad)",
    kind="exact_identity",
    about=ABOUT_STEP,
    statement=(
        "GlobalGrad, ClientGrad, LocalGrad equal finite differences of their definitions; "
        "identical clients: GlobalGrad = LocalGrad, ClientGrad = e + (GlobalGrad - e)/n; "
        "heterogeneous clients: all three differ"
    ),
    estimators=("hgp-globalgrad", "hgp-clientgrad", "hgp-localgrad"),
    strategy=taxonomy_cases,
    check=check_taxonomy,
    hypotheses=(A2_STRONG_CONVEXITY,),
    perturbation=FLOAT32_GLOBALGRAD,
)


CLAIMS: tuple[Claim, ...] = (CLOSED_FORMS,)
