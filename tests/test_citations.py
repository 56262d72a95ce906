"""Citations a reader can check: the code cites the papers by their own numbering.

The claims and the code once cited reading notes that are not in the repository ("notes 4.5",
"notes 3.3 [D]", "(not given in the seed, notes 3.4)", "public-code notes 1") and one docstring
named a file path of a development machine. A referee who wants to check how the project read
Lemma 2.2 cannot open either; the papers' own numbering (section, equation, lemma, appendix,
table, in the arXiv version each paper package names once) is what a reader can open. This test
fails on a citation of the notes, on a machine path, and on a cited document file (``.md``,
``.txt``, ``.pdf``, ``.tex``, ``.ipynb``) that is neither in the repository nor named with the
public repository that holds it (``minmax_synthetic.ipynb`` of ucr-optml/FedNest).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Where the project's code, comments and configuration live (the tests are held to the notes
#: and machine-path rules; their fixtures name files they create, so not to the file rule).
PACKAGES = (
    "theory_checks",
    "testbed",
    "problems",
    "reports",
    "testbed_app",
    "results_format",
    "integrations",
    "benchmarks",
    "examples",
)
SUFFIXES = {".py", ".toml", ".sh", ".j2", ".ini", ".cfg", ".js", ".css"}
TOP_LEVEL = ("pyproject.toml", "tox.ini", "conftest.py", ".ci/run", "mkdocs.yml")

#: "notes 4.5", "notes 3.3 [D]", "notes issue 7", "notes 6 items 1-2", "notes section 0",
#: "notes-2.7", "notes § 2", "public-code notes", "fednest-notes", "the notes' tolerance".
NOTES_CITATION = re.compile(
    r"\bnotes?[- ]?(?:§\s*|sec(?:tion|\.)?\s*|issues?\s+|items?\s+)?\d"
    r"|\b(?:public-code|reading|seed)\s+notes\b|\b(?:fednest|aggitd|fedmsa|hgp)-notes\b"
    r"|\bthe notes'"
    r"|\b(?:in|from|of) the seed(?: text| file)?\b",
    re.IGNORECASE,
)
#: An absolute path of a machine: /work/..., /home/..., /root/..., /tmp/..., /Users/..., /mnt/...
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|home|root|tmp|Users|mnt)/[\w.-]")
DOCUMENT = re.compile(r"(?<![\w{}<>/.-])([\w./-]*\w\.(?:md|txt|pdf|tex|ipynb))\b")
#: A public repository named on the same line as the file it holds ("ucr-optml/FedNest").
REPOSITORY = re.compile(r"\b[\w.-]+/(?:FedNest|FedMSA|FedBLO|pdbo-hgp|betty|higher|torchopt)\b")
#: Document names the testbed writes (not citations of a file to read): the report's Markdown
#: twin, and the papers' pages the documentation build generates (testbed_app/paper_pages.py).
WRITTEN = {"report.md"}
GENERATED_PAGES = "papers/"


def _files() -> list[Path]:
    found = [ROOT / name for name in TOP_LEVEL if (ROOT / name).is_file()]
    for folder in (*PACKAGES, "tests"):
        found += [
            p
            for p in sorted((ROOT / folder).rglob("*"))
            if p.suffix in SUFFIXES
            and p.is_file()
            and ".egg-info" not in str(p)
            and "__pycache__" not in p.parts
        ]
    return [p for p in found if p.resolve() != Path(__file__).resolve()]


FILES = _files()
#: The README and the documentation's pages: held to the notes and machine-path rules too.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
REPOSITORY_FILES = {p.name for p in ROOT.rglob("*") if ".git" not in p.parts and p.is_file()}


#: The seam of two implicitly concatenated string literals on consecutive lines: a citation split
#: there ("...; notes " / "3.9") is one citation (ruff format joins or splits such literals).
STRING_SEAM = re.compile(r"(?<=[^\\])([\"'])\n\s*\1")


def _lines(pattern: re.Pattern[str], files: list[Path]) -> list[str]:
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
        if path.suffix == ".py":
            for seam in STRING_SEAM.finditer(text):
                joined = (
                    text[max(0, seam.start() - 60) : seam.start()]
                    + text[seam.end() : seam.end() + 60]
                )
                if pattern.search(joined) and not pattern.search(
                    text[max(0, seam.start() - 60) : seam.end() + 60]
                ):
                    number = text.count("\n", 0, seam.start()) + 1
                    found.append(f"{path.relative_to(ROOT)}:{number}: {joined.strip()} (joined)")
    return found


def test_the_scan_covers_the_packages():
    scanned = {p.relative_to(ROOT).parts[0] for p in FILES}
    assert set(PACKAGES) <= scanned, set(PACKAGES) - scanned
    assert len(FILES) > 300, len(FILES)


def test_no_citation_of_the_reading_notes():
    assert _lines(NOTES_CITATION, FILES + PAGES) == []


def test_no_machine_path():
    assert _lines(MACHINE_PATH, FILES + PAGES) == []


def test_a_cited_document_is_in_the_repository_or_named_with_its_repository():
    missing = []
    for path in FILES:
        if path.relative_to(ROOT).parts[0] == "tests":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in DOCUMENT.findall(line):
                if (
                    Path(name).name in REPOSITORY_FILES
                    or name in WRITTEN
                    or name.startswith(GENERATED_PAGES)
                    or REPOSITORY.search(line)
                ):
                    continue
                missing.append(f"{path.relative_to(ROOT)}:{number}: {name}")
    assert missing == []


@pytest.mark.parametrize(
    "text",
    [
        'reference="HGP Thm 2 (App. D) as stated; notes 4.5, 7.2 item 17"',
        "(notes 3.3 [D], ``H_bar = mean_i H_i``)",
        "refuted under heterogeneity (notes issue 2), with",
        "Alg. 5 is missing from the seed text (notes 0, 2.7).",
        "unit (fednest-notes 2.8), AggITD its Table 1",
        "its notes-2.7 formula",
        "(``0.5 * 0.1 * sum ||W||``, public-code notes 1)",
        "# Why 1e-6: the notes' tolerance for the minimax rate (4.3)",
        "constants (not given in the seed, notes 3.4).",
    ],
)
def test_a_notes_citation_is_caught(text):
    assert NOTES_CITATION.search(text)


@pytest.mark.parametrize(
    "text",
    [
        'Claim(notes="Refuted: the proof drops 2 L^2 beta^2")',
        "notes: derivation, errata, and why tolerances are what they are.",
        "Lemma 2.2, eq. (15), Sec. 2.4 (arXiv:2205.02215)",
        "seeds 0..19 of the calibration",
    ],
)
def test_the_papers_own_numbering_is_not(text):
    assert not NOTES_CITATION.search(text)


def test_a_machine_path_and_a_missing_document_are_caught():
    assert MACHINE_PATH.search("Notation (notes ``/work/shared/papers/fednest-notes.md``)")
    assert MACHINE_PATH.search("see /home/user/FedNest")
    assert not MACHINE_PATH.search("results/claims/<id>.json, docs/index.md")
    assert DOCUMENT.findall("the notes ``fednest-notes.md``") == ["fednest-notes.md"]
    assert "fednest-notes.md" not in REPOSITORY_FILES
    assert REPOSITORY.search("``minmax_synthetic.ipynb`` of ucr-optml/FedNest")
