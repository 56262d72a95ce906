"""Unknown names: the one "did you mean" of the registry, the claims and the configs.

:func:`did_you_mean` turns a name that is not registered into the closest known ones
(:func:`difflib.get_close_matches`, then names that contain it), so an error says what the user
probably meant in one line instead of listing a hundred names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How similar a known name must be to be suggested (difflib's ratio, 0..1). Why 0.6: difflib's
#: own default; it catches one or two typos in a 25-character claim id ("fednest.thm31.k_rate"
#: against "fednest.thm31.k_rate_bilevel" scores 0.83) and leaves unrelated names out.
CUTOFF = 0.6

#: The shortest word looked up as a part of the known names.
MIN_PART = 4


#: The most characters of an unknown name an error line echoes.
SHOWN = 80


def shown(word: object) -> str:
    """``repr(word)``, cut to :data:`SHOWN` characters with its length when longer: an error
    echoed a 100,000-character ``--claim`` in a 100 kB line."""
    text = repr(word)
    if len(text) <= SHOWN:
        return text
    length = f" ({len(word):,} characters)" if isinstance(word, str) else ""
    return f"{text[:SHOWN]}...{length}"


def close_names(word: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` known names closest to ``word``: difflib's close matches first, then names
    that contain ``word`` (a prefix such as ``fednest.lemma22``; words of at least
    :data:`MIN_PART` characters, shorter ones are inside too many names), in sorted order."""
    names = sorted(set(known))
    if len(word) > 4 * max(map(len, names), default=0):
        return []  # far longer than every known name: none is close
    close = difflib.get_close_matches(word, names, n=n, cutoff=CUTOFF)
    if len(word) >= MIN_PART:
        close += [name for name in names if word in name and name not in close]
    return close[:n]


def did_you_mean(word: str, known: Iterable[str], n: int = 3) -> str:
    """`` (did you mean 'a', 'b' or 'c'?)``, or ``""`` when no known name is close."""
    close = [repr(name) for name in close_names(word, known, n)]
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f" (did you mean {listed}?)"
