#!/usr/bin/env bash
# One GPU session of the testbed (issue 24), at most 14 minutes of device time:
#   install the project, record the device, run the tests marked `gpu` (every shipped config for
#   2 steps on CUDA against the CPU, the TF32 policy, the CNN influence step with and without
#   TF32, claims on CUDA against the CPU), every claim on CUDA and on the CPU compared claim by
#   claim (benchmarks/compare_devices.py), and the CUDA benchmark rows (closed-form FedNest and
#   FBO-AggITD rounds at d = 200, M = 10^3..10^5, against the same-work replica on the GPU; the
#   workload rounds). Each step has its own time limit; logs and JSON go to $OUT.
#
#   OUT=/some/folder bash benchmarks/gpu_session.sh      (tox -e gpu runs it too)
#
# The machine this is written for has torch with CUDA and Python 3.12 and no network: the
# project is installed with --no-deps, and the pure-Python dependencies it lacks come from
# .gpu-wheels/ (made on a machine with network by benchmarks/gpu_wheels.sh, carried along).
# Without a CUDA device every CUDA step is skipped with its reason, and the logs are written.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-session}
mkdir -p "$OUT"
LOG="$OUT/session.log"
PYTHON=${PYTHON:-python3}
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# step NAME LIMIT_SECONDS COMMAND...: run with a time limit, output in $OUT/NAME.log
# ONLY="name name ...": run only these steps (a rerun of what failed, within a device budget)
step() {
  local name=$1 limit=$2; shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
    say "== $name: skipped (not in ONLY)"
    return 0
  fi
  local start; start=$(date +%s)
  say "== $name (limit ${limit} s): $*"
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  say "   $name: exit $rc after $(( $(date +%s) - start )) s$( [ $rc -eq 124 ] && echo ' (time limit)')"
  tail -n 3 "$OUT/$name.log" | sed 's/^/   | /' | tee -a "$LOG"
  return 0
}

say "gpu session $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# 1. install: what is missing from the carried wheels, then the project itself
install_project() {
  local missing
  missing=$("$PYTHON" - <<'PY'
import importlib.util
needs = {'tomli_w': 'tomli-w', 'networkx': 'networkx', 'jinja2': 'jinja2',
         'markupsafe': 'markupsafe', 'hypothesis': 'hypothesis', 'tqdm': 'tqdm',
         'sortedcontainers': 'sortedcontainers', 'attr': 'attrs', 'xdist': 'pytest-xdist',
         'execnet': 'execnet', 'pytest': 'pytest'}
print(' '.join(d for m, d in needs.items() if importlib.util.find_spec(m) is None))
PY
  )
  echo "missing small dependencies: ${missing:-none}"
  if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    "$PYTHON" -m pip install --no-index --find-links .gpu-wheels --no-deps $missing || return 3
  fi
  for big in numpy scipy sklearn matplotlib sympy torch; do
    "$PYTHON" -c "import $big" 2>/dev/null || echo "NOT INSTALLED (too large to carry): $big"
  done
  "$PYTHON" -m pip install --quiet --no-deps --no-build-isolation .
}
export -f install_project
export PYTHON
step install 45 bash -c install_project

# the checkout's own code first, installed or not (a failed install still runs the tests), and
# the authors'-code loader that benchmarks/run.py's authors_fednest imports
export PYTHONPATH="$PWD:$PWD/integrations/authors_checkout${PYTHONPATH:+:$PYTHONPATH}"

# 2. the device and the precision policy as torch reports them
step device 20 $PYTHON -c "
import json, torch
from testbed.precision import set_precision
info = {'torch': torch.__version__, 'cuda': torch.cuda.is_available(),
        'precision': set_precision()}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info.update(device=p.name, memory_gb=round(p.total_memory / 1e9, 1),
                cuda_version=torch.version.cuda)
print(json.dumps(info, indent=1))
open('$OUT/device.json', 'w').write(json.dumps(info, indent=1) + '\n')
"
CUDA=$($PYTHON -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)

# 3. the tests marked gpu (they skip with their reason without CUDA). The GPU machine's numpy and
# torch may be newer than CI's: their deprecation warnings are listed in the log's warnings
# summary here instead of failing a test about numbers (the CPU suite keeps them errors).
step gpu-tests 180 $PYTHON -m pytest -m gpu -p no:cacheprovider -n 4 -v -rsP --durations=15 \
  -W default::DeprecationWarning -W default::PendingDeprecationWarning -W default::FutureWarning \
  --junitxml="$OUT/gpu-tests.xml" tests/test_gpu.py tests/test_devices.py

if [ "$CUDA" = "1" ]; then
  # 4. every claim (fast profile) on this machine's CPU and on CUDA, side by side, then compared
  #    claim by claim (verdicts, power, cases; the measured numbers' largest difference). CUDA:
  #    one command per paper, in parallel (small problems keep a GPU busy only from several
  #    processes; a claim that stops with an error stops its own paper's run, not the others).
  #    On the H100 a claim took 13x its CPU time (median; small problems: kernel launches);
  #    CHECK_SECONDS (default 420) bounds the step, and what finished is compared.
  check_devices() {
    local pids=() paper jobs ids
    "$PYTHON" -m testbed_app check --claims-only --quiet --device cpu --jobs 6 \
      --results "$OUT/check-cpu" > "$OUT/check-cpu.log" 2>&1 &
    pids+=($!)
    # every paper of the registry (its id's first part), one worker per 8 of its claims (1-4)
    while read -r paper jobs ids; do
      # shellcheck disable=SC2086
      "$PYTHON" -m testbed_app check --claim $ids --claims-only --quiet --device cuda \
        --jobs "$jobs" --results "$OUT/check-cuda/$paper" > "$OUT/check-cuda-$paper.log" 2>&1 &
      pids+=($!)
    done < <("$PYTHON" -c "
from theory_checks.registry import CLAIM_DB
papers = {}
for claim in CLAIM_DB:
    papers.setdefault(claim.id.split('.')[0], []).append(claim.id)
for paper, ids in sorted(papers.items()):
    print(paper, min(4, max(1, len(ids) // 8)), ' '.join(sorted(ids)))")
    local rc=0 pid
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    tail -n 2 "$OUT"/check-cuda-*.log
    return $rc
  }
  export -f check_devices
  export OUT
  step check-devices "${CHECK_SECONDS:-420}" bash -c check_devices
  step compare-devices 20 bash -c '"$PYTHON" benchmarks/compare_devices.py "$OUT/check-cpu" \
    "$OUT"/check-cuda/* --json "$OUT/compare-devices.json"'

  # 5. the CUDA benchmark rows
  step bench-closed-form 120 $PYTHON benchmarks/run.py closed_form_rounds --device cuda \
    --out "$OUT/bench"
  step bench-workload 60 $PYTHON benchmarks/run.py workload_round --device cuda --out "$OUT/bench"
else
  say "== check-devices, compare-devices, bench-closed-form, bench-workload: skipped: torch sees no CUDA device (torch.cuda.is_available() is False)"
fi
say "done $(date -u +%Y-%m-%dT%H:%M:%SZ); files in $OUT"
