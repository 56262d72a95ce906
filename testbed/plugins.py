"""Estimators and algorithms from installed packages: Python entry points.

A package adds a variant without forking the testbed by declaring, in its ``pyproject.toml``::

    [project.entry-points."testbed.estimators"]
    my-variant = "my_package.entries:ENTRY"      # an EstimatorInfo, or a list of them

(``testbed.algorithms`` likewise for outer loops, ``role="algorithm"``). The registry loads them
beside the built-ins (:data:`testbed.registry.ESTIMATOR_DB`), so ``testbed list``, ``check``,
``calibrate``, ``regress``, ``verify`` and the report see them like any built-in.

A bad plugin never breaks the built-ins: an entry point that does not import, is not an
``EstimatorInfo``, has a class that does not implement the interface of its role, a name that
clashes with another entry, or defaults that do not build, is left out, and the reason, naming
the package and the entry point, is kept in :func:`problems` (``testbed list`` prints them;
``testbed verify`` of such a target fails with it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import signal
import threading
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

from results_format.paths import name_problem
from testbed.algorithms.base import OuterAlgorithm
from testbed.estimators.base import Estimator
from testbed.info import EstimatorInfo

GROUPS = {"testbed.estimators": "estimator", "testbed.algorithms": "algorithm"}
#: What a plugin's own code may raise and still be left out with its reason: any exception,
#: and also ``SystemExit`` (a module calling ``sys.exit`` at import) and ``KeyboardInterrupt``
#: raised by the plugin itself, which would otherwise end the command having done nothing.
#: A Ctrl-C pressed while the plugin's code runs is the user's, not the plugin's: it ends the
#: command (:func:`user_interrupts`).
PLUGIN_FAILURES = (Exception, SystemExit, KeyboardInterrupt)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class PluginProblem:
    """Why an entry point was left out."""

    group: str
    entry_point: str
    package: str
    reason: str

    def __str__(self) -> str:
        return (
            f"plugin {self.entry_point!r} of package {self.package!r} "
            f"(entry point group {self.group!r}) was not loaded: {self.reason}"
        )


class PluginError(Exception):
    """A plugin that cannot be used; the message names its package and entry point."""


_PROBLEMS: list[PluginProblem] = []
#: (entry point group, loaded item's name) -> the package that provides it.
_PACKAGES: dict[tuple[str, str], str] = {}


@contextlib.contextmanager
def user_interrupts() -> Iterator[list[bool]]:
    """Run a plugin's code inside: the list it gives becomes non-empty when the user presses
    Ctrl-C (SIGINT) meanwhile, so that a caller catching :data:`PLUGIN_FAILURES` can tell a
    Ctrl-C, which it re-raises (:func:`reraise_user_interrupt`), from a KeyboardInterrupt the
    plugin raised itself (a Ctrl-C during a slow plugin's import was swallowed, the command
    running on to exit 0). The handler in force (Python's, or a worker's) still runs."""
    pressed: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed  # signals reach the main thread only
        return
    previous = signal.getsignal(signal.SIGINT)

    def noted(signum: int, frame: Any) -> None:
        pressed.append(True)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, noted)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def reraise_user_interrupt(pressed: list[bool], error: BaseException) -> None:
    """Raise KeyboardInterrupt when ``error`` came while the user pressed Ctrl-C
    (:func:`user_interrupts`); a plugin's own failure otherwise (nothing raised)."""
    if pressed and isinstance(error, KeyboardInterrupt):
        raise KeyboardInterrupt from None


def problems() -> list[PluginProblem]:
    """The entry points left out by the last load, with their reasons."""
    return list(_PROBLEMS)


def left_out(name: str) -> PluginProblem | None:
    """The entry point left out that would have provided ``name``: one named ``name``, or
    whose name prefixes it (``torchopt`` for ``torchopt-implicit-cg``), or None. An error on
    an unknown estimator or algorithm gives its reason (a config naming a plugin that was
    left out said only "unknown value 'probe-slowbuild'")."""
    for problem in _PROBLEMS:
        if problem.entry_point == name or name.startswith(f"{problem.entry_point}-"):
            return problem
    return None


def entry_points(group: str) -> Sequence[importlib.metadata.EntryPoint]:
    """The installed entry points of ``group`` (the one place the registry asks)."""
    return tuple(importlib.metadata.entry_points(group=group))


