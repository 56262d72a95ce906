"""Claims files (theory_checks/claim_file.py), the format of a plugin's claims: a file gives the
claim the Python definition gives, the plugins' files name testbed code that exists, and a
malformed file is an error that names the file, the claim and the key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from theory_checks.claim import Case
from theory_checks.claim import PerProfile
from theory_checks.claim_file import ClaimFileError
from theory_checks.claim_file import code
from theory_checks.claim_file import load_claims
from theory_checks.claim_file import resolve
from theory_checks.registry import get_claim

ROOT = Path(__file__).resolve().parents[1] / "theory_checks"

GOOD = """
paper = "Classical"

[[claim]]
id = "classical.cg.exact_after_dim_y"
reference = "Hestenes & Stiefel 1952; Grazzi et al. 2020 (AID-CG)"
kind = "exact_identity"
about = "stated result"
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
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "claims.toml"
    path.write_text(text)
    return path


PLUGIN_CLAIMS_FILES = sorted((ROOT.parent / "integrations").glob("*/*/claims.toml"))


def _references(value: Any) -> list[str]:
    """Every ``"package.module:name"`` string of a parsed claims file (fields, call tables,
    hypotheses, perturbation tables)."""
    if isinstance(value, str):
        return [value] if re.fullmatch(r"[\w.]+:[\w.]+", value) else []
    if isinstance(value, dict):
        return [r for v in value.values() for r in _references(v)]
    if isinstance(value, list):
        return [r for v in value for r in _references(v)]
    return []


def test_the_plugins_claims_files_name_testbed_code_that_exists():
    """The plugins of integrations/ keep their claims in TOML files and name the testbed's case
    strategies, checks and hypotheses by string: each must resolve (a move of the testbed's code
    would otherwise break them only when their tox environment runs). Their own modules need
    their libraries, absent here, so only the testbed's references are resolved."""
    assert len(PLUGIN_CLAIMS_FILES) >= 3, PLUGIN_CLAIMS_FILES
    testbed_references = 0
    for path in PLUGIN_CLAIMS_FILES:
        for reference in _references(tomllib.loads(path.read_text(encoding="utf-8"))):
            if reference.startswith("theory_checks."):
                resolve(reference)  # raises ClaimFileError naming what is missing
                testbed_references += 1
    assert testbed_references >= 10


def test_the_testbed_ships_no_claims_file():
    """The built-in claims are Python in their result modules (tests/test_claim_layout.py);
    a claims file in theory_checks/ would be a second place for a claim."""
    assert not sorted(ROOT.rglob("*.toml"))


def test_a_file_gives_the_same_claim_as_the_registry(tmp_path):
    (claim,) = load_claims(_write(tmp_path, GOOD))
    registered = get_claim("classical.cg.exact_after_dim_y")
    for field in (
        "id",
        "paper",
        "reference",
        "kind",
        "statement",
        "estimators",
        "check",
        "perturbation",
        "expected",
        "decision",
    ):
        assert getattr(claim, field) == getattr(registered, field), field
    assert claim.max_examples == PerProfile(2, None)
    case = claim.positive_control()
    assert isinstance(case, Case)
    assert case.params["local_steps"] == (1, 2)  # arrays come back as the tuples they were
    assert case.problem.spec()["dim_y"] == 2


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ('kind = "exact_identity"', 'kind = "exact_identity"\nverdict = "holds"'),
            r"claims\.toml: claim classical\.cg\.exact_after_dim_y: unknown key\(s\) \['verdict'\]",
        ),
        (
            ("check_cg_exact", "check_cg_exactly"),
            r"claim classical\.cg\.exact_after_dim_y: .*has no check_cg_exactly",
        ),
        (
            (
                '"theory_checks.classical.cg:check_cg_exact"',
                '"theory_checks.classical.cg.check_cg_exact"',
            ),
            r"is not of the form 'package\.module:name'",
        ),
        (
            (
                '"theory_checks.classical.cg:SHORT_CG"',
                '"theory_checks.classical.cg:check_cg_exact"',
            ),
            r"is a function, not a Perturbation",
        ),
        (
            ("theory_checks.classical.common:closed_form_cases", "theory_checks.nowhere:_cases"),
            r"cannot import theory_checks\.nowhere",
        ),
        (('kind = "exact_identity"', 'kind = "a_feeling"'), r"unknown kind 'a_feeling'"),
        (
            ('paper = "Classical"', 'paper = "Classical"\nauthor = "x"'),
            r"unknown top-level key\(s\) \['author'\]",
        ),
        (("params = {", "params = ["), r"claims\.toml: "),
    ],
)
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

    for claim_id in (
        "fednest.thm31.k_rate_bilevel",
        "fednest.cor32.k_rate_minimax",
        "fednest.cor33.k_rate_compositional",
    ):
        claim = get_claim(claim_id)
        assert claim.deciding_profile("fast") == "thorough"
        assert claim.deciding_profile("thorough") is None
        assert claim.decide_seconds is not None and claim.decide_seconds > 0
    decided = get_claim("classical.gd.linear_rate")
    assert decided.deciding_profile("fast") is None
    with pytest.raises(ValueError, match="decide_seconds .* needs undecided_on"):
        dataclasses.replace(decided, decide_seconds=10.0)
