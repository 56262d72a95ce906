"""Tests of the Flower deployment (``testbed_app.flower``): ``tox -e flower`` runs them (it installs
the ``[flower]`` extra and sets ``TESTBED_FLOWER_TESTS=1``); elsewhere they skip with that reason.
The default run has the smoke test ``tests/test_flower_smoke.py``."""

import os

import pytest

#: Every module here: ``pytestmark = ONLY_IN_TOX_FLOWER``.
ONLY_IN_TOX_FLOWER = pytest.mark.skipif(
    os.environ.get("TESTBED_FLOWER_TESTS") != "1",
    reason="Flower tests run in tox -e flower (TESTBED_FLOWER_TESTS=1, the [flower] extra)",
)
