#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ucm_global_opts as UCX 1.18 and 1.22 components see it, on this libucm
# (docs/internals-ucm-abi.md, "ucm_global_opts").  Builds abi_opts.c for
# each layout (1.13, 1.18, 1.22) and view (0: this libucm's object through
# dlsym, with a fake libucp telling the release; 1: a copy relocation of
# an executable linked against a libucm whose object has that layout's
# size; 2: the executable's own definition between guard bytes) and runs
# each in both hook modes; then an unknown release (fake libucp 1.99.0):
# the five leading ints only, the caller's struct ends after them (a
# PROT_NONE page follows), and exactly one line names the release.
#   test/abi/run-abi.sh [BUILD_DIR]  (default: $UCM_ABI_BUILD_DIR, else
#   build); run by 'make check' in test/gtest.  Exit 77 (skip) in a
#   sanitizer build (these programs are built without the sanitizers).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-${UCM_ABI_BUILD_DIR:-$top/build}}" && pwd)
if [ "${UCM_GTEST_SANITIZERS:-no}" = yes ]; then
    echo "SKIP: sanitizer build (abi_opts is built without the sanitizers)"
    exit 77
fi
lib=$build/src/ucm/.libs
fakeucp=$build/test/gtest/.libs/libucmt_fake_ucp.so
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -e "$lib/libucm.so.0" ] || { echo "no $lib/libucm.so.0: build first"; exit 1; }
[ -e "$fakeucp" ] || make -C "$build/test/gtest" libucmt_fake_ucp.la >/dev/null

flags=(-Wall -Wextra -Werror -O1 -I"$top/src" -I"$build")
size_of() { case $1 in 113) echo 48 ;; 118) echo 64 ;; 122) echo 72 ;; esac; }
release_of() { case $1 in 113) echo 1.13.1 ;; 118) echo 1.18.1 ;; 122) echo 1.22.0 ;; esac; }

for layout in 113 118 122; do
    size=$(size_of "$layout")
    mkdir -p "$tmp/stub$size"
    "$cc" -shared -fPIC -DUCMT_SIZE="$size" -Wl,-soname,libucm.so.0 \
        -o "$tmp/stub$size/libucm.so" "$top/test/abi/abi_stub_libucm.c"
    for view in 0 1 2; do
        if [ "$view" = 1 ]; then linkdir=$tmp/stub$size; else linkdir=$lib; fi
        "$cc" "${flags[@]}" -DUCMT_LAYOUT="$layout" -DUCMT_VIEW="$view" \
            -DUCMT_SIZE="$size" "$top/test/abi/abi_opts.c" \
            -o "$tmp/abi_${layout}_$view" -L"$linkdir" -lucm -ldl \
            -Wl,-rpath,"$lib"
    done
done

fail=0
run() { # name expected-stderr-lines-matching pattern, command...
    local name=$1 pattern=$2 want=$3
    shift 3
    if ! "$@" >"$tmp/out" 2>"$tmp/err"; then
        echo "FAIL $name"; cat "$tmp/out" "$tmp/err"; fail=1; return
    fi
    local got
    got=$(grep -c -e "$pattern" "$tmp/err" || true)
    if [ "$got" != "$want" ]; then
        echo "FAIL $name: $got lines match '$pattern' on stderr, not $want"
        cat "$tmp/err"; fail=1; return
    fi
    echo "ok   $name: $(cat "$tmp/out")"
}

for mode in bistro reloc; do
    export UCX_MEM_MMAP_HOOK_MODE=$mode
    for layout in 113 118 122; do
        # glibc says once that the copy is smaller than our object
        warn=1
        run "$mode $layout dlsym" 'UCM' 0 env \
            UCMT_FAKE_UCP_VERSION="$(release_of $layout)" \
            "$tmp/abi_${layout}_0" "$fakeucp"
        run "$mode $layout copy" 'different size' $warn "$tmp/abi_${layout}_1"
        run "$mode $layout guarded" 'UCM' 0 "$tmp/abi_${layout}_2"
    done
    run "$mode unknown release 1.99.0" 'UCX 1.99.0' 1 env \
        UCMT_EXPECT_COMMON=1 UCMT_FAKE_UCP_VERSION=1.99.0 \
        "$tmp/abi_113_0" "$fakeucp"
done
exit $fail
