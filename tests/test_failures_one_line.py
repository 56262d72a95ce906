"""Failures give one line, exit 2, and leave everything whole (issue 23): a full disk, a
read-only folder, ``--results``/``--out`` naming a file, a link loop, a closed pipe, plugins and
verify targets that fail at import however they fail, ``regress --against`` alone, corrupt
data files, and a killed ``--jobs 2`` driver whose workers must not outlive it."""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from results_format import writing
from testbed_app.cli import main
from tests._cli_runs import run_argv
from tests.test_experiments import write

CLAIM = "fednest.lemma22.paper_constant"  # fails as stated in a fraction of a second
REPO = Path(__file__).resolve().parents[1]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("testbed: error: ") and err.count("\n") == 0, err
    assert "Traceback" not in err
    return err


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("checked")
    assert main(["check", "--claim", CLAIM, "--results", str(results), "--quiet"]) == 0
    return results


# ------------------------------------------------------------------------------ arguments


def test_results_or_out_naming_a_file_is_one_line(tmp_path, capsys, checked):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    config = write(tmp_path, {"run.steps": 1})
    for argv in (
        ["check", "--claim", CLAIM, "--results", str(afile)],
        ["report", "--results", str(afile), "--out", str(tmp_path / "o")],
        ["report", "--results", str(checked), "--out", str(afile)],
        ["verify", "aid-cg", "--claim", "classical.cg.exact_after_dim_y", "--results", str(afile)],
        [
            "calibrate",
            "--claim",
            "fednest.lemma22.abs_error_per_sample",
            "--seeds",
            "1",
            "--results",
            str(afile),
        ],
        ["run", str(config), "--results", str(afile)],
    ):
        assert main([*argv, "--quiet"]) == 2, argv
        err = _one_line(capsys)
        assert f"{afile} is a file, not a folder" in err, err
    assert afile.read_text() == "mine"