def package_of(entry: importlib.metadata.EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return dist.name if dist is not None else entry.value.split(":")[0].split(".")[0]


def _interface(role: str) -> type:
    if role == "algorithm":
        return OuterAlgorithm

    return Estimator


def check_entry(info: Any, role: str, taken: Iterable[str]) -> EstimatorInfo:
    """``info`` if it is a usable registry entry of ``role`` whose name is not ``taken``;
    :class:`PluginError` saying what is wrong otherwise."""
    if not isinstance(info, EstimatorInfo):
        raise PluginError(f"it is a {type(info).__name__}, not a testbed.EstimatorInfo")
    if info.name in set(taken):
        raise PluginError(
            f"its name {info.name!r} is already registered (built-in names and "
            "other plugins' names cannot be replaced)"
        )
    if (
        not isinstance(info.name, str)
        or info.name != info.name.lower()
        or not info.name
        or " " in info.name
        or name_problem(info.name) is not None
    ):
        raise PluginError(
            f"its name {info.name!r} must be lower-case without spaces, a plain "
            "name (it names results files)"
        )
    if info.role != role:
        raise PluginError(f"its role is {info.role!r}, but the group holds {role}s")
    interface = _interface(role)
    if not (isinstance(info.cls, type) and issubclass(info.cls, interface)):
        raise PluginError(
            f"its class {info.cls!r} does not subclass testbed's {interface.__name__}"
        )
    built = _plugin_call(info.build, "its defaults do not build")
    if not isinstance(built, interface):
        raise PluginError(f"its make returns a {type(built).__name__}, not a {interface.__name__}")
    return info


def _plugin_call(call: Callable[[], T], failure: str) -> T:
    """``call()`` of a plugin's code; what it raises (:data:`PLUGIN_FAILURES`) as a
    :class:`PluginError` ``<failure>: <error type>: <message>``, a Ctrl-C re-raised as one."""
    with user_interrupts() as pressed:
        try:
            return call()
        except PLUGIN_FAILURES as error:
            reraise_user_interrupt(pressed, error)
            raise PluginError(f"{failure}: {type(error).__name__}: {error}") from error


def _as_items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def load_group(
    group: str,
    items_of: Callable[[Any], Sequence[Any]],
    check: Callable[[Any, set[str]], T],
    key: Callable[[T], str],
    taken: set[str],
    problems: list[PluginProblem],
) -> list[T]:
    """The usable items of ``group``'s entry points: each entry point's value split into items
    by ``items_of``, each item ``check``-ed against the names ``taken`` so far (``check``
    raises :class:`PluginError`). An entry point that does not import or has a bad item is
    left out whole and recorded in ``problems``; ``taken`` gains the loaded items' names."""
    loaded: list[T] = []
    for entry in entry_points(group):
        checked: list[T] = []
        try:
            value = _plugin_call(entry.load, "it does not import")
            for item in items_of(value):
                checked.append(check(item, taken | {key(c) for c in checked}))
        except PluginError as error:
            problems.append(PluginProblem(group, entry.name, package_of(entry), str(error)))
            continue
        taken |= {key(c) for c in checked}
        _PACKAGES.update({(group, key(c)): package_of(entry) for c in checked})
        loaded += checked
    return loaded


def modules_of(*objects: Any) -> set[str]:
    """The top-level module names of ``objects`` (a plugin's classes and functions): where
    its own code lives, for :func:`raised_in`."""
    names = {str(getattr(obj, "__module__", "") or "") for obj in objects}
    return {name.split(".")[0] for name in names if name}


def raised_in(error: BaseException, modules: set[str]) -> str | None:
    """``file:line`` of the innermost frame of ``error``'s traceback in one of ``modules``
    (top-level module names: :func:`modules_of`), or None when it was raised elsewhere."""
    found = None
    trace = error.__traceback__
    while trace is not None:
        module = str(trace.tb_frame.f_globals.get("__name__", "")).split(".")[0]
        if module in modules:
            found = f"{trace.tb_frame.f_code.co_filename}:{trace.tb_lineno}"
        trace = trace.tb_next
    return found


def describe_failure(error: BaseException) -> str:
    """``ZeroDivisionError: division by zero`` (the first line of its text, at most 200
    characters; ``sys.exit(3)`` for a SystemExit)."""
    if isinstance(error, SystemExit):
        return f"SystemExit: sys.exit({error.code!r})"
    text = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    return type(error).__name__ + (f": {text}" if text else "")


def package_providing(group: str, name: str) -> str | None:
    """The installed package whose entry point of ``group`` provided the item ``name`` (an
    estimator's or a claim's), or None (a built-in, or not loaded from a plugin)."""
    return _PACKAGES.get((group, name))


def load(builtin: Sequence[EstimatorInfo]) -> list[EstimatorInfo]:
    """The usable entries of every installed plugin (names distinct from ``builtin`` and from
    each other); the others are recorded in :func:`problems`."""
    _PROBLEMS.clear()
    taken = {info.name for info in builtin}
    loaded: list[EstimatorInfo] = []
    for group, role in GROUPS.items():
        loaded += load_group(
            group,
            _as_items,
            functools.partial(_check_role, role),
            lambda info: info.name,
            taken,
            _PROBLEMS,
        )
    return loaded


def _check_role(role: str, info: Any, taken: set[str]) -> EstimatorInfo:
    return check_entry(info, role, taken)


__all__ = [
    "GROUPS",
    "PluginError",
    "PluginProblem",
    "check_entry",
    "describe_failure",
    "entry_points",
    "left_out",
    "load",
    "load_group",
    "modules_of",
    "package_of",
    "package_providing",
    "problems",
    "raised_in",
    "reraise_user_interrupt",
    "user_interrupts",
]
