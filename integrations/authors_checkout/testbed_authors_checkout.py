"""The authors' own code (the FedNest, HGP and FedMSA authors' repositories) imported from a
checkout the user names, unmodified: one loader for the benchmark that times FedNest's
(``benchmarks/authors_fednest.py``) and the plugins that verify them (``integrations/
fednest_authors``, ``integrations/hgp_authors``, ``integrations/fedmsa_authors``).

A :class:`Codebase` says what one repository needs: the environment variable that names a
checkout, its top-level packages (imported from the checkout; one of another origin already
imported would shadow them), the imports its modules make and the adapter never reaches (an
empty stand-in module each, only when the package is absent: ``from cv2 import log`` in
FedNest's ``core/ClientManage_hr.py``, ``torchvision`` in pdbo-hgp's ``fedem/models.py``), and
the names a module they import from has dropped since their release (added for the duration
of their import only, and removed after it, so nothing else sees them). Nothing of theirs is
copied into this project.

Each adapter package locates its checkout with :func:`load` (the environment variable, the files
its objects live in, the one-line error saying how to name a checkout) and records
:func:`commit_of` it; their progress output goes through :func:`their_output_silenced`.

This module is a package of its own (``integrations/authors_checkout``, standard library only),
outside the testbed's packages: the adapters declare it as a dependency and the FedNest benchmark
imports it, and nothing of the testbed's core holds or imports it (``tests/
test_authors_code_loader.py``), so no outside code loads and no stand-in enters ``sys.modules``
unless an adapter or the benchmark asks.

>>> try:
...     checkout("/nowhere", {"Client": "core.Client_hr:Client"})
... except AuthorsCodeError as error:
...     print(error)
/nowhere is not a checkout of ucr-optml/FedNest: it lacks core/Client_hr.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import os
import sys
import types
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Codebase:
    """What importing one authors' repository needs (see the module docstring).

    Attributes:
        repository: ``owner/name`` on GitHub (for messages).
        env: the environment variable naming a checkout.
        packages: their top-level packages and modules.
        unused_imports: module -> names imported from it that the adapter never reaches.
        import_shims: module -> {name: value} the module no longer has and their imports name;
            present only while their modules are imported.
    """

    repository: str
    env: str
    packages: tuple[str, ...]
    unused_imports: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    import_shims: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    @property
    def how(self) -> str:
        """How a user names a checkout (for the error when none is named)."""
        name = self.repository.rpartition("/")[2]
        return (
            f"set {self.env} to a checkout of {self.repository} (git clone "
            f"https://github.com/{self.repository} /path/{name})"
        )


#: The FedNest authors' code (ucr-optml/FedNest): their modules import ``cv2.log`` and
#: ``importlib_metadata.requires`` and never use them.
FEDNEST = Codebase(
    "ucr-optml/FedNest",
    "FEDNEST_AUTHORS_REPO",
    ("core", "utils", "models"),
    {"cv2": ("log",), "importlib_metadata": ("requires",)},
)
#: The environment variable naming a FedNest checkout, when no path is given.
AUTHORS_ENV = FEDNEST.env
#: Their top-level packages: one of another origin already imported would shadow theirs.
PACKAGES = FEDNEST.packages
#: Imports of the authors' modules that they never use, and the names imported from them.
UNUSED_IMPORTS = FEDNEST.unused_imports


class AuthorsCodeError(ImportError):
    """The named folder does not hold the authors' code, or it cannot be imported."""


def checkout(
    path: str | os.PathLike[str], names: Mapping[str, str], codebase: Codebase = FEDNEST
) -> Path:
    """The folder ``path``, resolved, once it is checked to hold the file of each module that
    ``names`` (attribute -> ``"module:name"``, as :func:`import_authors_code` takes them)
    imports from."""
    repo = Path(path).expanduser().resolve()
    files = sorted(
        {reference.partition(":")[0].replace(".", "/") + ".py" for reference in names.values()}
    )
    missing = [name for name in files if not (repo / name).is_file()]
    if missing:
        raise AuthorsCodeError(
            f"{repo} is not a checkout of {codebase.repository}: it lacks {', '.join(missing)}"
        )
    return repo


def named_checkout(codebase: Codebase = FEDNEST) -> str | None:
    """The folder the codebase's environment variable names, or ``None``."""
    return os.environ.get(codebase.env) or None


def locate(names: Mapping[str, str], codebase: Codebase = FEDNEST) -> Path:
    """The checkout the codebase's environment variable names, checked by :func:`checkout` to
    hold the modules of ``names``; an :class:`AuthorsCodeError` of one line saying how to name
    one when the variable is unset."""
    named = named_checkout(codebase)
    if named is None:
        raise AuthorsCodeError(f"the {codebase.repository} code is not found: {codebase.how}")
    return checkout(named, names, codebase)


