#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# `make install` to /usr/local beside Debian's UCX and Open MPI, in a
# throwaway root: is the system's UCX still whole, and does it run?
#
#   contrib/install-check.sh [BUILD_DIR]        (default: build)
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
# Exit status: 0 all passed, 1 a check failed, 77 a prerequisite is missing
# (not root, no unshare, Debian's UCX tools not installed): it says which.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
me=install-check

if [ "${1:-}" = --inside ]; then
    inside=1
    work=$2
    build=$3
else
    inside=0
    build=$(cd "${1:-$top/build}" && pwd)
fi

skip() {
    echo "$me: skipped: $*"
    exit 77
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
    echo "$me: $((SECONDS - t0)) s"
    exit $rc
fi

# --- inside the namespace --------------------------------------------------
failed=0
ok() { echo "  ok: $*"; }
bad() {
    echo "  FAILED: $*"
    failed=1
}

# Overlays: their upper layers on a tmpfs of their own (an overlay cannot
# have its upper layer on another overlay, as /tmp may be in a container).
mkdir -p "$work/t"
mount -t tmpfs tmpfs "$work/t"
for d in usr-local etc; do mkdir -p "$work/t/$d/up" "$work/t/$d/wk"; done
mount -t overlay overlay \
    -o "lowerdir=/usr/local,upperdir=$work/t/usr-local/up,workdir=$work/t/usr-local/wk" /usr/local
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$work/t/etc/up,workdir=$work/t/etc/wk" /etc
up=$work/t/usr-local/up # what the install writes, and nothing else

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
    p=$(ldconfig -p | awk -v l=$l '$1 == l {print $NF; exit}')
    if [ "$p" = /usr/local/lib/$l ]; then ok "loader cache: $l -> $p"; else bad "loader cache: $l -> ${p:-nothing}"; fi
done
deps=$(ldd "$(command -v ucx_info)")
ucs=$(awk '$1 == "libucs.so.0" {print $3}' <<<"$deps")
ucm=$(awk '$1 == "libucm.so.0" {print $3}' <<<"$deps")
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
        sed -n 's/^# [0-9]* "\([^"]*rcache\.h\)".*/\1/p' | head -1)
    case "$hdr" in
    /usr/include/*) ok "cc finds Debian's <ucs/memory/rcache.h> ($hdr)" ;;
    *) bad "cc finds <ucs/memory/rcache.h> at ${hdr:-nowhere}" ;;
    esac
fi

echo "--- 3. Debian's UCX tools on our libucm"
if out=$(ucx_info -v 2>&1); then
    ok "ucx_info -v: $(grep -m1 -i version <<<"$out")"
else
    bad "ucx_info -v: $out"
fi
port=$((20000 + $$ % 20000))
UCX_TLS=posix,self timeout 60 ucx_perftest -p $port >"$work/pf-server.log" 2>&1 &
server=$!
sleep 1
if UCX_TLS=posix,self UCM_STATS=y timeout 60 ucx_perftest 127.0.0.1 -p $port \
    -t tag_bw -s 1048576 -n 200 >"$work/pf-client.log" 2>&1 &&
    wait $server; then
    if grep -q "UCM STATS .*handler #[0-9]* libucs\.so\.0" "$work/pf-client.log"; then
        ok "ucx_perftest tag_bw 1 MiB: $(grep -m1 '^Final' "$work/pf-client.log" | awk '{print $(NF-2), "MB/s"}'); libucs's handlers in our libucm"
    else
        bad "ucx_perftest ran, but our libucm reported no libucs handler (UCM_STATS)"
        tail -n 5 "$work/pf-client.log"
    fi
else
    bad "ucx_perftest tag_bw (UCX_TLS=posix,self) failed"
    tail -n 5 "$work/pf-client.log" "$work/pf-server.log"
    kill $server 2>/dev/null || true
fi

echo "--- 4. Open MPI on our libucm"
mpi_prog=$build/test/mpi/mpi_vm_reuse
if ! command -v mpirun >/dev/null; then
    echo "  skipped: mpirun not installed (contrib/deps.sh: openmpi-bin)"
elif [ ! -x "$mpi_prog" ]; then
    echo "  skipped: $mpi_prog not built (configure found no mpicc)"
elif timeout 120 mpirun --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_devices any \
    --mca pml_ucx_tls any -x UCX_TLS=posix,self -x UCM_STATS=y \
    "$mpi_prog" -s 1048576 -g 2 -v munmap,free,shmdt,brk >"$work/mpi.log" 2>&1 &&
    grep -q "all variants OK" "$work/mpi.log"; then
    n=$(grep -c "UCM STATS .*installed: handler" "$work/mpi.log" || true)
    if [ "$n" -gt 0 ]; then
        ok "mpirun -np 2 mpi_vm_reuse (munmap, free, shmdt, brk): all variants OK; $n handlers in our libucm"
    else
        bad "mpi_vm_reuse passed, but not on our libucm (no UCM_STATS lines)"
    fi
else
    bad "mpirun -np 2 mpi_vm_reuse failed"
    tail -n 10 "$work/mpi.log"
fi

echo "--- 5. our tools and headers"
if out=$(/usr/local/bin/ucm_info -v 2>&1); then
    ok "ucm_info -v: $(head -1 <<<"$out")"
else
    bad "ucm_info -v: $out"
fi
if /usr/local/bin/ucm_info -e >"$work/ucm_info.log" 2>&1; then
    ok "ucm_info -e: every event arrived"
else
    bad "ucm_info -e failed"
    tail -n 5 "$work/ucm_info.log"
fi
if out=$(/usr/local/bin/ucm-run --print 2>&1) && [ "$out" = /usr/local/lib/libucm.so.0 ]; then
    ok "ucm-run --print: $out"
else
    bad "ucm-run --print: $out"
fi
missing=""
for m in man1/ucm_info.1 man1/ucm-run.1 man1/ucm_bench_hooks.1 man1/ucm_bench_uffd.1 \
    man1/ucs_bench_rcache.1 man7/ucm-env.7; do
    [ -f "/usr/local/share/man/$m" ] || missing="$missing $m"
done
if [ -z "$missing" ]; then
    ok "man pages installed: $(cd /usr/local/share/man && echo man1/*.1 man7/*.7)"
else
    bad "man pages missing in /usr/local/share/man:$missing"
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
        ldd "$work/app" | grep -q "libucs_mh.so.0 => /usr/local/lib/libucs_mh.so.0"; then
        ok "cc app.c \$(pkg-config --cflags --libs ucs): $(pkg-config --cflags --libs ucs | tr -s ' ')"
    else
        bad "a program with <ucs/memory/rcache.h> and pkg-config ucs did not build or run"
        cat "$work/app.log"
    fi
fi
exit $failed
