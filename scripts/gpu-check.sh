#!/usr/bin/env bash
# A GPU check: seed 004's llama.cpp tuning story (slots -np, KV cache type -ctk) on a real GPU.
#
#   make gpu-bundle                              # here: .gpu-bundle/ (llama.cpp's source, the wheels)
#   OUT=DIR bash scripts/gpu-check.sh            # there: one NVIDIA GPU, no network, about 8 minutes
#   GPU_CHECK_CPU=1 OUT=DIR bash scripts/gpu-check.sh   # the dry run: the CPU build, a 5M model
#
# Steps (each timed in DIR/summary.md):
#   1. wheels   .gpu-bundle/wheels installed into a scratch folder when the swarm's packages are
#               missing (pip --no-index: nothing is downloaded);
#   2. build    llama-server, Release, its target only (scripts/llama-server-build.sh): with CUDA for
#               the first GPU's architecture only (nvidia-smi's compute_cap, e.g. 90 for an H200),
#               from .gpu-bundle's source; with GPU_CHECK_CPU=1 the CPU build (cached per machine);
#   3. model    a GGUF of GPU_CHECK_PARAMS random float16 weights, llama architecture
#               (scripts/make_tiny_gguf.py --params; 1.5B on a GPU, 5M on the CPU);
#   4. search   llama-server at -np NP_BASE on loopback (every layer on the GPU: -ngl 99), and
#               `swarm run --search concurrency --slo SLO`: the most users meeting it, and why;
#   5. tune     `swarm tune` over -np NP_GRID x KV cache type CTK_GRID (K and V alike:
#               --cache-type-k/-v, seed 004's -np, -ctk and -ctv; a --configs list, since a grid
#               would cross K with V), each configuration started, measured by one sweep of SWEEP
#               users under the same SLO (its answer: the highest stage meeting it), stopped;
#   6. twin     `swarm twin fit` on the tune's run at the most slots (f16 cache), then
#               `swarm twin predict` of every -np under the SLO, and the twin's QPS at the sweep's
#               top stage for each other -np set beside what the tune measured there.
# Outputs in $OUT (at most 8 files, no folder): summary.md (one page: each step, its minutes, the
# answers, the twin's errors), tune-table.txt (swarm tune's table), runs.tar.gz (every run directory,
# the tune's and the twin's tune.json/tune.html, the servers' logs), gpu-check.log (this script's
# output). The summary and the archive are written whatever step fails; the exit code is the first
# failed step's (0: every step ran).
# Settings (environment): OUT; GPU_CHECK_CPU=1; GPU_CHECK_PYTHON (default python3); GPU_CHECK_PARAMS;
# GPU_CHECK_SLO; GPU_CHECK_NP_BASE; GPU_CHECK_NP_GRID; GPU_CHECK_CTK_GRID; GPU_CHECK_SEARCH_BUDGET;
# GPU_CHECK_SWEEP and GPU_CHECK_STAGE (the tune's stages); GPU_CHECK_MAX_TOKENS.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${OUT:-}" ]; then
  echo "gpu-check: set OUT to the folder the results go to" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
CPU="${GPU_CHECK_CPU:-0}"
PY="${GPU_CHECK_PYTHON:-python3}"
BUNDLE="$REPO/.gpu-bundle"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"
STEPS="$WORK/steps.tsv"
: >"$STEPS"
exec > >(tee "$OUT/gpu-check.log") 2>&1

if [ "$CPU" = 1 ]; then
  PARAMS="${GPU_CHECK_PARAMS:-5M}"
  SLO="${GPU_CHECK_SLO:-ttft_p99<=2s}"
  NP_BASE="${GPU_CHECK_NP_BASE:-2}"
  NP_GRID="${GPU_CHECK_NP_GRID:-1,4}"
  CTK_GRID="${GPU_CHECK_CTK_GRID:-f16,q8_0}"
  SEARCH_BUDGET="${GPU_CHECK_SEARCH_BUDGET:-10s}"
  SWEEP="${GPU_CHECK_SWEEP:-1,4}"
  STAGE="${GPU_CHECK_STAGE:-5s}"
  WARMUP=1s
  MAX_TOKENS="${GPU_CHECK_MAX_TOKENS:-16}"
  WORKERS=1
  GPU_ARGS=()
