"""The mutation catalogue and ``testbed mutate``: every family has realistic bugs of the issue's
kinds, a cheap subset is killed in the default run (the rest in theory_checks/test_mutants.py),
results resume claim by claim, and the table and the report show the outcome."""

from __future__ import annotations

import json

import pytest

from testbed.registry import ESTIMATOR_DB
from testbed.registry import get_estimator
from testbed_app.cli import main
from theory_checks.mutants import MUTANT_DB
from theory_checks.mutants import families
from theory_checks.mutants import get_mutant
from theory_checks.mutation import EQUIVALENT
from theory_checks.mutation import KILLED
from theory_checks.mutation import MUTANT_KINDS
from theory_checks.mutation import SURVIVED
from theory_checks.mutation import Mutant
from theory_checks.mutation import SharedRuns
from theory_checks.mutation import as_expected
from theory_checks.mutation import format_table
from theory_checks.mutation import planned_runs
from theory_checks.mutation import run_mutant
from theory_checks.mutation import run_mutants
from theory_checks.mutation import same_build
from theory_checks.registry import claims_of
from theory_checks.runner import get_profile

FAST = get_profile("fast")
CHEAP = [m for m in MUTANT_DB if m.cheap]

# Registered entries no mutant targets, each with why (the catalogue covers every other one).
NOT_MUTATED = {
    "aggitd-as-printed": "kept to be refuted: its one claim fails as stated on the correct code, "
    "so no claim can tell a bug in it from it",
    "fedmsa-generalised": "no claim concerns it (its registry entry's no_claims_reason); its "
    "round is FedMSA's, whose mutants live in the fedmsa entry",
    "hgp-centralized": "its claim builds it through hgp-exact-averaging with averaging='server' "
    "(mutant hgp.averaging_sums covers the server rule)",
    "hgp-clientgrad": "built by name inside hgp.taxonomy.closed_forms, whose builder is "
    "GlobalGrad's (mutant hgp-globalgrad.client_adjoint)",
    "hgp-localgrad": "built by name inside hgp.taxonomy.closed_forms, likewise",
}


def test_every_mutant_is_well_formed_and_named_once():
    names = [m.name for m in MUTANT_DB]
    assert len(names) == len(set(names))
    registered = {info.name for info in ESTIMATOR_DB}
    for m in MUTANT_DB:
        assert m.kind in MUTANT_KINDS and m.description and m.family
        assert set(m.builds) <= registered, m.name
        assert planned_runs(m, FAST), f"{m.name}: no claim concerns its entries"
        assert not (m.equivalent and m.cheap), m.name  # equivalents run every claim


def test_the_catalogue_covers_every_kind_and_every_builtin_entry_with_claims():
    assert {m.kind for m in MUTANT_DB} == set(MUTANT_KINDS)
    targeted = {entry for m in MUTANT_DB for entry in m.builds}
    builtin = {info.name for info in ESTIMATOR_DB if info.name != "my-horner-aid"}
    uncovered = {name for name in builtin - targeted if claims_of(name)}
    assert uncovered <= set(NOT_MUTATED), uncovered
    for family in (
        "AID-Neumann",
        "AID-CG",
        "AID-FP",
        "ITD",
        "FedInn",
        "FedIHGP",
        "FedOut",
        "LFedOut (local Neumann)",
        "FedNest minimax",
        "AggITD",
        "FBO-AggITD",
        "FedMSA",
        "FedMCO maps",
        "HGP loop",
        "HGP averaging rules",
        "Push-Sum",
    ):
        assert family in families(), family


def test_every_equivalent_mutant_says_why():
    for m in MUTANT_DB:
        if m.equivalent:
            assert len(m.equivalent.split()) >= 20, m.name  # an argument, not a shrug


@pytest.mark.parametrize("mutant", CHEAP, ids=[m.name for m in CHEAP])
def test_a_cheap_mutant_is_killed(mutant):
    record = run_mutant(mutant, FAST)
    assert record["status"] == KILLED, record
    assert as_expected(record)
    assert record["killed_by"][0] in mutant.first  # the claim named to catch it does


