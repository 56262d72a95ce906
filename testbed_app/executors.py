"""Where the application's units of work run: in this process, in local processes, or on Ray.

A unit of work (a task) is a picklable callable without arguments whose result is picklable:
:class:`theory_checks.claim_batch.ClaimRunTask` gives one ``(claim, estimator)`` run's results files
as bytes, :class:`theory_checks.calibration.CalibrationTask` one claim x seed's record,
:class:`testbed_app.regression_grid.GridCellTask` one regression grid cell's measurements and
:class:`testbed_app.experiments.segments.SegmentTask` a stretch of an experiment run between two
checkpoints. An executor runs a list of tasks and yields ``(index, result)`` for each as it
finishes, in any order; the driver (the process that runs ``testbed``) writes each result into
the results folder atomically as it comes back, so workers need no shared filesystem and an
interrupted run resumes exactly as a local one does. Results do not depend on the executor: a
task carries everything that defines its numbers (claim id, estimator, profile, torch dtype,
seeds, an experiment's checkpoint), and the draws are seeded by what the task names.

Chains: ``run(tasks, then=...)`` calls ``then(index, result)`` after the driver has taken each
result (so after it has written it); a task it returns runs next under the same index, ``None``
ends that chain. An experiment is such a chain of segments, each starting from the checkpoint the
previous one returned; the chains of different experiments run side by side.

Settings: an executor is made with the driver's
:class:`~theory_checks.settings.RunSettings`, and each worker process (local or Ray) puts them
in force at its entry (dtype, device, precision policy, plugins), with its own thread count.

Resources: a task with a ``gpus`` attribute asks Ray for that many GPUs (an experiment config
on ``cuda``: one); every Ray task asks for ``cpus_per_task`` CPUs and sets torch's thread count
to that allocation; a local worker process gets ``cpu_count // jobs`` threads.

- :class:`LocalExecutor` (``--executor local``, the default): ``jobs=1`` runs the tasks one by
  one in this process (the behaviour before executors; a chain runs to its end before the next
  one starts); ``jobs=N`` spreads them over N local worker processes (``spawn``).
- :class:`RayExecutor` (``--executor ray [--address auto|ray://HOST:PORT]``): one Ray task per
  unit, retried up to ``max_retries`` times when its worker process or node dies. Ray is an
  optional extra (``pip install hypergradient-testbed[ray]``), imported only when this executor
  starts; usage-stats reporting is switched off (``RAY_USAGE_STATS_ENABLED=0``), and Ray gets
  the behaviour its FutureWarning announces on every start (``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO
  =0``: a task without GPUs keeps ``CUDA_VISIBLE_DEVICES`` as it is; a task on ``cuda`` asks
  for its GPU, and the claims run on Ray on the CPU).
"""

from __future__ import annotations

import functools
import itertools
import os
import pickle
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from typing import Protocol
from typing import TypeVar

from testbed.defaults import TASK_RETRIES
from testbed_app.threads import workload_threads
from testbed_app.worker_start import start_local_worker
from theory_checks.settings import ExecutorSettings
from theory_checks.settings import RunSettings
from theory_checks.settings import use_settings

T = TypeVar("T")
S = TypeVar("S", bound="_Session")

#: What ``--executor ray`` prints when Ray is not installed.
RAY_MISSING = (
    "--executor ray needs Ray, an optional extra: "
    "pip install 'hypergradient-testbed[ray]' (or pip install 'ray[default]>=2.40')"
)


#: ``then(index, result)``: the task to run next in ``index``'s chain, or None (module docstring)
Then = Callable[[int, Any], "Callable[[], Any] | None"]


class Executor(Protocol):
    """Runs tasks; yields ``(index, result)`` for each as it finishes, in any order, then asks
    ``then`` for the next task of that index's chain. A task's exception is raised by the
    iterator (the finished results before it have been yielded)."""

    def run(
        self, tasks: Sequence[Callable[[], T]], then: Then | None = None
    ) -> Iterator[tuple[int, T]]: ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


class _Session:
    """``with executor:`` holds what the executor starts (a Ray instance) across several
    ``run`` calls of one command, instead of starting it for each."""

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def task_gpus(task: object, default: float = 0) -> float:
    """The GPUs a task asks for: its ``gpus`` attribute, else ``default``."""
    return float(getattr(task, "gpus", default))


