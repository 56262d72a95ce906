"""The CORE_CLAIMS of HGP (Lemmas 1-2, Corollary 1, Theorems 1-2), read from
``core_claims.toml``: the deterministic claims, each naming its check in the sibling modules;
:mod:`theory_checks.hgp` adds the rest.
"""

from __future__ import annotations

from pathlib import Path

from problems import PerClientQuadratic, strategies
from testbed.decentralized.graphs import CONNECTED_FAMILIES
from theory_checks.claim import Claim, known_case
from theory_checks.claim_file import load_claims
from theory_checks.hgp.common import graph_cases

# --------------------------------------------------------------------------- the claims

# Positive control of claim hgp.lemma2.sqrt_n_constant
lemma2_sqrt_n_constant_control = known_case(
    PerClientQuadratic.random(3, 1, 1, 1.0, 0).spec(),
    {"point_seed": 0, "graph_family": "directed_ring", "graph_seed": 0, "pushsum_steps": 1})

# Cases of claim hgp.corollary1.explicit_bound
corollary1_explicit_bound_cases = graph_cases(strategies.per_client_quadratic(),
                                              CONNECTED_FAMILIES)

# Positive control of claim hgp.theorem1.stated_step_condition
theorem1_stated_step_condition_control = known_case(
    PerClientQuadratic.random(3, 2, 2, 3.0, 2, hessian_heterogeneity=0.3).spec(),
    {"point_seed": 0, "eta_alpha": 0.1})

# Positive control of claim hgp.theorem2.as_stated
theorem2_as_stated_control = known_case(
    PerClientQuadratic.random(3, 2, 2, 2.0, 0, outer_coupling=0.0).spec(), {"point_seed": 0})


CORE_CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("core_claims.toml"))
