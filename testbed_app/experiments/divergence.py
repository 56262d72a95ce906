"""When an experiment's run counts as diverged: one home for the tests and their thresholds.

The closed-form estimators and the algorithms' iterates already stop a run whose iterates are no
longer finite or have grown :data:`~testbed.estimators.validation.GROWTH_FACTOR`-fold. That
watches the outer iterate only: FedNest on a digits MLP at outer step 500 drives the test loss
1.1e6 -> 1.5e12 -> 3.8e17 with the accuracy at chance (0.10) while its iterate stays finite, so
that watch alone records the run as completed (and a replication row as "10% reached after 5
rounds"); a TF32 refinement of the CNN influence model ends at ``||grad G|| = 4793`` from 0.433
just as silently. So the runner and the phases inside a long step also watch what they measure:

- :class:`MetricsWatch` (every run, on its metrics rows): a loss column (``*loss``) above
  :data:`LOSS_GROWTH` times ``max(1, |its value at the start|)`` (the experiment's
  ``initial_metrics`` where it has them, else its first measured value); a test accuracy
  (``test_accuracy``, ``*_test_accuracy``) that falls to chance after it was above
  (:func:`accuracy_collapse`).
- :func:`gradient_growth` (a descent phase: SGP training, refinement, each retraining): the
  gradient norm at the phase's end above :data:`GRADIENT_GROWTH` times its norm at the phase's
  start, or not finite.

Each returns the reason with the figures (``"test_loss = 1.5e+12 is above 1000 x max(1,
|2.3|) ..."``); the runner stops the run as ``"diverged at step k: <reason>"``, writes no
checkpoint of that state and the replication record gives no number for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from collections.abc import Mapping

#: A loss this many times ``max(1, |its value at the start|)`` counts as diverged. Why 1e3: the
#: workloads' losses are mean cross-entropies and their regularised forms, about ln 10 = 2.3 at
#: the start; a mean cross-entropy of 2300 needs logit gaps of thousands on average, which no
#: training passes through (the shipped configs' losses fall from the start), while the
#: diverging FedNest run above passes 1.1e6 after one step.
LOSS_GROWTH = 1e3
#: The gradient norm at the end of a descent phase this many times its norm at the start counts
#: as diverged. Why 100: the phases run gradient descent or Nesterov's method at 1/lambda_max,
#: below their stable bound, and end near a stationary point (the CNN's refinement: 0.43 ->
#: 2.5e-3; its retrainings end at or below 2.4e-3 from about 3e-3); a transient overshoot of
#: the momentum method is over by a phase's end, and the diverging TF32 refinement above grows
#: 1.1e4x.
GRADIENT_GROWTH = 100.0
#: Accuracy collapse: a test accuracy that was at least chance + ABOVE * (1 - chance) (halfway
#: from chance to perfect) and is now at most chance + AT_CHANCE * (1 - chance) (with 10
#: classes: from >= 0.55 down to <= 0.19). Why: a diverged classifier predicts one class, at the
#: frequency of that class (~0.10 on digits); a run that had learned half the way does not fall
#: back to that by noise.
ABOVE, AT_CHANCE = 0.5, 0.1


class Diverged(Exception):  # noqa: N818 - read as "the run diverged: <reason>"
    """Raised by an experiment's step when a phase inside it diverged (the message is the
    reason with its figures); the runner records ``"diverged at step k: <reason>"`` and writes
    no metrics row for that step."""


def loss_growth(name: str, value: float, start: float) -> str | None:
    """Why ``value`` of loss ``name`` counts as diverged against its ``start``, or None."""
    if not math.isfinite(start):
        return None
    limit = LOSS_GROWTH * max(1.0, abs(start))
    if value > limit:
        return (
            f"{name} = {value:.3g} is above {LOSS_GROWTH:g} x max(1, |{start:.3g}|) = "
            f"{limit:.3g} (its value at the start)"
        )
    return None


def accuracy_collapse(name: str, value: float, best: float, chance: float) -> str | None:
    """Why accuracy ``value`` (best so far ``best``) counts as a fall to ``chance``, or None."""
    above, at_chance = chance + ABOVE * (1.0 - chance), chance + AT_CHANCE * (1.0 - chance)
    if best >= above and value <= at_chance:
        return (
            f"{name} fell to {value:.4g} (chance {chance:.3g}; at most {at_chance:.3g} "
            f"counts as chance) after it was {best:.4g} (at least {above:.3g})"
        )
    return None


def gradient_growth(phase: str, start: float, end: float) -> str | None:
    """Why a descent ``phase`` whose gradient norm went from ``start`` to ``end`` counts as
    diverged, or None."""
    if not math.isfinite(end):
        return f"{phase}: the gradient norm is not finite at its end (it started at {start:.3g})"
    if math.isfinite(start) and end > GRADIENT_GROWTH * start:
        return (
            f"{phase}: ||grad|| = {end:.4g} at its end, {end / start:.3g}x its {start:.4g} "
            f"at its start (more than {GRADIENT_GROWTH:g}x)"
        )
    return None


def _is_accuracy(key: str) -> bool:
    return key == "test_accuracy" or key.endswith("_test_accuracy")


class MetricsWatch:
    """The row tests of the module docstring over a run's metrics rows.

    Args:
        chance: the accuracy of a constant prediction (``1 / n_classes``), or None (no
            accuracy test).
        initial: metrics at the starting point (before step 1), the losses' reference where
            given; else each loss's first finite value in the rows.
        rows: the rows already written (a resumed run), so the decisions do not depend on
            where a run was interrupted.
    """

    def __init__(
        self,
        chance: float | None,
        initial: Mapping[str, float] | None = None,
        rows: Iterable[Mapping[str, float]] = (),
    ) -> None:
        self.chance = chance
        self.start: dict[str, float] = {
            k: float(v)
            for k, v in (initial or {}).items()
            if k.endswith("loss") and math.isfinite(float(v))
        }
        self.best: dict[str, float] = {}
        for row in rows:
            self._remember(row)

    def _remember(self, row: Mapping[str, float]) -> None:
        for key, value in row.items():
            if not math.isfinite(value):
                continue
            if key.endswith("loss"):
                self.start.setdefault(key, float(value))
            elif _is_accuracy(key):
                self.best[key] = max(self.best.get(key, -math.inf), float(value))

    def update(self, row: Mapping[str, float]) -> str | None:
        """Test ``row`` (the newest step's); why it counts as diverged, or None."""
        for key, value in row.items():
            if key.endswith("loss") and key in self.start and math.isfinite(value):
                reason = loss_growth(key, float(value), self.start[key])
                if reason:
                    return reason
            if (
                self.chance is not None
                and _is_accuracy(key)
                and math.isfinite(value)
                and key in self.best
            ):
                reason = accuracy_collapse(key, float(value), self.best[key], self.chance)
                if reason:
                    return reason
        self._remember(row)
        return None


__all__ = [
    "ABOVE",
    "AT_CHANCE",
    "GRADIENT_GROWTH",
    "LOSS_GROWTH",
    "Diverged",
    "MetricsWatch",
    "accuracy_collapse",
    "gradient_growth",
    "loss_growth",
]