else
  PARAMS="${GPU_CHECK_PARAMS:-1.5B}"
  SLO="${GPU_CHECK_SLO:-ttft_p99<=500ms}"
  NP_BASE="${GPU_CHECK_NP_BASE:-4}"
  NP_GRID="${GPU_CHECK_NP_GRID:-2,8}"
  CTK_GRID="${GPU_CHECK_CTK_GRID:-f16,q8_0}"
  SEARCH_BUDGET="${GPU_CHECK_SEARCH_BUDGET:-75s}"
  SWEEP="${GPU_CHECK_SWEEP:-4,16,32}"
  STAGE="${GPU_CHECK_STAGE:-10s}"
  WARMUP=3s
  MAX_TOKENS="${GPU_CHECK_MAX_TOKENS:-128}"
  WORKERS=2
  GPU_ARGS=(-ngl 99)
  [ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
fi
CTX_PER_SLOT=2048
ALIAS=random-llama
# the swarm run options every measurement shares
LOAD=(--workload short_qa --max-tokens "$MAX_TOKENS" --ignore-eos --workers "$WORKERS" --slo "$SLO")

SERVER_PID=""
finish() {
  local rc=$? mode=gpu
  [ "$CPU" = 1 ] && mode=cpu
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if ! "$PY" "$REPO/scripts/gpu_check_summary.py" "$WORK" "$OUT" --mode "$mode" --slo "$SLO" \
    --params "$PARAMS" --np-base "$NP_BASE" --np-grid "$NP_GRID" --sweep "$SWEEP" "${ASSUME[@]}"; then
    echo "gpu-check: the summary could not be written" >&2
    [ "$rc" = 0 ] && rc=1
  fi
  tar czf "$OUT/runs.tar.gz" -C "$WORK" --exclude='*.gguf' --exclude=./site . || rc=1
  rm -rf "$WORK"
  echo "gpu-check: $OUT (exit $rc)"
  exit "$rc"
}
trap finish EXIT

# step NAME FUNCTION: runs it, records its seconds and exit code; a failure ends the check. (A function
# run under `||` does not stop at a failing command, whatever set -e says: each returns its failures.)
step() {
  local name=$1 t0=$EPOCHREALTIME rc=0
  echo "== gpu-check: $name" >&2
  "$2" || rc=$?
  awk -v n="$name" -v a="$t0" -v b="$EPOCHREALTIME" -v rc="$rc" 'BEGIN { printf "%s\t%.1f\t%d\n", n, b - a, rc }' \
    >>"$STEPS"
  if [ "$rc" != 0 ]; then
    echo "gpu-check: step $name failed (exit $rc)" >&2
    exit "$rc"
  fi
}

wheels() {
  if "$PY" -c "import locust, orjson, ddsketch, sseclient" 2>/dev/null; then
    echo "the swarm's packages are there already"
  elif [ -d "$BUNDLE/wheels" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" "$BUNDLE"/wheels/*.whl \
      || return
    "$PY" -c "import locust, orjson, ddsketch, sseclient" || return
  else
    echo "the swarm's packages are missing and there is no $BUNDLE/wheels: run make gpu-bundle" >&2
    return 1
  fi
}

build() {
  local out
  if [ "$CPU" = 1 ]; then
    out="$(bash "$REPO/scripts/llama-server-build.sh")" || return
  else
    local tarball
    tarball="$(ls "$BUNDLE"/llama.cpp-*.tar.gz 2>/dev/null | head -n 1)" || true
    if [ -z "$tarball" ]; then
      echo "no $BUNDLE/llama.cpp-*.tar.gz (the machine cannot download it): run make gpu-bundle" >&2
      return 1
    fi
    out="$(SWARM_LLAMACPP_CUDA_ARCH=native SWARM_LLAMACPP_SRC_TARBALL="$tarball" \
      bash "$REPO/scripts/llama-server-build.sh")" || return
  fi
  BIN="$(tail -n 1 <<<"$out")"
  SRC="$(dirname "$(dirname "$(dirname "$BIN")")")/src"
  # cuBLAS from PyTorch's packages, the toolkit's runtime (llama-server-build.sh wrote where):
  # every llama-server started from here on (the search's, swarm tune's) finds them
  local dirs_file
  dirs_file="$(dirname "$(dirname "$BIN")")/ld-library-path"
  if [ -f "$dirs_file" ]; then
    export LD_LIBRARY_PATH="$(cat "$dirs_file")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  echo "llama-server: $BIN"
  # the builder's own record of the binary's build time (beside its build folder)
  cp "$(dirname "$(dirname "$BIN")")-seconds" "$WORK/build-seconds.txt" 2>/dev/null || true
  "$BIN" --version >"$WORK/llama-server-version.txt" 2>&1
}

model() {
  "$PY" "$REPO/scripts/make_tiny_gguf.py" "$WORK/model.gguf" --gguf-py "$SRC/gguf-py" --params "$PARAMS" \
    | tee "$WORK/model.txt"
}

free_port() {
  "$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}

# the base command the search and the tune share: one context for all slots, sized for the most slots
# (the tune adds -np, --port and --host; the search adds them itself)
CTX=$((CTX_PER_SLOT * $(tr , '\n' <<<"$NP_GRID,$NP_BASE" | sort -n | tail -n 1)))
serve_cmd() {
  SERVE=("$BIN" -m "$WORK/model.gguf" --alias "$ALIAS" -c "$CTX" --metrics --no-webui "${GPU_ARGS[@]}")
}
# what the twin cannot see in llama.cpp's metrics (no KV-usage gauge): its KV cache holds -c tokens
# of all slots together, and a llama model keeps no state per sequence beside them
ASSUME=(--assume "kv_cache_tokens=$CTX" --assume "seq_state_tokens=0")

search() {
  local port
  port="$(free_port)" || return
  mkdir -p "$WORK/servers"
  serve_cmd
  "${SERVE[@]}" -np "$NP_BASE" --host 127.0.0.1 --port "$port" >"$WORK/servers/search.log" 2>&1 &
  SERVER_PID=$!
  "$PY" - "$port" "$SERVER_PID" <<'EOF' || return
import sys, time, urllib.request, os
port, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 300
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("llama-server exited before it answered /health")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit("llama-server did not answer /health in 300 s")
EOF
  local rc=0
  "$PY" -m swarm run --host "http://127.0.0.1:$port" "${LOAD[@]}" --search concurrency -u "$NP_BASE" \
    --stage-time 30s --search-precision 25% --search-budget "$SEARCH_BUDGET" --out "$WORK/search" || rc=$?
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  # 1: the SLO was not met even at the lowest load, or the budget ran out: still an answer to report
  # (a run that broke before it measured anything leaves no summary.json)
  { [ "$rc" = 0 ] || [ "$rc" = 1 ]; } && [ -f "$WORK/search/summary.json" ]
}

tune() {
  serve_cmd
  "$PY" - "$NP_GRID" "$CTK_GRID" >"$WORK/tune-configs.json" <<'EOF' || return
import json, sys
nps, types = sys.argv[1].split(","), sys.argv[2].split(",")
print(json.dumps([{"np": n, "cache-type-k": t, "cache-type-v": t} for n in nps for t in types]))
EOF
  "$PY" -m swarm tune --serve-cmd "$(printf '%q ' "${SERVE[@]}")" --configs "$WORK/tune-configs.json" \
    --health-timeout 5m "${LOAD[@]}" --sweep "$SWEEP" --stage-time "$STAGE" --warmup "$WARMUP" --out "$WORK/tune"
}

twin() {
  local most
  most="$(tr , '\n' <<<"$NP_GRID" | sort -n | tail -n 1)"
  "$PY" -m swarm twin fit "$WORK/tune/configs/np=${most}__cache-type-k=f16__cache-type-v=f16" \
    -o "$WORK/twin.toml" || return
  local rc=0
  "$PY" -m swarm twin predict "$WORK/twin.toml" --grid "np=$NP_GRID" --search concurrency --slo "$SLO" \
    --workload short_qa "${ASSUME[@]}" --out "$WORK/twin" || rc=$?
  # 1: no configuration could be predicted; the summary says why
  { [ "$rc" = 0 ] || [ "$rc" = 1 ]; } && [ -f "$WORK/twin/tune.json" ]
}

export PYTHONPATH="$WORK/site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
COMMIT="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || cat "$BUNDLE/commit.txt" 2>/dev/null || echo unknown)"
echo "$COMMIT" >"$WORK/commit.txt"
echo "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $COMMIT, $([ "$CPU" = 1 ] && echo 'CPU dry run' || echo GPU)"
[ "$CPU" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader \
  | tee "$WORK/gpu.txt"
step wheels wheels
step build build
step model model
step search search
step tune tune
step twin twin
