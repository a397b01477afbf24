#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Install the Debian bookworm packages the build, the tests and the
# benchmarks need.  Idempotent; needs root (or sudo).
set -euo pipefail

PKGS=(build-essential autoconf automake libtool pkg-config
      googletest libgtest-dev valgrind
      libjemalloc2 libtcmalloc-minimal4
      libucx0 libucx-dev
      libibverbs-dev ibverbs-providers ibverbs-utils rdma-core
      openmpi-bin libopenmpi-dev ucx-utils
      clang-format
      debhelper lintian fakeroot)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
