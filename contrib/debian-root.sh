#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A Debian userland of another release (default: Debian 13, trixie) for the
# test command on a Debian 12 host, made once and cached, and commands run
# inside it.
#
#   contrib/debian-root.sh [--suite S] --setup
#       make the root unless the cached one is current; print its path
#   contrib/debian-root.sh [--suite S] [--bind HOSTDIR:DIR]... [--env N=V]...
#                          [--] CMD ARG..
#       run CMD inside it (as root, cwd /), making it first when needed
#
# The root is made with debootstrap (--variant=minbase) from the Debian
# archive that the host's apt sources name (contrib/debian-archive.sh),
# then the packages of contrib/deps.sh --list S are installed inside with
# the root's own apt.  It lives in $DEBIAN_ROOT_CACHE/S; the file
# S/.ucx-memhooks-stamp holds the suite and the package list and is written
# last: a root without it, or with another list, is made again (beside it,
# then swapped in).  Concurrent runs are safe: making takes the lock
# $DEBIAN_ROOT_CACHE/S.lock exclusively, each run holds it shared, so a
# root is never replaced under a running command.
#
# CMD runs in a private mount namespace (unshare -m) chrooted into the root,
# with the host's /proc, /dev and /sys bind-mounted, /tmp a directory of
# its own (under the run's --bind directories when one is named TMP:/tmp,
# else a fresh one removed at the end), and every --bind: those mounts exist
# only in that namespace and vanish with it, whatever way CMD ends; the
# cached root keeps no mount.  The environment is PATH, HOME=/root,
# LANG=C.UTF-8, TERM and the --env pairs only.
#
# Environment: DEBIAN_ROOT_CACHE [/var/cache/ucx-memhooks/roots]
#              DEBIAN_ROOT_MIRROR [the host's archive]
#
# Exit status: CMD's; 77 (with one line saying why) when the root cannot be
# made because a prerequisite is missing (not root, no debootstrap or
# unshare, no archive in the apt sources) or its packages cannot be
# fetched; 1 when making it failed otherwise.  The forky suite has no
# debootstrap script on bookworm: sid's is used.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=contrib/debian-archive.sh
. "$top/contrib/debian-archive.sh"

SUITE=trixie
CACHE=${DEBIAN_ROOT_CACHE:-/var/cache/ucx-memhooks/roots}
setup_only=0
binds=()
envs=()
while [ $# -gt 0 ]; do
    case $1 in
    --suite) SUITE=$2; shift 2 ;;
    --setup) setup_only=1; shift ;;
    --bind) binds+=("$2"); shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --) shift; break ;;
    -*) echo "debian-root: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $setup_only = 1 ] || [ $# -gt 0 ] || { echo "usage: $0 [--suite S] --setup | [--bind H:D].. [--env N=V].. -- CMD.." >&2; exit 2; }

