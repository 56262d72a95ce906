"""Experiment configs run in segments and the run files two runs must share: what the
segment tests (tests/test_experiment_segments.py) and the Ray cluster tests
(tests/cluster/test_ray_cluster.py) compare."""

from __future__ import annotations

from pathlib import Path

from tests.test_executors import results_files
from tests.test_experiments import write

#: 5 steps, a checkpoint every 2: three segments (steps 1-2, 3-4, 5), the last one shorter
FIVE_STEPS = {"run.steps": 5, "run.checkpoint_every": 2}


def write_two_configs(folder: Path) -> list[str]:
    """Two tiny configs of :data:`FIVE_STEPS` in ``folder``, ``a.toml`` (run ``tiny``) and
    ``b.toml`` (run ``tiny-b``, seed 4), as paths for the command line."""
    first = write(folder, FIVE_STEPS, name="a.toml")
    second = write(folder, {**FIVE_STEPS, "run.seed": 4}, name="b.toml")
    second.write_text(second.read_text().replace('name = "tiny"', 'name = "tiny-b"'))
    return [str(first), str(second)]


def run_files(folder: Path) -> dict[str, bytes]:
    """The run folders' and replication records' files; metadata.json (times, machine, the
    step the last segment resumed from) is the one file allowed to differ."""
    return {
        name: data
        for name, data in results_files(folder).items()
        if not name.endswith("metadata.json")
    }
