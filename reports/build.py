"""Build the empirical-vs-theory report from a results directory written by ``testbed check``.

The report is built from the results files only (see :mod:`theory_checks.runner` for their
layout); no check is rerun. It is self-contained and offline: ``index.html`` with the CSS
inlined and no external resource, ``report.md`` with the same tables, PNG figures under
``figures/`` and copies of the counterexample files under ``counterexamples/``. After the claim
tables come the sections of :mod:`reports.sections` (communication per iteration against the
papers' formulas, rounds to error against the papers' claims, replication and benchmark tables),
each read from the files its measuring step wrote, or marked "not run".

Everything is generic over claims: a claim's table row comes from its JSON, and its figure from
whatever series its CSV holds, so a new claim needs no change here.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import json
import math
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from reports import plots
from reports.sections import Section as ExtraSection
from reports.sections import build_sections, section_html, section_markdown

__all__ = [
    "ClaimSection",
    "SeriesRow",
    "build_report",
    "load_claims",
    "read_series",
    "render_html",
    "render_markdown",
    "select_cases",
    "worst_case",
    "worst_case_text",
]

PAPER_ORDER = ("Classical", "FedNest", "AggITD", "FedMSA", "HGP")
VERDICT_CLASSES = {
    "holds": "verdict-holds",
    "fails as stated": "verdict-fails",
    "holds once corrected": "verdict-corrected",
    "undecided": "verdict-undecided",
    "not checked": "verdict-unknown",
}
MAX_CASES_PLOTTED = 4
SERIES_ORDER = ("measured", "bound", "fitted", "theory")


# --------------------------------------------------------------------------- reading results


def _float(value: Any) -> float:
    """A number from JSON or CSV text; accepts ``np.float64(1.5)`` reprs; NaN if unreadable."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        match = re.fullmatch(r"[A-Za-z_][\w.]*\((.*)\)", text)
        if match:
            text = match.group(1).strip().strip("'\"")
        try:
            return float(text)
        except ValueError:
            return math.nan
    return math.nan


def _bool(value: Any) -> bool | None:
    """A flag written as a bool or as its string ("True", "False"); None if absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def load_claims(results_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Read every ``claims/*.json`` under ``results_dir``.

    Returns:
        The claims (sorted by id) and notes about files that could not be read.

    Raises:
        FileNotFoundError: when the directory or its claim files are missing.
    """
    hint = f"run `testbed check --results {results_dir}` first to produce results"
    if not results_dir.is_dir():
        raise FileNotFoundError(f"results directory {results_dir} does not exist; {hint}")
    files = sorted((results_dir / "claims").glob("*.json"))
    if not files:
        raise FileNotFoundError(
            f"no claim results (claims/*.json) in {results_dir}; {hint}")
    claims, notes = [], []
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            notes.append(f"{path.name}: unreadable ({error}); skipped")
            continue
        if not isinstance(data, dict):
            notes.append(f"{path.name}: not a claim object; skipped")
            continue
        data.setdefault("id", path.stem)
        claims.append(data)
    if not claims:
        raise FileNotFoundError(f"no readable claim results in {results_dir}; {hint}")
    claims.extend(_registered_but_unchecked(results_dir, {str(c["id"]) for c in claims}))
    claims.sort(key=lambda c: str(c["id"]))
    return claims, notes


def _registered_but_unchecked(results_dir: Path, checked: set[str]) -> list[dict[str, Any]]:
    """Rows for claims registered when the results were written but not (yet) checked.

    ``testbed check`` records the whole claim registry in ``metadata.json``, so the report lists
    every claim from results files alone, marking the ones without results "not checked".
    """
    try:
        registered = json.loads((results_dir / "metadata.json").read_text()).get(
            "claims_registered", [])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    return [dict(entry, verdict="not checked", as_expected=None, n_cases=0, cases=[],
                 fits=[], counterexample=None)
            for entry in registered if isinstance(entry, dict) and entry.get("id") not in checked]


def _load_metadata(results_dir: Path) -> tuple[dict[str, Any], list[str]]:
    path = results_dir / "metadata.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, ["metadata.json is missing: commit, profile and versions unknown"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return {}, [f"metadata.json unreadable ({error})"]
    return (data if isinstance(data, dict) else {}), []


