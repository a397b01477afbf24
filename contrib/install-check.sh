#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# `make install` to /usr/local beside Debian's UCX and Open MPI, in a
# throwaway root: is the system's UCX still whole, and does it run?
#
#   contrib/install-check.sh [--deb] [BUILD_DIR]        (default: build)
#
# In a private mount namespace (unshare -m, root), /usr/local and /etc are
# overlays whose writes go to a temporary directory; nothing on the machine
# changes.  There: libucs.so.0 of an older install (0.1.0) is planted,
# BUILD_DIR is installed (`make install`; a build configured for another
# prefix is rebuilt for /usr/local in the temporary directory), `ldconfig`
# runs, and
#   1. the older libucs.so.0 is gone; no installed file has the name of a
#      file of Debian's UCX packages but the drop-in libucm.so.0; no header
#      lands in /usr/local/include/{ucm,ucs,uct}
#   2. the loader cache maps libucs.so.0 to Debian's only; Debian's
#      ucx_info loads Debian's libucs and our libucm (ldd); a C file that
#      includes <ucs/memory/rcache.h> still gets Debian's header
#   3. Debian's ucx_info -v, and ucx_perftest tag_bw between two processes
#      (UCX_TLS=posix,self, 1 MiB rendezvous), on our libucm: its
#      UCM_STATS report shows libucs's handler in it
#   4. Open MPI: mpirun -np 2 of test/mpi/mpi_vm_reuse over pml ucx (posix,
#      self): the receiver checks every message's contents after the sender's
#      buffer was unmapped and replaced (munmap, free, shmdt, brk)
#   5. our installed tools (ucm_info -v, ucm_info -e, ucm-run --print), their
#      man pages, and a program built with `pkg-config --cflags --libs ucs`
#      against our headers
# With --deb also the Debian packages (debian/; 3-5 min on 2 cores):
# dpkg-buildpackage -us -uc -b in a copy of the source tree, lintian (no
# error allowed), then in another throwaway root (overlays on /usr, /etc,
# /var) dpkg -i beside Debian's libucx0, libucx-dev, ucx-utils and Open MPI
# (dpkg refuses a file conflict), and: Debian's ucx_info still loads
# Debian's libucm; ucm-run finds ours in /usr/lib/<multiarch>/ucx-memhooks;
# checks 3-5 above through ucm-run and with the packaged tools; dpkg -r
# leaves none of the packages' files.  Without debhelper or lintian
# (contrib/deps.sh) that part is skipped, saying so.
# Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
# (not root, no unshare, Debian's UCX tools not installed): it says which.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
me=install-check

deb=0
if [ "${1:-}" = --inside ] || [ "${1:-}" = --inside-deb ]; then
    inside=1
    [ "$1" = --inside-deb ] && deb=1
    work=$2
    build=$3
else
    inside=0
    if [ "${1:-}" = --deb ]; then
        deb=1
        shift
    fi
    build=$(cd "${1:-$top/build}" && pwd)
fi

skip() {
    echo "$me: skipped: $*"
    exit 77
}

