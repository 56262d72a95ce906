"""MkDocs hook: adds the papers' pages, generated from the claim registry, to the site.

The pages are built by :func:`testbed_app.paper_pages.pages` when the site is built, so nothing
on them is copied by hand from a claim module; ``TESTBED_DOCS_RESULTS=DIR`` adds the verdicts
measured in a results folder (``testbed check --results DIR``) and the claims' figures.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mkdocs.structure.files import File
from mkdocs.structure.files import Files

from testbed_app.paper_pages import RESULTS_ENV
from testbed_app.paper_pages import pages


def on_files(files: Files, config) -> Files:
    results = os.environ.get(RESULTS_ENV)
    with tempfile.TemporaryDirectory() as scratch:  # the figures, read into memory here
        generated = pages(Path(results) if results else None, Path(scratch))
    for path, content in generated.items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files