@dataclasses.dataclass(frozen=True)
class SeriesRow:
    """One row of a series CSV, with numbers parsed."""

    estimator: str
    problem_id: str
    params: str
    series: str
    step_name: str
    step: float
    value: float
    oracle_calls: float

    @property
    def case(self) -> tuple[str, str]:
        return (self.problem_id, self.params)


def read_series(path: Path) -> list[SeriesRow]:
    """Rows of a series CSV (the runner's columns); rows with an unreadable step are skipped.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the file lacks the columns needed to plot.
    """
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        needed = {"problem_id", "series", "step", "value"}
        missing = needed - set(reader.fieldnames or ())
        if reader.fieldnames is not None and missing:
            raise ValueError(f"{path.name}: missing columns {sorted(missing)}")
        rows = []
        for raw in reader:
            step = _float(raw.get("step"))
            if not math.isfinite(step):
                continue
            oracle = _float(raw.get("oracle_calls") or 0)
            rows.append(SeriesRow(
                estimator=raw.get("estimator") or "?",
                problem_id=raw.get("problem_id") or "?",
                params=_canonical_params(raw.get("params") or ""),
                series=raw.get("series") or "?",
                step_name=raw.get("step_name") or "",
                step=step,
                value=_float(raw.get("value")),
                oracle_calls=oracle if math.isfinite(oracle) else 0.0,
            ))
    return rows


def _torn_series_note(path: Path, name: str, n_rows: int) -> tuple[str, float | None] | None:
    """A note when a series CSV was cut short (a write interrupted, a disk filled): its last
    line has no newline or fewer fields than the header. The figure then shows only the
    complete rows, and the reader must know it is truncated."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        return None
    try:
        header, last = next(csv.reader([lines[0]])), next(csv.reader([lines[-1]]))
    except (csv.Error, StopIteration):
        return None
    if text.endswith("\n") and len(last) == len(header):
        return None
    step = _float(dict(zip(header, last, strict=False)).get("step"))
    complete = n_rows - 1 if math.isfinite(step) else n_rows
    return (f"series file {name} is truncated (its last line is cut short: the file was not "
            f"completely written); the figure shows only its {max(complete, 0)} complete "
            "row(s). Rerun `testbed check --fresh --claim ID` to rewrite it.",
            step if math.isfinite(step) else None)


def _canonical_params(value: Any) -> str:
    """Parameters as sorted-key JSON, whether given as a dict or as JSON text."""
    if isinstance(value, str):
        if not value:
            return "{}"
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return value
    return json.dumps(value, sort_keys=True, default=str)


# --------------------------------------------------------------------------- worst case


def _case_fit(case: dict[str, Any]) -> dict[str, Any] | None:
    fit = case.get("fit")
    return fit if isinstance(fit, dict) and "estimate" in fit else None


def _ratio(case: dict[str, Any]) -> float:
    """measured / bound for a "<=" relation (bound / measured for ">=")."""
    measured, bound = _float(case.get("measured")), _float(case.get("bound"))
    relation = str(case.get("relation", "<="))
    if ">=" in relation and "<=" not in relation:
        measured, bound = bound, measured
    if math.isnan(measured) or math.isnan(bound):
        return math.nan
    if bound > 0:
        return measured / bound
    return math.inf if measured > 0 else 0.0


def _within_slack(case: dict[str, Any]) -> bool:
    """A passed bound case whose measured value is above its bound: it passed only by the
    check's round-off slack (say a 1e-16 error against a bound of 0)."""
    return (_case_fit(case) is None and _bool(case.get("passed")) is not False
            and _ratio(case) > 1.0)


def _severity(case: dict[str, Any]) -> tuple[bool, bool, float]:
    """Sort key, larger = worse: failed first, then the largest measured/bound ratio.

    A fit is scored by ``|estimate - theory| / tolerance``. Passed cases within round-off
    slack (see :func:`_within_slack`) rank below every case whose ratio says something about
    the bound; they are the worst case only when no other case is left.
    """
    failed = _bool(case.get("passed")) is False
    fit = _case_fit(case)
    if fit is not None:
        tol = _float(fit.get("tolerance"))
        gap = abs(_float(fit.get("estimate")) - _float(fit.get("theory")))
        score = gap / tol if tol > 0 else (math.inf if gap > 0 else 0.0)
    else:
        score = _ratio(case)
    if math.isnan(score):
        score = math.inf
    meaningful = failed or not _within_slack(case)
    return (failed, meaningful, score if math.isfinite(score) else 0.0)


