#!/usr/bin/env bash
# Installs the Debian programs the test-suite runs as real processes (and the compilers that
# build llama-server), only when missing (idempotent).
set -euo pipefail
need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# scripts/llama-server-build.sh compiles llama.cpp's llama-server from source
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v c++ >/dev/null 2>&1 || need+=(g++)
# Compose v1 (Python): `docker-compose config` validates docker-compose.yml; no engine needed
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing system packages: ${need[*]} (run as root or: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian's prometheus package starts a daemon on :9090; tests start their own.
systemctl stop prometheus 2>/dev/null || pkill -x prometheus 2>/dev/null || true
