"""The pieces of the report's sections (tables, commands, paragraphs), shared by
:mod:`reports.sections` and :mod:`reports.experiment_sections` and laid out by the templates."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import TypeVar


@dataclasses.dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    #: wide data tables (one column per measured field) are folded and scroll on their own
    folded: bool = False


T = TypeVar("T")

#: A table's column: its heading and the cell it shows for one item.
Column = tuple[str, Callable[[T], str]]


def column_table(
    columns: Sequence[Column[T]], items: Iterable[T], caption: str = "", folded: bool = False
) -> Table:
    """A table of one row per item, each column's cell its function of the item."""
    return Table(
        tuple(heading for heading, _ in columns),
        tuple(tuple(cell(item) for _, cell in columns) for item in items),
        caption,
        folded,
    )


@dataclasses.dataclass(frozen=True)
class Command:
    """A command that fills an empty section, and what it costs."""

    command: str
    duration: str


@dataclasses.dataclass
class Section:
    """One section of the report: paragraphs, tables and figures (relative PNG paths)."""

    anchor: str
    title: str
    paragraphs: list[str] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    figures: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # src, alt, cap
    notes: list[str] = dataclasses.field(default_factory=list)
    commands: list[Command] = dataclasses.field(default_factory=list)
    #: "not run" (no results file) or "" (shown from its files)
    status: str = ""


def not_run(section: Section, what: str, *commands: Command) -> None:
    section.status = "not run"
    section.paragraphs.append(f"not run ({what}). To fill this section:")
    section.commands.extend(commands)


def check_command(results_dir: Path) -> Command:
    return Command(
        f"testbed check --results {results_dir}",
        "resumes: only what is missing is measured; the communication and "
        "rounds-to-error tables take a few minutes on 2 cores (fast profile)",
    )


def read_json(path: Path, section: Section, how: Command) -> Any:
    """The JSON at ``path``; None with "not run" (missing) or a note (unreadable)."""
    if not path.is_file():
        not_run(section, f"{path.name} is absent", how)
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        section.notes.append(f"{path.name} unreadable ({error}); section skipped.")
        return None


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, (int, float)):
        x = float(value)
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "inf"
        return f"{int(x)}" if x == int(x) and abs(x) < 1e9 else f"{x:.{digits}g}"
    return str(value)


def cell_class(value: str) -> str:
    """The CSS class of a section's table cell: failures stand out, "not reached" is muted."""
    return {
        "NO": "expected-no",
        "yes": "expected-yes",
        "not reached": "muted",
        "diverged": "expected-no",
    }.get(value, "")
