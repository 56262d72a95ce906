"""Progress on a terminal and in a log (testbed.progress): no carriage return in a stream that is
not a terminal (a ``tox -e regress`` log held 175 redraws on one line), a few summary lines
there, and the unit named is the one running, not the last that finished (the main job's bar
showed a finished comparison for 12 minutes while another claim ran)."""

import io
import time

from testbed import progress as progress_module
from testbed.progress import Progress
from testbed.progress import duration_text
from testbed_app.cli import main
from tests._cli_runs import check_argv


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_few_lines_and_no_carriage_return():
    log = io.StringIO()
    with Progress(
        total=100, desc="claims", unit="claim", stream=log, names=[f"c{i}" for i in range(100)]
    ) as bar:
        for i in range(100):
            bar.finish(f"c{i}")
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    # the start, one per tenth done (the tenth that ends the work is the last line), the end
    assert len(lines) == 11, lines
    assert lines[0].startswith("claims: 0/100 claim(s) done") and "running: c0 for" in lines[0]
    assert lines[1].startswith("claims: 10/100") and "running: c10 for" in lines[1]
    assert lines[-1].startswith("claims: 100/100 claim(s) done in ")


def test_a_terminal_gets_the_live_bar_naming_the_running_unit():
    screen = Terminal()
    with Progress(
        total=3, desc="claims", unit="claim", stream=screen, names=["first", "second", "third"]
    ) as bar:
        bar.finish("first")
        assert bar.postfix().startswith("running: second for ")
        bar.finish("second")
    text = screen.getvalue()
    assert "\r" in text  # redrawn in place, as before
    # drawn at most every 0.1 s (tqdm's mininterval): the first state names the first unit
    assert "running: first for" in text and "2/3" in text


def test_the_oldest_unfinished_unit_is_named_when_units_finish_out_of_order():
    with Progress(total=3, desc="runs", unit="run", enabled=False, names=["a", "b", "c"]) as bar:
        bar.finish("b")  # another worker's unit
        assert bar.postfix().startswith("running: a for ")
        bar.finish("a")
        assert bar.postfix().startswith("running: c for ")
        bar.set_postfix_str("step 3")
        assert bar.postfix().endswith("; step 3")


def test_a_long_silence_in_a_log_gets_a_line_naming_the_running_unit(monkeypatch):
    monkeypatch.setattr(progress_module, "TICK_SECONDS", 0.01)
    log = io.StringIO()
    bar = Progress(
        total=2,
        desc="claims",
        unit="claim",
        stream=log,
        names=["slow", "next"],
        silent_seconds=0.05,
    )
    try:
        for _ in range(200):  # at most 2 s; a line comes after 0.05 s
            if len(log.getvalue().splitlines()) >= 2:
                break
            time.sleep(0.01)
    finally:
        bar.close()
    lines = log.getvalue().splitlines()
    assert len(lines) >= 3 and "running: slow for" in lines[1], lines


def test_disabled_writes_nothing():
    log = io.StringIO()
    with Progress(total=2, desc="claims", unit="claim", stream=log, enabled=False) as bar:
        bar.update(2)
    assert log.getvalue() == ""


def test_duration_text():
    assert [duration_text(s) for s in (0, 42, 192, 3900)] == ["0s", "42s", "3m12s", "1h05m"]


def test_check_into_a_log_has_no_carriage_return_and_names_the_running_claim(tmp_path, capsys):
    """`testbed check` with standard error not a terminal (pytest's capture, as a tox log)."""
    first, second = "classical.cg.exact_after_dim_y", "classical.itd.error_identity"
    assert main(check_argv(tmp_path, [first, second], "--profile", "fast", "--claims-only")) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [line for line in err.splitlines() if line.startswith("claims: ")]
    assert len(lines) == 3, err
    assert f"running: {first} for " in lines[0]
    # after the first finished, the second is named: the one running, not the one finished
    assert lines[1].startswith("claims: 1/2") and f"running: {second} for " in lines[1]
    assert lines[2].startswith("claims: 2/2 claim(s) done in ")