def worst_case(claim: dict[str, Any]) -> dict[str, Any] | None:
    """The claim's worst case (see :func:`_severity`); ties go to the first listed."""
    cases = [c for c in claim.get("cases") or [] if isinstance(c, dict)]
    if not cases:
        return None
    worst = max(range(len(cases)), key=lambda i: (_severity(cases[i]), -i))
    return cases[worst]


def _num(value: Any, digits: int = 3) -> str:
    x = _float(value)
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}g}"


def worst_case_text(case: dict[str, Any] | None) -> str:
    """The measured figure against the theory for one case, as one line of text."""
    if case is None:
        return "no cases"
    fit = _case_fit(case)
    if fit is not None:
        return (f"fitted slope {_num(fit.get('estimate'), 4)} "
                f"[{_num(fit.get('ci_low'), 4)}, {_num(fit.get('ci_high'), 4)}] "
                f"vs theory {_num(fit.get('theory'), 4)}")
    measured, bound = _float(case.get("measured")), _float(case.get("bound"))
    text = f"{_num(measured)} vs bound {_num(bound)} ({case.get('relation', '<=')})"
    if bound > 0 and math.isfinite(measured):
        text += f", ratio {_num(measured / bound)}"
    if _within_slack(case):
        text += "; passed within the check's round-off slack"
    return text


# --------------------------------------------------------------------------- figures


def select_cases(
    rows: Sequence[SeriesRow], worst: dict[str, Any] | None, limit: int = MAX_CASES_PLOTTED
) -> list[tuple[str, str]]:
    """Up to ``limit`` cases to plot, deterministically.

    The claim's worst case leads when its series has at least two positive measured values;
    then cases whose measured series spans more than a decade (they show a rate), then cases
    with at least two positive values, then the rest; sorted by (problem id, params) within
    each group.
    """
    values: dict[tuple[str, str], list[float]] = {r.case: [] for r in rows}
    for r in rows:
        if r.series == "measured" and math.isfinite(r.value) and r.value > 0:
            values[r.case].append(r.value)

    def group(case: tuple[str, str]) -> int:
        v = values[case]
        if len(v) >= 2 and max(v) > 10 * min(v):
            return 0
        return 1 if len(v) >= 2 else 2

    ordered = sorted(values, key=lambda c: (group(c), c))
    if worst is not None:
        key = (worst.get("problem_id"), _canonical_params(worst.get("params") or {}))
        match = [c for c in ordered if c == key] or \
            [c for c in ordered if c[0] == key[0]]
        if match and group(match[0]) < 2:
            ordered.remove(match[0])
            ordered.insert(0, match[0])
    return ordered[:limit]


def _series_rank(name: str) -> tuple[int, str]:
    return (SERIES_ORDER.index(name) if name in SERIES_ORDER else len(SERIES_ORDER), name)


def _panels(rows: Sequence[SeriesRow], cases: Sequence[tuple[str, str]],
            worst_key: tuple[str, str] | None) -> list[plots.Panel]:
    panels = []
    for case in cases:
        groups: dict[tuple[str, str, str], list[SeriesRow]] = {}
        for r in rows:
            if r.case == case:
                groups.setdefault((r.estimator, r.series, r.step_name), []).append(r)
        curves = []
        for (estimator, series, step_name), group in sorted(
                groups.items(), key=lambda kv: (_series_rank(kv[0][1]), kv[0])):
            group.sort(key=lambda r: r.step)
            curves.append(plots.Curve(
                estimator, series, step_name, tuple(r.step for r in group),
                tuple(r.value for r in group), tuple(r.oracle_calls for r in group)))
        title = case[0] + (" (worst case)" if case == worst_key else "")
        panels.append(plots.Panel(title, tuple(curves)))
    return panels


def _figure_name(claim_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", claim_id) + ".png"


# --------------------------------------------------------------------------- per claim


@dataclasses.dataclass
class ClaimSection:
    """What the report shows about one claim."""

    claim: dict[str, Any]
    worst: str
    figure: str | None = None
    plotted: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    counterexample: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.claim["id"])

    @property
    def anchor(self) -> str:
        return "claim-" + re.sub(r"[^A-Za-z0-9_-]", "-", self.id)


