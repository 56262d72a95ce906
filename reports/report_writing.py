"""Writing the report's pages: the self-contained HTML page and its Markdown twin."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from reports.claims_table import (
    FIT_HEAD,
    TABLE_HEAD,
    VERDICT_CLASSES,
    ClaimSection,
    _by_paper,
    _cases_text,
    _expected_text,
    _fit_rows,
    _header_fields,
    _num,
    _summary,
    decision_text,
    power_text,
)
from reports.results_reading import _bool, _float
from reports.sections import Section as ExtraSection
from reports.sections import section_html, section_markdown


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