def test_a_symbolic_link_loop_in_the_results_folder_is_one_line(tmp_path, capsys, checked):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert main(["check", "--claim", CLAIM, "--results", str(loop), "--quiet"]) == 2
    assert "symbolic-link loop" in _one_line(capsys)
    results = tmp_path / "results"
    shutil.copytree(checked, results)
    shutil.rmtree(results / "claims")
    (results / "claims").symlink_to(results / "claims")
    assert main(["report", "--results", str(results), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    _one_line(capsys)
    assert main(["check", "--claim", CLAIM, "--results", str(results), "--quiet"]) == 2
    assert "claims" in _one_line(capsys)


def test_regress_against_without_estimator_is_one_line(capsys):
    assert main(["regress", "--against", "aid-cg", "--quiet"]) == 2
    assert "--against compares one entry with another" in _one_line(capsys)


def test_list_verbose_into_a_closed_pipe_exits_quietly():
    """`testbed list --verbose | head -1`: no BrokenPipeError traceback."""
    command = f"set -o pipefail; {sys.executable} -m testbed_app list --verbose | head -1"
    done = subprocess.run(
        ["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.stdout == "Problems:\n"
    assert done.stderr == "" and done.returncode == 0


def test_the_last_output_meets_a_closed_pipe_inside_the_command(monkeypatch):
    """The output still buffered when a command returns is written before main returns, where
    the closed-pipe handler sees it: left to the interpreter's exit, it printed "Exception
    ignored ... BrokenPipeError" when the reader had gone by then (CI, `list --verbose | head
    -1` under load: its 63 kB fit the pipe's buffer). Deterministic here: a reader gone before
    the first byte, and an output smaller than the stream's buffer."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_end, "w"), 8192), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        assert main(["list", "--claim", "classical.gd.linear_rate"]) == 0
        stream.flush()  # what the interpreter does at exit: nothing is left to break
    finally:
        monkeypatch.undo()
        stream.close()


# ------------------------------------------------------------------------------ plugins, verify


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """A folder on sys.path holding a researcher's modules that fail at import."""
    sources = {
        "exits_at_import": "import sys\nsys.exit(7)\n",
        "exits_zero": "import sys\nsys.exit(0)\n",
        "interrupts_at_import": "raise KeyboardInterrupt\n",
        "raises_at_import": "x = 1 / 0\n",
        "bad_syntax": "def f(:\n    pass\n",
    }
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield sources
    for name in sources:
        sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("module", "says"),
    [
        ("exits_at_import", "called sys.exit(7) when imported"),
        ("interrupts_at_import", "raised KeyboardInterrupt when imported"),
        ("raises_at_import", "raised ZeroDivisionError when imported: division by zero"),
        ("bad_syntax", "has a syntax error"),
    ],
)
def test_verify_of_a_module_that_fails_at_import_is_one_line(capsys, user_modules, module, says):
    assert main(["verify", f"{module}:ENTRY", "--quiet"]) == 2
    err = _one_line(capsys)
    assert f"cannot load '{module}:ENTRY': " in err and says in err and module in err


@pytest.mark.parametrize(
    "module",
    ["exits_zero", "exits_at_import", "interrupts_at_import", "raises_at_import", "bad_syntax"],
)
def test_a_plugin_that_fails_at_import_is_left_out_with_its_reason(
    monkeypatch, capsys, user_modules, module
):
    import importlib.metadata

    from testbed import plugins
    from testbed import registry
    from theory_checks import registry as claim_registry

    entry = importlib.metadata.EntryPoint(
        name="bad", value=f"{module}:ENTRY", group="testbed.estimators"
    )
    claims = importlib.metadata.EntryPoint(
        name="bad-claims", value=f"{module}:CLAIMS", group="testbed.claims"
    )
    found = {"testbed.estimators": [entry], "testbed.claims": [claims]}
    monkeypatch.setattr(plugins, "entry_points", lambda group: found.get(group, []))
    try:
        problems = registry.refresh_plugins() + claim_registry.refresh_claim_plugins()
        assert {p.entry_point for p in problems} == {"bad", "bad-claims"}
        assert all("does not import" in p.reason for p in problems)
        assert main(["list"]) == 0  # exit 0 having listed and checked nothing, before
        out, err = capsys.readouterr()
        assert "classical.cg.exact_after_dim_y" in out and "plugin 'bad'" in err
    finally:
        monkeypatch.undo()
        registry.refresh_plugins()
        claim_registry.refresh_claim_plugins()


# a plugin module during whose import the user presses Ctrl-C (a real SIGINT to the process)
PRESSES_CTRL_C = """
import os, signal, time
os.kill(os.getpid(), signal.SIGINT)
time.sleep(5)  # the handler runs here, inside the plugin's import
ENTRY = None
"""
CTRL_C_DURING_PLUGIN_IMPORT = textwrap.dedent("""
    import importlib.metadata, sys
    sys.path.insert(0, sys.argv[1])
    from testbed import plugins
    entry = importlib.metadata.EntryPoint(name="slow", value="presses_ctrl_c:ENTRY",
                                          group="testbed.estimators")
    plugins.entry_points = lambda group: [entry] if group == "testbed.estimators" else []
    from testbed_app.cli import main
    sys.exit(main(sys.argv[2:]))
""")


@pytest.mark.parametrize(
    "argv",
    [["list"], ["verify", "presses_ctrl_c:ENTRY"]],
    ids=["plugin entry point", "verify module:object"],
)
def test_ctrl_c_while_a_plugin_imports_exits_130(tmp_path, argv):
    """Ctrl-C while a plugin imports was taken for the plugin's failure: the plugin left out,
    the command ran on and exited 0 (issue 33). A KeyboardInterrupt the plugin raises itself
    is still its failure (test_a_plugin_that_fails_at_import_is_left_out_with_its_reason)."""
    (tmp_path / "presses_ctrl_c.py").write_text(PRESSES_CTRL_C)
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_DURING_PLUGIN_IMPORT, str(tmp_path), *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 130, done.stderr
    assert "testbed: interrupted" in done.stderr and "Traceback" not in done.stderr
    assert "Problems:" not in done.stdout


# ------------------------------------------------------------------------------ data


def test_a_corrupt_mnist_gz_is_one_line(tmp_path, capsys):
    from tests._idx_files import fake_idx_set

    fake_idx_set(tmp_path / "mnist", seed=7, gz=True)
    member = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
    data = bytearray(member.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 16] = b"\xff" * 16  # a corrupt deflate stream
    member.write_bytes(bytes(data))
    with pytest.raises(Exception) as info, gzip.open(member) as handle:
        handle.read()
    assert type(info.value).__name__ in ("error", "BadGzipFile")  # zlib.error, as reported
    config = write(tmp_path, {"data": {"dataset": "mnist", "root": str(tmp_path / "mnist")}})
    assert main(["run", str(config), "--results", str(tmp_path / "r"), "--quiet"]) == 2
    err = _one_line(capsys)
    assert f"{config}: [data] root: cannot read IDX file" in err and member.name in err


def test_data_root_naming_a_file_says_it_is_a_file(tmp_path, capsys):
    afile = tmp_path / "mnist.tar"
    afile.write_bytes(b"")
    config = write(tmp_path, {"data": {"dataset": "mnist", "root": str(afile)}})
    assert main(["run", str(config), "--results", str(tmp_path / "r"), "--quiet"]) == 2
    err = _one_line(capsys)
    assert "is a file, not a folder" in err and "does not exist" not in err


# ------------------------------------------------------------------------------ a full disk


class _FullDisk(io.FileIO):
    """A file on a disk that is full: every write fails with ENOSPC."""

    def write(self, data):  # type: ignore[override]
        raise OSError(errno.ENOSPC, "No space left on device")


def _make_disk_full(monkeypatch) -> None:
    """Injected ENOSPC from here on, for every file the testbed writes whole
    (:mod:`results_format.writing`), where no tmpfs can be mounted."""
    real = writing.os

    class FullOs:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def fdopen(descriptor, mode="r", *args, **kwargs):
            return _FullDisk(descriptor, "wb", closefd=True)

    monkeypatch.setattr(writing, "os", FullOs())


@pytest.fixture
def full_disk(monkeypatch):
    _make_disk_full(monkeypatch)


def test_check_on_a_full_disk_is_one_line_and_leaves_earlier_files(
    tmp_path, capsys, checked, full_disk
):
    results = tmp_path / "results"
    shutil.copytree(checked, results)
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    assert main(["check", "--claim", CLAIM, "--results", str(results), "--quiet", "--fresh"]) == 2
    err = _one_line(capsys)
    assert "No space left on device; nothing half-written was left" in err
    assert _temporaries(results) == []
    assert all(p.read_bytes() == data for p, data in before.items())


def test_report_on_a_full_disk_is_one_line(tmp_path, capsys, checked, full_disk):
    out = tmp_path / "report"
    assert main(["report", "--results", str(checked), "--out", str(out), "--quiet"]) == 2
    assert "No space left on device" in _one_line(capsys)
    assert _temporaries(out) == []


def test_run_on_a_full_disk_is_one_line(tmp_path, capsys, monkeypatch):
    path = write(tmp_path, {"run.steps": 2, "run.checkpoint_every": 1})
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results), "--quiet", "--steps", "1"]) == 0
    folder = results / "runs" / "tiny"
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    _make_disk_full(monkeypatch)
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 2
    # the resume note, then the failure in one line
    note, error = capsys.readouterr().err.strip().split("\n")
    assert note == "tiny: resuming from step 1"
    assert error.startswith("testbed: error: ") and "No space left on device" in error
    assert _temporaries(results) == []
    for name in ("checkpoint.pt", "config.toml", "split.json"):
        assert (folder / name).read_bytes() == before[name]