def _section(claim: dict[str, Any], results_dir: Path, out_dir: Path) -> ClaimSection:
    worst = worst_case(claim)
    section = ClaimSection(claim, worst_case_text(worst))
    section.counterexample = _copy_counterexample(claim, results_dir, out_dir, section.notes)
    slack = sum(1 for c in claim.get("cases") or [] if isinstance(c, dict)
                and _within_slack(c))
    if slack:
        section.notes.append(
            f"{slack} passed case(s) measured above the bound, within the check's round-off "
            "slack (e.g. a float64 round-off error against a bound of 0).")
    series_rel = str(claim.get("series_file") or f"series/{claim['id']}.csv")
    try:
        rows = read_series(results_dir / series_rel)
    except FileNotFoundError:
        section.notes.append(f"series file {series_rel} is missing; no figure.")
        return section
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as error:
        section.notes.append(f"series file {series_rel} unreadable ({error}); no figure.")
        return section
    torn = _torn_series_note(results_dir / series_rel, series_rel, len(rows))
    if torn:
        section.notes.append(torn[0])
        if rows and torn[1] is not None and rows[-1].step == torn[1]:
            rows = rows[:-1]  # the cut row: its last number may be cut short too
    if not rows:
        section.notes.append("no series recorded for this claim (it is checked case by "
                             "case; see the table); no figure.")
        return section
    cases = select_cases(rows, worst)
    worst_key = None
    if worst is not None:
        worst_key = (str(worst.get("problem_id")),
                     _canonical_params(worst.get("params") or {}))
    name = _figure_name(section.id)
    try:
        section.notes.extend(plots.plot_claim_figure(
            section.id, _panels(rows, cases, worst_key), out_dir / "figures" / name))
    except (ValueError, OverflowError) as error:
        section.notes.append(f"figure could not be drawn ({error}).")
        return section
    section.figure = f"figures/{name}"
    section.plotted = cases
    n_all = len({r.case for r in rows})
    if n_all > len(cases):
        section.notes.append(f"{len(cases)} of {n_all} cases plotted.")
    return section


def _copy_counterexample(claim: dict[str, Any], results_dir: Path, out_dir: Path,
                         notes: list[str]) -> str | None:
    """Copy the counterexample JSON (and its .npz) under out_dir; return the relative link."""
    rel = claim.get("counterexample")
    if not rel:
        if claim.get("verdict") == "fails as stated":
            notes.append("the claim fails but no counterexample file is recorded.")
        return None
    source = results_dir / str(rel)
    if not source.is_file():
        notes.append(f"counterexample file {rel} is missing from the results.")
        return None
    target_dir = out_dir / "counterexamples"
    target_dir.mkdir(parents=True, exist_ok=True)
    for companion in sorted(source.parent.glob(source.stem + ".*")):
        if companion.is_file() and not companion.name.endswith(".tmp"):
            shutil.copyfile(companion, target_dir / companion.name)
    return f"counterexamples/{source.name}"


# --------------------------------------------------------------------------- rendering


def _paper_key(paper: str) -> tuple[int, str]:
    return (PAPER_ORDER.index(paper) if paper in PAPER_ORDER else len(PAPER_ORDER), paper)


def _by_paper(sections: Iterable[ClaimSection]) -> list[tuple[str, list[ClaimSection]]]:
    groups: dict[str, list[ClaimSection]] = {}
    for s in sections:
        groups.setdefault(str(s.claim.get("paper") or "unknown paper"), []).append(s)
    return [(p, groups[p]) for p in sorted(groups, key=_paper_key)]


def _cases_text(claim: dict[str, Any]) -> str:
    """Cases that held, were undecided, and where the verdict comes from a refutation."""
    if claim.get("verdict") == "not checked":
        return "not checked"
    parts = [f"{int(_float(claim.get('n_cases', len(claim.get('cases') or []))))} held"]
    undecided = int(_float(claim.get("n_undecided") or 0))
    if undecided:
        parts.append(f"{undecided} undecided")
    if claim.get("counterexample"):
        parts.append("refuted on the saved counterexample"
                     + (" (confirmed on fresh seeds)" if claim.get("decision") == "statistical"
                        else ""))
    rejected = claim.get("n_rejected")
    if rejected:
        parts.append(f"{rejected} drawn cases not measurable")
    return "; ".join(parts)


