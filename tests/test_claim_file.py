"""Claims files (theory_checks/claim_file.py): the shipped files load into the claims the
registry holds, and a malformed file is an error that names the file, the claim and the key."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from theory_checks.claim import Case, PerProfile
from theory_checks.claim_file import ClaimFileError, code, load_claims
from theory_checks.registry import CLAIM_DB, get_claim

ROOT = Path(__file__).resolve().parents[1] / "theory_checks"

GOOD = '''
paper = "Classical"

[[claim]]
id = "classical.cg.exact_after_dim_y"
reference = "Hestenes & Stiefel 1952; Grazzi et al. 2020 (AID-CG)"
kind = "exact_identity"
statement = "AID-CG with dim_y iterations and y = y*(x) returns grad h exactly"
estimators = ["aid-cg"]
strategy = {call = "theory_checks.classical.common:closed_form_cases"}
check = "theory_checks.classical.cg:check_cg_exact"
perturbation = "theory_checks.classical.cg:SHORT_CG"
max_examples = {fast = 2}

[claim.positive_control]
problem = {family = "QuadraticBilevel.random", n_clients = 1, dim_x = 1, dim_y = 2, \
condition_number = 2.0, seed = 0}
params = {point_seed = 0, local_steps = [1, 2]}
'''


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "claims.toml"
    path.write_text(text)
    return path


def _declared_in_result_modules() -> set[str]:
    """The ids of the claims a paper's result module declares in Python (``CLAIMS`` of
    ``theory_checks/<paper>/<result>.py``, tests/test_claim_layout.py)."""
    ids: set[str] = set()
    for folder in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").is_file()):
        for info in pkgutil.iter_modules([str(folder)]):
            if info.name in {"__init__", "mutants"}:
                continue
            module = importlib.import_module(f"theory_checks.{folder.name}.{info.name}")
            ids |= {c.id for c in getattr(module, "CLAIMS", ())}
    return ids


def test_every_shipped_claims_file_loads_and_its_claims_are_registered():
    files = sorted(ROOT.rglob("*.toml"))
    registered = {c.id for c in CLAIM_DB}
    loaded = [claim for path in files for claim in load_claims(path)]
    assert {c.id for c in loaded} <= registered
    # every other claim is Python, declared in its result's module; the Table 2 round counts
    # per variant are made from the algorithms' formulas
    made = {"fednest.rounds." + v for v in ("fednest", "lfednest", "fednest_sgd",
                                            "lfednest_svrg", "fednest_minimax")}
    assert registered == {c.id for c in loaded} | _declared_in_result_modules() | made


def test_a_file_gives_the_same_claim_as_the_registry(tmp_path):
    claim, = load_claims(_write(tmp_path, GOOD))
    registered = get_claim("classical.cg.exact_after_dim_y")
    for field in ("id", "paper", "reference", "kind", "statement", "estimators", "check",
                  "perturbation", "expected", "decision"):
        assert getattr(claim, field) == getattr(registered, field), field
    assert claim.max_examples == PerProfile(2, None)
    case = claim.positive_control()
    assert isinstance(case, Case)
    assert case.params["local_steps"] == (1, 2)  # arrays come back as the tuples they were
    assert case.problem.spec()["dim_y"] == 2


@pytest.mark.parametrize("change, message", [
    (("kind = \"exact_identity\"", "kind = \"exact_identity\"\nverdict = \"holds\""),
     r"claims\.toml: claim classical\.cg\.exact_after_dim_y: unknown key\(s\) \['verdict'\]"),
    (("check_cg_exact", "check_cg_exactly"),
     r"claim classical\.cg\.exact_after_dim_y: .*has no check_cg_exactly"),
    (("\"theory_checks.classical.cg:check_cg_exact\"",
      "\"theory_checks.classical.cg.check_cg_exact\""),
     r"is not of the form 'package\.module:name'"),
    (("\"theory_checks.classical.cg:SHORT_CG\"",
      "\"theory_checks.classical.cg:check_cg_exact\""), r"is a function, not a Perturbation"),
    (("theory_checks.classical.common:closed_form_cases", "theory_checks.nowhere:_cases"),
     r"cannot import theory_checks\.nowhere"),
    (("kind = \"exact_identity\"", "kind = \"a_feeling\""), r"unknown kind 'a_feeling'"),
    (("paper = \"Classical\"", "paper = \"Classical\"\nauthor = \"x\""),
     r"unknown top-level key\(s\) \['author'\]"),
    (("params = {", "params = ["), r"claims\.toml: "),
])
def test_a_malformed_file_is_an_error_naming_file_claim_and_key(tmp_path, change, message):
    old, new = change
    assert old in GOOD
    with pytest.raises(ClaimFileError, match=message):
        load_claims(_write(tmp_path, GOOD.replace(old, new, 1)))


def test_a_call_table_passes_arrays_as_tuples():
    got = code({"call": "builtins:dict", "kappa": [1.0, 2.0], "nested": {"a": [1]}})
    assert got == {"kappa": (1.0, 2.0), "nested": {"a": (1,)}}
    with pytest.raises(ClaimFileError, match="expected a reference"):
        code(3)


def test_a_claim_undecided_by_design_names_the_run_that_decides_it():
    """FedNest's K-rate claims are undecided on the fast profile by design: each records the
    measured time of `testbed check --profile thorough --claim ID`, which decides it, and the
    report prints both beside the verdict."""
    import dataclasses

    for claim_id in ("fednest.thm31.k_rate_bilevel", "fednest.cor32.k_rate_minimax",
                     "fednest.cor33.k_rate_compositional"):
        claim = get_claim(claim_id)
        assert claim.deciding_profile("fast") == "thorough"
        assert claim.deciding_profile("thorough") is None
        assert claim.decide_seconds is not None and claim.decide_seconds > 0
    decided = get_claim("classical.gd.linear_rate")
    assert decided.deciding_profile("fast") is None
    with pytest.raises(ValueError, match="decide_seconds .* needs undecided_on"):
        dataclasses.replace(decided, decide_seconds=10.0)
