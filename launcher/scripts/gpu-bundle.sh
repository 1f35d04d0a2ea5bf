#!/usr/bin/env bash
# gpu-bundle.sh: gathers the Debian 12 packages itertime needs besides LibTorch, CUDA and NCCL into one
# folder, for gpu-run.sh to unpack on a machine with no package access (docs/gpu.md).
#
#   launcher/scripts/gpu-bundle.sh [OUT]        (default: out/gpu-bundle, emptied first)
#
# Invariants:
#  - Runs where Debian 12 (bookworm) packages are reachable through apt (this machine, or a bookworm
#    root); needs no root: `apt-get download` fetches each named package as it is, resolving nothing.
#  - The list is written out below, by hand: the build's headers and CMake configurations (Open MPI,
#    HDF5 C++, Boost.Serialization, CLI11, nlohmann-json, yaml-cpp, toml++ and OpenSSL's libcrypto for the
#    users' formats (formats/), GoogleTest for the NCCL test), and every
#    shared library they load at run time that a Linux machine with a Python may lack (found with ldd
#    over libmpi, Open MPI's plugins, orted, mpirun, libhdf5 and libboost_serialization on Debian 12).
#    libc6, libgcc-s1 and libstdc++6 are left out: the machine's own serve (they are what its compiler
#    and its PyTorch use).
#  - OUT holds debs/*.deb and MANIFEST (package, version, bytes); at most 40 MB in all, else exit 1.
#  - Google Benchmark is not bundled: gpu-run.sh builds without the benchmarks.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/out/gpu-bundle}"
LIMIT_BYTES=$((40 * 1000 * 1000))

BUILD_PACKAGES=(
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
  libhdf5-dev hdf5-helpers libhdf5-103-1 libhdf5-cpp-103-1 libhdf5-hl-100 libhdf5-hl-cpp-100
  libboost1.74-dev libboost-serialization1.74-dev libboost-serialization1.74.0 libboost-serialization-dev
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libnlopt-dev libnlopt0
  libyaml-cpp-dev libyaml-cpp0.7 libtomlplusplus-dev libtomlplusplus3 libssl-dev
)
RUNTIME_PACKAGES=(
  # Open MPI 4.1 and its plugins
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libhwloc15 libibverbs1 ibverbs-providers
  librdmacm1 libnl-3-200 libnl-route-3-200 libpmix2 libpsm-infinipath1 libpsm2-2 libucx0 libmunge2
  libnuma1 libudev1
  # HDF5 1.10 (szip, and libcurl for its read-only S3 driver)
  libsz2 libaec0 libcurl4 libssl3 libnghttp2-14 libpsl5 librtmp1 libssh2-1 libldap-2.5-0 libsasl2-2
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 libidn2-0
  libunistring2 libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libtasn1-6 libffi8 libbrotli1
  libzstd1 zlib1g libuuid1 libatomic1
)

if ! grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  echo "gpu-bundle: error: needs Debian 12 (bookworm) packages through apt; run it on Debian 12 or in a bookworm root" >&2
  exit 2
fi
command -v apt-get >/dev/null || { echo "gpu-bundle: error: apt-get not found" >&2; exit 2; }

rm -rf "$OUT"
mkdir -p "$OUT/debs"
cd "$OUT/debs"
echo "gpu-bundle: downloading ${#BUILD_PACKAGES[@]} build and ${#RUNTIME_PACKAGES[@]} runtime packages into $OUT/debs"
sandbox=()
[[ "$(id -u)" == 0 ]] && sandbox=(-o APT::Sandbox::User=root)   # root writes into a folder _apt may not reach
apt-get download -q "${sandbox[@]}" "${BUILD_PACKAGES[@]}" "${RUNTIME_PACKAGES[@]}" >/dev/null

{
  echo "# itertime GPU bundle: Debian 12 packages for gpu-run.sh (the same packages give the same manifest)"
  echo "# package version bytes"
  for deb in *.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" "$(stat -c %s "$deb")"
  done
} >"$OUT/MANIFEST"
TOTAL="$(awk '!/^#/ { s += $3 } END { print s + 0 }' "$OUT/MANIFEST")"
COUNT="$(grep -vc '^#' "$OUT/MANIFEST")"
awk -v n="$COUNT" -v b="$TOTAL" -v o="$OUT" 'BEGIN { printf "gpu-bundle: %d packages, %.1f MB in %s\n", n, b / 1e6, o }'
if ((TOTAL > LIMIT_BYTES)); then
  echo "gpu-bundle: error: the bundle is $TOTAL bytes, over the 40 MB limit" >&2
  exit 1
fi
