#!/usr/bin/env bash
# The wheels a GPU machine without network may lack, for benchmarks/gpu_session.sh: pure-Python
# (and one cp312 manylinux) wheels of the testbed's small dependencies and the test tools, into
# .gpu-wheels/ (git-ignored; carry it with the working tree, about 3 MB). Run where PyPI is
# reachable. The large ones (numpy, scipy, scikit-learn, matplotlib, sympy, torch) are expected
# on the GPU machine's image; gpu_session.sh says which of them is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download --quiet --no-deps --dest .gpu-wheels \
  --python-version 3.12 --platform manylinux2014_x86_64 --only-binary=:all: \
  tomli-w networkx jinja2 markupsafe hypothesis tqdm sortedcontainers attrs pytest-xdist \
  execnet pytest pluggy iniconfig packaging
ls -la .gpu-wheels
du -sh .gpu-wheels
