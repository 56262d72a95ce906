"""What the tests of the authors'-code adapters share (``integrations/*_authors/tests``): a
stand-in of the authors' module API written into a folder, and a fresh Python process that
imports it through the adapter.

FedNest's and FedMSA's trees share their top-level packages (``core``, ``utils``) and cannot load
in one process (:class:`testbed_authors_checkout.AuthorsCodeError` says so), so each test runs
the adapter in its own process, with only its own codebase's environment variable set.
Standard library only, like the loader beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: The environment variables naming each authors' checkout (FedNest, FedMSA, HGP).
CHECKOUT_ENVS = ("FEDNEST_AUTHORS_REPO", "FEDMSA_AUTHORS_REPO", "HGP_AUTHORS_REPO")


def write_stand_in(folder: Path, files: Mapping[str, str]) -> Path:
    """``folder`` holding ``files`` (path relative to the folder -> text), folders made."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


#: The first lines of a process's code that uses the claims: the settings in force (they load the
#: installed plugins, whose claims the code looks up).
IN_SETTINGS = (
    "from theory_checks.settings import RunSettings, use_settings\nuse_settings(RunSettings())\n"
)


def run_with_checkout(
    env_name: str, code: str, repo: Path | None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter with ``env_name`` naming the checkout ``repo`` (none:
    unset) and every other authors' checkout variable dropped, in ``repo``'s parent folder."""
    env = {k: v for k, v in os.environ.items() if k not in CHECKOUT_ENVS}
    if repo is not None:
        env[env_name] = str(repo)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=repo.parent if repo else None,
    )


def last_json(done: subprocess.CompletedProcess[str]) -> object:
    """The JSON value a run printed on its last line; an AssertionError with the end of its
    stderr when it failed."""
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def verify_without_checkout(entry: str, results: Path) -> str:
    """The code of ``testbed verify ENTRY`` (exit status its own); without a checkout it must
    exit 2 with one line naming the environment variable."""
    return (
        "import sys\nfrom testbed_app.cli import main\n"
        f"sys.exit(main(['verify', {entry!r}, '--quiet', '--no-report', "
        f"'--results', {str(results)!r}]))"
    )


def recorded_verdicts_check(package: str, record: Path, results: Path) -> str:
    """The code comparing the verdicts on the named checkout with those ``record`` holds for its
    commit (``package.authors_code.CODE.commit``): prints the changes, exits 1 when there are
    any."""
    return (
        f"import sys\n{IN_SETTINGS}"
        "from pathlib import Path\n"
        "from testbed_app.library_verdicts import verdict_changes\n"
        f"from {package}.authors_code import CODE\n"
        f"ref, changes = verdict_changes(Path({str(record)!r}), CODE.commit, "
        f"Path({str(results)!r}))\n"
        "print('\\n'.join(changes)); sys.exit(1 if changes else 0)"
    )


def verdicts_code(entries: list[str], results: Path) -> str:
    """The code printing, as JSON, the verdicts of the claims enrolled on each entry (entry ->
    claim -> verdict), run with results in ``results``."""
    return (
        f"import json\n{IN_SETTINGS}"
        "from pathlib import Path\n"
        "from testbed_app.library_verdicts import run_verdicts\n"
        f"print(json.dumps(run_verdicts({entries!r}, Path({str(results)!r}))))"
    )