def _expected_text(claim: dict[str, Any]) -> str:
    flag = _bool(claim.get("as_expected"))
    return "n/a" if flag is None else ("yes" if flag else "NO")


def decision_text(claim: dict[str, Any]) -> str:
    """How the verdict was decided: float64 tolerances, or intervals at a stated rate."""
    if claim.get("decision") != "statistical":
        return "deterministic (float64, round-off tolerances)"
    rate, per_case = _float(claim.get("false_fail_rate")), _float(claim.get("case_false_fail_rate"))
    text = f"statistical: false-failure rate {_num(rate, 2)} per claim"
    if math.isfinite(per_case):
        text += f" ({_num(per_case, 2)} per case, Bonferroni)"
    unconfirmed = int(_float(claim.get("n_unconfirmed") or 0))
    if unconfirmed:
        text += f"; {unconfirmed} first-stage failure(s) not confirmed on fresh seeds"
    return text


def power_text(claim: dict[str, Any]) -> str:
    """The check's power (a holds claim: its perturbation caught) or its positive control (a
    claim that fails as stated: a case where the same check holds)."""
    power, control = claim.get("power"), claim.get("positive_control")
    parts = []
    if isinstance(power, dict):
        parts.append(f"{'caught' if _bool(power.get('caught')) else 'NOT caught'}: "
                     f"{power.get('name', '?')}")
    if isinstance(control, dict):
        parts.append("positive control " + ("holds" if _bool(control.get("holds"))
                                            else f"does NOT hold ({control.get('outcome')})"))
    return "; ".join(parts) if parts else "—"


def _header_fields(meta: dict[str, Any]) -> list[tuple[str, str]]:
    profile = meta.get("profile")
    if isinstance(profile, dict):
        extra = ", ".join(f"{k}={v}" for k, v in profile.items() if k != "name")
        profile_text = f"{profile.get('name', '?')}" + (f" ({extra})" if extra else "")
    else:
        profile_text = str(profile) if profile else "unknown"
    versions = meta.get("versions")
    versions_text = (", ".join(f"{k} {v}" for k, v in versions.items())
                     if isinstance(versions, dict) else "unknown")
    fields = [("Git commit", str(meta.get("git_commit", "unknown"))),
              ("Profile", profile_text),
              ("Package versions", versions_text),
              ("Results written", str(meta.get("written", "unknown")))]
    if meta.get("hypothesis"):
        fields.append(("Hypothesis", str(meta["hypothesis"])))
    return fields


