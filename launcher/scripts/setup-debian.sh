#!/usr/bin/env bash
# Installs every dependency of itertime on a Debian 12 machine with apt-get.
# Idempotent and non-interactive: packages already present are skipped by apt.
# Usage: launcher/scripts/setup-debian.sh   (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev
  libtorch-dev libopenblas0 libopenblas-dev
  libhdf5-dev hdf5-tools
  libboost-serialization-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  jq
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-debian: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "setup-debian: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
