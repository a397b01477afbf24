#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Configure and build into a build directory (default: build).
#   contrib/build.sh [BUILD_DIR] [configure args...]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-$top/build}
shift || true
cd "$top"
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p "$builddir"
cd "$builddir"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure" -q "$@"
fi
make -j"$(nproc)" >/dev/null
echo "build: $builddir"
