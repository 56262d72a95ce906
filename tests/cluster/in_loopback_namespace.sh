#!/bin/sh
# Run the command given as arguments in a network namespace of its own that holds only loopback,
# so every Ray process it starts listens and talks on 127.0.0.1 (tests/cluster; docs/ray.md, "Running
# on several machines"). Making the namespace needs root (as CI has); elsewhere the command is
# not run and this says so, as a pytest skip would.
if ! unshare -n true 2>/dev/null; then
    echo "tests/cluster skipped: 'unshare -n' (a loopback-only network namespace) needs root;" \
         "run tox -e cluster as root" >&2
    exit 0
fi
exec unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
