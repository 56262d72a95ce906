"""The application on top of the library and the claims: the ``testbed`` command (:mod:`.cli`),
the experiment runner (:mod:`.experiments`), the regression check (:mod:`.regression`) and the
communication table (:mod:`.communication`).

Layers (checked by import-linter in ``tox -e lint``; docs/design.md): ``problems`` <- ``testbed``
(library core) <- ``theory_checks`` (claims) <- ``testbed_app`` (this package); ``reports`` reads
results files through ``results_format`` and imports no producer.
"""