def _enter_worker(settings: RunSettings, threads: int) -> None:
    """A worker's entry: the driver's settings put in force (dtype, device, precision policy,
    plugins: :func:`theory_checks.settings.use_settings`) with the worker's own share of
    torch threads (an experiment segment sets its config's precision when it starts)."""
    use_settings(settings.with_threads(max(1, int(threads))))


def _call(task: Callable[[], T]) -> T:
    return task()


class LocalExecutor(_Session):
    """``jobs`` = 1: each task in turn in this process (no pickling, today's behaviour);
    ``jobs`` > 1: a pool of ``jobs`` spawned processes, each entering with the driver's
    ``settings`` (default: :class:`~theory_checks.settings.RunSettings`'s defaults) and
    ``threads`` torch threads (default ``cpu_count // jobs``, at least 1)."""

    def __init__(
        self, jobs: int = 1, threads: int | None = None, settings: RunSettings | None = None
    ) -> None:
        if jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {jobs}")
        self.jobs = jobs
        self.threads = workload_threads(threads, jobs)
        self.settings = settings if settings is not None else RunSettings()

    def _entry(self) -> bytes:
        """What a worker calls once it watches its driver (:mod:`testbed_app.worker_start`):
        the settings put in force with its threads, pickled."""
        return pickle.dumps(functools.partial(_enter_worker, self.settings, self.threads))

    def run(
        self, tasks: Sequence[Callable[[], T]], then: Then | None = None
    ) -> Iterator[tuple[int, T]]:
        if self.jobs == 1 or (len(tasks) <= 1 and then is None):
            yield from self._run_here(tasks, then)
            return
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import Future
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures import wait

        context = multiprocessing.get_context("spawn")  # no fork of a threaded torch process
        pool = ProcessPoolExecutor(
            max_workers=min(self.jobs, len(tasks)),
            mp_context=context,
            initializer=start_local_worker,
            initargs=(self._entry(), os.getpid()),
        )
        try:
            # a window of tasks in flight, the next submitted as one ends: the tasks are built
            # as they are submitted (``calibrate --seeds 100000`` holds 2 x jobs, not all)
            pending = enumerate(tasks)
            futures: dict[Future[T], int] = {
                pool.submit(_call, task): index
                for index, task in itertools.islice(pending, 2 * self.jobs)
            }
            waiting = set(futures)
            while waiting:
                done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=futures.__getitem__):
                    index, result = futures.pop(future), future.result()
                    yield index, result
                    following = then(index, result) if then is not None else None
                    if following is not None:
                        submitted = pool.submit(_call, following)
                        futures[submitted] = index
                        waiting.add(submitted)
                    for index, task in itertools.islice(pending, 1):
                        submitted = pool.submit(_call, task)
                        futures[submitted] = index
                        waiting.add(submitted)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _run_here(tasks: Sequence[Callable[[], T]], then: Then | None) -> Iterator[tuple[int, T]]:
        """Each task in turn in this process, a chain to its end before the next one."""
        for index, task in enumerate(tasks):
            current: Callable[[], T] | None = task
            while current is not None:
                result = current()
                yield index, result
                current = then(index, result) if then is not None else None


#: Ray tasks submitted ahead of their results: more than the CPUs of the clusters this runs
#: on, so none waits for work, while the tasks not yet submitted are not built.
RAY_WINDOW = 1024


def import_ray() -> Any:
    """The ``ray`` module, with usage-stats reporting off and the accelerator behaviour Ray's
    FutureWarning asks to choose set (module docstring); a clear error when not installed."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] = "0"
    try:
        import ray
    except ImportError as error:
        raise ValueError(RAY_MISSING) from error
    return ray


def _ray_call(task: Callable[[], T], settings: RunSettings, threads: int) -> T:
    """A task on a Ray worker: the driver's settings put in force, torch's threads set to the
    task's CPU allocation."""
    _enter_worker(settings, threads)
    return task()


