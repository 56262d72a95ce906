"""Planted bugs read from a TOML file (:mod:`theory_checks.planted_bugs`, the library adapters'
``planted_bugs.toml``): each changes the one field it names, by the rule it names, on the
registry's build; a malformed table is one error naming the file and the bug."""

from __future__ import annotations

import pytest

from testbed.registry import get_estimator
from theory_checks.planted_bugs import PlantedBugError
from theory_checks.planted_bugs import load_planted_bugs

BUGS = """
[TERMS_SHORT]
name = "N - 1 terms"
description = "one Neumann term fewer"
entry = "fedihgp"
field = "neumann_terms"
change = "one fewer"
at_least = 1
caught_by = ["fednest.lemma22.inverse_hessian_identity"]

[STEPS_DOUBLED]
name = "inner steps doubled"
description = "2 T inner steps for T"
entry = "fedihgp"
field = "inner_steps"
change = "doubled"
caught_by = []
"""


def test_each_bug_changes_its_field_by_its_rule_on_the_registry_build(tmp_path):
    path = tmp_path / "planted_bugs.toml"
    path.write_text(BUGS)
    bugs = load_planted_bugs(path)
    assert set(bugs) == {"TERMS_SHORT", "STEPS_DOUBLED"}
    short = bugs["TERMS_SHORT"]
    assert (short.perturbation.name, short.perturbation.description) == (
        "N - 1 terms",
        "one Neumann term fewer",
    )
    assert short.caught_by == ("fednest.lemma22.inverse_hessian_identity",)
    true = get_estimator("fedihgp").build(neumann_terms=7, inner_steps=3)
    wrong = short.perturbation.build(neumann_terms=7, inner_steps=3)
    assert wrong == type(true)(**{**vars(true), "neumann_terms": 6})
    # at_least: one term is the fewest a series runs, so N = 1 stays 1
    assert short.perturbation.build(neumann_terms=1).neumann_terms == 1
    assert bugs["STEPS_DOUBLED"].perturbation.build(inner_steps=3).inner_steps == 6


@pytest.mark.parametrize(
    "edit, says",
    [
        (('change = "doubled"', 'change = "tripled"'), "change 'tripled'"),
        (('entry = "fedihgp"\nfield', 'entri = "fedihgp"\nfield'), "unknown key(s) ['entri']"),
    ],
)
def test_a_malformed_bug_is_one_error_naming_the_file_and_the_bug(tmp_path, edit, says):
    path = tmp_path / "planted_bugs.toml"
    path.write_text(BUGS.replace(*edit, 1))
    with pytest.raises(PlantedBugError) as error:
        load_planted_bugs(path)
    assert str(path) in str(error.value) and says in str(error.value)
    assert "planted bug " in str(error.value)
