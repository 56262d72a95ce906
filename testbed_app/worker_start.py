"""The start of a local worker process (``--jobs N``), kept free of the testbed's imports.

A worker first watches its driver, then imports what its entry names: the entry (the driver's
settings to put in force, ``testbed_app.executors``) travels pickled and is unpickled only once
the watch runs, since importing torch and the claims takes seconds (15 s at load 19), and a
driver killed meanwhile (SIGKILL, an out-of-memory kill) must not leave its workers running.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time

#: How often a local worker checks that its driver is alive (seconds): a worker of a killed
#: driver ends within this time (plus the task's current instruction), not when its task ends.
PARENT_POLL_SECONDS = 0.5


def exit_with_parent(parent: int) -> None:
    """End this worker as soon as ``parent`` (the driver) is gone: a killed driver cannot stop
    its pool, and a worker left running would finish its task for nobody and keep the resource
    tracker alive. Reparented means the driver died."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="testbed-driver-watch", daemon=True).start()


def start_local_worker(entry: bytes, parent: int | None = None) -> None:
    """A local worker process: Ctrl-C (sent to the whole process group) ends it quietly, the
    driver reporting the interruption once; it ends when its driver ``parent`` is gone
    (:func:`exit_with_parent`); then it calls its pickled ``entry`` (no arguments)."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    if parent is not None:
        exit_with_parent(parent)
    pickle.loads(entry)()


__all__ = ["PARENT_POLL_SECONDS", "exit_with_parent", "start_local_worker"]
