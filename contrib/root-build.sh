#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build this tree inside another Debian userland (a debootstrap root, e.g.
# the Debian 13 one that contrib/run-vm-tests.sh boots with "# vm-root:
# debian13"), with that userland's compiler, libc, UCX and MPI headers.
#
#   contrib/root-build.sh ROOT BUILD_DIR [configure args...]
#
# The source tree (and BUILD_DIR, when it lies outside it) is bind-mounted
# at its own path inside ROOT, so that the build's paths are the same on
# the host, in the chroot and in a VM booted on ROOT; then
# contrib/build.sh BUILD_DIR runs chrooted (configure once, make; an up-to-date
# tree costs a few seconds).  The mounts (and /proc, /sys, /dev when ROOT
# lacks them) live in a private mount namespace and vanish with it; ROOT
# only gains the empty directories of the mount points.  Needs root.
# Exit status: the build's; 2 on bad usage or a ROOT that is not one.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd -P)
[ $# -ge 2 ] || { echo "usage: $0 ROOT BUILD_DIR [configure args...]" >&2; exit 2; }
root=$(cd "$1" && pwd -P)
shift
mkdir -p "$1"
build=$(cd "$1" && pwd -P)
shift
[ -x "$root/bin/bash" ] || { echo "root-build: $root has no /bin/bash" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "root-build: needs root (mount, chroot)" >&2; exit 2; }
# configure and the Makefile.in files are made on the host: the root's
# automake may be another version, which make would then look for in there
if [ ! -x "$top/configure" ] ||
   [ -n "$(cd "$top" && find . -path ./build\* -prune -o \( -name Makefile.am -o -name '*.am' \
            -o -name configure.ac \) -newer configure -print | head -n 1)" ]; then
    (cd "$top" && ./autogen.sh >/dev/null)
fi

# in the private namespace: mounts, then the build, chrooted
if [ "${ROOT_BUILD_NS:-0}" != 1 ]; then
    exec unshare --mount --propagation private -- env ROOT_BUILD_NS=1 bash "$0" "$root" "$build" "$@"
fi
bind() {
    mkdir -p "$root$1"
    mount --bind "$1" "$root$1"
}
bind "$top"
case $build/ in "$top"/*) ;; *) bind "$build" ;; esac
for d in proc sys dev; do
    mountpoint -q "$root/$d" && continue
    case $d in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sysfs "$root/sys" ;;
    dev) mount --rbind /dev "$root/dev" ;;
    esac
done
exec chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    HOME=/root LANG=C.UTF-8 /bin/bash "$top/contrib/build.sh" "$build" "$@"