DISK_SCRIPT = textwrap.dedent("""
    import json, os, subprocess, sys
    from pathlib import Path
    from testbed_app.cli import main

    mount, config = Path(sys.argv[1]), sys.argv[2]
    results, report = mount / "results", mount / "report"
    out = {}
    def fill():
        descriptor = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(descriptor, b"x" * size)
            except OSError:
                pass
        os.close(descriptor)
    def tmp_files():
        return [str(p) for p in mount.rglob("*.tmp")]
    assert main(["run", config, "--results", str(results), "--quiet", "--steps", "1"]) == 0
    assert main(["check", "--claim", sys.argv[3], "--results", str(results), "--quiet"]) == 0
    metrics = (results / "runs" / "tiny" / "metrics.csv").read_bytes()
    claim = (results / "claims" / (sys.argv[3] + ".json")).read_bytes()
    fill()
    out["run"] = main(["run", config, "--results", str(results), "--quiet"])
    out["check"] = main(["check", "--claim", sys.argv[3], "--results", str(results), "--quiet",
                         "--fresh"])
    out["report"] = main(["report", "--results", str(results), "--out", str(report),
                          "--quiet"])
    out["tmp_after_full"] = tmp_files()
    out["whole"] = ((results / "runs" / "tiny" / "metrics.csv").read_bytes() == metrics
                    and (results / "claims" / (sys.argv[3] + ".json")).read_bytes() == claim)
    os.remove(mount / "filler")
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    out["ro_run"] = main(["run", config, "--results", str(results), "--quiet"])
    out["ro_check"] = main(["check", "--claim", sys.argv[3], "--results", str(results),
                            "--quiet", "--fresh"])
    out["ro_report"] = main(["report", "--results", str(results), "--out", str(report),
                             "--quiet"])
    print("RESULT " + json.dumps(out))
""")