# Build the Debian packages in a copy of the source tree (dpkg-buildpackage
# configures in the tree it runs in), lintian them, and check them in a
# namespace of their own.  $1: the work directory, $2: the build tree (for
# test/mpi).  Returns 1 when something failed.
deb_build_and_check() {
    local w=$1 b=$2 t
    echo "--- Debian packages"
    for t in dpkg-buildpackage dh lintian fakeroot git; do
        if ! command -v $t >/dev/null; then
            echo "  skipped: $t not installed (contrib/deps.sh: debhelper, lintian)"
            return 0
        fi
    done
    mkdir -p "$w/deb/src"
    (cd "$top" && git ls-files -z -c -o --exclude-standard |
        xargs -0 cp -P --parents -t "$w/deb/src" 2>/dev/null) || true
    if ! (cd "$w/deb/src" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$w/deb/build.log" 2>&1); then
        tail -n 20 "$w/deb/build.log"
        echo "  FAILED: dpkg-buildpackage -us -uc -b"
        return 1
    fi
    echo "  ok: dpkg-buildpackage -us -uc -b: $(cd "$w/deb" && echo ./*.deb | sed 's|\./||g')"
    lintian --tag-display-limit 0 "$w"/deb/*.changes >"$w/deb/lintian.log" 2>&1 || true
    if grep -q '^E: ' "$w/deb/lintian.log"; then
        grep '^E: ' "$w/deb/lintian.log"
        echo "  FAILED: lintian reports errors"
        return 1
    fi
    echo "  ok: lintian: no errors ($(grep -c '^W: ' "$w/deb/lintian.log" || true) warnings)"
    unshare -m --propagation private "$0" --inside-deb "$w" "$b"
}

# --- outside: prerequisites, the build, the namespace ----------------------
if [ $inside -eq 0 ]; then
    [ "$(id -u)" -eq 0 ] || skip "needs root (a mount namespace with overlays on /usr/local and /etc)"
    command -v unshare >/dev/null || skip "unshare (util-linux) not installed"
    for t in ucx_info ucx_perftest ldconfig; do
        command -v $t >/dev/null || skip "$t not installed (contrib/deps.sh: ucx-utils)"
    done
    [ -f "$build/Makefile" ] || { echo "$me: $build is not a configured build tree" >&2; exit 1; }
    work=$(mktemp -d "${TMPDIR:-/tmp}/install-check.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    t0=$SECONDS
    if [ "$(sed -n 's/^prefix = //p' "$build/Makefile")" != /usr/local ]; then
        echo "$me: $build is configured for another prefix; building for /usr/local in $work/build"
        mkdir "$work/build"
        (cd "$work/build" && "$top/configure" -q --prefix=/usr/local &&
            make -j"$(nproc)" >/dev/null) || { echo "$me: build failed" >&2; exit 1; }
        build=$work/build
    fi
    rc=0
    unshare -m --propagation private "$0" --inside "$work" "$build" || rc=$?
    echo "$me: make install: $((SECONDS - t0)) s"
    if [ $deb -eq 1 ]; then
        t0=$SECONDS
        deb_build_and_check "$work" "$build" || rc=1
        echo "$me: Debian packages: $((SECONDS - t0)) s"
    fi
    exit $rc
fi

# --- inside the namespace --------------------------------------------------
failed=0
ok() { echo "  ok: $*"; }
bad() {
    echo "  FAILED: $*"
    failed=1
}

# An overlay on $1 whose writes go to a tmpfs of its own (an overlay cannot
# have its upper layer on another overlay, as /tmp may be in a container).
throwaway() {
    local d=$1 n
    n=$(tr / _ <<<"$d")
    mkdir -p "$work/t"
    mountpoint -q "$work/t" || mount -t tmpfs tmpfs "$work/t"
    mkdir -p "$work/t/$n/up" "$work/t/$n/wk"
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$work/t/$n/up,workdir=$work/t/$n/wk" "$d"
    echo "$work/t/$n/up"
}

# Debian's ucx_info, ucx_perftest (two processes) and Open MPI's mpirun
# running on our libucm; $@: the wrapper to start them with (empty: the
# loader finds our libucm by itself).
stock_checks() {
    local out port server n
    if out=$("$@" ucx_info -v 2>&1); then
        ok "${*:+$* }ucx_info -v: $(grep -m1 -i version <<<"$out")"
    else
        bad "${*:+$* }ucx_info -v: $out"
    fi
    port=$((20000 + $$ % 20000))
    UCX_TLS=posix,self timeout 60 "$@" ucx_perftest -p $port >"$work/pf-server.log" 2>&1 &
    server=$!
    sleep 1
    if UCX_TLS=posix,self UCM_STATS=y timeout 60 "$@" ucx_perftest 127.0.0.1 -p $port \
        -t tag_bw -s 1048576 -n 200 >"$work/pf-client.log" 2>&1 &&
        wait $server; then
        if grep -q "UCM STATS .*handler #[0-9]* libucs\.so\.0" "$work/pf-client.log"; then
            ok "${*:+$* }ucx_perftest tag_bw 1 MiB: $(grep -m1 '^Final' "$work/pf-client.log" | awk '{print $(NF-2), "MB/s"}'); libucs's handlers in our libucm"
        else
            bad "ucx_perftest ran, but our libucm reported no libucs handler (UCM_STATS)"
            tail -n 5 "$work/pf-client.log"
        fi
    else
        bad "ucx_perftest tag_bw (UCX_TLS=posix,self) failed"
        tail -n 5 "$work/pf-client.log" "$work/pf-server.log"
        kill $server 2>/dev/null || true
    fi

    mpi_prog=$build/test/mpi/mpi_vm_reuse
    if ! command -v mpirun >/dev/null; then
        echo "  skipped: mpirun not installed (contrib/deps.sh: openmpi-bin)"
    elif [ ! -x "$mpi_prog" ]; then
        echo "  skipped: $mpi_prog not built (configure found no mpicc)"
    elif timeout 120 mpirun --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_devices any \
        --mca pml_ucx_tls any -x UCX_TLS=posix,self -x UCM_STATS=y \
        "$@" "$mpi_prog" -s 1048576 -g 2 -v munmap,free,shmdt,brk >"$work/mpi.log" 2>&1 &&
        grep -q "all variants OK" "$work/mpi.log"; then
        n=$(grep -c "UCM STATS .*installed: handler" "$work/mpi.log" || true)
        if [ "$n" -gt 0 ]; then
            ok "mpirun -np 2 ${*:+$* }mpi_vm_reuse (munmap, free, shmdt, brk): all variants OK; $n handlers in our libucm"
        else
            bad "mpi_vm_reuse passed, but not on our libucm (no UCM_STATS lines)"
        fi
    else
        bad "mpirun -np 2 ${*:+$* }mpi_vm_reuse failed"
        tail -n 10 "$work/mpi.log"
    fi
}

# The file ldd output $2 resolved library $1 to, links resolved.
ldd_path() {
    local p
    p=$(awk -v l="$1" '$1 == l {print $3}' "$2")
    [ -n "$p" ] && readlink -f "$p"
}

# Our installed tools, man pages and pkg-config files.  $1: bin directory,
# $2: the directory of our libucm.so.0, $3: man directory, $4: the
# directory of libucs_mh.so.0.
tools_checks() {
    local bin=$1 ucmdir=$2 man=$3 libdir=$4 out m missing=""
    if out=$("$bin/ucm_info" -v 2>&1) && grep -q "libucm: $ucmdir/libucm.so.0" <<<"$out"; then
        ok "ucm_info -v: $(head -1 <<<"$out"); libucm: $ucmdir/libucm.so.0"
    else
        bad "ucm_info -v: $out"
    fi
    if "$bin/ucm_info" -e >"$work/ucm_info.log" 2>&1; then
        ok "ucm_info -e: every event arrived"
    else
        bad "ucm_info -e failed"
        tail -n 5 "$work/ucm_info.log"
    fi
    if out=$("$bin/ucm-run" --print 2>&1) && [ "$out" = "$ucmdir/libucm.so.0" ]; then
        ok "ucm-run --print: $out"
    else
        bad "ucm-run --print: $out"
    fi
    for m in man1/ucm_info.1 man1/ucm-run.1 man1/ucm_bench_hooks.1 man1/ucm_bench_uffd.1 \
        man1/ucs_bench_rcache.1 man7/ucm-env.7; do
        [ -f "$man/$m" ] || [ -f "$man/$m.gz" ] || missing="$missing $m"
    done
    if [ -z "$missing" ]; then
        ok "man pages installed: $(cd "$man" && echo man1/ucm* man1/uc[st]* man7/ucm*)"
    else
        bad "man pages missing in $man:$missing"
    fi
    if command -v cc >/dev/null && command -v pkg-config >/dev/null; then
        cat >"$work/app.c" <<'EOF'
#include <ucs/memory/rcache.h>
#include <ucm/api/ucm.h>
#include <stdio.h>
int main(void)
{
    printf("%s %p\n", ucs_status_string(UCS_ERR_NO_MEMORY), (void *)&ucs_rcache_create);
    return 0;
}
EOF
        # shellcheck disable=SC2046
        if cc -o "$work/app" "$work/app.c" $(pkg-config --cflags --libs ucs) 2>"$work/app.log" &&
            "$work/app" >>"$work/app.log" 2>&1 &&
            ldd "$work/app" >"$work/app.ldd" &&
            [ "$(ldd_path libucs_mh.so.0 "$work/app.ldd")" = "$(readlink -f "$libdir/libucs_mh.so.0")" ] &&
            [ "$(ldd_path libucm.so.0 "$work/app.ldd")" = "$(readlink -f "$ucmdir/libucm.so.0")" ]; then
            ok "cc app.c \$(pkg-config --cflags --libs ucs): $(pkg-config --cflags --libs ucs | tr -s ' ')"
        else
            bad "a program with <ucs/memory/rcache.h> and pkg-config ucs did not build, run or load ours"
            cat "$work/app.log" "$work/app.ldd" 2>/dev/null
        fi
    fi
}

# Where the loader finds libucs.so.0 and libucm.so.0 for Debian's ucx_info.
ucx_info_libs() {
    local deps
    deps=$(ldd "$(command -v ucx_info)")
    ucs=$(awk '$1 == "libucs.so.0" {print $3}' <<<"$deps")
    ucm=$(awk '$1 == "libucm.so.0" {print $3}' <<<"$deps")
}

if [ $deb -eq 1 ]; then
    # dpkg writes to /usr, /etc and /var (its database).
    for d in /usr /etc /var; do throwaway $d >/dev/null; done
    multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
    privdir=/usr/lib/$multiarch/ucx-memhooks
    debs=$(printf '%s\n' "$work"/deb/*.deb | grep -v dbgsym)
    # shellcheck disable=SC2086
    if dpkg -i $debs >"$work/deb/dpkg.log" 2>&1; then
        ok "dpkg -i $(xargs -n1 basename <<<"$debs" | tr '\n' ' ')beside $(dpkg-query -W -f '${Package} ' libucx0 libucx-dev ucx-utils libopenmpi3 libopenmpi40 2>/dev/null)"
    else
        tail -n 20 "$work/deb/dpkg.log"
        echo "  FAILED: dpkg -i"
        exit 1
    fi
    ucx_info_libs
    case "$ucm" in
    "$privdir"/* | "") bad "ucx_info without ucm-run: libucm.so.0 => ${ucm:-not found}" ;;
    *) ok "ucx_info without ucm-run: libucm.so.0 => $ucm (Debian's: nothing changes by itself)" ;;
    esac
    stock_checks /usr/bin/ucm-run
    tools_checks /usr/bin "$privdir" /usr/share/man "/usr/lib/$multiarch"
    files=$(dpkg -L libucx-memhooks0 libucx-memhooks-dev ucx-memhooks-tools | sort -u)
    dpkg -r ucx-memhooks-tools libucx-memhooks-dev libucx-memhooks0 >>"$work/deb/dpkg.log" 2>&1 ||
        bad "dpkg -r failed"
    left=$(while IFS= read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "$f"; done <<<"$files" | grep -v '^/usr/share/doc' || true)
    if [ -z "$left" ]; then
        ok "dpkg -r: none of the packages' files left"
    else
        bad "dpkg -r left: $left"
    fi
    exit $failed
fi

up=$(throwaway /usr/local) # what the install writes, and nothing else
throwaway /etc >/dev/null
# 0.1.0 installed this project's libucs as libucs.so.0 (with its .la).
planted=0
if [ -f "$build/src/ucs/.libs/libucs_mh.so.0.0.0" ]; then
    mkdir -p /usr/local/lib
    cp "$build/src/ucs/.libs/libucs_mh.so.0.0.0" /usr/local/lib/libucs.so.0.0.0
    ln -sf libucs.so.0.0.0 /usr/local/lib/libucs.so.0
    echo "# libucs.la of ucx-memhooks 0.1.0 (planted by $me)" >/usr/local/lib/libucs.la
    planted=1
fi

echo "--- make install (prefix /usr/local)"
if ! make -C "$build" install >"$work/install.log" 2>&1; then
    tail -n 20 "$work/install.log"
    echo "  FAILED: make install"
    exit 1
fi
ldconfig

echo "--- 1. names"
if [ $planted -eq 0 ]; then
    bad "no libucs_mh.so.0 in $build/src/ucs/.libs"
elif [ -e /usr/local/lib/libucs.so.0 ] || [ -e /usr/local/lib/libucs.la ]; then
    bad "0.1.0's libucs.so.0 is still in /usr/local/lib"
else
    ok "0.1.0's libucs.so.0 and libucs.la removed by make install"
fi
# Names that would collide: a path under /usr/local that Debian has under
# /usr (lib/<multiarch>/ read as lib/), and a library's file name anywhere
# (the loader and the linker look libraries up by name).
keys() {
    sed -e 's|^/usr/||' -e 's|^lib/[a-z0-9_]*-linux-gnu[a-z0-9_]*/|lib/|' |
        awk '{print} {n = split($0, p, "/")} p[n] ~ /^lib.*\.(so|a|la)(\.[0-9.]*)?$/ {print "library " p[n]}'
}
debian_keys=$(dpkg -L libucx0 libucx-dev 2>/dev/null | keys | sort -u || true)
[ -n "$debian_keys" ] || bad "dpkg -L libucx0 libucx-dev listed nothing"
ours=$(cd "$up" && find . \( -type f -o -type l \) | sed 's|^\./|/usr/|')
clash=0
while IFS= read -r k; do
    case "$k" in "library libucm.so"* | lib/libucm.so*) continue ;; esac # the drop-in
    if grep -qxF "$k" <<<"$debian_keys"; then
        bad "installed: $k, a name Debian's UCX has"
        clash=1
    fi