ROOT=$CACHE/$SUITE
STAMP=$ROOT/.ucx-memhooks-stamp
log() { echo "debian-root: $*" >&2; }
skip() { echo "debian-root: skipped: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "making and entering a $SUITE root needs root"
for t in debootstrap unshare chroot flock; do
    command -v $t >/dev/null || skip "$t not installed (debootstrap, util-linux)"
done
pkgs=$("$top/contrib/deps.sh" --list "$SUITE") || exit 1
stamp_want=$(printf 'suite %s\n' "$SUITE"; sort <<<"$pkgs")

# mounts_below DIR: exit 0 when some mount point of this namespace lies at
# or below DIR (a root in use by hand; never removed then).
mounts_below() {
    awk -v d="$1" '$5 == d || index($5, d "/") == 1 {f = 1} END {exit !f}' /proc/self/mountinfo
}

# remove_root DIR: rm -r, refusing a tree that has a mount below it.
remove_root() {
    if mounts_below "$1"; then
        log "not removing $1: something is mounted below it"
        return 1
    fi
    rm -rf --one-file-system "$1"
}

# in_ns ROOT CMD..: CMD chrooted into ROOT in a private mount namespace with
# /proc, /dev, /sys, /tmp (TMPDIR_HOST) and the --bind directories mounted.
in_ns() {
    local r=$1; shift
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare -m --propagation private -- bash -c '
        set -e
        r=$1 tmp=$2; shift 2
        mount --rbind /proc "$r/proc"
        mount --rbind /dev "$r/dev"
        mount --rbind /sys "$r/sys"
        mount --bind "$tmp" "$r/tmp"
        while [ "$1" != -- ]; do
            mkdir -p "$r${1#*:}" && mount --bind "${1%%:*}" "$r${1#*:}"
            shift
        done
        shift
        exec chroot "$r" "$@"' in_ns "$r" "$TMP_HOST" "${binds[@]}" -- \
        env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" "${envs[@]}" "$@"
}

# make_root: debootstrap into a new directory beside the root, the packages
# inside it, the stamp; then swap it in.  Called with the lock held.
make_root() {
    local uri new script=() t0=$SECONDS d
    for d in "$CACHE/$SUITE".new.* "$CACHE/$SUITE".old.*; do # of a killed maker
        case $d in *.log) rm -f "$d" ;; *) [ ! -d "$d" ] || remove_root "$d" || true ;; esac
    done
    uri=${DEBIAN_ROOT_MIRROR:-$(debian_archive_uri)} ||
        skip "no Debian archive in the host's apt sources (/etc/apt/sources.list{,.d/*})"
    [ -e "/usr/share/debootstrap/scripts/$SUITE" ] ||
        script=(/usr/share/debootstrap/scripts/sid)
    new=$(mktemp -d "$CACHE/$SUITE.new.XXXXXX")
    log "making a Debian $SUITE root from $uri in $new (debootstrap, then $(wc -l <<<"$pkgs") packages)"
    if ! debootstrap --variant=minbase "$SUITE" "$new" "$uri" "${script[@]}" \
        >"$new.log" 2>&1; then
        log "debootstrap failed: $(grep -E 'E:|W:' "$new.log" | tail -1)"
        remove_root "$new" && rm -f "$new.log"
        skip "Debian $SUITE cannot be fetched from $uri (debootstrap failed)"
    fi
    # no daemon starts in the root (rdma-core and openmpi ship services)
    printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
    chmod 755 "$new/usr/sbin/policy-rc.d"
    local apt=(apt-get -q -y -o APT::Sandbox::User=root)
    local list
    mapfile -t list <<<"$pkgs"
    if ! in_ns "$new" "${apt[@]}" install --download-only --no-install-recommends \
        "${list[@]}" >>"$new.log" 2>&1; then
        log "apt-get download failed: $(grep -E '^(E|W):' "$new.log" | tail -1)"
        remove_root "$new" && rm -f "$new.log"
        skip "Debian $SUITE's packages cannot be fetched from $uri"
    fi
    if ! in_ns "$new" env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install \
        --no-install-recommends "${list[@]}" >>"$new.log" 2>&1 ||
        ! in_ns "$new" apt-get clean >>"$new.log" 2>&1; then
        log "installing the packages in $new failed (log: $new.log): $(grep -E '^(E|W):' "$new.log" | tail -1)"
        return 1
    fi
    echo "$stamp_want" >"$new/.ucx-memhooks-stamp"
    if [ -e "$ROOT" ]; then
        local old
        old=$(mktemp -d "$CACHE/$SUITE.old.XXXXXX")
        mv "$ROOT" "$old/root"
        remove_root "$old" || log "the old root stays in $old"
    fi
    mv "$new" "$ROOT"
    rm -f "$new.log"
    log "made $ROOT in $((SECONDS - t0)) s"
}

mkdir -p "$CACHE"
TMP_HOST=$(mktemp -d "$CACHE/$SUITE.tmp.XXXXXX")
chmod 1777 "$TMP_HOST"
trap 'rm -rf --one-file-system "$TMP_HOST"' EXIT
exec 9>"$CACHE/$SUITE.lock"
flock -s 9
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$stamp_want" ]; then
    flock -u 9
    flock -x 9                  # one maker; runs of the old root have left
    if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$stamp_want" ]; then
        make_root
    fi
    flock -s 9
fi
if [ $setup_only = 1 ]; then
    echo "$ROOT"
    exit 0
fi
rc=0
in_ns "$ROOT" "$@" || rc=$?
exit $rc
