"""What every benchmark shares: timing, the machine description and the results file.

A benchmark module defines ``NAME``, ``DESCRIPTION`` (the first paragraph of its docstring,
:func:`description`) and ``measure(quick: bool, device: str) -> (rows, targets)``;
:func:`run_benchmark` adds the machine and writes ``<out>/<NAME>.json`` in the
:data:`results_format.BENCH_SCHEMA` form, which the report renders. Timings are wall-clock
medians over repeats after warm-up calls, taken by ``torch.utils.benchmark`` (:func:`time_call`:
its ``Timer``; :func:`interleaved`: its clock); they are measurements of this machine at this
moment (the load average is recorded beside them), never asserted by tests.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import platform
import statistics
import sys
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import Generic
from typing import TypeVar

import torch
import torch.utils.benchmark as benchmark

from results_format import BENCH_SCHEMA
from results_format.layout import BENCH
from results_format.provenance import package_versions
from results_format.resume import write_json
from testbed.precision import precision_record
from testbed.precision import set_precision

Row = dict[str, float | int | str | bool]
Target = dict[str, float | str | bool]
DIRECTIONS = ("at_least", "at_most")
T = TypeVar("T")

#: Where ``tox -e bench`` and ``benchmarks/run.py`` write by default (the report reads it).
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "results" / BENCH


# ------------------------------------------------------------------------------- settings


@dataclasses.dataclass(frozen=True)
class Sized(Generic[T]):
    """A benchmark setting: the value measured, and the smaller one of ``--quick`` (a smoke
    test of the script, not a measurement); ``setting(quick)`` is the one to use."""

    full: T
    quick: T

    def __call__(self, quick: bool) -> T:
        return self.quick if quick else self.full


def description(docstring: str | None) -> str:
    """The first paragraph of a benchmark module's docstring on one line, without its closing
    full stop: the description its results file records and its command line shows."""
    if not docstring:
        raise ValueError("a benchmark module states what it measures in its docstring")
    return " ".join(docstring.strip().split("\n\n")[0].split()).removesuffix(".")


# ------------------------------------------------------------------------------- timing


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call: median and minimum over the timed calls (``repeats`` of them), and the
    last call's result."""

    median: float
    minimum: float
    repeats: int
    result: Any = dataclasses.field(default=None, compare=False, repr=False)