def load(names: Mapping[str, str], codebase: Codebase = FEDNEST) -> types.SimpleNamespace:
    """Their objects ``names`` imported from the located checkout (:func:`locate`,
    :func:`import_authors_code`), with ``repo``, its ``commit`` (:func:`commit_of`) and
    ``source``, the three as a registry entry's reference names them (``ucr-optml/FedNest at
    <commit, 12 digits> (<repo>)``)."""
    code = import_authors_code(locate(names, codebase), names, codebase)
    code.commit = commit_of(code.repo)
    code.source = f"{codebase.repository} at {code.commit[:12]} ({code.repo})"
    return code


def parsed_options(args_parser: Callable[[], Any], script: str, **options: object) -> Any:
    """Their ``args_parser()`` (which reads ``sys.argv``) on the command line ``script --gpu -1
    --local_bs 1 --<option> <value> ...``: on the CPU, one sample per local batch, as the adapters
    of the ucr-optml repositories (FedNest, FedMSA) run their code; ``sys.argv`` restored after.

    >>> import argparse
    >>> def args_parser():
    ...     parser = argparse.ArgumentParser()
    ...     for name in ("--gpu", "--local_bs", "--neumann"):
    ...         parser.add_argument(name, type=int)
    ...     return parser.parse_args()
    >>> parsed_options(args_parser, "main.py", neumann=3)
    Namespace(gpu=-1, local_bs=1, neumann=3)
    """
    argv = [script, "--gpu", "-1", "--local_bs", "1"]
    for name, value in options.items():
        argv += [f"--{name}", str(value)]
    saved = sys.argv
    sys.argv = argv
    try:
        return args_parser()
    finally:
        sys.argv = saved


@contextlib.contextmanager
def their_output_silenced() -> Iterator[None]:
    """Their modules' progress output (prints, tqdm bars on stderr) kept off the testbed's."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def commit_of(repo: Path) -> str:
    """The checkout's commit (``.git`` a folder or a worktree's ``gitdir:`` file), or
    "unknown" (a snapshot without git metadata)."""
    try:
        git = repo / ".git"
        if git.is_file():
            git = (repo / git.read_text().strip().removeprefix("gitdir:").strip()).resolve()
        ref = (git / "HEAD").read_text().strip()
        if not ref.startswith("ref: "):
            return ref
        for folder in (git, git.parent.parent if git.parent.name == "worktrees" else git):
            if (folder / ref[5:]).is_file():
                return (folder / ref[5:]).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref[5:]):
                return line.split()[0]
    except OSError:
        pass
    return "unknown"


@contextlib.contextmanager
def _shims(codebase: Codebase) -> Iterator[None]:
    """The codebase's import shims present while the block runs, removed after it."""
    added: list[tuple[types.ModuleType, str]] = []
    try:
        for module_name, names in codebase.import_shims.items():
            module = importlib.import_module(module_name)
            for name, value in names.items():
                if not hasattr(module, name):
                    setattr(module, name, value)
                    added.append((module, name))
        yield
    finally:
        for module, name in added:
            delattr(module, name)


def import_authors_code(
    repo: Path, names: Mapping[str, str], codebase: Codebase = FEDNEST
) -> types.SimpleNamespace:
    """Their objects ``names`` (attribute -> ``"module:name"``, e.g. ``"ClientManageHR":
    "core.ClientManage_hr:ClientManageHR"``) imported from ``repo``, with ``repo`` itself."""
    for package in codebase.packages:
        loaded = sys.modules.get(package)
        if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(str(repo)):
            raise AuthorsCodeError(
                f"a different top-level package {package!r} is already "
                f"imported ({getattr(loaded, '__file__', loaded)}); import "
                f"the {codebase.repository} code in its own process"
            )
    for module, unused in codebase.unused_imports.items():
        try:
            importlib.import_module(module)
        except ImportError:
            stand_in = types.ModuleType(module)
            stand_in.__doc__ = "empty stand-in for an import the authors' code never uses"
            for name in unused:
                setattr(stand_in, name, None)
            sys.modules[module] = stand_in
            parent, _, child = module.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, stand_in)
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    found: dict[str, object] = {"repo": repo}
    try:
        with _shims(codebase):
            for attribute, reference in names.items():
                module, _, name = reference.partition(":")
                found[attribute] = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise AuthorsCodeError(
            f"cannot import the authors' modules from {repo}: {error}"
        ) from error
    return types.SimpleNamespace(**found)


__all__ = [
    "FEDNEST",
    "AuthorsCodeError",
    "Codebase",
    "checkout",
    "commit_of",
    "import_authors_code",
    "load",
    "locate",
    "named_checkout",
    "parsed_options",
    "their_output_silenced",
]
