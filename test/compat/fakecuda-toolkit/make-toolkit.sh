#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the TEST-ONLY fake CUDA toolkit (NOT CUDA) into a directory that
# UCX's configure accepts as --with-cuda=DIR:
#
#   make-toolkit.sh OUTDIR
#
#   OUTDIR/include  -> this folder's include/ (stand-in headers)
#   OUTDIR/lib/libucmt_fakecuda_toolkit.so, and libcuda.so, libcudart.so,
#                   libnvidia-ml.so as links to it
#
# The library is test/ucs/memtype/fakecuda.c + fakecuda_ptsz.c (the fake
# the project's own memtype tests use) and fakecuda_toolkit.c, with the
# driver entry points of fakecuda_entry_x86_64.S in front of fakecuda.c's
# C bodies (renamed with objcopy).  x86_64 only.  CC and CFLAGS from the
# environment.  Exit status 0, or 1 with a message.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memtype=$(cd "$here/../../ucs/memtype" && pwd)
out=${1:?usage: make-toolkit.sh OUTDIR}
cc=${CC:-gcc}
read -r -a cflags <<<"${CFLAGS:--O2 -g}"

if [ "$(uname -m)" != x86_64 ]; then
    echo "make-toolkit.sh: the entry points are x86_64 assembler" >&2
    exit 1
fi

mkdir -p "$out/lib" "$out/obj"
ln -sfn "$here/include" "$out/include"
obj=$out/obj
common=("${cflags[@]}" -fPIC -Wall -Wextra -Werror -Wno-unused-parameter
    -I"$here/include" -I"$memtype")

# fakecuda.c's driver entry points become the C bodies behind the
# assembler ones
$cc "${common[@]}" -c "$memtype/fakecuda.c" -o "$obj/fakecuda_c.o"
redefine=()
for name in cuMemAlloc_v2 cuMemAllocManaged cuMemAllocPitch_v2 cuMemFree_v2; do
    redefine+=(--redefine-sym "$name=ucmt_fakecuda_c_$name")
done
objcopy "${redefine[@]}" "$obj/fakecuda_c.o" "$obj/fakecuda.o"
$cc "${common[@]}" -c "$memtype/fakecuda_ptsz.c" -o "$obj/fakecuda_ptsz.o"
$cc "${common[@]}" -c "$here/fakecuda_toolkit.c" -o "$obj/fakecuda_toolkit.o"
$cc -c "$here/fakecuda_entry_x86_64.S" -o "$obj/fakecuda_entry.o"

lib=libucmt_fakecuda_toolkit.so
$cc -shared -o "$out/lib/$lib" -Wl,-soname,$lib -Wl,-z,noexecstack \
    "$obj/fakecuda.o" "$obj/fakecuda_ptsz.o" "$obj/fakecuda_toolkit.o" \
    "$obj/fakecuda_entry.o" -lpthread
for name in libcuda.so libcudart.so libnvidia-ml.so; do
    ln -sfn $lib "$out/lib/$name"
done

# every name UCX hooks or configure checks is there, with the prologue
missing=
for sym in cuMemAlloc_v2 cuMemAllocManaged cuMemAllocPitch_v2 cuMemFree_v2 \
           cuMemFreeHost cuMemGetAddressRange_v2 cuDeviceGetUuid cudaMalloc \
           cudaMallocManaged cudaMallocPitch cudaFree cudaFreeHost \
           cudaGetDeviceCount nvmlInit; do
    nm -D --defined-only "$out/lib/$lib" | awk '{print $3}' | grep -qx "$sym" ||
        missing="$missing $sym"
done
if [ -n "$missing" ]; then
    echo "make-toolkit.sh: $lib lacks:$missing" >&2
    exit 1
fi
echo "fake CUDA toolkit (test-only, not CUDA) in $out"