def verdict_counts(claims: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Claims per verdict (undecided and not checked counted apart from holds)."""
    counts = {v: 0 for v in VERDICT_CLASSES}
    for c in claims:
        verdict = str(c.get("verdict"))
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def _summary(sections: Sequence[ClaimSection]) -> str:
    claims = [s.claim for s in sections]
    counts = verdict_counts(claims)
    unexpected = sum(1 for c in claims if _bool(c.get("as_expected")) is False)
    missed = sum(1 for c in claims if isinstance(c.get("power"), dict)
                 and _bool(c["power"].get("caught")) is False)
    controls = sum(1 for c in claims if isinstance(c.get("positive_control"), dict)
                   and _bool(c["positive_control"].get("holds")) is False)
    parts = [f"{n} {v}" for v, n in counts.items() if n or v != "not checked"]
    text = (f"{len(sections)} claims: " + ", ".join(parts)
            + f"; {unexpected} verdict(s) differ from what the testbed expects")
    if missed or controls:
        text += f"; {missed} perturbation(s) not caught, {controls} positive control(s) failing"
    return text + "."


TABLE_HEAD = ("Claim", "Reference", "Kind", "Statement", "Verdict", "As expected",
              "Worst case (measured vs theory)", "Cases", "Power / control", "Counterexample")
FIT_HEAD = ("Case", "Quantity", "Fitted", "Interval", "Theory", "Tolerance", "Agrees")


def _fit_rows(claim: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for fit in claim.get("fits") or []:
        if not isinstance(fit, dict):
            continue
        est, theory, tol = (_float(fit.get(k)) for k in ("estimate", "theory", "tolerance"))
        agrees = "yes" if abs(est - theory) <= tol else "NO"
        level = _float(fit.get("confidence"))
        interval = f"[{_num(fit.get('ci_low'), 4)}, {_num(fit.get('ci_high'), 4)}]"
        if math.isfinite(level):
            interval += f" ({level:.0%})"
        rows.append((str(fit.get("problem_id", "?")), str(fit.get("quantity", "")),
                     _num(est, 4), interval, _num(theory, 4), _num(tol, 3), agrees))
    return rows


def _css() -> str:
    # Next to this module (shipped as package data); not importlib.resources, which fails
    # when an old editable install maps ``reports`` as a namespace package.
    return Path(__file__).with_name("style.css").read_text(encoding="utf-8")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _caption(s: ClaimSection) -> str:
    cases = [pid + ("" if params in ("{}", "") else f" {params}") for pid, params in s.plotted]
    return ("Colour: estimator. Solid: measured; dashed: theoretical bound; wide pale band: "
            "fitted rate (over its fitting window); black dash-dot: theoretical rate. "
            "Second row, if any: the same against oracle calls (series without oracle "
            "counts are left out). Cases: " + "; ".join(cases) + ".")


# Inline (no external script): after the page loads, mark every figure that decoded, so a
# headless browser's DOM dump shows whether all figures loaded (tests/test_report_browser.py).
_LOAD_CHECK = (
    "window.addEventListener('load', function () {"
    " var imgs = document.querySelectorAll('img'); var ok = 0;"
    " imgs.forEach(function (img) {"
    "  var good = img.complete && img.naturalWidth > 0;"
    "  img.setAttribute('data-loaded', good ? 'yes' : 'no'); if (good) { ok += 1; } });"
    " document.body.setAttribute('data-figures', ok + '/' + imgs.length); });"
)


def render_html(meta: dict[str, Any], sections: Sequence[ClaimSection],
                notes: Sequence[str], extras: Sequence[ExtraSection] = ()) -> str:
    """The self-contained HTML page (CSS inlined, relative links only)."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Hypergradient testbed: claims against measurements</title>",
           f"<style>\n{_css()}</style>", "</head>", "<body>", "<header>",
           "<h1>Hypergradient testbed: paper claims against measurements</h1>",
           '<dl class="meta">']
    for key, value in _header_fields(meta):
        out.append(f"<dt>{_e(key)}</dt><dd><code>{_e(value)}</code></dd>")
    out += ["</dl>", f'<p class="summary">{_e(_summary(sections))}</p>', "</header>"]
    if notes:
        out.append('<section class="notes"><h2>Notes on the results</h2><ul>')
        out += [f"<li>{_e(n)}</li>" for n in notes]
        out.append("</ul></section>")
    for paper, group in _by_paper(sections):
        out += [f'<section class="paper"><h2>{_e(paper)}</h2>', '<div class="scroll">',
                '<table class="claims"><thead><tr>']
        out += [f"<th>{_e(h)}</th>" for h in TABLE_HEAD]
        out.append("</tr></thead><tbody>")
        for s in group:
            c = s.claim
            verdict = str(c.get("verdict", "unknown"))
            vclass = VERDICT_CLASSES.get(verdict, "verdict-unknown")
            expected = _expected_text(c)
            eclass = "expected-no" if expected == "NO" else "expected-yes"
            link = (f'<a href="{_e(s.counterexample)}">{_e(Path(s.counterexample).name)}</a>'
                    if s.counterexample else "&mdash;")
            out.append(
                "<tr>"
                f'<td><a href="#{_e(s.anchor)}"><code>{_e(s.id)}</code></a></td>'
                f"<td>{_e(c.get('reference', ''))}</td><td>{_e(c.get('kind', ''))}</td>"
                f'<td class="statement">{_e(c.get("statement", ""))}</td>'
                f'<td class="verdict {vclass}">{_e(verdict)}</td>'
                f'<td class="{eclass}">{_e(expected)}</td>'
                f'<td class="figure-cell">{_e(s.worst)}</td>'
                f"<td>{_e(_cases_text(c))}</td><td>{_e(power_text(c))}</td>"
                f"<td>{link}</td></tr>")
        out += ["</tbody></table></div>", "</section>"]
    for extra in extras:
        out += section_html(extra)
    out.append('<section class="details"><h2>Claims in detail</h2>')
    for s in sections:
        out += _html_claim(s)
    out += ["</section>", f"<script>{_LOAD_CHECK}</script>", "</body>", "</html>", ""]
    return "\n".join(out)


