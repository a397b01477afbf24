#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The host part of the test command (contrib/run-tests.sh --host-only:
# format, build + check in both hook modes with jemalloc and tcmalloc and
# the stock-UCX compatibility tests, ASan+UBSan, valgrind, tools smoke) in
# another Debian release's userland (contrib/debian-root.sh; default
# Debian 13, trixie: gcc 14, glibc 2.41, UCX 1.18.1, Open MPI 5).
#
#   contrib/root-tests.sh [--suite S] [--quick] [WORKDIR]
#
# A fresh copy of this tree (its tracked and untracked, not ignored files)
# goes to WORKDIR/src (default WORKDIR: build-S in the tree; emptied
# first), which is bind-mounted into the root at /ucx-memhooks and built
# there from scratch.  --quick passes --quick on (no ASan+UBSan, no
# valgrind).  Exit status: run-tests.sh's; 77 with one line when the root
# cannot be had (debian-root.sh: not root, packages cannot be fetched).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=trixie
quick=()
while [ $# -gt 0 ]; do
    case $1 in
    --suite) suite=$2; shift 2 ;;
    --quick) quick=(--quick); shift ;;
    -*) echo "root-tests: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
work=${1:-$top/build-$suite}

# the root first: a skip costs no copy
rc=0
"$top/contrib/debian-root.sh" --suite "$suite" --setup >/dev/null || rc=$?
[ $rc -eq 0 ] || exit $rc

rm -rf --one-file-system "$work"
mkdir -p "$work/src"
(cd "$top" && git ls-files -z -co --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$work/src"
# what the release is, then the stages (run-tests.sh prints each one's time)
# shellcheck disable=SC2016 # expanded inside the root
exec "$top/contrib/debian-root.sh" --suite "$suite" --bind "$work:/ucx-memhooks" \
    bash -c 'cd /ucx-memhooks/src &&
        echo "--- $(. /etc/os-release && echo "$PRETTY_NAME"): $(gcc --version | head -1), glibc $(getconf GNU_LIBC_VERSION | cut -d" " -f2), UCX $(dpkg-query -W -f "\${Version}" libucx0), Open MPI $(dpkg-query -W -f "\${Version}" openmpi-bin)" &&
        exec contrib/run-tests.sh --host-only "$@"' root-tests "${quick[@]}"