def test_a_real_full_and_read_only_tmpfs(tmp_path):
    """run, check and report on a tmpfs filled to the last byte, then remounted read-only:
    one line each, exit 2, no temporary file left, earlier files whole. Needs a private
    mount namespace (root, ``unshare -m``), as tests/cluster/in_loopback_namespace.sh needs
    one for the network."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0
    ):
        pytest.skip("a tmpfs of its own needs a private mount namespace (unshare -m, root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    config = write(tmp_path, {"run.steps": 2, "run.checkpoint_every": 1})
    script = tmp_path / "disk_full.py"
    script.write_text(DISK_SCRIPT)
    # Why 8 MB: room for a 1-step run, one claim's results and a report's figures, so that
    # filling it leaves every later write without space (the review used 3 MB)
    shell = (
        f"mount -t tmpfs -o size=8m tmpfs {mount} && exec {sys.executable} {script} "
        f"{mount} {config} {CLAIM}"
    )
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", shell],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stderr[-2000:]
    out = json.loads(lines[0].removeprefix("RESULT "))
    errors = [line for line in done.stderr.splitlines() if line.startswith("testbed: error")]
    assert {
        k: out[k] for k in ("run", "check", "report", "ro_run", "ro_check", "ro_report")
    } == dict.fromkeys(("run", "check", "report", "ro_run", "ro_check", "ro_report"), 2)
    assert out["tmp_after_full"] == [] and out["whole"]
    assert "Traceback" not in done.stderr and len(errors) == 6
    assert sum("No space left on device" in e for e in errors) == 3
    assert sum("Read-only file system" in e for e in errors) == 3


# ------------------------------------------------------------------------------ killed driver


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    found, frontier = set(), {pid}
    while frontier:
        parent = frontier.pop()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    child = int(entry.name)
                    if child not in found:
                        found.add(child)
                        frontier.add(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_workers_of_a_killed_jobs_driver_do_not_outlive_it(tmp_path):
    """`testbed run --jobs 2` killed (SIGKILL): its pool workers and the resource tracker end
    within seconds (they ran 45 s and more before)."""
    a = write(tmp_path, {"run.steps": 2000, "run.checkpoint_every": 1000}, name="a.toml")
    b = write(
        tmp_path, {"name": "other", "run.steps": 2000, "run.checkpoint_every": 1000}, name="b.toml"
    )
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "testbed_app",
            *run_argv(tmp_path / "results", [a, b], "--jobs", "2"),
        ],
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        children: set[int] = set()
        while time.monotonic() < deadline and len(children) < 2:  # 2 workers (a tracker)
            time.sleep(0.5)
            children = _children(driver.pid)
        assert len(children) >= 2, children
        time.sleep(5)  # the workers are inside their tasks
        children = _children(driver.pid)
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    # Why 10 s: the workers poll their parent every 0.5 s; the tracker ends once they have
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in children):
        time.sleep(0.2)
    left = [p for p in children if _alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []
