# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash disable=SC2034 # UCX_SOURCE_ERROR: read by the caller
# UCX's source for the scripts that build parts of stock UCX
# (contrib/ucx-testsuite.sh, contrib/ucx-cuda-module.sh): 1.13.1 as Debian
# ships it (source package ucx=1.13.1-1), or a release tree given as a
# directory or as its tar archive (upstream 1.18.1, 1.22.0: Debian's archive
# serves no source for them).  Sourced, not run:
#
#   . "$(dirname "$0")/ucx-source.sh"
#
# Defines UCX_VERSION (1.13.1) and UCX_DEB_VERSION (1.13.1-1), read-only,
# and:
#
#   ucx_source_fetch DEST APTDIR
#       Debian's ucx source with Debian's patches applied, unpacked into
#       DEST (removed first).  APTDIR is a private apt directory: deb-src
#       copies of the system's "deb" entries (deb822 .sources and one-line
#       .list files, limited to the archives that carry libucx0
#       $UCX_DEB_VERSION when apt-cache madison knows them), its own package
#       lists and cache, and the downloaded files in APTDIR/dl.  The
#       system's apt state is not touched.  APTDIR is kept: a later call
#       with the same APTDIR downloads nothing.  Unpacks with dpkg-source -x,
#       or with tar and patch (debian/patches/series) without dpkg-source.
#       Returns 0; 77 a prerequisite is missing or the download failed (no
#       apt-get, neither dpkg-source nor patch, no "deb" entry to derive
#       deb-src lines from, apt-get source failed); 3 the unpack failed.
#       UCX_SOURCE_ERROR holds one line saying why (empty on success); the
#       caller decides whether that skips or fails.  Progress lines
#       ("--- ...") go to stdout, the tail of apt's logs after a failed
#       download to stderr.  Does not depend on the caller's set -e.
#
#   ucx_source_version DIR
#       Prints the release of the UCX tree DIR (MAJOR.MINOR.PATCH, read from
#       DIR/configure.ac); returns non-zero with nothing printed when DIR is
#       not one.
#
#   ucx_source_check DIR [RELEASE]
#       Returns 0 when DIR/configure.ac is UCX RELEASE's (default
#       $UCX_VERSION), 1 otherwise.
#
#   ucx_source_fix_debian_dir DIR
#       Copies to DIR/debian/ the files configure.ac names that Debian's
#       packaging moved to debian.upstream/ (Debian's own patch drops those
#       references; an upstream autogen.sh still wants them).
#
# Helpers: contrib/ucx-source/deb822-src.awk, contrib/ucx-source/list-src.awk.

if [ -z "${UCX_SOURCE_SH_DIR:-}" ]; then
    UCX_SOURCE_SH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    readonly UCX_SOURCE_SH_DIR
    readonly UCX_VERSION=1.13.1
    readonly UCX_DEB_VERSION=1.13.1-1
fi
UCX_SOURCE_ERROR=""

# ucx_source_write_entries APTDIR: APTDIR/sources.list and
# APTDIR/sources.list.d/ucx-src.sources; fails when both are empty.
ucx_source_write_entries() {
    local out=$1 sl sp uris f helpers=$UCX_SOURCE_SH_DIR/ucx-source
    eval "$(apt-config shell sl Dir::Etc::sourcelist/f sp Dir::Etc::sourceparts/d)"
    uris=$(apt-cache madison libucx0 2>/dev/null |
        awk -F'|' -v v="$UCX_DEB_VERSION" '
            { gsub(/ /, "", $2); split($3, a, " ") }
            $2 == v { sub(/\/+$/, "", a[1]); print a[1] }' | sort -u | tr '\n' ' ')
    : >"$out/sources.list" || return 1
    : >"$out/sources.list.d/ucx-src.sources" || return 1
    for f in "$sp"/*.sources; do
        [ -f "$f" ] || continue
        awk -v uris="$uris" -f "$helpers/deb822-src.awk" "$f" \
            >>"$out/sources.list.d/ucx-src.sources" || return 1
    done
    for f in "$sl" "$sp"/*.list; do
        [ -f "$f" ] || continue
        awk -v uris="$uris" -f "$helpers/list-src.awk" "$f" \
            >>"$out/sources.list" || return 1
    done
    [ -s "$out/sources.list" ] || [ -s "$out/sources.list.d/ucx-src.sources" ]
}

# ucx_source_download APTDIR: APTDIR/dl/ucx_$UCX_DEB_VERSION.dsc and the
# files it names.  Status and UCX_SOURCE_ERROR as ucx_source_fetch.
ucx_source_download() {
    local aptdir=$1 opts
    rm -rf "$aptdir"
    mkdir -p "$aptdir/sources.list.d" "$aptdir/lists/partial" \
        "$aptdir/cache/archives/partial" "$aptdir/dl" || {
        UCX_SOURCE_ERROR="cannot create the apt directory $aptdir"
        return 3
    }
    ucx_source_write_entries "$aptdir" || {
        UCX_SOURCE_ERROR="no 'deb' entry in the apt configuration to derive deb-src lines from"
        return 77
    }
    opts=(-q -o "Dir::Etc::SourceList=$aptdir/sources.list"
        -o "Dir::Etc::SourceParts=$aptdir/sources.list.d"
        -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache")
    echo "--- apt-get update (deb-src, private lists in $aptdir)"
    # A source that cannot be reached only warns; apt-get source says
    # whether what is needed arrived.
    apt-get "${opts[@]}" update >"$aptdir/update.log" 2>&1 ||
        echo "apt-get update: exit $? (see $aptdir/update.log)"
    echo "--- apt-get source --download-only ucx=$UCX_DEB_VERSION"
    (cd "$aptdir/dl" && apt-get "${opts[@]}" source --download-only \
        "ucx=$UCX_DEB_VERSION") >"$aptdir/source.log" 2>&1 || {
        tail -n 5 "$aptdir/update.log" "$aptdir/source.log" >&2
        UCX_SOURCE_ERROR="apt-get source ucx=$UCX_DEB_VERSION failed (no network? see $aptdir/source.log)"
        return 77
    }
    [ -f "$aptdir/dl/ucx_$UCX_DEB_VERSION.dsc" ] || {
        UCX_SOURCE_ERROR="apt-get source left no ucx_$UCX_DEB_VERSION.dsc in $aptdir/dl"
        return 77
    }
}

# ucx_source_unpack_tar DSCDIR DEST TMP: what dpkg-source -x does, with tar
# and patch.
ucx_source_unpack_tar() {
    local dl=$1 dest=$2 tmp=$3 p
    if ! { rm -rf "$tmp" && mkdir -p "$tmp" &&
        tar -xf "$dl/ucx_$UCX_VERSION.orig.tar.xz" -C "$tmp" &&
        mv "$tmp/ucx-$UCX_VERSION" "$dest" &&
        rm -rf "$dest/debian" &&
        tar -xf "$dl/ucx_$UCX_DEB_VERSION.debian.tar.xz" -C "$dest" &&
        rmdir "$tmp"; }; then
        UCX_SOURCE_ERROR="unpacking ucx_$UCX_VERSION.orig.tar.xz and ucx_$UCX_DEB_VERSION.debian.tar.xz from $dl failed"
        return 3
    fi
    while read -r p; do
        case "$p" in '' | '#'*) continue ;; esac
        patch -d "$dest" -p1 -s --no-backup-if-mismatch \
            <"$dest/debian/patches/$p" || {
            UCX_SOURCE_ERROR="debian patch $p does not apply"
            return 3
        }
    done <"$dest/debian/patches/series"
}

ucx_source_fetch() {
    local dest=$1 aptdir=$2 dsc
    UCX_SOURCE_ERROR=""
    command -v apt-get >/dev/null || {
        UCX_SOURCE_ERROR="no apt-get to fetch Debian's ucx source"
        return 77
    }
    command -v dpkg-source >/dev/null || command -v patch >/dev/null || {
        UCX_SOURCE_ERROR="neither dpkg-source nor patch installed to unpack Debian's ucx source"
        return 77
    }
    dsc=$aptdir/dl/ucx_$UCX_DEB_VERSION.dsc
    if [ ! -f "$dsc" ]; then
        ucx_source_download "$aptdir" || return $?
    fi
    rm -rf "$dest"
    if command -v dpkg-source >/dev/null; then
        dpkg-source -x "$dsc" "$dest" >"$aptdir/unpack.log" 2>&1 || {
            UCX_SOURCE_ERROR="dpkg-source -x $dsc failed (see $aptdir/unpack.log)"
            return 3
        }
    else
        ucx_source_unpack_tar "$aptdir/dl" "$dest" "$aptdir/unpack" || return $?
    fi
}

ucx_source_version() {
    awk '/^define\(\[ucx_ver_(major|minor|patch)\], *[0-9]+\)/ {
             v = $2; sub(/\).*/, "", v); p[++n] = v }
         END { if (n != 3) exit 1; print p[1] "." p[2] "." p[3] }' \
        "$1/configure.ac" 2>/dev/null
}

ucx_source_check() {
    [ "$(ucx_source_version "$1")" = "${2:-$UCX_VERSION}" ]
}

