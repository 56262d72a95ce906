"""``results_format.resume`` and ``results_format.provenance``: the one home of fingerprints,
freshness, stamped writes and the provenance record (standard library only)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from results_format import provenance
from results_format import resume
from results_format.validation import seal
from tests._python_runs import run_python


def test_fingerprint_is_the_sha256_of_the_parts_joined_by_bars():
    expected = hashlib.sha256(b"a|b|1.5").hexdigest()[:16]
    assert resume.fingerprint("a", "b", "1.5") == expected
    assert resume.fingerprint("one") == hashlib.sha256(b"one").hexdigest()[:16]
    assert resume.fingerprint("a|b") == resume.fingerprint("a", "b")  # the joined text counts
    assert len(resume.fingerprint()) == resume.FINGERPRINT_LENGTH


@pytest.mark.parametrize(
    "record, fresh",
    [
        ({"fingerprint": "f", "profile": "fast", "verdict": "holds"}, True),
        ({"fingerprint": "g", "profile": "fast", "verdict": "holds"}, False),  # stale definition
        ({"fingerprint": "f", "profile": "thorough", "verdict": "holds"}, False),  # other profile
        ({"fingerprint": "f", "verdict": "holds"}, False),  # no profile recorded
        ({"fingerprint": "f", "profile": "fast"}, False),  # a key is missing
        (["fingerprint", "f"], False),  # not a record
        (None, False),
    ],
)
def test_a_record_is_fresh_only_with_its_fingerprint_profile_and_keys(record, fresh):
    assert resume.is_fresh(record, "f", "fast", keys=("verdict",)) is fresh


def test_without_a_profile_only_the_fingerprint_counts():
    assert resume.is_fresh({"fingerprint": "f", "profile": "other"}, "f")
    assert not resume.is_fresh({"profile": "fast"}, "f")


@pytest.mark.parametrize("content", [None, "{torn", b"\xff\xfe\x00", "[1, 2]"])
def test_missing_torn_or_foreign_files_are_not_fresh(tmp_path, content):
    path = tmp_path / "result.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    assert resume.read_fresh(path, "f") is None
    if content != "[1, 2]":
        assert resume.read_json(path) is None


def test_write_json_is_atomic_and_takes_json_options(tmp_path):
    path = tmp_path / "sub" / "x.json"
    resume.write_json(path, {"b": 1, "a": [1.5]}, indent=1, sort_keys=True, newline=True)
    assert path.read_text() == json.dumps({"a": [1.5], "b": 1}, indent=1) + "\n"
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]  # no temporary left
    with pytest.raises(ValueError):
        resume.write_json(path, {"x": float("nan")}, allow_nan=False)
    assert json.loads(path.read_text()) == {"a": [1.5], "b": 1}  # the old file stays whole


def test_reuse_or_write_computes_once_per_fingerprint(tmp_path):
    path, calls = tmp_path / "table.json", []

    def compute() -> dict:
        calls.append(1)
        return {"rows": [len(calls)]}

    first = resume.reuse_or_write(path, "f1", compute, indent=1)
    assert list(first) == ["fingerprint", "rows", "content_sha256"] and first["rows"] == [1]
    assert path.read_text() == json.dumps(seal({"fingerprint": "f1", "rows": [1]}), indent=1)
    assert resume.reuse_or_write(path, "f1", compute, indent=1) == first and len(calls) == 1
    path.write_text(json.dumps({**first, "rows": [9]}))  # edited: its seal no longer matches
    assert resume.reuse_or_write(path, "f1", compute, indent=1)["rows"] == [2]
    calls.pop()
    assert resume.reuse_or_write(path, "f2", compute, indent=1)["rows"] == [2]  # stale: redo
    assert resume.reuse_or_write(path, "f2", compute, resume=False)["rows"] == [3]  # --fresh
    path.write_text("{torn")
    assert resume.reuse_or_write(path, "f2", compute)["rows"] == [4]


def test_a_stamped_file_is_fresh_only_beside_its_fingerprint(tmp_path):
    path = tmp_path / "run.csv"
    assert resume.stamp_path(path) == tmp_path / "run.fingerprint"
    assert not resume.is_fresh_file(path, "f")
    resume.write_stamped(path, "a,b\n1,2\n", "f")
    assert path.read_text() == "a,b\n1,2\n" and resume.stamp_path(path).read_text() == "f"
    assert resume.is_fresh_file(path, "f") and not resume.is_fresh_file(path, "g")
    path.unlink()
    assert not resume.is_fresh_file(path, "f")  # a fingerprint without its file


def test_an_interrupted_stamped_write_leaves_no_old_fingerprint_on_a_new_result(
    tmp_path, monkeypatch
):
    path = tmp_path / "run.csv"
    resume.write_stamped(path, "old\n", "f")

    def interrupted(target: Path, text: str) -> None:
        if target == resume.stamp_path(path):
            raise KeyboardInterrupt
        target.write_text(text)

    monkeypatch.setattr(resume, "atomic_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        resume.write_stamped(path, "new\n", "g")
    # the new result is there without a fingerprint: neither the old nor the new one is fresh
    assert not resume.is_fresh_file(path, "f") and not resume.is_fresh_file(path, "g")


def test_package_versions_are_the_imported_packages_versions():
    import hypothesis
    import numpy
    import scipy
    import sympy
    import torch

    versions = provenance.package_versions()
    assert list(versions) == ["python", "numpy", "scipy", "torch", "sympy", "hypothesis"]
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    for module in (numpy, scipy, torch, sympy, hypothesis):
        assert versions[module.__name__] == module.__version__
    assert provenance.package_versions(("torch",)) == {
        "python": versions["python"],
        "torch": torch.__version__,
    }


def test_the_provenance_record_has_one_shape():
    record = provenance.provenance()
    assert list(record) == ["git_commit", "versions"]
    assert record["git_commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{40}", record["git_commit"])
    assert record["versions"] == provenance.package_versions()


def test_resume_and_provenance_import_no_numerical_package():
    code = (
        "import sys, results_format.resume, results_format.provenance as p; p.provenance(); "
        "print(sorted(m for m in ('numpy', 'torch', 'scipy', 'sympy', 'hypothesis') "
        "if m in sys.modules))"
    )
    done = run_python(code, cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.strip() == "[]"
