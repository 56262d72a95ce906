"""The work inside a long step: progress, a checkpoint after each finished piece, and what an
interruption leaves.

Most experiments' steps take a fraction of a second. The HGP influence experiment's first step
trains a model by SGP, refines it for up to thousands of full-batch steps and runs HGP; each
later step is several retrainings: on the CNN a step takes minutes on a CPU, so a progress bar
at ``0/5 step`` said nothing for minutes, and Ctrl-C before the first step's end lost it all.
Such an experiment has an ``on_phase`` attribute; the runner sets it to a :class:`StepPieces`,
which the experiment calls with ``(description, finished)``:

- when a piece begins (``finished=False``): the progress bar shows ``step k: <description>``;
- when a piece is finished (``finished=True``, its result now in the experiment's
  ``state_dict()``, with ``phase`` naming it): the same, and a checkpoint at step ``k - 1``
  holding the finished pieces, so a rerun resumes from the next piece and says so
  ("resuming from step k - 1 (phase: step k, ...)").

:meth:`StepPieces.interrupted` words what Ctrl-C leaves: which step was under way, and what the
last checkpoint holds (a rerun resumes there; ``metrics.csv`` rows after it are recomputed), or
that nothing is checkpointed yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class StepPieces:
    """The runner's ``on_phase`` hook (module docstring).

    Args:
        bar: the run's progress (:class:`testbed.progress.Progress`, ``set_postfix_str``).
        checkpoint: ``checkpoint(steps_done)`` writes ``checkpoint.pt`` of the experiment as
            it is now.
        saved: what the checkpoint on disk holds when the run starts (a resumed run), or None.
    """

    def __init__(
        self, bar: Any, checkpoint: Callable[[int], None], saved: str | None = None
    ) -> None:
        self.bar = bar
        self.checkpoint = checkpoint
        self.saved = saved
        self.step = 0  # the step under way
        self.doing: str | None = None  # the piece under way

    def __call__(self, description: str, finished: bool) -> None:
        self.bar.set_postfix_str(f"step {self.step}: {description}")
        if finished:
            self.checkpoint(self.step - 1)
            self.saved = f"step {self.step - 1} and, of step {self.step}, {description}"
            self.doing = None
        else:
            self.doing = description

    def step_saved(self, step: int) -> None:
        """The runner wrote the checkpoint of a finished step."""
        self.saved, self.doing = f"step {step}", None

    def interrupted(self) -> str:
        """What Ctrl-C leaves (module docstring)."""
        during = f"interrupted during step {self.step}" + (f" ({self.doing})" if self.doing else "")
        if self.saved is None:
            return f"{during}; nothing of this run is checkpointed yet: a rerun starts from step 0"
        return (
            f"{during}; the checkpoint holds {self.saved}: a rerun resumes there "
            "(metrics.csv rows after it are recomputed)"
        )


__all__ = ["StepPieces"]