def _html_claim(s: ClaimSection) -> list[str]:
    c = s.claim
    verdict = str(c.get("verdict", "unknown"))
    vclass = VERDICT_CLASSES.get(verdict, "verdict-unknown")
    out = [f'<article class="claim" id="{_e(s.anchor)}">',
           f"<h3><code>{_e(s.id)}</code> "
           f'<span class="badge {vclass}">{_e(verdict)}</span></h3>',
           f'<p class="ref">{_e(c.get("reference", ""))} &middot; {_e(c.get("kind", ""))}'
           f" &middot; estimators: {_e(', '.join(c.get('estimators') or []))}</p>",
           f'<p class="statement">{_e(c.get("statement", ""))}</p>',
           f"<p>Worst case: {_e(s.worst)}</p>",
           f"<p>Decision: {_e(decision_text(c))}.</p>"]
    out += [f"<p>{_e(line)}</p>" for line in _decision_lines(c)]
    if c.get("corrects"):
        out.append(f"<p>Corrects <code>{_e(c['corrects'])}</code>.</p>")
    if c.get("notes"):
        out.append(f'<p class="claim-notes">{_e(c["notes"])}</p>')
    if s.counterexample:
        out.append(f'<p>Counterexample: <a href="{_e(s.counterexample)}">'
                   f"{_e(s.counterexample)}</a></p>")
    if s.figure:
        alt = f"{s.id}: measured against theory, log scale"
        out += ["<figure>", f'<img src="{_e(s.figure)}" alt="{_e(alt)}">',
                f"<figcaption>{_e(_caption(s))}</figcaption>", "</figure>"]
    fits = _fit_rows(c)
    if fits:
        out.append('<div class="scroll"><table class="fits"><thead><tr>')
        out += [f"<th>{_e(h)}</th>" for h in FIT_HEAD]
        out.append("</tr></thead><tbody>")
        for row in fits:
            cls = "expected-no" if row[-1] == "NO" else "expected-yes"
            cells = [f"<td><code>{_e(row[0])}</code></td>"]
            cells += [f"<td>{_e(v)}</td>" for v in row[1:-1]]
            cells.append(f'<td class="{cls}">{_e(row[-1])}</td>')
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</tbody></table></div>")
    if s.notes:
        out.append('<ul class="claim-notes">')
        out += [f"<li>{_e(n)}</li>" for n in s.notes]
        out.append("</ul>")
    out.append("</article>")
    return out


def _decision_lines(c: dict[str, Any]) -> list[str]:
    """The perturbation or positive control, and each undecided case with the budget that
    would decide it."""
    lines = []
    power = c.get("power")
    if isinstance(power, dict):
        lines.append(f"Perturbation ({'caught' if _bool(power.get('caught')) else 'NOT caught'},"
                     f" verdict on it: {power.get('verdict', '?')}): {power.get('name', '?')}: "
                     f"{power.get('description', '')}")
    control = c.get("positive_control")
    if isinstance(control, dict):
        case = control.get("case") or {}
        lines.append(f"Positive control: on {case.get('problem_id', '?')} "
                     f"{json.dumps(case.get('params') or {}, sort_keys=True)} the same check "
                     f"says {control.get('outcome', '?')} (measured "
                     f"{_num(case.get('measured'))} vs {_num(case.get('bound'))}).")
    for case in c.get("cases") or []:
        if not isinstance(case, dict) or case.get("outcome") != "undecided":
            continue
        for d in case.get("decisions") or []:
            if isinstance(d, dict) and d.get("outcome") == "undecided":
                factor = _float(d.get("budget_factor"))
                budget = (f"about {_num(factor, 2)}x the samples would decide it"
                          if math.isfinite(factor) else "the estimate sits on the edge")
                lines.append(f"Undecided on {case.get('problem_id')}: {d.get('quantity')} "
                             f"{_num(d.get('estimate'), 4)}, interval [{_num(d.get('low'), 4)}, "
                             f"{_num(d.get('high'), 4)}] at rate {_num(d.get('rate'), 2)} "
                             f"against [{_num(d.get('region_low'), 4)}, "
                             f"{_num(d.get('region_high'), 4)}]; {budget}.")
    return lines


