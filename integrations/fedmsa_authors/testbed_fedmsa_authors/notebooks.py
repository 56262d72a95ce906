"""Function definitions taken by name from a Jupyter notebook of the authors' checkout.

A notebook (``.ipynb``) is JSON: ``cells``, each with ``cell_type`` and ``source`` (a string or
a list of lines). :func:`notebook_functions` parses every code cell with :mod:`ast`, takes the
top-level ``def`` of each name asked for (its source text as the notebook has it, unmodified),
and the notebook's own ``import`` statements that bind a name those functions use (so
``import matplotlib.pyplot as plt`` is left out when no function uses ``plt``), and executes
them, in notebook order, in a fresh namespace. Nothing else of the notebook runs (its data
generation, its training loops, its plots). A cell that is not Python (an IPython magic) is
skipped; a name asked for that no cell defines is an :class:`AuthorsCodeError` of one line.
"""

from __future__ import annotations

import ast
import json
import types
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path

from testbed_authors_checkout import AuthorsCodeError


def _code_cells(path: Path) -> Iterator[str]:
    """The source of each code cell of the notebook ``path``."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise AuthorsCodeError(f"{path} is not a readable notebook: {error}") from error
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            yield "".join(source) if isinstance(source, list) else str(source)


def _bound_names(statement: ast.Import | ast.ImportFrom) -> set[str]:
    return {(alias.asname or alias.name).split(".")[0] for alias in statement.names}


def notebook_functions(path: Path, names: Sequence[str]) -> types.SimpleNamespace:
    """The functions ``names`` of the notebook ``path`` (see the module docstring), defined as
    the notebook defines them, with the imports they use."""
    definitions: dict[str, str] = {}
    imports: list[tuple[ast.Import | ast.ImportFrom, str]] = []
    for source in _code_cells(path):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue  # an IPython magic or shell line: not Python, and defines nothing we take
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                definitions[node.name] = str(ast.get_source_segment(source, node))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.append((node, str(ast.get_source_segment(source, node))))
    missing = [name for name in names if name not in definitions]
    if missing:
        raise AuthorsCodeError(f"{path} defines no function {', '.join(missing)}")
    used = {
        node.id
        for text in definitions.values()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Name)
    }
    namespace: dict[str, object] = {"__name__": f"notebook:{path.name}"}
    code = [text for node, text in imports if _bound_names(node) & used]
    code += [definitions[name] for name in names]
    try:
        exec(compile("\n".join(code), str(path), "exec"), namespace)  # noqa: S102
    except ImportError as error:
        raise AuthorsCodeError(f"{path}: its functions' imports fail: {error}") from error
    return types.SimpleNamespace(**{name: namespace[name] for name in names})


__all__ = ["notebook_functions"]
