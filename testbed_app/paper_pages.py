"""The documentation site's pages of the papers, generated from the claim registry.

One page per paper package of :data:`theory_checks.registry.PAPER_PACKAGES` (Classical, FedNest,
AggITD, FedMSA, HGP, the comparisons) and one errata page per package that has a claim expected
to fail. Nothing on them is written by hand: a result's section is its module's docstring (the
statement as the paper numbers it, the hypotheses, what is checked), and each claim's entry is
read off its :class:`~theory_checks.claim.Claim` (reference, statement, hypotheses, readings,
the check's docstring, the expected verdict, the perturbation or positive control, the notes,
the correction, the command that reproduces it). The errata are the claims expected to fail,
written as a referee would: what fails, the minimal case (the saved counterexample, with the
hypotheses' margins evaluated on it), the correction, the command.

Given a results folder (``testbed check --results DIR``; the documentation build reads the
environment variable :data:`RESULTS_ENV`), each claim's entry adds the verdict measured there,
with its profile, the counterexample's measured value against the bound and its margins, the
positive control, the power, and the claim's figure with its caption, drawn by the report's own
code (:func:`reports.claim_figures.claim_section`) from the claim's series file. A claim file is
read only once it is checked (:func:`results_format.claim_file.read_claim_record`: schema, seal,
verdict recomputed, companion files' digests); one that is not trusted is named with the reason,
never shown as a verdict.

``docs/hooks.py`` (MkDocs) adds :func:`pages` to the site at build time;
``tests/test_docs_pages.py`` checks that the pages list every claim of the registry.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
import re
import types
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.claim_figures import claim_section as report_claim_section
from results_format.claim_file import read_claim_record
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import MarginRecord
from results_format.layout import CLAIMS
from theory_checks.claim import Claim
from theory_checks.hypotheses import margins
from theory_checks.registry import BUILTIN_CLAIMS
from theory_checks.registry import PAPER_PACKAGES
from theory_checks.registry import defined_in

#: The environment variable naming a results folder whose measured verdicts the pages show.
RESULTS_ENV = "TESTBED_DOCS_RESULTS"

#: The folder of the generated pages inside the site.
PAPERS_DIR = "papers"
#: The folder of the claims' figures, beside the pages (the report draws them into
#: ``<out>/figures/``).
FIGURES_DIR = "figures"

#: Each paper package's page title.
TITLES = {
    "classical": "Classical estimators (AID, CG, ITD, GD)",
    "fednest": "FedNest (Tarzanagh et al., ICML 2022)",
    "aggitd": "AggITD (Xiao & Ji, ICML 2023)",
    "fedmsa": "FedMSA (Tarzanagh et al.)",
    "hgp": "HGP (Terashita & Hara)",
    "comparison": "Comparisons between the papers' algorithms",
}


@dataclasses.dataclass(frozen=True)
class Result:
    """One result module of a paper package: its docstring and the claims it declares."""

    module: types.ModuleType
    claims: tuple[Claim, ...]


def package_name(package: types.ModuleType) -> str:
    """``theory_checks.hgp`` -> ``hgp``."""
    return package.__name__.rsplit(".", 1)[-1]


def results_of(package: types.ModuleType) -> list[Result]:
    """The result modules of ``package`` that declare claims, in the order of the package's
    ``CLAIMS`` (the order of its docstring's table)."""
    found: list[Result] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        declared = tuple(getattr(module, "CLAIMS", ()))
        if declared:
            found.append(Result(module, declared))
    position = {claim.id: i for i, claim in enumerate(package.CLAIMS)}
    return sorted(found, key=lambda r: min(position.get(c.id, len(position)) for c in r.claims))


# --------------------------------------------------------------------------- docstrings


_ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|exc|obj):`~?\.?([^`]+)`")
_TABLE_RULE = re.compile(r"^=+( +=+)+\s*$")
_ESCAPED = re.compile(r"([\\*_\[\]#])")


def escape_markdown(text: str) -> str:
    """Markdown-escape the characters of plain-text math that Markdown reads as markup
    (``y*``, ``x_i``, ``<= b``, ``[paper]``), outside code spans."""
    parts = text.split("`")
    return "`".join(
        part if i % 2 else _ESCAPED.sub(r"\\\1", part).replace("<", "&lt;")
        for i, part in enumerate(parts)
    )