class RayExecutor(_Session):
    """One Ray task per unit of work on the cluster at ``address`` (``None``: a Ray instance
    started on this machine for the run; ``"auto"``: the cluster this machine belongs to;
    ``"ray://HOST:PORT"``: a remote cluster's client server). Each task asks for
    ``cpus_per_task`` CPUs and ``gpus_per_task`` GPUs and is retried ``max_retries`` times when
    its worker dies; each task puts the driver's ``settings`` in force before it runs. Results
    come back to this process (the driver), which writes them. A Ray instance this executor
    starts is shut down after each ``run``, or, inside ``with executor:``, once at the end of
    the block."""

    _held = False  # inside ``with``: keep the connection between runs
    _started = False  # this executor started (or joined) Ray in this process

    def __init__(
        self,
        address: str | None = None,
        cpus_per_task: int = 1,
        gpus_per_task: float = 0,
        max_retries: int = TASK_RETRIES,
        init_options: dict[str, Any] | None = None,
        settings: RunSettings | None = None,
    ) -> None:
        if cpus_per_task < 1:
            raise ValueError(f"--cpus-per-task must be >= 1, got {cpus_per_task}")
        self.address = address
        self.cpus_per_task = cpus_per_task
        self.gpus_per_task = gpus_per_task
        self.max_retries = max_retries
        self.init_options = dict(init_options or {})
        self.settings = settings if settings is not None else RunSettings()
        self.ray = import_ray()

    def __enter__(self) -> RayExecutor:
        self._held = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._held = False
        self._disconnect()

    def _disconnect(self) -> None:
        if self._started:
            self._started = False
            self.ray.shutdown()

    def _connect(self) -> bool:
        """Join (or start) the cluster unless this process already has; whether it did."""
        if self.ray.is_initialized():
            return False
        options: dict[str, Any] = {
            "address": self.address,
            "log_to_driver": False,
            "configure_logging": False,
            **self.init_options,
        }
        if self.address is None:
            # a Ray instance of our own: no dashboard, on this machine's loopback
            options.setdefault("include_dashboard", False)
        self.ray.init(**options)
        return True

    def run(
        self, tasks: Sequence[Callable[[], T]], then: Then | None = None
    ) -> Iterator[tuple[int, T]]:
        if not tasks:
            return
        ray = self.ray
        self._started = self._connect() or self._started
        try:
            remote = ray.remote(_ray_call)

            def submit(task: Callable[[], T]) -> Any:
                return remote.options(
                    num_cpus=self.cpus_per_task,
                    num_gpus=task_gpus(task, self.gpus_per_task),
                    max_retries=self.max_retries,
                    retry_exceptions=False,
                ).remote(task, self.settings, self.cpus_per_task)

            # at most RAY_WINDOW tasks submitted ahead, the next as one ends (the tasks are
            # built as they are submitted, whatever their number)
            pending = enumerate(tasks)
            refs = {submit(task): index for index, task in itertools.islice(pending, RAY_WINDOW)}
            waiting = list(refs)
            try:
                while waiting:
                    done, waiting = ray.wait(waiting, num_returns=1)
                    for ref in done:
                        index, result = refs.pop(ref), ray.get(ref)
                        yield index, result
                        following = then(index, result) if then is not None else None
                        if following is not None:
                            submitted = submit(following)
                            refs[submitted] = index
                            waiting.append(submitted)
                        for index, task in itertools.islice(pending, 1):
                            submitted = submit(task)
                            refs[submitted] = index
                            waiting.append(submitted)
            finally:
                for ref in waiting:
                    ray.cancel(ref, force=True)
        finally:
            if not self._held:
                self._disconnect()


def make_executor(settings: RunSettings, threads: int | None = None) -> Executor:
    """The executor ``settings.executor`` names (``--executor``, ``--jobs``, ``--address``,
    ``--cpus-per-task``, ``--max-retries``), its workers entering with ``settings``;
    ``threads``: each local worker's torch threads (:mod:`testbed_app.threads`; a Ray task's
    are its ``--cpus-per-task``)."""
    chosen: ExecutorSettings = settings.executor
    if chosen.name == "local":
        if chosen.address is not None:
            raise ValueError("--address is for --executor ray")
        return LocalExecutor(chosen.jobs, threads, settings)
    if chosen.jobs != 1:
        raise ValueError("--jobs is for --executor local (Ray runs one task per free CPU)")
    return RayExecutor(
        chosen.address, chosen.cpus_per_task, max_retries=chosen.max_retries, settings=settings
    )


__all__ = [
    "RAY_MISSING",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "Then",
    "import_ray",
    "make_executor",
    "task_gpus",
]
