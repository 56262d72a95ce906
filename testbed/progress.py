"""Progress of a long command: a live bar on a terminal, a few summary lines in a log.

tqdm redraws its bar with a carriage return; into a stream that is not a terminal (a CI log, a
tox log, ``2> file``) every redraw stays, and one line of a ``tox -e regress`` log held 175 of
them. :class:`Progress` therefore draws tqdm's bar only when its stream is a terminal
(``isatty()``); elsewhere it writes whole lines, each ending in a newline and none holding a
carriage return:

- one when the work starts, one each time another tenth of it is done (about ten in all), one
  when nothing was written for :data:`SILENT_SECONDS` (a unit of work that runs for a long time
  still shows in the log, by name), and one at the end with the time it took.

Both name the work that is running, with how long it has been running, not the last that
finished: the caller says in which order the units start (``names``, or :meth:`Progress.queue`)
and which one finished (:meth:`Progress.finish`). Executors start units in the order they are
given (one at a time in this process, or as workers free up), so the oldest unfinished unit is
running; with several workers others run beside it, and its time counts from when it became
the oldest.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import IO
from typing import Any
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")

#: In a log, a line after this many seconds without one (a long claim shows by name).
SILENT_SECONDS = 300.0
#: How often the live bar's running time is redrawn on a terminal (seconds).
TICK_SECONDS = 1.0


def is_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is a terminal (where a carriage return redraws a line)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def duration_text(seconds: float) -> str:
    """``42s``, ``3m12s``, ``1h05m``: a duration as a person reads it."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Progress over ``total`` units (``None``: not known in advance), named ``desc``.

    Args:
        iterable: iterate over it through the progress (each item is one unit done).
        total, initial: the units in all, and those already done (resumed work).
        desc, unit: the name of the work and of one unit ("claims", "claim").
        enabled: ``False`` writes nothing (``--quiet``).
        stream: where to write (default ``sys.stderr``); a terminal gets the live bar.
        names: the units to run, in the order they start (the bar names the one running).
        silent_seconds: in a log, the longest stretch without a line.
    """

    def __init__(
        self,
        iterable: Iterable[T] | None = None,
        *,
        total: int | None = None,
        desc: str,
        unit: str,
        initial: int = 0,
        enabled: bool = True,
        stream: IO[str] | None = None,
        names: Sequence[str] = (),
        silent_seconds: float = SILENT_SECONDS,
    ) -> None:
        self.iterable = iterable
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.n = initial
        self.desc, self.unit = desc, unit
        self.enabled = enabled
        self.live = enabled and is_terminal(self.stream)
        self.silent_seconds = silent_seconds
        self.note = ""
        self._started = time.monotonic()
        self._queue = list(names)  # units not finished, in the order they start
        self._head_since = self._started  # when the oldest unfinished unit became the oldest
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._bar = tqdm(
            total=total,
            initial=initial,
            desc=desc,
            unit=unit,
            file=self.stream,
            disable=not self.live,
            postfix=self.postfix() or None,
        )
        self._last_line = -1.0
        self._tenths = self._tenth()
        if enabled and not self._finished():
            if not self.live:
                self._line()
            threading.Thread(target=self._tick, name="testbed-progress", daemon=True).start()

    # ------------------------------------------------------------------ what the caller says
    def queue(self, names: Sequence[str]) -> None:
        """The units that will run, in the order they start."""
        with self._lock:
            if not self._queue:
                self._head_since = time.monotonic()
            self._queue.extend(names)
        self._show()

    def finish(self, name: str) -> None:
        """Unit ``name`` finished: one unit done."""
        with self._lock:
            if name in self._queue:
                if self._queue[0] == name:
                    self._head_since = time.monotonic()
                self._queue.remove(name)
        self.update(1)

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        with self._lock:
            self.n += n
        if self.live:
            self._bar.set_postfix_str(self.postfix(), refresh=False)
            self._bar.update(n)
        elif self.enabled:
            tenths = self._tenth()
            if tenths > self._tenths and not self._finished():
                self._line()
            self._tenths = tenths

    def set_postfix_str(self, note: str, refresh: bool = True) -> None:
        """A note of the caller's after the running unit (a step's rounds and accuracy)."""
        with self._lock:
            self.note = note
        if refresh:
            self._show()

    def close(self) -> None:
        """The end: the bar's last state, or the last line with the time it took."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self.live:
            with self._lock:
                self._queue.clear()
            self._bar.set_postfix_str(self.note, refresh=False)
        elif self.enabled:
            self._line(done=True)
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("Progress: nothing to iterate over")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    # ------------------------------------------------------------------ what it shows
    def postfix(self) -> str:
        """``running: NAME for 3m12s`` (the oldest unfinished unit) and the caller's note."""
        with self._lock:
            parts = []
            if self._queue:
                since = duration_text(time.monotonic() - self._head_since)
                parts.append(f"running: {self._queue[0]} for {since}")
            if self.note:
                parts.append(self.note)
            return "; ".join(parts)

    def line(self, done: bool = False) -> str:
        """One summary line: units done, time elapsed, what is running."""
        with self._lock:
            count = f"{self.n}/{self.total}" if self.total is not None else str(self.n)
            elapsed = duration_text(time.monotonic() - self._started)
            if done:
                return f"{self.desc}: {count} {self.unit}(s) done in {elapsed}" + (
                    f"; {self.note}" if self.note else ""
                )
            postfix = self.postfix()
            return f"{self.desc}: {count} {self.unit}(s) done, {elapsed} elapsed" + (
                f"; {postfix}" if postfix else ""
            )

    def _line(self, done: bool = False) -> None:
        self._last_line = time.monotonic()
        print(self.line(done), file=self.stream, flush=True)

    def _show(self) -> None:
        if self.live and not self._closed.is_set():
            self._bar.set_postfix_str(self.postfix(), refresh=True)

    def _tenth(self) -> int:
        if not self.total:
            return 0
        return int(10 * self.n / self.total)

    def _finished(self) -> bool:
        return self.total is not None and self.n >= self.total

    def _tick(self) -> None:
        """Redraw the live bar's running time each second; in a log, a line after a long
        silence."""
        while not self._closed.wait(TICK_SECONDS):
            if self.live:
                self._show()
            elif time.monotonic() - self._last_line >= self.silent_seconds:
                self._line()


__all__ = ["SILENT_SECONDS", "Progress", "duration_text", "is_terminal"]
