"""The server's wait for a round's replies (:func:`testbed_app.flower.transport.exchange`): with a
pull interval it pushes once and pulls until every reply is there (or the timeout has passed),
as ``Grid.send_and_receive`` does with its own 3 s between pulls; without one it is
``send_and_receive`` itself. A grid of this file's own, whose replies arrive over several
pulls."""

from __future__ import annotations

import types

import pytest

from tests.flower import ONLY_IN_TOX_FLOWER

pytestmark = ONLY_IN_TOX_FLOWER

from testbed_app.flower.transport import exchange  # noqa: E402


def _reply(message_id: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(metadata=types.SimpleNamespace(reply_to_message_id=message_id))


class SlowGrid:
    """Pushing ``messages`` (strings) gives them ids ``m<i>``; pull ``j`` returns the replies
    listed in ``arrivals[j]`` (after the last, none), as a SuperLink returns what came back."""

    def __init__(self, arrivals: list[list[str]]) -> None:
        self.arrivals = arrivals
        self.pushed: list[list[str]] = []
        self.pulls: list[set[str]] = []

    def push_messages(self, messages: list[str]) -> list[str]:
        self.pushed.append(list(messages))
        return [f"m{i}" for i in range(len(messages))]

    def pull_messages(self, ids: set[str]) -> list[types.SimpleNamespace]:
        self.pulls.append(set(ids))
        ready = self.arrivals[len(self.pulls) - 1] if len(self.pulls) <= len(self.arrivals) else []
        return [_reply(i) for i in ready if i in ids]

    def send_and_receive(self, messages: list[str], *, timeout: float | None = None) -> list:
        self.pushed.append(list(messages))
        return [_reply("from send_and_receive")]


def test_it_pulls_until_every_reply_is_there_and_asks_only_for_the_missing_ones():
    grid = SlowGrid([[], ["m1"], [], ["m0", "m2"], ["m0"]])
    replies = exchange(grid, ["a", "b", "c"], timeout=None, pull_interval=0.001)
    assert [r.metadata.reply_to_message_id for r in replies] == ["m1", "m0", "m2"]
    assert grid.pushed == [["a", "b", "c"]]  # pushed once
    assert grid.pulls == [{"m0", "m1", "m2"}, {"m0", "m1", "m2"}, {"m0", "m2"}, {"m0", "m2"}]


def test_a_timeout_returns_what_came_back():
    grid = SlowGrid([["m0"]])  # m1 never answers
    replies = exchange(grid, ["a", "b"], timeout=0.05, pull_interval=0.01)
    assert [r.metadata.reply_to_message_id for r in replies] == ["m0"]
    # why >= 2: at least the first pull and one after 0.01 s within the 0.05 s
    assert len(grid.pulls) >= 2 and grid.pulls[-1] == {"m1"}


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_without_a_pull_interval_it_is_grid_send_and_receive(timeout):
    grid = SlowGrid([])
    replies = exchange(grid, ["a"], timeout=timeout, pull_interval=None)
    assert [r.metadata.reply_to_message_id for r in replies] == ["from send_and_receive"]
    assert grid.pulls == []