def _mutant_of_nothing(equivalent: str = "") -> Mutant:
    """A "mutant" that is the correct code: no claim can kill it."""
    return Mutant(
        "cg.correct",
        "AID-CG",
        "count",
        "the correct AID-CG",
        {"aid-cg": get_estimator("aid-cg").build},
        equivalent=equivalent,
    )


def test_a_surviving_mutant_is_reported_and_an_equivalent_one_is_as_expected(tmp_path):
    survivor = run_mutant(_mutant_of_nothing(), FAST, tmp_path)
    assert survivor["status"] == SURVIVED and not as_expected(survivor)
    assert len(survivor["runs"]) == survivor["planned"] == 2  # every claim was tried
    assert "SURVIVED" in format_table([survivor])
    reason = "the correct code, " * 10
    equivalent = run_mutant(_mutant_of_nothing(reason), FAST, tmp_path / "eq")
    assert equivalent["status"] == EQUIVALENT and as_expected(equivalent)
    assert f"equivalent: {reason}" in format_table([equivalent])


def test_a_declared_equivalent_that_is_killed_is_not_as_expected():
    wrong = get_mutant("aid-cg.iterations_minus_one")
    record = run_mutant(
        Mutant(
            wrong.name,
            wrong.family,
            wrong.kind,
            wrong.description,
            wrong.builds,
            equivalent="claimed equivalent",
        ),
        FAST,
    )
    assert record["status"] == KILLED and not as_expected(record)
    assert "NOT equivalent as declared" in format_table([record])


def test_an_interrupted_run_resumes_claim_by_claim(tmp_path):
    mutant = _mutant_of_nothing()
    seen = []

    def interrupt(message: str) -> None:
        seen.append(message)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_mutant(mutant, FAST, tmp_path, progress=interrupt)
    saved = json.loads((tmp_path / "mutation" / "cg.correct.json").read_text())
    assert len(saved["runs"]) == 1  # the first claim's run was kept
    again = []
    record = run_mutant(mutant, FAST, tmp_path, progress=again.append)
    assert len(again) == 1 and record["runs"][0] == saved["runs"][0]
    fresh = []
    run_mutant(mutant, FAST, tmp_path, progress=fresh.append, resume=False)
    assert len(fresh) == 2