done < <(keys <<<"$ours" | sort -u)
if [ $clash -eq 0 ]; then
    ok "$(wc -l <<<"$ours") files installed; none has a path or library name of Debian's UCX but libucm.so.0"
fi
for d in ucm ucs uct; do
    if [ -e "$up/include/$d" ]; then
        bad "headers installed to /usr/local/include/$d (ahead of Debian's)"
    fi
done
if [ -f "$up/include/ucx-memhooks/ucs/memory/rcache.h" ]; then
    ok "headers in /usr/local/include/ucx-memhooks"
else
    bad "no ucs/memory/rcache.h in /usr/local/include/ucx-memhooks"
fi

echo "--- 2. loader and compiler"
ucs_paths=$(ldconfig -p | awk '$1 == "libucs.so.0" {print $NF}')
if [ -n "$ucs_paths" ] && ! grep -q '^/usr/local' <<<"$ucs_paths"; then
    ok "loader cache: libucs.so.0 -> $(paste -sd " " <<<"$ucs_paths")"
else
    bad "loader cache: libucs.so.0 -> $(paste -sd " " <<<"${ucs_paths:-nothing}")"
fi
for l in libucs_mh.so.0 libucm.so.0; do
    # (awk reads to the end: an early exit would SIGPIPE ldconfig, and
    # pipefail would then end the script without a word)
    p=$(ldconfig -p | awk -v l=$l '$1 == l && p == "" {p = $NF} END {print p}')
    if [ "$p" = /usr/local/lib/$l ]; then ok "loader cache: $l -> $p"; else bad "loader cache: $l -> ${p:-nothing}"; fi