ucx_source_fix_debian_dir() {
    local s=$1 f
    for f in compat copyright ucx.prerm rules.in control.in changelog.in; do
        if [ ! -e "$s/debian/$f" ] && [ -e "$s/debian.upstream/$f" ]; then
            mkdir -p "$s/debian" && cp "$s/debian.upstream/$f" "$s/debian/$f" || return 1
        fi
    done
}

# ucx_source_unpack_release FILE DEST: the one top directory of the tar
# archive FILE (an upstream release, as git archive makes it) as DEST.
ucx_source_unpack_release() {
    local file=$1 dest=$2 tmp=$2.unpack top
    rm -rf "$tmp" && mkdir -p "$tmp" && tar -xf "$file" -C "$tmp" || return 1
    top=$(find "$tmp" -mindepth 1 -maxdepth 1)
    [ -d "$top" ] && [ "$(echo "$top" | wc -l)" -eq 1 ] || return 1
    mv "$top" "$dest" && rmdir "$tmp"
}

# ucx_source_prepare WORKDIR SRC [STALE...]
#     ucx_source_prepare_release with RELEASE $UCX_VERSION.
# ucx_source_prepare_release WORKDIR SRC RELEASE [STALE...]
#     WORKDIR/src ready to configure: kept when WORKDIR/src.origin says it
#     came from the same place (SRC, or Debian's package when SRC is empty),
#     else made again (SRC a directory: copied; SRC a file: a tar archive of
#     one release tree, unpacked; empty: Debian's package fetched, which
#     needs RELEASE $UCX_VERSION; checked to be UCX RELEASE, any release when
#     RELEASE is empty; debian/ mended; autogen.sh, log in
#     WORKDIR/autogen.log), with STALE (the caller's build directories)
#     removed first.  The caller reads the release with ucx_source_version
#     WORKDIR/src.  Returns as ucx_source_fetch; 3 also for a failed copy or
#     unpack, a tree that is not UCX RELEASE, or autogen.sh failing.
ucx_source_prepare() {
    local workdir=$1 src_dir=$2
    shift 2
    ucx_source_prepare_release "$workdir" "$src_dir" "$UCX_VERSION" "$@"
}

ucx_source_prepare_release() {
    local workdir=$1 from=$2 want=$3 src=$1/src origin rc got
    shift 3
    UCX_SOURCE_ERROR=""
    if [ -z "$from" ]; then
        origin=deb:ucx=$UCX_DEB_VERSION
        if [ -n "$want" ] && [ "$want" != "$UCX_VERSION" ]; then
            UCX_SOURCE_ERROR="only UCX $UCX_VERSION comes from Debian's archive; give UCX $want's tree"
            return 77
        fi
    elif [ -d "$from" ]; then
        origin=dir:$(cd "$from" && pwd)
    elif [ -f "$from" ]; then
        origin=tar:$(readlink -f "$from"):$(stat -c %s:%Y "$from")
    else
        UCX_SOURCE_ERROR="no such directory or file: $from"
        return 3
    fi
    if [ "$(cat "$workdir/src.origin" 2>/dev/null)" = "$origin" ] &&
        [ -x "$src/configure" ]; then
        return 0
    fi
    rm -rf "$src" "$workdir/src.origin" "$@"
    case $origin in
    dir:*)
        echo "--- copying $from"
        cp -a "$from" "$src" ||
            { UCX_SOURCE_ERROR="cannot copy $from"; return 3; } ;;
    tar:*)
        echo "--- unpacking $from"
        ucx_source_unpack_release "$from" "$src" ||
            { UCX_SOURCE_ERROR="cannot unpack $from (one top directory expected)"; return 3; } ;;
    *)
        ucx_source_fetch "$src" "$workdir/apt"
        rc=$?
        [ $rc -eq 0 ] || return $rc ;;
    esac
    got=$(ucx_source_version "$src") ||
        { UCX_SOURCE_ERROR="$from is not a UCX tree (no release in configure.ac)"; return 3; }
    [ -z "$want" ] || [ "$got" = "$want" ] ||
        { UCX_SOURCE_ERROR="$from is UCX $got, not $want"; return 3; }
    ucx_source_fix_debian_dir "$src" ||
        { UCX_SOURCE_ERROR="cannot mend $src/debian"; return 3; }
    echo "--- autogen.sh (UCX $got)"
    (cd "$src" && ./autogen.sh) >"$workdir/autogen.log" 2>&1 ||
        { UCX_SOURCE_ERROR="autogen.sh failed (see $workdir/autogen.log)"; return 3; }
    echo "$origin" >"$workdir/src.origin"
}