def _inline(text: str) -> str:
    """Inline reStructuredText as Markdown: roles and double back-quotes become code spans."""
    text = _ROLE.sub(lambda m: f"``{m.group(1)}``", text)
    text = re.sub(r"``(.+?)``", lambda m: "`" + m.group(1).replace("`", "'") + "`", text)
    return escape_markdown(text)


def markdown_of(docstring: str) -> str:
    """A docstring (reStructuredText as the package writes it) as Markdown: ``.. math::``
    blocks, literal blocks (``::``) and simple tables become fenced blocks, the rest is prose
    with its markup characters escaped."""
    lines = inspect.cleandoc(docstring).splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _TABLE_RULE.match(line):
            rules, block = 0, []
            while i < len(lines) and rules < 3:
                rules += bool(_TABLE_RULE.match(lines[i]))
                block.append(lines[i])
                i += 1
            out += ["```text", *block, "```"]
            continue
        literal = line.strip() == ".. math::" or line.rstrip().endswith("::")
        if literal:
            if line.strip() != ".. math::":
                out.append(_inline(line.rstrip()[:-1]))
            i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", *inspect.cleandoc("\n".join(block)).splitlines(), "```", ""]
            continue
        if (
            line.startswith("- ")
            and out
            and out[-1].strip()
            and not out[-1].startswith(("- ", "  "))
        ):
            out.append("")  # Markdown starts a list only after a blank line
        out.append(_inline(line) if not line.startswith("    ") else _inline(line.strip()))
        i += 1
    return "\n".join(out)


def _first_paragraph(docstring: str | None) -> str:
    return (inspect.cleandoc(docstring or "").split("\n\n")[0]).replace("\n", " ")


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class Measured:
    """What a results folder says about a claim: its checked record and counterexample, or
    why it cannot be shown."""

    record: ClaimRecord | None
    counterexample: CaseRecord | None
    problem: str | None
    folder: Path | None = None


def measured(results: Path | None, claim_id: str) -> Measured | None:
    """The claim's results in ``results`` (None without a folder)."""
    if results is None:
        return None
    path = results / CLAIMS / f"{claim_id}.json"
    if not path.is_file():
        return Measured(None, None, f"no {CLAIMS}/{claim_id}.json in the results folder")
    record, reason = read_claim_record(path, results)
    if record is None:
        return Measured(None, None, f"{CLAIMS}/{claim_id}.json {reason}")
    counterexample = None
    if record.counterexample:
        # its digest was checked with the claim file (read_claim_file's companion files)
        counterexample = CaseRecord.from_json(
            json.loads((results / record.counterexample).read_text())
        )
    return Measured(record, counterexample, None, results)


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _margins_lines(found: Iterable[MarginRecord]) -> list[str]:
    return [
        f"    - {escape_markdown(m.name)}: margin {_number(m.margin)}"
        + ("" if m.inside else " (OUTSIDE)")
        for m in found
    ]


def _measured_lines(result: Measured) -> list[str]:
    if result.record is None:
        return [f"- **Measured**: not shown: {escape_markdown(str(result.problem))}"]
    record = result.record
    commit = record.computed_by.git_commit if record.computed_by else None
    lines = [
        f"- **Measured** ({record.profile} profile, commit "
        f"`{str(commit if commit is not None else '?')[:10]}`): "
        f"**{record.verdict}** "
        f"({'as expected' if record.as_expected else 'NOT as expected'}; "
        f"{record.n_cases} cases measured, {record.n_rejected} rejected)"
    ]
    if record.holding_readings:
        lines.append(f"    - readings that hold: {', '.join(record.holding_readings)}")
    example = result.counterexample
    if example is not None:
        lines.append(
            f"    - counterexample `{example.problem_id}`, parameters "
            f"`{json.dumps(example.params, sort_keys=True)}`: measured "
            f"{_number(example.measured)} against the bound "
            f"{_number(example.bound)} (compared by "
            f'"{escape_markdown(example.relation)}"); the hypotheses\' margins:'
        )
        lines += ["    " + line for line in _margins_lines(example.hypotheses)]
    control = record.positive_control
    if control:
        lines.append(f"    - positive control: {control.outcome}")
    if record.power:
        power = record.power
        caught = {True: "caught", False: "not caught", None: "not run"}[power.caught]
        lines.append(
            f"    - power: the perturbation `{power.name}` ({escape_markdown(power.description)})"
            f" gets {power.verdict or 'no verdict'}: {caught}"
        )
    return lines


# --------------------------------------------------------------------------- pages


def expected_text(claim: Claim) -> str:
    """The expected verdicts on each profile, in words."""
    fast, thorough = (" or ".join(claim.expected_verdicts(p)) for p in ("fast", "thorough"))
    return fast if fast == thorough else f"{fast} (fast profile); {thorough} (thorough profile)"


def corrections_of(claim: Claim) -> list[Claim]:
    """The claims that correct ``claim``."""
    return [c for c in BUILTIN_CLAIMS if c.corrects == claim.id]


def command(*claim_ids: str) -> str:
    """The command that reproduces the claims' verdicts (fast profile)."""
    return "testbed check " + " ".join(f"--claim {i}" for i in claim_ids) + " --results results"


def _figure_lines(result: Measured, figures: Path) -> list[str]:
    """The claim's figure, drawn by the report from its series file into ``figures``
    (``figures/<claim>.png``, linked from the page beside it), with the report's caption; or
    the report's reason for drawing none."""
    if result.record is None or result.folder is None:
        return []
    section = report_claim_section(result.record, result.folder, figures)
    if section.figure is None:
        return [f"    - no figure: {escape_markdown('; '.join(section.notes) or 'no series')}"]
    return [
        "",
        f"    ![{escape_markdown(section.alt)}]({section.figure})",
        "",
        f"    {escape_markdown(section.caption)}",
        "",
    ]


def claim_section(claim: Claim, result: Measured | None, figures: Path | None = None) -> list[str]:
    """One claim's entry on its paper's page; with ``figures`` (a folder), the measured
    claim's figure is drawn there and shown."""
    lines = [
        f"### `{claim.id}`",
        "",
        f"- **Reference**: {escape_markdown(claim.reference)}",
        f"- **Statement**: `{claim.statement.replace('`', chr(39))}`",
        f"- **Kind**: {claim.kind.replace('_', ' ')}, {claim.decision}; estimators "
        + ", ".join(f"`{e}`" for e in claim.estimators),
        f"- **Expected verdict**: {expected_text(claim)}",
    ]
    if claim.corrects:
        lines.append(f"- **Corrects**: [`{claim.corrects}`](#{anchor(claim.corrects)})")
    fixes = corrections_of(claim)
    if fixes:
        lines.append(
            "- **Corrected by**: " + ", ".join(f"[`{c.id}`](#{anchor(c.id)})" for c in fixes)
        )
    if claim.hypotheses:
        lines.append(
            "- **Hypotheses** (a case outside one is rejected, neither a pass nor a "
            "counterexample):"
        )
        lines += [
            f"    - {escape_markdown(h.name)}: {escape_markdown(h.statement)} "
            f"({escape_markdown(h.reference)})"
            for h in claim.hypotheses
        ]
    if claim.readings:
        lines.append('- **Readings** ("fails as stated" needs every one to fail):')
        lines += [
            f"    - {escape_markdown(r.name)}: {escape_markdown(r.statement)}"
            for r in claim.readings
        ]
    check_doc = _first_paragraph(inspect.getdoc(claim.check))
    if check_doc:
        lines.append(f"- **What is checked**: {_inline(check_doc)}")
    if claim.perturbation is not None:
        perturbation = claim.perturbation
        lines.append(
            f'- **Power**: the check must catch "{escape_markdown(perturbation.name)}": '
            f"{escape_markdown(perturbation.description)}"
        )
    if claim.positive_control is not None:
        lines.append(
            "- **Positive control**: a case inside the claim's conditions on which "
            "the same check holds"
        )
    if claim.scale:
        lines.append(f"- **Scale**: {escape_markdown(claim.scale)}")
    if claim.notes:
        lines.append(f"- **Notes**: {_inline(' '.join(claim.notes.split()))}")
    lines.append(f"- **Declared in**: `{defined_in(claim)}`")
    if result is not None:
        lines += _measured_lines(result)
        if figures is not None:
            lines += _figure_lines(result, figures)
    lines += ["- **Reproduce**:", "", "    ```bash", f"    {command(claim.id)}", "    ```", ""]
    return lines


def anchor(claim_id: str) -> str:
    """The anchor MkDocs (the ``toc`` extension) gives a claim's heading."""
    return re.sub(r"[^a-z0-9_-]", "", claim_id.lower().replace(" ", "-"))


def _count_line(claims: Sequence[Claim]) -> str:
    expected = [c.expected_verdicts("fast")[0] for c in claims]
    words = ("holds", "fails as stated", "holds once corrected")
    undecided = sum("fast" in c.undecided_on for c in claims)
    counts = ", ".join(f"{expected.count(w)} {w}" for w in words)
    return (
        f"{len(claims)} claims; expected on the fast profile: {counts}"
        + (f" ({undecided} of them may be undecided there)" if undecided else "")
        + "."
    )


def paper_page(package: types.ModuleType, results: Path | None, figures: Path | None = None) -> str:
    """The page of one paper package: its docstring, then each result with its claims (their
    figures drawn into ``figures`` when it and ``results`` are given)."""
    name = package_name(package)
    lines = [
        f"# {TITLES.get(name, name)}",
        "",
        markdown_of(package.__doc__ or ""),
        "",
        _count_line(package.CLAIMS),
        "",
    ]
    if any(c.expected == "fails" for c in package.CLAIMS):
        lines += [
            f"The claims expected to fail, written as errata: [{TITLES.get(name, name)}: "
            f"errata]({name}-errata.md).",
            "",
        ]
    lines += _results_note(results)
    for result in results_of(package):
        module_file = defined_in(result.claims[0])
        title = _first_paragraph(result.module.__doc__).rstrip(".")
        lines += [
            f"## {_inline(title)}",
            "",
            f"`{module_file}`",
            "",
            markdown_of(
                "\n\n".join(inspect.cleandoc(result.module.__doc__ or "").split("\n\n")[1:])
            ),
            "",
        ]
        for claim in result.claims:
            lines += claim_section(claim, measured(results, claim.id), figures)
    return "\n".join(lines) + "\n"


def _results_note(results: Path | None) -> list[str]:
    if results is None:
        return [
            f"No results folder was given to this build: the verdicts below are the "
            f"expected ones. Build with `{RESULTS_ENV}=DIR` (a folder `testbed check "
            f"--results DIR` wrote) to show the measured verdicts, counterexamples and "
            f"margins beside them.",
            "",
        ]
    return [
        f"Measured verdicts read from the results folder `{results.name}` (each claim file "
        "checked before it is shown: schema, seal, verdict recomputed from its cases).",
        "",
    ]


