# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# The Debian release of this machine and the Debian archive that its apt
# sources name, for the scripts that fetch other releases' packages from it
# (contrib/rxe-vm/rxe-vm.sh: kernels; contrib/debian-root.sh: a userland).
# Sourced, not run:
#
#   . "$(dirname "$0")/debian-archive.sh"
#
#   debian_codename [ROOT]
#       Prints VERSION_CODENAME of ROOT/etc/os-release (default ROOT: /);
#       returns 1 when there is none.
#
#   debian_archive_uri
#       Prints the first URI of the host's apt sources (deb822 *.sources,
#       then one-line sources.list and *.list) that serves the suite named
#       like the host's codename: the release's main archive, not its
#       -security or -updates suites.  Returns 1 when none does.  The apt
#       configuration is only read.

# shellcheck disable=SC2120 # ROOT is optional
debian_codename() {
    local root=${1:-} codename
    [ -r "$root/etc/os-release" ] || return 1
    # shellcheck disable=SC1091
    codename=$(. "$root/etc/os-release" && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] && echo "$codename"
}

debian_archive_uri() {
    local codename uri
    # shellcheck disable=SC2119
    codename=$(debian_codename) || return 1
    uri=$( {
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v c="$codename" '
            /^[ \t]*$/ {u = ""; s = 0; next}
            /^URIs:/ {u = $2} /^Suites:/ {for (i = 2; i <= NF; i++) if ($i == c) s = 1}
            u != "" && s {print u; exit}' || true
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            sed 's/\[[^]]*\]//' | awk -v c="$codename" '$1 == "deb" && $3 == c {print $2}' || true
    } | awk 'NR == 1' )
    [ -n "$uri" ] && echo "$uri"
}
