"""What the ``testbed`` commands share in turning their options into inputs: the claims
``--claim`` names, a results folder, the executor of the run's settings."""

from __future__ import annotations

from pathlib import Path

from results_format.paths import output_folder
from testbed_app.executors import Executor
from testbed_app.executors import make_executor
from theory_checks.claim import Claim
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import get_claim
from theory_checks.settings import RunSettings

#: The tail of an unknown claim's error line, said once for several unknown ids.
LIST_HINT = "; `testbed list` shows every claim"


def error_text(error: BaseException) -> str:
    """An error's text; a KeyError's str() is the repr of its key (``"'as_expected'"``), so
    its text instead."""
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)


def named_claims(ids: list[str] | None) -> list[Claim]:
    """The claims ``--claim`` names (each once, in the order given), every registered claim
    without it; every unknown id in one line, each with its "did you mean"."""
    if not ids:
        return list(CLAIM_DB)
    claims, unknown = [], []
    for claim_id in dict.fromkeys(ids):
        try:
            claims.append(get_claim(claim_id))
        except KeyError as error:
            unknown.append(error_text(error).removesuffix(LIST_HINT))
    if unknown:
        raise KeyError("; ".join(unknown) + LIST_HINT)
    return claims


def results_folder(path: str, option: str) -> Path:
    """``--results`` / ``--out``: a folder or absent (:func:`results_format.paths.output_folder`;
    a file or a link loop is one line, exit 2)."""
    return output_folder(Path(path), option)


def executor_for(settings: RunSettings) -> Executor:
    """The executor of ``settings`` (:mod:`testbed_app.executors`), its local workers with the
    settings' threads each."""
    return make_executor(settings, settings.threads)


__all__ = ["LIST_HINT", "error_text", "executor_for", "named_claims", "results_folder"]