def _case_lines(claim: Claim) -> list[str]:
    """The saved counterexample of a claim expected to fail, and the margins of its
    hypotheses evaluated on it."""
    if not claim.examples:
        return [
            "- **The minimal case**: none saved; the check's drawn cases refute it "
            f"(`{defined_in(claim)}`)."
        ]
    case = claim.examples[0]()
    spec = case.problem.spec() if hasattr(case.problem, "spec") else {}
    lines = [
        "- **The minimal case** (saved in the claim's `examples`; hypothesis tries it first):",
        "",
        "    ```json",
        f"    {json.dumps({'problem': spec, 'params': dict(case.params)}, default=str)}",
        "    ```",
        "",
    ]
    if claim.hypotheses:
        lines.append("    Every hypothesis of the paper holds on it (margin >= 0):")
        lines.append("")
        lines += [
            "    - " + f"{escape_markdown(m.name)} ({escape_markdown(m.statement)}): margin "
            f"{_number(m.margin)}"
            for m in margins(claim.hypotheses, case)
        ]
        lines.append("")
    return lines


def errata_page(package: types.ModuleType, results: Path | None) -> str | None:
    """The errata of one paper package (its claims expected to fail), or None when it has
    none."""
    failing = [c for c in package.CLAIMS if c.expected == "fails"]
    if not failing:
        return None
    name = package_name(package)
    lines = [
        f"# {TITLES.get(name, name)}: errata",
        "",
        f"What fails in the paper as published, as a referee would write it: each item "
        f"is a claim of the [paper's page]({name}.md) whose expected verdict is \"fails "
        f'as stated" on a case inside every hypothesis of the paper, under every '
        f"reasonable reading; the correction, where one exists, is checked beside it.",
        "",
    ]
    lines += _results_note(results)
    for number, claim in enumerate(failing, 1):
        fixes = corrections_of(claim)
        lines += [
            f"## {number}. {escape_markdown(claim.reference)}",
            "",
            f"- **What fails**: `{claim.statement.replace('`', chr(39))}`"
            f" ([`{claim.id}`]({name}.md#{anchor(claim.id)}))",
        ]
        if claim.notes:
            lines.append(f"- **Why**: {_inline(' '.join(claim.notes.split()))}")
        if claim.readings:
            lines.append(
                "- **Readings**, each refuted: "
                + "; ".join(
                    f"{escape_markdown(r.name)} ({escape_markdown(r.statement)})"
                    for r in claim.readings
                )
            )
        lines += _case_lines(claim)
        result = measured(results, claim.id)
        if result is not None:
            lines += _measured_lines(result)
        if fixes:
            lines.append("- **The correction**:")
            lines += [
                f"    - [`{c.id}`]({claim_link(name, c)}) ({escape_markdown(c.reference)}): "
                f"`{c.statement.replace('`', chr(39))}`, expected {expected_text(c)}"
                for c in fixes
            ]
        else:
            lines.append(
                "- **The correction**: none is checked here; the claim is refuted as stated."
            )
        lines += [
            "- **Reproduce**:",
            "",
            "    ```bash",
            f"    {command(claim.id, *(c.id for c in fixes))}",
            "    ```",
            "",
        ]
    return "\n".join(lines) + "\n"


