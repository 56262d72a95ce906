"""What a claim run counts as: one vocabulary for ``testbed check``, ``testbed list`` and the
report.

The testbed's own runs (origin ``built-in``; a plugin's or an integration's are counted apart
by each reader) fall into three populations, always named apart and never added together as
"claims":

- **the claims of the papers**: a paper's statement checked on the estimator it names (id
  ``<paper>.<subject>.<property>``);
- **the comparisons**: a paper's statement about two algorithms, one against the other (id
  ``comparison.<name>``; ``theory_checks.comparison``), measured on both;
- **the runs on enrolled variants**: a claim run again on a registered variant enrolled in it
  (run id ``<claim>@<estimator>``, e.g. ``classical.gd.linear_rate@aid-fp``), which tests the
  variant, not the paper.

A run is placed by its id alone, so a results file, a registry entry and a report row agree.
Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

from collections.abc import Iterable

PAPERS = "papers"
COMPARISONS = "comparisons"
VARIANTS = "variants"
#: The populations in the order every reader shows them.
POPULATIONS = (PAPERS, COMPARISONS, VARIANTS)

#: Each population's noun, singular and plural ("1 comparison", "4 comparisons").
NOUNS = {
    PAPERS: ("claim of the papers", "claims of the papers"),
    COMPARISONS: ("comparison", "comparisons"),
    VARIANTS: ("run on an enrolled variant", "runs on enrolled variants"),
}

#: The id prefix of a comparison (``theory_checks.comparison``'s claims).
COMPARISON_PREFIX = "comparison."


def population(run_id: str) -> str:
    """:data:`PAPERS`, :data:`COMPARISONS` or :data:`VARIANTS` for a claim id or a run id."""
    if "@" in run_id:
        return VARIANTS
    if run_id.startswith(COMPARISON_PREFIX):
        return COMPARISONS
    return PAPERS


def counted(n: int, which: str) -> str:
    """``"98 claims of the papers"``, ``"1 comparison"``: ``n`` members of population
    ``which``."""
    singular, plural = NOUNS[which]
    return f"{n} {singular if n == 1 else plural}"


def split(run_ids: Iterable[str]) -> dict[str, list[str]]:
    """The ids of each population, in :data:`POPULATIONS` order (every key present)."""
    out: dict[str, list[str]] = {which: [] for which in POPULATIONS}
    for run_id in run_ids:
        out[population(run_id)].append(run_id)
    return out


def counts_text(run_ids: Iterable[str]) -> str:
    """``"98 claims of the papers, 4 comparisons, 4 runs on enrolled variants"`` (a population
    without members is left out)."""
    groups = split(run_ids)
    return ", ".join(counted(len(ids), which) for which, ids in groups.items() if ids)


__all__ = [
    "COMPARISONS",
    "COMPARISON_PREFIX",
    "NOUNS",
    "PAPERS",
    "POPULATIONS",
    "VARIANTS",
    "counted",
    "counts_text",
    "population",
    "split",
]
