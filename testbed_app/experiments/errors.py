"""The errors and warnings of experiment configs and runs (each message names the file).

- :class:`ConfigError`: a config that cannot be run (file, section, key);
- :class:`ResultsError`: a results file (``metrics.csv``, ``checkpoint.pt``) that cannot be
  used; :class:`CheckpointError`: a corrupt, foreign or other-format checkpoint;
- :class:`DeprecatedName`: an option or config key under its old name (a warning).

The command line turns every :class:`ConfigError` into one line and exit status 2.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config that cannot be run; the message names the file, the section and the key."""


class ResultsError(ConfigError):
    """A results file (metrics.csv, checkpoint.pt) that cannot be used; the message names it
    and says how to go on without losing what is there."""


class CheckpointError(ResultsError):
    """A checkpoint that is corrupt, foreign or of another format."""


class DeprecatedName(FutureWarning):
    """An option or config key under its old name (the command line prints it as one
    ``testbed: warning:`` line)."""