def claim_link(name: str, claim: Claim) -> str:
    """The link from an errata page to ``claim``'s entry on the page of its package."""
    owner = next((package_name(p) for p in PAPER_PACKAGES if claim in p.CLAIMS), name)
    return f"{owner}.md#{anchor(claim.id)}"


def index_page() -> str:
    """The papers' index: a line per package with its counts and its errata."""
    lines = [
        "# The papers",
        "",
        "One page per paper package of the registry, generated when the site is built "
        "(`testbed_app/paper_pages.py`): each result's statement as the paper numbers it, "
        "its hypotheses and readings, what is checked, the expected verdict, and, for a "
        "claim expected to fail, the counterexample and the correction.",
        "",
    ]
    for package in PAPER_PACKAGES:
        name = package_name(package)
        errata = (
            f"; [errata]({name}-errata.md)"
            if any(c.expected == "fails" for c in package.CLAIMS)
            else ""
        )
        lines.append(
            f"- [{TITLES.get(name, name)}]({name}.md): {_count_line(package.CLAIMS)}{errata}"
        )
    return "\n".join(lines) + "\n"


def pages(results: Path | None = None, scratch: Path | None = None) -> dict[str, str | bytes]:
    """Every generated file, by its path inside the site (``papers/hgp.md``, ...): the pages,
    and with ``results`` and a ``scratch`` folder to draw in, the claims' figures
    (``papers/figures/<claim>.png``)."""
    found: dict[str, str | bytes] = {f"{PAPERS_DIR}/index.md": index_page()}
    figures = scratch if results is not None else None
    for package in PAPER_PACKAGES:
        name = package_name(package)
        found[f"{PAPERS_DIR}/{name}.md"] = paper_page(package, results, figures)
        errata = errata_page(package, results)
        if errata is not None:
            found[f"{PAPERS_DIR}/{name}-errata.md"] = errata
    if figures is not None:
        for png in sorted((figures / FIGURES_DIR).glob("*.png")):
            found[f"{PAPERS_DIR}/{FIGURES_DIR}/{png.name}"] = png.read_bytes()
    return found