def devices(requested: str | None = None) -> list[str]:
    """``["cpu"]`` plus ``"cuda"`` when torch sees a GPU (or just ``requested``)."""
    if requested is not None:
        if requested == "cuda" and not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA GPU on this machine")
        return [requested]
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Torch's default dtype set to ``dtype`` inside the block, restored after it."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class _Kept:
    """``fn`` as a statement for :class:`~torch.utils.benchmark.Timer` that keeps its last
    result (the benchmarks compare the timed sides' results)."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.result: object = None

    def __call__(self) -> None:
        self.result = self.fn()


def time_call(fn: Callable[[], object], *, min_run_time: float) -> Timing:
    """Seconds per call of ``fn()`` by :meth:`torch.utils.benchmark.Timer.blocked_autorange`.

    The Timer first calls ``fn`` (warm-up: allocator growth, CUDA kernel loading, lazy imports)
    until a block of calls is long enough for its clock's overhead to be below 1e-4 of it (one
    call when a call takes longer than ``min_run_time``), then times blocks of that many calls
    until ``min_run_time`` seconds have passed (at least one block), synchronising the GPU, if
    any, at each reading of the clock; the median over blocks is robust to a stray slow call on
    a shared machine. Torch's CPU threads stay as set (:func:`run_benchmark`), not the Timer's
    default of one.
    """
    kept = _Kept(fn)
    measurement = benchmark.Timer(
        "call()", globals={"call": kept}, num_threads=torch.get_num_threads()
    ).blocked_autorange(min_run_time=min_run_time)
    return Timing(
        measurement.median,
        min(measurement.times),
        measurement.number_per_run * len(measurement.raw_times),
        kept.result,
    )


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    """Seconds of one call of ``fn()`` on torch's benchmark clock (it synchronises the GPU, if
    any, before each reading), and its result."""
    start = benchmark.timer()
    result = fn()
    return benchmark.timer() - start, result


def interleaved(
    sides: dict[str, Callable[[], object]],
    *,
    quick: bool = False,
    budget_s: float = 20.0,
) -> dict[str, Timing]:
    """Time several sides of a comparison in the same run, interleaved.

    One warm-up call of every side (also a first estimate of its time), then ``repeats`` rounds
    in which every side runs once, in the same order: load that drifts during the measurement
    hits all sides alike, so their ratios are the figures to quote. ``repeats`` is 7 when the
    slowest side takes under 0.2 s, 3 under ``budget_s / 3`` and 1 beyond (a single call of a
    minute-long side is a measurement; its one-off costs are negligible); 1 in ``quick`` mode.
    (:func:`time_call`'s Timer times one statement at a time, so it cannot interleave.)
    """
    slowest = max(_timed(fn)[0] for fn in sides.values())
    repeats = 1 if quick else 7 if slowest < 0.2 else 3 if slowest < budget_s / 3 else 1
    samples: dict[str, list[float]] = {name: [] for name in sides}
    results: dict[str, object] = {}
    for _ in range(repeats):
        for name, fn in sides.items():
            seconds, results[name] = _timed(fn)
            samples[name].append(seconds)
    return {
        name: Timing(statistics.median(values), min(values), repeats, results[name])
        for name, values in samples.items()
    }


def speedup(slow: Timing, fast: Timing) -> float:
    """``slow / fast`` of the medians: how many times faster the fast side is."""
    return slow.median / fast.median


def progress(message: str) -> None:
    """One line on stderr at once (a long benchmark's log shows each point as it is measured,
    and keeps it when a time limit stops the run before the results file is written)."""
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- machine


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> float:
    """The 1-minute load average (NaN where the platform has none)."""
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return math.nan


def machine(device_list: Sequence[str]) -> dict[str, Any]:
    """The ``machine`` block: CPU, cores, devices timed, torch, threads, the precision policy
    (:mod:`testbed.precision`: ``tf32`` and the flags as torch reports them) and load."""
    timed = [f"cuda ({torch.cuda.get_device_name(0)})" if d == "cuda" else d for d in device_list]
    if not torch.cuda.is_available():
        timed.append("no CUDA GPU available")
    versions = package_versions(("torch",))
    precision = precision_record()
    return {
        "cpu": _cpu_name(),
        "cores": int(os.cpu_count() or 1),
        "device": ", ".join(timed),
        "torch": versions["torch"],
        "torch_threads": torch.get_num_threads(),
        "python": versions["python"],
        "tf32": bool(precision["tf32"]),
        "precision": ", ".join(f"{k}={v}" for k, v in precision.items() if k != "tf32"),
    }


# ------------------------------------------------------------------------------- targets


def target(name: str, measured: float, bound: float, direction: str) -> Target:
    """One target row: ``met`` is ``measured >= bound`` (at_least) or ``<=`` (at_most)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    met = measured >= bound if direction == "at_least" else measured <= bound
    return {
        "name": name,
        "measured": float(measured),
        "target": float(bound),
        "direction": direction,
        "met": bool(met),
    }


# ------------------------------------------------------------------------------- the file


def validate(payload: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless ``payload`` has the ``BENCH_SCHEMA`` form.

    Keys exactly ``BENCH_SCHEMA``; ``machine`` with ``cpu``, ``cores``, ``device``, ``torch``;
    ``rows`` a non-empty list of flat dicts of scalars; each target with ``name``, numeric
    ``measured`` and ``target``, a known ``direction`` and a ``met`` that agrees with them.
    """
    if set(payload) != set(BENCH_SCHEMA):
        raise ValueError(f"keys {sorted(payload)} differ from BENCH_SCHEMA {sorted(BENCH_SCHEMA)}")
    for key in ("benchmark", "description"):
        if not isinstance(payload[key], str) or not payload[key]:
            raise ValueError(f"{key!r} must be a non-empty string")
    missing = {"cpu", "cores", "device", "torch"} - set(payload["machine"])
    if missing:
        raise ValueError(f"machine lacks {sorted(missing)}")
    rows = payload["rows"]
    if not isinstance(rows, list) or not rows:
        raise ValueError("rows must be a non-empty list")
    for row in rows:
        bad = {k: v for k, v in row.items() if not isinstance(v, (int, float, str, bool))}
        if bad:
            raise ValueError(f"row values must be scalars, got {bad}")
    for entry in payload["targets"]:
        if set(entry) != {"name", "measured", "target", "direction", "met"}:
            raise ValueError(f"target {entry} must have name, measured, target, direction, met")
        if entry["direction"] not in DIRECTIONS:
            raise ValueError(f"target {entry['name']!r}: unknown direction {entry['direction']!r}")
        expected = target(entry["name"], entry["measured"], entry["target"], entry["direction"])
        if entry["met"] != expected["met"]:
            raise ValueError(f"target {entry['name']!r}: 'met' disagrees with its numbers")


def write(out_dir: Path, payload: dict[str, Any]) -> Path:
    """Validate and write ``<out_dir>/<benchmark>.json`` atomically (temporary file, rename)."""
    validate(payload)
    path = out_dir / f"{payload['benchmark']}.json"
    write_json(path, payload, indent=2, newline=True)
    return path


Measure = Callable[[bool, list[str]], tuple[list[Row], list[Target]]]


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a benchmark runs: the command line's options (:func:`add_arguments`).

    ``quick``: the ``--quick`` sizes (:class:`Sized`); ``out``: the folder of its results file;
    ``device``: the one device timed (``None``: the CPU, and CUDA when torch sees a GPU).
    ``threads``: torch's intra-op CPU threads during the measurement (restored afterwards).
    Why 1 by default: on a shared machine torch's parallel CPU kernels stall behind other
    processes (a 100-row gather took 28 ms with 2 threads at load 9 on 2 cores, 21 us with 1),
    so single-threaded timings are the ones that compare across runs; both sides of a ratio
    run with the same setting. ``tf32``: the precision policy (:func:`testbed.precision.
    set_precision`; off unless ``--tf32`` asks), recorded in the file's ``machine`` block.
    """

    quick: bool
    out: Path = DEFAULT_OUT
    device: str | None = None
    threads: int = 1
    tf32: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        """The settings the options of :func:`add_arguments` parsed into ``args`` ask for."""
        return cls(args.quick, args.out, args.device, args.threads, args.tf32)


def run_benchmark(name: str, description: str, measure: Measure, settings: Settings) -> Path:
    """Measure on the available devices, record the machine and its load, write the file.

    The default dtype is float64 during the measurement, the testbed's convention (the root
    conftest sets it for the tests; the workloads ask for float32 explicitly); torch's CPU
    threads and the precision policy are those of ``settings``.
    """
    set_precision(settings.tf32)
    if settings.threads < 1:
        raise ValueError(f"threads must be >= 1, got {settings.threads}")
    device_list = devices(settings.device)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        with default_dtype(torch.float64):
            load_before = load_average()
            rows, targets = measure(settings.quick, device_list)
            info = machine(device_list)
            info["load_average_1min"] = max(load_before, load_average())
            info["quick"] = settings.quick
    finally:
        torch.set_num_threads(previous_threads)
    return write(
        settings.out,
        {
            "benchmark": name,
            "description": description,
            "machine": info,
            "rows": rows,
            "targets": targets,
        },
    )


def cli(name: str, description: str, measure: Measure, argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/<name>.py [--quick] [--out DIR] [--device cpu|cuda] [--threads N]``."""
    parser = argparse.ArgumentParser(prog=name, description=description)
    add_arguments(parser)
    args = parser.parse_args(argv)
    path = run_benchmark(name, description, measure, Settings.from_args(args))
    print(f"wrote {path}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smallest sizes and one repeat: a smoke test, not a measurement",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder for <benchmark>.json (default {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="time only this device (default: cpu, and cuda when available)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads while timing (default 1; see run_benchmark)",
    )
    parser.add_argument(
        "--tf32",
        action="store_true",
        help="allow TF32 on a GPU (default: off, testbed.precision's policy)",
    )
