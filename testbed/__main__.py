"""``python -m testbed``: the same command as ``testbed`` (the application, :mod:`testbed_app`).

The one import from the library core up into the application, kept so that ``python -m
testbed`` works as it always has; ``[tool.importlinter]`` lists it as the layers' one exception.
"""

from testbed_app.cli import main

raise SystemExit(main())
