#!/usr/bin/env bash
# `make test`'s three tiers, one after the other (docs/testing.md says what each holds and why):
#   unit      tests/unit: in-process, two at a time (pytest-xdist, one per core)
#   parallel  tests/integration + tests/e2e not marked `serial`: they wait on processes more than
#             they compute, so four run at a time (a whole file to one process: its module fixtures
#             start once)
#   alone     the tests marked `serial` (they judge time, CPU or rates, or drive a real server whose
#             speed matters): one at a time, nothing beside them
# Every tier runs even when one before it failed (CI sees every failure of the run); the exit code is
# the first failing tier's. Then each tier's time, the 30 slowest tests and the suite's count
# (scripts/test_times.py).
#   bash scripts/test-tiers.sh [unit|parallel|alone ...]   # default: the three, in that order
# Settings: SWARM_TEST_WORKERS (the parallel tier's processes, default 4), PYTEST_ARGS (added to each
# tier's pytest, e.g. "-x" or "-k stop"), SWARM_TEST_TIMES (where the timings go, default .test-times).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=${SWARM_TEST_TIMES:-.test-times}
WORKERS=${SWARM_TEST_WORKERS:-4}
rm -rf "$OUT" && mkdir -p "$OUT"
read -r -a EXTRA <<<"${PYTEST_ARGS:-}"
first_rc=0

run_tier() {
  local tier=$1 t0 rc
  shift
  echo "=== tier $tier: pytest $* ${EXTRA[*]}"
  t0=$(date +%s%N)
  "$PY" -m pytest "$@" --junitxml="$OUT/$tier.xml" "${EXTRA[@]}"
  rc=$?
  echo "$((($(date +%s%N) - t0) / 1000000)) $rc" >"$OUT/$tier.ms"
  # pytest's exit 5 (nothing collected) fails too: a tier that holds no test is a mistake
  if [ $rc -ne 0 ] && [ $first_rc -eq 0 ]; then first_rc=$rc; fi
}

tiers=("$@")
[ ${#tiers[@]} -eq 0 ] && tiers=(unit parallel alone)
for t in "${tiers[@]}"; do
  case "$t" in
    unit) run_tier unit tests/unit -n 2 -q ;;
    parallel) run_tier parallel tests/integration tests/e2e -m "not serial" -n "$WORKERS" --dist loadfile ;;
    alone) run_tier alone tests/integration tests/e2e -m serial -p no:xdist ;;
    *) echo "unknown tier '$t': unit, parallel or alone" >&2; exit 2 ;;
  esac
done
echo "=== the suite's time (scripts/test_times.py $OUT)"
"$PY" scripts/test_times.py "$OUT" "${tiers[@]}"
exit $first_rc