def test_mutate_command_prints_the_table_writes_results_and_resumes(tmp_path, capsys):
    args = [
        "mutate",
        "--mutant",
        "aid-cg.iterations_minus_one",
        "--mutant",
        "itd.steps_plus_one",
        "--results",
        str(tmp_path),
        "--quiet",
        "--profile",
        "fast",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "aid-cg.iterations_minus_one" in out and "killed by" in out
    assert "2 mutants: 2 killed, 0 equivalent, 0 survived" in out
    summary = json.loads((tmp_path / "mutation" / "summary.json").read_text())
    assert [m["mutant"] for m in summary["mutants"]] == [
        "aid-cg.iterations_minus_one",
        "itd.steps_plus_one",
    ]
    assert summary["counts"]["killed"] == 2 and summary["profile"] == "fast"
    path = tmp_path / "mutation" / "itd.steps_plus_one.json"
    mtime = path.stat().st_mtime_ns
    assert main(args) == 0  # resumes: nothing is rerun
    assert path.stat().st_mtime_ns == mtime


def test_mutate_command_bad_input_is_one_line(capsys):
    assert main(["mutate", "--family", "no such family", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("testbed: error: --family") and err.count("\n") == 1
    assert main(["mutate", "--mutant", "no.such", "--quiet"]) == 2
    assert "no mutant 'no.such'" in capsys.readouterr().err


def test_mutate_list_shows_the_catalogue(capsys):
    assert main(["mutate", "--list", "--family", "Push-Sum"]) == 0
    out = capsys.readouterr().out
    assert "pushsum.no_debias" in out and "aid-cg" not in out


def test_a_survivor_makes_the_command_fail(tmp_path, monkeypatch, capsys):
    from testbed_app import mutate

    monkeypatch.setattr(mutate, "MUTANT_DB", (_mutant_of_nothing(),))  # the command's catalogue
    monkeypatch.setattr(mutate, "GENERATED", ())  # and no generated perturbation
    assert main(["mutate", "--results", str(tmp_path), "--quiet", "--profile", "fast"]) == 1
    assert "not as expected" in capsys.readouterr().err


def test_the_report_shows_the_mutation_table(tmp_path):
    from reports.sections import mutation

    absent = mutation(tmp_path)
    assert absent.status == "not run" and "testbed mutate" in absent.commands[0].command
    run_mutants(
        [get_mutant("aid-cg.iterations_minus_one"), _mutant_of_nothing()],
        FAST,
        tmp_path,
        catalogue=[get_mutant("aid-cg.iterations_minus_one"), _mutant_of_nothing()],
    )
    section = mutation(tmp_path)
    rows = section.tables[0].rows
    assert [r[0] for r in rows] == ["aid-cg.iterations_minus_one", "cg.correct"]
    assert rows[0][5].startswith("killed by classical.cg.exact_after_dim_y")
    assert rows[1][5] == "survived" and rows[1][7] == "NO"
    assert "1 killed" in section.paragraphs[0] and "1 survived" in section.paragraphs[0]


def test_a_mutant_outside_the_family_named_is_one_line(tmp_path, capsys):
    """``--family FedIHGP --mutant aid-cg.iterations_minus_one`` said "no mutant run", exit 0,
    without why (issue 33)."""
    assert (
        main(
            [
                "mutate",
                "--family",
                "FedIHGP",
                "--mutant",
                "aid-cg.iterations_minus_one",
                "--results",
                str(tmp_path),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("testbed: error: --mutant and --family")
    assert "aid-cg.iterations_minus_one is a mutant of family 'AID-CG', not of 'FedIHGP'" in err
    assert not (tmp_path / "mutation").exists()


def test_an_equivalent_that_builds_the_correct_estimator_shares_the_correct_run(tmp_path):
    """SharedRuns: the correct AID-CG declared equivalent takes the correct entry's run of each
    claim (one run per claim, shared); a different build is run, and is killed."""
    shared = SharedRuns()
    first = run_mutant(_mutant_of_nothing("the correct code, " * 10), FAST, shared=shared)
    assert first["status"] == EQUIVALENT and all(r.get("shared") for r in first["runs"])
    again = run_mutant(_mutant_of_nothing("the correct code, " * 10), FAST, shared=shared)
    assert [r["verdict"] for r in again["runs"]] == [r["verdict"] for r in first["runs"]]
    wrong = get_mutant("aid-cg.iterations_minus_one")
    declared = Mutant(
        wrong.name, wrong.family, wrong.kind, wrong.description, wrong.builds, equivalent="x"
    )
    record = run_mutant(declared, FAST, shared=shared)
    assert record["status"] == KILLED and not any(r.get("shared") for r in record["runs"])


def test_same_build_compares_class_and_fields():
    info = get_estimator("aid-cg")
    assert same_build(info.build(), info.build())
    assert not same_build(info.build(), info.build(inner_steps=3))
    assert not same_build(info.build(), get_estimator("aid-fp").build())


def test_exact_identities_run_first_within_their_cost_rank():
    for m in MUTANT_DB[:20]:
        runs = planned_runs(m, FAST)
        ranks = [
            (r[0].id in m.first, r[0].statistical, r[0].kind != "exact_identity")
            for r in runs
            if r[0].id not in m.first
        ]
        assert ranks == sorted(ranks), m.name


@pytest.mark.slow
def test_mutate_jobs_gives_the_records_of_one_process(tmp_path, capsys):
    """``--jobs 2``: the families in two workers; the same statuses as in one process."""
    base = ["mutate", "--set", "generated", "--family", "itd parameters", "--quiet"]
    assert main([*base, "--results", str(tmp_path / "one")]) == 0
    assert main([*base, "--jobs", "2", "--results", str(tmp_path / "two")]) == 0

    def statuses(folder):
        rows = json.loads((folder / "mutation" / "summary.json").read_text())["mutants"]
        return {r["mutant"]: (r["status"], r["killed_by"]) for r in rows}

    assert statuses(tmp_path / "one") == statuses(tmp_path / "two")
    assert len(statuses(tmp_path / "one")) == 6
