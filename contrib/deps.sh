#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Install the Debian packages the build, the tests and the benchmarks need,
# by the release this machine runs (VERSION_CODENAME of /etc/os-release):
# Debian 12 (bookworm) or Debian 13 (trixie).  Idempotent; needs root (or
# sudo).
#
#   contrib/deps.sh                  install what is missing
#   contrib/deps.sh --list [CODENAME]
#                                    print the list (one a line) of CODENAME
#                                    (default: this machine's release)
#
# Exit status 1 with one line on a release it has no list for.
set -euo pipefail
# shellcheck source=contrib/debian-archive.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/debian-archive.sh"

# The packages of every release, then each release's own names (trixie
# renamed the libraries whose ABI moved to a 64-bit time_t: "t64").
COMMON=(build-essential autoconf automake libtool pkg-config
        googletest libgtest-dev valgrind
        libjemalloc2
        libucx0 libucx-dev
        libibverbs-dev ibverbs-providers ibverbs-utils rdma-core
        openmpi-bin libopenmpi-dev ucx-utils
        clang-format
        debhelper lintian fakeroot)

# deps_list CODENAME: the whole list, one a line; 1 for an unknown release.
deps_list() {
    local own
    case $1 in
    bookworm) own=(libtcmalloc-minimal4) ;;
    trixie) own=(libtcmalloc-minimal4t64) ;;
    *) return 1 ;;
    esac
    printf '%s\n' "${COMMON[@]}" "${own[@]}"
}

# shellcheck disable=SC2119 # this machine's
codename=$(debian_codename) || codename=
if [ "${1:-}" = --list ]; then
    codename=${2:-$codename}
fi
if ! list=$(deps_list "$codename"); then
    echo "deps: no package list for Debian release '${codename:-unknown}' (known: bookworm, trixie)" >&2
    exit 1
fi
if [ "${1:-}" = --list ]; then
    echo "$list"
    exit 0
fi

mapfile -t PKGS <<<"$list"
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all packages present ($codename)"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps: installing for $codename: ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
