"""Figures are drawn again only when what they are drawn from changed.

Each figure's key is the SHA-256 of exactly its inputs (the :class:`~reports.figure_spec.
FigureSpec` built from its results rows, or the rounds-to-error traces) and the drawing code's
version string. ``figures/manifest.json`` records, per PNG, its key, the SHA-256 of the PNG as
written and what the drawing returned (the artist roles per panel, notes). A figure is reused
when its key and the PNG's bytes both match the manifest, so a PNG replaced or damaged by hand,
or one written by a build interrupted before its manifest entry, is drawn again.

Writes are atomic: a PNG is drawn into a fresh temporary file and renamed over the old one, and the
manifest is rewritten through :func:`results_format.atomic_write` after each drawn figure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from results_format import atomic_write
from results_format.writing import atomic_output

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__name__, **dataclasses.asdict(value)}
    raise TypeError(f"not serialisable: {type(value).__name__}")


def figure_key(version: str, inputs: Any) -> str:
    """SHA-256 of the drawing code's version and the figure's inputs."""
    text = json.dumps([version, inputs], sort_keys=True, default=_plain, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class FigureCache:
    """The figures of one output folder and the manifest that keys them."""

    def __init__(self, folder: Path, entries: dict[str, dict[str, Any]]) -> None:
        self.folder = folder
        self.entries = entries
        self.used: set[str] = set()
        self.drawn: list[str] = []
        self.reused: list[str] = []

    @classmethod
    def load(cls, folder: Path) -> FigureCache:
        """The manifest in ``folder``; an empty one when absent, unreadable or of another
        format (every figure is then drawn)."""
        try:
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return cls(folder, {})
        figures = data.get("figures") if isinstance(data, dict) else None
        if data.get("format") != MANIFEST_FORMAT or not isinstance(figures, dict):
            return cls(folder, {})
        return cls(folder, {k: v for k, v in figures.items() if isinstance(v, dict)})

    def fresh(self, name: str, key: str) -> dict[str, Any] | None:
        """The manifest entry of ``name`` when its key matches and its PNG is the one written."""
        entry = self.entries.get(name)
        if entry is None or entry.get("key") != key:
            return None
        if _file_hash(self.folder / name) != entry.get("png_sha256"):
            return None
        return entry

    def draw(self, name: str, key: str, draw: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """The entry of figure ``name``: reused when fresh, else ``draw(temporary_path)`` is
        called, the PNG renamed into place and the manifest rewritten."""
        self.used.add(name)
        entry = self.fresh(name, key)
        if entry is not None:
            self.reused.append(name)
            return entry
        # a fresh temporary file (never a name planted beforehand), renamed over the PNG
        with atomic_output(self.folder / name) as (_, temporary):
            result = draw(temporary)
            digest = _file_hash(temporary)
        entry = {"key": key, "png_sha256": digest, **result}
        self.entries[name] = entry
        self.drawn.append(name)
        self.save()
        return entry

    def forget(self, name: str) -> None:
        """Drop ``name`` and its PNG (its figure could not be drawn this time)."""
        if self.entries.pop(name, None) is not None:
            (self.folder / name).unlink(missing_ok=True)
            self.save()
        self.used.discard(name)

    def prune(self) -> list[str]:
        """Delete the figures this manifest recorded that the build did not use (a claim
        removed from the results); return their names."""
        stale = sorted(set(self.entries) - self.used)
        for name in stale:
            (self.folder / name).unlink(missing_ok=True)
            del self.entries[name]
        if stale:
            self.save()
        return stale

    def save(self) -> None:
        atomic_write(
            self.folder / MANIFEST,
            json.dumps(
                {"format": MANIFEST_FORMAT, "figures": self.entries}, indent=1, sort_keys=True
            ),
        )