def _md(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    text = str(text).replace("\\", "\\\\").replace("\n", " ")
    return text.replace("|", "\\|").replace("*", "\\*")


def _md_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table; ``rows`` cells must already be escaped with :func:`_md`."""
    out = ["| " + " | ".join(_md(h) for h in head) + " |",
           "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def render_markdown(meta: dict[str, Any], sections: Sequence[ClaimSection],
                    notes: Sequence[str], extras: Sequence[ExtraSection] = ()) -> str:
    """The Markdown twin of the HTML page: same tables, same figures (relative links)."""
    out = ["# Hypergradient testbed: paper claims against measurements", ""]
    out += [f"- **{k}**: `{v}`" for k, v in _header_fields(meta)]
    out += ["", _summary(sections), ""]
    if notes:
        out += ["## Notes on the results", ""] + [f"- {n}" for n in notes] + [""]
    for paper, group in _by_paper(sections):
        rows = []
        for s in group:
            c = s.claim
            link = (f"[{_md(Path(s.counterexample).name)}]({s.counterexample})"
                    if s.counterexample else "—")
            rows.append((f"[`{_md(s.id)}`](#{s.anchor})", _md(c.get("reference", "")),
                         _md(c.get("kind", "")), _md(c.get("statement", "")),
                         f"**{_md(c.get('verdict', 'unknown'))}**",
                         _md(_expected_text(c)), _md(s.worst), _md(_cases_text(c)),
                         _md(power_text(c)), link))
        out += [f"## {paper}", ""] + _md_table(TABLE_HEAD, rows) + [""]
    for extra in extras:
        out += section_markdown(extra)
    out += ["## Claims in detail", ""]
    for s in sections:
        c = s.claim
        out += [f'<a id="{s.anchor}"></a>', "",
                f"### `{s.id}` — {c.get('verdict', 'unknown')}", "",
                f"{c.get('reference', '')} · {c.get('kind', '')} · estimators: "
                f"{', '.join(c.get('estimators') or [])}", "",
                f"Statement: `{c.get('statement', '')}`", "", f"Worst case: {s.worst}", "",
                f"Decision: {decision_text(c)}.", ""]
        for line in _decision_lines(c):
            out += [line, ""]
        if c.get("corrects"):
            out += [f"Corrects `{c['corrects']}`.", ""]
        if c.get("notes"):
            out += [f"> {c['notes']}", ""]
        if s.counterexample:
            out += [f"Counterexample: [{s.counterexample}]({s.counterexample})", ""]
        if s.figure:
            out += [f"![{s.id}: measured against theory, log scale]({s.figure})", "",
                    f"*{_caption(s)}*", ""]
        fits = _fit_rows(c)
        if fits:
            out += _md_table(FIT_HEAD, [tuple(_md(v) for v in row) for row in fits]) + [""]
        out += [f"- {n}" for n in s.notes] + ([""] if s.notes else [])
    return "\n".join(out)


# --------------------------------------------------------------------------- entry point


def build_report(results_dir: Path, out_dir: Path) -> Path:
    """Build the report of ``results_dir`` into ``out_dir``; return the path of index.html.

    Reads only the results files (``testbed check`` writes them); reruns nothing. Writes
    ``index.html``, ``report.md``, ``figures/*.png`` and ``counterexamples/*`` in ``out_dir``.

    Raises:
        FileNotFoundError: if ``results_dir`` is missing or holds no claim results.
        ValueError: if ``out_dir`` is ``results_dir`` itself.
    """
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    claims, notes = load_claims(results_dir)
    if out_dir.resolve() == results_dir.resolve():
        raise ValueError("the report's output directory must differ from the results "
                         f"directory {results_dir}")
    meta, meta_notes = _load_metadata(results_dir)
    notes = meta_notes + notes
    profile = meta.get("profile")
    profile_name = profile.get("name") if isinstance(profile, dict) else profile
    stale = [str(c["id"]) for c in claims
             if profile_name and c.get("profile") not in (None, profile_name)]
    if stale:
        notes.append(f"results from a profile other than {profile_name}: "
                     + ", ".join(stale))
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = [_section(c, results_dir, out_dir) for c in claims]
    extras = build_sections(results_dir, out_dir)
    index = out_dir / "index.html"
    index.write_text(render_html(meta, sections, notes, extras), encoding="utf-8")
    (out_dir / "report.md").write_text(render_markdown(meta, sections, notes, extras),
                                       encoding="utf-8")
    return index
