"""The report's two pages from one context: Jinja2 templates for HTML and Markdown.

``templates/report.html.j2`` (with ``macros.html.j2``) renders with autoescaping, so every value
from the results files is escaped; only the package's own stylesheet (``style.css``) and page
script (``page_check.js``) are inlined unescaped. ``templates/report.md.j2`` renders the same
:class:`~reports.page_context.Page` without autoescaping; its values pass through the filters
below (:func:`md_cell` in tables, :func:`md_text` in prose, :func:`md_code` inside backticks).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from jinja2 import Environment
from jinja2 import FileSystemLoader
from jinja2 import StrictUndefined
from jinja2 import select_autoescape

from reports.page_context import Page
from reports.sections import cell_class

# Next to this module (shipped as package data); not importlib.resources, which fails when an
# old editable install maps ``reports`` as a namespace package.
HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    text = str(text).replace("\\", "\\\\").replace("\r", " ").replace("\n", " ")
    return text.replace("|", "\\|").replace("*", "\\*")


def md_text(text: Any) -> str:
    """Prose: one line, asterisks and backslashes escaped so that ``a*b*c`` stays literal."""
    text = str(text).replace("\\", "\\\\").replace("\r", " ").replace("\n", " ")
    return text.replace("*", "\\*")


def md_code(text: Any) -> str:
    """Text inside single backticks (a backtick would close the span)."""
    return str(text).replace("`", "'").replace("\n", " ")


@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(md=md_cell, mdtext=md_text, code=md_code)
    return env


def _asset(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def render_html(page: Page) -> str:
    """The self-contained HTML page (CSS and script inlined, relative links only)."""
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            page=page,
            css=_asset("style.css"),
            script=_asset("page_check.js"),
            cell_class=cell_class,
        )
    )


def render_markdown(page: Page) -> str:
    """The Markdown twin: the same context, the same tables, figures and links."""
    return environment().get_template("report.md.j2").render(page=page)
