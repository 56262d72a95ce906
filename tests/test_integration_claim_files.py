"""Every adapter package's claims file and verdicts record, read in the default run.

``tox -e integrations`` installs the packages of ``integrations/`` and runs their tests; a claims
file that no longer loads (a refuted step without ``serves``, an unknown key, a reference to a
renamed check) would fail there only. Here each ``integrations/*/*/claims.toml`` is read by the
project's claim-file reader (:func:`theory_checks.claim_file.load_claims`, every reference
resolved, every :class:`~theory_checks.claim.Claim` built and so validated) with its package put
on the path, not installed, and without any authors' checkout; each ``expected_verdicts.toml``
by :func:`testbed_app.library_verdicts.read_record`, each recorded verdict one of the four and
each claim it names declared in the package's claims file or built in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from results_format.verdicts import ABOUT_STEP
from results_format.verdicts import VERDICTS
from testbed_app.library_verdicts import read_record
from theory_checks.claim_file import ClaimFileError
from theory_checks.claim_file import load_claims
from theory_checks.registry import BUILTIN_CLAIMS

INTEGRATIONS = Path(__file__).resolve().parents[1] / "integrations"
#: the adapter packages: the plugins (entry points); integrations/authors_checkout, their loader
#: of the authors' code, declares none and has no claims
PACKAGES = sorted(
    path.parent
    for path in INTEGRATIONS.glob("*/pyproject.toml")
    if "[project.entry-points." in path.read_text(encoding="utf-8")
)
CLAIM_FILES = sorted(INTEGRATIONS.glob("*/*/claims.toml"))
RECORDS = sorted(INTEGRATIONS.glob("*/expected_verdicts.toml"))


def test_every_adapter_package_is_read_here():
    # the globs below find something: an emptied or moved integrations/ fails here
    assert len(PACKAGES) >= 6 and len(RECORDS) == len(PACKAGES)
    assert {path.parents[1] for path in CLAIM_FILES} <= set(PACKAGES)


def declared_claims(package: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The claims of the package's claims file (none when it has none), by id."""
    monkeypatch.syspath_prepend(str(package))
    found = {}
    for path in package.glob("*/claims.toml"):
        found.update({claim.id: claim for claim in load_claims(path)})
    return found


@pytest.mark.parametrize("path", CLAIM_FILES, ids=lambda p: p.parents[1].name)
def test_the_claims_file_loads_with_every_reference_resolved(path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parents[1]))
    claims = load_claims(path)
    assert claims, f"{path} declares no claim"
    ids = [claim.id for claim in claims]
    # the registry leaves out a plugin claim whose id is taken: none here is
    assert len(set(ids)) == len(ids), ids
    assert not set(ids) & {claim.id for claim in BUILTIN_CLAIMS}, ids


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.parent.name)
def test_the_verdicts_record_names_known_claims_and_verdicts(path, monkeypatch):
    record = read_record(path)
    declared = declared_claims(path.parent, monkeypatch)
    builtin = {claim.id: claim for claim in BUILTIN_CLAIMS}
    assert record["verdicts"], f"{path} records no version"
    for version, estimators in record["verdicts"].items():
        for estimator, verdicts in estimators.items():
            assert verdicts, (path.name, version, estimator)
            for claim_id, verdict in verdicts.items():
                where = f"{path.parent.name} {version[:12]} {estimator} {claim_id}"
                assert verdict in VERDICTS, f"{where}: {verdict!r}"
                claim = declared.get(claim_id) or builtin.get(claim_id)
                assert claim is not None, f"{where}: no such claim in its claims file or built in"
                # a refuted step of the package's own file names the result it serves
                if claim_id in declared and verdict == "fails as stated":
                    assert claim.about != ABOUT_STEP or claim.serves, f"{where}: no serves"


def test_a_refuted_step_without_serves_fails_to_load(tmp_path, monkeypatch):
    """The reader refuses what ``tox -e integrations`` refused (the FedNest file before it
    named ``serves``)."""
    package = INTEGRATIONS / "fednest_authors"
    monkeypatch.syspath_prepend(str(package))
    source = (package / "testbed_fednest_authors/claims.toml").read_text()
    assert 'serves = "' in source
    broken = tmp_path / "claims.toml"
    broken.write_text(
        "\n".join(line for line in source.splitlines() if not line.startswith("serves ="))
    )
    with pytest.raises(ClaimFileError, match="serves"):
        load_claims(broken)