done
ucx_info_libs
case "$ucs" in
/usr/local/* | "") bad "ucx_info: libucs.so.0 => ${ucs:-not found}" ;;
*) ok "ucx_info: libucs.so.0 => $ucs (Debian's)" ;;
esac
if [ "$ucm" = /usr/local/lib/libucm.so.0 ]; then
    ok "ucx_info: libucm.so.0 => $ucm (ours)"
else
    bad "ucx_info: libucm.so.0 => ${ucm:-not found}"
fi
if command -v cc >/dev/null; then
    hdr=$(echo '#include <ucs/memory/rcache.h>' | cc -E -x c - 2>/dev/null |
        sed -n 's/^# [0-9]* "\([^"]*rcache\.h\)".*/\1/p' | awk 'NR == 1')
    case "$hdr" in
    /usr/include/*) ok "cc finds Debian's <ucs/memory/rcache.h> ($hdr)" ;;
    *) bad "cc finds <ucs/memory/rcache.h> at ${hdr:-nowhere}" ;;
    esac
fi

echo "--- 3./4. Debian's UCX tools and Open MPI on our libucm"
stock_checks

echo "--- 5. our tools and headers"
tools_checks /usr/local/bin /usr/local/lib /usr/local/share/man /usr/local/lib
exit $failed
